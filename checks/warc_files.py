"""Quality gates for `warc_files`: a non-empty listing whose files all have a checksum."""


from dagster import AssetCheckExecutionContext, AssetCheckResult, MetadataValue, asset_check

from corpus_assets.warc_files import ASSET, warc_files
from curation.partition import PartitionLayout
from partitions import snapshot_partitions
from resources import StorageResource


@asset_check(asset=warc_files, blocking=True, partitions_def=snapshot_partitions,
             description="At least one input file, each with a size and a sha256.")
def warc_files_listed(
    context: AssetCheckExecutionContext, storage: StorageResource
) -> AssetCheckResult:
    partition = context.op_execution_context.partition_key
    rows = PartitionLayout(storage.store, ASSET, partition).read_table().to_pylist()
    unhashed = [row["location"] for row in rows if len(row["sha256"]) != 64]
    return AssetCheckResult(
        passed=bool(rows) and not unhashed,
        description=f"{partition}: {len(rows)} input files, {len(unhashed)} without a sha256"
        + ("" if rows else " (no input file listed)"),
        metadata={"files": MetadataValue.int(len(rows)),
                  "unhashed": MetadataValue.int(len(unhashed))},
    )
