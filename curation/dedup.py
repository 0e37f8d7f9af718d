"""Deduplication kernels (no Dagster): exact-text and line hashes, boilerplate lines, duplicate
clusters by key or by MinHash LSH bands, the kept member of each cluster, and the incremental
cross-partition index.

Memory is bounded by configuration, not by corpus size (docs/architecture.md, "Scale"): grouping,
joining, ranking and connected components run in DuckDB over Arrow tables or Parquet files, in a
session whose `memory_limit` comes from the budget (`curation.duck`) and whose work folder takes
what DuckDB spills (its database file lives there too, so its tables are disk-backed). Only
signatures and keys are read, never text. Connected components (`curation.components`) run as
a numpy union-find only when the clustered documents fit a small share of the budget, else as
hooking rounds in DuckDB: memory does not grow with documents or edges. Each step has a `*_sql`
form that leaves its result as a table of the caller's session (the stages stream it to
storage); the Arrow-returning wrappers are for tests and small inputs.

Determinism (docs/architecture.md, "Determinism"): every cluster id is the smallest `doc_id` of its
cluster, outputs are sorted by `doc_id`, hot-bucket capping picks members by a content hash, so
results do not depend on input order, batch sizes, thread counts or which components path ran.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import quote

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import regex

from curation.duck import (
    DuckDBSettings,
    TableSource,
    copy_to_parquet,
    current_budget,
    duckdb_session,
    part_count,
    register_parts,
)
from curation.duck import ident as _ident
from curation.duck import literal as _literal
from curation.duck import register as _register
from curation.duck import scalar as _scalar
from curation.minhash import (
    ROW_BITS,
    SIGNATURE_COLUMN,
    MinHashSettings,
    band_column,
    band_hashes,
    row_agreement,
    signature_rows,
)
from curation.schema import WEB_SOURCE
from curation.star_components import (
    LABEL_SCHEMA,
    TaskPlacement,
    components_sql,
    exchange_components,
    on_tasks,
)
from curation.urls import canonical_url

# --- normalisation and hashes -----------------------------------------------------------------

_PUNCTUATION = regex.compile(r"\p{P}+")
_DIGIT = regex.compile(r"\d")


def normalise_text(text: str) -> str:
    """The form two documents share when they are exact duplicates for `exact_dedup`: NFKC (so
    full-width and compatibility forms match), lower-cased, every Unicode punctuation character
    (general category P*: `.,;:!?'"()[]{}-_/\\@#%&*` and their non-ASCII kin such as `«»“”—、。`)
    deleted, whitespace runs collapsed to one space and the ends stripped. Symbols (`$ + < = >`,
    emoji) and digits are kept: they change what a text says."""
    folded = unicodedata.normalize("NFKC", text).lower()
    return " ".join(_PUNCTUATION.sub("", folded).split())


def normalise_line(line: str) -> str:
    """`normalise_text` with every decimal digit replaced by 0 (as CCNet does for its line
    deduplication), so "© 2019 Acme" and "© 2023 Acme" are the same boilerplate line."""
    return _DIGIT.sub("0", normalise_text(line))


def string_hash(value: str) -> int:
    """64-bit blake2b of the UTF-8 bytes as an unsigned integer (`pa.uint64()`, the type of the
    MinHash band hashes, so every key in the cross index has one type). Stable across processes
    and machines, unlike `hash()`."""
    return int.from_bytes(hashlib.blake2b(value.encode(), digest_size=8).digest(), "little")


def text_hash(text: str) -> int:
    """The exact-duplicate key: `string_hash` of `normalise_text`."""
    return string_hash(normalise_text(text))


def url_hash(url: str) -> int:
    """The URL-duplicate key: `string_hash` of `canonical_url`."""
    return string_hash(canonical_url(url))


def _normalised_lines(text: str) -> Iterator[tuple[int, str]]:
    """(index in `text.splitlines()`, normalised line) for lines with something left."""
    for number, line in enumerate(text.splitlines()):
        normalised = normalise_line(line)
        if normalised:
            yield number, normalised


def line_hashes(text: str) -> list[tuple[int, int]]:
    """(line number, `string_hash(normalise_line(line))`) for every line of `text` that is not
    blank once normalised. Line numbers index `text.splitlines()`, as the C4 edits do."""
    return [(number, string_hash(line)) for number, line in _normalised_lines(text)]


LINE_HASH_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("line", pa.int32(), nullable=False),
        pa.field("line_hash", pa.uint64(), nullable=False),
        pa.field("chars", pa.int32(), nullable=False),
    ]
)


def line_hash_table(doc_ids: Iterable[str], texts: Iterable[str]) -> pa.Table:
    """The input of `frequent_lines` for a batch of documents (`LINE_HASH_SCHEMA`): one row per
    non-blank line, `chars` being the length of the normalised line."""
    columns: dict[str, list] = {name: [] for name in LINE_HASH_SCHEMA.names}
    for doc_id, text in zip(doc_ids, texts, strict=True):
        for number, line in _normalised_lines(text):
            columns["doc_id"].append(doc_id)
            columns["line"].append(number)
            columns["line_hash"].append(string_hash(line))
            columns["chars"].append(len(line))
    return pa.table(columns, schema=LINE_HASH_SCHEMA)


# --- boilerplate lines ------------------------------------------------------------------------


LINE_EDITS_ORDER = "doc_id, line"


@dataclass(frozen=True)
class LineEdits:
    """`edits`: `doc_id`, `line`, `line_hash`, one row per occurrence of a frequent line.
    `documents`: `doc_id`, `lines_removed`, `empty_after_edits`, one row per edited document.
    `frequent_lines`: how many distinct normalised lines were frequent."""

    edits: pa.Table
    documents: pa.Table
    frequent_lines: int


def frequent_lines_sql(con: duckdb.DuckDBPyConnection, source: str, *, max_documents: int = 6,
                       min_chars: int = 5) -> int:
    """Lines (`LINE_HASH_SCHEMA` rows of one partition, the relation `source`) whose normalised
    form occurs in more than `max_documents` distinct documents are removed, every occurrence
    (Llama 3: more than 6 in buckets of 30M documents; scale `max_documents` with the partition
    size). Lines shorter than `min_chars` normalised characters are never removed. A document
    is `empty_after_edits` when no line of at least `min_chars` survives: what is left is blank
    or only very short lines ("Home", "|"), which is no document. Creates the tables
    `line_edits` and `line_documents` (`LineEdits`, unordered) by GROUP BYs and a join in
    DuckDB; returns how many distinct lines were frequent."""
    con.execute(
        "CREATE TABLE frequent AS SELECT line_hash FROM"
        f" (SELECT DISTINCT doc_id, line_hash FROM {source} WHERE chars >= ?)"
        " GROUP BY line_hash HAVING count(*) > ?",
        [min_chars, max_documents],
    )
    con.execute(
        "CREATE TABLE marked AS SELECT s.doc_id, s.line, s.line_hash,"
        " f.line_hash IS NOT NULL AS removed"
        f" FROM {source} s LEFT JOIN frequent f ON s.line_hash = f.line_hash WHERE s.chars >= ?",
        [min_chars],
    )
    con.execute("CREATE TABLE line_edits AS SELECT doc_id, line, line_hash FROM marked"
                " WHERE removed")
    con.execute(
        "CREATE TABLE line_documents AS SELECT doc_id,"
        " count(*) FILTER (WHERE removed) AS lines_removed,"
        " bool_and(removed) AS empty_after_edits FROM marked GROUP BY doc_id"
        " HAVING bool_or(removed)"
    )
    con.execute("DROP TABLE marked")
    return _scalar(con, "SELECT count(*) FROM frequent")


def frequent_lines(
    lines: TableSource,
    *,
    max_documents: int = 6,
    min_chars: int = 5,
    settings: DuckDBSettings | None = None,
) -> LineEdits:
    """`frequent_lines_sql` over an Arrow table or Parquet files, sorted."""
    with duckdb_session(settings) as con:
        _register(con, "src", lines)
        frequent = frequent_lines_sql(con, "src", max_documents=max_documents,
                                      min_chars=min_chars)
        edits = con.sql(f"SELECT * FROM line_edits ORDER BY {LINE_EDITS_ORDER}").to_arrow_table()
        documents = con.sql("SELECT * FROM line_documents ORDER BY doc_id").to_arrow_table()
        return LineEdits(edits, documents, frequent)


# --- connected components -----------------------------------------------------------------------


def _components(con: duckdb.DuckDBPyConnection, edges: str, result: str,
                placement: TaskPlacement | None = None, repeated_edges: bool = False) -> int:
    """Table `result` (`doc_id`, `cluster_id` = the smallest doc_id, `cluster_size`) for every
    document in the relation `edges` (`doc_id`, `other_doc_id`), by
    `curation.components.connected_components_sql` (`repeated_edges`: see there), or as tasks
    where `placement` says (`curation.star_components.components_sql`). Returns its rounds."""
    con.execute("CREATE OR REPLACE TEMP VIEW _pairs AS"
                f" SELECT doc_id AS a, other_doc_id AS b FROM {edges}")
    rounds = components_sql(con, "_pairs", "_components", placement,
                            repeated_edges=repeated_edges)
    _label_clusters(con, "_components", result)
    con.execute("DROP TABLE _components")
    con.execute("DROP VIEW _pairs")
    return rounds


def _label_clusters(con: duckdb.DuckDBPyConnection, labels: str, result: str) -> None:
    """Table `result` (`doc_id`, `cluster_id`, `cluster_size`) from the relation `labels`
    (`node`, `root`: each node and the smallest node of its component)."""
    con.execute(f"CREATE OR REPLACE TABLE {result} AS SELECT node AS doc_id, root AS cluster_id,"
                f" count(*) OVER (PARTITION BY root) AS cluster_size FROM {labels}")


# --- clusters -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterStats:
    """`buckets`: keys shared by two or more documents (over all key columns); `hot_buckets`:
    those over the cap; `capped_members`: memberships the cap dropped; `edges`: star edges
    (before de-duplication: a pair sharing several bands counts once per band); `documents` and
    `clusters`: in clusters of size >= 2; `rounds`: rounds of the connected components (0: they
    fitted in memory, see `curation.components`; over the exchange, large-star/small-star
    pairs, see `curation.star_components`); `candidates`: candidate pairs a
    `Verification` compared, counted once per band bucket that holds them (0 without one)."""

    buckets: int = 0
    hot_buckets: int = 0
    capped_members: int = 0
    edges: int = 0
    documents: int = 0
    clusters: int = 0
    rounds: int = 0
    candidates: int = 0


CLUSTER_SCHEMA = pa.schema(
    [("doc_id", pa.string()), ("cluster_id", pa.string()), ("cluster_size", pa.int64())]
)


@dataclass(frozen=True)
class Clusters:
    """`table`: `doc_id`, `cluster_id` (the cluster's smallest doc_id), `cluster_size` (int64),
    one row per document in a cluster of size >= 2, sorted by `doc_id`."""

    table: pa.Table
    stats: ClusterStats


def _stats(con: duckdb.DuckDBPyConnection, result: str, **stats: int) -> ClusterStats:
    documents, clusters = con.sql(
        f"SELECT count(*), count(DISTINCT cluster_id) FROM {result}").fetchall()[0]
    return ClusterStats(documents=documents, clusters=clusters, **stats)


def _fetch(con: duckdb.DuckDBPyConnection, result: str, stats: ClusterStats) -> Clusters:
    table = con.sql(
        f"SELECT doc_id, cluster_id, cluster_size FROM {result} ORDER BY doc_id").to_arrow_table()
    return Clusters(table, stats)


def key_clusters_sql(con: duckdb.DuckDBPyConnection, source: str, key_column: str,
                     result: str) -> ClusterStats:
    """Table `result` (`doc_id`, `cluster_id`, `cluster_size`, unordered): documents of the
    relation `source` sharing a non-null `key_column` value (`text_hash`, `url_hash`...). Exact
    keys need no graph and no cap: the group is the cluster, however large (a million copies of
    one text are one cluster of true duplicates). One GROUP BY and one join in DuckDB."""
    key = _ident(key_column)
    con.execute(
        f"CREATE OR REPLACE TABLE groups AS SELECT {key} AS key, min(doc_id) AS cluster_id,"
        f" count(*) AS cluster_size FROM {source} WHERE {key} IS NOT NULL"
        f" GROUP BY {key} HAVING count(*) > 1"
    )
    con.execute(
        f"CREATE TABLE {result} AS SELECT s.doc_id, g.cluster_id, g.cluster_size"
        f" FROM {source} s JOIN groups g ON s.{key} = g.key"
    )
    return _stats(con, result, buckets=_scalar(con, "SELECT count(*) FROM groups"))


def cluster_by_key(
    table: TableSource, key_column: str, *, settings: DuckDBSettings | None = None
) -> Clusters:
    """`key_clusters_sql` over an Arrow table or Parquet files, sorted by `doc_id`."""
    with duckdb_session(settings) as con:
        _register(con, "src", table)
        return _fetch(con, "clusters", key_clusters_sql(con, "src", key_column, "clusters"))


def _bucket_edges(
    con: duckdb.DuckDBPyConnection, source: str, key_column: str, max_bucket_size: int
) -> tuple[int, int, int]:
    """Append to `edges` one star edge from each member of each bucket of `key_column` (two or
    more documents with the same value) to the bucket's smallest doc_id: n - 1 edges for n
    members, not n(n-1)/2 pairs. A bucket over `max_bucket_size` keeps `max_bucket_size`
    members, chosen by md5 of (key column, doc_id): deterministic, unbiased, and a different
    sample per band, so a large true duplicate family still connects through its other bands.
    Leaves `buckets` (key, n, center) and `hot_kept` (key, doc_id) for the cross index.
    Returns (buckets, hot buckets, memberships dropped)."""
    key, cap = _ident(key_column), int(max_bucket_size)
    con.execute(
        f"CREATE OR REPLACE TABLE buckets AS SELECT {key} AS key, count(*) AS n,"
        f" min(doc_id) AS center FROM {source} WHERE {key} IS NOT NULL"
        f" GROUP BY {key} HAVING count(*) > 1"
    )
    con.execute(
        f"INSERT INTO edges SELECT s.doc_id, b.center FROM {source} s JOIN buckets b"
        f" ON s.{key} = b.key WHERE b.n <= {cap} AND s.doc_id <> b.center"
    )
    con.execute(
        f"CREATE OR REPLACE TABLE hot_kept AS SELECT b.key, s.doc_id FROM {source} s"
        f" JOIN buckets b ON s.{key} = b.key WHERE b.n > {cap} QUALIFY row_number() OVER"
        " (PARTITION BY b.key ORDER BY md5(concat(?, s.doc_id)), s.doc_id) <= ?",
        [key_column, cap],
    )
    con.execute(
        "INSERT INTO edges SELECT doc_id, center FROM (SELECT doc_id,"
        " min(doc_id) OVER (PARTITION BY key) AS center FROM hot_kept) WHERE doc_id <> center"
    )
    counts = con.sql(
        f"SELECT count(*), count(*) FILTER (WHERE n > {cap}),"
        f" coalesce(sum(n - {cap}) FILTER (WHERE n > {cap}), 0) FROM buckets"
    ).fetchall()[0]
    return int(counts[0]), int(counts[1]), int(counts[2])


_BAND = re.compile(r"band_\d+")
EDGE_SCHEMA = pa.schema([("doc_id", pa.string()), ("other_doc_id", pa.string())])
BAND_ROWS_SCHEMA = pa.schema([("band", pa.string()), ("value", pa.uint64()),
                              ("doc_id", pa.string())])
"""Band hashes in long form, one row per (document, band): what a bucket of the exchange holds
(`band_rows_edges_sql`)."""


def bands_of(columns: Iterable[str]) -> list[str]:
    """The band hash columns (`band_00`...) among `columns`, in their order."""
    return [c for c in columns if _BAND.fullmatch(c)]


def _create_edges(con: duckdb.DuckDBPyConnection, source: str) -> None:
    con.execute(
        "CREATE OR REPLACE TABLE edges AS"
        f" SELECT doc_id, doc_id AS other_doc_id FROM {source} LIMIT 0"
    )


def _edge_stats(con: duckdb.DuckDBPyConnection,
                counts: Sequence[tuple[int, int, int]]) -> ClusterStats:
    buckets, hot, capped = (sum(count[i] for count in counts) for i in range(3))
    return ClusterStats(buckets=buckets, hot_buckets=hot, capped_members=capped,
                        edges=_scalar(con, "SELECT count(*) FROM edges"))


def band_rows_edges_sql(con: duckdb.DuckDBPyConnection, source: str,
                        max_bucket_size: int = 10_000) -> ClusterStats:
    """Table `edges` (`doc_id`, `other_doc_id`): the star edges of every band bucket of the
    relation `source` (`BAND_ROWS_SCHEMA`: band column name, value, doc_id; nulls ignored),
    exactly as `_bucket_edges` draws them from the wide form a band at a time, here for all
    bands in one pass: a bucket is a (band, value), and a hot one keeps the sample ordered by
    `md5(band name || doc_id)`, the same as there. Returns the counts (`buckets`,
    `hot_buckets`, `capped_members`, `edges`); a (band, value)'s whole bucket must be in
    `source` (an exchange bucket of (band, value) keys is)."""
    cap = int(max_bucket_size)
    con.execute(f"CREATE OR REPLACE TABLE band_buckets AS SELECT band, value, count(*) AS n,"
                f" min(doc_id) AS center FROM {source} WHERE value IS NOT NULL"
                " GROUP BY band, value HAVING count(*) > 1")
    con.execute(
        "CREATE OR REPLACE TABLE edges AS SELECT s.doc_id, b.center AS other_doc_id"
        f" FROM {source} s JOIN band_buckets b ON s.band = b.band AND s.value = b.value"
        f" WHERE b.n <= {cap} AND s.doc_id <> b.center")
    con.execute(
        "INSERT INTO edges SELECT doc_id, center FROM (SELECT doc_id, min(doc_id) OVER"
        " (PARTITION BY band, value) AS center FROM (SELECT s.band, s.value, s.doc_id"
        f" FROM {source} s JOIN band_buckets b ON s.band = b.band AND s.value = b.value"
        f" WHERE b.n > {cap} QUALIFY row_number() OVER (PARTITION BY s.band, s.value ORDER BY"
        f" md5(concat(s.band, s.doc_id)), s.doc_id) <= {cap})) WHERE doc_id <> center")
    counts = con.sql(
        f"SELECT count(*), count(*) FILTER (WHERE n > {cap}),"
        f" coalesce(sum(n - {cap}) FILTER (WHERE n > {cap}), 0) FROM band_buckets"
    ).fetchall()[0]
    con.execute("DROP TABLE band_buckets")
    return _edge_stats(con, [(int(counts[0]), int(counts[1]), int(counts[2]))])


@dataclass(frozen=True)
class Verification:
    """Candidate verification before connected components: the stored compact signature
    (`curation.minhash.SIGNATURE_COLUMN`) is re-banded into `bands` bands of `rows` rows (its
    first `bands * rows` rows; more bands of fewer rows than FineWeb's 14 x 8 make a pair at
    Jaccard 0.7 a candidate with probability 0.9999 instead of 0.5), every candidate pair's
    signatures are compared, and only pairs whose share of agreeing rows (the MinHash Jaccard
    estimate) is at least `threshold` become edges. Without it, the looser banding would chain
    unrelated documents through connected components. A band bucket pairs each member with
    its `window` smallest doc_ids (all pairs in a bucket of up to `window + 1`), so a bucket's
    work is at most `window` pairs a member."""

    bands: int = 28
    rows: int = 4
    threshold: float = 0.6
    seed: int = 1
    window: int = 32


SIGNATURE_ROWS_SCHEMA = pa.schema([("doc_id", pa.string()), ("signature", pa.binary())])
"""One document's compact signature (what verification joins to a candidate pair)."""
PAIR_SCHEMA = pa.schema([("doc_id", pa.string()), ("other_doc_id", pa.string())])
SIGNED_PAIR_SCHEMA = pa.schema([*PAIR_SCHEMA, pa.field("signature", pa.binary())])
"""A candidate pair with the signature of its `doc_id` (verification's second half)."""


def signature_table(signatures: pa.Table) -> pa.Table:
    """`doc_id` and the compact `signature` of a `minhash_signatures` table
    (`SIGNATURE_ROWS_SCHEMA`)."""
    return pa.table({"doc_id": signatures["doc_id"],
                     "signature": signatures[SIGNATURE_COLUMN].cast(pa.binary())},
                    schema=SIGNATURE_ROWS_SCHEMA)


def rebanded_rows(signatures: pa.Table, verification: Verification) -> pa.Table:
    """The band hashes of `signatures`' compact signatures (`doc_id`, `signature`) in the
    verification's shape, as long band rows (`BAND_ROWS_SCHEMA`)."""
    hashes = _rebanded_hashes(signatures, verification)
    doc_ids = signatures["doc_id"].combine_chunks()
    names = [band_column(b) for b in range(verification.bands)]
    band = pa.array(names, pa.string()).take(
        pa.array(np.repeat(np.arange(verification.bands), len(doc_ids))))
    return pa.table({
        "band": band,
        "value": pa.array(hashes.T.reshape(-1), pa.uint64()),
        "doc_id": pa.concat_arrays([doc_ids] * verification.bands),
    }, schema=BAND_ROWS_SCHEMA)


def rebanded_columns(signatures: pa.Table, verification: Verification) -> pa.Table:
    """`doc_id`, the verification's band hashes as `band_NN` columns and the compact
    `signature`: what `CrossIndex` indexes when it verifies its near-duplicate links."""
    hashes = _rebanded_hashes(signatures, verification)
    bands = {band_column(b): pa.array(hashes[:, b], pa.uint64())
             for b in range(verification.bands)}
    return pa.table({"doc_id": signatures["doc_id"], **bands,
                     SIGNATURE_COLUMN: signatures[SIGNATURE_COLUMN].cast(pa.binary())})


def _rebanded_hashes(signatures: pa.Table, verification: Verification) -> np.ndarray:
    """(documents, bands) band hashes of the compact signatures in the verification's shape."""
    column = signatures[SIGNATURE_COLUMN].combine_chunks()
    shape = MinHashSettings(bands=verification.bands, rows=verification.rows,
                            seed=verification.seed)
    matrix = _signature_matrix(column) if len(column) else \
        np.empty((0, shape.permutations), "<u2")  # a part with no documents
    if len(column) and shape.permutations > matrix.shape[1]:
        raise ValueError(f"{verification.bands} bands x {verification.rows} rows need "
                         f"{shape.permutations} signature rows; the signatures have "
                         f"{matrix.shape[1]}")
    return band_hashes(matrix[:, :shape.permutations].astype(np.uint64), shape)


def candidate_pairs_sql(con: duckdb.DuckDBPyConnection, source: str, max_bucket_size: int,
                        window: int) -> tuple[int, int, int, int]:
    """Table `pairs` (`doc_id` < `other_doc_id`, distinct) of the band buckets of `source`
    (`BAND_ROWS_SCHEMA`; a (band, value)'s whole bucket must be in it): a hot bucket is first
    capped to its `md5` sample as in `_bucket_edges`, then each member is paired with the
    bucket's `window` smallest doc_ids before it. Returns (buckets, hot buckets, memberships
    dropped, pairs counted once per band bucket: what does not depend on how band buckets are
    spread over exchange buckets)."""
    cap = int(max_bucket_size)
    con.execute(f"CREATE OR REPLACE TABLE band_buckets AS SELECT band, value, count(*) AS n"
                f" FROM {source} WHERE value IS NOT NULL GROUP BY band, value"
                " HAVING count(*) > 1")
    # The md5 sample is drawn in hot buckets only: a window over every member would sort
    # them all.
    con.execute(
        "CREATE OR REPLACE TABLE ranked AS SELECT band, value, doc_id, row_number() OVER"
        " (PARTITION BY band, value ORDER BY doc_id) AS rn FROM (SELECT s.band, s.value,"
        f" s.doc_id FROM {source} s JOIN band_buckets b ON s.band = b.band"
        " AND s.value = b.value WHERE b.n <= ? UNION ALL SELECT s.band, s.value, s.doc_id"
        f" FROM {source} s JOIN band_buckets b ON s.band = b.band AND s.value = b.value"
        " WHERE b.n > ? QUALIFY row_number() OVER (PARTITION BY s.band, s.value"
        " ORDER BY md5(concat(s.band, s.doc_id)), s.doc_id) <= ?)", [cap, cap, cap])
    # The `window` heads as the build side: a bucket of n members costs n * window matches,
    # not n squared.
    con.execute(
        "CREATE OR REPLACE TABLE band_pairs AS SELECT h.doc_id, m.doc_id AS other_doc_id"
        " FROM (SELECT * FROM ranked WHERE rn <= ?) h JOIN ranked m ON h.band = m.band"
        " AND h.value = m.value AND h.rn < m.rn", [int(window)])
    con.execute("CREATE OR REPLACE TABLE pairs AS SELECT DISTINCT * FROM band_pairs")
    counts = con.sql(
        f"SELECT count(*), count(*) FILTER (WHERE n > {cap}),"
        f" coalesce(sum(n - {cap}) FILTER (WHERE n > {cap}), 0),"
        " (SELECT count(*) FROM band_pairs) FROM band_buckets"
    ).fetchall()[0]
    for table in ("band_buckets", "ranked", "band_pairs"):
        con.execute(f"DROP TABLE {table}")
    return int(counts[0]), int(counts[1]), int(counts[2]), int(counts[3])


_VERIFY_BATCH = 65_536


def verify_pairs_sql(con: duckdb.DuckDBPyConnection, query: str, threshold: float) -> None:
    """Table `edges` (`doc_id`, `other_doc_id`): the rows of `query` (`doc_id`,
    `other_doc_id`, and their signatures `a` and `b`) whose signatures agree on at least
    `threshold` of their rows. Rows are read in batches and compared in numpy; the passing
    ones are staged in a Parquet file in the spill folder, so memory is one batch."""
    reader = con.sql(query).to_arrow_reader(_VERIFY_BATCH)
    with tempfile.TemporaryDirectory(prefix="verified-",
                                     dir=current_budget().spill_directory) as folder:
        path = Path(folder) / "edges.parquet"
        with pq.ParquetWriter(path, EDGE_SCHEMA) as writer:
            for batch in reader:
                a, b = (_signature_matrix(batch.column(name)) for name in ("a", "b"))
                keep = row_agreement(a, b) >= threshold if len(a) else np.zeros(0, bool)
                writer.write_table(pa.table({"doc_id": batch.column("doc_id"),
                                             "other_doc_id": batch.column("other_doc_id")},
                                            schema=EDGE_SCHEMA).filter(pa.array(keep)))
        con.execute(f"CREATE OR REPLACE TABLE edges AS SELECT * FROM"
                    f" read_parquet({_literal(str(path))})")


def _signature_matrix(column: pa.Array) -> np.ndarray:
    """A compact signature column (fixed-size, or variable-size as DuckDB returns BLOBs) as
    (n, permutations) uint16."""
    if not len(column):
        return np.empty((0, 0), dtype="<u2")
    width = len(column[0].as_py())
    return signature_rows(column.cast(pa.binary(width)), width * 8 // ROW_BITS)


def verified_band_rows_edges_sql(con: duckdb.DuckDBPyConnection, band_rows: str,
                                 signatures: str, verification: Verification,
                                 max_bucket_size: int = 10_000) -> ClusterStats:
    """Table `edges` (`doc_id`, `other_doc_id`): the candidate pairs of the band buckets of
    `band_rows` (`candidate_pairs_sql`) that pass verification against the relation
    `signatures` (`SIGNATURE_ROWS_SCHEMA`), all in one session. Returns the counts:
    `candidates`, the candidate pairs counted once per band bucket that holds them, and
    `edges`, the verified pairs. The stage runs the same steps over exchanges."""
    *counts, candidates = candidate_pairs_sql(con, band_rows, max_bucket_size,
                                              verification.window)
    verify_pairs_sql(con, f"SELECT p.doc_id, p.other_doc_id, a.signature AS a, b.signature"
                     f" AS b FROM pairs p JOIN {signatures} a ON p.doc_id = a.doc_id"
                     f" JOIN {signatures} b ON p.other_doc_id = b.doc_id",
                     verification.threshold)
    con.execute("DROP TABLE pairs")
    stats = _edge_stats(con, [(counts[0], counts[1], counts[2])])
    return ClusterStats(stats.buckets, stats.hot_buckets, stats.capped_members, stats.edges,
                        candidates=candidates)


def edge_clusters_sql(con: duckdb.DuckDBPyConnection, edges: str, result: str,
                      stats: ClusterStats) -> ClusterStats:
    """Table `result` (`doc_id`, `cluster_id`, `cluster_size`, unordered): the connected
    components of the relation `edges` (`doc_id`, `other_doc_id`: star edges, repeated once per
    band two documents share); returns `stats` (the edges' counts) with the clusters' and the
    components' rounds."""
    return _with_clusters(con, result, stats,
                          _components(con, edges, result, repeated_edges=True))


def stored_edge_clusters_sql(con: duckdb.DuckDBPyConnection, edges: Sequence[str],
                             result: str, stats: ClusterStats,
                             placement: TaskPlacement) -> ClusterStats:
    """`edge_clusters_sql` over edge objects (`EDGE_SCHEMA`) in `placement`'s store: the
    components in this session, or as tasks over the exchange where `placement` says
    (`curation.star_components.on_tasks`, sized by `stats.edges`), the objects read as they
    are."""
    store = placement.store
    if not on_tasks(placement.mode, stats.edges):
        register_parts(con, "_stored_edges", store, edges, schema=EDGE_SCHEMA)
        return edge_clusters_sql(con, "_stored_edges", result, stats)
    found = exchange_components(store, placement.prefix, edges, stats.edges, placement.workers)
    register_parts(con, "_stored_labels", store, found.labels, schema=LABEL_SCHEMA)
    _label_clusters(con, "_stored_labels", result)
    return _with_clusters(con, result, stats, found.rounds)


def _with_clusters(con: duckdb.DuckDBPyConnection, result: str, stats: ClusterStats,
                   rounds: int) -> ClusterStats:
    return _stats(con, result, buckets=stats.buckets, hot_buckets=stats.hot_buckets,
                  capped_members=stats.capped_members, edges=stats.edges, rounds=rounds,
                  candidates=stats.candidates)


def near_duplicate_clusters_sql(
    con: duckdb.DuckDBPyConnection,
    source: str,
    result: str,
    *,
    band_columns: Sequence[str] | None = None,
    max_bucket_size: int = 10_000,
    verification: Verification | None = None,
) -> ClusterStats:
    """Table `result` (`doc_id`, `cluster_id`, `cluster_size`, unordered): near-duplicate
    clusters from MinHash LSH bands.

    With `verification`, `source` needs `doc_id` and the compact `signature`: it is re-banded
    (`rebanded_rows`, in Python over the whole relation: this one-session form is for tests and
    small inputs, the stage runs it per exchange bucket), and only verified candidate pairs
    link documents (`verified_band_rows_edges_sql`). Without it, FineWeb's behaviour: the
    relation `source` holds `doc_id` and the band hashes (`band_00`... uint64, or
    `band_columns`). Two documents are linked when they agree on any
    whole band; clusters are the connected components (`curation.components`). Bands are
    grouped one at a time, so DuckDB holds one band's buckets at once.

    Hot buckets (over `max_bucket_size`, e.g. the band every near-empty page shares) are capped
    to a deterministic sample of `max_bucket_size` members (see `_bucket_edges`). Cost for
    recall: a member left out of a hot bucket is clustered only if another of its bands links it;
    in exchange one degenerate band value cannot chain unrelated documents into one giant
    cluster nor make the bucket's work unbounded. `stats` counts hot buckets and dropped
    memberships so a check can watch them."""
    if verification is not None:
        signatures = con.sql(f"SELECT doc_id, {SIGNATURE_COLUMN} FROM {source}").to_arrow_table()
        con.register("_band_rows", rebanded_rows(signatures, verification))
        con.register("_signatures", signature_table(signatures))
        stats = verified_band_rows_edges_sql(con, "_band_rows", "_signatures", verification,
                                             max_bucket_size)
        con.unregister("_band_rows")
        con.unregister("_signatures")
        return edge_clusters_sql(con, "edges", result, stats)
    columns = con.sql(f"SELECT * FROM {source} LIMIT 0").columns
    bands = list(band_columns) if band_columns else bands_of(columns)
    _create_edges(con, source)
    counts = [_bucket_edges(con, source, band, max_bucket_size) for band in bands]
    return edge_clusters_sql(con, "edges", result, _edge_stats(con, counts))


def cluster_near_duplicates(
    band_table: TableSource,
    *,
    band_columns: Sequence[str] | None = None,
    max_bucket_size: int = 10_000,
    verification: Verification | None = None,
    settings: DuckDBSettings | None = None,
) -> Clusters:
    """`near_duplicate_clusters_sql` over an Arrow table or Parquet files, sorted by
    `doc_id`."""
    with duckdb_session(settings) as con:
        _register(con, "src", band_table)
        stats = near_duplicate_clusters_sql(con, "src", "clusters", band_columns=band_columns,
                                            max_bucket_size=max_bucket_size,
                                            verification=verification)
        return _fetch(con, "clusters", stats)


# --- the kept member ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Ranking:
    """docs/architecture.md's default ranking of a cluster's members: curated sources
    (`source != "web"`) first, then the earliest snapshot, then `policy` (`longest`: most
    `text_chars`; `quality`: highest `quality_score`, missing last; `earliest`: nothing more),
    ties broken by the smallest `doc_id`. Snapshots follow `snapshot_order` when given (others
    after it), else their ids (`CC-MAIN-YYYY-WW` sorts by date); curated rows have none."""

    policy: Literal["longest", "quality", "earliest"] = "longest"
    snapshot_order: tuple[str, ...] = ()


_POLICY_ORDER = {
    "longest": "m.text_chars DESC NULLS LAST, ",
    "quality": "m.quality_score DESC NULLS LAST, ",
    "earliest": "",
}


def choose_kept_sql(con: duckdb.DuckDBPyConnection, members: str, result: str,
                    ranking: Ranking = Ranking()) -> None:
    """Table `result` (`cluster_id`, `doc_id`, `kept_doc_id`, `rank`, unordered) from the
    relation `members` (`cluster_id`, `doc_id`, `source`, `snapshot`, and `text_chars` or
    `quality_score` as the policy needs): the best-ranked member of each cluster and each
    member's rank (1 for the kept one). A window over clusters in DuckDB."""
    order = pa.table(
        {"snapshot": list(ranking.snapshot_order), "pos": range(len(ranking.snapshot_order))},
        schema=pa.schema([("snapshot", pa.string()), ("pos", pa.int64())]),
    )
    con.register("snapshot_order", order)
    window = (
        f"PARTITION BY m.cluster_id ORDER BY (m.source = {_literal(WEB_SOURCE)}),"
        " o.pos NULLS LAST, m.snapshot NULLS FIRST, "
        f"{_POLICY_ORDER[ranking.policy]}m.doc_id"
    )
    con.execute(
        f"CREATE TABLE {result} AS SELECT m.cluster_id, m.doc_id,"
        " first_value(m.doc_id) OVER w AS kept_doc_id, row_number() OVER w AS rank"
        f" FROM {members} m LEFT JOIN snapshot_order o ON m.snapshot = o.snapshot"
        f" WINDOW w AS ({window})"
    )
    con.unregister("snapshot_order")


def choose_kept(
    members: TableSource,
    ranking: Ranking = Ranking(),
    *,
    settings: DuckDBSettings | None = None,
) -> pa.Table:
    """`choose_kept_sql` over an Arrow table or Parquet files, sorted by cluster and rank. The
    mix applies the same ranking to the members that pass its selection."""
    with duckdb_session(settings) as con:
        _register(con, "members", members)
        choose_kept_sql(con, "members", "kept", ranking)
        return con.sql("SELECT * FROM kept ORDER BY cluster_id, rank").to_arrow_table()


# --- the cross-partition index ------------------------------------------------------------------

LINK_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("other_doc_id", pa.string(), nullable=False),
        pa.field("key_type", pa.string(), nullable=False),
    ]
)
KEY_TYPES = {"url_hash": "url", "text_hash": "text"}
KEY_RANGE_BYTES = 64
"""The sizing allowance for one new key of a range (the key, its doc_id and a hash table's
entry): an estimate, like `curation.components.ROW_BYTES`."""
KEY_RANGE_SHARE = 0.25
"""Of the session's limit, for one range's new keys: at a 1 GB budget (704 MB for DuckDB),
12.5M keys make 5 ranges by this rule."""
"""Key columns of `CrossIndex.add_partition`'s table and the `key_type` of their links; every
`band_NN` column gives `minhash` links."""


