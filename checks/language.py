"""Quality gates for `language`: something is kept; the language mix does not drift far."""

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetCheckSeverity,
    MetadataValue,
    asset_check,
)

from checks.expectations import (
    TableSuite,
    between,
    contract_check,
    decisions_suite,
    not_null,
    of_type,
    unique,
)
from checks.policy import curated_source, gate_severity
from curation.config import SOURCE_PREFIX
from curation.graph import LANGUAGE
from curation.language import drift, language_mix
from curation.partition import PartitionLayout
from curation.stats import StageStats
from partitions import SNAPSHOT_PARTITIONS_NAME, snapshot_partitions
from resources import PipelineResource, StorageResource

LANGUAGE_SUITES = (
    TableSuite("part", (*not_null("doc_id", "language", "language_score", "keep"),
                        unique("doc_id"), between("language_score", 0.0, 1.0),
                        of_type("language_score", "float32"), of_type("keep", "bool"))),
    decisions_suite(LANGUAGE, ["low_language_score", "not_target_language"]),
)


def _stats(storage: StorageResource, partition: str) -> StageStats | None:
    manifest = PartitionLayout(storage.store, LANGUAGE, partition).read_manifest()
    return StageStats.from_dict(manifest.extra["stats"]) if manifest else None


@asset_check(asset=LANGUAGE, blocking=True, partitions_def=snapshot_partitions,
             description="Fails when the verdict would keep no document of the partition "
             "(a curated source with filters: curated is not judged: its selection ignores the "
             "language verdict).")
def language_keeps_documents(
    context: AssetCheckExecutionContext, pipeline: PipelineResource, storage: StorageResource
) -> AssetCheckResult:
    partition = context.op_execution_context.partition_key
    stats = _stats(storage, partition)
    kept = stats.docs_out if stats else 0
    curated = curated_source(pipeline.load(), partition)
    if curated:
        return AssetCheckResult(passed=True, metadata={"kept": MetadataValue.int(kept)},
                                description=f"not judged: source {curated} has filters: "
                                "curated, so the language verdict drops none of its documents")
    return AssetCheckResult(passed=kept > 0, severity=AssetCheckSeverity.ERROR,
                            description=f"{partition}: the language verdict keeps {kept} "
                            "documents" + ("" if kept else " (none: check language.languages "
                                           "and language.threshold)"),
                            metadata={"kept": MetadataValue.int(kept)})


@asset_check(asset=LANGUAGE, partitions_def=snapshot_partitions,
             description="Warns when the language mix drifts far (total variation distance, "
             "language.max_drift) from that of the next lower snapshot id (an error where "
             "gates.severity says error).")
def language_drift(
    context: AssetCheckExecutionContext, pipeline: PipelineResource, storage: StorageResource
) -> AssetCheckResult:
    partition = context.op_execution_context.partition_key
    stats = _stats(storage, partition)
    reference = _previous_snapshot(context, storage, partition)
    if partition.startswith(SOURCE_PREFIX) or stats is None or reference is None:
        return AssetCheckResult(passed=True, description="not compared: no lower snapshot with "
                                "a language mix", metadata={
            "compared_with": MetadataValue.text("nothing: no lower snapshot with a language mix")})
    name, reference_stats = reference
    distance = drift(language_mix(stats), language_mix(reference_stats))
    config = pipeline.load()
    limit = config.language.max_drift
    return AssetCheckResult(
        passed=distance <= limit, severity=gate_severity(config.gates, "language_drift"),
        description=f"{partition}: the language mix is {distance:.3f} (total variation) from "
        f"{name}'s, {'within' if distance <= limit else 'over'} language.max_drift {limit}",
        metadata={"compared_with": MetadataValue.text(name),
                  "total_variation": MetadataValue.float(round(distance, 4)),
                  "max_drift": MetadataValue.float(limit)},
    )


def _previous_snapshot(context: AssetCheckExecutionContext, storage: StorageResource,
                       partition: str) -> tuple[str, StageStats] | None:
    keys = context.instance.get_dynamic_partitions(SNAPSHOT_PARTITIONS_NAME)
    lower = sorted((k for k in keys if not k.startswith(SOURCE_PREFIX) and k < partition),
                   reverse=True)
    for key in lower:
        stats = _stats(storage, key)
        if stats is not None:
            return key, stats
    return None


language_contract = contract_check(LANGUAGE, LANGUAGE_SUITES, snapshot_partitions)
