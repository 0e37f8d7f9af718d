"""Quality gates for `scrubbed`: one row per document, and no residual PII in a re-scan."""

import pyarrow.compute as pc
from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetCheckSeverity,
    MetadataValue,
    asset_check,
)

from checks.rescan import residual_pii_result, sample_texts
from curation.partition import PartitionLayout
from partitions import snapshot_partitions
from resources import ComputeResource, PipelineResource, StorageResource


@asset_check(asset="scrubbed", blocking=True, partitions_def=snapshot_partitions,
             description="Exactly one row per document, in the same order; every document the "
             "edits leave empty has an empty_after_edits decision.")
def scrubbed_covers_documents(
    context: AssetCheckExecutionContext, storage: StorageResource
) -> AssetCheckResult:
    partition = context.op_execution_context.partition_key
    store = storage.store
    doc_ids = PartitionLayout(store, "documents", partition).read_table(["doc_id"])["doc_id"]
    layout = PartitionLayout(store, "scrubbed", partition)
    rows = layout.read_table(["doc_id", "text"])
    decisions = layout.read_table(["doc_id"], name="decisions")
    emptied = pc.sum(pc.equal(pc.utf8_trim_whitespace(rows["text"]), "")).as_py() or 0
    passed = rows["doc_id"].equals(doc_ids) and decisions.num_rows <= emptied
    return AssetCheckResult(
        passed=bool(passed), severity=AssetCheckSeverity.ERROR,
        description=f"scrubbed[{partition}]: {rows.num_rows} rows for {len(doc_ids)} documents, "
        f"{emptied} left empty and {decisions.num_rows} empty_after_edits decisions",
        metadata={"documents": MetadataValue.int(len(doc_ids)),
                  "rows": MetadataValue.int(rows.num_rows),
                  "empty_after_edits": MetadataValue.int(decisions.num_rows)},
    )


@asset_check(asset="scrubbed", blocking=True, partitions_def=snapshot_partitions,
             description="A re-scan of a sample of the scrubbed text, by a PII matcher written "
             "independently of the scrubber, finds nothing of the enabled types.")
def scrubbed_has_no_residual_pii(
    context: AssetCheckExecutionContext, pipeline: PipelineResource, storage: StorageResource,
    compute: ComputeResource,
) -> AssetCheckResult:
    partition = context.op_execution_context.partition_key
    rows = PartitionLayout(storage.store, "scrubbed", partition).read_table(["doc_id", "text"])
    sample = sample_texts(rows["doc_id"].to_pylist(), rows["text"].to_pylist())
    return residual_pii_result(sample, pipeline.load().pii, compute.workers)
