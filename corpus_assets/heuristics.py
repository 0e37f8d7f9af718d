"""`heuristics[snapshot]`: Gopher quality and repetition, C4, FineWeb and bad-word signals."""

from dagster import AssetExecutionContext, DataVersion, MaterializeResult, MetadataValue, asset

from corpus_assets.documents import documents
from corpus_assets.gates import require_passing_gates
from corpus_assets.language import language
from corpus_assets.metadata import counter_table, stage_metadata, task_logger
from curation.annotate import DocumentsInput
from curation.heuristics_stage import KERNEL_VERSION, run_heuristics
from partitions import snapshot_partitions
from resources import ComputeResource, PipelineResource, StorageResource


@asset(
    partitions_def=snapshot_partitions,
    deps=[documents, language],
    group_name="signals",
    code_version=KERNEL_VERSION,
    description="The published rule suites (Gopher quality and repetition, C4, FineWeb) and a "
    "bad-word density, over one word split per document: signals, a verdict under the "
    "pipeline's thresholds, a decision per drop, and C4's line edits.",
)
def heuristics(
    context: AssetExecutionContext,
    pipeline: PipelineResource,
    storage: StorageResource,
    compute: ComputeResource,
) -> MaterializeResult:
    partition = context.partition_key
    require_passing_gates(context, "documents", partition)
    require_passing_gates(context, "language", partition)
    result = run_heuristics(DocumentsInput(storage.store, partition), pipeline.load().heuristics,
                            compute.workers, task_logger(context, partition))
    stats = result.stats
    metadata = stage_metadata(stats, result.wall_seconds)
    suite_drops = {key.removeprefix("suite_drop."): n for key, n in stats.counts.items()
                   if key.startswith("suite_drop.")}
    skipped = {key.removeprefix("skipped."): n for key, n in stats.counts.items()
               if key.startswith("skipped.")}
    metadata["drops_per_rule_alone"] = counter_table(type(stats.counts)(suite_drops),
                                                     "rule (each suite on its own)")
    metadata["skipped_for_language"] = counter_table(type(stats.counts)(skipped), "rule skipped")
    metadata["skipped_rule_applications"] = MetadataValue.int(sum(skipped.values()))
    metadata["c4_edits"] = MetadataValue.int(stats.counts["edits"])
    return MaterializeResult(metadata=metadata,
                             data_version=DataVersion(result.manifest.data_version))
