"""The per-recipe assets: `tokenizer[recipe]`, `mix[recipe]` and `shards[recipe]`.

Only these depend on a recipe, so a recipe change re-runs them and nothing upstream.
"""

from collections import Counter

from dagster import (
    AssetExecutionContext,
    DataVersion,
    MaterializeResult,
    MetadataValue,
    asset,
)

from corpus_assets.metadata import counter_table
from curation.graph import (
    CROSS_DEDUP,
    MIX,
    MIX_INPUTS,
    SCRUBBED,
    SHARDS,
    TAKEDOWNS,
    TOKENIZER,
)
from curation.partition import PartitionLayout
from curation.stages.dataset import (
    MIX_CODE_VERSION,
    SHARDS_CODE_VERSION,
    TOKENIZER_CODE_VERSION,
    build_and_store_mix,
    build_tokenizer,
    load_stored_tokenizer,
    run_shards,
)
from partitions import every_partition, recipe_partitions
from resources import ComputeResource, PipelineResource, StorageResource


@asset(
    name=TOKENIZER,
    partitions_def=recipe_partitions,
    deps=[every_partition(SCRUBBED)],
    group_name="dataset",
    code_version=TOKENIZER_CODE_VERSION,
    description="The recipe's tokenizer: a pinned tokenizer.json, or a byte-level BPE trained on "
    "a seeded sample of the recipe's sources (never the mix); pinned by content hash.",
)
def tokenizer(context: AssetExecutionContext, pipeline: PipelineResource,
              storage: StorageResource) -> MaterializeResult:
    name = context.partition_key
    build = build_tokenizer(storage.store, pipeline.load(), name, pipeline.recipe(name),
                            context.run.run_id)
    pinned = build.tokenizer
    return MaterializeResult(
        metadata={"how": MetadataValue.text(build.how),
                  "sha256": MetadataValue.text(pinned.sha256),
                  "vocab_size": MetadataValue.int(pinned.vocab_size),
                  "eos_id": MetadataValue.int(pinned.eos_id),
                  "pad_id": MetadataValue.int(pinned.pad_id),
                  "dtype": MetadataValue.text(str(pinned.dtype)),
                  "rebuilt": MetadataValue.bool(build.rebuilt)},
        data_version=DataVersion(pinned.sha256[:16]),
    )


def _shares_table(shares: list[dict]) -> MetadataValue:
    lines = ["| phase | source | target share | planned share | epochs | ran out |",
             "| --- | --- | ---: | ---: | ---: | --- |"]
    lines += [f"| {r['phase']} | {r['source']} | {r['target_share']:.2%} | "
              f"{r['achieved_share']:.2%} | {r['epochs']:.2f} | {'yes' if r['ran_out'] else ''} |"
              for r in shares]
    return MetadataValue.md("\n".join(lines))


@asset(
    name=MIX,
    partitions_def=recipe_partitions,
    deps=[*map(every_partition, MIX_INPUTS), CROSS_DEDUP, TAKEDOWNS, TOKENIZER],
    group_name="dataset",
    code_version=MIX_CODE_VERSION,
    description="The recipe's selection over the annotated documents (language, heuristics, "
    "decontamination, edits, one member per duplicate group, then the quality cutoff over "
    "those; a curated source "
    "by its own filter policy), then per-source token shares per phase with capped "
    "upsampling, planned on exact token counts from the recipe's tokenizer, then the "
    "takedown list (the taken-down "
    "documents and their duplicates lose their occurrences): one row per document occurrence, "
    "and a selection decision per document.",
)
def mix(context: AssetExecutionContext, pipeline: PipelineResource,
        storage: StorageResource, compute: ComputeResource) -> MaterializeResult:
    name = context.partition_key
    store = storage.store
    recipe = pipeline.recipe(name)
    build = build_and_store_mix(store, name, recipe,
                                load_stored_tokenizer(store, name), pipeline.load(),
                                context.run.run_id, compute.workers)
    extra = build.manifest.extra
    shares = PartitionLayout(store, MIX, name).read_table(name="shares").to_pylist()
    metadata = {
        "candidates": MetadataValue.int(extra["candidates"]),
        "documents_selected": MetadataValue.int(extra["selected"]),
        "occurrences": MetadataValue.int(build.manifest.rows),
        "target_tokens": MetadataValue.int(extra["total_tokens"]),
        # exact counts (EOS included): what the shards will hold after the takedowns
        "tokens": MetadataValue.int(extra["delivered_tokens"]),
        "token_counts": MetadataValue.text(extra["token_counts"]),
        "selection_funnel": counter_table(Counter(extra["funnel"]), "rule"),
        "shares": _shares_table(shares),
        # the plan judged like the shards' delivery (mix_shares_on_target, on shards)
        "planned_share_failures": MetadataValue.json(extra["planned_share_failures"]),
        "ran_out": MetadataValue.json(extra["ran_out"]),
        "takedown_version": MetadataValue.text(extra["takedown_version"]),
        "taken_down_documents": MetadataValue.int(extra["taken_down_documents"]),
        "taken_down_occurrences": MetadataValue.int(extra["taken_down_occurrences"]),
        "rebuilt": MetadataValue.bool(build.result is not None),
    }
    if recipe.rehydration:  # per phase and group-size bucket: weights and achieved shares
        metadata["rehydration"] = MetadataValue.json(extra["rehydration"])
    for rule, count in extra["funnel"].items():
        metadata[f"funnel.{rule}"] = MetadataValue.int(count)
    return MaterializeResult(metadata=metadata,
                             data_version=DataVersion(build.manifest.data_version))


@asset(
    name=SHARDS,
    partitions_def=recipe_partitions,
    deps=[MIX, TOKENIZER, every_partition(SCRUBBED)],
    group_name="dataset",
    code_version=SHARDS_CODE_VERSION,
    description="Tokenized, globally shuffled (keyed hash of doc_id and occurrence within each "
    "phase), packed training shards in the Megatron-Core indexed-dataset layout, with "
    "manifest.json and spans.parquet, under shards/{dataset version}/.",
)
def shards(context: AssetExecutionContext, pipeline: PipelineResource,
           storage: StorageResource, compute: ComputeResource) -> MaterializeResult:
    name = context.partition_key
    build = run_shards(storage.store, name, pipeline.recipe(name), pipeline.load(),
                       compute.workers, context.run.run_id)
    version = build.dataset_version
    totals = build.manifest["totals"]
    metadata = {
        "dataset_version": MetadataValue.text(version),
        "path": MetadataValue.path(storage.store.uri(build.prefix)),
        "shards": MetadataValue.int(len(build.manifest["shards"])),
        "rebuilt": MetadataValue.bool(build.rebuilt),
    }
    for key, value in sorted(totals.items()):
        if isinstance(value, int):
            metadata[key] = MetadataValue.int(value)
    for group in ("tokens_by_source", "tokens_by_phase", "tokens_by_licence",
                  "tokens_by_phase_source"):
        if group in build.manifest:
            metadata[group] = MetadataValue.json(build.manifest[group])
    return MaterializeResult(metadata=metadata, data_version=DataVersion(version))
