"""A takedown end to end on the built-in sample: find a document from a token position, take
its URL down, rebuild, and prove it and its duplicates are gone everywhere while every other
occurrence's tokens stay, in order (docs/architecture.md, "Lineage and takedowns")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
from dagster import AssetKey

from corpus_assets.definitions import defs
from corpus_assets.main_job import main_run_config
from curation.catalog import Catalog
from curation.loader import ShardDataset
from curation.partition import PartitionLayout
from curation.storage import LocalStore
from curation.takedowns import TakedownRequest, add_takedowns, audit_log, load_tombstones, purge

UPSTREAM = ["documents", "language", "heuristics", "url_dedup", "exact_dedup",
            "dedup_clusters", "line_dedup", "scrubbed", "embeddings", "quality_scores",
            "decontaminated", "cross_dedup", "quality_classifier", "eval_suite"]


def _stream(folder: Path, drop: set[str] = frozenset()) -> np.ndarray:
    """Every occurrence's tokens in order (padding left out), without the `drop` documents."""
    manifest = json.loads((folder / "manifest.json").read_text())
    first = [shard["first_sequence"] for shard in manifest["shards"]]
    data = ShardDataset(folder)
    spans = pq.read_table(folder / "spans.parquet").sort_by(
        [("shard", "ascending"), ("sequence", "ascending"), ("start", "ascending")])
    pieces = [data[first[row["shard"]] + row["sequence"]][row["start"]:row["end"]]
              for row in spans.to_pylist() if row["doc_id"] not in drop]
    return np.concatenate(pieces)


def _run(job: str, partition: str | None, sample_run, root: Path) -> None:
    result = defs.resolve_job_def(job).execute_in_process(
        partition_key=partition, instance=sample_run.instance, raise_on_error=False,
        run_config=main_run_config(str(sample_run.pipeline_path), str(root), 2))
    assert result.success, job
    assert all(check.passed for check in result.get_asset_check_evaluations()), job


def test_take_a_page_down_and_rebuild(sample_run, tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(sample_run.root, root)  # the session's sample stays as it was
    store = LocalStore(str(root))
    _run("lineage", None, sample_run, root)
    old = PartitionLayout(store, "shards", "sample").complete_manifest().version
    old_folder = root / "shards" / old
    spans = pq.read_table(old_folder / "spans.parquet")
    # A document in the shards that has an exact or near duplicate somewhere.
    members = PartitionLayout(store, "cross_dedup", "all").read_table(["doc_id", "cluster_id"])
    clustered = set(members["doc_id"].to_pylist())
    doc_id = next(d for d in spans["doc_id"].to_pylist() if d in clustered)
    row = spans.filter(pc.equal(spans["doc_id"], doc_id)).to_pylist()[0]
    manifest = json.loads((old_folder / "manifest.json").read_text())
    offset = row["sequence"] * manifest["seq_len"] + row["start"]
    with Catalog(root / "catalog.duckdb") as catalog:
        found = catalog.at_token(old, row["shard"], offset)
        assert found.document.doc_id == doc_id
        url = found.document.url
        location = next(loc for loc in catalog.find_url(url) if loc.doc_id == doc_id)
        assert any(span.dataset_version == old for span in location.spans)

    before = {a: len(sample_run.instance.fetch_materializations(AssetKey(a), limit=1000).records)
              for a in UPSTREAM}
    add_takedowns(store, [TakedownRequest(url, "opt-out request", "url")], "tester",
                  "2026-11-22T00:00:00Z")
    for job, partition in (("takedown_list", None), ("dataset", "sample"), ("lineage", None)):
        _run(job, partition, sample_run, root)
    after = {a: len(sample_run.instance.fetch_materializations(AssetKey(a), limit=1000).records)
             for a in UPSTREAM}
    assert after == before  # extraction, signals and dedup did not run again

    new = PartitionLayout(store, "shards", "sample").complete_manifest().version
    assert new != old
    gone = load_tombstones(store)
    cluster = members.filter(pc.equal(members["doc_id"], doc_id))["cluster_id"][0]
    copies = set(members.filter(pc.equal(members["cluster_id"], cluster))["doc_id"].to_pylist())
    assert doc_id in gone and copies <= gone.doc_ids and len(copies) >= 2
    new_folder = root / "shards" / new
    assert not gone.mask(pq.read_table(new_folder / "spans.parquet")["doc_id"]).to_pylist() \
        .count(True)
    with Catalog(root / "catalog.duckdb") as catalog:
        for location in catalog.find_url(url):  # every document at this URL
            assert location.taken_down
            assert not any(span.dataset_version == new for span in location.spans)
    # The new stream is the old one with the removed occurrences' tokens cut out.
    assert np.array_equal(_stream(new_folder), _stream(old_folder, set(gone.doc_ids)))

    report = purge(store, gone.doc_ids, who="tester", when="2026-11-22T00:00:01Z")
    assert sum(report.rows_removed.values()) >= len(copies)
    for partition in ("SAMPLE-01", "SAMPLE-02", "source:code", "source:reference"):
        for asset in ("documents", "embeddings"):  # the text, and the vectors made from it
            ids = PartitionLayout(store, asset, partition).read_table(["doc_id"])["doc_id"]
            assert not set(ids.to_pylist()) & gone.doc_ids
    assert [r["action"] for r in audit_log(store)][:1] == ["add"]
