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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from curation.config import PipelineConfig, RecipeConfig, dataset_version, stable_hash
from curation.duck import current_budget, duckdb_session, literal, register, register_table, scalar
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
    BATCH_ROWS,
    KERNEL_VERSION,
    MIX_DECISION_SCHEMA,
    OCCURRENCE_SCHEMA,
    MixRun,
    conform,
    decision_rows,
    drawn,
    occurrence_rows,
    ran_out_notes,
    run_mix,
    share_failures,
)
from curation.partition import Manifest, PartFile, PartitionLayout
from curation.shards import (
    BuildInfo,
    Occurrence,
    ShardPlan,
    ShardSettings,
    iter_planned,
    plan_shards,
    store_planned_shards,
)
from curation.star_components import TaskPlacement
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


def code_sources(pipeline: PipelineConfig, recipe: RecipeConfig) -> list[str]:
    """The recipe's code sources (`sources.NAME.kind: code`)."""
    return sorted(pipeline.code_sources() & set(recipe.sources))


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
    result: MixRun | None  # None when the stored mix was current


@dataclass(frozen=True)
class TakenDown:
    """The takedown list a mix applied and what it cut."""

    version: str
    documents: frozenset[str]  # the matched documents and their duplicates
    occurrences: int
    tokens: int


TAKEN_DOWN = "taken_down"  # the mix session's table of the documents the takedowns remove
PART_ROWS = 1 << 18  # rows per stored part of the mix's occurrences and decisions


def apply_takedowns(con: duckdb.DuckDBPyConnection, store: Store, recipe: RecipeConfig,
                    takedowns: TakedownList) -> TakenDown:
    """Table `TAKEN_DOWN` (`doc_id`) in the mix's session `con`: the documents the takedown
    list matches and their duplicates, which the stored occurrences leave out and the stored
    decisions mark `takedown` (`occurrence_rows`, `decision_rows`) after selection and repeat
    counts are fixed; and what that cuts."""
    gone: set[str] = set()
    if takedowns.version != EMPTY_VERSION:
        gone = expand_takedowns(store, takedowns, recipe.partition_keys())
        save_tombstones(store, takedowns, gone)
    con.register("_gone", pa.table({"doc_id": pa.array(sorted(gone), pa.string())}))
    con.execute(f"CREATE TABLE {TAKEN_DOWN} AS SELECT doc_id FROM _gone")
    con.unregister("_gone")
    occurrences, tokens = drawn(con, TAKEN_DOWN)
    return TakenDown(takedowns.version, frozenset(gone), occurrences, tokens)


def write_rows(con: duckdb.DuckDBPyConnection, query: str, schema: pa.Schema,
               write: Callable[[int, pa.Table], PartFile], rows: int = PART_ROWS
               ) -> list[PartFile]:
    """The rows of `query`, in order, stored as parts of `rows` rows (`write(index, table)`;
    one empty part when there are none), with one part and one DuckDB batch in memory."""
    parts: list[PartFile] = []
    reader = con.sql(query).to_arrow_reader(BATCH_ROWS)
    held = pa.Table.from_batches([], reader.schema)
    for batch in reader:
        held = pa.concat_tables([held, pa.Table.from_batches([batch])])
        while held.num_rows >= rows:
            parts.append(write(len(parts), conform(held.slice(0, rows), schema)))
            held = held.slice(rows)
    if held.num_rows or not parts:
        parts.append(write(len(parts), conform(held, schema)))
    return parts


def build_and_store_mix(store: Store, recipe_name: str, recipe: RecipeConfig,
                        tokenizer: PinnedTokenizer, pipeline: PipelineConfig,
                        run_id: str | None = None, workers: int = 0) -> MixBuild:
    """The recipe's mix, rebuilt only when its version changed, under its partition's lock.
    Memory: the mix's DuckDB session under the current budget (`curation.mix`), then its
    decisions and occurrences streamed to the store `PART_ROWS` rows at a time. The duplicate
    groups' components run as tasks on `workers` where `dedup.components` says
    (`curation.star_components.on_tasks`)."""
    with hold_locks(store, [MIX], recipe_name, run_id=run_id):
        return _mix(store, recipe_name, recipe, tokenizer, pipeline, workers)


