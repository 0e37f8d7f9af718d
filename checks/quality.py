"""Quality gates for the classifier and its scores."""

import numpy as np
import pyarrow as pa
from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetCheckSeverity,
    MetadataValue,
    asset_check,
)

from checks.expectations import TableSuite, between, contract_check, not_null, of_type, unique
from checks.policy import gate_severity, nothing_to_check
from checks.streams import SequenceComparison, Tally, iter_column, iter_parts
from curation.graph import ALL, DOCUMENTS, QUALITY_CLASSIFIER, QUALITY_SCORES
from curation.partition import PartitionLayout
from curation.stages.base import skipped_reason
from partitions import snapshot_partitions
from resources import PipelineResource, StorageResource

# A partition skipped for want of a classifier holds an empty table, which meets it too.
QUALITY_SCORES_SUITES = (
    TableSuite("part", (*not_null("doc_id", "language", "quality_score"), unique("doc_id"),
                        between("quality_score", 0.0, 1.0), of_type("quality_score", "float32"),
                        between("neural_score", 0.0, 1.0), between("combined_score", 0.0, 1.0))),
)


@asset_check(asset=QUALITY_CLASSIFIER, blocking=True,
             description="Held-out ROC AUC at least gates.min_classifier_roc_auc (a warning "
             "where gates.severity says warn).")
def quality_classifier_separates(
    pipeline: PipelineResource, storage: StorageResource
) -> AssetCheckResult:
    skipped = skipped_reason(storage.store, QUALITY_CLASSIFIER, ALL)
    if skipped:
        return nothing_to_check(skipped)
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


@asset_check(asset=QUALITY_CLASSIFIER, blocking=True,
             description="The neural head's held-out ROC AUC (on the fastText classifier's "
             "held-out documents) at least gates.min_classifier_roc_auc; passes with nothing "
             "to judge when embeddings are off.")
def quality_classifier_neural_separates(
    pipeline: PipelineResource, storage: StorageResource
) -> AssetCheckResult:
    skipped = skipped_reason(storage.store, QUALITY_CLASSIFIER, ALL)
    manifest = None if skipped else \
        PartitionLayout(storage.store, QUALITY_CLASSIFIER, ALL).complete_manifest()
    neural = manifest.extra.get("neural") if manifest else None
    if neural is None:
        return nothing_to_check(skipped or "embeddings.enabled is false: no neural head")
    gates = pipeline.load().gates
    auc, floor = neural["roc_auc"], gates.min_classifier_roc_auc
    return AssetCheckResult(
        passed=auc >= floor, severity=gate_severity(gates, "quality_classifier_neural_separates"),
        description=f"neural head held-out ROC AUC {auc:.3f} "
        f"(fastText {neural['fasttext_roc_auc']:.3f}, combined "
        f"{neural['combined_roc_auc']:.3f}), {'at least' if auc >= floor else 'below'} "
        f"gates.min_classifier_roc_auc {floor}",
        metadata={"roc_auc": MetadataValue.float(round(auc, 4)),
                  "fasttext_roc_auc": MetadataValue.float(round(neural["fasttext_roc_auc"], 4)),
                  "combined_roc_auc": MetadataValue.float(round(neural["combined_roc_auc"], 4)),
                  "min": MetadataValue.float(floor)})


@asset_check(asset=QUALITY_SCORES, blocking=True, partitions_def=snapshot_partitions,
             description="One finite score in [0, 1] per document, in document order.")
def quality_scores_cover_documents(
    context: AssetCheckExecutionContext, storage: StorageResource
) -> AssetCheckResult:
    partition = context.op_execution_context.partition_key
    skipped = skipped_reason(storage.store, QUALITY_SCORES, partition)
    if skipped:
        return nothing_to_check(skipped)
    documents = iter_column(PartitionLayout(storage.store, DOCUMENTS, partition), "doc_id")
    scores = Scores()
    tally = Tally(iter_parts(PartitionLayout(storage.store, QUALITY_SCORES, partition),
                             ["doc_id", "quality_score"]), scores.add)
    same = SequenceComparison(tally.doc_ids(), documents)
    valid = tally.total == 0
    return AssetCheckResult(passed=valid and same.equal, severity=AssetCheckSeverity.ERROR,
                            description=f"{QUALITY_SCORES}[{partition}]: {scores.count} scores "
                            f"for {same.right_rows} documents"
                            + ("" if valid else ", some not a finite number in [0, 1]")
                            + ("" if same.equal else ", not in document order"),
                            metadata={"scores": MetadataValue.int(scores.count),
                                      "mean": MetadataValue.float(scores.mean())})


class Scores:
    """Count and sum of the scores a part at a time; `add` returns the part's invalid ones."""

    def __init__(self) -> None:
        self.count, self.sum = 0, 0.0

    def add(self, table: pa.Table) -> int:
        values = table["quality_score"].to_numpy()
        self.count += len(values)
        self.sum += float(values.sum(dtype=np.float64))
        return int((~(np.isfinite(values) & (values >= 0) & (values <= 1))).sum())

    def mean(self) -> float:
        return round(self.sum / self.count, 4) if self.count else 0


quality_scores_contract = contract_check(QUALITY_SCORES, QUALITY_SCORES_SUITES,
                                         snapshot_partitions)
