"""The `mix[recipe]` kernel (no Dagster): selection under a recipe, one member per duplicate
group, per-source token shares with up/downsampling, phases; deterministic from the seed.

Three steps, each a function over Arrow tables:

1. `gather_candidates(store, partitions)`: one row per document of the recipe's partitions,
   joining the per-partition annotations (`documents`, `language`, `heuristics`,
   `quality_scores`, `decontaminated`, `scrubbed`) and the document's duplicate group: the
   connected component over every cluster membership (`url_dedup`, `exact_dedup`,
   `dedup_clusters` within partitions, `cross_dedup` across them; a curated source with
   `filters: curated` contributes its `exact_dedup` clusters only). Text is never held: sizes
   come from the scrubbed text one part at a time.
2. `select_documents(candidates, recipe)`: every document gets one decision, the first rule in
   `RULES` it fails, or `selected`. The order is fixed:

       language            language verdict false, or not one of `selection.languages`
                           (web filter)
       heuristics          the heuristics verdict (the pipeline's default rule thresholds;
                           web filter)
       contaminated        eval n-gram hits (when `selection.drop_contaminated`)
       empty_after_edits   nothing left after the scrubbing edits
       (added stages)      the `keep` verdict of each stage in `curation.graph.
                           SELECTION_VERDICTS`, under the stage's name (web filter)
       quality             not in the top `selection.quality_top_fraction` of the web
                           documents still in, per language (curated sources are exempt)
       duplicate           another member of its group ranks higher among those still in

   The web filters judge the crawl and every curated source declared `filters: web`; a curated
   source with `filters: curated` (the default) is judged only by what fits edited text:
   contamination, empty after edits and exact duplicates (see step 1).

   `not_in_recipe` is implicit: only the recipe's partitions are read. A duplicate group keeps
   its best-ranked member among the documents that passed every rule above (docs/architecture.md,
   "Determinism"): curated sources first, then the earliest snapshot (ids sort
   chronologically), then `cluster_policy` (`earliest`: nothing more; `longest`: most text
   bytes; `quality`: highest score), then the smallest `doc_id`. A recipe that leaves out a
   snapshot therefore still keeps a copy from another one.
3. Mixing (`mix_candidates`): per phase, the target tokens of source `s` are
   `T * fraction * weight_s` (weights normalised over the sources with selected documents in
   that phase's pool). `T` is `recipe.total_tokens`, else the largest total for which no source
   needs more than `max_epochs` epochs summed over the phases. A source's pool is repeated
   `epochs = target / available` times, capped so its epochs over all phases stay within
   `max_epochs` (a capped source "ran out"; the shortfall is not moved to other sources).
   Whole epochs repeat every document; the fraction is filled by walking the pool in the
   order of a blake2b hash keyed with the seed, of (`doc_id`, phase), each document taking one
   more occurrence while it fits the remaining budget (then at most one more document, if that
   brings the total closer). The cap bounds a source's epochs (tokens drawn over tokens in its
   pool): a single document may pass it by at most one occurrence per phase, since each phase
   draws its fractional occurrences in its own hash order. A selected document can also get no
   occurrence at all (downsampling); its decision still says `selected`. Token counts are
   exact: `count_tokens` tokenizes every selected document's scrubbed text with the recipe's
   tokenizer, EOS included, as the shards will (`curation.shards.occurrence_lengths`), so the
   shares planned here are the shares the shards deliver. Without a tokenizer (kernel tests)
   they are `text_bytes / DEFAULT_BYTES_PER_TOKEN`.

Everything is sorted before use, so outputs depend on the inputs' content and the seed, never on
row order. Memory is O(documents of the recipe) in Arrow/numpy columns (about 100 bytes a
document plus the occurrences); there are no per-document Python loops except the keyed hash
and the short first-fit walk at the end of each pool.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curation.config import SOURCE_PREFIX, RecipeConfig
from curation.dedup import connected_components
from curation.graph import (
    ALL,
    CROSS_DEDUP,
    CURATED_DEDUP,
    DECONTAMINATED,
    DOCUMENTS,
    HEURISTICS,
    LANGUAGE,
    MIX,
    PARTITION_DEDUP,
    QUALITY_SCORES,
    SCRUBBED,
    SELECTION_VERDICTS,
)
from curation.partition import PartitionLayout
from curation.schema import WEB_SOURCE
from curation.shards import occurrence_lengths
from curation.storage import Store, read_parquet
from curation.tokenizer import PinnedTokenizer

KERNEL_VERSION = "mix-2"  # 2: exact token counts, curated filter policy
ASSET = MIX
RULES = ("language", "heuristics", "contaminated", "empty_after_edits", *SELECTION_VERDICTS,
         "quality", "duplicate")
"""Selection rules in the order they are applied; a document's decision names the first one it
fails."""
TAKEDOWN = "takedown"
"""The rule of a selected document the takedown list removed after mixing
(`curation.stages.dataset`)."""
SELECTED = "selected"
DEFAULT_BYTES_PER_TOKEN = 4.0
TOKENIZE_BATCH = 1024  # texts per encode_batch call while counting tokens
DEDUP_ASSETS = PARTITION_DEDUP
CURATED_DEDUP_ASSET = CURATED_DEDUP
CROSS_ASSET, CROSS_PARTITION = CROSS_DEDUP, ALL

CANDIDATE_SCHEMA = pa.schema([
    pa.field("doc_id", pa.string(), nullable=False),
    pa.field("partition", pa.string(), nullable=False),
    pa.field("source", pa.string(), nullable=False),
    pa.field("snapshot", pa.string()),
    pa.field("licence", pa.string()),
    pa.field("url", pa.string()),
    pa.field("language", pa.string()),
    pa.field("language_keep", pa.bool_()),
    pa.field("heuristics_keep", pa.bool_()),
    pa.field("quality_score", pa.float64()),
    pa.field("contaminated", pa.bool_()),
    pa.field("empty_after_edits", pa.bool_()),
    # the first of `verdicts` (added annotate stages) whose `keep` is false, else null
    pa.field("verdict_drop", pa.string()),
    pa.field("text_bytes", pa.int64()),
    pa.field("group_id", pa.string(), nullable=False),
])

MIX_DECISION_SCHEMA = pa.schema([
    pa.field("doc_id", pa.string(), nullable=False),
    pa.field("partition", pa.string(), nullable=False),
    pa.field("recipe", pa.string(), nullable=False),
    pa.field("kept", pa.bool_(), nullable=False),
    pa.field("rule", pa.string(), nullable=False),
    pa.field("kept_doc_id", pa.string()),
    # A selected document's tokens in the shards per occurrence (EOS included); null for the
    # documents the selection rules drop, which the mix never tokenizes.
    pa.field("tokens", pa.int64()),
])

OCCURRENCE_SCHEMA = pa.schema([
    pa.field("doc_id", pa.string(), nullable=False),
    pa.field("partition", pa.string(), nullable=False),
    pa.field("source", pa.string(), nullable=False),
    pa.field("licence", pa.string()),
    pa.field("phase", pa.string(), nullable=False),
    pa.field("occurrence", pa.int64(), nullable=False),
    # The occurrence's tokens in the shards, EOS included (exact with a tokenizer; the name is
    # the catalog's column).
    pa.field("est_tokens", pa.int64(), nullable=False),
])

SHARE_SCHEMA = pa.schema([
    pa.field("phase", pa.string(), nullable=False),
    pa.field("source", pa.string(), nullable=False),
    pa.field("weight", pa.float64(), nullable=False),  # as configured
    pa.field("target_share", pa.float64(), nullable=False),  # normalised over present sources
    pa.field("target_tokens", pa.int64(), nullable=False),
    pa.field("achieved_tokens", pa.int64(), nullable=False),
    pa.field("achieved_share", pa.float64(), nullable=False),  # of the phase's achieved tokens
    pa.field("available_tokens", pa.int64(), nullable=False),  # the phase's pool of the source
    pa.field("documents", pa.int64(), nullable=False),  # documents in that pool
    pa.field("occurrences", pa.int64(), nullable=False),
    pa.field("needed_epochs", pa.float64(), nullable=False),  # target / available
    pa.field("epochs", pa.float64(), nullable=False),  # achieved / available
    pa.field("ran_out", pa.bool_(), nullable=False),
    pa.field("note", pa.string()),
    # The pool's largest document: the fill ends within half of it of the target (the share
    # gate's allowance for whole documents).
    pa.field("largest_document_tokens", pa.int64(), nullable=False),
])


class MixInputError(ValueError):
    """The inputs cannot give what the recipe asks (missing annotations, no quality scores for
    a quality rule, nothing selected)."""


# --- reading ---------------------------------------------------------------------------------


def _read(store: Store, asset: str, partition: str, schema: pa.Schema, *, name: str = "part",
          required: bool = True) -> pa.Table | None:
    """The given columns of a complete partition's table, part by part, cast to `schema`."""
    layout = PartitionLayout(store, asset, partition)
    manifest = layout.read_manifest()
    if manifest is None:
        if required:
            raise MixInputError(f"{asset}[{partition}] is not complete (no manifest); the mix "
                                "needs it")
        return None
    tables = [read_parquet(store, part.key, schema.names)
              for part in manifest.table_parts(name)]
    if not tables:
        return schema.empty_table()
    return pa.concat_tables([table.cast(schema) for table in tables])


