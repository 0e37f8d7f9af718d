"""`topic_model` (one for the pipeline) and `domains[snapshot]`: topic domains over the
embeddings."""

from dagster import AssetExecutionContext, DataVersion, MaterializeResult, MetadataValue, asset

from corpus_assets.gates import require_passing_gates
from corpus_assets.metadata import stage_metadata, task_logger
from curation.domains import KERNEL_VERSION
from curation.graph import ALL, EMBEDDINGS, SCRUBBED, TOPIC_MODEL
from curation.partition import PartitionLayout
from curation.stages.base import DocumentsInput
from curation.stages.domains import (
    DISABLED,
    run_domains,
    run_topic_model,
    skip_domains,
    skip_topic_model,
)
from partitions import every_partition, snapshot_partitions
from resources import ComputeResource, PipelineResource, StorageResource


def _skipped(version: str) -> MaterializeResult:
    return MaterializeResult(metadata={"skipped": MetadataValue.text(DISABLED)},
                             data_version=DataVersion(version))


@asset(
    deps=[every_partition(EMBEDDINGS), every_partition(SCRUBBED)],
    group_name="models",
    code_version=KERNEL_VERSION,
    description="Topic domains: k-means centroids (domains.count) of a sample of the training "
    "snapshots' embeddings, each domain described by the terms that set its documents apart.",
)
def topic_model(context: AssetExecutionContext, pipeline: PipelineResource,
                storage: StorageResource) -> MaterializeResult:
    config = pipeline.load()
    store = storage.store
    with storage.locked(context.run.run_id, TOPIC_MODEL):
        if not config.embeddings.enabled:
            return _skipped(skip_topic_model(store).version)
        manifest = run_topic_model(store, config)
    model = PartitionLayout(store, TOPIC_MODEL, ALL).read_table()
    rows = "\n".join(f"| {row['domain']} | {row['share']:.1%} | {', '.join(row['terms'])} |"
                     for row in model.select(["domain", "share", "terms"]).to_pylist())
    return MaterializeResult(
        metadata={"domains": MetadataValue.int(model.num_rows),
                  "fit_sample": MetadataValue.int(manifest.extra["fit_sample"]),
                  "training_snapshots": MetadataValue.json(manifest.extra["training_snapshots"]),
                  "top_terms": MetadataValue.md("| domain | share of the sample | top terms |\n"
                                                "| ---: | ---: | --- |\n" + rows)},
        data_version=DataVersion(manifest.data_version))


@asset(
    partitions_def=snapshot_partitions,
    deps=[EMBEDDINGS, topic_model],
    group_name="scores",
    code_version=KERNEL_VERSION,
    description="Each document's topic domain (its nearest topic_model centroid) and its cosine "
    "similarity to it; a signal recipes weight or cap, no verdict.",
)
def domains(context: AssetExecutionContext, pipeline: PipelineResource,
            storage: StorageResource, compute: ComputeResource) -> MaterializeResult:
    partition = context.partition_key
    store = storage.store
    if not pipeline.load().embeddings.enabled:
        return _skipped(skip_domains(store, partition).version)
    require_passing_gates(context, EMBEDDINGS, partition)
    result = run_domains(DocumentsInput(store, partition, columns=("doc_id",)), compute.workers,
                         task_logger(context, partition))
    counts = sorted((int(key.split(".")[1]), n) for key, n in result.stats.counts.items()
                    if key.startswith("domain."))
    metadata = stage_metadata(result.stats, result.wall_seconds)
    metadata["domain_documents"] = MetadataValue.md(
        "| domain | documents |\n| ---: | ---: |\n"
        + "\n".join(f"| {domain} | {n} |" for domain, n in counts))
    return MaterializeResult(metadata=metadata,
                             data_version=DataVersion(result.manifest.data_version))
