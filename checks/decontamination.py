"""Quality gates for `eval_suite` and `decontaminated`."""

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
from checks.streams import (
    SequenceComparison,
    Tally,
    count_rows,
    iter_column,
    iter_parts,
    rows_and_nulls,
)
from curation.graph import ALL, DECONTAMINATED, DOCUMENTS, EVAL_SUITE
from curation.partition import PartitionLayout
from curation.stages.decontamination import CONTAMINATED
from curation.storage import Store
from partitions import snapshot_partitions
from resources import PipelineResource, StorageResource

DECONTAMINATED_SUITES = (
    TableSuite("part", (*not_null("doc_id", "contaminated", "items"), unique("doc_id"),
                        of_type("contaminated", "bool"), between("items", 0))),
    TableSuite("hits", (*not_null("doc_id", "benchmark", "item_id", "ngrams", "start", "end"),
                        between("ngrams", 1), between("start", 0), between("end", 1))),
    TableSuite("decisions", (*decisions_suite(DECONTAMINATED, [CONTAMINATED]).expectations,
                             *not_null("detail"))),
)


@asset_check(asset=EVAL_SUITE, blocking=True,
             description="Every benchmark pipeline.yaml lists contributed items and n-grams.")
def eval_suite_covers_every_benchmark(
    pipeline: PipelineResource, storage: StorageResource
) -> AssetCheckResult:
    manifest = PartitionLayout(storage.store, EVAL_SUITE, ALL).complete_manifest()
    per = manifest.extra["index"]["per_benchmark"]
    names = [benchmark.name for benchmark in pipeline.load().decontamination.benchmarks]
    empty = [name for name in names if per.get(name, {}).get("ngrams", 0) == 0]
    return AssetCheckResult(
        passed=not empty, severity=AssetCheckSeverity.ERROR,
        description=f"{len(names) - len(empty)} of {len(names)} benchmarks contribute n-grams"
        + (f"; none from {', '.join(empty)}" if empty else ""),
        metadata={"benchmarks": MetadataValue.int(len(names)),
                  "without_ngrams": MetadataValue.json(empty)},
    )


@asset_check(asset=DECONTAMINATED, blocking=True, partitions_def=snapshot_partitions,
             description="Exactly one row per document, in the same order; one hit row and one "
             "decision naming benchmark and item per (document, item) found.")
def decontaminated_covers_documents(
    context: AssetCheckExecutionContext, storage: StorageResource
) -> AssetCheckResult:
    return decontaminated_coverage(storage.store, context.op_execution_context.partition_key)


def decontaminated_coverage(store: Store, partition: str) -> AssetCheckResult:
    """`decontaminated_covers_documents` of a partition, a part at a time."""
    documents = iter_column(PartitionLayout(store, DOCUMENTS, partition), "doc_id")
    layout = PartitionLayout(store, DECONTAMINATED, partition)
    found = Tally(iter_parts(layout, ["doc_id", "items"]),
                  lambda table: pc.sum(table["items"]).as_py() or 0)
    hits = count_rows(layout, "hits")
    same = SequenceComparison(found.doc_ids(), documents)
    items = found.total
    decided, unexplained = rows_and_nulls(layout, "detail", "decisions")
    passed = same.equal and hits == items == decided and unexplained == 0
    return AssetCheckResult(
        passed=bool(passed), severity=AssetCheckSeverity.ERROR,
        description=f"{DECONTAMINATED}[{partition}]: {same.left_rows} rows for "
        f"{same.right_rows} documents, {items} items found, {hits} hit rows, {decided} "
        "decisions",
        metadata={"documents": MetadataValue.int(same.right_rows),
                  "hits": MetadataValue.int(hits),
                  "decisions": MetadataValue.int(decided)},
    )



decontaminated_contract = contract_check(DECONTAMINATED, DECONTAMINATED_SUITES,
                                         snapshot_partitions)
