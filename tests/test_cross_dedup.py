"""cross_dedup is incremental: a new partition is processed against the index, the others are
not re-read; a changed partition rebuilds the index."""

from __future__ import annotations

from pathlib import Path

from dagster import AssetKey, instance_for_test, materialize
from dagster_aws.s3 import S3Resource

from checks.dedup import cross_dedup_kept_members_valid
from corpus_assets.dedup import cross_dedup
from corpus_assets.definitions import defs
from corpus_assets.main_job import main_run_config
from curation.partition import PartitionLayout
from curation.storage import LocalStore
from partitions import SNAPSHOT_PARTITIONS_NAME
from resources import ComputeResource, PipelineResource, StorageResource

FILE = "warc/non_cc/dolma_wget-sample-0000_22responses.warc.gz"
OTHER = "warc/non_cc/dolma_wget-sample-0001_15responses.warc.gz"


def _pipeline(tmp_path: Path, snapshots: list[str]) -> Path:
    lines = ["version: 1", "snapshots:"]
    lines += [f"  {name}: {{warc: {{path: {tmp_path / name}}}}}" for name in snapshots]
    lines += ["language: {languages: [en], threshold: 0.3}",
              "gates: {heuristics_keep: {min: 0.0, max: 1.0}, max_duplicate_rate: 1.0}",
              "dedup: {cross_near_duplicates: true}"]
    path = tmp_path / "pipeline.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _materialize(instance, tmp_path: Path, snapshots: list[str], new: list[str]) -> dict:
    """Per-snapshot job for the new partitions, then cross_dedup alone (this pipeline has no
    quality classifier)."""
    pipeline = _pipeline(tmp_path, snapshots)
    config = main_run_config(str(pipeline), str(tmp_path / "data"), workers=0)
    for partition in new:
        result = defs.resolve_job_def("per_snapshot").execute_in_process(
            partition_key=partition, instance=instance, run_config=config)
        assert result.success
    result = materialize(
        [cross_dedup, cross_dedup_kept_members_valid], instance=instance,
        resources={"pipeline": PipelineResource(path=str(pipeline)),
                   "storage": StorageResource(root=str(tmp_path / "data"), s3=S3Resource()),
                   "compute": ComputeResource(workers=0)})
    assert result.success
    return _cross_metadata(instance)


def _cross_metadata(instance) -> dict:
    record = instance.fetch_materializations(AssetKey("cross_dedup"), limit=1).records[0]
    return {key: value.value for key, value in record.asset_materialization.metadata.items()}


def test_a_new_partition_is_linked_against_the_index(shared_data: Path, tmp_path: Path) -> None:
    # CC-A and CC-B crawl the same pages (one file copied), CC-C other pages.
    for name, source in (("CC-A", FILE), ("CC-B", FILE), ("CC-C", OTHER)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "x.warc.gz").write_bytes((shared_data / source).read_bytes())
    (tmp_path / "home").mkdir()
    with instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        instance.add_dynamic_partitions(SNAPSHOT_PARTITIONS_NAME, ["CC-A", "CC-B", "CC-C"])
        first = _materialize(instance, tmp_path, ["CC-A", "CC-C"], ["CC-A", "CC-C"])
        assert first["partitions_added"] == ["CC-A", "CC-C"]
        second = _materialize(instance, tmp_path, ["CC-A", "CC-B", "CC-C"], ["CC-B"])
        assert second["partitions_added"] == ["CC-B"]
        assert second["partitions_reused"] == ["CC-A", "CC-C"]
        assert second["new_cross_links"] > 0

    store = LocalStore(str(tmp_path / "data"))
    rows = PartitionLayout(store, "cross_dedup", "all").read_table().to_pylist()
    docs = {p: set(PartitionLayout(store, "documents", p).read_table(["doc_id"])["doc_id"]
                   .to_pylist()) for p in ("CC-A", "CC-B")}
    dropped_b = [row for row in rows if row["doc_id"] in docs["CC-B"] and not row["keep"]]
    # Every CC-B page is a copy of a CC-A page: the earlier snapshot's copy is kept.
    assert len(dropped_b) == len(docs["CC-B"])
    assert all(row["kept_doc_id"] in docs["CC-A"] for row in dropped_b)
