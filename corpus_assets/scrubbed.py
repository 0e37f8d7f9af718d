"""`scrubbed[snapshot]`: the text rewritten once, with every recorded edit and typed PII
placeholders (docs/architecture.md, "Annotate, then select")."""

from dagster import (
    AssetExecutionContext,
    DataVersion,
    MaterializeResult,
    MetadataValue,
    asset,
)

from corpus_assets.dedup import line_dedup
from corpus_assets.documents import documents
from corpus_assets.gates import require_passing_gates
from corpus_assets.metadata import samples_preview, stage_metadata, task_logger
from curation.graph import DOCUMENTS, HEURISTICS, LINE_DEDUP
from curation.stages.base import DocumentsInput
from curation.stages.scrubbed import ASSET, KERNEL_VERSION, SECRET, run_scrubbed
from partitions import snapshot_partitions
from resources import ComputeResource, PipelineResource, StorageResource

SAMPLE_SIZE = 5


@asset(
    name=ASSET,
    partitions_def=snapshot_partitions,
    deps=[documents, HEURISTICS, line_dedup],
    group_name="scrub",
    code_version=KERNEL_VERSION,
    description="The text with every recorded edit applied in one rewrite (C4 line removals and "
    "citations, boilerplate lines) and PII replaced by typed placeholders (e-mail and IP "
    "addresses, phone, payment card, US SSN and IBAN numbers); PII spans recorded as edits.",
)
def scrubbed(
    context: AssetExecutionContext,
    pipeline: PipelineResource,
    storage: StorageResource,
    compute: ComputeResource,
) -> MaterializeResult:
    partition = context.partition_key
    for upstream in (DOCUMENTS, HEURISTICS, LINE_DEDUP):
        require_passing_gates(context, upstream, partition)
    config = pipeline.load()
    settings = config.pii
    code = config.is_code(partition)
    path = f"samples/{ASSET}/{partition}.jsonl"
    result = run_scrubbed(DocumentsInput(storage.store, partition), settings, compute.workers,
                          task_logger(context, partition), samples=(SAMPLE_SIZE, path),
                          code=code)
    stats = result.stats
    metadata = stage_metadata(stats, result.wall_seconds)
    for kind in (*settings.enabled, *((SECRET,) if code else ())):
        metadata[f"pii.{kind}"] = MetadataValue.int(stats.counts.get(f"pii.{kind}", 0))
    for key in ("documents_with_pii", "documents_edited", "lines_removed", "cuts"):
        metadata[key] = MetadataValue.int(stats.counts.get(key, 0))
    metadata.update(samples_preview(result.samples, storage.store.uri(path)))
    return MaterializeResult(metadata=metadata,
                             data_version=DataVersion(result.manifest.data_version))
