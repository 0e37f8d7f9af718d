"""Quality gates for `heuristics`: one row per document, keep rate within the bounds."""

import pyarrow.compute as pc
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
from checks.streams import SequenceComparison, Tally, iter_column, iter_parts, rows_and_nulls
from curation.graph import DOCUMENTS, HEURISTICS, MINHASH_SIGNATURES
from curation.partition import PartitionLayout
from partitions import snapshot_partitions
from resources import PipelineResource, StorageResource

# Signals that are shares of the document's characters, lines or words (None where undefined).
FRACTIONS = (
    "dup_para_frac", "dup_para_char_frac", "dup_line_frac", "dup_line_char_frac",
    *(f"top_{n}_gram_char_frac" for n in (2, 3, 4)),
    *(f"dup_{n}_gram_char_frac" for n in range(5, 11)),
    "gopher_bullet_lines_frac", "gopher_ellipsis_lines_frac", "gopher_alpha_words_frac",
    "gopher_alpha_words_frac_whitespace",
    "fineweb_line_punct_ratio", "fineweb_short_line_ratio", "fineweb_char_dup_ratio",
    "fineweb_list_ratio",
)
COUNTS = ("gopher_words", "gopher_stop_words", "c4_sentences", "c4_lines", "c4_lines_removed")

HEURISTICS_SUITES = (
    TableSuite("part", (*not_null("doc_id", "keep"), unique("doc_id"), of_type("keep", "bool"),
                        *(between(column, 0.0, 1.0) for column in FRACTIONS),
                        *(between(column, 0) for column in COUNTS)),
               optional=frozenset(FRACTIONS + COUNTS)),
    decisions_suite(HEURISTICS),
)
MINHASH_SIGNATURES_SUITES = (
    TableSuite("part", (*not_null("doc_id", "band_00"), unique("doc_id"),
                        of_type("band_00", "uint64"))),
)


@asset_check(asset=HEURISTICS, blocking=True, partitions_def=snapshot_partitions,
             description="Exactly one signals row per document, in the same order; every drop "
             "has a decision row naming its rule.")
def heuristics_cover_documents(
    context: AssetCheckExecutionContext, storage: StorageResource
) -> AssetCheckResult:
    partition = context.op_execution_context.partition_key
    store = storage.store
    documents = iter_column(PartitionLayout(store, DOCUMENTS, partition), "doc_id")
    layout = PartitionLayout(store, HEURISTICS, partition)
    kept = Tally(iter_parts(layout, ["doc_id", "keep"]),
                 lambda table: pc.sum(table["keep"]).as_py() or 0)
    same = SequenceComparison(kept.doc_ids(), documents)
    decisions, unexplained = rows_and_nulls(layout, "reason", "decisions")
    same_rows, signals = same.equal, same.left_rows
    drops = signals - kept.total
    explained = decisions == drops and unexplained == 0
    return AssetCheckResult(
        passed=bool(same_rows and explained), severity=AssetCheckSeverity.ERROR,
        description=f"{partition}: {signals} signal rows for {same.right_rows} documents"
        f"{'' if same_rows else ' (not the same documents in the same order)'}, {drops} drops "
        f"and {decisions} decision rows",
        metadata={"documents": MetadataValue.int(same.right_rows),
                  "signal_rows": MetadataValue.int(signals),
                  "drops": MetadataValue.int(drops),
                  "decision_rows": MetadataValue.int(decisions)},
    )


@asset_check(asset=HEURISTICS, blocking=True, partitions_def=snapshot_partitions,
             description="The share of documents the default thresholds keep is within the "
             "pipeline's bounds (gates.heuristics_keep; a warning where gates.severity says "
             "warn). A curated source (filters: curated) is not judged by these web bounds: "
             "its selection ignores the heuristics verdict.")
def heuristics_keep_rate(
    context: AssetCheckExecutionContext, pipeline: PipelineResource, storage: StorageResource
) -> AssetCheckResult:
    partition = context.op_execution_context.partition_key
    config = pipeline.load()
    rows = kept = judged = 0
    for table in iter_parts(PartitionLayout(storage.store, HEURISTICS, partition), ["keep"]):
        keep = table["keep"]
        rows, judged = rows + len(keep), judged + len(keep) - keep.null_count
        kept += pc.sum(keep).as_py() or 0
    # As pc.mean over the whole column: nulls left out.
    rate = (kept / judged if judged else None) if rows else 0.0
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


heuristics_contract = contract_check(HEURISTICS, HEURISTICS_SUITES, snapshot_partitions)
minhash_signatures_contract = contract_check(MINHASH_SIGNATURES, MINHASH_SIGNATURES_SUITES,
                                             snapshot_partitions)
