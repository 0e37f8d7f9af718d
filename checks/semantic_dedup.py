"""Quality gates for `semantic_dedup`: the dedup stages' contract and kept-member rule; a
partition skipped for want of embeddings passes both, saying why."""

from dagster import AssetCheckExecutionContext, AssetCheckResult, asset_check

from checks.dedup import cluster_suites, kept_members_valid
from checks.expectations import contract_result, describe
from checks.policy import skipped_partition
from curation.graph import SEMANTIC_DEDUP
from curation.partition import PartitionLayout
from partitions import snapshot_partitions
from resources import StorageResource

SEMANTIC_DEDUP_SUITES = cluster_suites(SEMANTIC_DEDUP)


@asset_check(asset=SEMANTIC_DEDUP, blocking=True, partitions_def=snapshot_partitions,
             description="Every semantic duplicate names a kept member that exists in its group "
             "and is not itself a duplicate.")
def semantic_dedup_kept_members_valid(context: AssetCheckExecutionContext,
                                      storage: StorageResource) -> AssetCheckResult:
    partition = context.op_execution_context.partition_key
    return skipped_partition(storage.store, SEMANTIC_DEDUP, partition) or kept_members_valid(
        storage.store, SEMANTIC_DEDUP, partition)


@asset_check(asset=SEMANTIC_DEDUP, blocking=True, partitions_def=snapshot_partitions,
             description=describe(SEMANTIC_DEDUP_SUITES))
def semantic_dedup_contract(context: AssetCheckExecutionContext,
                            storage: StorageResource) -> AssetCheckResult:
    partition = context.op_execution_context.partition_key
    return skipped_partition(storage.store, SEMANTIC_DEDUP, partition) or contract_result(
        PartitionLayout(storage.store, SEMANTIC_DEDUP, partition), SEMANTIC_DEDUP_SUITES)
