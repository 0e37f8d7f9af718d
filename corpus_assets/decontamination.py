"""`eval_suite` (the pinned benchmark n-gram index) and `decontaminated[snapshot]`."""

from collections import Counter

from dagster import (
    AssetExecutionContext,
    DataVersion,
    MaterializeResult,
    MetadataValue,
    asset,
)

from corpus_assets.documents import documents
from corpus_assets.gates import require_passing_gates
from corpus_assets.metadata import counter_table, stage_metadata, task_logger
from curation.graph import DOCUMENTS
from curation.stages.base import DocumentsInput
from curation.stages.decontamination import (
    ASSET,
    EVAL_SUITE,
    KERNEL_VERSION,
    build_eval_suite,
    run_decontaminated,
)
from partitions import snapshot_partitions
from resources import ComputeResource, PipelineResource, StorageResource


@asset(
    name=EVAL_SUITE,
    group_name="models",
    code_version=KERNEL_VERSION,
    description="The benchmark items pipeline.yaml lists (prompt with gold answer, passages "
    "included), normalised into word n-grams; pinned by the content hash of the files and "
    "settings.",
)
def eval_suite(context: AssetExecutionContext, pipeline: PipelineResource,
               storage: StorageResource) -> MaterializeResult:
    with storage.locked(context.run.run_id, EVAL_SUITE):
        build = build_eval_suite(storage.store, pipeline.load().decontamination)
    index = build.metadata
    per = index["per_benchmark"]
    table = "\n".join(f"| {name} | {row['items']} | {row['short_items']} | {row['ngrams']} |"
                      for name, row in sorted(per.items()))
    context.log.info(f"eval_suite {'built' if build.rebuilt else 'unchanged'}: "
                     f"{index['items']} items, {index['keys']} n-grams")
    return MaterializeResult(
        metadata={
            "ngram": MetadataValue.int(index["ngram"]),
            "items": MetadataValue.int(index["items"]),
            "ngrams": MetadataValue.int(index["keys"]),
            "index_bytes": MetadataValue.int(index["index_bytes"]),
            "rebuilt": MetadataValue.bool(build.rebuilt),
            "per_benchmark": MetadataValue.md(
                "| benchmark | items | matched whole (short) | n-grams |\n"
                "| --- | ---: | ---: | ---: |\n" + table if per else "no benchmarks configured"),
        },
        data_version=DataVersion(build.manifest.data_version),
    )


@asset(
    name=ASSET,
    partitions_def=snapshot_partitions,
    deps=[documents, eval_suite],
    group_name="decontamination",
    code_version=KERNEL_VERSION,
    description="Documents sharing at least min_hits eval n-grams (short items matched whole): "
    "one decision per (document, item) naming the benchmark, the item and the matched span.",
)
def decontaminated(
    context: AssetExecutionContext,
    pipeline: PipelineResource,
    storage: StorageResource,
    compute: ComputeResource,
) -> MaterializeResult:
    partition = context.partition_key
    require_passing_gates(context, DOCUMENTS, partition)
    config = pipeline.load()
    result = run_decontaminated(DocumentsInput(storage.store, partition),
                                config.decontamination, compute.workers,
                                task_logger(context, partition), code=config.is_code(partition))
    stats = result.stats
    metadata = stage_metadata(stats, result.wall_seconds)
    documents_hit = Counter({key.removeprefix("documents."): n
                             for key, n in stats.counts.items() if key.startswith("documents.")})
    metadata["documents_hit_per_benchmark"] = counter_table(documents_hit, "benchmark")
    for key, n in sorted(stats.counts.items()):
        if key.startswith("hits."):
            metadata[key] = MetadataValue.int(n)
    metadata["contaminated_documents"] = MetadataValue.int(stats.rejects.get("contaminated", 0))
    return MaterializeResult(metadata=metadata,
                             data_version=DataVersion(result.manifest.data_version))