def _key_type(column: str) -> str | None:
    return "minhash" if _BAND.fullmatch(column) else KEY_TYPES.get(column)


class CrossIndex:
    """Duplicate links across partitions, built incrementally.

    Layout under `folder` (partition names are percent-encoded into file names):

        keys/{column}/{partition}.parquet   key (uint64), doc_id: the partition's keys for one
                                            column (url_hash, text_hash, band_00...), members
                                            dropped by the hot-bucket cap left out
        links/{partition}.parquet           doc_id, other_doc_id, key_type, cross_partition: the
                                            partition's star edges within itself, and its
                                            links to earlier partitions (cross_partition)
        signatures/{partition}.parquet      doc_id, signature: with `verification` only, what
                                            later partitions verify their links against
        partitions/{partition}.json         written last: the partition is complete

    `add_partition` reads the earlier partitions' key files (a DuckDB semi-join over Parquet:
    one scan of their key columns, no grouping or clustering of them) and writes only the new
    partition's files; nothing earlier is rewritten. Links are star edges: each new document
    to the smallest earlier document with the same key, and within the partition to the
    smallest member, so links grow linearly with documents. `clusters` is the union of every
    partition's links; whatever order partitions are added in, it equals clustering all of them
    at once (up to hot-bucket capping, applied per partition: a bucket hot only across
    partitions is not capped, each new member gets one link).

    With `verification`, the band columns are the verification's (`rebanded_columns`) and
    near-duplicate links are verified like `dedup_clusters`' edges: within the partition, the
    verified candidate pairs of its band buckets (`verified_band_rows_edges_sql`); across,
    each new document's candidates are the `window` smallest earlier documents of each band
    key it holds, and only pairs whose signatures agree on `threshold` of their rows link.
    Order independence then holds for the verified pairs up to that window.

    One writer at a time (like the catalog). A partition is added once: adding it again returns
    its stored links; a changed partition means rebuilding from it on. On S3 this would need:
    the key and link files written through the `Store` (`write_bytes` of a Parquet buffer is a
    single PUT, the manifest last), listing through `Store.list`, and DuckDB fed `pyarrow.dataset`
    datasets over `pyarrow.fs.S3FileSystem` instead of `read_parquet` paths (DuckDB installs no
    httpfs at run time); the work folder stays local.
    """

    def __init__(
        self,
        folder: str | Path,
        *,
        max_bucket_size: int = 10_000,
        settings: DuckDBSettings | None = None,
        verification: Verification | None = None,
    ) -> None:
        self.folder = Path(folder)
        self.max_bucket_size = max_bucket_size
        self.settings = settings
        self.verification = verification

    def _path(self, kind: str, partition: str, suffix: str = ".parquet") -> Path:
        return self.folder / kind / f"{quote(partition, safe='')}{suffix}"

    def partitions(self) -> list[str]:
        """Complete partitions, sorted."""
        manifests = sorted((self.folder / "partitions").glob("*.json"))
        return sorted(json.loads(path.read_text())["partition"] for path in manifests)

    def add_partition(self, partition: str, keys: TableSource) -> pa.Table:
        """Index `keys` (`doc_id` plus any of `url_hash`, `text_hash`, `band_NN`, uint64, nulls
        ignored) as `partition`; returns its links to earlier partitions (`LINK_SCHEMA`, sorted):
        `doc_id` in this partition, `other_doc_id` the smallest earlier document sharing a key."""
        self.index_partition(partition, keys)
        return self._cross_links(partition)

    def index_partition(self, partition: str, keys: TableSource) -> int:
        """`add_partition` without reading its links back (they may not fit in memory): returns
        how many links to earlier partitions it has."""
        earlier = self.partitions()
        if partition not in earlier:
            self._index(partition, keys, earlier)
        return pq.read_table(self._path("links", partition), columns=["cross_partition"],
                             filters=[("cross_partition", "=", True)]).num_rows

    def _index(self, partition: str, keys: TableSource, earlier: list[str]) -> None:
        with duckdb_session(self.settings) as con:
            columns = _register(con, "src", keys)
            _create_edges(con, "src")
            con.execute(
                "CREATE TABLE links (doc_id VARCHAR, other_doc_id VARCHAR, key_type VARCHAR,"
                " cross_partition BOOLEAN)"
            )
            bands = bands_of(columns) if self.verification else []
            if bands and SIGNATURE_COLUMN not in columns:
                raise ValueError(f"verified near-duplicate links need the compact"
                                 f" {SIGNATURE_COLUMN!r} column beside the band columns")
            con.execute("CREATE TABLE cross_candidates (doc_id VARCHAR, other_doc_id VARCHAR)")
            files = {}
            for column in filter(_key_type, columns):
                index_column = self._index_band_keys if column in bands else self._index_column
                files[column] = index_column(con, partition, column, earlier)
            if bands:
                self._verified_links(con, partition, bands, earlier)
            links = self._path("links", partition)
            copy_to_parquet(con, "SELECT DISTINCT * FROM links ORDER BY ALL", links)
        manifest = {"partition": partition, "keys": files, "earlier": earlier}
        _atomic_write(self._path("partitions", partition, ".json"), json.dumps(manifest, indent=1))

    def _index_column(
        self, con: duckdb.DuckDBPyConnection, partition: str, column: str, earlier: list[str]
    ) -> int:
        """Within-partition star edges and the key file for one column, then its links to the
        earlier partitions' key files. Returns the key file's row count."""
        key_type = _literal(str(_key_type(column)))
        con.execute("DELETE FROM edges")
        _bucket_edges(con, "src", column, self.max_bucket_size)
        con.execute(f"INSERT INTO links SELECT doc_id, other_doc_id, {key_type}, false FROM edges")
        key, cap = _ident(column), int(self.max_bucket_size)
        path = self._path(f"keys/{column}", partition)
        rows = copy_to_parquet(
            con,
            f"SELECT {key} AS key, doc_id FROM src WHERE {key} IS NOT NULL AND {key} NOT IN"
            f" (SELECT key FROM buckets WHERE n > {cap}) UNION ALL SELECT key, doc_id FROM hot_kept"
            " ORDER BY key, doc_id",
            path,
        )
        for new_rows, old_rows in self._ranges_with_earlier(con, column, path, rows, earlier):
            con.execute(f"INSERT INTO links SELECT n.doc_id, o.other, {key_type}, true FROM"
                        f" {new_rows} n JOIN (SELECT key, min(doc_id) AS other FROM {old_rows}"
                        " GROUP BY key) o ON n.key = o.key")
        return rows

    def _index_band_keys(self, con: duckdb.DuckDBPyConnection, partition: str, column: str,
                         earlier: list[str]) -> int:
        """The key file of one verified band column, and its candidates across partitions
        (table `cross_candidates`): each new member with the `window` smallest earlier members
        of its bucket. Returns the key file's row count."""
        key = _ident(column)
        path = self._path(f"keys/{column}", partition)
        rows = copy_to_parquet(con, f"SELECT {key} AS key, doc_id FROM src WHERE {key} IS NOT"
                               " NULL ORDER BY key, doc_id", path)
        for new_rows, old_rows in self._ranges_with_earlier(con, column, path, rows, earlier):
            con.execute(f"INSERT INTO cross_candidates SELECT n.doc_id, o.doc_id FROM {new_rows}"
                        f" n JOIN (SELECT key, doc_id FROM {old_rows} QUALIFY row_number() OVER"
                        " (PARTITION BY key ORDER BY doc_id) <= ?) o ON n.key = o.key",
                        [self.verification.window])
        return rows

    def _ranges_with_earlier(self, con: duckdb.DuckDBPyConnection, column: str, path: Path,
                             rows: int, earlier: list[str]) -> list[tuple[str, str]]:
        """Per key range (`_key_ranges`), two relations: the rows of the new key file at
        `path` (`rows` of them), and the earlier partitions' rows of the keys it holds; none
        when no earlier partition has a key file for `column`."""
        previous = [p for p in (self._path(f"keys/{column}", e) for e in earlier) if p.exists()]
        if not previous:
            return []
        new, old = _literal(str(path)), ", ".join(_literal(str(p)) for p in previous)
        return [(f"(SELECT * FROM read_parquet({new}) WHERE {within})",
                 f"(SELECT * FROM read_parquet([{old}]) WHERE {within} AND key IN"
                 f" (SELECT key FROM read_parquet({new}) WHERE {within}))")
                for within in _key_ranges(con, rows)]

    def _verified_links(self, con: duckdb.DuckDBPyConnection, partition: str,
                        bands: list[str], earlier: list[str]) -> None:
        """Verified near-duplicate links within the partition and to earlier ones, and the
        partition's signatures for later ones."""
        verification = self.verification
        con.execute("CREATE TABLE band_rows AS " + " UNION ALL ".join(
            f"SELECT {_literal(b)} AS band, {_ident(b)} AS value, doc_id FROM src" for b in bands))
        con.execute(f"CREATE TABLE signatures AS SELECT doc_id, {SIGNATURE_COLUMN} AS signature"
                    " FROM src")
        verified_band_rows_edges_sql(con, "band_rows", "signatures", verification,
                                     self.max_bucket_size)
        con.execute("INSERT INTO links SELECT doc_id, other_doc_id, 'minhash', false FROM edges")
        copy_to_parquet(con, "SELECT * FROM signatures ORDER BY doc_id",
                        self._path("signatures", partition))
        previous = [p for p in (self._path("signatures", e) for e in earlier) if p.exists()]
        if previous:
            old = ", ".join(_literal(str(p)) for p in previous)
            verify_pairs_sql(con, "SELECT c.doc_id, c.other_doc_id, a.signature AS a,"
                             " b.signature AS b FROM (SELECT DISTINCT * FROM cross_candidates) c"
                             " JOIN signatures a ON c.doc_id = a.doc_id JOIN"
                             f" read_parquet([{old}]) b ON c.other_doc_id = b.doc_id",
                             verification.threshold)
            con.execute("INSERT INTO links SELECT doc_id, other_doc_id, 'minhash', true"
                        " FROM edges")

    def _cross_links(self, partition: str) -> pa.Table:
        path = self._path("links", partition)
        table = pq.read_table(path, filters=[("cross_partition", "=", True)])
        return table.select(LINK_SCHEMA.names).cast(LINK_SCHEMA)

    def links(self) -> list[Path]:
        """Every complete partition's links file."""
        return [self._path("links", p) for p in self.partitions()]

    def clusters_sql(self, con: duckdb.DuckDBPyConnection, result: str,
                     placement: TaskPlacement | None = None) -> ClusterStats:
        """Table `result` (`doc_id`, `cluster_id`, `cluster_size`, unordered): connected
        components over every complete partition's links (within and across), in DuckDB or as
        tasks where `placement` says."""
        files = self.links()
        if not files:
            con.execute(f"CREATE TABLE {result} (doc_id VARCHAR, cluster_id VARCHAR,"
                        " cluster_size BIGINT)")
            return ClusterStats()
        _register(con, "links", files)
        edges = _scalar(con, "SELECT count(*) FROM links")
        rounds = _components(con, "links", result, placement)
        return _stats(con, result, edges=edges, rounds=rounds)

    def clusters(self) -> Clusters:
        """`clusters_sql`, sorted by `doc_id`."""
        with duckdb_session(self.settings) as con:
            return _fetch(con, "clusters", self.clusters_sql(con, "clusters"))


def _key_ranges(con: duckdb.DuckDBPyConnection, rows: int) -> list[str]:
    """Conditions on a uint64 `key` that split its values into equal ranges, enough that one
    range of `rows` new keys takes `KEY_RANGE_SHARE` of the session's limit: a partition's
    links to earlier partitions are joined a range at a time. The key files are sorted by key,
    so a range's statement reads only its row groups of each; and a range's new keys are few
    enough for DuckDB to push a Bloom filter of them into the scan of the earlier files, which
    it did not for 12.5M keys at 10^8 documents (each of 87.5M earlier rows then probed the
    join: 9.1 CPU s for one key column, 5.0 in ten ranges; benchmarks/results/scale.md)."""
    count = part_count(con, rows, KEY_RANGE_BYTES, KEY_RANGE_SHARE)
    starts = [index * (1 << 64) // count for index in range(count)]
    return [f"key >= {start}::UBIGINT" + (f" AND key < {end}::UBIGINT" if end else "")
            for start, end in zip(starts, [*starts[1:], None], strict=True)]


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)
