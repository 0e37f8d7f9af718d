"""`quality_classifier` (one model for the pipeline) and `quality_scores[snapshot]`."""

from dagster import (
    AssetExecutionContext,
    DataVersion,
    MaterializeResult,
    MetadataValue,
    asset,
)

from corpus_assets.documents import documents
from corpus_assets.gates import require_passing_gates
from corpus_assets.language import language
from corpus_assets.metadata import stage_metadata, task_logger
from curation.graph import DOCUMENTS, EMBEDDINGS, HEURISTICS, QUALITY_CLASSIFIER
from curation.partition import PartitionLayout
from curation.quality import WITHOUT_CLASSIFIER
from curation.stages.base import DocumentsInput
from curation.stages.quality import (
    KERNEL_VERSION,
    run_classifier,
    run_scores,
    skip_classifier,
    skip_scores,
    summarize_scores,
)
from partitions import every_partition, snapshot_partitions
from resources import ComputeResource, PipelineResource, StorageResource


@asset(
    deps=[every_partition(documents), every_partition(HEURISTICS), every_partition(EMBEDDINGS)],
    group_name="models",
    code_version=KERNEL_VERSION,
    description="fastText quality classifier: curated positives against a seeded sample of "
    "heuristics-passing web documents from the pipeline's training snapshots; with embeddings "
    "on, a logistic-regression head on their vectors, trained and judged on the same documents.",
)
def quality_classifier(
    context: AssetExecutionContext, pipeline: PipelineResource, storage: StorageResource
) -> MaterializeResult:
    config = pipeline.load()
    store = storage.store
    skipped = config.classifier_skipped()
    if skipped:
        with storage.locked(context.run.run_id, QUALITY_CLASSIFIER):
            manifest = skip_classifier(store, skipped)
        return _skipped_result(skipped, manifest.version)
    inputs = {}
    for partition in config.partition_keys():
        manifest = PartitionLayout(store, DOCUMENTS, partition).read_manifest()
        if manifest is not None:
            inputs[partition] = manifest.data_version
    with storage.locked(context.run.run_id, QUALITY_CLASSIFIER):
        run = run_classifier(store, config, inputs)
    trained = run.trained
    neural = {}
    if run.neural is not None:
        neural = {
            "neural_roc_auc": MetadataValue.float(round(run.neural.roc_auc, 4)),
            "combined_roc_auc": MetadataValue.float(round(run.neural.combined_roc_auc, 4)),
            "neural_sha256": MetadataValue.text(run.neural.head.sha256),
            "roc_auc_side_by_side": MetadataValue.md(
                "| scorer | held-out ROC AUC |\n| --- | ---: |\n"
                f"| fasttext | {run.neural.fasttext_roc_auc:.4f} |\n"
                f"| neural | {run.neural.roc_auc:.4f} |\n"
                f"| combined (mean percentile rank) | {run.neural.combined_roc_auc:.4f} |"),
        }
    features = "\n".join(
        f"| {hq[0]} | {hq[1]:.3f} | {lq[0]} | {lq[1]:.3f} |"
        for hq, lq in zip(trained.hq_features, trained.lq_features, strict=False))
    return MaterializeResult(
        metadata={
            "precision": MetadataValue.float(round(trained.precision, 4)),
            "recall": MetadataValue.float(round(trained.recall, 4)),
            "roc_auc": MetadataValue.float(round(trained.roc_auc, 4)),
            "train_positives": MetadataValue.int(trained.train_counts["hq"]),
            "train_negatives": MetadataValue.int(trained.train_counts["lq"]),
            "holdout_positives": MetadataValue.int(trained.holdout_counts["hq"]),
            "holdout_negatives": MetadataValue.int(trained.holdout_counts["lq"]),
            "train_seconds": MetadataValue.float(round(trained.train_seconds, 2)),
            "top_features": MetadataValue.md(
                "| favours hq | weight | favours lq | weight |\n| --- | ---: | --- | ---: |\n"
                + features),
            "training_data": MetadataValue.json(run.origin),
            "model_sha256": MetadataValue.text(trained.model_sha256),
            "model_path": MetadataValue.path(
                store.uri(f"models/{trained.model_sha256}/model.bin")),
            **neural,
        },
        data_version=DataVersion(trained.model_sha256[:16]),
    )


@asset(
    partitions_def=snapshot_partitions,
    deps=[documents, language, quality_classifier, EMBEDDINGS],
    group_name="scores",
    code_version=KERNEL_VERSION,
    description="P(high quality) per document from the pipeline's classifier (and, with "
    "embeddings on, the neural head's and the two combined); recipes keep the top fraction per "
    "language by the scorer they choose.",
)
def quality_scores(
    context: AssetExecutionContext, pipeline: PipelineResource, storage: StorageResource,
    compute: ComputeResource,
) -> MaterializeResult:
    partition = context.partition_key
    require_passing_gates(context, DOCUMENTS, partition)
    skipped = pipeline.load().classifier_skipped()
    if skipped:
        return _skipped_result(skipped, skip_scores(storage.store, partition, skipped).version)
    result = run_scores(DocumentsInput(storage.store, partition), compute.workers,
                        task_logger(context, partition))
    summary = summarize_scores(storage.store, partition)
    metadata = stage_metadata(result.stats, result.wall_seconds)
    scorers = list(summary.histograms)
    bins = len(summary.histograms["fasttext"])
    metadata["score_histogram"] = MetadataValue.md(
        f"| score | {' | '.join(scorers)} |\n| --- |{' ---: |' * len(scorers)}\n" + "\n".join(
            f"| {i / bins:.2f}-{(i + 1) / bins:.2f} | "
            + " | ".join(str(summary.histograms[scorer][i]) for scorer in scorers) + " |"
            for i in range(bins)))
    rows = []
    for code, thresholds in sorted(summary.thresholds.items()):
        rows.append(f"| {code} | " + " | ".join(f"{thresholds[f]:.4f}" for f in sorted(thresholds))
                    + " |")
        for fraction, value in thresholds.items():
            metadata[f"threshold.{code}.top{round(fraction * 100)}"] = MetadataValue.float(
                round(value, 4))
    metadata["thresholds"] = MetadataValue.md(
        "| language | top 10% | top 30% | top 50% |\n| --- | ---: | ---: | ---: |\n"
        + "\n".join(rows))
    return MaterializeResult(metadata=metadata,
                             data_version=DataVersion(result.manifest.data_version))


def _skipped_result(reason: str, version: str) -> MaterializeResult:
    """A materialization saying no classifier is configured and what that leaves out."""
    return MaterializeResult(
        metadata={
            "skipped": MetadataValue.text(f"no quality classifier configured: {reason}"),
            "not_available": MetadataValue.text(WITHOUT_CLASSIFIER),
        },
        data_version=DataVersion(version),
    )
