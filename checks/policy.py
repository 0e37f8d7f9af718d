"""How a deployment's settings bend a check's verdict: the severity a tunable check reports a
failure with, the curated sources the web bounds do not judge, and the stages a setting turns
off. Shared by the checks and
nothing else, so they live beside them."""

from dagster import AssetCheckResult, AssetCheckSeverity, MetadataValue

from checks.streams import SequenceComparison, iter_column
from curation.config import SOURCE_PREFIX, Gates, PipelineConfig
from curation.graph import DOCUMENTS
from curation.partition import PartitionLayout
from curation.stages.base import skipped_reason
from curation.storage import Store


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


def skipped_partition(store: Store, asset: str, partition: str) -> AssetCheckResult | None:
    """A passing result when the settings turned the stage off for `partition`, else None."""
    reason = skipped_reason(store, asset, partition)
    return nothing_to_check(reason) if reason else None


def covers_documents(store: Store, asset: str, partition: str, rows: str) -> AssetCheckResult:
    """Whether `asset[partition]` has one row per document in document order, a chunk of
    each at a time; `rows` names what a row is ("vectors", "domains")."""
    documents = iter_column(PartitionLayout(store, DOCUMENTS, partition), "doc_id")
    same = SequenceComparison(iter_column(PartitionLayout(store, asset, partition), "doc_id"),
                              documents)
    return AssetCheckResult(passed=same.equal, severity=AssetCheckSeverity.ERROR,
                            description=f"{asset}[{partition}]: {same.left_rows} {rows} "
                            f"for {same.right_rows} documents"
                            + ("" if same.equal else ", not one per document in order"),
                            metadata={rows: MetadataValue.int(same.left_rows),
                                      "documents": MetadataValue.int(same.right_rows)})
