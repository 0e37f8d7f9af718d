"""Quality gates for `warc_files`: a non-empty listing whose files all have a checksum, and
its output contract."""


from dagster import AssetCheckExecutionContext, AssetCheckResult, MetadataValue, asset_check

from checks.expectations import TableSuite, between, contract_check, not_null, of_type, unique
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
    rows = PartitionLayout(storage.store, WARC_FILES, partition).read_table().to_pylist()
    unhashed = [row["location"] for row in rows if len(row["sha256"]) != 64]
    return AssetCheckResult(
        passed=bool(rows) and not unhashed,
        description=f"{partition}: {len(rows)} input files, {len(unhashed)} without a sha256"
        + ("" if rows else " (no input file listed)"),
        metadata={"files": MetadataValue.int(len(rows)),
                  "unhashed": MetadataValue.int(len(unhashed))},
    )


warc_files_contract = contract_check(WARC_FILES, WARC_FILES_SUITES, snapshot_partitions)
