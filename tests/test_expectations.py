"""Every stage's output contract as a great-expectations suite run by its blocking
`<asset>_contract` check (issue 19, item 6), and the gates that learn from the checks' own specs
which of them block (item 4): the built-in sample meets every contract; a stored part corrupted
after the fact fails its contract naming the expectation, and stops the downstream asset in a
later run."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dagster import AssetKey, AssetSelection, instance_for_test, materialize

from checks.registry import ASSET_CHECKS, BLOCKING_CHECKS
from corpus_assets.definitions import defs
from curation.graph import (
    ALL,
    CORRECTNESS_CHECKS,
    CROSS_DEDUP,
    DECONTAMINATED,
    DEDUP_CLUSTERS,
    DOCUMENTS,
    EXACT_DEDUP,
    HEURISTICS,
    LANGUAGE,
    LINE_DEDUP,
    MINHASH_SIGNATURES,
    MIX,
    QUALITY_SCORES,
    SCRUBBED,
    SHARDS,
    URL_DEDUP,
    WARC_FILES,
)
from partitions import RECIPE_PARTITIONS_NAME, SNAPSHOT_PARTITIONS_NAME
from resources import ComputeResource, PipelineResource, S3Resource, StorageResource

CONTRACTS = (WARC_FILES, DOCUMENTS, LANGUAGE, HEURISTICS, MINHASH_SIGNATURES, URL_DEDUP,
             EXACT_DEDUP, DEDUP_CLUSTERS, LINE_DEDUP, CROSS_DEDUP, SCRUBBED, QUALITY_SCORES,
             DECONTAMINATED, MIX, SHARDS)


def test_the_blocking_registry_is_what_the_asset_graph_says() -> None:
    """The gates read `BLOCKING_CHECKS`; it is built from the same check definitions the code
    location loads, so it cannot drift from the resolved graph."""
    graph = defs.resolve_asset_graph()
    expected: dict[str, set[str]] = {}
    for key in graph.asset_check_keys:
        if graph.get(key).blocking:
            expected.setdefault(key.asset_key.to_user_string(), set()).add(key.name)
    assert {asset: set(names) for asset, names in BLOCKING_CHECKS.items()} == expected
    assert {key.name for key in graph.asset_check_keys} == {
        spec.name for definition in ASSET_CHECKS for spec in definition.check_specs}


def test_every_stage_has_a_blocking_correctness_contract() -> None:
    for asset in CONTRACTS:
        assert f"{asset}_contract" in BLOCKING_CHECKS[asset]
        assert f"{asset}_contract" in CORRECTNESS_CHECKS


@pytest.mark.parametrize("asset", CONTRACTS)
def test_the_sample_meets_the_contract(sample_run, asset: str) -> None:
    """The README's main job on the built-in sample: every partition of `asset` meets its suite,
    and the check reports each expectation it ran."""
    evaluations = [e for result in sample_run.results.values()
                   for e in result.get_asset_check_evaluations()
                   if e.check_name == f"{asset}_contract"]
    partitions = 1 if asset in (CROSS_DEDUP, MIX, SHARDS) else 4  # 2 snapshots, 2 sources
    assert len(evaluations) == partitions
    for evaluation in evaluations:
        assert evaluation.passed, evaluation.description
        assert evaluation.description.startswith("all ")
        assert evaluation.metadata["failed_expectations"].value == 0


def _nullable(table: pa.Table) -> pa.Schema:
    return pa.schema([field.with_nullable(True) for field in table.schema])


def _set(column: str, value: object) -> Callable[[pa.Table], pa.Table]:
    """Row 0's `column` set to `value`, the column's type kept."""
    def corrupt(table: pa.Table) -> pa.Table:
        rows = table.to_pylist()
        rows[0][column] = value
        return pa.Table.from_pylist(rows, table.schema if value is not None
                                    else _nullable(table))
    return corrupt


def _duplicate_doc_id(table: pa.Table) -> pa.Table:
    rows = table.to_pylist()
    rows[1]["doc_id"] = rows[0]["doc_id"]
    return pa.Table.from_pylist(rows, table.schema)


def _drop(column: str) -> Callable[[pa.Table], pa.Table]:
    return lambda table: table.drop_columns([column])


def _corrupt(folder: Path, stored: str, corrupt: Callable[[pa.Table], pa.Table]) -> None:
    """Rewrites `stored`; the table's other parts take its schema, so they still concatenate."""
    path = folder / f"{stored}.parquet"
    table = corrupt(pq.read_table(path))
    pq.write_table(table, path)
    for sibling in folder.glob(f"{stored.split('-')[0]}-*.parquet"):
        if sibling != path:
            pq.write_table(pq.read_table(sibling).select(table.column_names).cast(table.schema),
                           sibling)


