"""The per-recipe stages: `tokenizer[recipe]`, `mix[recipe]` and `shards[recipe]`
(docs/architecture.md, "Data contracts" and "Determinism").

The tokenizer is a pinned `tokenizer.json` or a byte-level BPE trained on a seeded sample of
the recipe's sources (their scrubbed text, never the mix, so mix weights cannot change it); it
is stored as a one-row part, so its data version is its content.

The mix runs `curation.mix` with exact token counts from the recipe's tokenizer and each
source's filter policy from `pipeline.yaml`, then applies the takedown list, and writes
`mix/{recipe}/` (occurrences as the main table; selection decisions and shares beside them)
under a version that covers the recipe, the tokenizer, the sources' filter policies, the
takedown version and the data versions of every input partition. Takedowns come last: selection
and repeat counts are computed as if nothing were taken down, then the taken-down documents'
occurrences are cut. A takedown therefore changes nothing but the removed occurrences, and the
shuffle by keyed hash keeps every other occurrence's tokens and relative order.

The shards are written to `shards/{dataset version}/` with `manifest.json` last; the asset's
own partition records which version the recipe currently points at.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curation.config import PipelineConfig, RecipeConfig, dataset_version, stable_hash
from curation.graph import (
    ALL,
    CROSS_DEDUP,
    DOCUMENTS,
    MIX,
    MIX_INPUTS,
    SCRUBBED,
    SHARDS,
    TOKENIZER,
)
from curation.mix import (
    KERNEL_VERSION,
    TAKEDOWN,
    MixResult,
    build_mix,
    ran_out_notes,
    selected_texts,
    share_failures,
)
from curation.partition import Manifest, PartitionLayout
from curation.shards import (
    BuildInfo,
    Occurrence,
    ShardSettings,
    build_shards,
    shuffle_order,
    upload_shards,
)
from curation.storage import LocalStore, Store
from curation.takedowns import (
    EMPTY_VERSION,
    TakedownList,
    current_takedowns,
    expand_takedowns,
    save_tombstones,
)
from curation.tasks import hold_locks
from curation.tokenizer import PinnedTokenizer, tokenizer_from_bytes, train_bpe

# Code versions name the libraries that shape the output, so an upgrade makes the asset stale.
TOKENIZER_CODE_VERSION = f"tokenizer-1+tokenizers-{package_version('tokenizers')}"
SHARDS_CODE_VERSION = "shards-1+" + "+".join(
    f"{name}-{package_version(name)}" for name in ("tokenizers", "numpy", "pyarrow"))
# The BPE training sample: documents with the smallest keyed hash, up to this much text.
TRAINING_CHARS = 50_000_000
TRAINING_DOCUMENTS = 100_000
TEXT_BATCH = 4_096


def _keyed_rank(doc_id: str, seed: int) -> bytes:
    return hashlib.blake2b(doc_id.encode(), digest_size=8, key=str(seed).encode()).digest()


def training_sample(store: Store, partitions: Sequence[str], seed: int) -> list[str]:
    """A seeded sample of the partitions' scrubbed text: the same inputs and seed, the same
    texts in the same order."""
    ranked: list[tuple[bytes, str, str]] = []
    for partition in partitions:
        rows = PartitionLayout(store, SCRUBBED, partition).read_table(["doc_id", "text"])
        ranked += heapq.nsmallest(
            TRAINING_DOCUMENTS,
            ((_keyed_rank(d, seed), d, t) for d, t in zip(rows["doc_id"].to_pylist(),
                                                          rows["text"].to_pylist(), strict=True)
             if t.strip()))
    texts, chars = [], 0
    for _, _, text in sorted(ranked)[:TRAINING_DOCUMENTS]:
        if chars >= TRAINING_CHARS:
            break
        texts.append(text)
        chars += len(text)
    return texts


@dataclass(frozen=True)
class TokenizerBuild:
    tokenizer: PinnedTokenizer
    how: str  # "pinned" or "trained"
    rebuilt: bool
    manifest: Manifest


def _store_tokenizer(layout: PartitionLayout, version: str, tokenizer: PinnedTokenizer,
                     how: str) -> Manifest:
    layout.prepare(version)
    part = layout.write_part(0, pa.table({"tokenizer_json": [tokenizer.json_bytes.decode()],
                                          "sha256": [tokenizer.sha256]}))
    manifest = Manifest(TOKENIZER, layout.partition, version, [part],
                        extra={"how": how, "sha256": tokenizer.sha256,
                               "vocab_size": tokenizer.vocab_size, "eos_id": tokenizer.eos_id,
                               "pad_id": tokenizer.pad_id, "dtype": str(tokenizer.dtype)})
    layout.write_manifest(manifest)
    return manifest


def load_stored_tokenizer(store: Store, recipe_name: str) -> PinnedTokenizer:
    table = PartitionLayout(store, TOKENIZER, recipe_name).read_table(["tokenizer_json"])
    return tokenizer_from_bytes(table["tokenizer_json"][0].as_py().encode(), name=recipe_name)


def build_tokenizer(store: Store, pipeline: PipelineConfig, recipe_name: str,
                    recipe: RecipeConfig, run_id: str | None = None) -> TokenizerBuild:
    """The recipe's tokenizer, rebuilt only when its inputs changed, under its partition's
    lock."""
    with hold_locks(store, [TOKENIZER], recipe_name, run_id=run_id):
        return _tokenizer(store, pipeline, recipe_name, recipe)


def _tokenizer(store: Store, pipeline: PipelineConfig, recipe_name: str,
               recipe: RecipeConfig) -> TokenizerBuild:
    layout = PartitionLayout(store, TOKENIZER, recipe_name)
    spec = recipe.tokenizer
    if spec.path is not None:
        data = Path(pipeline.resolve(spec.path)).read_bytes()
        version = stable_hash({"code": TOKENIZER_CODE_VERSION,
                               "file": hashlib.sha256(data).hexdigest()})
        how = "pinned"
    else:
        partitions = recipe.partition_keys()
        inputs = {p: PartitionLayout(store, SCRUBBED, p).complete_manifest().data_version
                  for p in partitions}
        version = stable_hash({"code": TOKENIZER_CODE_VERSION, "vocab": spec.train_vocab_size,
                               "seed": recipe.seed, "inputs": inputs})
        how = "trained"
    existing = layout.read_manifest()
    if existing is not None and existing.version == version:
        return TokenizerBuild(load_stored_tokenizer(store, recipe_name), how, False, existing)
    if spec.path is not None:
        tokenizer = tokenizer_from_bytes(data, name=spec.path)
    else:
        texts = training_sample(store, partitions, recipe.seed)
        tokenizer = train_bpe(texts, spec.train_vocab_size)
    return TokenizerBuild(tokenizer, how, True, _store_tokenizer(layout, version, tokenizer, how))


# --- mix ---------------------------------------------------------------------------------

MIX_CODE_VERSION = KERNEL_VERSION


def curated_sources(pipeline: PipelineConfig, recipe: RecipeConfig) -> list[str]:
    """The recipe's sources judged by the curated filter policy (`sources.NAME.filters`)."""
    return sorted(pipeline.curated_sources() & set(recipe.sources))


