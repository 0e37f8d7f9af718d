"""Quality gates for `documents`: the document contract and the extraction survival rate."""


from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetCheckSeverity,
    MetadataValue,
    TableColumn,
    TableRecord,
    TableSchema,
    asset_check,
)

from checks.expectations import (
    TEXT_CHARS,
    TableSuite,
    between,
    contract_result,
    describe,
    in_set,
    not_null,
    unique,
    with_expectation,
)
from checks.policy import gate_severity
from curation.config import SOURCE_PREFIX
from curation.graph import DOCUMENTS, WARC_FILES
from curation.partition import PartitionLayout
from curation.stages.documents import describe_problem_files, partition_problem_files
from curation.stats import StageStats
from partitions import SNAPSHOT_PARTITIONS_NAME, snapshot_partitions
from resources import PipelineResource, StorageResource

DOCUMENTS_SUITE = TableSuite(
    "part", (*not_null("doc_id", "url", "source"), unique("doc_id"), between("text_chars", 1)),
    derived=(TEXT_CHARS,))
"""Beside it, at run time: a registered snapshot (or, for a source, the partition's source)."""


@asset_check(asset=DOCUMENTS, blocking=True, partitions_def=snapshot_partitions,
             description=describe([DOCUMENTS_SUITE]) + "; snapshot a registered snapshot (or "
             "source the partition's source).")
def documents_contract(
    context: AssetCheckExecutionContext, storage: StorageResource
) -> AssetCheckResult:
    partition = context.op_execution_context.partition_key
    if partition.startswith(SOURCE_PREFIX):
        origin = in_set("source", [partition[len(SOURCE_PREFIX):]])
    else:
        origin = in_set("snapshot", sorted(
            context.instance.get_dynamic_partitions(SNAPSHOT_PARTITIONS_NAME)))
    return contract_result(PartitionLayout(storage.store, DOCUMENTS, partition),
                           [with_expectation(DOCUMENTS_SUITE, origin)])


@asset_check(asset=DOCUMENTS, blocking=True, partitions_def=snapshot_partitions,
             description="Extraction survival (documents out / HTML responses in) within the "
             "pipeline's bounds (documents.survival; a warning where gates.severity says warn).")
def documents_survival(
    context: AssetCheckExecutionContext, pipeline: PipelineResource, storage: StorageResource
) -> AssetCheckResult:
    partition = context.op_execution_context.partition_key
    manifest = PartitionLayout(storage.store, DOCUMENTS, partition).read_manifest()
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


@asset_check(asset=DOCUMENTS, blocking=True, partitions_def=snapshot_partitions,
             description="Every input file was read whole: none empty, cut short, unreadable, "
             "not WARC or without responses (a WET file), beyond gates.max_problem_files "
             "(default 0). The files and their problems are in the `problem_files` table.")
def documents_files_readable(
    context: AssetCheckExecutionContext, pipeline: PipelineResource, storage: StorageResource
) -> AssetCheckResult:
    partition = context.op_execution_context.partition_key
    problems = partition_problem_files(storage.store, partition)
    files = PartitionLayout(storage.store, WARC_FILES, partition).complete_manifest().rows
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


PROBLEM_FILES_SCHEMA = TableSchema(columns=[
    TableColumn("file", "string", description="the input file"),
    TableColumn("problem", "string", description="the file-level reject reasons"),
    TableColumn("message", "string", description="what the reader found"),
])


def problem_files_metadata(problems: list[dict[str, str]]) -> dict[str, MetadataValue]:
    """`problem_files` (a table: file, problem, message; the CLI's and the UI's warning) and
    `problem_file_count`; the `documents_files_readable` gate judges the same list."""
    return {"problem_files": MetadataValue.table([TableRecord(row) for row in problems],
                                                 PROBLEM_FILES_SCHEMA),
            "problem_file_count": MetadataValue.int(len(problems))}
