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
from checks.rescan import chosen_texts, residual_pii_result, sample_ids
from checks.streams import SequenceComparison, Tally, count_rows, iter_column, iter_parts
from curation.graph import DOCUMENTS, SCRUBBED
from curation.partition import PartitionLayout
from curation.storage import Store
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
    return scrubbed_coverage(storage.store, context.op_execution_context.partition_key)


def scrubbed_coverage(store: Store, partition: str) -> AssetCheckResult:
    """`scrubbed_covers_documents` of a partition: doc_ids compared a part at a time with the
    documents', the text read a part at a time."""
    documents = iter_column(PartitionLayout(store, DOCUMENTS, partition), "doc_id")
    layout = PartitionLayout(store, SCRUBBED, partition)
    # The text comes a part at a time, only to count the documents left empty.
    tally = Tally(iter_parts(layout, ["doc_id", "text"]), lambda table: pc.sum(
        pc.equal(pc.utf8_trim_whitespace(table["text"]), "")).as_py() or 0)
    same = SequenceComparison(tally.doc_ids(), documents)
    emptied = tally.total
    decisions = count_rows(layout, "decisions")
    passed = same.equal and decisions <= emptied
    return AssetCheckResult(
        passed=bool(passed), severity=AssetCheckSeverity.ERROR,
        description=f"{SCRUBBED}[{partition}]: {same.left_rows} rows for {same.right_rows} "
        f"documents, {emptied} left empty and {decisions} empty_after_edits decisions",
        metadata={"documents": MetadataValue.int(same.right_rows),
                  "rows": MetadataValue.int(same.left_rows),
                  "empty_after_edits": MetadataValue.int(decisions)},
    )



@asset_check(asset=SCRUBBED, blocking=True, partitions_def=snapshot_partitions,
             description="A re-scan of a sample of the scrubbed text, by a PII matcher written "
             "independently of the scrubber, finds nothing of the enabled types.")
def scrubbed_has_no_residual_pii(
    context: AssetCheckExecutionContext, pipeline: PipelineResource, storage: StorageResource,
    compute: ComputeResource,
) -> AssetCheckResult:
    sample = scrubbed_sample(storage.store, context.op_execution_context.partition_key)
    return residual_pii_result(sample, pipeline.load().pii, compute.workers)


def scrubbed_sample(store: Store, partition: str) -> list[tuple[str, str]]:
    """(doc_id, text) of the re-scan's sample of the partition, in row order: a pass over the
    doc_ids chooses it, a second keeps its texts; one part and the sample are held."""
    layout = PartitionLayout(store, SCRUBBED, partition)
    chosen = sample_ids(chunk.to_pylist() for chunk in iter_column(layout, "doc_id"))
    return chosen_texts(chosen, iter_parts(layout, ["doc_id", "text"]))


scrubbed_contract = contract_check(SCRUBBED, SCRUBBED_SUITES, snapshot_partitions)