def _text_bytes(store: Store, partition: str) -> pa.Table:
    """doc_id and UTF-8 byte length of the scrubbed text, one part's texts at a time."""
    manifest = PartitionLayout(store, SCRUBBED, partition).read_manifest()
    if manifest is None:
        raise MixInputError(f"scrubbed[{partition}] is not complete (no manifest); the mix "
                            "needs it")
    tables = []
    for part in manifest.parts:
        table = read_parquet(store, part.key, ["doc_id", "text"])
        tables.append(pa.table({
            "doc_id": table["doc_id"].cast(pa.string()),
            "text_bytes": pc.binary_length(table["text"]).cast(pa.int64())}))
        del table
    if not tables:
        return pa.schema([("doc_id", pa.string()), ("text_bytes", pa.int64())]).empty_table()
    return pa.concat_tables(tables)


def _schema(*fields: tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema(list(fields))


_DOCS = _schema(("doc_id", pa.string()), ("source", pa.string()), ("url", pa.string()),
                ("snapshot", pa.string()), ("licence", pa.string()))
_LANGUAGE = _schema(("doc_id", pa.string()), ("language", pa.string()), ("keep", pa.bool_()))
_KEEP = _schema(("doc_id", pa.string()), ("keep", pa.bool_()))
_QUALITY = _schema(("doc_id", pa.string()), ("quality_score", pa.float64()))
_DECONTAMINATED = _schema(("doc_id", pa.string()), ("contaminated", pa.bool_()))
_DECISIONS = _schema(("doc_id", pa.string()), ("reason", pa.string()))
_MEMBERS = _schema(("doc_id", pa.string()), ("cluster_id", pa.string()))


def _with_verdicts(store: Store, partition: str, table: pa.Table,
                   verdicts: Sequence[str]) -> pa.Table:
    """`table` with `verdict_drop`: per document, the first of the `verdicts` assets (added
    annotate stages, docs/adding-a-stage.md) whose `keep` is false, else null."""
    dropped = pa.nulls(table.num_rows, pa.string())
    for asset in reversed(verdicts):  # the first failing verdict in order wins
        keep = _read(store, asset, partition, _KEEP)
        if pc.count_distinct(keep["doc_id"]).as_py() != keep.num_rows:
            raise MixInputError(f"{asset}[{partition}] has a doc_id twice")
        found = pc.take(keep["keep"], pc.index_in(table["doc_id"], value_set=keep["doc_id"]))
        if found.null_count:
            raise MixInputError(f"{asset}[{partition}] has no row for {found.null_count} of "
                                f"the {table.num_rows} documents; re-materialize it")
        dropped = pc.if_else(pc.invert(found), pa.scalar(asset, pa.string()), dropped)
    return table.append_column("verdict_drop", dropped)


def _partition_rows(store: Store, partition: str,
                    verdicts: Sequence[str] = SELECTION_VERDICTS) -> pa.Table:
    docs = _read(store, DOCUMENTS, partition, _DOCS)
    n = docs.num_rows
    docs = docs.append_column("partition", pa.array([partition] * n, pa.string()))
    language = _read(store, LANGUAGE, partition, _LANGUAGE).rename_columns(
        ["doc_id", "language", "language_keep"])
    heuristics = _read(store, HEURISTICS, partition, _KEEP).rename_columns(
        ["doc_id", "heuristics_keep"])
    quality = _read(store, QUALITY_SCORES, partition, _QUALITY, required=False)
    if quality is None:  # no classifier configured: scores stay null
        quality = _QUALITY.empty_table()
    decontaminated = _read(store, DECONTAMINATED, partition, _DECONTAMINATED)
    sizes = _text_bytes(store, partition)
    scrub_decisions = _read(store, SCRUBBED, partition, _DECISIONS, name="decisions")
    empty = pc.unique(scrub_decisions.filter(
        pc.equal(scrub_decisions["reason"], "empty_after_edits"))["doc_id"])
    table = docs
    for other, asset in ((language, LANGUAGE), (heuristics, HEURISTICS),
                         (quality, QUALITY_SCORES), (decontaminated, DECONTAMINATED),
                         (sizes, SCRUBBED)):
        if pc.count_distinct(other["doc_id"]).as_py() != other.num_rows:
            raise MixInputError(f"{asset}[{partition}] has a doc_id twice")
        table = table.join(other, "doc_id", join_type="left outer")
    for column, asset in (("language_keep", LANGUAGE), ("heuristics_keep", HEURISTICS),
                          ("contaminated", DECONTAMINATED), ("text_bytes", SCRUBBED)):
        missing = table[column].null_count
        if missing:
            raise MixInputError(f"{asset}[{partition}] has no row for {missing} of the "
                                f"{n} documents; re-materialize it")
    table = table.append_column("empty_after_edits", pc.is_in(table["doc_id"], value_set=empty))
    return _with_verdicts(store, partition, table, verdicts)


def _memberships(store: Store, partitions: Sequence[str],
                 curated: Collection[str] = ()) -> list[pa.Table]:
    """Every cluster membership table (doc_id, cluster_id): one per within-partition dedup
    asset and partition (for a `curated` partition, `exact_dedup` only: a book or an article
    is not a duplicate for sharing a URL or most of its shingles), and cross_dedup's (required
    when more than one partition is read)."""
    tables = [_read(store, asset, partition, _MEMBERS)
              for partition in partitions for asset in DEDUP_ASSETS
              if partition not in curated or asset == CURATED_DEDUP_ASSET]
    cross = _read(store, CROSS_ASSET, CROSS_PARTITION, _MEMBERS, required=len(partitions) > 1)
    if cross is not None:
        tables.append(cross)
    return tables


def duplicate_groups(doc_ids: pa.Array | pa.ChunkedArray,
                     memberships: Iterable[pa.Table]) -> pa.Array:
    """The duplicate group of each document of `doc_ids` (unique): the smallest doc_id of its
    connected component, where every membership table (`doc_id`, `cluster_id`) links a
    document to its cluster. Cluster ids are namespaced per table, so ids of different tables
    never merge by accident; documents not in `doc_ids` (cross_dedup rows of partitions the
    recipe leaves out) are skipped: their clusters already hold every link they carry. A
    document in no cluster is its own group. Dense integer ids and numpy union-find
    (`curation.dedup.connected_components`): O(documents + memberships), no Python loop."""
    order = pc.sort_indices(doc_ids)
    sorted_ids = pc.take(doc_ids, order)
    if isinstance(sorted_ids, pa.ChunkedArray):
        sorted_ids = sorted_ids.combine_chunks()
    count = len(sorted_ids)
    edges = []
    offset = count
    for table in memberships:
        node = pc.index_in(table["doc_id"], value_set=sorted_ids)
        valid = pc.is_valid(node)
        node, clusters = node.filter(valid), table["cluster_id"].filter(valid)
        if len(node) == 0:
            continue
        keys = pc.unique(clusters)
        cluster = pc.index_in(clusters, value_set=keys)
        edges.append((np.asarray(node.to_numpy(zero_copy_only=False), np.int64),
                      np.asarray(cluster.to_numpy(zero_copy_only=False), np.int64) + offset))
        offset += len(keys)
    # Documents come first (sorted), clusters after: every root is a document node, the
    # smallest doc_id of its component.
    roots = connected_components(edges, offset)[:count]
    groups = pc.take(sorted_ids, pa.array(roots))
    # back to the caller's order
    inverse = np.empty(count, np.int64)
    inverse[order.to_numpy()] = np.arange(count)
    return pc.take(groups, pa.array(inverse))


def gather_candidates(store: Store, partitions: Sequence[str],
                      curated_sources: Collection[str] = (),
                      verdicts: Sequence[str] = SELECTION_VERDICTS) -> pa.Table:
    """One row per document of `partitions` (`CANDIDATE_SCHEMA`), sorted by doc_id;
    `curated_sources` names the sources judged by the curated filter policy, `verdicts` the
    added annotate stages whose `keep` the selection applies."""
    tables = [_partition_rows(store, partition, verdicts) for partition in partitions]
    table = pa.concat_tables(tables) if tables else CANDIDATE_SCHEMA.empty_table()
    if pc.count_distinct(table["doc_id"]).as_py() != table.num_rows:
        raise MixInputError("a doc_id occurs in two partitions")
    curated = {SOURCE_PREFIX + name for name in curated_sources}
    groups = duplicate_groups(table["doc_id"], _memberships(store, partitions, curated))
    table = table.append_column("group_id", groups)
    table = table.select(CANDIDATE_SCHEMA.names).cast(CANDIDATE_SCHEMA)
    return table.sort_by("doc_id")


# --- selection -------------------------------------------------------------------------------


def _np(column: pa.ChunkedArray | pa.Array, fill: object = None) -> np.ndarray:
    if fill is not None:
        column = pc.fill_null(column, fill)
    return column.to_numpy(zero_copy_only=False)


def _codes(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Integer codes in sorted value order (nulls -1)."""
    values = pc.unique(column).drop_null()
    values = pc.take(values, pc.sort_indices(values))
    return _np(pc.index_in(column, value_set=values), -1).astype(np.int64)


def _group_starts(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and sizes of runs of equal values in sorted `keys`."""
    if keys.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    starts = np.r_[0, np.flatnonzero(keys[1:] != keys[:-1]) + 1]
    return starts, np.diff(np.r_[starts, keys.size])


def _top_fraction(mask: np.ndarray, scores: np.ndarray, languages: np.ndarray,
                  fraction: float) -> np.ndarray:
    """Within `mask`, per language, the top `ceil(fraction * n)` documents by score (ties: the
    smaller doc_id, i.e. row index of the sorted candidates)."""
    index = np.flatnonzero(mask)
    order = index[np.lexsort((index, -scores[index], languages[index]))]
    starts, sizes = _group_starts(languages[order])
    rank = np.arange(order.size) - np.repeat(starts, sizes)
    quota = np.ceil(fraction * sizes - 1e-9).astype(np.int64)
    keep = np.zeros(mask.size, bool)
    keep[order[rank < np.repeat(quota, sizes)]] = True
    return keep


def _require_scores(table: pa.Table, mask: np.ndarray, scores: np.ndarray, what: str) -> None:
    missing = mask & np.isnan(scores)
    if missing.any():
        partitions = sorted(set(np.asarray(_np(table["partition"]))[missing].tolist()))
        raise MixInputError(f"{what} needs quality scores, but {int(missing.sum())} documents "
                            f"have none (partitions {', '.join(partitions)}): is a quality "
                            "classifier configured and quality_scores materialized?")


def _sorted(candidates: pa.Table) -> pa.Table:
    return candidates.select(CANDIDATE_SCHEMA.names).cast(CANDIDATE_SCHEMA).sort_by("doc_id")


def select_documents(candidates: pa.Table, recipe: RecipeConfig,
                     curated_sources: Collection[str] = ()) -> pa.Table:
    """One decision per candidate (`MIX_DECISION_SCHEMA`, sorted by doc_id): the first rule of
    `RULES` it fails, or `selected`; duplicates name the kept member. The web filters
    (language, heuristics) skip the documents of `curated_sources`."""
    table = _sorted(candidates)
    n = table.num_rows
    doc_ids = _np(table["doc_id"])
    scores = _np(table["quality_score"], float("nan")).astype(np.float64)
    is_web = _np(pc.equal(table["source"], WEB_SOURCE), False).astype(bool)
    curated = _np(pc.is_in(table["source"], value_set=pa.array(sorted(curated_sources),
                                                               pa.string())), False).astype(bool)
    rule = np.full(n, SELECTED, dtype=object)
    alive = np.ones(n, bool)

    def fail(rule_name: str, failing: np.ndarray) -> None:
        hit = alive & failing
        rule[hit] = rule_name
        alive[hit] = False

    language_ok = _np(table["language_keep"], False).astype(bool)
    if recipe.selection.languages is not None:
        wanted = pa.array(recipe.selection.languages, pa.string())
        language_ok &= _np(pc.is_in(table["language"], value_set=wanted), False).astype(bool)
    fail("language", ~language_ok & ~curated)
    fail("heuristics", ~_np(table["heuristics_keep"], False).astype(bool) & ~curated)
    if recipe.selection.drop_contaminated:
        fail("contaminated", _np(table["contaminated"], True).astype(bool))
    text_bytes = _np(table["text_bytes"], 0).astype(np.int64)
    fail("empty_after_edits",
         _np(table["empty_after_edits"], False).astype(bool) | (text_bytes <= 0))
    verdict_drop = _np(table["verdict_drop"], "")
    for verdict in sorted(set(verdict_drop.tolist()) - {""}):  # one per document: any order
        fail(verdict, (verdict_drop == verdict) & ~curated)
    fraction = recipe.selection.quality_top_fraction
    if fraction is not None:
        pool = alive & is_web
        _require_scores(table, pool, scores, "selection.quality_top_fraction")
        languages = _codes(table["language"])
        fail("quality", pool & ~_top_fraction(pool, scores, languages, fraction))

    # duplicate: per group, the best-ranked member still alive
    groups = _codes(table["group_id"])
    if recipe.cluster_policy == "quality":  # needed where a group has two members still in
        members = np.bincount(groups[alive], minlength=n)
        _require_scores(table, alive & (members[groups] > 1), scores, "cluster_policy: quality")
    policy = {
        "earliest": np.zeros(n),
        "longest": -text_bytes.astype(np.float64),
        "quality": np.where(np.isnan(scores), np.inf, -scores),
    }[recipe.cluster_policy]
    snapshots = _codes(table["snapshot"])  # nulls (curated) first; ids sort chronologically
    index = np.flatnonzero(alive)
    order = index[np.lexsort((index, policy[index], snapshots[index], is_web[index],
                              groups[index]))]
    starts, sizes = _group_starts(groups[order])
    best = np.repeat(order[starts], sizes)
    kept_doc = np.full(n, None, dtype=object)
    duplicate = order[best != order]
    kept_doc[duplicate] = doc_ids[best[best != order]]
    is_duplicate = np.zeros(n, bool)
    is_duplicate[duplicate] = True
    fail("duplicate", is_duplicate)

    return pa.table({
        "doc_id": table["doc_id"],
        "partition": table["partition"],
        "recipe": pa.array([recipe.name] * n, pa.string()),
        "kept": pa.array(rule == SELECTED, pa.bool_()),
        "rule": pa.array(rule.tolist(), pa.string()),
        "kept_doc_id": pa.array(kept_doc.tolist(), pa.string()),
        "tokens": pa.nulls(n, pa.int64()),
    }, schema=MIX_DECISION_SCHEMA)


def funnel(decisions: pa.Table) -> dict[str, int]:
    """Documents dropped per rule, in `RULES` order (every rule listed, zeros too)."""
    counts = dict.fromkeys(RULES, 0)
    for row in decisions.group_by("rule").aggregate([("doc_id", "count")]).to_pylist():
        if row["rule"] != SELECTED:
            counts[row["rule"]] = row["doc_id_count"]
    return counts


# --- mixing ----------------------------------------------------------------------------------


def phase_key(doc_id: str, phase: str, seed: int) -> int:
    """The order in which a phase's pool takes its fractional occurrences: blake2b of
    (`doc_id`, phase) keyed with the seed (the key convention of `curation.shards`)."""
    message = doc_id.encode("utf-8") + b"\x00" + phase.encode("utf-8")
    digest = hashlib.blake2b(message, key=str(seed).encode("ascii"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _fill(tokens: np.ndarray, budget: float) -> np.ndarray:
    """Which documents (in the given order) take one more occurrence for `budget` tokens: each
    in turn while it fits the budget left (first fit), then at most one more if that ends
    closer to the budget than stopping short."""
    take = np.zeros(tokens.size, bool)
    if budget <= 0 or tokens.size == 0:
        return take
    cumulative = np.cumsum(tokens)
    prefix = int(np.searchsorted(cumulative, budget, side="right"))
    take[:prefix] = True
    left = budget - (cumulative[prefix - 1] if prefix else 0)
    if prefix < tokens.size and left >= 1:
        for position in (prefix + np.flatnonzero(tokens[prefix:] <= left)).tolist():
            if tokens[position] <= left:
                take[position] = True
                left -= tokens[position]
                if left < 1:
                    break
    if left > 0:
        closer = np.flatnonzero(~take & (tokens < 2 * left))
        if closer.size:
            take[closer[0]] = True
    return take


@dataclass
class _Pool:
    rows: np.ndarray  # row indices into the selected table, sorted (doc_id order)
    tokens: int
    weight: float
    share: float = 0.0
    needed: float = 0.0  # epochs
    planned: float = 0.0  # epochs after the cap
    ran_out: bool = False
    note: str | None = None


@dataclass(frozen=True)
class MixResult:
    """What `mix[recipe]` writes and reports.

    `occurrences`: one row per document occurrence (`OCCURRENCE_SCHEMA`, sorted by phase in
    recipe order, doc_id, occurrence; `(doc_id, occurrence)` unique, occurrences numbered
    across phases). `decisions`: one selection decision per candidate (`MIX_DECISION_SCHEMA`).
    `funnel`: documents dropped per rule, in `RULES` order. `shares`: per phase and source
    (`SHARE_SCHEMA`). `total_tokens`: the target `T` (the recipe's, or the largest within
    `max_epochs`). `token_counts`: `exact` when every selected document was tokenized with the
    recipe's tokenizer (EOS included), `bytes` for the flat `DEFAULT_BYTES_PER_TOKEN`
    estimate. `bytes_per_token`: per source, the selected text's bytes over its tokens (what
    the report uses to estimate the tokens of documents the mix did not tokenize)."""

    recipe: str
    seed: int
    occurrences: pa.Table
    decisions: pa.Table
    funnel: dict[str, int]
    shares: pa.Table
    total_tokens: int
    token_counts: Literal["exact", "bytes"]
    bytes_per_token: dict[str, float] = field(default_factory=dict)

    @property
    def candidates(self) -> int:
        return self.decisions.num_rows

    @property
    def selected(self) -> int:
        return int(pc.sum(self.decisions["kept"]).as_py() or 0)

    @property
    def achieved_tokens(self) -> int:
        return int(pc.sum(self.occurrences["est_tokens"]).as_py() or 0)


def selected_texts(store: Store, selected: pa.Table) -> Iterator[pa.Table]:
    """(doc_id, text) of the scrubbed text of every document of `selected` (`partition`,
    `doc_id` columns), one stored part at a time, partitions in sorted order: the mix's token
    counts and the shards read the same texts the same way, and never a whole partition."""
    for partition in sorted(set(selected["partition"].to_pylist())):
        wanted = selected.filter(pc.equal(selected["partition"], partition))["doc_id"]
        manifest = PartitionLayout(store, SCRUBBED, partition).complete_manifest()
        for part in manifest.parts:
            rows = read_parquet(store, part.key, ["doc_id", "text"])
            yield rows.filter(pc.is_in(rows["doc_id"], value_set=wanted))


def count_tokens(store: Store, selected: pa.Table, tokenizer: PinnedTokenizer,
                 batch: int = TOKENIZE_BATCH) -> pa.Table:
    """(doc_id, tokens) of every document of `selected` (`partition`, `doc_id` columns): its
    scrubbed text's tokens plus the EOS, exactly what the shards will hold per occurrence.
    Streams one part of one partition at a time and keeps only the counts."""
    ids, counts = [], []
    for rows in selected_texts(store, selected):
        texts = rows["text"].to_pylist()
        for start in range(0, len(texts), batch):
            counts.append(occurrence_lengths(texts[start:start + batch], tokenizer))
        ids.append(rows["doc_id"].cast(pa.string()))
        del rows, texts
    table = pa.table({"doc_id": pa.chunked_array(ids, pa.string()),
                      "tokens": np.concatenate(counts) if counts else np.zeros(0, np.int64)})
    if table.num_rows != selected.num_rows:
        raise MixInputError(f"scrubbed holds {table.num_rows} of the {selected.num_rows} "
                            "selected documents; re-materialize scrubbed")
    return table


def _document_tokens(selected: pa.Table, token_counts: pa.Table | None) -> np.ndarray:
    """Tokens per selected row: the exact counts, or bytes over `DEFAULT_BYTES_PER_TOKEN`."""
    if token_counts is None:
        sizes = _np(selected["text_bytes"], 0).astype(np.float64)
        return np.maximum(1, np.rint(sizes / DEFAULT_BYTES_PER_TOKEN)).astype(np.int64)
    position = pc.index_in(selected["doc_id"], value_set=token_counts["doc_id"])
    if position.null_count:
        raise MixInputError(f"token_counts has no count for {position.null_count} selected "
                            "documents")
    return _np(token_counts["tokens"])[_np(position)].astype(np.int64)


def _bytes_per_token(selected: pa.Table, tokens: np.ndarray) -> dict[str, float]:
    sources = _np(selected["source"])
    sizes = _np(selected["text_bytes"], 0).astype(np.float64)
    return {name: float(sizes[sources == name].sum() / max(1, tokens[sources == name].sum()))
            for name in sorted(set(sources.tolist()))}


def _phase_pools(recipe: RecipeConfig, selected: pa.Table, tokens: np.ndarray
                 ) -> list[dict[str, _Pool]]:
    sources = _np(selected["source"])
    scores = _np(selected["quality_score"], float("nan")).astype(np.float64)
    languages = _codes(selected["language"])
    names = sorted(set(sources.tolist()) | {s for p in recipe.phases for s in p.weights})
    phases = []
    for phase in recipe.phases:
        pools = {}
        for name in names:
            mask = sources == name
            if name == WEB_SOURCE and phase.quality_top_fraction is not None:
                _require_scores(selected, mask, scores,
                                f"phases.{phase.name}.quality_top_fraction")
                mask = _top_fraction(mask, scores, languages, phase.quality_top_fraction)
            rows = np.flatnonzero(mask)
            pool = _Pool(rows, int(tokens[rows].sum()), float(phase.weights.get(name, 0.0)))
            if pool.weight > 0 and pool.tokens == 0:
                pool.ran_out, pool.note = True, "no selected documents"
            pools[name] = pool
        present = sum(p.weight for p in pools.values() if p.weight > 0 and p.tokens > 0)
        for pool in pools.values():
            if pool.weight > 0 and pool.tokens > 0:
                pool.share = pool.weight / present
        phases.append(pools)
    return phases


def _plan(recipe: RecipeConfig, phases: list[dict[str, _Pool]]) -> int:
    """Sets every pool's epochs; returns the total target T."""
    # epochs of source s over all phases, per token of T
    per_token: dict[str, float] = {}
    for phase, pools in zip(recipe.phases, phases, strict=True):
        for name, pool in pools.items():
            if pool.share > 0:
                epochs = phase.fraction * pool.share / pool.tokens
                per_token[name] = per_token.get(name, 0.0) + epochs
    if not per_token:
        raise MixInputError(f"recipe {recipe.name}: no phase has a weighted source with selected "
                            "documents")
    if recipe.total_tokens is not None:
        total = int(recipe.total_tokens)
    else:
        total = int(math.floor(min(recipe.max_epochs / e for e in per_token.values()) + 1e-6))
    for name, epochs_per_token in per_token.items():
        needed = total * epochs_per_token
        scale = 1.0
        if needed > recipe.max_epochs * (1 + 1e-9):
            scale = recipe.max_epochs / needed
        for phase, pools in zip(recipe.phases, phases, strict=True):
            pool = pools[name]
            if pool.share <= 0:
                continue
            pool.needed = total * phase.fraction * pool.share / pool.tokens
            pool.planned = pool.needed * scale
            if scale < 1.0:
                pool.ran_out = True
                pool.note = (f"capped at max_epochs={recipe.max_epochs:g}: needs {needed:.3g} "
                             "epochs over all phases")
    return total


def mix_candidates(candidates: pa.Table, recipe: RecipeConfig, *,
                   token_counts: pa.Table | None = None,
                   curated_sources: Collection[str] = ()) -> MixResult:
    """Selection (`select_documents`) and mixing (`mix_selected`) of `gather_candidates` rows
    under `recipe`."""
    decisions = select_documents(candidates, recipe, curated_sources)
    return mix_selected(candidates, decisions, recipe, token_counts=token_counts)


def mix_selected(candidates: pa.Table, decisions: pa.Table, recipe: RecipeConfig, *,
                 token_counts: pa.Table | None = None) -> MixResult:
    """Mixing of the selected candidates (see the module docstring). `token_counts` (`doc_id`,
    `tokens`: `count_tokens`) gives every selected document's exact tokens; None estimates
    them from bytes (`DEFAULT_BYTES_PER_TOKEN`)."""
    table = _sorted(candidates)
    selected = table.filter(decisions["kept"])
    tokens = _document_tokens(selected, token_counts)
    doc_ids = _np(selected["doc_id"])
    phases = _phase_pools(recipe, selected, tokens)
    total = _plan(recipe, phases)

    rows_out, phase_out, share_rows = [], [], []
    for index, (phase, pools) in enumerate(zip(recipe.phases, phases, strict=True)):
        phase_rows = []
        for name in sorted(pools):
            pool = pools[name]
            counts = np.zeros(pool.rows.size, np.int64)
            if pool.planned > 0:
                whole = int(math.floor(pool.planned + 1e-9))
                counts += whole
                keys = np.array([phase_key(d, phase.name, recipe.seed)
                                 for d in doc_ids[pool.rows].tolist()], np.uint64)
                order = np.lexsort((np.arange(pool.rows.size), keys))
                budget = pool.planned * pool.tokens - whole * pool.tokens
                extra = _fill(tokens[pool.rows][order], budget)
                counts[order[extra]] += 1
            repeated = np.repeat(pool.rows, counts)
            phase_rows.append(repeated)
            achieved = int(tokens[repeated].sum())
            share_rows.append({
                "phase": phase.name, "source": name, "weight": pool.weight,
                "target_share": pool.share,
                "target_tokens": int(round(total * phase.fraction * pool.share)),
                "achieved_tokens": achieved, "achieved_share": 0.0,
                "available_tokens": pool.tokens, "documents": int(pool.rows.size),
                "occurrences": int(repeated.size), "needed_epochs": pool.needed,
                "epochs": achieved / pool.tokens if pool.tokens else 0.0,
                "ran_out": pool.ran_out, "note": pool.note,
                "largest_document_tokens": int(tokens[pool.rows].max()) if pool.rows.size
                else 0})
        merged = np.concatenate(phase_rows) if phase_rows else np.zeros(0, np.int64)
        rows_out.append(np.sort(merged, kind="stable"))
        phase_out.append(np.full(merged.size, index, np.int64))
        phase_total = sum(r["achieved_tokens"] for r in share_rows if r["phase"] == phase.name)
        for row in share_rows:
            if row["phase"] == phase.name and phase_total:
                row["achieved_share"] = row["achieved_tokens"] / phase_total

    occurrences = _occurrences(selected, recipe, tokens, rows_out, phase_out)
    shares = pa.Table.from_pylist(share_rows, SHARE_SCHEMA)
    decisions = _with_tokens(decisions, tokens)
    return MixResult(recipe.name, recipe.seed, occurrences, decisions, funnel(decisions),
                     shares, total, "bytes" if token_counts is None else "exact",
                     _bytes_per_token(selected, tokens))


def _with_tokens(decisions: pa.Table, tokens: np.ndarray) -> pa.Table:
    """The decisions with each selected document's tokens (selected rows in doc_id order, as
    `tokens`)."""
    kept = _np(decisions["kept"]).astype(bool)
    column = np.zeros(decisions.num_rows, np.int64)
    column[kept] = tokens
    index = decisions.schema.get_field_index("tokens")
    return decisions.set_column(index, "tokens", pa.array(column, pa.int64(), mask=~kept))


def _occurrences(selected: pa.Table, recipe: RecipeConfig, tokens: np.ndarray,
                 rows_out: list[np.ndarray], phase_out: list[np.ndarray]) -> pa.Table:
    """Occurrence rows sorted by phase, doc_id (row order), occurrence; a document's
    occurrences are numbered across phases in recipe order."""
    rows = np.concatenate(rows_out) if rows_out else np.zeros(0, np.int64)
    phase_index = np.concatenate(phase_out) if phase_out else np.zeros(0, np.int64)
    # rows are in (phase, row) order: the rank of each among its document's rows, in that order
    by_doc = np.argsort(rows, kind="stable")
    starts, sizes = _group_starts(rows[by_doc])
    occurrence = np.empty(rows.size, np.int64)
    occurrence[by_doc] = np.arange(rows.size) - np.repeat(starts, sizes)
    picked = pa.array(rows, pa.int64())
    names = np.array([phase.name for phase in recipe.phases], dtype=object)
    return pa.table({
        "doc_id": pc.take(selected["doc_id"], picked),
        "partition": pc.take(selected["partition"], picked),
        "source": pc.take(selected["source"], picked),
        "licence": pc.take(selected["licence"], picked),
        "phase": pa.array(names[phase_index].tolist(), pa.string()),
        "occurrence": pa.array(occurrence, pa.int64()),
        "est_tokens": pa.array(tokens[rows], pa.int64()),
    }, schema=OCCURRENCE_SCHEMA)


def build_mix(store: Store, recipe: RecipeConfig, *,
              tokenizer: PinnedTokenizer | None = None,
              curated_sources: Collection[str] = ()) -> MixResult:
    """`gather_candidates` over the recipe's partitions, `select_documents`, the selected
    documents' exact tokens (`count_tokens`, when a tokenizer is given), then `mix_selected`."""
    candidates = gather_candidates(store, recipe.partition_keys(), curated_sources)
    decisions = select_documents(candidates, recipe, curated_sources)
    counts = None
    if tokenizer is not None:
        counts = count_tokens(store, _sorted(candidates).filter(decisions["kept"]), tokenizer)
    return mix_selected(candidates, decisions, recipe, token_counts=counts)


# --- checks ----------------------------------------------------------------------------------


PhaseSource = tuple[str, str]


def delivered_tokens(tokens_by_phase_source: Mapping[str, Mapping[str, int]]
                     ) -> dict[PhaseSource, int]:
    """(phase, source) -> tokens, from a shards manifest's `tokens_by_phase_source`."""
    return {(phase, source): int(count)
            for phase, sources in tokens_by_phase_source.items()
            for source, count in sources.items()}


def share_failures(shares: pa.Table, tolerance: float = 0.01,
                   delivered: Mapping[PhaseSource, int] | None = None) -> list[str]:
    """Sources whose share of their phase misses the target share by more than the allowed
    deviation: `tolerance` plus the phase's granularity, half the largest document of each of
    the phase's pools over the phase's tokens. That is what whole documents allow: the fill
    (`_fill`) ends a source within half its largest document of its target tokens, and a
    share moves by at most the sum of every source's miss over the phase's tokens. Shares are
    of `delivered` tokens (the shards' count per phase and source) when given, else of the
    mix's planned `achieved_tokens`. A source that ran out is exempt (see `ran_out_notes`);
    the others are compared among themselves, their shares renormalised over the sources
    that did not run out (so one source running short does not fail every other one)."""
    failures = []
    rows = shares.to_pylist()
    for phase in dict.fromkeys(row["phase"] for row in rows):
        members = [r for r in rows if r["phase"] == phase and not r["ran_out"]
                   and r["target_share"] > 0]
        got_tokens = {r["source"]: delivered.get((phase, r["source"]), 0) if delivered
                      is not None else r["achieved_tokens"] for r in members}
        target = sum(r["target_share"] for r in members)
        achieved = sum(got_tokens.values())
        slack = sum(r["largest_document_tokens"] for r in members) / 2
        granularity = slack / achieved if achieved else 0.0
        allowed = tolerance + granularity
        for row in members:
            want = row["target_share"] / target if target else 0.0
            got = got_tokens[row["source"]] / achieved if achieved else 0.0
            if abs(got - want) > allowed:
                failures.append(
                    f"phase {phase}: source {row['source']} has {got:.2%} of the tokens, "
                    f"target {want:.2%} (tolerance {tolerance:.2%} + {granularity:.2%} for "
                    f"whole documents: half the largest document of each source, {slack:,.0f} of "
                    f"the phase's {achieved:,} tokens)")
    return failures


def ran_out_notes(shares: pa.Table) -> list[str]:
    """The sources that ran out (reported, never a failure): capped at `max_epochs`, or no
    selected documents for a weighted source."""
    return [f"phase {r['phase']}: source {r['source']} ran out ({r['note']}); "
            f"{r['achieved_share']:.2%} of the tokens, target {r['target_share']:.2%}"
            for r in shares.to_pylist() if r["ran_out"]]
