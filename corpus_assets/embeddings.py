"""`embeddings[snapshot]`: an all-MiniLM-L6-v2 vector per document of the scrubbed text."""

from dagster import AssetExecutionContext, DataVersion, MaterializeResult, MetadataValue, asset

from corpus_assets.gates import require_passing_gates
from corpus_assets.metadata import stage_metadata, task_logger
from corpus_assets.scrubbed import scrubbed
from curation.graph import SCRUBBED
from curation.stages.base import DocumentsInput
from curation.stages.embeddings import (
    DISABLED,
    KERNEL_VERSION,
    run_embeddings,
    skip_embeddings,
)
from partitions import snapshot_partitions
from resources import ComputeResource, PipelineResource, StorageResource


@asset(
    partitions_def=snapshot_partitions,
    deps=[scrubbed],
    group_name="scrub",
    code_version=KERNEL_VERSION,
    description="all-MiniLM-L6-v2 sentence vector (384 float16, unit length) of the first "
    "embeddings.max_tokens tokens of each document's scrubbed text, on a GPU where torch sees "
    "one; off unless embeddings.enabled.",
)
def embeddings(
    context: AssetExecutionContext,
    pipeline: PipelineResource,
    storage: StorageResource,
    compute: ComputeResource,
) -> MaterializeResult:
    partition = context.partition_key
    settings = pipeline.load().embeddings
    if not settings.enabled:
        manifest = skip_embeddings(storage.store, partition)
        return MaterializeResult(metadata={"skipped": MetadataValue.text(DISABLED)},
                                 data_version=DataVersion(manifest.version))
    require_passing_gates(context, SCRUBBED, partition)
    result = run_embeddings(DocumentsInput(storage.store, partition, columns=("doc_id",)),
                            settings, compute.workers, task_logger(context, partition))
    counts = result.stats.counts
    documents = result.stats.records_in
    metadata = stage_metadata(result.stats, result.wall_seconds)
    metadata["backends"] = MetadataValue.text(", ".join(
        f"{key.removeprefix('backend.')}: {value}" for key, value in sorted(counts.items())
        if key.startswith("backend.")))
    metadata["mean_tokens"] = MetadataValue.float(
        round(counts.get("tokens", 0) / documents, 1) if documents else 0.0)
    metadata["documents_at_window"] = MetadataValue.int(counts.get("documents_at_window", 0))
    metadata["max_tokens"] = MetadataValue.int(settings.max_tokens)
    return MaterializeResult(metadata=metadata,
                             data_version=DataVersion(result.manifest.data_version))