def _mix(store: Store, recipe_name: str, recipe: RecipeConfig, tokenizer: PinnedTokenizer,
         pipeline: PipelineConfig, workers: int) -> MixBuild:
    layout = PartitionLayout(store, MIX, recipe_name)
    takedowns = current_takedowns(store)
    curated = curated_sources(pipeline, recipe)
    code = code_sources(pipeline, recipe)
    version = stable_hash({"code": MIX_CODE_VERSION, "recipe": recipe.model_dump(mode="json"),
                           "tokenizer": tokenizer.sha256, "takedowns": takedowns.version,
                           "curated_sources": curated, "code_sources": code,
                           "inputs": input_versions(store, recipe)})
    existing = layout.read_manifest()
    if existing is not None and existing.version == version:
        return MixBuild(existing, None)
    placement = TaskPlacement(store, f"{layout.prefix}/_work/components", workers,
                              pipeline.dedup.components)
    with duckdb_session() as con:
        run = run_mix(con, store, recipe, tokenizer=tokenizer, curated_sources=curated,
                      code_sources=code, placement=placement)
        taken = apply_takedowns(con, store, recipe, takedowns)
        selected = scalar(con, f"SELECT count(*) FROM decisions WHERE kept AND doc_id NOT IN "
                               f"(SELECT doc_id FROM {TAKEN_DOWN})")
        layout.prepare(version)
        occurrences = write_rows(con, occurrence_rows(TAKEN_DOWN), OCCURRENCE_SCHEMA,
                                 layout.write_part)
        decisions = write_rows(con, decision_rows(run.recipe, removed=TAKEN_DOWN),
                               MIX_DECISION_SCHEMA,
                               lambda index, table: layout.write_table("decisions", index, table))
    manifest = Manifest(
        MIX, recipe_name, version, occurrences,
        tables={"decisions": decisions,
                "shares": [layout.write_table("shares", 0, run.shares)]},
        extra=summary(run, selected, taken, pipeline.gates.mix_share_tolerance))
    layout.write_manifest(manifest)
    return MixBuild(manifest, run)


def summary(run: MixRun, selected: int, taken: TakenDown, tolerance: float) -> dict[str, Any]:
    """The manifest's account of the mix; `selected` counts what the takedowns left,
    `delivered_tokens` the tokens the shards will hold (exact counts, EOS included)."""
    return {"funnel": run.funnel, "candidates": run.candidates, "selected": selected,
            "total_tokens": run.total_tokens,
            "achieved_tokens": run.achieved_tokens, "token_counts": run.token_counts,
            "bytes_per_token": run.bytes_per_token,
            "delivered_tokens": run.achieved_tokens - taken.tokens,
            "planned_share_failures": share_failures(run.shares, tolerance),
            "ran_out": ran_out_notes(run.shares),
            # per phase and duplicate-group size bucket (recipe `rehydration`; else empty)
            "rehydration": run.rehydration.to_pylist(),
            "takedown_version": taken.version, "taken_down_documents": len(taken.documents),
            "taken_down_occurrences": taken.occurrences,
            "taken_down_tokens": taken.tokens}


def read_occurrences(store: Store, recipe_name: str) -> pa.Table:
    return PartitionLayout(store, MIX, recipe_name).read_table()


# --- shards ----------------------------------------------------------------------------------


def _register_shard_inputs(con: duckdb.DuckDBPyConnection, store: Store,
                           occurrences: pa.Table | PartitionLayout) -> None:
    """Views `shard_occurrences` (the mix's occurrences: a table, or the stored mix's parts)
    and `shard_texts` (`partition`, `doc_id`, `text` of the scrubbed parts of every partition
    they draw from), read lazily by DuckDB."""
    if isinstance(occurrences, pa.Table):
        register(con, "shard_occurrences", occurrences)
    else:
        register_table(con, "shard_occurrences", occurrences)
    partitions = [row[0] for row in con.execute(
        "SELECT DISTINCT partition FROM shard_occurrences ORDER BY 1").fetchall()]
    selects = ["SELECT NULL::VARCHAR AS partition, NULL::VARCHAR AS doc_id,"
               " NULL::VARCHAR AS text WHERE false"]
    for number, partition in enumerate(partitions):
        register_table(con, f"scrubbed_{number}", PartitionLayout(store, SCRUBBED, partition),
                       columns=["doc_id", "text"])
        selects.append(f"SELECT {literal(partition)} AS partition, doc_id, text"
                       f" FROM scrubbed_{number}")
    con.execute(f"CREATE OR REPLACE VIEW shard_texts AS {' UNION ALL '.join(selects)}")


