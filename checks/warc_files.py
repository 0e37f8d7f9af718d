"""Quality gates for `warc_files`: a non-empty listing whose files all have a checksum, and
its output contract."""


from dagster import AssetCheckExecutionContext, AssetCheckResult, MetadataValue, asset_check

from checks.expectations import TableSuite, between, contract_check, not_null, of_type, unique
from checks.streams import iter_parts
from curation.graph import WARC_FILES
from curation.partition import PartitionLayout
from partitions import snapshot_partitions
from resources import StorageResource

WARC_FILES_SUITES = (
    TableSuite("part", (*not_null("location", "size", "sha256"), unique("location"),
                        between("size", 0), of_type("size", "int64"),
                        of_type("sha256", "str"))),
)


@asset_check(asset=WARC_FILES, blocking=True, partitions_def=snapshot_partitions,
             description="At least one input file, each with a size and a sha256.")
def warc_files_listed(
    context: AssetCheckExecutionContext, storage: StorageResource
) -> AssetCheckResult:
    partition = context.op_execution_context.partition_key
    files = unhashed = 0
    for table in iter_parts(PartitionLayout(storage.store, WARC_FILES, partition), ["sha256"]):
        files += table.num_rows
        unhashed += sum(len(sha256) != 64 for sha256 in table["sha256"].to_pylist())
    return AssetCheckResult(
        passed=bool(files) and not unhashed,
        description=f"{partition}: {files} input files, {unhashed} without a sha256"
        + ("" if files else " (no input file listed)"),
        metadata={"files": MetadataValue.int(files),
                  "unhashed": MetadataValue.int(unhashed)},
    )


warc_files_contract = contract_check(WARC_FILES, WARC_FILES_SUITES, snapshot_partitions)
