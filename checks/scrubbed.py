"""Quality gates for `scrubbed`: one row per document, and no residual PII in a re-scan."""

import pyarrow.compute as pc
from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetCheckSeverity,
    MetadataValue,
    asset_check,
)

from checks.expectations import (
    TEXT_CHARS,
    TableSuite,
    between,
    contract_check,
    decisions_suite,
    in_set,
    not_null,
    unique,
)
from checks.rescan import residual_pii_result, sample_texts
from curation.graph import DOCUMENTS, SCRUBBED
from curation.partition import PartitionLayout
from partitions import snapshot_partitions
from resources import ComputeResource, PipelineResource, StorageResource

SCRUBBED_SUITES = (
    TableSuite("part", (*not_null("doc_id", "text_chars", "lines_removed", "cuts",
                                  "pii_replaced"),
                        unique("doc_id"), between("text_chars", 0), between("lines_removed", 0),
                        between("cuts", 0), between("pii_replaced", 0)),
               derived=(TEXT_CHARS,)),
    TableSuite("edits", (*not_null("doc_id", "kind"), in_set("stage", [SCRUBBED]))),
    decisions_suite(SCRUBBED, ["empty_after_edits"]),
)


@asset_check(asset=SCRUBBED, blocking=True, partitions_def=snapshot_partitions,
             description="Exactly one row per document, in the same order; every document the "
             "edits leave empty has an empty_after_edits decision.")
def scrubbed_covers_documents(
    context: AssetCheckExecutionContext, storage: StorageResource
) -> AssetCheckResult:
    partition = context.op_execution_context.partition_key
    store = storage.store
    doc_ids = PartitionLayout(store, DOCUMENTS, partition).read_table(["doc_id"])["doc_id"]
    layout = PartitionLayout(store, SCRUBBED, partition)
    rows = layout.read_table(["doc_id", "text"])
    decisions = layout.read_table(["doc_id"], name="decisions")
    emptied = pc.sum(pc.equal(pc.utf8_trim_whitespace(rows["text"]), "")).as_py() or 0
    passed = rows["doc_id"].equals(doc_ids) and decisions.num_rows <= emptied
    return AssetCheckResult(
        passed=bool(passed), severity=AssetCheckSeverity.ERROR,
        description=f"{SCRUBBED}[{partition}]: {rows.num_rows} rows for {len(doc_ids)} documents, "
        f"{emptied} left empty and {decisions.num_rows} empty_after_edits decisions",
        metadata={"documents": MetadataValue.int(len(doc_ids)),
                  "rows": MetadataValue.int(rows.num_rows),
                  "empty_after_edits": MetadataValue.int(decisions.num_rows)},
    )


@asset_check(asset=SCRUBBED, blocking=True, partitions_def=snapshot_partitions,
             description="A re-scan of a sample of the scrubbed text, by a PII matcher written "
             "independently of the scrubber, finds nothing of the enabled types.")
def scrubbed_has_no_residual_pii(
    context: AssetCheckExecutionContext, pipeline: PipelineResource, storage: StorageResource,
    compute: ComputeResource,
) -> AssetCheckResult:
    partition = context.op_execution_context.partition_key
    rows = PartitionLayout(storage.store, SCRUBBED, partition).read_table(["doc_id", "text"])
    sample = sample_texts(rows["doc_id"].to_pylist(), rows["text"].to_pylist())
    return residual_pii_result(sample, pipeline.load().pii, compute.workers)


scrubbed_contract = contract_check(SCRUBBED, SCRUBBED_SUITES, snapshot_partitions)
