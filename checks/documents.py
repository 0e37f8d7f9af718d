"""Quality gates for `documents`: the document contract and the extraction survival rate."""


import pyarrow.compute as pc
from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetCheckSeverity,
    MetadataValue,
    asset_check,
)

from checks.expectations import Expectation, expectations_result, validate
from corpus_assets.documents import documents, problem_files_metadata
from corpus_assets.gates import gate_severity
from curation.config import SOURCE_PREFIX
from curation.documents import describe_problem_files, partition_problem_files
from curation.partition import PartitionLayout
from curation.stats import StageStats
from partitions import SNAPSHOT_PARTITIONS_NAME, snapshot_partitions
from resources import PipelineResource, StorageResource


@asset_check(asset=documents, blocking=True, partitions_def=snapshot_partitions,
             description="great-expectations suite: unique non-null doc_id, non-null url, "
             "non-empty text, a registered snapshot (or the partition's source).")
def documents_contract(
    context: AssetCheckExecutionContext, storage: StorageResource
) -> AssetCheckResult:
    partition = context.op_execution_context.partition_key
    table = PartitionLayout(storage.store, "documents", partition).read_table(
        ["doc_id", "url", "snapshot", "source", "text"]
    )
    frame = table.drop_columns(["text"]).append_column(
        "text_chars", pc.utf8_length(pc.utf8_trim_whitespace(table["text"]))
    ).to_pandas()
    registered = context.instance.get_dynamic_partitions(SNAPSHOT_PARTITIONS_NAME)
    if partition.startswith(SOURCE_PREFIX):
        origin = Expectation("ExpectColumnValuesToBeInSet",
                             {"column": "source", "value_set": [partition[len(SOURCE_PREFIX):]]})
    else:
        origin = Expectation("ExpectColumnValuesToBeInSet",
                             {"column": "snapshot", "value_set": sorted(registered)})
    passed, rows = validate(frame, "documents", [
        Expectation("ExpectColumnValuesToNotBeNull", {"column": "doc_id"}),
        Expectation("ExpectColumnValuesToBeUnique", {"column": "doc_id"}),
        Expectation("ExpectColumnValuesToNotBeNull", {"column": "url"}),
        Expectation("ExpectColumnValuesToBeBetween", {"column": "text_chars", "min_value": 1}),
        origin,
    ])
    return expectations_result(passed, rows, {"rows": MetadataValue.int(len(frame))})


@asset_check(asset=documents, blocking=True, partitions_def=snapshot_partitions,
             description="Extraction survival (documents out / HTML responses in) within the "
             "pipeline's bounds (documents.survival; a warning where gates.severity says warn).")
def documents_survival(
    context: AssetCheckExecutionContext, pipeline: PipelineResource, storage: StorageResource
) -> AssetCheckResult:
    partition = context.op_execution_context.partition_key
    manifest = PartitionLayout(storage.store, "documents", partition).read_manifest()
    if manifest is None:
        return AssetCheckResult(passed=False, severity=AssetCheckSeverity.ERROR,
                                metadata={"reason": "the partition has no manifest"},
                                description=f"documents[{partition}] has no manifest")
    stats = StageStats.from_dict(manifest.extra["stats"])
    config = pipeline.load()
    bounds = config.documents.survival
    passed = stats.candidates > 0 and bounds.min <= stats.survival <= bounds.max
    return AssetCheckResult(
        passed=passed,
        severity=gate_severity(config.gates, "documents_survival"),
        description=f"{partition}: {stats.docs_out} of {stats.candidates} HTML responses "
        f"survive extraction ({stats.survival:.2%}), "
        f"{'within' if passed else 'outside'} documents.survival "
        f"[{bounds.min:.2%}, {bounds.max:.2%}]",
        metadata={
            "survival_rate": MetadataValue.float(round(stats.survival, 4)),
            "min": MetadataValue.float(bounds.min),
            "max": MetadataValue.float(bounds.max),
            "candidates": MetadataValue.int(stats.candidates),
        },
    )


@asset_check(asset=documents, blocking=True, partitions_def=snapshot_partitions,
             description="Every input file was read whole: none empty, cut short, unreadable, "
             "not WARC or without responses (a WET file), beyond gates.max_problem_files "
             "(default 0). The files and their problems are in the `problem_files` table.")
def documents_files_readable(
    context: AssetCheckExecutionContext, pipeline: PipelineResource, storage: StorageResource
) -> AssetCheckResult:
    partition = context.op_execution_context.partition_key
    problems = partition_problem_files(storage.store, partition)
    files = PartitionLayout(storage.store, "warc_files", partition).complete_manifest().rows
    config = pipeline.load()
    allowed = config.gates.max_problem_files
    passed = len(problems) <= allowed
    named = f": {describe_problem_files(problems)}" if problems else ""
    return AssetCheckResult(
        passed=passed,
        severity=gate_severity(config.gates, "documents_files_readable"),
        description=f"{partition}: {len(problems)} of {files} input files could not be read "
        f"whole{named}; gates.max_problem_files allows {allowed}",
        metadata=problem_files_metadata(problems),
    )
