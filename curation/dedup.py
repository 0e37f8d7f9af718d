"""Deduplication kernels (no Dagster): exact-text and line hashes, boilerplate lines, duplicate
clusters by key or by MinHash LSH bands, the kept member of each cluster, and the incremental
cross-partition index.

Memory is bounded by configuration, not by corpus size (docs/architecture.md, "Scale"): grouping and
joining run in DuckDB over Arrow tables or Parquet files, with `DuckDBSettings.memory_limit` and
a work folder where DuckDB spills (its database file and temporary files live there, so its
tables are disk-backed). Only signatures and keys are read, never text. Connected components run
in numpy over dense integer ids of the documents that share at least one bucket, streaming edge
batches out of DuckDB: memory is O(clustered documents), not O(edges) or O(corpus).

Determinism (docs/architecture.md, "Determinism"): every cluster id is the smallest `doc_id` of its
cluster, outputs are sorted by `doc_id`, hot-bucket capping picks members by a content hash, so
results do not depend on input order, batch sizes or thread counts.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import quote

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import regex

from curation.schema import WEB_SOURCE
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


# --- DuckDB sessions ----------------------------------------------------------------------------

TableSource = pa.Table | str | Path | Sequence[str | Path]
"""An Arrow table, or one or more Parquet files read lazily by DuckDB."""


@dataclass(frozen=True)
class DuckDBSettings:
    """How much DuckDB may hold before it spills, with how many threads, and where it spills
    (None: the system temporary folder). Each call works in a fresh subfolder, removed after."""

    memory_limit: str = "2GB"
    threads: int = 2
    temp_directory: str | None = None


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@contextmanager
def duckdb_session(settings: DuckDBSettings) -> Iterator[duckdb.DuckDBPyConnection]:
    """A DuckDB connection whose database file and spill files live in a temporary folder."""
    with tempfile.TemporaryDirectory(prefix="dedup-", dir=settings.temp_directory) as folder:
        con = duckdb.connect(str(Path(folder) / "work.duckdb"))
        try:
            con.execute(f"SET memory_limit = {_literal(settings.memory_limit)}")
            con.execute(f"SET temp_directory = {_literal(str(Path(folder) / 'spill'))}")
            con.execute(f"SET threads = {int(settings.threads)}")
            # Results are sorted explicitly where order matters; without this DuckDB may have to
            # buffer rows to keep scan order.
            con.execute("SET preserve_insertion_order = false")
            yield con
        finally:
            con.close()


def _register(con: duckdb.DuckDBPyConnection, name: str, source: TableSource) -> list[str]:
    """Make `source` queryable as `name`; returns its column names."""
    if isinstance(source, pa.Table):
        con.register(name, source)
    else:
        paths = [source] if isinstance(source, str | Path) else list(source)
        files = ", ".join(_literal(str(path)) for path in paths)
        con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_parquet([{files}])")
    return con.sql(f"SELECT * FROM {name} LIMIT 0").columns


def _scalar(con: duckdb.DuckDBPyConnection, query: str) -> int:
    return int(con.sql(query).fetchall()[0][0] or 0)


# --- boilerplate lines ------------------------------------------------------------------------


@dataclass(frozen=True)
class LineEdits:
    """`edits`: `doc_id`, `line`, `line_hash`, one row per occurrence of a frequent line.
    `documents`: `doc_id`, `lines_removed`, `empty_after_edits`, one row per edited document.
    `frequent_lines`: how many distinct normalised lines were frequent."""

    edits: pa.Table
    documents: pa.Table
    frequent_lines: int


def frequent_lines(
    lines: TableSource,
    *,
    max_documents: int = 6,
    min_chars: int = 5,
    settings: DuckDBSettings = DuckDBSettings(),
) -> LineEdits:
    """Lines (`LINE_HASH_SCHEMA` rows of one partition) whose normalised form occurs in more
    than `max_documents` distinct documents are removed, every occurrence (Llama 3: more than 6
    in buckets of 30M documents; scale `max_documents` with the partition size). Lines shorter
    than `min_chars` normalised characters are never removed. A document is `empty_after_edits`
    when no line of at least `min_chars` survives: what is left is blank or only very short
    lines ("Home", "|"), which is no document."""
    with duckdb_session(settings) as con:
        _register(con, "src", lines)
        con.execute(
            "CREATE TABLE frequent AS SELECT line_hash FROM"
            " (SELECT DISTINCT doc_id, line_hash FROM src WHERE chars >= ?)"
            " GROUP BY line_hash HAVING count(*) > ?",
            [min_chars, max_documents],
        )
        con.execute(
            "CREATE TABLE marked AS SELECT s.doc_id, s.line, s.line_hash,"
            " f.line_hash IS NOT NULL AS removed"
            " FROM src s LEFT JOIN frequent f ON s.line_hash = f.line_hash WHERE s.chars >= ?",
            [min_chars],
        )
        edits = con.sql(
            "SELECT doc_id, line, line_hash FROM marked WHERE removed ORDER BY doc_id, line"
        ).to_arrow_table()
        documents = con.sql(
            "SELECT doc_id, count(*) FILTER (WHERE removed) AS lines_removed,"
            " bool_and(removed) AS empty_after_edits FROM marked GROUP BY doc_id"
            " HAVING bool_or(removed) ORDER BY doc_id"
        ).to_arrow_table()
        return LineEdits(edits, documents, _scalar(con, "SELECT count(*) FROM frequent"))


# --- connected components -----------------------------------------------------------------------


def _compress(parent: np.ndarray) -> None:
    """Pointer jumping (the vectorised form of path halving) until every node points at its
    root: O(n log depth)."""
    while True:
        grand = parent[parent]
        if np.array_equal(grand, parent):
            return
        parent[:] = grand


def _union(parent: np.ndarray, left: np.ndarray, right: np.ndarray) -> None:
    """Merge the components of each pair (`parent` compressed before and after). Each round
    hooks every larger root onto the smallest root it meets, so a root is always the smallest
    node of its tree (parents only decrease: no cycles) and the number of roots drops every
    round."""
    while left.size:
        a, b = parent[left], parent[right]
        differ = a != b
        a, b, left, right = a[differ], b[differ], left[differ], right[differ]
        np.minimum.at(parent, np.maximum(a, b), np.minimum(a, b))
        _compress(parent)


def connected_components(edges: Iterable[tuple[np.ndarray, np.ndarray]], nodes: int) -> np.ndarray:
    """Root of every node `0..nodes-1`, the smallest node of its component, from batches of
    (left, right) integer pairs. Why our own union-find: scipy's `connected_components` needs
    every edge in one sparse matrix (and scipy is no declared dependency), while this keeps
    only the parent array and one batch, whatever the number of edges."""
    parent = np.arange(nodes, dtype=np.int64)
    for left, right in edges:
        _union(parent, np.asarray(left, np.int64), np.asarray(right, np.int64))
    return parent


EDGE_BATCH = 1 << 21


def _components(con: duckdb.DuckDBPyConnection, edges: str) -> pa.Table:
    """`doc_id`, `cluster_id` (smallest doc_id), `cluster_size` for every document in the
    relation `edges` (`doc_id`, `other_doc_id`), sorted by `doc_id`. Dense ids follow `doc_id`
    order, so the smallest id of a component is its smallest doc_id."""
    con.execute(
        "CREATE OR REPLACE TABLE nodes AS SELECT doc_id,"
        " (row_number() OVER (ORDER BY doc_id) - 1)::BIGINT AS idx"
        f" FROM (SELECT doc_id FROM {edges} UNION SELECT other_doc_id FROM {edges})"
    )
    count = _scalar(con, "SELECT count(*) FROM nodes")
    reader = con.sql(
        f"SELECT a.idx, b.idx FROM {edges} e JOIN nodes a ON e.doc_id = a.doc_id"
        " JOIN nodes b ON e.other_doc_id = b.doc_id"
    ).to_arrow_reader(EDGE_BATCH)
    pairs = ((b.column(0).to_numpy(), b.column(1).to_numpy()) for b in reader)
    roots = connected_components(pairs, count)
    doc_ids = con.sql("SELECT doc_id FROM nodes ORDER BY idx").to_arrow_table()["doc_id"]
    doc_ids = doc_ids.combine_chunks()
    return pa.table(
        {
            "doc_id": doc_ids,
            "cluster_id": doc_ids.take(pa.array(roots)),
            "cluster_size": pa.array(np.bincount(roots, minlength=count)[roots], pa.int64()),
        }
    )


# --- clusters -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterStats:
    """`buckets`: keys shared by two or more documents (over all key columns); `hot_buckets`:
    those over the cap; `capped_members`: memberships the cap dropped; `edges`: star edges
    (before de-duplication: a pair sharing several bands counts once per band); `documents` and
    `clusters`: in clusters of size >= 2."""

    buckets: int = 0
    hot_buckets: int = 0
    capped_members: int = 0
    edges: int = 0
    documents: int = 0
    clusters: int = 0


CLUSTER_SCHEMA = pa.schema(
    [("doc_id", pa.string()), ("cluster_id", pa.string()), ("cluster_size", pa.int64())]
)


@dataclass(frozen=True)
class Clusters:
    """`table`: `doc_id`, `cluster_id` (the cluster's smallest doc_id), `cluster_size` (int64),
    one row per document in a cluster of size >= 2, sorted by `doc_id`."""

    table: pa.Table
    stats: ClusterStats


def _finish(table: pa.Table, **stats: int) -> Clusters:
    clusters = pc.count_distinct(table["cluster_id"]).as_py()
    return Clusters(table, ClusterStats(documents=table.num_rows, clusters=clusters, **stats))


def cluster_by_key(
    table: TableSource, key_column: str, *, settings: DuckDBSettings = DuckDBSettings()
) -> Clusters:
    """Documents sharing a non-null `key_column` value (`text_hash`, `url_hash`...). Exact keys
    need no graph and no cap: the group is the cluster, however large (a million copies of one
    text are one cluster of true duplicates)."""
    key = _ident(key_column)
    with duckdb_session(settings) as con:
        _register(con, "src", table)
        con.execute(
            f"CREATE TABLE groups AS SELECT {key} AS key, min(doc_id) AS cluster_id,"
            f" count(*) AS cluster_size FROM src WHERE {key} IS NOT NULL"
            f" GROUP BY {key} HAVING count(*) > 1"
        )
        result = con.sql(
            f"SELECT s.doc_id, g.cluster_id, g.cluster_size FROM src s JOIN groups g"
            f" ON s.{key} = g.key ORDER BY s.doc_id"
        ).to_arrow_table()
        return _finish(result, buckets=_scalar(con, "SELECT count(*) FROM groups"))


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


def _create_edges(con: duckdb.DuckDBPyConnection, source: str) -> None:
    con.execute(
        "CREATE OR REPLACE TABLE edges AS"
        f" SELECT doc_id, doc_id AS other_doc_id FROM {source} LIMIT 0"
    )


def cluster_near_duplicates(
    band_table: TableSource,
    *,
    band_columns: Sequence[str] | None = None,
    max_bucket_size: int = 10_000,
    settings: DuckDBSettings = DuckDBSettings(),
) -> Clusters:
    """Near-duplicate clusters from MinHash LSH bands: `band_table` holds `doc_id` and the band
    hashes (`band_00`... uint64, or `band_columns`). Two documents are linked when they agree on
    any whole band; clusters are the connected components. Bands are grouped one at a time, so
    DuckDB holds one band's buckets at once.

    Hot buckets (over `max_bucket_size`, e.g. the band every near-empty page shares) are capped
    to a deterministic sample of `max_bucket_size` members (see `_bucket_edges`). Cost for
    recall: a member left out of a hot bucket is clustered only if another of its bands links it;
    in exchange one degenerate band value cannot chain unrelated documents into one giant
    cluster nor make the bucket's work unbounded. `stats` counts hot buckets and dropped
    memberships so a check can watch them."""
    with duckdb_session(settings) as con:
        columns = _register(con, "src", band_table)
        bands = list(band_columns) if band_columns else [c for c in columns if _BAND.fullmatch(c)]
        _create_edges(con, "src")
        totals = np.zeros(3, np.int64)
        for band in bands:
            totals += _bucket_edges(con, "src", band, max_bucket_size)
        edges = _scalar(con, "SELECT count(*) FROM edges")
        buckets, hot, capped = (int(x) for x in totals)
        return _finish(
            _components(con, "edges"),
            buckets=buckets, hot_buckets=hot, capped_members=capped, edges=edges,
        )


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


def choose_kept(
    members: TableSource,
    ranking: Ranking = Ranking(),
    *,
    settings: DuckDBSettings = DuckDBSettings(),
) -> pa.Table:
    """Per member (`cluster_id`, `doc_id`, `source`, `snapshot`, and `text_chars` or
    `quality_score` as the policy needs): `cluster_id`, `doc_id`, `kept_doc_id` (the
    best-ranked member) and `rank` (1 for the kept one), sorted by cluster and rank. The mix
    applies the same ranking to the members that pass its selection."""
    order = pa.table(
        {"snapshot": list(ranking.snapshot_order), "pos": range(len(ranking.snapshot_order))},
        schema=pa.schema([("snapshot", pa.string()), ("pos", pa.int64())]),
    )
    with duckdb_session(settings) as con:
        _register(con, "members", members)
        con.register("snapshot_order", order)
        window = (
            f"PARTITION BY m.cluster_id ORDER BY (m.source = {_literal(WEB_SOURCE)}),"
            " o.pos NULLS LAST, m.snapshot NULLS FIRST, "
            f"{_POLICY_ORDER[ranking.policy]}m.doc_id"
        )
        return con.sql(
            "SELECT cluster_id, doc_id, kept_doc_id, rank FROM (SELECT m.cluster_id, m.doc_id,"
            f" first_value(m.doc_id) OVER w AS kept_doc_id, row_number() OVER w AS rank"
            " FROM members m LEFT JOIN snapshot_order o ON m.snapshot = o.snapshot"
            f" WINDOW w AS ({window})) ORDER BY cluster_id, rank"
        ).to_arrow_table()


# --- the cross-partition index ------------------------------------------------------------------

LINK_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("other_doc_id", pa.string(), nullable=False),
        pa.field("key_type", pa.string(), nullable=False),
    ]
)
KEY_TYPES = {"url_hash": "url", "text_hash": "text"}
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
        partitions/{partition}.json         written last: the partition is complete

    `add_partition` reads the earlier partitions' key files (a DuckDB semi-join over Parquet:
    one scan of their key columns, no grouping or clustering of them) and writes only the new
    partition's files; nothing earlier is rewritten. Links are star edges: each new document
    to the smallest earlier document with the same key, and within the partition to the
    smallest member, so links grow linearly with documents. `clusters` is the union of every
    partition's links; whatever order partitions are added in, it equals clustering all of them
    at once (up to hot-bucket capping, applied per partition: a bucket hot only across
    partitions is not capped, each new member gets one link).

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
        settings: DuckDBSettings = DuckDBSettings(),
    ) -> None:
        self.folder = Path(folder)
        self.max_bucket_size = max_bucket_size
        self.settings = settings

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
        if partition in self.partitions():
            return self._cross_links(partition)
        earlier = self.partitions()
        with duckdb_session(self.settings) as con:
            columns = _register(con, "src", keys)
            _create_edges(con, "src")
            con.execute(
                "CREATE TABLE links (doc_id VARCHAR, other_doc_id VARCHAR, key_type VARCHAR,"
                " cross_partition BOOLEAN)"
            )
            files = {}
            for column in filter(_key_type, columns):
                files[column] = self._index_column(con, partition, column, earlier)
            links = self._path("links", partition)
            self._write(con, "SELECT DISTINCT * FROM links ORDER BY ALL", links)
        manifest = {"partition": partition, "keys": files, "earlier": earlier}
        _atomic_write(self._path("partitions", partition, ".json"), json.dumps(manifest, indent=1))
        return self._cross_links(partition)

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
        rows = self._write(
            con,
            f"SELECT {key} AS key, doc_id FROM src WHERE {key} IS NOT NULL AND {key} NOT IN"
            f" (SELECT key FROM buckets WHERE n > {cap}) UNION ALL SELECT key, doc_id FROM hot_kept"
            " ORDER BY key, doc_id",
            path,
        )
        previous = [self._path(f"keys/{column}", p) for p in earlier]
        previous = [p for p in previous if p.exists()]
        if previous:
            old = ", ".join(_literal(str(p)) for p in previous)
            con.execute(
                f"INSERT INTO links SELECT n.doc_id, o.other, {key_type}, true"
                f" FROM read_parquet({_literal(str(path))}) n JOIN (SELECT key, min(doc_id)"
                f" AS other FROM read_parquet([{old}]) WHERE key IN"
                f" (SELECT key FROM read_parquet({_literal(str(path))})) GROUP BY key) o"
                " ON n.key = o.key"
            )
        return rows

    def _write(self, con: duckdb.DuckDBPyConnection, query: str, path: Path) -> int:
        """COPY `query` to Parquet (zstd) under a temporary name, then rename: a file exists
        under its final name only when whole."""
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.tmp")
        con.execute(
            f"COPY ({query}) TO {_literal(str(temporary))} (FORMAT parquet, COMPRESSION zstd)"
        )
        os.replace(temporary, path)
        return _scalar(con, f"SELECT count(*) FROM read_parquet({_literal(str(path))})")

    def _cross_links(self, partition: str) -> pa.Table:
        path = self._path("links", partition)
        table = pq.read_table(path, filters=[("cross_partition", "=", True)])
        return table.select(LINK_SCHEMA.names).cast(LINK_SCHEMA)

    def links(self) -> list[Path]:
        """Every complete partition's links file."""
        return [self._path("links", p) for p in self.partitions()]

    def clusters(self) -> Clusters:
        """Connected components over every complete partition's links (within and across)."""
        files = self.links()
        if not files:
            return Clusters(CLUSTER_SCHEMA.empty_table(), ClusterStats())
        with duckdb_session(self.settings) as con:
            _register(con, "links", files)
            edges = _scalar(con, "SELECT count(*) FROM links")
            return _finish(_components(con, "links"), edges=edges)


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)
