"""`language[snapshot]`: fastText language and score per document, with a verdict."""

from dagster import AssetExecutionContext, DataVersion, MaterializeResult, MetadataValue, asset

from corpus_assets.documents import documents
from corpus_assets.gates import require_passing_gates
from corpus_assets.metadata import stage_metadata, task_logger
from curation.config import stable_hash
from curation.graph import DOCUMENTS
from curation.language import KERNEL_VERSION, language_mix, model_sha256
from curation.stages.base import DocumentsInput
from curation.stages.language import run_language
from partitions import snapshot_partitions
from resources import ComputeResource, PipelineResource, StorageResource


@asset(
    partitions_def=snapshot_partitions,
    deps=[documents],
    group_name="signals",
    code_version=f"{KERNEL_VERSION}+lid176-{model_sha256()[:12]}",
    description="fastText lid.176 language and score per document (whole text, newlines "
    "folded); keeps the pipeline's target languages above their thresholds.",
)
def language(
    context: AssetExecutionContext,
    pipeline: PipelineResource,
    storage: StorageResource,
    compute: ComputeResource,
) -> MaterializeResult:
    partition = context.partition_key
    require_passing_gates(context, DOCUMENTS, partition)
    config = pipeline.load()
    settings = config.language
    result = run_language(DocumentsInput(storage.store, partition), settings,
                          compute.workers, task_logger(context, partition),
                          code=config.is_code(partition))
    mix = language_mix(result.stats)
    metadata = stage_metadata(result.stats, result.wall_seconds)
    metadata["language_mix"] = MetadataValue.md(
        "| language | share | documents |\n| --- | ---: | ---: |\n" + "\n".join(
            f"| {code} | {share:.1%} | {result.stats.counts[f'language.{code}']} |"
            for code, share in list(mix.items())[:30]))
    for code in settings.languages:
        metadata[f"share.{code}"] = MetadataValue.float(round(mix.get(code, 0.0), 4))
    metadata["languages_seen"] = MetadataValue.int(len(mix))
    metadata["settings_hash"] = MetadataValue.text(stable_hash(settings.model_dump()))
    return MaterializeResult(metadata=metadata,
                             data_version=DataVersion(result.manifest.data_version))
