"""The `mix[recipe]` kernel (no Dagster): selection under a recipe, one member per duplicate
group, per-source token shares with up/downsampling, phases; deterministic from the seed.

Every step runs in one DuckDB session (`curation.duck`), over tables it holds on disk:

1. Gathering (`load_candidates`): one row per document of the recipe's partitions in the table
   `candidates`, joining the per-partition annotations (`documents`, `language`,
   `heuristics`, `quality_scores`, `decontaminated`, `scrubbed`) and the document's duplicate
   group: the connected component over every cluster membership (`url_dedup`, `exact_dedup`,
   `dedup_clusters` within partitions, `cross_dedup` across them, and `semantic_dedup` within
   each partition when the recipe sets `selection.semantic_dedup`; a curated source with
   `filters: curated` contributes its `exact_dedup` clusters only), from
   `curation.components.connected_components_sql`, or large-star/small-star tasks on a Ray
   cluster, `curation.star_components`); the group id is the component's smallest doc_id.
   Text is never held: sizes come from the scrubbed text one part at a time.
2. Selection (`select_sql`): every document gets one decision, the first rule in `RULES` it
   fails, or `selected`. The order is fixed:

       licence             a curated or code document whose licence is not in
                           `selection.licences` (when set; web documents carry none)
       language            language verdict false, or not one of `selection.languages`
                           (web filter; code sources skip it: a file's language is its
                           extension's)
       heuristics          the heuristics verdict (the pipeline's default rule thresholds;
                           web filter, and for code sources the code suite's)
       contaminated        eval n-gram hits (when `selection.drop_contaminated`)
       empty_after_edits   nothing left after the scrubbing edits
       (added stages)      the `keep` verdict of each stage in `curation.graph.
                           SELECTION_VERDICTS`, under the stage's name (web filter)
       duplicate           another member of its group ranks higher among those still in
       quality             not in the top `selection.quality_top_fraction` of the web
                           documents still in, per language (curated sources are exempt):
                           the percentile is over distinct documents, one per duplicate
                           group, as FineWeb and BEE deduplicate before the learned cut; a
                           group whose representative falls below it keeps no member

   The web filters judge the crawl and every curated source declared `filters: web`; a curated
   source with `filters: curated` (the default) is judged only by what fits edited text:
   contamination, empty after edits and exact duplicates (see step 1). A code source
   (`kind: code`) is judged by its licence, the code suite, contamination, empty after
   edits and every duplicate rule (near duplicates from code shingles).

   `not_in_recipe` is implicit: only the recipe's partitions are read. A duplicate group keeps
   its best-ranked member among the documents that passed the rules before it (docs/architecture.md,
   "Determinism"): curated sources first, then the earliest snapshot (ids sort
   chronologically), then `cluster_policy` (`earliest`: nothing more; `longest`: most text
   bytes; `quality`: highest score), then the smallest `doc_id`. A recipe that leaves out a
   snapshot therefore still keeps a copy from another one.
3. Mixing (`mix_sql`): per phase, the target tokens of source `s` are
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
   occurrence at all (downsampling); its decision still says `selected`. Rehydration
   (`recipe.rehydration`, FineWeb-2) gives each web document a weight by its duplicate group's
   size: it is due `epochs x weight` occurrences, whole ones first, its fraction drawn in the
   same hash order stretched by the fraction (`_repeat`); a pool's tokens, and so its epochs
   and the cap, are then weighted. A recipe's `domain_weights` multiply a document's weight by
   its topic domain's (`domains`; unnamed domains weigh 1, weight 0 gives no occurrence), so
   within each source's budget a domain's share moves as its weight says. Its `domain_caps`
   bound a domain's share of each source's pool in each phase (of the weighted tokens, so of
   the tokens drawn, up to the fill's sampling): a domain over its cap has its weights scaled
   down to meet it, the others keep theirs (`domain_cap_factors`), and the pool's note says
   which domains were capped. Token counts are
   exact: the selected documents' scrubbed text is tokenized with the recipe's tokenizer, EOS
   included, as the shards will (`curation.shards.occurrence_lengths`), so the shares planned
   here are the shares the shards deliver. Without a tokenizer (kernel tests) they are
   `text_bytes / DEFAULT_BYTES_PER_TOKEN`.

Everything is ordered explicitly (ties end on doc_id), so outputs depend on the inputs'
content and the seed, never on row order or on how DuckDB spills.

Memory: DuckDB holds the per-document tables (candidates, memberships, decisions, pools,
occurrences) on disk and spills joins, windows and sorts beyond the session's `memory_limit`
(the budget, `curation.duck`); the groups' join runs in passes sized to that limit
(`join_groups`), the duplicate ranking sorts only the clustered documents, and the quality
cut is found by score histograms, not a sort (`_last_kept`). Python holds at most one stored
part at a time (its Arrow table, or one part's texts while counting tokens), one DuckDB batch
(`BATCH_ROWS`), and what is per phase and source (pool statistics, shares); the fractional
fill streams its pool's
tail in hash order and stops within the pool's largest document. `run_mix` leaves the
decisions and occurrences in the session, for the caller to stream out (`decision_rows`,
`occurrence_rows`); the Arrow functions (`select_documents`, `mix_candidates`, `build_mix`)
fetch them whole, for tests and small inputs.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any, Literal

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curation.config import SOURCE_PREFIX, HeuristicsSelection, RecipeConfig
from curation.duck import (
    MemoryBudget,
    duckdb_session,
    ident,
    insert_parts,
    literal,
    part_count,
    scalar,
)
from curation.graph import (
    ALL,
    CROSS_DEDUP,
    CURATED_DEDUP,
    DECONTAMINATED,
    DOCUMENTS,
    DOMAINS,
    HEURISTICS,
    LANGUAGE,
    MIX,
    PARTITION_DEDUP,
    QUALITY_SCORES,
    SCRUBBED,
    SELECTION_VERDICTS,
    SEMANTIC_DEDUP,
)
from curation.neural_quality import SCORERS
from curation.partition import Manifest, PartitionLayout
from curation.schema import WEB_SOURCE
from curation.shards import occurrence_lengths
from curation.star_components import TaskPlacement, components_sql
from curation.storage import Store, read_parquet
from curation.tokenizer import PinnedTokenizer

KERNEL_VERSION = "mix-4"  # 2: exact token counts, curated filter policy; 3: dedup before the
# quality cut, recipe heuristic thresholds, rehydration; 4: exact sums of fill budgets (the
# same repeats on any thread split), decisions carry their group size
ASSET = MIX
RULES = ("licence", "language", "heuristics", "contaminated", "empty_after_edits",
         *SELECTION_VERDICTS, "duplicate", "quality")
"""Selection rules in the order they are applied; a document's decision names the first one it
fails."""
TAKEDOWN = "takedown"
"""The rule of a selected document the takedown list removed after mixing
(`curation.stages.dataset`)."""
SELECTED = "selected"
DEFAULT_BYTES_PER_TOKEN = 4.0
TOKENIZE_BATCH = 1024  # texts per encode_batch call while counting tokens
BATCH_ROWS = 1 << 16  # rows per Arrow batch read from DuckDB
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

# Table `chosen`: what the token counts and the mix read of each selected candidate
CHOSEN_COLUMNS = ("doc_id", "partition", "source", "licence", "language", "text_bytes",
                  "text_part", "score")

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
    # The candidates in its duplicate group (1: no copy), whatever rule dropped them: what
    # rehydration weighs and the report buckets removals by.
    pa.field("group_size", pa.int64(), nullable=False),
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
    # the phase's pool of the source (with `rehydration`, each document's tokens times its
    # weight: what epochs and max_epochs count)
    pa.field("available_tokens", pa.int64(), nullable=False),
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


REHYDRATION_SCHEMA = pa.schema([
    pa.field("phase", pa.string(), nullable=False),
    pa.field("bucket", pa.string(), nullable=False),  # sizes: "2", "3-4", "101+"
    pa.field("min_size", pa.int64(), nullable=False),
    pa.field("max_size", pa.int64()),  # null: open-ended
    pa.field("weight", pa.float64(), nullable=False),
    pa.field("documents", pa.int64(), nullable=False),  # web documents of the phase's pool
    pa.field("copies", pa.int64(), nullable=False),  # the group members they stand for
    pa.field("occurrences", pa.int64(), nullable=False),
    pa.field("achieved_tokens", pa.int64(), nullable=False),
    pa.field("achieved_share", pa.float64(), nullable=False),  # of the phase's web tokens
])


class MixInputError(ValueError):
    """The inputs cannot give what the recipe asks (missing annotations, no quality scores for
    a quality rule, nothing selected)."""


Connection = duckdb.DuckDBPyConnection


# --- reading ---------------------------------------------------------------------------------


def _manifest(store: Store, asset: str, partition: str, required: bool = True
              ) -> Manifest | None:
    manifest = PartitionLayout(store, asset, partition).read_manifest()
    if manifest is None and required:
        raise MixInputError(f"{asset}[{partition}] is not complete (no manifest); the mix "
                            "needs it")
    return manifest


def _load(con: Connection, store: Store, target: str, asset: str, partitions: Sequence[str],
          columns: Mapping[str, str], *, name: str = "part", required: bool = True,
          read: Sequence[str] | None = None, select: str | None = None) -> list[str]:
    """Table `target` (`partition`, `part`, then `columns`: name -> SQL type) from the `name`
    table of `asset` in each of `partitions` (`select` over the `read` columns, by default the
    columns cast to their types); parts are numbered across partitions. A partition without a
    manifest fails when `required`, else adds nothing. Returns the parts' keys by number."""
    con.execute(f"CREATE TABLE {target} (partition VARCHAR, part INTEGER, "
                + ", ".join(f"{column} {kind}" for column, kind in columns.items()) + ")")
    select = select or ", ".join(f"CAST({column} AS {kind})" for column, kind in columns.items())
    keys: list[str] = []
    for partition in partitions:
        manifest = _manifest(store, asset, partition, required)
        if manifest is not None:
            parts = manifest.table_parts(name)
            insert_parts(con, store, target, partition, parts, len(keys), read or list(columns),
                          select)
            keys += [part.key for part in parts]
    return keys