# (asset, partition, stored file, corruption, the failure the description names)
CORRUPTIONS = [
    (WARC_FILES, "SAMPLE-01", "part-00000", _set("size", -1),
     "expect_column_values_to_be_between(size): 1 unexpected"),
    (LANGUAGE, "SAMPLE-01", "part-00000", _set("language_score", 1.5),
     "expect_column_values_to_be_between(language_score): 1 unexpected"),
    (HEURISTICS, "SAMPLE-01", "decisions-00000", _set("stage", "heuristic"),
     "expect_column_values_to_be_in_set(decisions.stage): 1 unexpected, e.g. heuristic"),
    (HEURISTICS, "SAMPLE-01", "part-00000", _set("dup_line_frac", 1.25),
     "expect_column_values_to_be_between(dup_line_frac): 1 unexpected"),
    (MINHASH_SIGNATURES, "SAMPLE-01", "part-00000", _duplicate_doc_id,
     "expect_column_values_to_be_unique(doc_id): 2 unexpected"),
    (URL_DEDUP, "SAMPLE-02", "part-00000", _duplicate_doc_id,
     "expect_column_values_to_be_unique(doc_id): 2 unexpected"),
    (LINE_DEDUP, "SAMPLE-01", "edits-00000", _set("kind", "other"),
     "expect_column_values_to_be_in_set(edits.kind): 1 unexpected, e.g. other"),
    (CROSS_DEDUP, ALL, "part-00000", _set("keep", None),
     "expect_column_values_to_not_be_null(keep): 1 unexpected"),
    (SCRUBBED, "SAMPLE-01", "part-00000", _set("text", None),
     "expect_column_values_to_not_be_null(text_chars): 1 unexpected"),
    (QUALITY_SCORES, "SAMPLE-01", "part-00000", _drop("quality_score"),
     "expect_column_to_exist(quality_score)"),
    (DECONTAMINATED, "SAMPLE-01", "hits-00000", _set("start", -5),
     "expect_column_values_to_be_between(hits.start): 1 unexpected"),
    (MIX, "sample", "part-00000", _set("occurrence", -1),
     "expect_column_values_to_be_between(occurrence): 1 unexpected"),
]


# Runs of the check alone name their partition by the run tag a launch from the UI sets: a
# partition key proper needs a selected asset (Dagster infers the job's partitions from those).
PARTITION_TAG = "dagster/partition"


def _asset_of(asset: str):  # noqa: ANN202 - the asset definition, its resources unbound
    return next(a for a in defs.assets if AssetKey(asset) in a.keys)


def _check_of(asset: str):  # noqa: ANN202 - the check definition
    return next(d for d in ASSET_CHECKS if any(s.name == f"{asset}_contract"
                                               for s in d.check_specs))


def _resources(sample_run, root: Path) -> dict:
    return {"pipeline": PipelineResource(path=str(sample_run.pipeline_path)),
            "storage": StorageResource(root=str(root), s3=S3Resource()),
            "compute": ComputeResource(workers=0)}


@pytest.mark.parametrize(("asset", "partition", "stored", "corrupt", "named"), CORRUPTIONS,
                         ids=[f"{row[0]}-{row[2]}" for row in CORRUPTIONS])
def test_a_corrupted_part_fails_its_contract_naming_the_expectation(
        sample_run, tmp_path: Path, asset: str, partition: str, stored: str,
        corrupt: Callable[[pa.Table], pa.Table], named: str) -> None:
    """A copy of the sample's stored partition, one file rewritten after the stage wrote it:
    the check fails with ERROR severity and names the expectation, the column and the count."""
    root = tmp_path / "data"
    shutil.copytree(sample_run.root / asset / partition, root / asset / partition)
    _corrupt(root / asset / partition, stored, corrupt)
    check = _check_of(asset)
    with instance_for_test() as instance:
        instance.add_dynamic_partitions(SNAPSHOT_PARTITIONS_NAME, ["SAMPLE-01", "SAMPLE-02"])
        instance.add_dynamic_partitions(RECIPE_PARTITIONS_NAME, ["sample"])
        result = materialize(
            [_asset_of(asset), check],
            selection=AssetSelection.checks(check), instance=instance, raise_on_error=False,
            tags={} if partition == ALL else {PARTITION_TAG: partition},
            resources=_resources(sample_run, root))
        [evaluation] = result.get_asset_check_evaluations()
        assert not evaluation.passed
        assert named in evaluation.description
        assert evaluation.severity.value == "ERROR"
        assert evaluation.metadata["failed_expectations"].value >= 1


def test_a_failed_contract_stops_the_downstream_asset_in_a_later_run(
        sample_run, tmp_path: Path) -> None:
    """The cross-run gate learns from the checks' specs that `language_contract` blocks: a
    later run of `heuristics` alone refuses the partition whose language output broke it."""
    root = tmp_path / "data"
    shutil.copytree(sample_run.root / LANGUAGE / "SAMPLE-01", root / LANGUAGE / "SAMPLE-01")
    _corrupt(root / LANGUAGE / "SAMPLE-01", "part-00000", _set("language", None))
    check = _check_of(LANGUAGE)
    with instance_for_test() as instance:
        instance.add_dynamic_partitions(SNAPSHOT_PARTITIONS_NAME, ["SAMPLE-01"])
        failed = materialize([_asset_of(LANGUAGE), check],
                             selection=AssetSelection.checks(check), instance=instance,
                             tags={PARTITION_TAG: "SAMPLE-01"}, raise_on_error=False,
                             resources=_resources(sample_run, root))
        assert not failed.get_asset_check_evaluations()[0].passed
        later = materialize([_asset_of(HEURISTICS)],
                            instance=instance, partition_key="SAMPLE-01", raise_on_error=False,
                            resources=_resources(sample_run, root))
        assert not later.success
        message = later.get_step_failure_events()[0].step_failure_data.error.message
        assert "language[SAMPLE-01] failed its blocking check language_contract" in message
