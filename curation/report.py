"""The funnel report of one recipe (kernel, no Dagster): where every document of the recipe's
partitions went, and what the dataset holds.

`compute_report(store, recipe)` gathers the figures as plain data (dicts and lists, JSON-ready);
`render_plots` draws them with matplotlib (Agg, no pyplot state) as PNG bytes; `render_html`
makes one self-contained HTML page of both (plots inline as base64, no external CSS or JS, no
links out). `build_report` does all three and `write_report` stores them under
`reports/{recipe}/`.

The funnel, per partition and in total, is a first-failure attribution, so the numbers add up at
every stage (`in = dropped + out`, the next stage's `in` is this one's `out`):

    documents            records tried (HTML responses, curated rows) -> documents; the
                         pre-extraction rejects per reason (`documents` manifest stats)
    language ... empty_after_edits
                         the per-snapshot verdicts under the pipeline's defaults, in stage order:
                         language, heuristics, url_dedup, exact_dedup, near_dedup
                         (`dedup_clusters`), cross_dedup, decontamination, empty_after_edits
    selection.RULE       the recipe's selection (the mix's decisions) for the documents no
                         pipeline verdict drops: language (the recipe's languages), heuristics,
                         contaminated, empty_after_edits, duplicate, quality (the cutoff,
                         over the distinct documents)

A document the recipe selects is never counted as dropped, even where a pipeline verdict flags
it (the recipe decides: `drop_contaminated: false`, or a duplicate group whose default
representative failed another rule); such documents are counted per stage as `kept_by_recipe`.
A document the recipe drops is attributed to the first stage above that flags it. The last
document stage's `out` is exactly the mix's selected documents; a final `edits` row keeps them
all and shows the tokens the text edits (C4 and boilerplate lines, PII placeholders) took out.

Tokens are estimates in the mix's own way: UTF-8 bytes over the mix's bytes per token for the
document's source, at least 1 per document; of the extracted text through the stages, of the
scrubbed text after `edits`. So the funnel ends with the mix's pool of selected tokens; the
occurrences (with repeats) and the shards' real token counts follow in the summary.

Beside the funnel: the documents and estimated tokens the mix's `duplicate` rule removed, per
size of their duplicate group among the recipe's documents (`DUPLICATE_BUCKETS`; each
decision's `group_size`, as the mix stored it), and the phase order as the loader serves it
(`curation.loader.served_phases` of the dataset's manifest: phase, sequence range, tokens).

Sample documents (a few per stage, truncated): kept ones show the scrubbed text; removed ones the
extracted text with PII replaced by placeholders (`curation.pii.scrub_text`). They are copies of
text, so a taken-down document (the mix's `takedown` rule or the current tombstones) is never
sampled, and a takedown purge rewrites the stored reports (`rewrite_stored_report`).

Memory is bounded by the budget (`curation.duck`), not by the number of documents: one DuckDB
session (memory limit, spill folder and threads from the budget) groups each partition's
stored parts (read by path from a local store, part by part otherwise) and the mix's
decisions by doc_id into one row per document, and the report reads those rows
`BATCH_ROWS` at a time, one partition after the other. What it keeps between batches
(`_Figures`) is sums per stage, reason, language and quality bin, and the first few sample
candidates in sample-rank order; cluster and group sizes are counted in DuckDB; the sampled
texts are read one stored part at a time. DuckDB needs about 100 MB for partitions of 50,000
documents at two threads (a 64 MB limit may stop with `BudgetTooSmallError`).
"""

from __future__ import annotations

import base64
import heapq
import html
import io
import json
import re
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from curation.config import RecipeConfig
from curation.duck import (
    duckdb_session,
    hash_part,
    ident,
    literal,
    part_count,
    register_parts,
    scalar,
    write_hash_parts,
)
from curation.graph import (
    ALL,
    CROSS_DEDUP,
    DECONTAMINATED,
    DOCUMENTS,
    DOMAINS,
    HEURISTICS,
    LANGUAGE,
    MIX,
    PARTITION_DEDUP,
    QUALITY_SCORES,
    SCRUBBED,
    SHARDS,
    TOPIC_MODEL,
)
from curation.loader import served_phases
from curation.mix import (
    DEFAULT_BYTES_PER_TOKEN,
    RULES,
    SELECTED,
    TAKEDOWN,
)
from curation.neural_quality import SCORERS
from curation.partition import PartitionLayout
from curation.pii import scrub_text
from curation.schema import WEB_SOURCE, sample_rank
from curation.storage import Store, iter_parquet, read_parquet
from curation.takedowns import current_takedowns, load_tombstones, match_documents

# 2: duplicate removals per cluster size, the served phase order; 3: heuristics drops per language
REPORT_VERSION = "report-7"  # 5: the topic domains' mix before and after selection;
# 6: the recipe's domain weights and caps; 7: contamination per benchmark
REPORTS_PREFIX = "reports"
INGEST = DOCUMENTS
# (funnel stage, asset whose `decisions` rows with verdict `drop` flag a document)
PIPELINE_STAGES: tuple[tuple[str, str], ...] = (
    ("language", "language"),
    ("heuristics", "heuristics"),
    ("url_dedup", "url_dedup"),
    ("exact_dedup", "exact_dedup"),
    ("near_dedup", "dedup_clusters"),
    ("cross_dedup", "cross_dedup"),
    ("decontamination", "decontaminated"),
    ("empty_after_edits", "scrubbed"),
)
SELECTION_PREFIX = "selection."
SELECTION_STAGES = tuple(SELECTION_PREFIX + rule for rule in (*RULES, TAKEDOWN))
DOCUMENT_STAGES = (*(stage for stage, _ in PIPELINE_STAGES), *SELECTION_STAGES)
EDITS = "edits"
STAGES = (INGEST, *DOCUMENT_STAGES, EDITS)
CLUSTER_ASSETS = PARTITION_DEDUP
CROSS_ASSET, CROSS_PARTITION = CROSS_DEDUP, ALL
SAMPLES_PER_STAGE = 3
PREVIEW_CHARS = 320
QUALITY_BINS = 20
# Rules the mix applies before the quality cutoff (duplicate among them: the cut is taken over
# distinct documents): documents they drop never reach it.
BEFORE_QUALITY = set(RULES[:RULES.index("quality")])
DUPLICATE = "duplicate"
# Duplicate-group sizes the duplicate rule's removals are counted in: (smallest, largest; None:
# no upper end). A removed duplicate's group holds at least 2 documents.
DUPLICATE_BUCKETS: tuple[tuple[int, int | None], ...] = (
    (2, 2), (3, 4), (5, 10), (11, 100), (101, None))
FUNNEL_COLUMNS = ("stage", "documents_in", "dropped", "documents_out", "tokens_in",
                  "tokens_dropped", "tokens_out", "flagged", "kept_by_recipe")


class ReportError(ValueError):
    """The stored data cannot give a consistent report (an input missing or stale)."""


def report_prefix(recipe_name: str) -> str:
    return f"{REPORTS_PREFIX}/{recipe_name}"


def report_key(recipe_name: str) -> str:
    return f"{report_prefix(recipe_name)}/report.html"


def report_json_key(recipe_name: str) -> str:
    return f"{report_prefix(recipe_name)}/report.json"


# --- reading ---------------------------------------------------------------------------------


def _manifest(store: Store, asset: str, partition: str):  # noqa: ANN202 - a Manifest
    manifest = PartitionLayout(store, asset, partition).read_manifest()
    if manifest is None:
        raise ReportError(f"{asset}[{partition}] is not complete (no manifest); materialize it "
                          "before the report")
    return manifest


def _parts(store: Store, asset: str, partition: str, columns: Sequence[str],
           name: str = "part") -> Iterable[pa.Table]:
    """The given columns of a partition's table, one part at a time."""
    for part in _manifest(store, asset, partition).table_parts(name):
        yield read_parquet(store, part.key, list(columns))


_DOCUMENTS = pa.schema([("doc_id", pa.string()), ("source", pa.string()), ("text", pa.string())])
_TEXT = pa.schema([("doc_id", pa.string()), ("text", pa.string())])
_LANGUAGE = pa.schema([("doc_id", pa.string()), ("language", pa.string())])
_SCORES = pa.schema([("doc_id", pa.string())]
                    + [(column, pa.float64()) for column in SCORERS.values()])
SCORE_BINS = 10  # the table of every scorer's web scores: equal bins over [0, 1]
_DECISIONS = pa.schema([("doc_id", pa.string()), ("verdict", pa.string()),
                        ("reason", pa.string())])
_MIX = pa.schema([("doc_id", pa.string()), ("partition", pa.string()), ("rule", pa.string()),
                  ("tokens", pa.int64()), ("group_size", pa.int64())])
_CLUSTERS = pa.schema([("doc_id", pa.string()), ("cluster_id", pa.string())])
_DOMAINS = pa.schema([("doc_id", pa.string()), ("domain", pa.int16())])
_HITS = pa.schema([("doc_id", pa.string()), ("benchmark", pa.string()),
                   ("item_id", pa.string())])
_SITES = pa.schema([("doc_id", pa.string()), ("domain", pa.string())])
TOP_SITES = 3  # the web domains listed per benchmark in the contamination table
_OCCURRENCES = pa.schema([("doc_id", pa.string()), ("est_tokens", pa.int64())])
_DOMAIN_OCCURRENCES = pa.schema([("doc_id", pa.string()), ("phase", pa.string()),
                                 ("source", pa.string()), ("est_tokens", pa.int64())])
_RATES = pa.schema([("source", pa.string()), ("rate", pa.float64())])
# Rows of a partition's frame handled at once: the Python side holds one such batch.
BATCH_ROWS = 1 << 16
GROUP_BYTES = 512
GROUP_SHARE = 0.25
"""The frame query groups a partition's documents in hash parts of about `GROUP_SHARE` of
DuckDB's memory limit, at `GROUP_BYTES` a document (its group's twenty-odd aggregate states and
its rows): an allowance, not a measurement; with the parts it gives the grouping no longer
sets the report's smallest limit (benchmarks/report_aggregations.py --duckdb-floor)."""


def _view(con: duckdb.DuckDBPyConnection, name: str, store: Store, asset: str, partition: str,
          schema: pa.Schema, table: str = "part", required: bool = True) -> str:
    """Registers every part of a partition's `table` (no manifest and not `required`: none)
    as `name` in the session; returns the name."""
    manifest = _manifest(store, asset, partition) if required else \
        PartitionLayout(store, asset, partition).read_manifest()
    keys = [part.key for part in manifest.table_parts(table)] if manifest else []
    register_parts(con, name, store, keys, schema.names, schema)
    return name


