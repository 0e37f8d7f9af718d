"""Dedup at every granularity: `url_dedup`, `exact_dedup`, `dedup_clusters` (MinHash LSH),
`line_dedup` (boilerplate lines as edits) per snapshot, and `cross_dedup` across partitions."""

import time

from dagster import (
    AssetExecutionContext,
    DataVersion,
    MaterializeResult,
    MetadataValue,
    asset,
)

from corpus_assets.documents import documents
from corpus_assets.gates import require_passing_gates
from corpus_assets.metadata import stage_metadata
from curation.graph import DOCUMENTS, MINHASH_SIGNATURES
from curation.partition import PartitionLayout
from curation.stages.base import DocumentsInput
from curation.stages.dedup import (
    EXACT,
    KERNEL_VERSION,
    LINES,
    NEAR,
    URL,
    run_cross_dedup,
    run_partition_dedup,
)
from curation.stats import StageStats
from partitions import every_partition, snapshot_partitions
from resources import ComputeResource, PipelineResource, StorageResource


def cluster_metadata(stats: StageStats) -> dict:
    sizes = sorted((int(key.split(".")[1]), n) for key, n in stats.counts.items()
                   if key.startswith("cluster_size."))
    return {
        "clusters": MetadataValue.int(stats.counts["clusters"]),
        "hot_buckets": MetadataValue.int(stats.counts["hot_buckets"]),
        "capped_members": MetadataValue.int(stats.counts["capped_members"]),
        "component_rounds": MetadataValue.int(stats.counts["component_rounds"]),
        "cluster_sizes": MetadataValue.md(
            "| cluster size | documents |\n| ---: | ---: |\n"
            + "\n".join(f"| {size} | {n} |" for size, n in sizes)),
    }


def _partition_stage(stage: str, upstream: list[str]):  # noqa: ANN202 - a Dagster asset factory
    def materialize_stage(context: AssetExecutionContext, pipeline: PipelineResource,
                          storage: StorageResource, compute: ComputeResource) -> MaterializeResult:
        partition = context.partition_key
        require_passing_gates(context, DOCUMENTS, partition)
        versions = {name: PartitionLayout(storage.store, name, partition)
                    .complete_manifest().data_version for name in upstream}
        result = run_partition_dedup(DocumentsInput(storage.store, partition), stage,
                                     pipeline.load().dedup, versions, compute.workers)
        metadata = stage_metadata(result.stats, result.wall_seconds)
        if stage == LINES:
            for key in ("lines", "lines_removed", "frequent_lines", "documents_edited"):
                metadata[key] = MetadataValue.int(result.stats.counts[key])
        else:
            metadata.update(cluster_metadata(result.stats))
        return MaterializeResult(metadata=metadata,
                                 data_version=DataVersion(result.manifest.data_version))

    return materialize_stage


DESCRIPTIONS = {
    URL: "Clusters of documents sharing a canonical URL (scheme and host case, default ports, "
         "fragments, tracking parameters, trailing slash and index pages, IDNA).",
    EXACT: "Clusters of documents whose normalised text hashes alike.",
    NEAR: "Near-duplicate clusters: documents sharing a MinHash LSH band bucket, joined by "
          "connected components out of core; hot buckets capped.",
    LINES: "Normalised lines that recur in more than K documents, recorded as edits; documents "
           "they would leave empty get an empty_after_edits drop.",
}


def _asset(stage: str, deps: list, upstream: list[str]):  # noqa: ANN202
    return asset(name=stage, partitions_def=snapshot_partitions, deps=deps, group_name="dedup",
                 code_version=KERNEL_VERSION, description=DESCRIPTIONS[stage])(
        _partition_stage(stage, upstream))


url_dedup = _asset(URL, [documents], [])
exact_dedup = _asset(EXACT, [documents], [])
dedup_clusters = _asset(NEAR, [documents, MINHASH_SIGNATURES], [MINHASH_SIGNATURES])
line_dedup = _asset(LINES, [documents], [])


@asset(
    deps=[every_partition(url_dedup), every_partition(exact_dedup),
          every_partition(dedup_clusters)],
    group_name="models",
    code_version=KERNEL_VERSION,
    description="Duplicate links across partitions (web snapshots and curated sources) through a "
    "URL index, text hashes and, optionally, LSH band buckets; adding a partition processes only "
    "the new one against the index.",
)
def cross_dedup(context: AssetExecutionContext, pipeline: PipelineResource,
                storage: StorageResource, compute: ComputeResource) -> MaterializeResult:
    started = time.perf_counter()
    config = pipeline.load()
    store = storage.store
    partitions = [p for p in config.partition_keys()
                  if PartitionLayout(store, DOCUMENTS, p).is_complete()]
    run = run_cross_dedup(store, partitions, config.dedup, context.run.run_id,
                          workers=compute.workers)
    metadata = stage_metadata(run.stats, time.perf_counter() - started)
    metadata.update(cluster_metadata(run.stats))
    metadata["partitions_added"] = MetadataValue.json(run.added)
    metadata["partitions_reused"] = MetadataValue.json(run.reused)
    metadata["new_cross_links"] = MetadataValue.int(run.links)
    return MaterializeResult(metadata=metadata,
                             data_version=DataVersion(run.manifest.data_version))