def input_versions(store: Store, recipe: RecipeConfig) -> dict[str, str]:
    versions = {}
    for partition in recipe.partition_keys():
        for asset in MIX_INPUTS:
            manifest = PartitionLayout(store, asset, partition).read_manifest()
            if manifest is not None:
                versions[f"{asset}[{partition}]"] = manifest.data_version
    cross = PartitionLayout(store, CROSS_DEDUP, ALL).read_manifest()
    if cross is not None:
        versions[CROSS_DEDUP] = cross.data_version
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
    gone = expand_takedowns(store, takedowns, recipe.partition_keys())
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
                        tokenizer: PinnedTokenizer, pipeline: PipelineConfig,
                        run_id: str | None = None) -> MixBuild:
    """The recipe's mix, rebuilt only when its version changed, under its partition's lock."""
    with hold_locks(store, [MIX], recipe_name, run_id=run_id):
        return _mix(store, recipe_name, recipe, tokenizer, pipeline)


def _mix(store: Store, recipe_name: str, recipe: RecipeConfig, tokenizer: PinnedTokenizer,
         pipeline: PipelineConfig) -> MixBuild:
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


# --- shards ----------------------------------------------------------------------------------


def _texts(store: Store, occurrences: pa.Table) -> dict[str, str]:
    """Scrubbed text of every document the mix selected."""
    texts: dict[str, str] = {}
    for rows in selected_texts(store, occurrences):
        texts.update(zip(rows["doc_id"].to_pylist(), rows["text"].to_pylist(), strict=True))
    return texts


