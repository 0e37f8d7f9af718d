"""`heuristics[snapshot]` and `minhash_signatures[snapshot]`: one pass, one word split.

Gopher quality and repetition, C4, FineWeb and bad-word signals with a verdict, and MinHash LSH
band hashes of the same split (docs/architecture.md, cost order).
"""

from collections import Counter

from dagster import (
    AssetExecutionContext,
    AssetSpec,
    DataVersion,
    MaterializeResult,
    MetadataValue,
    multi_asset,
)

from corpus_assets.gates import require_passing_gates
from corpus_assets.metadata import counter_table, stage_metadata, task_logger
from curation.graph import DOCUMENTS, HEURISTICS, LANGUAGE, MINHASH_SIGNATURES
from curation.partition import PartitionLayout
from curation.stages.base import DocumentsInput
from curation.stages.heuristics import KERNEL_VERSION, run_heuristics
from partitions import snapshot_partitions
from resources import ComputeResource, PipelineResource, StorageResource


@multi_asset(
    specs=[
        AssetSpec(HEURISTICS, deps=[DOCUMENTS, LANGUAGE], group_name="signals",
                  code_version=KERNEL_VERSION,
                  description="The published rule suites (Gopher quality and repetition, C4, "
                  "FineWeb) and a bad-word density over one word split per document: signals, "
                  "a verdict under the pipeline's thresholds, a decision per drop, C4 line edits."),
        AssetSpec(MINHASH_SIGNATURES, deps=[DOCUMENTS], group_name="signals",
                  code_version=KERNEL_VERSION,
                  description="MinHash LSH band hashes (word 5-grams, 14 bands x 8 rows, 64-bit "
                  "by default) of the same word split."),
    ],
    partitions_def=snapshot_partitions,
    can_subset=False,
)
def heuristics(
    context: AssetExecutionContext,
    pipeline: PipelineResource,
    storage: StorageResource,
    compute: ComputeResource,
):
    partition = context.partition_key
    require_passing_gates(context, DOCUMENTS, partition)
    require_passing_gates(context, LANGUAGE, partition)
    config = pipeline.load()
    result = run_heuristics(DocumentsInput(storage.store, partition), config.heuristics,
                            config.dedup.minhash, compute.workers,
                            task_logger(context, partition), code=config.is_code(partition))
    stats = result.stats
    metadata = stage_metadata(stats, result.wall_seconds)
    suite_drops = Counter({key.removeprefix("suite_drop."): n for key, n in stats.counts.items()
                           if key.startswith("suite_drop.")})
    skipped = Counter({key.removeprefix("skipped."): n for key, n in stats.counts.items()
                       if key.startswith("skipped.")})
    metadata["drops_per_rule_alone"] = counter_table(suite_drops, "rule (each suite on its own)")
    metadata["skipped_for_language"] = counter_table(skipped, "rule skipped")
    metadata["skipped_rule_applications"] = MetadataValue.int(sum(skipped.values()))
    metadata["c4_edits"] = MetadataValue.int(stats.counts["edits"])
    yield MaterializeResult(asset_key=HEURISTICS, metadata=metadata,
                            data_version=DataVersion(result.manifest.data_version))
    signatures = PartitionLayout(storage.store, MINHASH_SIGNATURES, partition).complete_manifest()
    minhash = config.dedup.minhash
    yield MaterializeResult(
        asset_key=MINHASH_SIGNATURES,
        metadata={"rows_out": MetadataValue.int(signatures.rows),
                  "bands": MetadataValue.int(minhash.bands),
                  "rows_per_band": MetadataValue.int(minhash.rows),
                  "ngram": MetadataValue.int(minhash.ngram),
                  "wall_seconds": MetadataValue.float(round(result.wall_seconds, 2))},
        data_version=DataVersion(signatures.data_version),
    )
