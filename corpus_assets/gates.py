"""Downstream assets refuse a partition whose upstream's latest blocking check failed with
severity ERROR; a deployment makes a tunable check a warning with `gates.severity`.

Dagster stops downstream steps only inside the run where a blocking check failed with ERROR
severity; a later run of a downstream asset alone would read the bad partition. This makes the
gate hold across runs, and lets a failure reported as a warning pass, as it does within a run.
"""

from dagster import AssetCheckSeverity, AssetExecutionContext, AssetKey, Failure
from dagster._core.event_api import PartitionKeyFilter
from dagster._core.storage.asset_check_execution_record import (
    AssetCheckExecutionRecord,
    AssetCheckExecutionRecordStatus,
)

from curation.config import SOURCE_PREFIX, Gates, PipelineConfig


def gate_severity(gates: Gates, check: str) -> AssetCheckSeverity:
    """The severity `check` reports a failure with under the deployment's `gates.severity`."""
    return AssetCheckSeverity.WARN if gates.severity_of(check) == "warn" \
        else AssetCheckSeverity.ERROR


def _failed_with_error(record: AssetCheckExecutionRecord) -> bool:
    if record.status != AssetCheckExecutionRecordStatus.FAILED:
        return False
    dagster_event = record.event.dagster_event if record.event else None
    if dagster_event is None:
        return True  # no evaluation to read the severity from: treat as blocking
    return dagster_event.asset_check_evaluation_data.severity == AssetCheckSeverity.ERROR


def require_passing_gates(context: AssetExecutionContext, upstream: str, partition: str) -> None:
    """Raises `Failure` naming the gate when the upstream partition's latest run of any of its
    blocking checks failed with severity ERROR (a warning stops nothing)."""
    from corpus_assets.definitions import defs  # the graph, not an import cycle at load time

    graph = defs.resolve_asset_graph()
    storage = context.instance.event_log_storage
    for check_key in graph.get_check_keys_for_assets({AssetKey(upstream)}):
        if not graph.get(check_key).blocking:
            continue
        latest = storage.get_asset_check_execution_history(
            check_key, limit=1, partition_filter=PartitionKeyFilter(key=partition))
        if latest and _failed_with_error(latest[0]):
            raise Failure(
                f"{upstream}[{partition}] failed its blocking check {check_key.name} in run "
                f"{latest[0].run_id}; fix it and re-materialize {upstream} first",
                allow_retries=False,
            )


def curated_source(pipeline: PipelineConfig, partition: str) -> str | None:
    """The source's name when `partition` is a curated source judged by the curated filter
    policy (`sources.NAME.filters: curated`); the web bounds do not apply to it."""
    name = partition.removeprefix(SOURCE_PREFIX)
    return name if partition.startswith(SOURCE_PREFIX) and name in pipeline.curated_sources() \
        else None
