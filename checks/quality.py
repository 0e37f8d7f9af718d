"""Quality gates for the classifier and its scores."""

import numpy as np
from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetCheckSeverity,
    MetadataValue,
    asset_check,
)

from corpus_assets.gates import gate_severity
from corpus_assets.quality import quality_classifier, quality_scores
from curation.partition import PartitionLayout
from curation.quality_stage import CLASSIFIER, GLOBAL_PARTITION, SCORES, skipped_reason
from partitions import snapshot_partitions
from resources import PipelineResource, StorageResource


@asset_check(asset=quality_classifier, blocking=True,
             description="Held-out ROC AUC at least gates.min_classifier_roc_auc (a warning "
             "where gates.severity says warn).")
def quality_classifier_separates(
    pipeline: PipelineResource, storage: StorageResource
) -> AssetCheckResult:
    skipped = skipped_reason(storage.store, CLASSIFIER, GLOBAL_PARTITION)
    if skipped:
        return _nothing_to_check(skipped)
    manifest = PartitionLayout(storage.store, CLASSIFIER, GLOBAL_PARTITION).complete_manifest()
    auc = manifest.extra["classifier"]["roc_auc"]
    gates = pipeline.load().gates
    floor = gates.min_classifier_roc_auc
    return AssetCheckResult(passed=auc >= floor,
                            severity=gate_severity(gates, "quality_classifier_separates"),
                            description=f"held-out ROC AUC {auc:.3f}, "
                            f"{'at least' if auc >= floor else 'below'} "
                            f"gates.min_classifier_roc_auc {floor}",
                            metadata={"roc_auc": MetadataValue.float(round(auc, 4)),
                                      "min": MetadataValue.float(floor)})


@asset_check(asset=quality_scores, blocking=True, partitions_def=snapshot_partitions,
             description="One finite score in [0, 1] per document, in document order.")
def quality_scores_cover_documents(
    context: AssetCheckExecutionContext, storage: StorageResource
) -> AssetCheckResult:
    partition = context.op_execution_context.partition_key
    skipped = skipped_reason(storage.store, SCORES, partition)
    if skipped:
        return _nothing_to_check(skipped)
    doc_ids = PartitionLayout(storage.store, "documents", partition).read_table(["doc_id"])
    scores = PartitionLayout(storage.store, SCORES, partition).read_table(
        ["doc_id", "quality_score"])
    values = scores["quality_score"].to_numpy()
    valid = bool(np.isfinite(values).all() and (values >= 0).all() and (values <= 1).all())
    same = scores["doc_id"].equals(doc_ids["doc_id"])
    return AssetCheckResult(passed=valid and same, severity=AssetCheckSeverity.ERROR,
                            description=f"quality_scores[{partition}]: {len(values)} scores for "
                            f"{len(doc_ids)} documents"
                            + ("" if valid else ", some not a finite number in [0, 1]")
                            + ("" if same else ", not in document order"),
                            metadata={"scores": MetadataValue.int(len(values)),
                                      "mean": MetadataValue.float(
                                          round(float(values.mean()), 4) if len(values) else 0)})


def _nothing_to_check(reason: str) -> AssetCheckResult:
    """No classifier is configured (issue 18): nothing to gate, and the reason says why."""
    return AssetCheckResult(passed=True, description=f"skipped: {reason}",
                            metadata={"skipped": MetadataValue.text(reason)})
