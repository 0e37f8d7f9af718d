"""Downstream assets refuse a partition whose upstream's latest blocking check failed.

Dagster stops downstream steps only inside the run where a blocking check failed; a later run of
a downstream asset alone would read the bad partition. This makes the gate hold across runs.
"""

from dagster import AssetExecutionContext, AssetKey, Failure
from dagster._core.event_api import PartitionKeyFilter
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus


def require_passing_gates(context: AssetExecutionContext, upstream: str, partition: str) -> None:
    """Raises `Failure` naming the gate when the upstream partition's latest run of any of its
    blocking checks failed."""
    from corpus_assets.definitions import defs  # the graph, not an import cycle at load time

    graph = defs.resolve_asset_graph()
    storage = context.instance.event_log_storage
    for check_key in graph.get_check_keys_for_assets({AssetKey(upstream)}):
        if not graph.get(check_key).blocking:
            continue
        latest = storage.get_asset_check_execution_history(
            check_key, limit=1, partition_filter=PartitionKeyFilter(key=partition))
        if latest and latest[0].status == AssetCheckExecutionRecordStatus.FAILED:
            raise Failure(
                f"{upstream}[{partition}] failed its blocking check {check_key.name} in run "
                f"{latest[0].run_id}; fix it and re-materialize {upstream} first",
                allow_retries=False,
            )
