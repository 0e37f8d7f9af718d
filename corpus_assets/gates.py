"""Downstream assets refuse a partition whose upstream's latest blocking check failed with
severity ERROR; a deployment makes a tunable check a warning with `gates.severity`.

Dagster stops downstream steps only inside the run where a blocking check failed with ERROR
severity; a later run of a downstream asset alone would read the bad partition. This makes the
gate hold across runs, and lets a failure reported as a warning pass, as it does within a run.
Which checks block comes from the checks' own specs (`checks.registry`), not the definitions.
"""

from collections.abc import Mapping, Sequence

from dagster import (
    AssetCheckEvaluation,
    AssetCheckKey,
    AssetCheckSeverity,
    AssetExecutionContext,
    AssetKey,
    DagsterEventType,
    DagsterInstance,
    EventLogEntry,
    Failure,
)

from checks.registry import BLOCKING_CHECKS


def _latest_for_partition(
    instance: DagsterInstance, keys: Sequence[AssetCheckKey], partition: str
) -> Mapping[AssetCheckKey, tuple[str, EventLogEntry | None]]:
    """(run id, latest event) of each check's latest execution on `partition`.

    The one private import: Dagster 1.13 has no public API that reads a check's latest
    execution for one partition; the event log storage's method takes this filter type, which
    `dagster` does not export.
    """
    from dagster._core.event_api import PartitionKeyFilter

    records = instance.event_log_storage.get_latest_asset_check_execution_by_key(
        keys, partition_filter=PartitionKeyFilter(key=partition))
    return {key: (record.run_id, record.event) for key, record in records.items()}


def _failed_with_error(event: EventLogEntry | None) -> bool:
    """An evaluation (not a planned or interrupted execution) that failed with ERROR."""
    dagster_event = event.dagster_event if event else None
    if dagster_event is None or dagster_event.event_type != DagsterEventType.ASSET_CHECK_EVALUATION:
        return False
    evaluation: AssetCheckEvaluation = dagster_event.asset_check_evaluation_data
    return not evaluation.passed and evaluation.severity == AssetCheckSeverity.ERROR


def require_passing_gates(context: AssetExecutionContext, upstream: str, partition: str) -> None:
    """Raises `Failure` naming the gate when the upstream partition's latest run of any of its
    blocking checks failed with severity ERROR (a warning stops nothing)."""
    keys = [AssetCheckKey(AssetKey(upstream), name) for name in BLOCKING_CHECKS.get(upstream, ())]
    latest = _latest_for_partition(context.instance, keys, partition)
    for key in keys:
        run_id, event = latest.get(key, ("", None))
        if _failed_with_error(event):
            raise Failure(
                f"{upstream}[{partition}] failed its blocking check {key.name} in run "
                f"{run_id}; fix it and re-materialize {upstream} first",
                allow_retries=False,
            )