def _scorer_histograms(con: duckdb.DuckDBPyConnection, partitions: int) -> dict[str, list[int]]:
    """Per scorer with scores (`SCORERS`), the web documents' scores counted in `SCORE_BINS`
    equal bins over [0, 1], from the partitions' `quality` and `documents` views: one join per
    partition, every scorer's column unpivoted from it (nulls, a scorer not trained, drop
    out)."""
    columns = ", ".join(f"CAST(q.{column} AS DOUBLE) AS {scorer}"
                        for scorer, column in SCORERS.items())
    counts: dict[str, list[int]] = {}
    for index in range(partitions):
        rows = con.execute(
            f"SELECT scorer, least(CAST(floor(score * {SCORE_BINS}) AS INTEGER), "
            f"{SCORE_BINS - 1}), count(*) FROM (UNPIVOT (SELECT {columns} FROM "
            f"p{index}_quality q JOIN p{index}_documents d ON d.doc_id = q.doc_id "
            f"WHERE d.source = {literal(WEB_SOURCE)}) ON {', '.join(SCORERS)} "
            "INTO NAME scorer VALUE score) GROUP BY 1, 2").fetchall()
        for scorer, bin_, count in rows:
            counts.setdefault(scorer, [0] * SCORE_BINS)[bin_] += count
    return {scorer: counts[scorer] for scorer in SCORERS if scorer in counts}


def _domain_mix(con: duckdb.DuckDBPyConnection, store: Store, partitions: Sequence[str],
                recipe: RecipeConfig, spill: Path) -> list[dict[str, Any]]:
    """Per topic domain (`domains`, described by `topic_model`'s terms): the recipe's weight
    and cap, the documents before selection, those selected, the tokens the mix's occurrences
    deliver and the domain's largest share of one source's tokens in one phase (what its cap
    bounds); empty when the partitions have no domains (embeddings off).

    The domains, the mix's decisions and its occurrences go into one long relation hashed by
    doc_id into parts under `spill` (`_hash_parts`); each part's joins hold a share of the
    recipe's documents, and Python sums per domain and per (phase, source, domain). Joined
    whole, the first statement set the report's smallest limit (benchmarks/report_aggregations.py
    --duckdb-floor)."""
    views = [_view(con, f"p{i}_domains", store, DOMAINS, partition, _DOMAINS, required=False)
             for i, partition in enumerate(partitions)]
    assigned = " UNION ALL ".join(f"SELECT doc_id, domain FROM {v}" for v in views)
    if not scalar(con, f"SELECT count(*) FROM ({assigned})"):
        return []
    _view(con, "occurrences", store, MIX, recipe.name, _DOMAIN_OCCURRENCES)
    con.execute(f"""CREATE OR REPLACE VIEW domain_rows AS
        SELECT doc_id, 0 AS k, domain, NULL::BOOLEAN AS selected, NULL::VARCHAR AS phase,
               NULL::VARCHAR AS source, NULL::BIGINT AS tokens FROM ({assigned})
        UNION ALL SELECT doc_id, 1, NULL, rule = {literal(SELECTED)}, NULL, NULL, NULL FROM mix
        UNION ALL SELECT doc_id, 2, NULL, NULL, phase, source, est_tokens FROM occurrences""")
    counts: dict[int, list[int]] = {}  # domain: documents, selected, delivered tokens
    pools: Counter[tuple[str, str, int | None]] = Counter()  # (phase, source, domain): tokens
    with tempfile.TemporaryDirectory(prefix="report-domains-", dir=spill) as folder:
        for path in _hash_parts(con, "domain_rows", scalar(con, "SELECT count(*) FROM mix"),
                                Path(folder)):
            with hash_part(con, "domain_part", path) as rows:
                for domain, *figures in con.execute(f"""
                        WITH a AS (SELECT doc_id, domain FROM {rows} WHERE k = 0),
                             m AS (SELECT doc_id, selected FROM {rows} WHERE k = 1),
                             o AS (SELECT doc_id, sum(tokens) AS tokens FROM {rows} WHERE k = 2
                                   GROUP BY 1)
                        SELECT a.domain, count(*), count(*) FILTER (WHERE m.selected),
                               coalesce(sum(o.tokens), 0)
                        FROM a JOIN m USING (doc_id) LEFT JOIN o USING (doc_id)
                        GROUP BY 1""").fetchall():
                    counts[domain] = [x + y for x, y in zip(counts.get(domain, [0, 0, 0]), figures,
                                                            strict=True)]
                pools.update({(phase, source, domain): tokens for phase, source, domain, tokens
                              in con.execute(f"""
                        SELECT o.phase, o.source, a.domain, sum(o.tokens)
                        FROM (SELECT * FROM {rows} WHERE k = 2) o
                        LEFT JOIN (SELECT doc_id, domain FROM {rows} WHERE k = 0) a USING (doc_id)
                        GROUP BY ALL""").fetchall()})
    return _domain_rows(store, recipe, counts, pools)


def _domain_rows(store: Store, recipe: RecipeConfig, counts: dict[int, list[int]],
                 pools: Counter[tuple[str, str, int | None]]) -> list[dict[str, Any]]:
    """`_domain_mix`'s rows from its sums."""
    totals: Counter[tuple[str, str]] = Counter()
    for (phase, source, _), tokens in pools.items():
        totals[phase, source] += tokens
    largest: dict[int, float] = {}
    for (phase, source, domain), tokens in pools.items():
        if domain is not None and totals[phase, source]:
            largest[domain] = max(largest.get(domain, 0.0), tokens / totals[phase, source])
    model = PartitionLayout(store, TOPIC_MODEL, ALL).read_manifest()
    terms = {} if model is None or not model.parts else dict(
        zip(*PartitionLayout(store, TOPIC_MODEL, ALL).read_table(["domain", "terms"])
            .to_pydict().values(), strict=True))
    before = sum(row[0] for row in counts.values()) or 1
    after = sum(row[1] for row in counts.values()) or 1
    tokens = sum(row[2] for row in counts.values()) or 1
    return [{"domain": domain, "terms": terms.get(domain, []),
             "weight": recipe.domain_weights.get(domain, 1.0),
             "cap": recipe.domain_caps.get(domain), "documents": documents,
             "share_before": documents / before, "selected": selected,
             "share_after": selected / after, "tokens": delivered,
             "token_share": delivered / tokens,
             "largest_source_share": largest.get(domain, 0.0)}
            for domain, (documents, selected, delivered) in sorted(counts.items())]


def _contamination(con: duckdb.DuckDBPyConnection, store: Store,
                   partitions: Sequence[str]) -> list[dict[str, Any]]:
    """Per benchmark, from the `decontaminated` hits of the recipe's partitions: the items
    found, the documents holding them, those the mix dropped as contaminated and their tokens,
    those it kept (when the recipe keeps contaminated documents), and the web domains most
    involved. Tokens are estimated as the funnel's (`_estimate`, the `p{i}_documents` views
    and `rates` of the session). Grouped joins in the session, which spill."""
    hits = [_view(con, f"p{i}_hits", store, DECONTAMINATED, partition, _HITS, "hits",
                  required=False) for i, partition in enumerate(partitions)]
    sites = [_view(con, f"p{i}_sites", store, DOCUMENTS, partition, _SITES)
             for i, partition in enumerate(partitions)]
    con.execute("CREATE TEMP TABLE benchmark_hits AS SELECT DISTINCT doc_id, benchmark, "
                "item_id FROM (" + " UNION ALL ".join(f"SELECT * FROM {v}" for v in hits) + ")")
    # DuckDB's DISTINCT aggregates do not spill: each (benchmark, document) pair once, with
    # the mix's rule, then counted. Counted DISTINCT, they set the report's smallest limit
    # at 592,000 documents (benchmarks/report_aggregations.py --duckdb-floor).
    con.execute("CREATE TEMP TABLE benchmark_docs AS SELECT DISTINCT h.benchmark, h.doc_id, "
                "m.rule FROM benchmark_hits h JOIN mix m USING (doc_id)")
    items = dict(con.execute(  # the eval sets' items: as many as the benchmarks hold at most
        "SELECT benchmark, count(DISTINCT item_id) FROM benchmark_hits WHERE doc_id IN "
        "(SELECT doc_id FROM benchmark_docs) GROUP BY 1").fetchall())
    rows = con.execute("""
        SELECT benchmark, count(*), count(*) FILTER (WHERE rule = 'contaminated'),
               count(*) FILTER (WHERE rule = ?)
        FROM benchmark_docs GROUP BY 1 ORDER BY 1""", [SELECTED]).fetchall()
    texts = " UNION ALL ".join(f"SELECT doc_id, source, strlen(text) AS size FROM p{i}_documents"
                               for i in range(len(partitions)))
    removed_tokens = dict(con.execute(f"""
        SELECT benchmark, sum({_estimate('d.size')}) FROM benchmark_docs h
        JOIN ({texts}) d USING (doc_id) LEFT JOIN rates r ON r.source = d.source
        WHERE h.rule = 'contaminated' GROUP BY 1""").fetchall())
    top: dict[str, list[dict[str, Any]]] = {}
    for benchmark, site, documents in con.execute(
            "SELECT benchmark, domain, documents FROM (SELECT benchmark, domain, count(*) AS "
            "documents, row_number() OVER (PARTITION BY benchmark ORDER BY count(*) DESC, "
            "domain) AS rank FROM (SELECT DISTINCT h.benchmark, s.domain, h.doc_id FROM "
            "benchmark_docs h JOIN (" + " UNION ALL ".join(f"SELECT * FROM {v}" for v in sites)
            + ") s USING (doc_id) WHERE s.domain IS NOT NULL) GROUP BY 1, 2) WHERE rank <= "
            f"{TOP_SITES} ORDER BY benchmark, rank").fetchall():
        top.setdefault(benchmark, []).append({"domain": site, "documents": documents})
    con.execute("DROP TABLE benchmark_hits")
    con.execute("DROP TABLE benchmark_docs")
    return [{"benchmark": benchmark, "items": items[benchmark], "documents": documents,
             "documents_removed": removed, "tokens_removed": int(removed_tokens.get(benchmark,
                                                                                  0)),
             "documents_kept": kept, "top_domains": top.get(benchmark, [])}
            for benchmark, documents, removed, kept in rows]


CONTAMINATION_HEADERS = ("benchmark", "items found", "documents", "documents removed",
                         "tokens removed (est.)", "kept by the recipe", "top domains")


def _contamination_cells(row: dict[str, Any]) -> list[Any]:
    return [row["benchmark"], row["items"], row["documents"], row["documents_removed"],
            row["tokens_removed"], row["documents_kept"],
            ", ".join(f"{site['domain']} ({site['documents']})" for site in row["top_domains"])
            or "–"]


def contamination_markdown(data: dict[str, Any]) -> str:
    return _md_table(CONTAMINATION_HEADERS,
                     [_contamination_cells(r) for r in data["contamination"]],
                     [False, True, True, True, True, True, False])


