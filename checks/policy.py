"""How a deployment's settings bend a check's verdict: the severity a tunable check reports a
failure with, the curated sources the web bounds do not judge, and the stages a setting turns
off. Shared by the checks and
nothing else, so they live beside them."""

from dagster import AssetCheckResult, AssetCheckSeverity, MetadataValue

from curation.config import SOURCE_PREFIX, Gates, PipelineConfig


def gate_severity(gates: Gates, check: str) -> AssetCheckSeverity:
    """The severity `check` reports a failure with under the deployment's `gates.severity`."""
    return AssetCheckSeverity.WARN if gates.severity_of(check) == "warn" \
        else AssetCheckSeverity.ERROR


def curated_source(pipeline: PipelineConfig, partition: str) -> str | None:
    """The source's name when `partition` is a curated source judged by the curated filter
    policy (`sources.NAME.filters: curated`); the web bounds do not apply to it."""
    name = partition.removeprefix(SOURCE_PREFIX)
    return name if partition.startswith(SOURCE_PREFIX) and name in pipeline.curated_sources() \
        else None


def nothing_to_check(reason: str) -> AssetCheckResult:
    """A passing result for a partition the settings left empty (no classifier configured,
    embeddings off): nothing to gate, and the reason says why."""
    return AssetCheckResult(passed=True, description=f"skipped: {reason}",
                            metadata={"skipped": MetadataValue.text(reason)})
