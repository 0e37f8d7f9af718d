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
from curation.graph import ALL, DECONTAMINATED, DOCUMENTS, EVAL_SUITE
from curation.partition import PartitionLayout
from curation.stages.decontamination import CONTAMINATED
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
    partition = context.op_execution_context.partition_key
    store = storage.store
    doc_ids = PartitionLayout(store, DOCUMENTS, partition).read_table(["doc_id"])["doc_id"]
    layout = PartitionLayout(store, DECONTAMINATED, partition)
    rows = layout.read_table(["doc_id", "items"])
    hits = layout.read_table(["doc_id", "benchmark", "item_id"], name="hits")
    decisions = layout.read_table(["doc_id", "detail"], name="decisions")
    items = pc.sum(rows["items"]).as_py() or 0
    passed = (rows["doc_id"].equals(doc_ids) and hits.num_rows == items == decisions.num_rows
              and decisions["detail"].null_count == 0)
    return AssetCheckResult(
        passed=bool(passed), severity=AssetCheckSeverity.ERROR,
        description=f"{DECONTAMINATED}[{partition}]: {rows.num_rows} rows for {len(doc_ids)} "
        f"documents, {items} items found, {hits.num_rows} hit rows, {decisions.num_rows} "
        "decisions",
        metadata={"documents": MetadataValue.int(len(doc_ids)),
                  "hits": MetadataValue.int(hits.num_rows),
                  "decisions": MetadataValue.int(decisions.num_rows)},
    )


decontaminated_contract = contract_check(DECONTAMINATED, DECONTAMINATED_SUITES,
                                         snapshot_partitions)