def _estimate(size: str) -> str:
    """The mix's token estimate in SQL: bytes over the source's bytes per token (`r.rate`),
    rounded half to even as numpy's rint, at least 1 per document."""
    return (f"CAST(greatest(1, round_even(coalesce({size}, 0) / "
            f"coalesce(r.rate, {DEFAULT_BYTES_PER_TOKEN}), 0)) AS BIGINT)")


def _frame_query(con: duckdb.DuckDBPyConnection, store: Store, index: int,
                 partition: str, score: str) -> tuple[str, pa.Array]:
    """One row per document of the partition: source, language, score (the `quality_scores`
    column `score`, the one the recipe's cut reads, as `quality_score`), the estimated tokens
    of the extracted (`tokens`) and of the scrubbed text (`final_tokens`: exact for the
    documents the mix selected), the reason each pipeline stage flags it (null: not flagged),
    the mix's rule, `group_size` (the recipe's documents in its duplicate group: table
    `group_sizes`, the mix's) and `copies` (above 1: a doc_id occurs twice in an input); the string
    columns come numbered: decode them with `_decode` and the returned strings.

    A query, not a table, and one grouping rather than a join per input: every input's rows
    go into one long relation (doc_id, input number, a string, an integer, a float) grouped
    by doc_id, a single hash aggregate that DuckDB spills beyond its memory limit; the caller
    streams the result."""
    prefix = f"p{index}_"
    mix = f"(SELECT * FROM mix WHERE partition = {literal(partition)})"
    inputs = [  # (relation, string, integer, float); the input's number is its position
        (f"{prefix}{DOCUMENTS}", "source", "strlen(text)", "NULL"),
        (_view(con, f"{prefix}{LANGUAGE}", store, LANGUAGE, partition, _LANGUAGE), "language",
         "NULL", "NULL"),
        (_view(con, f"{prefix}quality", store, QUALITY_SCORES, partition, _SCORES,
               required=False), "NULL", "NULL", score),
        (_view(con, f"{prefix}{SCRUBBED}", store, SCRUBBED, partition, _TEXT), "NULL",
         "strlen(text)", "NULL"),
        (mix, "rule", "tokens", "NULL"),
    ]
    for _, asset in PIPELINE_STAGES:
        if asset == CROSS_ASSET:
            source = "(SELECT doc_id, flag AS reason FROM cross_drops)"
        else:
            view = _view(con, f"{prefix}{asset}_decisions", store, asset, partition, _DECISIONS,
                         "decisions")
            only = " AND reason = 'empty_after_edits'" if asset == SCRUBBED else ""
            source = f"(SELECT * FROM {view} WHERE verdict = 'drop'{only})"
        inputs.append((source, "reason", "NULL", "NULL"))
    con.execute(f"CREATE OR REPLACE VIEW {prefix}rows AS " + " UNION ALL ".join(
        f"SELECT doc_id, {number} AS k, CAST({string} AS VARCHAR) AS s, "
        f"CAST({integer} AS BIGINT) AS n, CAST({real} AS DOUBLE) AS x FROM {relation}"
        for number, (relation, string, integer, real) in enumerate(inputs)))
    # Aggregates over strings keep their states outside what DuckDB can spill, so the
    # strings (sources, languages, rules, reasons: a few distinct values) are numbered in
    # their sort order and grouped as numbers; `min` of the numbers is the smallest string.
    # One DISTINCT per input: over the whole union it set the report's smallest limit.
    distinct = sorted({value for relation, string, _, _ in inputs if string != "NULL"
                       for (value,) in con.execute(f"SELECT DISTINCT CAST({string} AS VARCHAR) "
                                                   f"FROM {relation}").fetchall()
                       if value is not None})
    strings = pa.array(distinct, pa.string())
    con.register("strings_table", pa.table({"s": strings,
                                            "code": pa.array(range(len(distinct)), pa.int32())}))
    con.execute(f"CREATE OR REPLACE TABLE {prefix}strings AS SELECT * FROM strings_table")
    con.unregister("strings_table")

    def first(column: str, number: int) -> str:
        return f"any_value({column}) FILTER (WHERE k = {number})"

    # the first (smallest) reason of a document's `drop` decisions, per stage
    flags = ", ".join(f"min(code) FILTER (WHERE k = {number}) AS {ident('flag.' + stage)}"
                      for number, (stage, _) in enumerate(PIPELINE_STAGES, 5))
    copies = ", ".join(f"count(*) FILTER (WHERE k = {number})" for number in range(5))
    query = f"""
        SELECT g.doc_id, g.source, g.language, g.quality_score,
               {", ".join(ident("flag." + stage) for stage, _ in PIPELINE_STAGES)}, g.rule,
               {_estimate("g.text_bytes")} AS tokens,
               coalesce(g.exact_tokens, {_estimate("g.final_bytes")}) AS final_tokens,
               z.group_size, g.copies
        FROM (SELECT doc_id, {first("code", 0)} AS source, {first("n", 0)} AS text_bytes,
                     {first("code", 1)} AS language, {first("x", 2)} AS quality_score,
                     {first("n", 3)} AS final_bytes, {first("code", 4)} AS rule,
                     {first("n", 4)} AS exact_tokens, {flags},
                     greatest({copies}) AS copies
              FROM {prefix}rows LEFT JOIN {prefix}strings USING (s)
              GROUP BY doc_id HAVING count(*) FILTER (WHERE k = 0) > 0) g
        LEFT JOIN (SELECT code, rate FROM rates JOIN {prefix}strings ON s = rates.source) r
               ON r.code = g.source
        LEFT JOIN group_sizes z ON z.doc_id = g.doc_id"""
    return query, strings


def _decode(frame: pa.Table, strings: pa.Array) -> pa.Table:
    """`frame` with its numbered string columns (`_frame_query`) as strings again."""
    for name in ("source", "language", "rule", *(f"flag.{s}" for s, _ in PIPELINE_STAGES)):
        frame = frame.set_column(frame.column_names.index(name), name,
                                 pc.take(strings, frame[name]))
    return frame


def _part_count(con: duckdb.DuckDBPyConnection, documents: int) -> int:
    """Hash parts for `documents`: each about `GROUP_SHARE` of the memory limit at
    `GROUP_BYTES` a document."""
    return part_count(con, documents, GROUP_BYTES, GROUP_SHARE)


def _hash_parts(con: duckdb.DuckDBPyConnection, relation: str, documents: int,
                folder: Path) -> list[Path]:
    """Writes `relation` to Parquet files in `folder`, hashed by its `doc_id` into
    `_part_count` parts for its `documents`; returns them. A statement over one part groups or
    joins a bounded share of the documents. The report's statements over a partition, the
    recipe or the store run over such parts: grouped or joined whole, each in turn set the
    report's smallest limit, which grew with the documents
    (benchmarks/report_aggregations.py --duckdb-floor; docs/scale.md)."""
    parts = _part_count(con, documents)
    reader = con.sql(f"SELECT *, hash(doc_id) % {parts} AS part FROM {relation}") \
        .to_arrow_reader(BATCH_ROWS)
    try:
        return write_hash_parts(reader, parts, folder)
    finally:
        reader.close()  # the stream's result is released before the next statement


def _frames(con: duckdb.DuckDBPyConnection, index: int, documents: int,
            query: tuple[str, pa.Array], spill: Path) -> Iterator[pa.Table]:
    """Partition `index`'s frame (`_frame_query`), decoded, in batches: its long relation is
    written in hash parts under `spill` and the view `p{index}_rows` pointed at one part at a
    time."""
    with tempfile.TemporaryDirectory(prefix="report-", dir=spill) as folder:
        # No rows, no parts: the (empty) relation is grouped as it is.
        for path in _hash_parts(con, f"p{index}_rows", documents, Path(folder)) or [None]:
            with hash_part(con, f"p{index}_part", path) if path else nullcontext() as part:
                if part:
                    con.execute(f"CREATE OR REPLACE VIEW p{index}_rows AS "
                                f"SELECT * EXCLUDE (part) FROM {part}")
                for frame in _batches(con, query[0]):
                    yield _decode(frame, query[1])


def _batches(con: duckdb.DuckDBPyConnection, query: str) -> Iterator[pa.Table]:
    """The rows of `query`, BATCH_ROWS at a time (one empty table when there are none).
    The result goes into a table of the session's database first: streaming the query
    itself holds more than its memory limit."""
    con.execute(f"CREATE OR REPLACE TABLE frame AS {query}")
    reader = con.sql("SELECT * FROM frame").to_arrow_reader(BATCH_ROWS)
    empty = True
    for batch in reader:
        empty = False
        yield pa.Table.from_batches([batch])
    if empty:
        yield reader.schema.empty_table()
    con.execute("DROP TABLE frame")


# --- the figures -----------------------------------------------------------------------------


@dataclass
class _Partition:
    name: str
    frame: pa.Table  # a batch of the partition's documents (`_frame_query`)
    stage: np.ndarray  # the funnel stage that dropped each document; "" for selected
    reason: np.ndarray  # and why