@contextmanager
def shard_plan(store: Store, occurrences: pa.Table | PartitionLayout, settings: ShardSettings,
               work: str | None = None) -> Iterator[ShardPlan]:
    """The mix's occurrences in shard order, bucketed with their scrubbed text
    (`curation.shards.plan_shards`): the buckets under the `work` prefix of `store`, where
    range tasks on any node read them (None: in the local work folder, for a reader in this
    process). The local work folder under the budget's spill directory and the work prefix are
    removed after, the prefix also before (a killed build's leftovers). Memory: the budget's
    DuckDB session and one Arrow batch."""
    budget = current_budget()
    with tempfile.TemporaryDirectory(prefix="shard-plan-", dir=budget.spill_directory) as local:
        if work is not None:
            store.delete_prefix(work)
        try:
            with duckdb_session() as con:
                _register_shard_inputs(con, store, occurrences)
                plan = plan_shards(con, "shard_occurrences", "shard_texts",
                                   ("partition", "doc_id"), settings, Path(local),
                                   store=None if work is None else store, prefix=work or "")
            yield plan
        finally:
            if work is not None:
                store.delete_prefix(work)


def ordered_occurrences(store: Store, occurrences: pa.Table,
                        recipe: RecipeConfig) -> Iterator[Occurrence]:
    """The mix's occurrences in shuffle order (phases in recipe order, then the keyed hash of
    doc_id and occurrence), with their scrubbed text: read from the plan's buckets one at a
    time, never every text at once."""
    with shard_plan(store, occurrences, ShardSettings.from_recipe(recipe)) as plan:
        yield from iter_planned(plan)


@dataclass(frozen=True)
class ShardsBuild:
    dataset_version: str
    prefix: str
    manifest: dict
    rebuilt: bool


def shards_prefix(dataset_version: str) -> str:
    return f"{SHARDS}/{dataset_version}"


def shards_work_prefix(dataset_version: str) -> str:
    """The build's buckets and range outputs, removed when it ends."""
    return f"{SHARDS}/_work/{dataset_version}"


def build_dataset_shards(store: Store, recipe_name: str, recipe: RecipeConfig,
                         occurrences: pa.Table | None, tokenizer: PinnedTokenizer,
                         info: BuildInfo, threads: int) -> ShardsBuild:
    """Tokenizes, packs and writes the shards of `info.version` unless they exist already.

    `occurrences`: the mix's (None: its stored parts, which DuckDB reads lazily); `threads`:
    the worker processes that build ranges of shards in parallel (`map_tasks`, on Ray under
    `use_ray`), one tokenizer thread each, reading their buckets from and writing their
    shards to `store` (no disk shared with this process); `best_fit` packing is one serial,
    streaming build on `threads` tokenizer threads (`store_planned_shards`). Memory: the
    plan's DuckDB session under the budget, then per worker one bucket's text and one shard's
    tokens."""
    prefix = shards_prefix(info.version)
    layout = PartitionLayout(store, SHARDS, recipe_name)
    if store.exists(f"{prefix}/manifest.json"):
        manifest = json.loads(store.read_bytes(f"{prefix}/manifest.json"))
        rebuilt = False
    else:
        serial = recipe.packing == "best_fit"
        settings = ShardSettings.from_recipe(recipe, threads=max(1, threads) if serial else 1)
        source = PartitionLayout(store, MIX, recipe_name) if occurrences is None else occurrences
        with shard_plan(store, source, settings, shards_work_prefix(info.version)) as plan:
            manifest = store_planned_shards(plan, tokenizer, store, prefix, settings, info,
                                            threads)
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
    only when that version's folder has no manifest yet, under the partition's lock, by
    `threads` worker processes (`build_dataset_shards`)."""
    tokenizer = load_stored_tokenizer(store, recipe_name)
    info = shards_version(store, recipe_name, recipe, pipeline, tokenizer)
    with hold_locks(store, [SHARDS], recipe_name, run_id=run_id):
        return build_dataset_shards(store, recipe_name, recipe, None, tokenizer, info,
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
