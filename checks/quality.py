"""Quality gates for the classifier and its scores."""

import numpy as np
from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetCheckSeverity,
    MetadataValue,
    asset_check,
)

from checks.expectations import TableSuite, between, contract_check, not_null, of_type, unique
from checks.policy import gate_severity
from curation.graph import ALL, DOCUMENTS, QUALITY_CLASSIFIER, QUALITY_SCORES
from curation.partition import PartitionLayout
from curation.stages.quality import skipped_reason
from partitions import snapshot_partitions
from resources import PipelineResource, StorageResource

# A partition skipped for want of a classifier holds an empty table, which meets it too.
QUALITY_SCORES_SUITES = (
    TableSuite("part", (*not_null("doc_id", "language", "quality_score"), unique("doc_id"),
                        between("quality_score", 0.0, 1.0), of_type("quality_score", "float32"))),
)


@asset_check(asset=QUALITY_CLASSIFIER, blocking=True,
             description="Held-out ROC AUC at least gates.min_classifier_roc_auc (a warning "
             "where gates.severity says warn).")
def quality_classifier_separates(
    pipeline: PipelineResource, storage: StorageResource
) -> AssetCheckResult:
    skipped = skipped_reason(storage.store, QUALITY_CLASSIFIER, ALL)
    if skipped:
        return _nothing_to_check(skipped)
    manifest = PartitionLayout(storage.store, QUALITY_CLASSIFIER, ALL).complete_manifest()
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


@asset_check(asset=QUALITY_SCORES, blocking=True, partitions_def=snapshot_partitions,
             description="One finite score in [0, 1] per document, in document order.")
def quality_scores_cover_documents(
    context: AssetCheckExecutionContext, storage: StorageResource
) -> AssetCheckResult:
    partition = context.op_execution_context.partition_key
    skipped = skipped_reason(storage.store, QUALITY_SCORES, partition)
    if skipped:
        return _nothing_to_check(skipped)
    doc_ids = PartitionLayout(storage.store, DOCUMENTS, partition).read_table(["doc_id"])
    scores = PartitionLayout(storage.store, QUALITY_SCORES, partition).read_table(
        ["doc_id", "quality_score"])
    values = scores["quality_score"].to_numpy()
    valid = bool(np.isfinite(values).all() and (values >= 0).all() and (values <= 1).all())
    same = scores["doc_id"].equals(doc_ids["doc_id"])
    return AssetCheckResult(passed=valid and same, severity=AssetCheckSeverity.ERROR,
                            description=f"{QUALITY_SCORES}[{partition}]: {len(values)} scores for "
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


quality_scores_contract = contract_check(QUALITY_SCORES, QUALITY_SCORES_SUITES,
                                         snapshot_partitions)