def _attribute(frame: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """The funnel stage that dropped each document ("" for selected) and why: the first
    pipeline flag in stage order, else the mix's rule. One polars when/then chain over the
    columns, so no per-document Python objects are made before the result."""
    selected = pl.col("rule") == SELECTED
    stage, reason = pl.when(selected).then(pl.lit("")), pl.when(selected).then(pl.lit(""))
    for name, _ in PIPELINE_STAGES:
        flag = pl.col(f"flag.{name}")
        stage = stage.when(flag.is_not_null()).then(pl.lit(name))
        reason = reason.when(flag.is_not_null()).then(flag)
    stage = stage.otherwise(pl.lit(SELECTION_PREFIX) + pl.col("rule"))
    # str(None) spelling for a document without a language, as the report always wrote it.
    reason = reason.otherwise(pl.when(pl.col("rule") == "language").then(
        pl.format("language {} not in the recipe", pl.col("language").fill_null("None")))
        .otherwise(pl.col("rule")))
    columns = ["rule", "language", *(f"flag.{name}" for name, _ in PIPELINE_STAGES)]
    out = pl.from_arrow(frame.select(columns)).select(stage=stage, reason=reason)
    return out["stage"].to_numpy(), out["reason"].to_numpy()
def _ingest_row(stats: dict[str, Any], rows: int) -> dict[str, Any]:
    candidates = int(stats.get("candidates", rows))
    return {"stage": INGEST, "documents_in": candidates, "dropped": candidates - rows,
            "documents_out": rows, "tokens_in": None, "tokens_dropped": None,
            "tokens_out": None, "flagged": candidates - rows, "kept_by_recipe": 0}


def _funnel_rows(part: _Partition, ingest: dict[str, Any]) -> list[dict[str, Any]]:
    frame = part.frame
    tokens = frame["tokens"].to_numpy()
    selected = part.stage == ""
    alive = np.ones(frame.num_rows, bool)
    ingest = dict(ingest, tokens_out=int(tokens.sum()))
    rows = [ingest]
    for name in DOCUMENT_STAGES:
        dropped = part.stage == name
        if name in SELECTION_STAGES:
            flagged = dropped
        else:
            flagged = np.asarray(frame[f"flag.{name}"].is_valid().to_pylist(), bool) \
                if frame.num_rows else np.zeros(0, bool)
        rows.append({
            "stage": name,
            "documents_in": int(alive.sum()), "dropped": int(dropped.sum()),
            "documents_out": int((alive & ~dropped).sum()),
            "tokens_in": int(tokens[alive].sum()), "tokens_dropped": int(tokens[dropped].sum()),
            "tokens_out": int(tokens[alive & ~dropped].sum()),
            "flagged": int(flagged.sum()), "kept_by_recipe": int((flagged & selected).sum()),
        })
        alive &= ~dropped
    final = frame["final_tokens"].to_numpy()
    kept = int(alive.sum())
    rows.append({"stage": EDITS, "documents_in": kept, "dropped": 0, "documents_out": kept,
                 "tokens_in": int(tokens[alive].sum()),
                 "tokens_dropped": int(tokens[alive].sum() - final[alive].sum()),
                 "tokens_out": int(final[alive].sum()), "flagged": 0, "kept_by_recipe": 0})
    return rows


def _sum_rows(tables: Sequence[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    total = []
    for rows in zip(*tables, strict=True):
        merged = {"stage": rows[0]["stage"]}
        for column in FUNNEL_COLUMNS[1:]:
            values = [row[column] for row in rows]
            merged[column] = None if any(v is None for v in values) else sum(values)
        total.append(merged)
    return total



def _quality_edges(values_min: float | None) -> tuple[float, np.ndarray]:
    """The histogram's lower bound and bin edges. Classifier probabilities crowd near 0 or 1:
    log-spaced bins from the smallest score's decade."""
    low = 10.0 ** np.floor(np.log10(max(values_min, 1e-6))) if values_min is not None \
        else 0.01
    return low, np.geomspace(low, 1.0, QUALITY_BINS + 1)


_QUALITY_CATEGORIES = ("above the cutoff", "below the cutoff", "removed before the cutoff")


class _Figures:
    """What the report keeps of the documents, added one batch at a time: counts and token
    sums per stage, reason, language and quality bin, the smallest score per language and the
    first sample candidates per stage. Its size depends on the numbers of stages, reasons,
    languages and partitions, never on the number of documents."""

    def __init__(self, store: Store, low: float, edges: np.ndarray, count: int) -> None:
        self.low, self.edges, self.count = low, edges, count
        self.tombstones = load_tombstones(store)
        self.removals: dict[tuple[str, str], dict[str, int]] = defaultdict(
            lambda: {"flagged": 0, "dropped": 0, "tokens_dropped": 0})
        # partition -> language -> [documents, selected, selected tokens, heuristics drops]
        self.languages: dict[str, dict[str, list[int]]] = defaultdict(
            lambda: defaultdict(lambda: [0, 0, 0, 0]))
        self.histogram = {name: np.zeros(QUALITY_BINS, np.int64)
                          for name in _QUALITY_CATEGORIES}
        self.scored = 0
        self.cutoffs: dict[str, float] = {}
        # (stage, kind) -> the first candidates in sample order and how many there are
        self.candidates: dict[tuple[str, str], list[tuple]] = defaultdict(list)
        self.matches: Counter[tuple[str, str]] = Counter()
        # per DUPLICATE_BUCKETS entry: documents and estimated tokens the duplicate rule removed
        self.duplicates = np.zeros((len(DUPLICATE_BUCKETS), 2), np.int64)

    def add_ingest(self, rejects: dict[str, int]) -> None:
        for reason, count in rejects.items():
            row = self.removals[(INGEST, reason)]
            row["flagged"] += count
            row["dropped"] += count

    def add(self, index: int, part: _Partition) -> None:
        self._add_duplicates(part.frame)
        self._add_removals(part)
        self._add_languages(part)
        self._add_quality(part.frame)
        self._add_samples(index, part)

    def _add_removals(self, part: _Partition) -> None:
        for name, _ in PIPELINE_STAGES:
            counts = part.frame.group_by(f"flag.{name}").aggregate([("doc_id", "count")])
            for reason, count in zip(counts[f"flag.{name}"].to_pylist(),
                                     counts["doc_id_count"].to_pylist(), strict=True):
                if reason is not None:
                    self.removals[(name, reason)]["flagged"] += count
        dropped = part.stage != ""
        table = pa.table({"stage": pa.array(part.stage[dropped].tolist(), pa.string()),
                          "reason": pa.array(part.reason[dropped].tolist(), pa.string()),
                          "tokens": part.frame["tokens"].filter(pa.array(dropped))})
        for group in table.group_by(["stage", "reason"]).aggregate(
                [("tokens", "sum"), ("tokens", "count")]).to_pylist():
            row = self.removals[(group["stage"], group["reason"])]
            row["dropped"] += group["tokens_count"]
            row["tokens_dropped"] += group["tokens_sum"] or 0
            if group["stage"] in SELECTION_STAGES:
                row["flagged"] += group["tokens_count"]

    def _add_duplicates(self, frame: pa.Table) -> None:
        """The documents whose mix rule is `duplicate` (whatever funnel stage they are
        attributed to) by their group's size bucket, with the funnel's token estimate."""
        removed = frame.filter(pc.equal(frame["rule"], DUPLICATE))
        sizes = removed["group_size"].to_numpy(zero_copy_only=False)
        if removed["group_size"].null_count or np.any(sizes < 2):
            raise ReportError("a duplicate the mix removed is alone in its duplicate group: "
                              "the mix is stale; re-materialize it")
        bucket = np.searchsorted([low for low, _ in DUPLICATE_BUCKETS], sizes, "right") - 1
        np.add.at(self.duplicates[:, 0], bucket, 1)
        np.add.at(self.duplicates[:, 1], bucket, removed["tokens"].to_numpy())

    def duplicate_rows(self) -> list[dict[str, Any]]:
        return [{"bucket": str(low) if high == low else f"{low}+" if high is None
                 else f"{low}-{high}", "min_size": low, "max_size": high,
                 "documents": int(documents), "tokens": int(tokens)}
                for (low, high), (documents, tokens) in zip(DUPLICATE_BUCKETS,
                                                            self.duplicates.tolist(),
                                                            strict=True)]

    def removal_rows(self) -> list[dict[str, Any]]:
        order = {stage: i for i, stage in enumerate(STAGES)}
        return [{"stage": stage, "reason": reason, **counts}
                for (stage, reason), counts in sorted(
                    self.removals.items(), key=lambda item: (order[item[0][0]],
                                                             -item[1]["dropped"],
                                                             -item[1]["flagged"], item[0][1]))]

    def _add_languages(self, part: _Partition) -> None:
        selected = pa.array(part.stage == "", pa.bool_())
        table = pa.table({
            "language": pc.fill_null(part.frame["language"], "(none)"),
            "selected": pc.cast(selected, pa.int64()),
            "selected_tokens": pc.if_else(selected, part.frame["final_tokens"], 0),
            # the heuristics' verdict on its own, whatever stage the funnel blames first
            "heuristics": pc.cast(pc.is_valid(part.frame[f"flag.{HEURISTICS}"]), pa.int64())})
        grouped = table.group_by("language").aggregate(
            [("selected", "count"), ("selected", "sum"), ("selected_tokens", "sum"),
             ("heuristics", "sum")])
        for g in grouped.to_pylist():
            row = self.languages[part.name][g["language"]]
            row[0] += g["selected_count"]
            row[1] += g["selected_sum"] or 0
            row[2] += g["selected_tokens_sum"] or 0
            row[3] += g["heuristics_sum"] or 0

    def language_rows(self, partitions: Sequence[str]) -> list[dict[str, Any]]:
        """Per partition and language: documents, those selected and their tokens, and the
        share the heuristics drop (`curation/languages/` sets their rules per language)."""
        return [{"partition": partition, "language": language, "documents": documents,
                 "selected": selected, "selected_tokens": tokens,
                 "heuristics_dropped": dropped, "heuristics_drop_rate": dropped / documents}
                for partition in partitions
                for language, (documents, selected, tokens, dropped) in sorted(
                    self.languages[partition].items(), key=lambda g: (-g[1][0], g[0]))]

    def _add_quality(self, frame: pa.Table) -> None:
        web = frame.filter(pc.and_(pc.equal(frame["source"], WEB_SOURCE),
                                   pc.is_valid(frame["quality_score"])))
        values = np.clip(web["quality_score"].to_numpy().astype(np.float64), self.low, 1.0)
        rules = np.asarray(web["rule"].to_pylist(), dtype=object)
        category = np.where(np.isin(rules, list(BEFORE_QUALITY)), _QUALITY_CATEGORIES[2],
                            np.where(rules == "quality", _QUALITY_CATEGORIES[1],
                                     _QUALITY_CATEGORIES[0]))
        self.scored += int(values.size)
        for name in _QUALITY_CATEGORIES:
            self.histogram[name] += np.histogram(values[category == name], self.edges)[0]
        above = category == _QUALITY_CATEGORIES[0]
        for language, score in zip(web["language"].filter(pa.array(above)).to_pylist(),
                                   values[above].tolist(), strict=True):
            key = language or "(none)"
            self.cutoffs[key] = min(score, self.cutoffs.get(key, score))

    def quality(self, recipe: RecipeConfig) -> dict[str, Any]:
        fraction = recipe.selection.quality_top_fraction
        return {"documents": self.scored, "bin_edges": self.edges.tolist(), "scale": "log",
                "histogram": {name: counts.tolist() for name, counts in self.histogram.items()},
                "top_fraction": fraction,
                "cutoffs": dict(sorted(self.cutoffs.items())) if fraction is not None else {},
                "phase_top_fractions": {p.name: p.quality_top_fraction for p in recipe.phases
                                        if p.quality_top_fraction is not None}}

    def _add_samples(self, index: int, part: _Partition) -> None:
        """Keeps, per stage and kind, the first `(stage number + 1) * count` documents in
        sample order (sample rank, then partition and doc_id), enough for `sample_rows`."""
        frame = part.frame
        ids = frame["doc_id"].to_pylist()
        ranks = np.array([int(sample_rank(d), 16) for d in ids], np.uint64)
        # a report copies text: never a taken-down document's
        shown = ~np.asarray(pc.fill_null(pc.or_(pc.equal(frame["rule"], TAKEDOWN),
                                                self.tombstones.mask(frame["doc_id"])),
                                         False).to_pylist(), bool)
        position = {name: i for i, name in enumerate(DOCUMENT_STAGES)}
        stage = np.array([position.get(s, len(DOCUMENT_STAGES)) for s in part.stage.tolist()],
                         np.int64)
        for number, name in enumerate(DOCUMENT_STAGES):
            limit = (number + 1) * self.count
            for kind, mask in (("removed", (stage == number) & shown),
                               ("kept", (stage > number) & shown)):
                rows = np.flatnonzero(mask)
                self.matches[(name, kind)] += int(rows.size)
                if rows.size > limit:  # every row ranked up to the limit-th, ties included
                    threshold = np.partition(ranks[rows], limit - 1)[limit - 1]
                    rows = rows[ranks[rows] <= threshold]
                found = [(int(ranks[r]), index, ids[r], part.name,
                          part.reason[r] if kind == "removed" else "") for r in rows.tolist()]
                if found:
                    self.candidates[(name, kind)] = sorted(
                        self.candidates[(name, kind)] + found)[:limit]

    def sample_rows(self) -> dict[str, dict[str, list[tuple[str, str, str]]]]:
        """(partition, doc_id, reason) per stage and kind: `count` documents in sample order,
        after skipping `stage number * count` when there are enough, so consecutive stages
        show different documents."""
        picks: dict[str, dict[str, list[tuple[str, str, str]]]] = {}
        for number, name in enumerate(DOCUMENT_STAGES):
            skip = number * self.count
            picks[name] = {}
            for kind in ("removed", "kept"):
                chosen = self.candidates[(name, kind)]
                if self.matches[(name, kind)] > skip + self.count:
                    chosen = chosen[skip:]
                picks[name][kind] = [(partition, doc_id, why)
                                     for _, _, doc_id, partition, why in chosen[:self.count]]
        return picks


def _clusters(con: duckdb.DuckDBPyConnection, store: Store, partitions: Sequence[str],
              spill: Path) -> dict[str, Any]:
    """Cluster sizes per dedup asset (clusters of each size; duplicates = members beyond the
    first), over the recipe's documents: counted in DuckDB, one partition at a time; the
    store-wide `cross_dedup` clusters in hash parts (`_cross_cluster_sizes`)."""
    result = {}
    for asset in CLUSTER_ASSETS:
        sizes: Counter[int] = Counter()
        for i, partition in enumerate(partitions):
            view = _view(con, f"p{i}_{asset}_clusters", store, asset, partition, _CLUSTERS)
            sizes.update(dict(con.execute(
                f"SELECT size, count(*) FROM (SELECT count(doc_id) AS size FROM {view} "
                "GROUP BY cluster_id) GROUP BY size").fetchall()))
        result[asset] = _size_figures(sizes)
    _view(con, "cross_clusters", store, CROSS_ASSET, CROSS_PARTITION, _CLUSTERS,
          required=len(partitions) > 1)
    result[CROSS_ASSET] = _size_figures(_cross_cluster_sizes(con, len(partitions), spill))
    return result


def _size_figures(sizes: Counter[int]) -> dict[str, Any]:
    return {"clusters": sum(c for s, c in sizes.items() if s > 1),
            "duplicates": sum((s - 1) * c for s, c in sizes.items()),
            "largest": max(sizes, default=0),
            "sizes": {str(s): c for s, c in sorted(sizes.items()) if s > 1}}


def _cross_cluster_sizes(con: duckdb.DuckDBPyConnection, partitions: int,
                         spill: Path) -> Counter[int]:
    """Sizes of the `cross_clusters` (the whole store's) counted over the recipe's documents
    (the session's `p{i}_documents`). Two rounds of hash parts (`_hash_parts`): by doc_id, each
    part's members kept when the recipe holds them; by cluster_id, each part's clusters
    counted. The semi join of the whole store's clusters with the recipe's documents in one
    statement set the report's smallest limit."""
    recipe_docs = " UNION ALL ".join(f"SELECT doc_id, NULL AS cluster_id FROM p{i}_documents"
                                     for i in range(partitions))
    if not recipe_docs:
        return Counter()
    members = scalar(con, "SELECT count(*) FROM cross_clusters")
    documents = scalar(con, f"SELECT count(*) FROM ({recipe_docs})")
    parts = _part_count(con, members)
    sizes: Counter[int] = Counter()
    with tempfile.TemporaryDirectory(prefix="report-clusters-", dir=spill) as folder:
        by_doc, by_cluster = Path(folder) / "by_doc", Path(folder) / "by_cluster"
        by_doc.mkdir()
        by_cluster.mkdir()
        doc_parts = _hash_parts(con, f"(SELECT doc_id, cluster_id FROM cross_clusters "
                                f"UNION ALL {recipe_docs})", members + documents, by_doc)

        def in_recipe() -> Iterator[pa.RecordBatch]:  # one doc part's semi join at a time
            for path in doc_parts:
                with hash_part(con, "doc_part", path) as rows:
                    reader = con.sql(
                        f"SELECT cluster_id, hash(cluster_id) % {parts} AS part FROM {rows} "
                        f"WHERE cluster_id IS NOT NULL AND doc_id IN (SELECT doc_id FROM {rows}"
                        " WHERE cluster_id IS NULL)").to_arrow_reader(BATCH_ROWS)
                    yield from reader
                    reader.close()

        for path in write_hash_parts(in_recipe(), parts, by_cluster):
            with hash_part(con, "cluster_part", path) as rows:
                sizes.update(dict(con.execute(
                    f"SELECT size, count(*) FROM (SELECT count(*) AS size FROM {rows}"
                    " GROUP BY cluster_id) GROUP BY size").fetchall()))
    return sizes


def _preview(text: str | None) -> str:
    flat = " ".join((text or "").split())
    return flat[:PREVIEW_CHARS] + ("…" if len(flat) > PREVIEW_CHARS else "")


def _samples(store: Store, picks: dict[str, dict[str, list[tuple[str, str, str]]]]
             ) -> dict[str, Any]:
    """The picked documents with their text, read one stored part at a time."""
    wanted: dict[str, set[str]] = defaultdict(set)
    for kinds in picks.values():
        for items in kinds.values():
            for partition, doc_id, _ in items:
                wanted[partition].add(doc_id)
    texts: dict[str, dict[str, Any]] = {}
    for partition, ids in wanted.items():
        value_set = pa.array(sorted(ids), pa.string())
        for row in _rows_of(store, DOCUMENTS, partition, ["doc_id", "url", "text"], value_set):
            texts.setdefault(row["doc_id"], {}).update(url=row["url"], original=row["text"])
        for row in _rows_of(store, SCRUBBED, partition, ["doc_id", "text"], value_set):
            texts.setdefault(row["doc_id"], {})["scrubbed"] = row["text"]
    result: dict[str, Any] = {}
    for name in DOCUMENT_STAGES:
        result[name] = {}
        for kind, items in picks[name].items():
            result[name][kind] = []
            for partition, doc_id, why in items:
                found = texts.get(doc_id, {})
                text = found.get("scrubbed") if kind == "kept" else \
                    scrub_text(found.get("original") or "")[0]
                result[name][kind].append({"doc_id": doc_id, "partition": partition,
                                           "url": found.get("url"), "reason": why,
                                           "text": _preview(text)})
    return result


def _rows_of(store: Store, asset: str, partition: str, columns: list[str],
             doc_ids: pa.Array) -> Iterator[dict[str, Any]]:
    """The rows of `doc_ids` in a partition's parts, read a batch at a time (a part's whole
    text is never decoded at once)."""
    for part in _manifest(store, asset, partition).parts:
        for batch in iter_parquet(store, part.key, columns):
            yield from batch.filter(pc.is_in(batch["doc_id"], value_set=doc_ids)).to_pylist()


def _rejects_sample(store: Store, partitions: Sequence[str], count: int) -> list[dict]:
    """The first `count` rejected records in sample order; holds one stored part and the
    `count` best so far."""
    takedowns = current_takedowns(store)
    best: list[tuple[str, int, dict[str, Any]]] = []
    seen = 0
    for partition in partitions:
        for key in store.list(f"rejects/{partition.replace('/', '_')}"):
            if key.endswith(".parquet"):
                table = read_parquet(store, key, ["url", "reason", "message"])
                if takedowns.entries and table.num_rows:  # a taken-down URL is never shown
                    table = table.filter(pc.invert(match_documents(table, takedowns)))
                # the running number keeps equal ranks in reading order
                found = [(sample_rank(f"{partition}|{r['url']}"), seen + i,
                          dict(r, partition=partition))
                         for i, r in enumerate(table.to_pylist())]
                seen += len(found)
                best = heapq.nsmallest(count, best + found)
    return [dict(r, message=_preview(r["message"])[:160]) for _, _, r in best]


def _shards_manifest(store: Store, recipe_name: str) -> dict[str, Any]:
    extra = _manifest(store, SHARDS, recipe_name).extra
    return json.loads(store.read_bytes(f"{extra['prefix']}/manifest.json"))


def _check_rules(con: duckdb.DuckDBPyConnection, partition: str) -> int:
    """The number of the mix's decisions for `partition`; fails on a rule the report does not
    know."""
    counts = dict(con.execute("SELECT rule, count(*) FROM mix WHERE partition = ? GROUP BY rule",
                              [partition]).fetchall())
    unknown = set(counts) - {SELECTED, *(
        stage.removeprefix(SELECTION_PREFIX) for stage in SELECTION_STAGES)}
    if unknown:
        raise ReportError(f"the mix's decisions for {partition} name rules the report does not "
                          "know: "
                          f"{sorted(unknown, key=str)}; teach curation.report.SELECTION_STAGES "
                          "them")
    return sum(counts.values())


def _served(shards: dict[str, Any]) -> dict[str, Any]:
    """The phase groups in the order the loader serves them (`curation.loader.
    served_phases` of the dataset's manifest)."""
    return {"shuffle": shards.get("shuffle", "within_phase"),
            "phases": [{"phase": p.phase, "first_sequence": p.first, "end_sequence": p.end,
                        "sequences": p.end - p.first, "tokens": p.tokens}
                       for p in served_phases(shards)]}


def compute_report(store: Store, recipe: RecipeConfig,
                   samples_per_stage: int = SAMPLES_PER_STAGE) -> dict[str, Any]:
    """Every figure of the report as plain data (see the module docstring).

    Memory is bounded by the budget (`curation.duck`), not by the number of documents: DuckDB
    joins each partition's stored parts with the mix's decisions (spilling beyond its
    `memory_limit`) and streams the joined rows in batches of `BATCH_ROWS`; Python keeps only
    per-stage, per-reason, per-language and per-bin sums, and the first few sample candidates
    in sample-rank order (`_Figures`). Cluster sizes are counted in DuckDB."""
    partitions = recipe.partition_keys()
    score = SCORERS[recipe.selection.quality_scorer]
    mix_manifest = _manifest(store, MIX, recipe.name)
    extra = mix_manifest.extra
    bytes_per_token = {k: float(v) for k, v in extra.get("bytes_per_token", {}).items()}
    cross_manifest = PartitionLayout(store, CROSS_ASSET, CROSS_PARTITION).read_manifest()
    if cross_manifest is None and len(partitions) > 1:
        raise ReportError("cross_dedup is not complete (no manifest); materialize it first")
    with duckdb_session() as con:
        _view(con, "mix", store, MIX, recipe.name, _MIX, "decisions")
        cross = _view(con, "cross_decisions", store, CROSS_ASSET, CROSS_PARTITION, _DECISIONS,
                      "decisions", required=False)
        con.execute("CREATE TABLE cross_drops AS SELECT doc_id, min(reason) AS flag FROM "
                    f"{cross} WHERE verdict = 'drop' GROUP BY doc_id")
        # a table, not the parts' view: its size known, the join builds on it
        con.execute("CREATE TABLE group_sizes AS SELECT doc_id, group_size FROM mix")
        con.register("rates", pa.table({"source": list(bytes_per_token),
                                        "rate": list(bytes_per_token.values())},
                                       schema=_RATES))
        queries = []
        for index, partition in enumerate(partitions):
            _view(con, f"p{index}_documents", store, DOCUMENTS, partition, _DOCUMENTS)
            queries.append(_frame_query(con, store, index, partition, score))
        scorers = _scorer_histograms(con, len(partitions))
        # The histogram's bins start at the smallest web score: found before the batches.
        # One statement per partition: the union of the joins failed first at a low limit.
        smallest = [con.execute(f"SELECT min(CAST(q.{score} AS DOUBLE)) FROM p{i}_documents d "
                                f"JOIN p{i}_quality q ON q.doc_id = d.doc_id "
                                f"WHERE d.source = {literal(WEB_SOURCE)}").fetchone()[0]
                    for i in range(len(partitions))]
        scores = [s for s in smallest if s is not None]
        low, edges = _quality_edges(min(scores) if scores else None)
        figures = _Figures(store, low, edges, samples_per_stage)
        funnels, documents_total = {}, 0
        spill = Path(con.execute("SELECT current_setting('temp_directory')").fetchone()[0])
        spill.mkdir(parents=True, exist_ok=True)
        for index, (partition, query) in enumerate(zip(partitions, queries, strict=True)):
            stats = _manifest(store, DOCUMENTS, partition).extra.get("stats", {})
            n = scalar(con, f"SELECT count(*) FROM p{index}_documents")
            decided = _check_rules(con, partition)
            copies, missing = 1, 0
            batch_funnels = []
            for frame in _frames(con, index, n, query, spill):
                stage, reason = _attribute(frame)
                part = _Partition(partition, frame, stage, reason)
                copies = max(copies, pc.max(frame["copies"]).as_py() or 1)
                missing += frame["rule"].null_count
                batch_funnels.append(_funnel_rows(part, _ingest_row({}, 0)))
                figures.add(index, part)
            if copies > 1:
                raise ReportError(f"documents[{partition}]: a doc_id occurs twice in an "
                                  "annotation")
            if missing:
                raise ReportError(f"mix has no decision for {missing} of the {n} documents of "
                                  f"{partition}: the mix is stale; re-materialize it")
            if decided != n:
                raise ReportError(f"mix has {decided} decisions for {partition}, which has {n} "
                                  "documents: the mix is stale; re-materialize it")
            funnel = _sum_rows(batch_funnels)
            funnels[partition] = [dict(_ingest_row(stats, n), tokens_out=funnel[0]["tokens_out"]),
                                  *funnel[1:]]
            figures.add_ingest(stats.get("rejects", {}))
            documents_total += n
        mix_rows, kept = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE rule = ?) FROM mix", [SELECTED]).fetchall()[0]
        if documents_total != mix_rows:
            raise ReportError(f"mix[{recipe.name}] has {mix_rows} decisions but the recipe's "
                              "partitions hold a different number of documents: "
                              "re-materialize mix")
        clusters = _clusters(con, store, partitions, spill)
        domains = _domain_mix(con, store, partitions, recipe, spill)
        contamination = _contamination(con, store, partitions)
    total = _sum_rows(list(funnels.values()))
    shards = _shards_manifest(store, recipe.name)
    shares = PartitionLayout(store, MIX, recipe.name).read_table(name="shares").to_pylist()
    selected = total[-1]["documents_out"]
    if selected != kept:  # after takedowns: the mix's own `selected` counts before them
        raise ReportError(f"the funnel ends with {selected} documents but mix[{recipe.name}] "
                          f"selected {kept}")
    totals = shards.get("totals", {})
    return {
        "report_version": REPORT_VERSION,
        "recipe": recipe.name,
        "dataset_version": shards.get("version"),
        "mix_version": mix_manifest.data_version,
        "partitions": partitions,
        "stages": list(STAGES),
        "summary": {
            "records_tried": total[0]["documents_in"],
            "documents": total[0]["documents_out"],
            "documents_selected": selected,
            "document_tokens": total[0]["tokens_out"],
            "selected_tokens": total[-1]["tokens_out"],
            "mix_target_tokens": extra.get("total_tokens"),
            # exact (EOS included), after the takedowns: the shards hold the same count
            "mix_tokens": extra.get("delivered_tokens"),
            "occurrences": mix_manifest.rows,
            "shard_tokens": totals.get("tokens"),
            "shard_sequences": totals.get("sequences"),
            "padding_tokens": totals.get("padding_tokens"),
            "shards": len(shards.get("shards", [])),
            "token_counts": extra.get("token_counts"),
            "takedown_version": extra.get("takedown_version"),
            "taken_down_documents": extra.get("taken_down_documents", 0),
            "bytes_per_token": bytes_per_token,
        },
        "funnel": {"total": total, "partitions": funnels},
        "removals": figures.removal_rows(),
        "languages": figures.language_rows(partitions),
        "quality": figures.quality(recipe) | {"scorer": recipe.selection.quality_scorer,
                                              "scorers": scorers},
        "clusters": clusters,
        "duplicate_removals": figures.duplicate_rows(),
        "domains": domains,
        "contamination": contamination,
        "served_phases": _served(shards),
        "mixture": {
            "shares": shares,
            "tokens_by_source": shards.get("tokens_by_source", {}),
            "tokens_by_phase": shards.get("tokens_by_phase", {}),
            "tokens_by_licence": shards.get("tokens_by_licence", {}),
            "ran_out": extra.get("ran_out", []),
        },
        "samples": {"rejects": _rejects_sample(store, partitions, samples_per_stage),
                    **_samples(store, figures.sample_rows())},
    }


# --- Markdown (for Dagster metadata) ---------------------------------------------------------


def _n(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.4g}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _md_table(headers: Sequence[str], rows: Iterable[Sequence[Any]],
              right: Sequence[bool] | None = None) -> str:
    right = right or [False] + [True] * (len(headers) - 1)
    lines = ["| " + " | ".join(headers) + " |",
             "| " + " | ".join("---:" if r else "---" for r in right) + " |"]
    lines += ["| " + " | ".join(_n(v).replace("|", "\\|") for v in row) + " |" for row in rows]
    return "\n".join(lines)


def funnel_markdown(data: dict[str, Any], partition: str | None = None) -> str:
    rows = data["funnel"]["total"] if partition is None else data["funnel"]["partitions"][
        partition]
    return _md_table(["stage", "in", "dropped", "out", "tokens out", "flagged",
                      "kept by recipe"],
                     [(r["stage"], r["documents_in"], r["dropped"], r["documents_out"],
                       r["tokens_out"], r["flagged"], r["kept_by_recipe"]) for r in rows])


def removals_markdown(data: dict[str, Any]) -> str:
    return _md_table(["stage", "reason", "dropped", "flagged", "tokens dropped"],
                     [(r["stage"], r["reason"], r["dropped"], r["flagged"], r["tokens_dropped"])
                      for r in data["removals"]], [False, False, True, True, True])


def duplicates_markdown(data: dict[str, Any]) -> str:
    return _md_table(["cluster size", "documents removed", "tokens removed (est.)"],
                     [(r["bucket"], r["documents"], r["tokens"])
                      for r in data["duplicate_removals"]])


DOMAIN_HEADERS = ("domain", "top terms", "weight", "cap", "documents", "share before",
                  "selected", "share after", "tokens delivered", "token share",
                  "largest share of a source")


def _domain_cells(row: dict[str, Any]) -> list[Any]:
    cap = "–" if row["cap"] is None else f"{row['cap']:.1%}"
    return [row["domain"], ", ".join(row["terms"]) or "–", f"{row['weight']:g}", cap,
            row["documents"],
            f"{row['share_before']:.1%}", row["selected"], f"{row['share_after']:.1%}",
            row["tokens"], f"{row['token_share']:.1%}", f"{row['largest_source_share']:.1%}"]


def domains_markdown(data: dict[str, Any]) -> str:
    return _md_table(DOMAIN_HEADERS, [_domain_cells(r) for r in data["domains"]],
                     [True, False, *[True] * 9])


def served_phases_markdown(data: dict[str, Any]) -> str:
    return _md_table(["phase", "first sequence", "end sequence", "sequences", "tokens"],
                     [(r["phase"], r["first_sequence"], r["end_sequence"], r["sequences"],
                       r["tokens"]) for r in data["served_phases"]["phases"]])


def mixture_markdown(data: dict[str, Any]) -> str:
    return _md_table(
        ["phase", "source", "target share", "achieved share", "tokens (est.)", "epochs"],
        [(r["phase"], r["source"], f"{r['target_share']:.2%}", f"{r['achieved_share']:.2%}",
          r["achieved_tokens"], f"{r['epochs']:.2f}") for r in data["mixture"]["shares"]],
        [False, False, True, True, True, True])


# --- plots -----------------------------------------------------------------------------------


def _figure(width: float, height: float):  # noqa: ANN202 - a matplotlib Figure
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _png(figure, dpi: int = 100) -> bytes:  # noqa: ANN001
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    return buffer.getvalue()


def _plot_funnel(data: dict[str, Any]):  # noqa: ANN202 - a Figure
    rows = data["funnel"]["total"]
    figure = _figure(9, 5)
    documents, tokens = figure.subplots(1, 2, sharey=True)
    labels = ["records tried"] + [r["stage"] for r in rows]
    remaining = [rows[0]["documents_in"]] + [r["documents_out"] for r in rows]
    positions = np.arange(len(labels))[::-1]
    documents.barh(positions, remaining, color="#4c72b0")
    for y, value in zip(positions, remaining, strict=True):
        documents.text(value, y, f" {value:,}", va="center", fontsize=7)
    documents.set_yticks(positions, labels, fontsize=8)
    documents.set_title("documents remaining after each stage", fontsize=9)
    token_values = [0] + [r["tokens_out"] or 0 for r in rows]
    tokens.barh(positions, token_values, color="#dd8452")
    for y, value in zip(positions[1:], token_values[1:], strict=True):
        tokens.text(value, y, f" {value:,}", va="center", fontsize=7)
    tokens.set_title("estimated tokens remaining", fontsize=9)
    for axes in (documents, tokens):
        axes.margins(x=0.25)
        axes.tick_params(axis="x", labelsize=7)
    return figure


def _plot_removals(data: dict[str, Any]):  # noqa: ANN202 - a Figure
    rows = [r for r in data["removals"] if r["dropped"]][:25]
    figure = _figure(9, max(2.0, 0.28 * len(rows) + 1))
    axes = figure.subplots()
    labels = [f"{r['stage']}: {r['reason']}" for r in rows]
    positions = np.arange(len(rows))[::-1]
    axes.barh(positions, [r["dropped"] for r in rows], color="#c44e52")
    axes.set_yticks(positions, labels, fontsize=7)
    axes.set_title("documents removed per stage and reason (first failing stage)", fontsize=9)
    axes.tick_params(axis="x", labelsize=7)
    return figure


def _plot_languages(data: dict[str, Any]):  # noqa: ANN202 - a Figure
    rows = data["languages"]
    partitions = list(dict.fromkeys(r["partition"] for r in rows))
    totals = Counter()
    for r in rows:
        totals[r["language"]] += r["documents"]
    top = [lang for lang, _ in totals.most_common(8)]
    figure = _figure(9, 3.5)
    axes = figure.subplots()
    bottom = np.zeros(len(partitions))
    for language in [*top, "other"]:
        values = np.array([sum(r["documents"] for r in rows if r["partition"] == p and (
            r["language"] == language or (language == "other" and r["language"] not in top)))
            for p in partitions], np.float64)
        if values.any():
            axes.bar(partitions, values, bottom=bottom, label=language)
            bottom += values
    axes.set_title("documents per language and partition (fastText lid.176)", fontsize=9)
    axes.legend(fontsize=7, ncols=3)
    axes.tick_params(labelsize=7)
    return figure


def _plot_quality(data: dict[str, Any]):  # noqa: ANN202 - a Figure
    quality = data["quality"]
    edges = np.asarray(quality["bin_edges"])
    figure = _figure(9, 3.5)
    axes = figure.subplots()
    bottom = np.zeros(edges.size - 1)
    colours = {"above the cutoff": "#55a868", "below the cutoff": "#c44e52",
               "removed before the cutoff": "#8c8c8c"}
    for name, counts in quality["histogram"].items():
        values = np.asarray(counts, np.float64)
        axes.bar(edges[:-1], values, width=np.diff(edges), bottom=bottom, align="edge",
                 color=colours.get(name), edgecolor="white", label=name)
        bottom += values
    for language, cutoff in quality["cutoffs"].items():
        axes.axvline(cutoff, color="black", linestyle="--", linewidth=1)
        axes.text(cutoff, bottom.max() or 1, f" cutoff {language} {cutoff:.3f}", fontsize=7,
                  va="top")
    fraction = quality["top_fraction"]
    cut = f", recipe keeps the top {fraction:.0%} per language" if fraction else ", no cutoff"
    axes.set_title(f"web quality scores ({quality['scorer']}{cut})", fontsize=9)
    axes.set_xscale("log")
    axes.set_xlabel("P(high quality), log scale", fontsize=8)
    axes.legend(fontsize=7)
    axes.tick_params(labelsize=7)
    return figure


def _scorer_table(quality: dict[str, Any]) -> list[str]:
    """Every scorer's web scores side by side, in equal bins (the recipe cuts on one)."""
    scorers = quality["scorers"]
    if not scorers:
        return []
    return [f"<p>Web documents per score, by scorer (the recipe cuts on "
            f"{_e(quality['scorer'])}):</p>",
            _html_table(["score", *scorers], [
                [f"{i / SCORE_BINS:.1f}-{(i + 1) / SCORE_BINS:.1f}",
                 *(counts[i] for counts in scorers.values())] for i in range(SCORE_BINS)])]


def _plot_clusters(data: dict[str, Any]):  # noqa: ANN202 - a Figure
    clusters = data["clusters"]
    figure = _figure(9, 3.2)
    axes = figure.subplots()
    sizes = sorted({int(s) for c in clusters.values() for s in c["sizes"]})
    width = 0.8 / max(len(clusters), 1)
    positions = np.arange(len(sizes))
    for index, (asset, entry) in enumerate(clusters.items()):
        axes.bar(positions + index * width, [entry["sizes"].get(str(s), 0) for s in sizes],
                 width=width, label=f"{asset} ({entry['duplicates']:,} duplicates)")
    axes.set_xticks(positions + width * (len(clusters) - 1) / 2, [str(s) for s in sizes])
    axes.set_xlabel("cluster size (documents)", fontsize=8)
    axes.set_ylabel("clusters", fontsize=8)
    if sizes:
        axes.set_yscale("log")
    axes.set_title("duplicate cluster sizes", fontsize=9)
    axes.legend(fontsize=7)
    axes.tick_params(labelsize=7)
    return figure


def _plot_mixture(data: dict[str, Any]):  # noqa: ANN202 - a Figure
    shares = data["mixture"]["shares"]
    phases = list(dict.fromkeys(r["phase"] for r in shares))
    figure = _figure(9, 3.2)
    axes_list = figure.subplots(1, max(len(phases), 1), squeeze=False)[0]
    for axes, phase in zip(axes_list, phases, strict=False):
        rows = [r for r in shares if r["phase"] == phase]
        positions = np.arange(len(rows))
        axes.bar(positions - 0.2, [r["target_share"] for r in rows], 0.4, label="target",
                 color="#8172b3")
        axes.bar(positions + 0.2, [r["achieved_share"] for r in rows], 0.4, label="achieved",
                 color="#64b5cd")
        axes.set_xticks(positions, [r["source"] for r in rows])
        axes.set_title(f"phase {phase}: token share per source", fontsize=9)
        axes.set_ylim(0, 1)
        axes.tick_params(labelsize=7)
        axes.legend(fontsize=7)
    return figure


PLOTS = {"funnel": _plot_funnel, "removals": _plot_removals, "languages": _plot_languages,
         "quality": _plot_quality, "clusters": _plot_clusters, "mixture": _plot_mixture}


def render_plots(data: dict[str, Any], dpi: int = 100,
                 names: Iterable[str] = tuple(PLOTS)) -> dict[str, bytes]:
    """name -> PNG bytes of every plot (or of `names`)."""
    return {name: _png(PLOTS[name](data), dpi) for name in names}


def markdown_image(png: bytes, alt: str) -> str:
    """Markdown embedding a PNG as a data URI (the Dagster UI renders it in metadata)."""
    return f"![{alt}](data:image/png;base64,{base64.b64encode(png).decode('ascii')})"


# --- HTML ------------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2rem auto;
max-width:1150px;color:#222;padding:0 1rem}
h1{font-size:1.6rem}h2{font-size:1.25rem;border-bottom:1px solid #ddd;padding-bottom:.2rem;
margin-top:2.2rem}h3{font-size:1.05rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.85rem}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:right}
th{background:#f3f3f3}td.l,th.l{text-align:left}
img{max-width:100%;border:1px solid #eee}
.cards{display:flex;flex-wrap:wrap;gap:.8rem}.card{border:1px solid #ddd;border-radius:6px;
padding:.5rem .9rem;min-width:9rem}.card b{display:block;font-size:1.2rem}
.doc{border-left:3px solid #ccc;margin:.4rem 0;padding:.2rem .6rem;font-size:.85rem}
.kept{border-color:#55a868}.removed{border-color:#c44e52}.meta{color:#666;font-size:.78rem}
nav a{margin-right:.8rem}code{background:#f5f5f5;padding:0 .2rem}
"""


def _e(value: Any) -> str:
    return html.escape(_n(value) if not isinstance(value, str) else value)


def _html_table(headers: Sequence[str], rows: Iterable[Sequence[Any]],
                left: int = 1) -> str:
    head = "".join(f'<th class="{"l" if i < left else ""}">{html.escape(h)}</th>'
                   for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(f'<td class="{"l" if i < left else ""}">{_e(v)}</td>'
                                    for i, v in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _img(images: dict[str, bytes], name: str, alt: str) -> str:
    if name not in images:
        return ""
    encoded = base64.b64encode(images[name]).decode("ascii")
    return f'<p><img alt="{html.escape(alt)}" src="data:image/png;base64,{encoded}"></p>'


def _funnel_html(rows: list[dict[str, Any]]) -> str:
    return _html_table(["stage", "documents in", "dropped", "documents out", "tokens in",
                        "tokens dropped", "tokens out", "flagged", "kept by recipe"],
                       [[r[c] for c in FUNNEL_COLUMNS] for r in rows])


def _doc_html(item: dict[str, Any], kind: str) -> str:
    meta = " · ".join(html.escape(str(x)) for x in (item["doc_id"], item["partition"],
                                                     item.get("url") or "", item["reason"])
                      if x)
    return (f'<div class="doc {kind}"><div class="meta">{kind}: {meta}</div>'
            f"{html.escape(item['text']) or '<i>(empty)</i>'}</div>")


def render_html(data: dict[str, Any], images: dict[str, bytes]) -> str:
    """One self-contained page: inline CSS, plots as base64 PNG, no scripts, no links out."""
    s = data["summary"]
    cards = [("records tried", s["records_tried"]), ("documents", s["documents"]),
             ("selected", s["documents_selected"]),
             ("selected tokens, each document once (exact)", s["selected_tokens"]),
             ("occurrences", s["occurrences"]),
             ("tokens in the shards (exact, with repeats)", s["shard_tokens"]),
             ("shards", s["shards"])]
    if s["mix_tokens"] != s["shard_tokens"]:  # the mix's exact plan and the shards disagree
        cards.append(("tokens the mix planned (exact)", s["mix_tokens"]))
    if s.get("taken_down_documents"):
        cards.append(("taken down", s["taken_down_documents"]))
    out = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Funnel report: {html.escape(data['recipe'])}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>Funnel report: recipe <code>{html.escape(data['recipe'])}</code></h1>",
        f"<p>Dataset version <code>{_e(data['dataset_version'])}</code>, mix data version "
        f"<code>{_e(data['mix_version'])}</code>; partitions "
        f"{', '.join(f'<code>{html.escape(p)}</code>' for p in data['partitions'])}.</p>",
        "<nav>" + "".join(f'<a href="#{a}">{t}</a>' for a, t in (
            ("funnel", "Funnel"), ("removals", "Removals"), ("languages", "Languages"),
            ("quality", "Quality"), ("clusters", "Duplicates"), ("mixture", "Mixture"),
            ("phases", "Phase order"), ("samples", "Samples"))) + "</nav>",
        '<div class="cards">' + "".join(f"<div class='card'>{html.escape(k)}<b>{_e(v)}</b>"
                                        "</div>" for k, v in cards) + "</div>",
        '<h2 id="funnel">Funnel</h2>',
        "<p>Each document is attributed to the first stage that drops it: the per-snapshot "
        "verdicts under the pipeline's defaults, then the recipe's selection rules "
        "(<code>selection.*</code>); <i>edits</i> shows the tokens the text edits (C4 and "
        "boilerplate lines, PII placeholders) take out of the selected documents. "
        "<i>flagged</i>: documents the stage's verdict drops, counted independently; "
        "<i>kept by recipe</i>: flagged but selected by the recipe. The tokens of documents "
        "the recipe does not select are estimated from the text's bytes (extracted, then "
        "scrubbed after <i>edits</i>) and each source's bytes per token, measured on the "
        "selected documents "
        f"({html.escape(json.dumps({k: round(v, 3) for k, v in s['bytes_per_token'].items()}))}"
        "); the mix counts the selected documents' tokens exactly "
        f"({_e(s['token_counts'])}, with the recipe's tokenizer, EOS included) and the shards "
        f"hold {_e(s['shard_tokens'])} tokens "
        f"({_e(s['occurrences'])} occurrences with repeats, {_e(s['padding_tokens'])} padding "
        f"tokens, target {_e(s['mix_target_tokens'])}).</p>",
        _img(images, "funnel", "funnel plot"), "<h3>All partitions</h3>",
        _funnel_html(data["funnel"]["total"]),
    ]
    for partition, rows in data["funnel"]["partitions"].items():
        out += [f"<details><summary>Partition <code>{html.escape(partition)}</code>"
                "</summary>", _funnel_html(rows), "</details>"]
    out += ['<h2 id="removals">Removals per reason</h2>', _img(images, "removals", "removals"),
            _html_table(["stage", "reason", "dropped", "flagged", "tokens dropped"],
                        [[r["stage"], r["reason"], r["dropped"], r["flagged"],
                          r["tokens_dropped"]] for r in data["removals"]], left=2)]
    out += ['<h2 id="languages">Language mix</h2>', _img(images, "languages", "languages"),
            _html_table(["partition", "language", "documents", "selected", "selected tokens",
                         "heuristics drop rate"],
                        [[r["partition"], r["language"], r["documents"], r["selected"],
                          r["selected_tokens"], f"{r['heuristics_drop_rate']:.1%}"]
                         for r in data["languages"]], left=2)]
    quality = data["quality"]
    cutoff_rows = [[lang, f"{c:.4f}"] for lang, c in quality["cutoffs"].items()]
    out += ['<h2 id="quality">Quality scores</h2>',
            f"<p>{_e(quality['documents'])} web documents with a score. Recipe cutoff: "
            + (f"the top {quality['top_fraction']:.0%} per language of the web documents still "
               "in; the lowest kept score per language below."
               if quality["top_fraction"] else "none.")
            + (f" Phase cutoffs: {html.escape(json.dumps(quality['phase_top_fractions']))}."
               if quality["phase_top_fractions"] else "") + "</p>",
            _img(images, "quality", "quality histogram"),
            _html_table(["language", "cutoff score"], cutoff_rows) if cutoff_rows else "",
            *_scorer_table(quality)]
    out += ['<h2 id="clusters">Duplicate clusters</h2>', _img(images, "clusters", "clusters"),
            _html_table(["asset", "clusters", "duplicates", "largest", "sizes"],
                        [[a, c["clusters"], c["duplicates"], c["largest"],
                          ", ".join(f"{k}: {v}" for k, v in c["sizes"].items()) or "–"]
                         for a, c in data["clusters"].items()]),
            "<h3>Removed by the recipe's duplicate rule, per cluster size</h3>",
            "<p>The documents the mix drops as another member's duplicate, by the number of "
            "the recipe's documents in their duplicate group (its connected component over "
            "every dedup asset's clusters); tokens estimated from the extracted text as in the "
            "funnel.</p>",
            _html_table(["cluster size", "documents removed", "tokens removed (est.)"],
                        [[r["bucket"], r["documents"], r["tokens"]]
                         for r in data["duplicate_removals"]])]
    if data["domains"]:
        out += ['<h2 id="domains">Topic domains</h2>',
                "<p>Every document's topic domain (its nearest topic_model centroid), before "
                "the recipe's selection and after it; tokens are what the mix's occurrences "
                "deliver, repeats included. The recipe's weight multiplies a domain's "
                "documents in their source's pool; its cap bounds the domain's share of each "
                "source's tokens per phase.</p>",
                _html_table(DOMAIN_HEADERS, [_domain_cells(r) for r in data["domains"]], 2)]
    if data["contamination"]:
        out += ['<h2 id="contamination">Contamination</h2>',
                "<p>Per benchmark, what decontamination found in the recipe's partitions: eval "
                "items, the documents holding them, those the recipe dropped as contaminated "
                "and their tokens, those it kept, and the web domains most involved.</p>",
                _html_table(CONTAMINATION_HEADERS,
                            [_contamination_cells(r) for r in data["contamination"]], 1)]
    mixture = data["mixture"]
    out += ['<h2 id="mixture">Mixture</h2>', _img(images, "mixture", "mixture"),
            _html_table(["phase", "source", "weight", "target share", "achieved share",
                         "target tokens", "tokens (est.)", "documents", "occurrences",
                         "epochs", "ran out"],
                        [[r["phase"], r["source"], r["weight"], f"{r['target_share']:.2%}",
                          f"{r['achieved_share']:.2%}", r["target_tokens"],
                          r["achieved_tokens"], r["documents"], r["occurrences"],
                          f"{r['epochs']:.2f}", "yes" if r["ran_out"] else ""]
                         for r in mixture["shares"]], left=2),
            "<h3>Tokens in the shards</h3>",
            _html_table(["by", "key", "tokens"],
                        [[group.removeprefix("tokens_by_"), key, value]
                         for group in ("tokens_by_source", "tokens_by_phase",
                                       "tokens_by_licence")
                         for key, value in mixture[group].items()], left=2)]
    if mixture["ran_out"]:
        out.append("<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in mixture["ran_out"])
                   + "</ul>")
    served = data["served_phases"]
    out += ['<h2 id="phases">Phase order</h2>',
            "<p>The sequences in the order the loader serves them every epoch "
            f"(<code>shuffle: {_e(served['shuffle'])}</code>: "
            + ("each phase shuffled on its own, the phases in this order; a row naming two "
               "phases holds the sequences where one phase ends and the next begins"
               if served["shuffle"] != "global" else "every sequence shuffled together")
            + "). Tokens without padding, EOS included.</p>",
            _html_table(["phase", "first sequence", "end sequence", "sequences", "tokens"],
                        [[r["phase"], r["first_sequence"], r["end_sequence"], r["sequences"],
                          r["tokens"]] for r in served["phases"]])]
    out += ['<h2 id="samples">Sampled documents</h2>',
            "<p>A few documents per stage, truncated. Kept: the scrubbed text; removed: the "
            "extracted text with PII replaced by placeholders.</p>",
            "<h3>documents (rejected records)</h3>"]
    out += [f'<div class="doc removed"><div class="meta">{html.escape(r["partition"])} · '
            f'{html.escape(r["url"] or "")} · {html.escape(r["reason"])}</div>'
            f'{html.escape(r["message"] or "")}</div>' for r in data["samples"]["rejects"]]
    for stage in DOCUMENT_STAGES:
        picks = data["samples"][stage]
        out.append(f"<h3>{html.escape(stage)}</h3>")
        hidden = "<p class='meta'>taken-down documents are counted above; their text is " \
            "never shown</p>" if stage == SELECTION_PREFIX + TAKEDOWN else ""
        out += [_doc_html(item, "removed") for item in picks["removed"]] or [
            hidden or "<p class='meta'>nothing removed here</p>"]
        out += [_doc_html(item, "kept") for item in picks["kept"]]
    out.append(f"<p class='meta'>{html.escape(data['report_version'])}</p></body></html>")
    return "\n".join(out)


# --- all together ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Report:
    recipe: str
    data: dict[str, Any]
    html: str
    images: dict[str, bytes] = field(default_factory=dict)


def build_report(store: Store, recipe: RecipeConfig,
                 samples_per_stage: int = SAMPLES_PER_STAGE) -> Report:
    data = compute_report(store, recipe, samples_per_stage)
    images = render_plots(data)
    return Report(recipe.name, data, render_html(data, images), images)


_SAMPLE_LINE = re.compile(r'^<div class="doc (?:kept|removed)"><div class="meta">'
                          r'(?:kept|removed): ([^ <]+)')


def rewrite_stored_report(store: Store, json_key: str, doc_ids: set[str]) -> int:
    """Takes the sampled documents of `doc_ids` out of a stored report (`report.json`) and
    its HTML page (one line per sampled document, see `_doc_html`; a page that still names
    one of them afterwards is deleted rather than left with its text); returns how many
    samples went (0: nothing written)."""
    data = json.loads(store.read_bytes(json_key))
    removed = 0
    for stage, picks in data.get("samples", {}).items():
        if stage == "rejects":
            continue
        for kind, items in picks.items():
            kept = [item for item in items if item.get("doc_id") not in doc_ids]
            removed += len(items) - len(kept)
            picks[kind] = kept
    if not removed:
        return 0
    store.write_bytes(json_key, json.dumps(data, indent=1, sort_keys=True).encode())
    page_key = f"{json_key.rsplit('/', 1)[0]}/report.html"
    if store.exists(page_key):
        lines = [line for line in store.read_bytes(page_key).decode("utf-8").split("\n")
                 if not ((found := _SAMPLE_LINE.match(line))
                         and html.unescape(found.group(1)) in doc_ids)]
        page = "\n".join(lines)
        if any(html.escape(doc_id) in page for doc_id in doc_ids):
            store.delete(page_key)
        else:
            store.write_bytes(page_key, page.encode("utf-8"))
    return removed


def write_report(store: Store, report: Report) -> dict[str, str]:
    """Stores `reports/{recipe}/report.html`, `report.json` and one PNG per plot; returns the
    keys by name."""
    prefix = report_prefix(report.recipe)
    keys = {"html": report_key(report.recipe), "json": report_json_key(report.recipe)}
    for name, png in sorted(report.images.items()):
        keys[name] = f"{prefix}/{name}.png"
        store.write_bytes(keys[name], png)
    store.write_bytes(keys["json"], json.dumps(report.data, indent=1, sort_keys=True).encode())
    store.write_bytes(keys["html"], report.html.encode("utf-8"))
    return keys
