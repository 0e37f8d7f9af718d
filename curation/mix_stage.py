"""The `mix[recipe]` stage around `curation.mix`: exact token counts from the recipe's
tokenizer, each source's filter policy from `pipeline.yaml`, the takedown list applied after
selection, the mix written to `mix/{recipe}/`
(occurrences as the main table; selection decisions and shares beside them) under a version
that covers the recipe, the tokenizer, the sources' filter policies, the takedown version and
the data versions of every input partition.

Takedowns come last (architecture.md, "Determinism"): selection and repeat counts are computed
as if nothing were taken down, then the taken-down documents' occurrences are cut. A takedown
therefore changes nothing but the removed occurrences, and the shuffle by keyed hash keeps every
other occurrence's tokens and relative order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from curation.config import PipelineConfig, RecipeConfig, stable_hash
from curation.mix import (
    ASSET,
    KERNEL_VERSION,
    TAKEDOWN,
    MixResult,
    build_mix,
    ran_out_notes,
    recipe_partitions,
    share_failures,
)
from curation.partition import Manifest, PartitionLayout
from curation.storage import Store
from curation.takedowns import (
    EMPTY_VERSION,
    TakedownList,
    current_takedowns,
    expand_takedowns,
    save_tombstones,
)
from curation.tokenizer import PinnedTokenizer

MIX = ASSET
MIX_CODE_VERSION = KERNEL_VERSION
INPUT_ASSETS = ("documents", "language", "heuristics", "quality_scores", "decontaminated",
                "scrubbed", "url_dedup", "exact_dedup", "dedup_clusters")


def curated_sources(pipeline: PipelineConfig, recipe: RecipeConfig) -> list[str]:
    """The recipe's sources judged by the curated filter policy (`sources.NAME.filters`)."""
    return sorted(pipeline.curated_sources() & set(recipe.sources))


def input_versions(store: Store, recipe: RecipeConfig) -> dict[str, str]:
    versions = {}
    for partition in recipe_partitions(recipe):
        for asset in INPUT_ASSETS:
            manifest = PartitionLayout(store, asset, partition).read_manifest()
            if manifest is not None:
                versions[f"{asset}[{partition}]"] = manifest.data_version
    cross = PartitionLayout(store, "cross_dedup", "all").read_manifest()
    if cross is not None:
        versions["cross_dedup"] = cross.data_version
    return versions


@dataclass(frozen=True)
class MixBuild:
    manifest: Manifest
    result: MixResult | None  # None when the stored mix was current


@dataclass(frozen=True)
class TakenDown:
    """The takedown list a mix applied and what it cut."""

    version: str
    documents: frozenset[str]  # the matched documents and their duplicates
    occurrences: int
    tokens: int


def apply_takedowns(store: Store, recipe: RecipeConfig, result: MixResult,
                    takedowns: TakedownList) -> tuple[pa.Table, pa.Table, TakenDown]:
    """The occurrences and decisions without the taken-down documents (their decisions say
    `takedown`), after selection and repeat counts are fixed."""
    if takedowns.version == EMPTY_VERSION:
        return result.occurrences, result.decisions, TakenDown(EMPTY_VERSION, frozenset(), 0, 0)
    gone = expand_takedowns(store, takedowns, recipe_partitions(recipe))
    save_tombstones(store, takedowns, gone)
    ids = pa.array(sorted(gone), pa.string())
    occurrences = result.occurrences
    cut = pc.is_in(occurrences["doc_id"], ids)
    removed = occurrences.filter(cut)
    decisions = result.decisions
    hit = pc.is_in(decisions["doc_id"], ids)
    decisions = decisions.set_column(
        decisions.schema.get_field_index("kept"), "kept",
        pc.and_(decisions["kept"], pc.invert(hit)))
    decisions = decisions.set_column(
        decisions.schema.get_field_index("rule"), "rule",
        pc.if_else(hit, pa.scalar(TAKEDOWN), decisions["rule"]))
    tokens = int(pc.sum(removed["est_tokens"]).as_py() or 0)
    return (occurrences.filter(pc.invert(cut)), decisions,
            TakenDown(takedowns.version, frozenset(gone), removed.num_rows, tokens))


def build_and_store_mix(store: Store, recipe_name: str, recipe: RecipeConfig,
                        tokenizer: PinnedTokenizer, pipeline: PipelineConfig) -> MixBuild:
    layout = PartitionLayout(store, MIX, recipe_name)
    takedowns = current_takedowns(store)
    curated = curated_sources(pipeline, recipe)
    version = stable_hash({"code": MIX_CODE_VERSION, "recipe": recipe.model_dump(mode="json"),
                           "tokenizer": tokenizer.sha256, "takedowns": takedowns.version,
                           "curated_sources": curated,
                           "inputs": input_versions(store, recipe)})
    existing = layout.read_manifest()
    if existing is not None and existing.version == version:
        return MixBuild(existing, None)
    result = build_mix(store, recipe, tokenizer=tokenizer, curated_sources=curated)
    occurrences, decisions, taken = apply_takedowns(store, recipe, result, takedowns)
    layout.prepare(version)
    manifest = Manifest(
        MIX, recipe_name, version, [layout.write_part(0, occurrences)],
        tables={"decisions": [layout.write_table("decisions", 0, decisions)],
                "shares": [layout.write_table("shares", 0, result.shares)]},
        extra=summary(result, decisions, taken, pipeline.gates.mix_share_tolerance))
    layout.write_manifest(manifest)
    return MixBuild(manifest, result)


def summary(result: MixResult, decisions: pa.Table, taken: TakenDown,
            tolerance: float) -> dict[str, Any]:
    """The manifest's account of the mix; `selected` counts what the takedowns left,
    `delivered_tokens` the tokens the shards will hold (exact counts, EOS included)."""
    return {"funnel": result.funnel, "candidates": result.candidates,
            "selected": int(pc.sum(decisions["kept"]).as_py() or 0),
            "total_tokens": result.total_tokens,
            "achieved_tokens": result.achieved_tokens, "token_counts": result.token_counts,
            "bytes_per_token": result.bytes_per_token,
            "delivered_tokens": result.achieved_tokens - taken.tokens,
            "planned_share_failures": share_failures(result.shares, tolerance),
            "ran_out": ran_out_notes(result.shares),
            "takedown_version": taken.version, "taken_down_documents": len(taken.documents),
            "taken_down_occurrences": taken.occurrences,
            "taken_down_tokens": taken.tokens}


def read_occurrences(store: Store, recipe_name: str) -> pa.Table:
    return PartitionLayout(store, MIX, recipe_name).read_table()
