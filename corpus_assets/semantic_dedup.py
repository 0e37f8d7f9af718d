"""`semantic_dedup[snapshot]`: SemDeDup groups over the embeddings of one partition."""

from dagster import AssetExecutionContext, DataVersion, MaterializeResult, MetadataValue, asset

from corpus_assets.dedup import cluster_metadata
from corpus_assets.documents import documents
from corpus_assets.embeddings import embeddings
from corpus_assets.gates import require_passing_gates
from corpus_assets.metadata import stage_metadata
from curation.graph import DOCUMENTS, EMBEDDINGS
from curation.semantic_dedup import KERNEL_VERSION
from curation.stages.base import DocumentsInput
from curation.stages.semantic_dedup import DISABLED, run_semantic_dedup, skip_semantic_dedup
from partitions import snapshot_partitions
from resources import ComputeResource, PipelineResource, StorageResource


@asset(
    partitions_def=snapshot_partitions,
    deps=[documents, embeddings],
    group_name="dedup",
    code_version=KERNEL_VERSION,
    description="Semantic duplicates (SemDeDup): k-means over the embeddings, pairs inside a "
    "cluster at or above semantic_dedup.threshold cosine, their connected components; each "
    "group keeps its longest document. Applied by the mix only when a recipe sets "
    "selection.semantic_dedup.",
)
def semantic_dedup(
    context: AssetExecutionContext,
    pipeline: PipelineResource,
    storage: StorageResource,
    compute: ComputeResource,
) -> MaterializeResult:
    partition = context.partition_key
    config = pipeline.load()
    if not config.embeddings.enabled:
        manifest = skip_semantic_dedup(storage.store, partition)
        return MaterializeResult(metadata={"skipped": MetadataValue.text(DISABLED)},
                                 data_version=DataVersion(manifest.version))
    require_passing_gates(context, DOCUMENTS, partition)
    require_passing_gates(context, EMBEDDINGS, partition)
    settings = config.semantic_dedup
    result = run_semantic_dedup(DocumentsInput(storage.store, partition), settings,
                                compute.workers)
    counts = result.stats.counts
    metadata = stage_metadata(result.stats, result.wall_seconds)
    metadata.update(cluster_metadata(result.stats))
    metadata["kmeans_clusters"] = MetadataValue.int(counts["kmeans_clusters"])
    metadata["fit_sample"] = MetadataValue.int(counts["fit_sample"])
    metadata["similar_pairs"] = MetadataValue.int(counts["candidate_pairs"])
    metadata["threshold"] = MetadataValue.float(settings.threshold)
    return MaterializeResult(metadata=metadata,
                             data_version=DataVersion(result.manifest.data_version))