def _check_unique(con: Connection, table: str, asset: str, partitions: Sequence[str]) -> None:
    twice = dict(con.sql(f"SELECT partition, count(*) - count(DISTINCT doc_id) FROM {table} "
                         "GROUP BY partition").fetchall())
    for partition in partitions:
        if twice.get(partition):
            raise MixInputError(f"{asset}[{partition}] has a doc_id twice")


def _check_complete(con: Connection, table: str, columns: Sequence[tuple[str, str]],
                    partitions: Sequence[str]) -> None:
    """Fails for the first (`column`, asset) of `columns` null in a row of `table`: the asset
    has no row (or no value) for a document."""
    counts = {row[0]: row[1:] for row in con.sql(
        "SELECT partition, count(*), "
        + ", ".join(f"count(*) FILTER (WHERE {column} IS NULL)" for column, _ in columns)
        + f" FROM {table} GROUP BY partition").fetchall()}
    for partition in partitions:
        total, *missing = counts.get(partition, (0,) * (len(columns) + 1))
        for (_, asset), count in zip(columns, missing, strict=True):
            if count:
                raise MixInputError(f"{asset}[{partition}] has no row for {count} of the "
                                    f"{total} documents; re-materialize it")


def _widen(con: Connection, side: str, columns: str) -> None:
    """Adds `columns` (over `x`, the rows of table `side` by partition and doc_id) to table
    `gathered`: one join a statement, so DuckDB holds one build side at a time."""
    con.execute(f"CREATE TABLE _wider AS SELECT g.*, {columns} FROM gathered g LEFT JOIN {side} x "
                "ON x.partition = g.partition AND x.doc_id = g.doc_id")
    con.execute("DROP TABLE gathered")
    con.execute("ALTER TABLE _wider RENAME TO gathered")


def heuristics_verdict(selection: HeuristicsSelection) -> tuple[list[str], str]:
    """The stored `heuristics` columns a recipe's heuristic filter reads, and its verdict over
    them in SQL: the stored verdict of its `suites` (all: `keep`) and its signal bounds (a
    null signal passes)."""
    if selection.suites is None:
        columns, terms = ["keep"], ["keep"]
    else:
        columns = [f"keep_{suite}" for suite in selection.suites]
        terms = [ident(column) for column in columns]
    for name, bound in sorted(selection.signals.items()):
        columns.append(name)
        value = f"CAST({ident(name)} AS DOUBLE)"
        limits = []
        if bound.min is not None:
            limits.append(f"{value} >= {bound.min!r}::DOUBLE")
        if bound.max is not None:
            limits.append(f"{value} <= {bound.max!r}::DOUBLE")
        terms.append(f"({value} IS NULL OR ({' AND '.join(limits)}))")
    return columns, " AND ".join(terms) or "true"


def _load_heuristics(con: Connection, store: Store, partitions: Sequence[str],
                     selection: HeuristicsSelection) -> None:
    """Table `heuristics_rows` (`doc_id`, `keep`): the recipe's heuristic verdict of each
    document, re-thresholded from the stored signals (`heuristics_verdict`)."""
    columns, verdict = heuristics_verdict(selection)
    try:
        _load(con, store, "heuristics_rows", HEURISTICS, partitions,
              {"doc_id": "VARCHAR", "keep": "BOOLEAN"}, read=["doc_id", *columns],
              select=f"CAST(doc_id AS VARCHAR), CAST({verdict} AS BOOLEAN)")
    except (duckdb.BinderException, KeyError, pa.ArrowInvalid) as error:
        raise MixInputError(
            f"selection.heuristics: {HEURISTICS} has no column among {', '.join(columns)} "
            f"(a suite the pipeline leaves disabled, or a signal name it does not store: "
            f"{error})") from None


def load_candidates(con: Connection, store: Store, partitions: Sequence[str],
                    curated_sources: Collection[str] = (),
                    verdicts: Sequence[str] = SELECTION_VERDICTS,
                    budget: MemoryBudget | None = None,
                    heuristics: HeuristicsSelection | None = None,
                    placement: TaskPlacement | None = None,
                    quality_scorer: str = "fasttext",
                    semantic_dedup: bool = False) -> list[str]:
    """Table `candidates` (`CANDIDATE_SCHEMA`, `group_size` and `text_part`, the number of the
    scrubbed part holding the document's text: `join_groups`) over `partitions`, part by
    part; `curated_sources` names the sources judged by the curated filter policy, `verdicts`
    the added annotate stages whose `keep` the selection applies; `budget` is the session's
    (None: the current one); `heuristics` the recipe's heuristic filter (None: the stored
    verdict); `placement` where the duplicate groups' components may run as tasks
    (`group_ids`); `semantic_dedup` joins the semantic groups to them (`load_memberships`).
    Returns the scrubbed parts' keys by number."""
    _load(con, store, "docs", DOCUMENTS, partitions, {
        "doc_id": "VARCHAR", "source": "VARCHAR", "url": "VARCHAR", "snapshot": "VARCHAR",
        "licence": "VARCHAR"})
    _load(con, store, "language_rows", LANGUAGE, partitions,
          {"doc_id": "VARCHAR", "language": "VARCHAR", "keep": "BOOLEAN"})
    _load_heuristics(con, store, partitions, heuristics or HeuristicsSelection())
    # no classifier configured: no table, the scores stay null
    score = SCORERS[quality_scorer]
    _load(con, store, "quality", QUALITY_SCORES, partitions,
          {"doc_id": "VARCHAR", "quality_score": "DOUBLE"}, required=False,
          read=["doc_id", score], select=f"CAST(doc_id AS VARCHAR), CAST({score} AS DOUBLE)")
    _load(con, store, "contamination_rows", DECONTAMINATED, partitions,
          {"doc_id": "VARCHAR", "contaminated": "BOOLEAN"})
    text_parts = _load(con, store, "sizes", SCRUBBED, partitions,
                       {"doc_id": "VARCHAR", "text_bytes": "BIGINT"}, read=["doc_id", "text"],
                       select="CAST(doc_id AS VARCHAR), strlen(CAST(text AS VARCHAR))")
    _load(con, store, "scrub_decisions", SCRUBBED, partitions,
          {"doc_id": "VARCHAR", "reason": "VARCHAR"}, name="decisions")
    for table, asset in (("language_rows", LANGUAGE), ("heuristics_rows", HEURISTICS),
                         ("quality", QUALITY_SCORES), ("contamination_rows", DECONTAMINATED),
                         ("sizes", SCRUBBED)):
        _check_unique(con, table, asset, partitions)
    for number, asset in enumerate(verdicts):
        _load(con, store, f"verdict{number}", asset, partitions,
              {"doc_id": "VARCHAR", "keep": "BOOLEAN"})
        _check_unique(con, f"verdict{number}", asset, partitions)
    con.execute("CREATE TABLE gathered AS SELECT doc_id, partition, source, snapshot, licence, "
                "url FROM docs")
    for side, columns in (
            ("language_rows", "x.language, x.keep AS language_keep"),
            ("heuristics_rows", "x.keep AS heuristics_keep"), ("quality", "x.quality_score"),
            ("contamination_rows", "x.contaminated"),
            ("sizes", "x.text_bytes, x.part AS text_part"),
            ("(SELECT DISTINCT partition, doc_id FROM scrub_decisions "
             "WHERE reason = 'empty_after_edits')", "x.doc_id IS NOT NULL AS empty_after_edits"),
            *((f"verdict{n}", f"x.keep AS verdict{n}") for n in range(len(verdicts)))):
        _widen(con, side, columns)
    _check_complete(con, "gathered", [
        ("language_keep", LANGUAGE), ("heuristics_keep", HEURISTICS),
        ("contaminated", DECONTAMINATED), ("text_bytes", SCRUBBED),
        *((f"verdict{n}", asset) for n, asset in enumerate(verdicts))], partitions)
    if scalar(con, "SELECT count(*) - count(DISTINCT doc_id) FROM gathered"):
        raise MixInputError("a doc_id occurs in two partitions")
    curated = {SOURCE_PREFIX + name for name in curated_sources}
    load_memberships(con, store, partitions, curated, semantic_dedup)
    group_ids(con, "gathered", "members", "groups", budget, placement)
    # the first failing verdict in order wins
    verdict_drop = ("CASE " + " ".join(f"WHEN NOT verdict{n} THEN {literal(asset)}"
                                       for n, asset in enumerate(verdicts)) + " END"
                    if verdicts else "NULL::VARCHAR")
    join_groups(con, "gathered", "groups", verdict_drop, "g.text_part")
    for table in ("docs", "language_rows", "heuristics_rows", "quality", "contamination_rows",
                  "sizes", "scrub_decisions", "gathered", "members", "groups",
                  *(f"verdict{n}" for n in range(len(verdicts)))):
        con.execute(f"DROP TABLE {table}")
    return text_parts