def ordered_occurrences(store: Store, occurrences: pa.Table,
                        recipe: RecipeConfig) -> Iterator[Occurrence]:
    """The mix's occurrences in shuffle order (phases in recipe order, then the keyed hash of
    doc_id and occurrence), with their scrubbed text."""
    phases = [phase.name for phase in recipe.phases]
    order = shuffle_order(occurrences["doc_id"].to_pylist(),
                          occurrences["occurrence"].to_pylist(),
                          occurrences["phase"].to_pylist(), phases, recipe.seed)
    texts = _texts(store, occurrences)
    columns = occurrences.select(["doc_id", "occurrence", "phase", "source", "licence"])
    for start in range(0, len(order), TEXT_BATCH):
        batch = columns.take(pa.array(np.asarray(order[start:start + TEXT_BATCH]))).to_pylist()
        for row in batch:
            yield Occurrence(row["doc_id"], row["occurrence"], row["phase"],
                             texts[row["doc_id"]], row["source"], row["licence"])


@dataclass(frozen=True)
class ShardsBuild:
    dataset_version: str
    prefix: str
    manifest: dict
    rebuilt: bool


def shards_prefix(dataset_version: str) -> str:
    return f"{SHARDS}/{dataset_version}"


def build_dataset_shards(store: Store, recipe_name: str, recipe: RecipeConfig,
                         occurrences: pa.Table, tokenizer: PinnedTokenizer,
                         info: BuildInfo, threads: int) -> ShardsBuild:
    """Tokenizes, packs and writes the shards of `info.version` unless they exist already."""
    prefix = shards_prefix(info.version)
    layout = PartitionLayout(store, SHARDS, recipe_name)
    if store.exists(f"{prefix}/manifest.json"):
        manifest = json.loads(store.read_bytes(f"{prefix}/manifest.json"))
        rebuilt = False
    else:
        settings = ShardSettings.from_recipe(recipe, threads=max(1, threads))
        with tempfile.TemporaryDirectory(prefix="shards-") as folder:
            build = build_shards(ordered_occurrences(store, occurrences, recipe), tokenizer,
                                 Path(folder) / "out", settings, info)
            upload_shards(build.directory, store, prefix)
            manifest = build.manifest
        rebuilt = True
    layout.prepare(info.version)
    part = layout.write_part(0, pa.table({"dataset_version": [info.version],
                                          "prefix": [prefix]}))
    layout.write_manifest(Manifest(SHARDS, recipe_name, info.version, [part],
                                   extra={"prefix": prefix}))
    return ShardsBuild(info.version, prefix, manifest, rebuilt)


def shards_version(store: Store, recipe_name: str, recipe: RecipeConfig,
                   pipeline: PipelineConfig, tokenizer: PinnedTokenizer) -> BuildInfo:
    """The dataset version the stored mix and `tokenizer` give, and the build information the
    manifest records (docs/architecture.md, "Determinism": the same version, the same bytes)."""
    mixed = PartitionLayout(store, MIX, recipe_name).complete_manifest()
    inputs = {MIX: mixed.data_version, TOKENIZER: tokenizer.sha256}
    version = dataset_version(
        recipe, pipeline, takedown_version=mixed.extra["takedown_version"],
        input_data_versions=inputs,
        code_versions={TOKENIZER: TOKENIZER_CODE_VERSION, MIX: MIX_CODE_VERSION,
                       SHARDS: SHARDS_CODE_VERSION})
    return BuildInfo(version, recipe_hash=stable_hash(recipe.model_dump(mode="json")),
                     pipeline_hash=pipeline.section_hash(DOCUMENTS), input_versions=inputs)


def run_shards(store: Store, recipe_name: str, recipe: RecipeConfig, pipeline: PipelineConfig,
               threads: int, run_id: str | None = None) -> ShardsBuild:
    """The recipe's shards under the dataset version of its stored mix and tokenizer, built
    only when that version's folder has no manifest yet, under the partition's lock."""
    tokenizer = load_stored_tokenizer(store, recipe_name)
    info = shards_version(store, recipe_name, recipe, pipeline, tokenizer)
    with hold_locks(store, [SHARDS], recipe_name, run_id=run_id):
        return build_dataset_shards(store, recipe_name, recipe,
                                    read_occurrences(store, recipe_name), tokenizer, info,
                                    threads)


def local_shards(store: Store, prefix: str, folder: str) -> Path:
    """A local folder holding the shards under `prefix` (the folder itself for a local store;
    otherwise a download into `folder`)."""
    if isinstance(store, LocalStore):
        return Path(store.uri(prefix))
    # The folder may be shared (the CLI downloads a version to one folder per machine): each
    # file is published whole, so a concurrent download never shows a reader a partial file.
    target = LocalStore(folder)
    for key in store.list(prefix):
        target.write_bytes(key.removeprefix(prefix).lstrip("/"), store.read_bytes(key))
    return Path(target.root)
