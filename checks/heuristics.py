"""Quality gates for `heuristics`: one row per document, keep rate within the bounds."""

import pyarrow.compute as pc
from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetCheckSeverity,
    MetadataValue,
    asset_check,
)

from corpus_assets.gates import curated_source, gate_severity
from curation.partition import PartitionLayout
from partitions import snapshot_partitions
from resources import PipelineResource, StorageResource


@asset_check(asset="heuristics", blocking=True, partitions_def=snapshot_partitions,
             description="Exactly one signals row per document, in the same order; every drop "
             "has a decision row naming its rule.")
def heuristics_cover_documents(
    context: AssetCheckExecutionContext, storage: StorageResource
) -> AssetCheckResult:
    partition = context.op_execution_context.partition_key
    store = storage.store
    doc_ids = PartitionLayout(store, "documents", partition).read_table(["doc_id"])["doc_id"]
    signals = PartitionLayout(store, "heuristics", partition).read_table(["doc_id", "keep"])
    decisions = PartitionLayout(store, "heuristics", partition).read_table(
        ["doc_id", "reason"], name="decisions")
    same_rows = signals["doc_id"].equals(doc_ids)
    drops = signals.num_rows - pc.sum(signals["keep"]).as_py()
    explained = decisions.num_rows == drops and decisions["reason"].null_count == 0
    return AssetCheckResult(
        passed=bool(same_rows and explained), severity=AssetCheckSeverity.ERROR,
        description=f"{partition}: {signals.num_rows} signal rows for {len(doc_ids)} documents"
        f"{'' if same_rows else ' (not the same documents in the same order)'}, {drops} drops "
        f"and {decisions.num_rows} decision rows",
        metadata={"documents": MetadataValue.int(len(doc_ids)),
                  "signal_rows": MetadataValue.int(signals.num_rows),
                  "drops": MetadataValue.int(drops),
                  "decision_rows": MetadataValue.int(decisions.num_rows)},
    )


@asset_check(asset="heuristics", blocking=True, partitions_def=snapshot_partitions,
             description="The share of documents the default thresholds keep is within the "
             "pipeline's bounds (gates.heuristics_keep; a warning where gates.severity says "
             "warn). A curated source (filters: curated) is not judged by these web bounds: "
             "its selection ignores the heuristics verdict.")
def heuristics_keep_rate(
    context: AssetCheckExecutionContext, pipeline: PipelineResource, storage: StorageResource
) -> AssetCheckResult:
    partition = context.op_execution_context.partition_key
    config = pipeline.load()
    keep = PartitionLayout(storage.store, "heuristics", partition).read_table(["keep"])["keep"]
    rate = pc.mean(keep).as_py() if len(keep) else 0.0
    bounds = config.gates.heuristics_keep
    metadata = {"keep_rate": MetadataValue.float(round(rate, 4)),
                "min": MetadataValue.float(bounds.min), "max": MetadataValue.float(bounds.max)}
    curated = curated_source(config, partition)
    if curated:
        return AssetCheckResult(passed=True, metadata=metadata, description=(
            f"not judged: source {curated} has filters: curated, so the heuristics verdict "
            f"drops none of its documents (keep rate {rate:.2%})"))
    passed = bounds.min <= rate <= bounds.max
    return AssetCheckResult(
        passed=passed, severity=gate_severity(config.gates, "heuristics_keep_rate"),
        metadata=metadata,
        description=f"{partition}: the heuristics keep {rate:.2%} of the documents, "
        f"{'within' if passed else 'outside'} gates.heuristics_keep "
        f"[{bounds.min:.2%}, {bounds.max:.2%}]",
    )