def load_memberships(con: Connection, store: Store, partitions: Sequence[str],
                     curated: Collection[str], semantic_dedup: bool = False) -> None:
    """Table `members` (`scope`, `cluster_id`, `doc_id`): every cluster membership of each
    within-partition dedup asset and partition (for a `curated` partition, `exact_dedup`
    only: a book or an article is not a duplicate for sharing a URL or most of its
    shingles; with `semantic_dedup`, `semantic_dedup` too for the other partitions), and of
    cross_dedup (required when more than one partition is read); `scope`
    (`asset/partition`) keeps the cluster ids of different tables apart."""
    con.execute("CREATE TABLE members (scope VARCHAR, part INTEGER, cluster_id VARCHAR, "
                "doc_id VARCHAR)")
    assets = (*DEDUP_ASSETS, SEMANTIC_DEDUP) if semantic_dedup else DEDUP_ASSETS
    tables = [(asset, partition, True) for partition in partitions for asset in assets
              if partition not in curated or asset == CURATED_DEDUP_ASSET]
    tables.append((CROSS_ASSET, CROSS_PARTITION, len(partitions) > 1))
    for asset, partition, required in tables:
        manifest = _manifest(store, asset, partition, required)
        if manifest is not None:
            insert_parts(con, store, "members", f"{asset}/{partition}", manifest.parts, 0,
                          ["doc_id", "cluster_id"],
                          "CAST(cluster_id AS VARCHAR), CAST(doc_id AS VARCHAR)")


def load_domains(con: Connection, store: Store, partitions: Sequence[str]) -> None:
    """Table `document_domains` (`doc_id`, `domain`): the topic domain (`domains`) of each
    chosen document, what a recipe's `domain_weights` and `domain_caps` act on."""
    _load(con, store, "domain_rows", DOMAINS, partitions,
          {"doc_id": "VARCHAR", "domain": "SMALLINT"})
    con.execute("CREATE TABLE document_domains AS SELECT d.doc_id, d.domain "
                "FROM domain_rows d SEMI JOIN chosen c ON c.doc_id = d.doc_id")
    con.execute("DROP TABLE domain_rows")


def domain_cap_factors(tokens: Mapping[int | None, float], caps: Mapping[int, float]
                       ) -> tuple[dict[int, float], bool]:
    """What to multiply the weights of each domain of a pool by so that no domain passes its
    cap: `tokens` are the pool's weighted tokens per domain (None: documents without one),
    `caps` the largest share of the pool each capped domain may carry. Water-filling: a domain
    over its cap is set to it, which raises the others' shares, until none is over; the
    domains not capped keep their tokens, so the pool shrinks by what the caps cut. Returns
    the factors of the capped domains that were over and whether the caps could all hold
    (when every domain in the pool is capped and the caps sum below 1 they cannot: the capped
    domains then share the pool in proportion to their caps)."""
    present = {domain: mass for domain, mass in tokens.items() if mass > 0}
    fixed: dict[int, float] = {}  # domain -> its share once capped
    while True:
        free = sum(mass for domain, mass in present.items() if domain not in fixed)
        left = 1.0 - sum(fixed.values())
        over = [domain for domain in present if domain is not None and domain in caps
                and domain not in fixed
                and present[domain] / free * left > caps[domain] * (1 + 1e-12)]
        if not over:
            break
        fixed |= {domain: caps[domain] for domain in over}
        if all(domain in fixed for domain in present):
            break
    if not fixed:
        return {}, True
    free = sum(mass for domain, mass in present.items() if domain not in fixed)
    if free > 0:
        total, shares, held = free / (1.0 - sum(fixed.values())), fixed, True
    else:
        scale = sum(fixed.values())
        total, shares, held = sum(present.values()), {d: c / scale for d, c in fixed.items()}, False
    return {domain: share * total / present[domain] for domain, share in shares.items()}, held


# `join_groups`: a groups row in the join's hash table (doc_id, group_id, size; an allowance)
# and the share of the memory limit one pass's table may take
GROUPS_JOIN_BYTES = 90
GROUPS_JOIN_SHARE = 0.5


def join_groups(con: Connection, gathered: str, groups: str, verdict_drop: str,
                text_part: str) -> None:
    """Table `candidates`: the rows of `gathered` (`CANDIDATE_SCHEMA` but the verdict and the
    group, aliased `g`) with their `verdict_drop` and `text_part` (SQL over `g`), and their
    duplicate group from `groups` (`group_ids`; a document without a row is its own group of
    one) with its `group_size`.

    Where the groups' hash table would pass `GROUPS_JOIN_SHARE` of the memory limit (at
    `GROUPS_JOIN_BYTES` a row), the join runs in passes over hash parts of doc_id, each
    building a part's table in memory: DuckDB's own external join spills the wide candidate
    rows instead (10^8 documents, 30M grouped, 1 GB: 217.5 CPU s whole, 171.9 in 8 passes,
    225.4 in 16; these settings give 8 there)."""
    columns = ", ".join(f"g.{name}" for name in CANDIDATE_SCHEMA.names
                        if name not in ("verdict_drop", "group_id"))
    passes = part_count(con, scalar(con, f"SELECT count(*) FROM {groups}"), GROUPS_JOIN_BYTES,
                        GROUPS_JOIN_SHARE)
    for number in range(passes):
        into = "INSERT INTO candidates" if number else "CREATE TABLE candidates AS"
        part = f"% {passes} = {number}"  # a doc_id's hash modulo the passes
        con.execute(f"{into} SELECT {columns}, {verdict_drop} AS verdict_drop, "
                    "coalesce(r.group_id, g.doc_id) AS group_id, "
                    f"coalesce(r.group_size, 1) AS group_size, {text_part} AS text_part "
                    f"FROM {gathered} g LEFT JOIN (SELECT * FROM {groups} WHERE hash(doc_id) "
                    f"{part}) r USING (doc_id) WHERE hash(g.doc_id) {part}")


def group_ids(con: Connection, documents: str, members: str, result: str,
              budget: MemoryBudget | None = None,
              placement: TaskPlacement | None = None) -> None:
    """Table `result` (`doc_id`, `group_id`, `group_size`): the duplicate group of each
    clustered document of `documents` (`doc_id` unique), the smallest doc_id of its connected
    component, and the number of documents of `documents` in it, where each row of `members`
    (`scope`, `cluster_id`, `doc_id`) links a document to the cluster (`scope`,
    `cluster_id`). A document of `documents` without a row is in no cluster: its own group of
    one (`join_groups`). The sizes are counted here, over the clustered documents alone, not
    over every candidate (at 10^8, 30M narrow rows instead of 10^8 wide ones). Members not in
    `documents` (cross_dedup rows of partitions the recipe leaves out) are skipped: their
    clusters already hold every link they carry.

    The components run over the clusters, not the documents: each cluster is named by its
    smallest member, and a document in several clusters links their names (two clusters with
    one name share that member, so they are one component anyway). A document in one cluster
    adds no edge, nor does one whose clusters share their name, so the graph has a node per
    linked cluster rather than per document (`benchmarks/mix_groups.py`: 533,980 nodes for 30M
    clustered documents at 10^8), and stays in the in-memory union-find where the documents'
    graph ran as DuckDB rounds. A component's smallest name is
    its smallest document. The components run under `budget` (None: the current one), or as
    tasks where `placement` says (`curation.star_components.components_sql`)."""
    # One operator with a large state a statement: two do not fit a small limit at millions
    # of string keys. For 45M memberships of 10^8 documents, `IN` planned a join twice as fast
    # as `SEMI JOIN`, and grouping the clusters then joining their names back a third of the
    # time of a window over them.
    con.execute(f"CREATE TABLE _kept AS SELECT scope, cluster_id, doc_id FROM {members}"
                f" WHERE doc_id IN (SELECT doc_id FROM {documents})")
    con.execute("CREATE TABLE _names AS SELECT scope, cluster_id, min(doc_id) AS b FROM _kept"
                " GROUP BY ALL")
    con.execute("CREATE TABLE _linked AS SELECT k.doc_id AS a, c.b FROM _kept k"
                " JOIN _names c USING (scope, cluster_id)")
    con.execute("DROP TABLE _kept")
    con.execute("DROP TABLE _names")
    # One sort by document gives each membership its document's smallest cluster name `m`
    # and numbers its rows (`r` = 1: one row per document).
    con.execute("CREATE TABLE _named AS SELECT a, b, first_value(b) OVER w AS m,"
                " row_number() OVER w AS r FROM _linked WINDOW w AS (PARTITION BY a ORDER BY b)")
    con.execute("DROP TABLE _linked")
    con.execute("CREATE TABLE _edges AS SELECT m AS a, b FROM _named WHERE b <> m")
    components_sql(con, "_edges", "_components", placement, budget)
    con.execute("DROP TABLE _edges")
    con.execute("CREATE TABLE _grouped AS SELECT n.a AS doc_id, coalesce(c.root, n.m) AS group_id"
                " FROM _named n LEFT JOIN _components c ON c.node = n.m WHERE n.r = 1")
    con.execute("DROP TABLE _named")
    con.execute("DROP TABLE _components")
    con.execute(f"CREATE TABLE {result} AS SELECT doc_id, group_id,"
                " count(*) OVER (PARTITION BY group_id) AS group_size FROM _grouped")
    con.execute("DROP TABLE _grouped")


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` (a DuckDB result: every field nullable) as `schema`."""
    return pa.Table.from_arrays([table[name].cast(f.type) for name, f in
                                 zip(schema.names, schema, strict=True)], schema=schema)


def _fetch(con: Connection, query: str, schema: pa.Schema) -> pa.Table:
    return conform(con.sql(query).to_arrow_table(), schema)


def gather_candidates(store: Store, partitions: Sequence[str],
                      curated_sources: Collection[str] = (),
                      verdicts: Sequence[str] = SELECTION_VERDICTS) -> pa.Table:
    """`load_candidates` as one Arrow table (`CANDIDATE_SCHEMA`), sorted by doc_id."""
    with duckdb_session() as con:
        load_candidates(con, store, partitions, curated_sources, verdicts)
        return _fetch(con, f"SELECT {', '.join(CANDIDATE_SCHEMA.names)} FROM candidates "
                      "ORDER BY doc_id", CANDIDATE_SCHEMA)


def duplicate_groups(doc_ids: pa.Array | pa.ChunkedArray,
                     memberships: Iterable[pa.Table]) -> pa.Table:
    """`group_ids` of `doc_ids` (unique) in their order (`group_id`, `group_size`), each
    membership table (`doc_id`, `cluster_id`) its own scope."""
    with duckdb_session() as con:
        con.register("_ids", pa.table({"doc_id": doc_ids,
                                       "position": np.arange(len(doc_ids))}))
        con.execute("CREATE TABLE ids AS SELECT CAST(doc_id AS VARCHAR) AS doc_id, position "
                    "FROM _ids")
        con.execute("CREATE TABLE members (scope VARCHAR, cluster_id VARCHAR, doc_id VARCHAR)")
        for scope, table in enumerate(memberships):
            con.register("_members", table)
            con.execute("INSERT INTO members SELECT ?, CAST(cluster_id AS VARCHAR), "
                        "CAST(doc_id AS VARCHAR) FROM _members", [str(scope)])
            con.unregister("_members")
        group_ids(con, "ids", "members", "groups")
        return con.sql("SELECT coalesce(group_id, doc_id) AS group_id,"
                       " coalesce(group_size, 1) AS group_size FROM ids"
                       " LEFT JOIN groups USING (doc_id) ORDER BY position").to_arrow_table()


# --- selection -------------------------------------------------------------------------------


def _in(column: str, values: Iterable[str]) -> str:
    """SQL: `column` is one of `values` (false for null)."""
    listed = ", ".join(literal(value) for value in values)
    return f"coalesce({column} IN ({listed}), false)" if listed else "false"


def _require_scores(con: Connection, rows: str, what: str) -> None:
    """Fails when a row of the query `rows` (`partition`, `score`) has no score."""
    missing, partitions = con.execute(
        f"SELECT count(*), list(DISTINCT partition ORDER BY partition) FROM ({rows}) "
        "WHERE score IS NULL").fetchall()[0]
    if missing:
        raise MixInputError(f"{what} needs quality scores, but {missing} documents have none "
                            f"(partitions {', '.join(partitions)}): is a quality classifier "
                            "configured and quality_scores materialized?")


# The quality cut's rank search (`_last_kept`): bins a score range is counted in per round,
# and the rows at most that a range is sorted at instead
SCORE_BINS = 4096
SORTED_ROWS = 1 << 20


def _top_fraction(con: Connection, table: str, pool: str, fraction: float,
                  columns: str) -> str:
    """SQL: `columns` of `table`'s rows with `cut`, true for the rows of `pool` (a condition)
    outside the top `ceil(fraction * n)` by score of their language (ties: the smaller
    doc_id). The rows are compared with each language's last row kept (`_last_kept`), never
    sorted; the SQL reads its table `_cuts`, which the next call replaces."""
    _last_kept(con, table, pool, fraction)
    return f"""
        SELECT {columns}, ({pool}) AND (score < last_score
                                        OR (score = last_score AND doc_id > last_doc_id)) AS cut
        FROM {table} LEFT JOIN _cuts ON cut_language IS NOT DISTINCT FROM language"""


def _last_kept(con: Connection, table: str, pool: str, fraction: float) -> None:
    """Table `_cuts` (`cut_language`, `last_score`, `last_doc_id`): per language of the rows of
    `table` in `pool` (scores all set), the row ranked `ceil(fraction * n)` by score (ties:
    the smaller doc_id).

    A selection by histograms rather than a sort of the pool: each language starts with its
    whole score range; a round counts the range's rows in `SCORE_BINS` equal bins and keeps
    the bin holding the rank (its rows' own lowest and highest score, and the rows above it).
    A range of at most `SORTED_ROWS` rows, of one score (ties, ranked by doc_id) or with an
    infinite end is sorted. Each round scans the pool; every range but one of ties holds
    fewer rows than the one before (its lowest and highest scores fall in different bins), so
    spread scores take one or two rounds. Memory: a row per language and bin, then the
    sorted ranges (which spill)."""
    rows = f"SELECT language, score, doc_id FROM {table} WHERE {pool}"
    in_range = "r.language IS NOT DISTINCT FROM p.language AND p.score BETWEEN r.lo AND r.hi"
    wide = f"n > {SORTED_ROWS} AND lo < hi AND isfinite(lo) AND isfinite(hi)"
    con.execute(f"""
        CREATE OR REPLACE TABLE _ranges AS
        SELECT language, min(score) AS lo, max(score) AS hi, count(*) AS n, 0::BIGINT AS above,
               ceil({float(fraction)!r}::DOUBLE * count(*) - 1e-9::DOUBLE)::BIGINT AS k
        FROM ({rows}) GROUP BY language""")
    while scalar(con, f"SELECT count(*) FROM _ranges WHERE {wide}"):
        con.execute(f"""
            CREATE OR REPLACE TABLE _bins AS
            SELECT r.language, least(floor((p.score - r.lo) / (r.hi - r.lo) * {SCORE_BINS}),
                                     {SCORE_BINS - 1})::BIGINT AS bin,
                   min(p.score) AS lo, max(p.score) AS hi, count(*) AS n
            FROM ({rows}) p JOIN (SELECT * FROM _ranges WHERE {wide}) r ON {in_range}
            GROUP BY ALL""")
        # the bin where the rows counted from the top reach the rank
        con.execute(f"""
            CREATE OR REPLACE TABLE _ranges AS
            SELECT * FROM _ranges WHERE NOT ({wide})
            UNION ALL
            SELECT language, lo, hi, n, above + reached - n AS above, k FROM (
                SELECT b.*, r.above, r.k, sum(b.n) OVER (PARTITION BY b.language ORDER BY b.bin
                    DESC ROWS UNBOUNDED PRECEDING) AS reached
                FROM _bins b JOIN _ranges r ON r.language IS NOT DISTINCT FROM b.language)
            WHERE above + reached >= k AND above + reached - n < k""")
    con.execute(f"""
        CREATE OR REPLACE TABLE _cuts AS
        SELECT language AS cut_language, score AS last_score, doc_id AS last_doc_id FROM (
            SELECT p.*, r.k - r.above AS wanted, row_number() OVER (
                PARTITION BY p.language ORDER BY p.score DESC, p.doc_id) AS rank
            FROM ({rows}) p JOIN _ranges r ON {in_range})
        WHERE rank = wanted""")
    con.execute("DROP TABLE IF EXISTS _bins")
    con.execute("DROP TABLE _ranges")


def select_sql(con: Connection, recipe: RecipeConfig,
               curated_sources: Collection[str] = (), code_sources: Collection[str] = ()
               ) -> None:
    """Table `decisions` (`doc_id`, `partition`, `rule`, `kept`, `kept_doc_id`, `group_size`):
    one per row of `candidates`, the first rule of `RULES` it fails, or `selected`; duplicates
    name their group's representative (dropped by `quality` itself when below the cut). The
    web filters (language, heuristics, added verdicts) skip the documents of
    `curated_sources`; language and the added verdicts skip `code_sources` too. Table
    `chosen`: the selected rows, as `choose_sql` makes them (carried through the selection
    rather than joined back: at 10^8 the join's 32M-row table spilled the wide candidates)."""
    web_filter = f"NOT {_in('source', sorted(curated_sources))}"
    prose_filter = f"NOT {_in('source', sorted({*curated_sources, *code_sources}))}"
    language_ok = "coalesce(language_keep, false)"
    if recipe.selection.languages is not None:
        language_ok += f" AND {_in(column='language', values=recipe.selection.languages)}"
    licences = recipe.selection.licences
    licence_rule = ("" if licences is None else
                    f"WHEN source <> {literal(WEB_SOURCE)} AND NOT {_in('licence', licences)} "
                    "THEN 'licence'")
    contaminated = ("WHEN coalesce(contaminated, true) THEN 'contaminated'"
                    if recipe.selection.drop_contaminated else "")
    con.execute(f"""
        CREATE VIEW judged AS
        SELECT doc_id, partition, source, snapshot, licence, language, text_bytes, text_part,
               group_id, group_size,
               CASE WHEN isnan(quality_score) THEN NULL ELSE quality_score END AS score,
               CASE {licence_rule}
                    WHEN {prose_filter} AND NOT ({language_ok}) THEN 'language'
                    WHEN {web_filter} AND NOT coalesce(heuristics_keep, false)
                        THEN 'heuristics'
                    {contaminated}
                    WHEN coalesce(empty_after_edits, false) OR coalesce(text_bytes, 0) <= 0
                        THEN 'empty_after_edits'
                    WHEN {prose_filter} AND coalesce(verdict_drop, '') <> ''
                        THEN verdict_drop
               END AS rule
        FROM candidates""")
    # duplicate: per group, the best-ranked member still in; a group of one is its own best,
    # so only the clustered documents are ranked
    if recipe.cluster_policy == "quality":  # needed where a group has two members still in
        _require_scores(con, """
            SELECT partition, score FROM (
                SELECT partition, score, count(*) OVER (PARTITION BY group_id) AS members
                FROM judged WHERE rule IS NULL AND group_size > 1)
            WHERE members > 1""", "cluster_policy: quality")
    policy = {"earliest": "", "longest": "coalesce(text_bytes, 0) DESC,",
              "quality": "score DESC NULLS LAST,"}[recipe.cluster_policy]
    # curated before web, then the earliest snapshot (curated: null, first), then the policy
    kept = ", ".join((*CHOSEN_COLUMNS, "group_size"))  # what the cut and `chosen` read
    con.execute(f"""
        CREATE TABLE deduplicated AS
        SELECT {kept}, CASE WHEN rule IS NULL AND best <> doc_id THEN 'duplicate'
                            ELSE rule END AS rule,
               CASE WHEN rule IS NULL AND best <> doc_id THEN best END AS kept_doc_id
        FROM (SELECT *, first_value(doc_id) OVER (
                  PARTITION BY rule IS NULL, group_id
                  ORDER BY source = {literal(WEB_SOURCE)}, snapshot NULLS FIRST, {policy}
                           doc_id) AS best
              FROM judged WHERE group_size > 1)
        UNION ALL
        SELECT {kept}, rule, NULL::VARCHAR AS kept_doc_id FROM judged WHERE group_size = 1""")
    con.execute("DROP VIEW judged")
    # quality: the percentile of the distinct documents (the groups' representatives), as
    # FineWeb and BEE cut after deduplication; copies never inflate the pool
    fraction = recipe.selection.quality_top_fraction
    columns = f"{kept}, rule, kept_doc_id"
    rows = f"SELECT {columns}, false AS cut FROM deduplicated"
    if fraction is not None:
        pool = f"rule IS NULL AND source = {literal(WEB_SOURCE)}"
        _require_scores(con, f"SELECT partition, score FROM deduplicated WHERE {pool}",
                        "selection.quality_top_fraction")
        rows = _top_fraction(con, "deduplicated", pool, fraction, columns)
    con.execute(f"""
        CREATE VIEW ruled AS
        SELECT * EXCLUDE (cut) REPLACE (
            CASE WHEN cut THEN 'quality' ELSE coalesce(rule, '{SELECTED}') END AS rule)
        FROM ({rows})""")
    con.execute(f"""
        CREATE TABLE decisions AS
        SELECT doc_id, partition, rule, rule = '{SELECTED}' AS kept, kept_doc_id, group_size
        FROM ruled""")
    con.execute(f"CREATE TABLE chosen AS SELECT {kept} FROM ruled"
                f" WHERE rule = '{SELECTED}' ORDER BY text_part")
    con.execute("DROP VIEW ruled")
    con.execute("DROP TABLE deduplicated")


def _put_candidates(con: Connection, candidates: pa.Table) -> None:
    """Table `candidates` from `gather_candidates` rows with their groups' sizes (no text
    parts: estimated tokens)."""
    con.register("_candidates", candidates.select(CANDIDATE_SCHEMA.names).cast(CANDIDATE_SCHEMA))
    con.execute("CREATE TABLE candidates AS SELECT *, count(*) OVER (PARTITION BY group_id)"
                " AS group_size, NULL::INTEGER AS text_part FROM _candidates")
    con.unregister("_candidates")


def decision_rows(recipe: str, *, tokens: bool = True, removed: str | None = None) -> str:
    """SQL: the session's decisions (`MIX_DECISION_SCHEMA`) in doc_id order, with each selected
    document's tokens (`tokens`: once `mix_sql` ran; else null); the documents in table
    `removed` (`doc_id`: the takedown list's) are no longer kept, their rule `takedown`."""
    gone = "false" if removed is None else f"d.doc_id IN (SELECT doc_id FROM {removed})"
    return f"""
        SELECT d.doc_id, d.partition, {literal(recipe)} AS recipe,
               d.kept AND NOT ({gone}) AS kept,
               CASE WHEN {gone} THEN '{TAKEDOWN}' ELSE d.rule END AS rule, d.kept_doc_id,
               {"s.tokens" if tokens else "NULL::BIGINT"} AS tokens, d.group_size
        FROM decisions d {"LEFT JOIN selected s ON s.doc_id = d.doc_id" if tokens else ""}
        ORDER BY d.doc_id"""


def select_documents(candidates: pa.Table, recipe: RecipeConfig,
                     curated_sources: Collection[str] = ()) -> pa.Table:
    """`select_sql` over `gather_candidates` rows: one decision per candidate
    (`MIX_DECISION_SCHEMA`, sorted by doc_id, no tokens)."""
    with duckdb_session() as con:
        _put_candidates(con, candidates)
        select_sql(con, recipe, curated_sources)
        return _fetch(con, decision_rows(recipe.name, tokens=False), MIX_DECISION_SCHEMA)


def _funnel(con: Connection) -> dict[str, int]:
    """Documents dropped per rule, in `RULES` order (every rule listed, zeros too)."""
    counts = dict.fromkeys(RULES, 0)
    # rules outside RULES (verdicts passed in by hand) in the order the decisions show them
    for rule, count in con.sql("SELECT rule, count(*) FROM decisions GROUP BY rule "
                               "ORDER BY min(doc_id)").fetchall():
        if rule != SELECTED:
            counts[rule] = count
    return counts


# --- token counts ----------------------------------------------------------------------------


def _lengths(texts: pa.ChunkedArray | pa.Array, tokenizer: PinnedTokenizer,
             batch: int) -> np.ndarray:
    counts = [occurrence_lengths(texts.slice(start, batch).to_pylist(), tokenizer)
              for start in range(0, len(texts), batch)]
    return np.concatenate(counts) if counts else np.zeros(0, np.int64)


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
        counts.append(_lengths(rows["text"], tokenizer, batch))
        ids.append(rows["doc_id"].cast(pa.string()))
        del rows
    table = pa.table({"doc_id": pa.chunked_array(ids, pa.string()),
                      "tokens": np.concatenate(counts) if counts else np.zeros(0, np.int64)})
    if table.num_rows != selected.num_rows:
        raise MixInputError(f"scrubbed holds {table.num_rows} of the {selected.num_rows} "
                            "selected documents; re-materialize scrubbed")
    return table


def count_tokens_sql(con: Connection, store: Store, text_parts: Sequence[str],
                     tokenizer: PinnedTokenizer, batch: int = TOKENIZE_BATCH) -> None:
    """Table `token_counts` (`doc_id`, `tokens`) of every row of `chosen` (the selected
    candidates, by `text_part`): tokens as `count_tokens`, reading each scrubbed part of
    `text_parts` (keys by number) once, with only that part's texts and selected ids in
    memory."""
    con.execute("CREATE TABLE token_counts (doc_id VARCHAR, tokens BIGINT)")
    for number, key in enumerate(text_parts):
        wanted = con.sql("SELECT doc_id FROM chosen WHERE text_part = ?",
                         params=[number]).to_arrow_table()["doc_id"]
        if not len(wanted):
            continue
        rows = read_parquet(store, key, ["doc_id", "text"])
        rows = rows.filter(pc.is_in(rows["doc_id"], value_set=wanted))
        con.register("_counts", pa.table({"doc_id": rows["doc_id"].cast(pa.string()),
                                          "tokens": _lengths(rows["text"], tokenizer, batch)}))
        del rows
        con.execute("INSERT INTO token_counts SELECT * FROM _counts")
        con.unregister("_counts")


# --- mixing ----------------------------------------------------------------------------------


def phase_key(doc_id: str, phase: str, seed: int | str) -> int:
    """The order in which a phase's pool takes its fractional occurrences: blake2b of
    (`doc_id`, phase) keyed with the seed (the key convention of `curation.shards`)."""
    message = doc_id.encode("utf-8") + b"\x00" + phase.encode("utf-8")
    digest = hashlib.blake2b(message, key=str(seed).encode("ascii"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _phase_keys(doc_ids: pa.Array, phases: pa.Array, seeds: pa.Array) -> pa.Array:
    """`phase_key` of one DuckDB vector, for the SQL function `phase_key`."""
    return pa.array([phase_key(*row) for row in zip(doc_ids.to_pylist(), phases.to_pylist(),
                                                    seeds.to_pylist(), strict=True)],
                    pa.uint64())


def _stream(con: Connection, query: str, params: Sequence[Any]) -> Iterator[tuple]:
    """The rows of `query`, one DuckDB batch in memory at a time, on a cursor of its own (so
    the caller may stop early and go on with `con`)."""
    cursor = con.cursor()
    try:
        for batch in cursor.sql(query, params=list(params)).to_arrow_reader(BATCH_ROWS):
            yield from zip(*(column.to_pylist() for column in batch.columns), strict=True)
    finally:
        cursor.close()


@dataclass
class _Pool:
    documents: int
    tokens: int
    largest: int  # tokens of its largest document
    weight: float
    share: float = 0.0
    needed: float = 0.0  # epochs
    planned: float = 0.0  # epochs after the cap
    ran_out: bool = False
    note: str | None = None


def _exact(value: str) -> str:
    """SQL: a DOUBLE as DECIMAL(38, 9), so that its sum is exact and the same in any order: a
    sum of doubles over DuckDB's threads depends on how they split the rows, and one ulp of a
    fill budget can give a document one more occurrence."""
    return f"CAST({value} AS DECIMAL(38, 9))"


def _fill(con: Connection, source: str, size: int, budget: float) -> tuple[int, list[int]]:
    """Which of the `size` documents of `source`'s pool in table `ordered` (positions `pos`
    from 1, in fill order) take one more occurrence for `budget` tokens: each in turn while it
    fits the budget left (first fit), then at most one more if that ends closer to the budget
    than stopping short. Returns the length of the prefix taken whole and the later positions
    taken."""
    if budget <= 0 or size == 0:
        return 0, []
    prefix, reached = con.execute(
        "SELECT count(*), max(cum) FROM ordered WHERE source = ? AND cum <= ?",
        [source, budget]).fetchall()[0]
    left = budget - (int(reached) if prefix else 0)
    taken = []
    if prefix < size and left >= 1:
        with closing(_stream(con, "SELECT pos, tokens FROM ordered WHERE source = ? AND "
                             "pos > ? AND tokens <= ? ORDER BY pos", [source, prefix, left])
                     ) as rows:
            for position, tokens in rows:
                if tokens <= left:
                    taken.append(position)
                    left -= tokens
                    if left < 1:
                        break
    if left > 0:
        con.register("_taken", pa.table({"pos": pa.array(taken, pa.int64())}))
        closer = con.execute(
            "SELECT min(pos) FROM ordered WHERE source = ? AND pos > ? AND tokens < ? "
            "AND pos NOT IN (SELECT pos FROM _taken)", [source, prefix, 2 * left]).fetchall()[0][0]
        con.unregister("_taken")
        if closer is not None:
            taken.append(closer)
    return prefix, taken


def _phase_pools(con: Connection, recipe: RecipeConfig) -> list[dict[str, _Pool]]:
    """Table `pools` (`phase` number, `source`, `doc_id`, `tokens`, `weight`, `domain`): each
    phase's pool of each source (web: its `quality_top_fraction` per language), the weights
    lowered where a domain passes its cap (`_cap_domains`); their statistics by name, a pool's
    tokens weighted (rehydration: what its epochs are counted in)."""
    con.execute("CREATE TABLE pools (phase INTEGER, source VARCHAR, doc_id VARCHAR, "
                "tokens BIGINT, weight DOUBLE, domain SMALLINT)")
    present = {row[0] for row in con.sql("SELECT DISTINCT source FROM selected").fetchall()}
    names = sorted(present | {s for p in recipe.phases for s in p.weights})
    phases = []
    for index, phase in enumerate(recipe.phases):
        rows = "selected"
        if phase.quality_top_fraction is not None:
            web = f"source = {literal(WEB_SOURCE)}"
            _require_scores(con, f"SELECT partition, score FROM selected WHERE {web}",
                            f"phases.{phase.name}.quality_top_fraction")
            top = _top_fraction(con, "selected", web, phase.quality_top_fraction,
                                "source, doc_id, tokens, weight, domain")
            rows = f"({top}) WHERE NOT cut"
        con.execute(f"INSERT INTO pools SELECT {index}, source, doc_id, tokens, weight, domain "
                    f"FROM {rows}")
        notes = _cap_domains(con, index, recipe.domain_caps) if recipe.domain_caps else {}
        stats = {row[0]: row[1:] for row in con.execute(
            f"SELECT source, count(*), round(sum({_exact('tokens * weight')}))::BIGINT, "
            "coalesce(max(tokens) FILTER (WHERE weight > 0), 0) FROM pools WHERE phase = ? "
            "GROUP BY source", [index]).fetchall()}
        pools = {}
        for name in names:
            documents, tokens, largest = stats.get(name, (0, 0, 0))
            pool = _Pool(int(documents), int(tokens), int(largest),
                         float(phase.weights.get(name, 0.0)))
            pool.note = notes.get(name)
            if pool.weight > 0 and pool.tokens == 0:
                pool.ran_out, pool.note = True, "no selected documents"
            pools[name] = pool
        present_weight = sum(p.weight for p in pools.values() if p.weight > 0 and p.tokens > 0)
        for pool in pools.values():
            if pool.weight > 0 and pool.tokens > 0:
                pool.share = pool.weight / present_weight
        phases.append(pools)
    return phases


def _cap_domains(con: Connection, index: int, caps: Mapping[int, float]) -> dict[str, str]:
    """Lowers, in phase `index`'s pools, the weights of each domain that passes its cap
    (`domain_cap_factors`, per source); returns a note per source whose pool a cap changed."""
    tokens: dict[str, dict[int | None, float]] = {}
    for source, domain, mass in con.execute(
            f"SELECT source, domain, sum({_exact('tokens * weight')})::DOUBLE FROM pools "
            "WHERE phase = ? GROUP BY ALL", [index]).fetchall():
        tokens.setdefault(source, {})[domain] = float(mass or 0)
    rows, notes = [], {}
    for source in sorted(tokens):
        factors, held = domain_cap_factors(tokens[source], caps)
        if not factors:
            continue
        total = sum(tokens[source].values())
        notes[source] = "domains capped: " + ", ".join(
            f"{domain} at {caps[domain]:.3g} (had {tokens[source][domain] / total:.3g})"
            for domain in sorted(factors)) + ("" if held else
                                              "; every domain capped, caps sum below 1")
        rows += [{"source": source, "domain": domain, "factor": factor}
                 for domain, factor in factors.items()]
    if rows:
        con.register("_factors", pa.Table.from_pylist(rows, pa.schema(
            [("source", pa.string()), ("domain", pa.int16()), ("factor", pa.float64())])))
        con.execute("UPDATE pools SET weight = pools.weight * f.factor FROM _factors f "
                    "WHERE pools.phase = ? AND f.source = pools.source "
                    "AND f.domain = pools.domain", [index])
        con.unregister("_factors")
    return notes


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
                pool.note = "; ".join(filter(None, [
                    pool.note, f"capped at max_epochs={recipe.max_epochs:g}: needs "
                    f"{needed:.3g} epochs over all phases"]))
    return total


def _repeat(con: Connection, recipe: RecipeConfig, index: int,
            pools: Mapping[str, _Pool]) -> None:
    """Adds phase `index`'s occurrence counts to table `counts`: a document of a planned pool
    is due `planned epochs x weight` occurrences; it takes the whole ones, and one more where
    the fill (`_fill`) takes it. The fill walks the documents with a fraction left in
    `phase_key` order, each key stretched by its fraction (`-ln(1 - key) / fraction`, the
    exponential race of weighted sampling), so a document's chance of its extra occurrence
    grows with its fraction; with equal weights that is the plain `phase_key` order."""
    planned = {name: pool for name, pool in pools.items() if pool.planned > 0}
    if not planned:
        return
    phase = recipe.phases[index]
    con.register("_planned", pa.table({"source": list(planned),
                                       "planned": [p.planned for p in planned.values()]}))
    con.execute(f"""
        CREATE OR REPLACE TABLE due AS
        SELECT source, doc_id, tokens, whole, due - whole AS fraction FROM (
            SELECT p.source, p.doc_id, p.tokens, n.planned * p.weight AS due,
                   floor(n.planned * p.weight + 1e-9)::BIGINT AS whole
            FROM pools p JOIN _planned n ON n.source = p.source WHERE p.phase = {index})""")
    con.unregister("_planned")
    con.execute(f"""
        CREATE OR REPLACE TABLE ordered AS
        SELECT source, doc_id, tokens, row_number() OVER w AS pos, sum(tokens) OVER w AS cum
        FROM (SELECT source, doc_id, tokens, fraction,
                     phase_key(doc_id, {literal(phase.name)}, {literal(str(recipe.seed))}) AS key
              FROM due WHERE fraction > 1e-9)
        WINDOW w AS (PARTITION BY source
                     ORDER BY -ln(greatest(1 - key::DOUBLE / 18446744073709551616.0, 1e-300))
                              / fraction, key, doc_id
                     ROWS UNBOUNDED PRECEDING)""")
    con.execute("CREATE OR REPLACE TABLE extra (doc_id VARCHAR)")
    fractions = {name: (int(size), float(budget or 0)) for name, size, budget in con.sql(
        f"SELECT source, count(*), sum({_exact('tokens * fraction')}) FROM due"
        " WHERE fraction > 1e-9 GROUP BY source").fetchall()}
    for name in planned:
        size, budget = fractions.get(name, (0, 0.0))
        prefix, taken = _fill(con, name, size, budget)
        con.register("_taken", pa.table({"pos": pa.array(taken, pa.int64())}))
        con.execute("INSERT INTO extra SELECT doc_id FROM ordered WHERE source = ? AND "
                    "(pos <= ? OR pos IN (SELECT pos FROM _taken))", [name, prefix])
        con.unregister("_taken")
    con.execute(f"""
        INSERT INTO counts
        SELECT * FROM (
            SELECT {index} AS phase, d.doc_id, d.whole + (e.doc_id IS NOT NULL)::BIGINT AS count
            FROM due d LEFT JOIN extra e ON e.doc_id = d.doc_id)
        WHERE count > 0""")
    for table in ("due", "ordered", "extra"):
        con.execute(f"DROP TABLE {table}")


@dataclass(frozen=True)
class MixRun:
    """A mix computed in a DuckDB session (`run_mix`, `mix_sql`): what is per phase and source
    or per recipe here, the per-document results in the session (`decision_rows`,
    `occurrence_rows`). Fields as `MixResult`'s; `candidates` and `selected` count
    documents, `achieved_tokens` the tokens of every occurrence."""

    recipe: str
    seed: int
    funnel: dict[str, int]
    shares: pa.Table
    total_tokens: int
    token_counts: Literal["exact", "bytes"]
    bytes_per_token: dict[str, float]
    candidates: int
    selected: int
    achieved_tokens: int
    rehydration: pa.Table


def choose_sql(con: Connection) -> None:
    """Table `chosen` (`CHOSEN_COLUMNS`, the decision's `group_size`) for decisions made
    outside `select_sql` (which makes it itself): the selected rows of `candidates`, by the
    scrubbed part holding their text (what `count_tokens_sql` reads part by part)."""
    columns = ", ".join(f"c.{name}" for name in CHOSEN_COLUMNS if name != "score")
    con.execute(f"""
        CREATE TABLE chosen AS
        SELECT {columns}, CASE WHEN isnan(c.quality_score) THEN NULL ELSE c.quality_score END
                          AS score, d.group_size
        FROM candidates c JOIN decisions d ON d.doc_id = c.doc_id AND d.kept
        ORDER BY c.text_part""")


def mix_sql(con: Connection, recipe: RecipeConfig, exact: bool) -> MixRun:
    """Mixing (see the module docstring) of the rows of `chosen`, with the exact tokens of
    table `token_counts` (`doc_id`, `tokens`) when `exact`, else bytes over
    `DEFAULT_BYTES_PER_TOKEN`. Leaves tables `selected` (with tokens), `pools` and `counts`
    (`phase` number, `doc_id`, occurrences) in the session."""
    # rehydration's weight times the document's domain weight (`load_domains`)
    weight = (f"{_rehydration_weight(recipe, 'weight')} * {_domain_weight(recipe)} AS weight, "
              "g.domain")
    con.execute("CREATE TABLE IF NOT EXISTS document_domains (doc_id VARCHAR, domain SMALLINT)")
    if exact:
        con.execute(f"CREATE TABLE selected AS SELECT c.*, t.tokens, {weight} FROM chosen c "
                    "LEFT JOIN token_counts t ON t.doc_id = c.doc_id "
                    "LEFT JOIN document_domains g ON g.doc_id = c.doc_id")
        missing = scalar(con, "SELECT count(*) FROM selected WHERE tokens IS NULL")
        if missing:
            raise MixInputError(f"token_counts has no count for {missing} selected documents")
    else:
        con.execute(f"""
            CREATE TABLE selected AS SELECT c.*, greatest(1, round_even(
                coalesce(c.text_bytes, 0) / {DEFAULT_BYTES_PER_TOKEN!r}::DOUBLE, 0))::BIGINT
                AS tokens, {weight}
            FROM chosen c LEFT JOIN document_domains g ON g.doc_id = c.doc_id""")
    con.create_function("phase_key", _phase_keys, ["VARCHAR", "VARCHAR", "VARCHAR"],
                        "UBIGINT", type="arrow")
    phases = _phase_pools(con, recipe)
    total = _plan(recipe, phases)
    con.execute("CREATE TABLE counts (phase INTEGER, doc_id VARCHAR, count BIGINT)")
    for index, pools in enumerate(phases):
        _repeat(con, recipe, index, pools)
    drawn = {(phase, source): (int(tokens), int(occurrences)) for phase, source, tokens,
             occurrences in con.sql(
                 "SELECT c.phase, p.source, sum(c.count * p.tokens), sum(c.count) FROM counts c "
                 "JOIN pools p ON p.phase = c.phase AND p.doc_id = c.doc_id GROUP BY ALL"
             ).fetchall()}
    share_rows = []
    for index, (phase, pools) in enumerate(zip(recipe.phases, phases, strict=True)):
        rows = []
        for name in sorted(pools):
            pool = pools[name]
            achieved, occurrences = drawn.get((index, name), (0, 0))
            rows.append({
                "phase": phase.name, "source": name, "weight": pool.weight,
                "target_share": pool.share,
                "target_tokens": int(round(total * phase.fraction * pool.share)),
                "achieved_tokens": achieved, "achieved_share": 0.0,
                "available_tokens": pool.tokens, "documents": pool.documents,
                "occurrences": occurrences, "needed_epochs": pool.needed,
                "epochs": achieved / pool.tokens if pool.tokens else 0.0,
                "ran_out": pool.ran_out, "note": pool.note,
                "largest_document_tokens": pool.largest})
        phase_total = sum(row["achieved_tokens"] for row in rows)
        for row in rows:
            if phase_total:
                row["achieved_share"] = row["achieved_tokens"] / phase_total
        share_rows += rows
    con.execute("CREATE TABLE phase_names (phase INTEGER, name VARCHAR)")
    con.executemany("INSERT INTO phase_names VALUES (?, ?)",
                    [[index, phase.name] for index, phase in enumerate(recipe.phases)])
    bytes_per_token = {name: float(size or 0) / max(1, int(tokens)) for name, size, tokens in
                       con.sql("SELECT source, sum(text_bytes), sum(tokens) FROM selected "
                               "GROUP BY source ORDER BY source").fetchall()}
    return MixRun(recipe.name, recipe.seed, _funnel(con), pa.Table.from_pylist(
        share_rows, SHARE_SCHEMA), total, "exact" if exact else "bytes", bytes_per_token,
        scalar(con, "SELECT count(*) FROM decisions"),
        scalar(con, "SELECT count(*) FROM decisions WHERE kept"),
        sum(row["achieved_tokens"] for row in share_rows), _rehydration_shares(con, recipe))


def _domain_weight(recipe: RecipeConfig) -> str:
    """SQL over a row with the document's `g.domain`: the recipe's weight of its domain, 1 for
    a domain the recipe does not name and a document without one."""
    cases = " ".join(f"WHEN {domain} THEN {weight!r}::DOUBLE"
                     for domain, weight in sorted(recipe.domain_weights.items()))
    return f"CASE g.domain {cases} ELSE 1.0::DOUBLE END" if cases else "1.0::DOUBLE"


def _rehydration_weight(recipe: RecipeConfig, column: Literal["weight", "label"]) -> str:
    """SQL over a row with `source` and `group_size`: its rehydration bucket's `weight`, or
    the bucket's `label`. Only web documents are rehydrated (their copies are the crawl's
    repetitions, FineWeb-2's signal of quality); curated sources, and every document without
    `rehydration`, weigh 1 and have no bucket."""
    buckets = recipe.rehydration
    if not buckets:
        return "1.0::DOUBLE" if column == "weight" else "NULL::VARCHAR"
    cases = []
    for bucket in buckets:
        upto = "" if bucket.max_size is None else f" AND group_size <= {bucket.max_size}"
        value = f"{bucket.weight!r}::DOUBLE" if column == "weight" else literal(bucket.label)
        cases.append(f"WHEN group_size >= {bucket.min_size}{upto} THEN {value}")
    other = "1.0::DOUBLE" if column == "weight" else "NULL::VARCHAR"
    return f"CASE WHEN source <> {literal(WEB_SOURCE)} THEN {other} {' '.join(cases)} END"


def _rehydration_shares(con: Connection, recipe: RecipeConfig) -> pa.Table:
    """`REHYDRATION_SCHEMA` rows once `mix_sql` drew the occurrences: per phase and size
    bucket, the web documents in the phase's pool and the copies they stand for, their
    occurrences and tokens, and the bucket's share of the phase's web tokens (none without
    `rehydration`)."""
    if not recipe.rehydration:
        return REHYDRATION_SCHEMA.empty_table()
    drawn_by = {(phase, bucket): row for phase, bucket, *row in con.sql(f"""
        SELECT p.phase, s.bucket, count(*), sum(s.group_size), coalesce(sum(c.count), 0),
               coalesce(sum(c.count * s.tokens), 0)
        FROM pools p
             JOIN (SELECT doc_id, tokens, group_size,
                          {_rehydration_weight(recipe, "label")} AS bucket
                   FROM selected WHERE source = {literal(WEB_SOURCE)}) s ON s.doc_id = p.doc_id
             LEFT JOIN counts c ON c.phase = p.phase AND c.doc_id = p.doc_id
        GROUP BY ALL""").fetchall()}
    rows = []
    for index, phase in enumerate(recipe.phases):
        web = sum(row[3] for (number, _), row in drawn_by.items() if number == index)
        for bucket in recipe.rehydration:
            documents, copies, occurrences, tokens = drawn_by.get((index, bucket.label),
                                                                  (0, 0, 0, 0))
            rows.append({"phase": phase.name, "bucket": bucket.label,
                         "min_size": bucket.min_size, "max_size": bucket.max_size,
                         "weight": bucket.weight, "documents": int(documents),
                         "copies": int(copies or 0), "occurrences": int(occurrences),
                         "achieved_tokens": int(tokens),
                         "achieved_share": int(tokens) / web if web else 0.0})
    return pa.Table.from_pylist(rows, REHYDRATION_SCHEMA)


def occurrence_rows(removed: str | None = None) -> str:
    """SQL: one row per document occurrence (`OCCURRENCE_SCHEMA`) once `mix_sql` ran, sorted
    by phase in recipe order, doc_id, occurrence; a document's occurrences are numbered
    across phases in recipe order. Without the documents of table `removed` (`doc_id`)."""
    gone = "" if removed is None else f"WHERE c.doc_id NOT IN (SELECT doc_id FROM {removed})"
    return f"""
        SELECT s.doc_id, s.partition, s.source, s.licence, n.name AS phase,
               (c.first + c.k)::BIGINT AS occurrence, s.tokens AS est_tokens
        FROM (SELECT phase, doc_id, first, unnest(range(count)) AS k
              FROM (SELECT *, coalesce(sum(count) OVER (
                        PARTITION BY doc_id ORDER BY phase
                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS first
                    FROM counts)) c
             JOIN selected s ON s.doc_id = c.doc_id JOIN phase_names n ON n.phase = c.phase
        {gone}
        ORDER BY c.phase, c.doc_id, occurrence"""


def drawn(con: Connection, documents: str) -> tuple[int, int]:
    """Occurrences and tokens the mix in `con` gives the documents of table `documents`
    (`doc_id`)."""
    occurrences, tokens = con.execute(
        "SELECT sum(c.count), sum(c.count * s.tokens) FROM counts c JOIN selected s "
        f"ON s.doc_id = c.doc_id WHERE c.doc_id IN (SELECT doc_id FROM {documents})"
    ).fetchall()[0]
    return int(occurrences or 0), int(tokens or 0)


def run_mix(con: Connection, store: Store, recipe: RecipeConfig, *,
            tokenizer: PinnedTokenizer | None = None, curated_sources: Collection[str] = (),
            code_sources: Collection[str] = (),
            verdicts: Sequence[str] = SELECTION_VERDICTS,
            budget: MemoryBudget | None = None,
            placement: TaskPlacement | None = None) -> MixRun:
    """`load_candidates` over the recipe's partitions (its duplicate groups' components as
    tasks where `placement` says), `select_sql`, the selected documents' exact tokens
    (`count_tokens_sql`, when a tokenizer is given), then `mix_sql`, in `con` (a session under
    `budget`, None: the current one)."""
    text_parts = load_candidates(con, store, recipe.partition_keys(), curated_sources,
                                 verdicts, budget, recipe.selection.heuristics, placement,
                                 recipe.selection.quality_scorer,
                                 recipe.selection.semantic_dedup)
    select_sql(con, recipe, curated_sources, code_sources)
    if recipe.domain_weights or recipe.domain_caps:
        load_domains(con, store, recipe.partition_keys())
    if tokenizer is not None:
        count_tokens_sql(con, store, text_parts, tokenizer)
    return mix_sql(con, recipe, exact=tokenizer is not None)


@dataclass(frozen=True)
class MixResult:
    """What `mix[recipe]` writes and reports, in memory (for tests and small inputs).

    `occurrences`: one row per document occurrence (`OCCURRENCE_SCHEMA`, sorted by phase in
    recipe order, doc_id, occurrence; `(doc_id, occurrence)` unique, occurrences numbered
    across phases). `decisions`: one selection decision per candidate (`MIX_DECISION_SCHEMA`).
    `funnel`: documents dropped per rule, in `RULES` order. `shares`: per phase and source
    (`SHARE_SCHEMA`). `total_tokens`: the target `T` (the recipe's, or the largest within
    `max_epochs`). `token_counts`: `exact` when every selected document was tokenized with the
    recipe's tokenizer (EOS included), `bytes` for the flat `DEFAULT_BYTES_PER_TOKEN`
    estimate. `bytes_per_token`: per source, the selected text's bytes over its tokens (what
    the report uses to estimate the tokens of documents the mix did not tokenize).
    `rehydration`: per phase and size bucket, what the recipe's `rehydration` gave
    (`REHYDRATION_SCHEMA`; no rows without it)."""

    recipe: str
    seed: int
    occurrences: pa.Table
    decisions: pa.Table
    funnel: dict[str, int]
    shares: pa.Table
    total_tokens: int
    token_counts: Literal["exact", "bytes"]
    bytes_per_token: dict[str, float] = field(default_factory=dict)
    rehydration: pa.Table = field(default_factory=REHYDRATION_SCHEMA.empty_table)

    @property
    def candidates(self) -> int:
        return self.decisions.num_rows

    @property
    def selected(self) -> int:
        return int(pc.sum(self.decisions["kept"]).as_py() or 0)

    @property
    def achieved_tokens(self) -> int:
        return int(pc.sum(self.occurrences["est_tokens"]).as_py() or 0)


def _result(con: Connection, run: MixRun) -> MixResult:
    return MixResult(run.recipe, run.seed, _fetch(con, occurrence_rows(), OCCURRENCE_SCHEMA),
                     _fetch(con, decision_rows(run.recipe), MIX_DECISION_SCHEMA), run.funnel,
                     run.shares, run.total_tokens, run.token_counts, run.bytes_per_token,
                     run.rehydration)


def mix_candidates(candidates: pa.Table, recipe: RecipeConfig, *,
                   token_counts: pa.Table | None = None,
                   curated_sources: Collection[str] = ()) -> MixResult:
    """Selection (`select_sql`) and mixing (`mix_sql`) of `gather_candidates` rows under
    `recipe`, in memory."""
    with duckdb_session() as con:
        _put_candidates(con, candidates)
        select_sql(con, recipe, curated_sources)
        return _mix_put(con, recipe, token_counts)


def mix_selected(candidates: pa.Table, decisions: pa.Table, recipe: RecipeConfig, *,
                 token_counts: pa.Table | None = None) -> MixResult:
    """Mixing of the candidates `decisions` keeps (see the module docstring), in memory.
    `token_counts` (`doc_id`, `tokens`: `count_tokens`) gives every selected document's exact
    tokens; None estimates them from bytes (`DEFAULT_BYTES_PER_TOKEN`)."""
    with duckdb_session() as con:
        _put_candidates(con, candidates)
        con.register("_decisions", decisions)
        con.execute("""
            CREATE TABLE decisions AS
            SELECT d.doc_id, d.partition, d.rule, d.kept, d.kept_doc_id, c.group_size
            FROM _decisions d JOIN candidates c ON c.doc_id = d.doc_id""")
        con.unregister("_decisions")
        choose_sql(con)
        return _mix_put(con, recipe, token_counts)


def _mix_put(con: Connection, recipe: RecipeConfig, token_counts: pa.Table | None) -> MixResult:
    if token_counts is not None:
        con.register("_token_counts", token_counts)
        con.execute("CREATE TABLE token_counts AS SELECT CAST(doc_id AS VARCHAR) AS doc_id, "
                    "CAST(tokens AS BIGINT) AS tokens FROM _token_counts")
        con.unregister("_token_counts")
    return _result(con, mix_sql(con, recipe, exact=token_counts is not None))


def build_mix(store: Store, recipe: RecipeConfig, *,
              tokenizer: PinnedTokenizer | None = None,
              curated_sources: Collection[str] = (),
              code_sources: Collection[str] = (),
              verdicts: Sequence[str] = SELECTION_VERDICTS,
              budget: MemoryBudget | None = None) -> MixResult:
    """`run_mix` in a session under `budget` (None: the current one), its results fetched
    into memory."""
    with duckdb_session(budget.duckdb() if budget else None) as con:
        return _result(con, run_mix(con, store, recipe, tokenizer=tokenizer,
                                    curated_sources=curated_sources,
                                    code_sources=code_sources, verdicts=verdicts,
                                    budget=budget))


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
