"""Record-level lineage: a DuckDB catalog over the decision, cluster, selection and span
Parquet files (docs/architecture.md, "Lineage and takedowns"). No Dagster here; the `catalog` asset
calls `refresh_catalog` and is the catalog's only writer.

**What the catalog holds.** Relations with fixed columns (a relation whose files do not exist
yet is created empty, with the same columns):

    documents      doc_id, partition, source, url, canonical_url, host, domain, snapshot,
                   warc_file, warc_offset, fetched_at, charset, html_bytes, licence (never text);
                   documents a takedown purge took out of `documents` are kept from
                   `takedowns/purged/` (no text there either), so a URL look-up still finds the
                   dataset versions on disk that hold them
    decisions      asset, partition, doc_id, stage, verdict, reason, value, detail, kept_doc_id
                   (every asset's `decisions` side table except the mix's)
    rejects        asset, partition, stage, url, warc_file, warc_offset, reason, message
    clusters       asset, partition, doc_id, cluster_id, cluster_size, kept_doc_id, keep
                   (url_dedup, exact_dedup, dedup_clusters, cross_dedup)
    occurrences    recipe, mix_version, doc_id, partition, source, licence, phase, occurrence,
                   est_tokens (the mix's main table)
    selections     recipe, dataset_version, mix_version, doc_id, partition, recipe_id, kept,
                   rule, kept_doc_id (the mix's `decisions`; `dataset_version` is the version
                   `shards[recipe]` currently points at, `recipe_id` the mix's own column)
    spans          dataset_version, recipe, current, seq_len, shard, sequence, start, end,
                   shard_token_start, shard_token_end, doc_id, occurrence, phase
    partitions     asset, partition, version, data_version, rows, tables, manifest_key
    dataset_versions, shard_files, takedown_entries, tombstones, catalog_info

**Views or tables.** For a `LocalStore` the big relations are VIEWS over the Parquet files,
listed from the manifests (`read_parquet([...])`, complete partitions only: those with a
`_manifest.json`; dataset versions only with their `manifest.json`), so nothing is copied and no
text is read. DuckDB cannot install `httpfs` here (no extension is installed at run time), so for
any other store (S3) the same relations are TABLES, filled through pyarrow: with a
`pyarrow.fs` filesystem (passed in, or made from the S3 store's boto3 client) only the metadata
columns are fetched (`curation.columns`); otherwise whole objects are read through the `Store`
and the text column is dropped before DuckDB sees it.

**Lookup tables.** Point look-ups over views scan every file, so `refresh_catalog` also
materialises sorted copies of the metadata (never text) for the look-up API: `lookup_documents`
(sorted by doc_id, an ART index on canonical_url), `lookup_decisions`,
`lookup_selections`, `lookup_spans` (sorted by doc_id: DuckDB's zone maps find a doc_id in a few
row groups) and `lookup_rejects`. With `lookups=False` these are views over the relations (a
smaller file, slower look-ups). Canonical URLs cost about 8 us each in Python, so they are cached
per documents partition: a refresh reuses the previous catalog's rows of every partition whose
data version is unchanged.

**Refresh** builds a new file beside `catalog_path` and renames it over the old one, so a
reader never sees a half-built catalog (readers holding the old file keep reading it).
Its memory is bounded by the budget (`curation.duck.current_budget()`: DuckDB's memory limit,
threads and spill folder), not by the store: DuckDB builds, sorts and indexes every relation,
spilling beyond its limit, and Python holds one stored part at a time.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from curation.columns import ColumnReader, dataset_manifests, manifest_keys
from curation.duck import current_budget
from curation.graph import CATALOG_SOURCES, CLUSTER_ASSETS, CROSS_DEDUP, DOCUMENTS, MIX, SHARDS
from curation.partition import Manifest
from curation.storage import Store, read_parquet
from curation.takedowns import (
    PURGED,
    canonical_domain,
    current_takedowns,
    hosts_of,
    load_tombstones,
)
from curation.urls import canonical_url

FORMAT = "corpus-catalog/1"

Columns = list[tuple[str, str]]
DOCUMENT_COLUMNS: Columns = [
    ("doc_id", "VARCHAR"), ("source", "VARCHAR"), ("url", "VARCHAR"), ("domain", "VARCHAR"),
    ("snapshot", "VARCHAR"), ("warc_file", "VARCHAR"), ("warc_offset", "BIGINT"),
    ("fetched_at", "TIMESTAMPTZ"), ("charset", "VARCHAR"), ("html_bytes", "BIGINT"),
    ("licence", "VARCHAR"),
]
DECISION_COLUMNS: Columns = [
    ("doc_id", "VARCHAR"), ("stage", "VARCHAR"), ("verdict", "VARCHAR"), ("reason", "VARCHAR"),
    ("value", "DOUBLE"), ("detail", "VARCHAR"), ("kept_doc_id", "VARCHAR"),
]
REJECT_COLUMNS: Columns = [
    ("stage", "VARCHAR"), ("url", "VARCHAR"), ("warc_file", "VARCHAR"),
    ("warc_offset", "BIGINT"), ("reason", "VARCHAR"), ("message", "VARCHAR"),
]
CLUSTER_COLUMNS: Columns = [
    ("doc_id", "VARCHAR"), ("cluster_id", "VARCHAR"), ("cluster_size", "BIGINT"),
    ("kept_doc_id", "VARCHAR"), ("keep", "BOOLEAN"),
]
OCCURRENCE_COLUMNS: Columns = [
    ("doc_id", "VARCHAR"), ("partition", "VARCHAR"), ("source", "VARCHAR"),
    ("licence", "VARCHAR"), ("phase", "VARCHAR"), ("occurrence", "BIGINT"),
    ("est_tokens", "BIGINT"),
]
# The mix's own `recipe` column is renamed `recipe_id`: `recipe` is the partition key.
SELECTION_COLUMNS: Columns = [
    ("doc_id", "VARCHAR"), ("partition", "VARCHAR"), ("recipe", "VARCHAR"),
    ("kept", "BOOLEAN"), ("rule", "VARCHAR"), ("kept_doc_id", "VARCHAR"),
]
SPAN_COLUMNS: Columns = [
    ("shard", "INTEGER"), ("sequence", "INTEGER"), ("start", "INTEGER"), ("end", "INTEGER"),
    ("doc_id", "VARCHAR"), ("occurrence", "BIGINT"), ("phase", "VARCHAR"),
]
RENAMES = {"selections": {"recipe": "recipe_id"}}


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# --- reading Parquet from the store ------------------------------------------------------------


# --- manifests -------------------------------------------------------------------------------


def read_manifests(store: Store, assets: Iterable[str] = CATALOG_SOURCES
                   ) -> list[tuple[str, Manifest]]:
    """`(manifest_key, manifest)` of every complete partition of `assets`."""
    found = []
    for asset in assets:
        for key in manifest_keys(store, asset):
            manifest = Manifest.from_json(store.read_bytes(key).decode())
            if manifest.asset == asset:
                found.append((key, manifest))
    return found


@dataclass(frozen=True)
class _Group:
    """Files read together, with constant columns (asset, partition, version...) and extra
    computed columns."""

    keys: list[str]
    consts: list[tuple[str, Any, str]]
    extras: list[str] = field(default_factory=list)


# --- the summary -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CatalogSummary:
    path: str
    mode: str  # "views" (local store) or "tables" (S3 and other stores)
    lookups: bool
    rows: dict[str, int]
    partitions: dict[str, int]  # asset -> complete partitions
    dataset_versions: list[str]
    empty: list[str]  # relations created empty: no files yet
    canonical_reused: list[str]  # documents partitions whose canonical URLs were reused
    canonical_computed: list[str]
    takedown_version: str
    seconds: float
    bytes: int


# --- refresh -----------------------------------------------------------------------------------


class _Builder:
    def __init__(self, con: duckdb.DuckDBPyConnection, reader: ColumnReader) -> None:
        self.con = con
        self.reader = reader
        self.empty: list[str] = []
        self.batch = 0

    @property
    def views(self) -> bool:
        return self.reader.local

    def _select(self, source: str, available: set[str], group: _Group, columns: Columns,
                renames: dict[str, str]) -> str:
        exprs = [f"{_literal(value)}::{kind} AS {_ident(name)}"
                 for name, value, kind in group.consts]
        for name, kind in columns:
            out = _ident(renames.get(name, name))
            exprs.append(f"CAST({_ident(name)} AS {kind}) AS {out}" if name in available
                         else f"NULL::{kind} AS {out}")
        exprs += group.extras
        return f"SELECT {', '.join(exprs)} FROM {source}"

    @staticmethod
    def _empty(consts: Columns, columns: Columns, extras: Columns,
               renames: dict[str, str]) -> str:
        """No rows, the relation's columns (constant ones, file ones, computed ones)."""
        exprs = [f"NULL::{kind} AS {_ident(name)}" for name, kind in consts]
        exprs += [f"NULL::{kind} AS {_ident(renames.get(name, name))}" for name, kind in columns]
        exprs += [f"NULL::{kind} AS {_ident(name)}" for name, kind in extras]
        return f"SELECT {', '.join(exprs)} WHERE FALSE"

    def relation(self, name: str, groups: list[_Group], columns: Columns,
                 consts: Columns, order: str | None = None,
                 extras: Sequence[tuple[str, str]] = ()) -> None:
        """A view over the groups' Parquet files (local), or a table filled through Arrow.
        `consts` and `extras` name the groups' constant and computed columns (for the empty
        relation)."""
        renames = RENAMES.get(name, {})
        wanted = [column for column, _ in columns]
        if not groups:
            self.empty.append(name)
            kind = "VIEW" if self.views else "TABLE"
            self.con.execute(f"CREATE OR REPLACE {kind} {name} AS "
                             f"{self._empty(consts, columns, list(extras), renames)}")
            return
        if self.views:
            selects = []
            for group in groups:
                available: set[str] = set()
                for key in group.keys:
                    available.update(self.reader.names(key))
                files = ", ".join(_literal(self.reader.path(key)) for key in group.keys)
                source = f"read_parquet([{files}], union_by_name = true)"
                selects.append(self._select(source, available, group, columns, renames))
            self.con.execute(f"CREATE OR REPLACE VIEW {name} AS " + "\nUNION ALL\n".join(selects))
            return
        raw = f"_raw_{name}"
        self.con.execute(f"CREATE OR REPLACE TABLE {raw} AS "
                         f"{self._empty(consts, columns, list(extras), renames)}")
        for group in groups:
            for key in group.keys:  # one part in memory at a time
                table = self.reader.read(key, wanted)
                self.batch += 1
                batch = f"_batch_{self.batch}"
                self.con.register(batch, table)
                self.con.execute(f"INSERT INTO {raw} " + self._select(
                    batch, set(table.column_names), group, columns, renames))
                self.con.unregister(batch)
        ordering = f" ORDER BY {order}" if order else ""
        self.con.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM {raw}{ordering}")
        self.con.execute(f"DROP TABLE {raw}")


def _table(con: duckdb.DuckDBPyConnection, name: str, table: pa.Table) -> None:
    con.register("_arrow", table)
    con.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM _arrow")
    con.unregister("_arrow")


def _canonical(urls: pa.ChunkedArray | pa.Array) -> pa.Array:
    return pa.array([canonical_url(url) if url is not None else None
                     for url in urls.to_pylist()], pa.string())


URL_CACHE_SCHEMA = pa.schema([("partition", pa.string()), ("doc_id", pa.string()),
                              ("canonical_url", pa.string()), ("host", pa.string())])
REJECT_INDEX_COLUMNS: Columns = [("asset", "VARCHAR"), ("partition", "VARCHAR"),
                                 *REJECT_COLUMNS, ("canonical_url", "VARCHAR"),
                                 ("host", "VARCHAR")]


def _previous(con: duckdb.DuckDBPyConnection, path: Path) -> dict[tuple[str, str], str]:
    """Attaches the previous catalog (read-only) and returns its partitions' data versions,
    or {} when there is none usable."""
    if not path.exists():
        return {}
    try:
        con.execute(f"ATTACH {_literal(str(path))} AS old (READ_ONLY)")
        info = dict(con.execute("SELECT key, value FROM old.catalog_info").fetchall())
        if info.get("format") != FORMAT:
            return {}
        rows = con.execute("SELECT asset, partition, data_version FROM old.partitions").fetchall()
        return {(asset, partition): version for asset, partition, version in rows}
    except duckdb.Error:
        return {}


def _build_caches(con: duckdb.DuckDBPyConnection, reader: ColumnReader,
                  manifests: list[tuple[str, Manifest]],
                  previous: dict[tuple[str, str], str]) -> tuple[list[str], list[str]]:
    """`url_cache` (canonical URL and host of every document) and `reject_index` (every reject
    with its canonical URL), reused per partition when its data version is unchanged."""
    cache_columns = ", ".join(f"{name} VARCHAR" for name in URL_CACHE_SCHEMA.names)
    con.execute(f"CREATE TABLE url_cache ({cache_columns})")
    columns = ", ".join(f"{_ident(n)} {t}" for n, t in REJECT_INDEX_COLUMNS)
    con.execute(f"CREATE TABLE reject_index ({columns})")
    reused, computed = [], []
    for _, manifest in manifests:
        same = previous.get((manifest.asset, manifest.partition)) == manifest.data_version
        if manifest.asset == DOCUMENTS:
            if same:
                con.execute("INSERT INTO url_cache SELECT * FROM old.url_cache WHERE partition = ?",
                            [manifest.partition])
                reused.append(manifest.partition)
            else:
                for part in manifest.parts:  # one part's URLs in memory at a time
                    _insert_urls(con, reader.read(part.key, ["doc_id", "url"]),
                                 manifest.partition)
                computed.append(manifest.partition)
        rejects = manifest.tables.get("rejects", [])
        if not rejects:
            continue
        if same:
            con.execute("INSERT INTO reject_index SELECT * FROM old.reject_index "
                        "WHERE asset = ? AND partition = ?", [manifest.asset, manifest.partition])
            continue
        for part in rejects:
            table = reader.read(part.key, [name for name, _ in REJECT_COLUMNS])
            if not table.num_rows:
                continue
            url = table["url"] if "url" in table.column_names else pa.nulls(table.num_rows,
                                                                             pa.string())
            table = table.append_column("canonical_url", _canonical(url))
            table = table.append_column("host", hosts_of(url))
            con.register("_rejects", table)
            present = set(table.column_names)
            exprs = [_literal(manifest.asset), _literal(manifest.partition)] + [
                f"CAST({_ident(n)} AS {t})" if n in present else f"NULL::{t}"
                for n, t in REJECT_INDEX_COLUMNS[2:]]
            con.execute(f"INSERT INTO reject_index SELECT {', '.join(exprs)} FROM _rejects")
            con.unregister("_rejects")
    return reused, computed


def _purged_files(store: Store, reader: ColumnReader) -> list[tuple[str, str]]:
    """`(key, partition)` of every purged-documents file (`curation.takedowns.purge`)."""
    found = []
    for key in store.list(PURGED):
        if key.endswith(".parquet"):
            partition = reader.read(key, ["partition"])["partition"]
            if len(partition):
                found.append((key, partition[0].as_py()))
    return found


def _insert_urls(con: duckdb.DuckDBPyConnection, rows: pa.Table, partition: str,
                 where: str = "") -> None:
    """Appends the canonical URL and host of `rows` (doc_id, url) to `url_cache`."""
    if not rows.num_rows:
        return
    con.register("_urls", pa.table({
        "partition": pa.array([partition] * rows.num_rows, pa.string()),
        "doc_id": rows["doc_id"], "canonical_url": _canonical(rows["url"]),
        "host": hosts_of(rows["url"])}, schema=URL_CACHE_SCHEMA))
    con.execute(f"INSERT INTO url_cache SELECT * FROM _urls u{where}")
    con.unregister("_urls")


def _cache_purged_urls(con: duckdb.DuckDBPyConnection, reader: ColumnReader,
                       purged: list[tuple[str, str]]) -> None:
    """Canonical URLs and hosts of the purged documents (a few: computed on every refresh)."""
    for key, partition in purged:
        _insert_urls(con, reader.read(key, ["doc_id", "url"]), partition,
                     " WHERE NOT EXISTS (SELECT 1 FROM url_cache c WHERE c.partition = "
                     "u.partition AND c.doc_id = u.doc_id)")


def _partitions_table(manifests: list[tuple[str, Manifest]]) -> pa.Table:
    return pa.table({
        "asset": [m.asset for _, m in manifests],
        "partition": [m.partition for _, m in manifests],
        "version": [m.version for _, m in manifests],
        "data_version": [m.data_version for _, m in manifests],
        "rows": pa.array([m.rows for _, m in manifests], pa.int64()),
        "tables": pa.array([["part", *sorted(m.tables)] for _, m in manifests],
                           pa.list_(pa.string())),
        "manifest_key": [key for key, _ in manifests],
    }, schema=pa.schema([("asset", pa.string()), ("partition", pa.string()),
                         ("version", pa.string()), ("data_version", pa.string()),
                         ("rows", pa.int64()), ("tables", pa.list_(pa.string())),
                         ("manifest_key", pa.string())]))


def _current_versions(store: Store, manifests: list[tuple[str, Manifest]]) -> dict[str, str]:
    """recipe -> the dataset version `shards[recipe]` points at (its manifest's version)."""
    current = {}
    for _, manifest in manifests:
        if manifest.asset != SHARDS:
            continue
        version = manifest.version
        if manifest.parts:
            try:
                table = read_parquet(store, manifest.parts[0].key)
                if "dataset_version" in table.column_names and table.num_rows:
                    version = table["dataset_version"][0].as_py()
            except (OSError, pa.ArrowException):
                pass
        current[manifest.partition] = version
    return current


def _dataset_tables(store: Store, current: dict[str, str]
                    ) -> tuple[pa.Table, pa.Table, list[tuple[str, dict[str, Any]]]]:
    recipe_of = {version: recipe for recipe, version in current.items()}
    versions = dataset_manifests(store)
    rows, shard_rows = [], []
    for version, manifest in versions:
        totals = manifest.get("totals", {})
        rows.append({
            "dataset_version": version, "recipe": recipe_of.get(version, manifest.get("recipe")),
            "current": version in recipe_of, "manifest_version": manifest.get("version"),
            "recipe_hash": manifest.get("recipe_hash"),
            "pipeline_hash": manifest.get("pipeline_hash"),
            "seq_len": manifest.get("seq_len"), "dtype": manifest.get("dtype"),
            "shards": len(manifest.get("shards", [])), "sequences": totals.get("sequences"),
            "tokens": totals.get("tokens"), "padding_tokens": totals.get("padding_tokens"),
            "inputs": json.dumps(manifest.get("inputs", {}), sort_keys=True),
            "prefix": f"{SHARDS}/{version}"})
        for index, shard in enumerate(manifest.get("shards", [])):
            shard_rows.append({
                "dataset_version": version, "shard": index, "name": shard.get("name"),
                "first_sequence": shard.get("first_sequence"),
                "sequences": shard.get("sequences"), "tokens": shard.get("tokens"),
                "padding_tokens": shard.get("padding_tokens")})
    version_schema = pa.schema([
        ("dataset_version", pa.string()), ("recipe", pa.string()), ("current", pa.bool_()),
        ("manifest_version", pa.string()), ("recipe_hash", pa.string()),
        ("pipeline_hash", pa.string()), ("seq_len", pa.int64()), ("dtype", pa.string()),
        ("shards", pa.int64()), ("sequences", pa.int64()), ("tokens", pa.int64()),
        ("padding_tokens", pa.int64()), ("inputs", pa.string()), ("prefix", pa.string())])
    shard_schema = pa.schema([
        ("dataset_version", pa.string()), ("shard", pa.int32()), ("name", pa.string()),
        ("first_sequence", pa.int64()), ("sequences", pa.int64()), ("tokens", pa.int64()),
        ("padding_tokens", pa.int64())])
    return (pa.Table.from_pylist(rows, version_schema),
            pa.Table.from_pylist(shard_rows, shard_schema), versions)


def _takedown_tables(store: Store) -> tuple[str, pa.Table, pa.Table]:
    current = current_takedowns(store)
    entries = pa.Table.from_pylist(
        [{"takedown_version": current.version, "number": current.number, "kind": e.kind,
          "value": e.value, "canonical": e.canonical, "reason": e.reason,
          "requested_by": e.requested_by, "requested_at": e.requested_at}
         for e in current.entries],
        pa.schema([("takedown_version", pa.string()), ("number", pa.int64()),
                   ("kind", pa.string()), ("value", pa.string()), ("canonical", pa.string()),
                   ("reason", pa.string()), ("requested_by", pa.string()),
                   ("requested_at", pa.string())]))
    tombstones = load_tombstones(store, current.version)
    ids = pa.table({"doc_id": pa.array(sorted(tombstones.doc_ids), pa.string())})
    return current.version, entries, ids


def refresh_catalog(store: Store, catalog_path: str | Path, *, filesystem: Any = None,
                    lookups: bool = True, threads: int | None = None,
                    memory_limit: str | None = None,
                    assets: Iterable[str] = CATALOG_SOURCES) -> CatalogSummary:
    """Creates (or replaces) the catalog at `catalog_path` over the store's complete outputs
    (see the module docstring). One writer: call it from the `catalog` step only.

    Memory is bounded by the budget (`curation.duck.current_budget().duckdb()`: its
    memory_limit, threads and spill folder; `memory_limit` and `threads` override them), not
    by the store: every relation, sort and index is built by DuckDB, which spills beyond its
    limit into a fresh folder under the budget's spill directory, and the Python side holds
    one stored part at a time (canonical URLs, tables filled through Arrow) besides the
    per-partition and per-shard metadata rows."""
    started = time.perf_counter()
    settings = current_budget().duckdb()
    path = Path(catalog_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    building = path.with_name(f".{path.name}.{uuid.uuid4().hex}.building")
    reader = ColumnReader(store, filesystem)
    with tempfile.TemporaryDirectory(prefix="catalog-", dir=settings.temp_directory) as spill:
        con = duckdb.connect(str(building))
        try:
            con.execute(f"SET threads = {int(threads or settings.threads)}")
            con.execute(f"SET memory_limit = {_literal(memory_limit or settings.memory_limit)}")
            con.execute(f"SET temp_directory = {_literal(spill)}")
            con.execute("SET preserve_insertion_order = false")
            summary = _refresh(con, store, reader, path, lookups, list(assets))
            con.execute("CHECKPOINT")
        except BaseException:
            con.close()
            building.unlink(missing_ok=True)
            Path(f"{building}.wal").unlink(missing_ok=True)
            raise
        con.close()
    os.replace(building, path)
    return CatalogSummary(**summary, path=str(path), seconds=time.perf_counter() - started,
                          bytes=path.stat().st_size)


def _refresh(con: duckdb.DuckDBPyConnection, store: Store, reader: ColumnReader, path: Path,
             lookups: bool, assets: list[str]) -> dict[str, Any]:
    manifests = read_manifests(store, assets)
    previous = _previous(con, path)
    reused, computed = _build_caches(con, reader, manifests, previous)
    purged = _purged_files(store, reader)
    _cache_purged_urls(con, reader, purged)
    if previous or path.exists():
        try:
            con.execute("DETACH old")
        except duckdb.Error:
            pass
    _table(con, "partitions", _partitions_table(manifests))
    builder = _Builder(con, reader)
    by_asset: dict[str, list[Manifest]] = {}
    for _, manifest in manifests:
        by_asset.setdefault(manifest.asset, []).append(manifest)

    def groups(items: Iterable[Manifest], table: str, consts: Any) -> list[_Group]:
        return [_Group([p.key for p in m.table_parts(table)], consts(m))
                for m in items if m.table_parts(table)]

    def asset_partition(m: Manifest) -> list[tuple[str, Any, str]]:
        return [("asset", m.asset, "VARCHAR"), ("partition", m.partition, "VARCHAR")]

    both = [("asset", "VARCHAR"), ("partition", "VARCHAR")]
    # documents: the Parquet columns (never text), plus canonical URL and host from url_cache.
    builder.relation("_documents_files", groups(
        by_asset.get(DOCUMENTS, []), "part",
        lambda m: [("partition", m.partition, "VARCHAR")]), DOCUMENT_COLUMNS,
        [("partition", "VARCHAR")])
    builder.relation("_purged_files", [
        _Group([key], [("partition", partition, "VARCHAR")]) for key, partition in purged],
        DOCUMENT_COLUMNS, [("partition", "VARCHAR")])
    kind = "VIEW" if builder.views else "TABLE"
    # A purged document comes back only if `documents` holds it again (re-extracted).
    con.execute(
        f"CREATE OR REPLACE {kind} documents AS SELECT d.doc_id, d.partition, d.source, d.url, "
        "u.canonical_url, u.host, d.domain, d.snapshot, d.warc_file, d.warc_offset, "
        "d.fetched_at, d.charset, d.html_bytes, d.licence FROM (SELECT * FROM _documents_files "
        "UNION ALL SELECT * FROM _purged_files p WHERE NOT EXISTS (SELECT 1 FROM "
        "_documents_files f WHERE f.doc_id = p.doc_id)) d "
        "LEFT JOIN url_cache u ON u.partition = d.partition AND u.doc_id = d.doc_id"
        + ("" if builder.views else " ORDER BY d.doc_id"))
    if not builder.views:
        con.execute("DROP TABLE _documents_files")
        con.execute("DROP TABLE _purged_files")
    not_mix = [m for _, m in manifests if m.asset != MIX]
    builder.relation("decisions", groups(not_mix, "decisions", asset_partition),
                     DECISION_COLUMNS, both, order="doc_id")
    builder.relation("rejects", groups([m for _, m in manifests], "rejects", asset_partition),
                     REJECT_COLUMNS, both)
    builder.relation("clusters", groups(
        [m for a in CLUSTER_ASSETS for m in by_asset.get(a, [])], "part", asset_partition),
        CLUSTER_COLUMNS, both, order="doc_id")
    current = _current_versions(store, manifests)
    mixes = by_asset.get(MIX, [])
    builder.relation("occurrences", groups(mixes, "part", lambda m: [
        ("recipe", m.partition, "VARCHAR"), ("mix_version", m.version, "VARCHAR")]),
        OCCURRENCE_COLUMNS, [("recipe", "VARCHAR"), ("mix_version", "VARCHAR")], order="doc_id")
    builder.relation("selections", groups(mixes, "decisions", lambda m: [
        ("recipe", m.partition, "VARCHAR"),
        ("dataset_version", current.get(m.partition), "VARCHAR"),
        ("mix_version", m.version, "VARCHAR")]), SELECTION_COLUMNS,
        [("recipe", "VARCHAR"), ("dataset_version", "VARCHAR"), ("mix_version", "VARCHAR")],
        order="doc_id")
    versions_table, shards_table, versions = _dataset_tables(store, current)
    _table(con, "dataset_versions", versions_table)
    _table(con, "shard_files", shards_table)
    recipe_of = {version: recipe for recipe, version in current.items()}
    span_groups = []
    for version, manifest in versions:
        key = f"{SHARDS}/{version}/{manifest['spans']['name']}"
        seq_len = int(manifest.get("seq_len") or 0)
        span_groups.append(_Group([key], [
            ("dataset_version", version, "VARCHAR"),
            ("recipe", recipe_of.get(version, manifest.get("recipe")), "VARCHAR"),
            ("current", version in recipe_of or not recipe_of, "BOOLEAN"),
            ("seq_len", seq_len, "INTEGER")], [
            f'CAST(sequence AS BIGINT) * {seq_len} + start AS shard_token_start',
            f'CAST(sequence AS BIGINT) * {seq_len} + "end" AS shard_token_end']))
    builder.relation("spans", span_groups, SPAN_COLUMNS,
                     [("dataset_version", "VARCHAR"), ("recipe", "VARCHAR"),
                      ("current", "BOOLEAN"), ("seq_len", "INTEGER")],
                     order="dataset_version, shard, sequence, start",
                     extras=[("shard_token_start", "BIGINT"), ("shard_token_end", "BIGINT")])
    takedown_version, entries, tombstones = _takedown_tables(store)
    _table(con, "takedown_entries", entries)
    _table(con, "tombstones", tombstones)
    _lookups(con, lookups, builder.views)
    info = {"format": FORMAT, "root": store.uri(""), "mode": "views" if builder.views else
            "tables", "lookups": json.dumps(lookups), "takedown_version": takedown_version}
    _table(con, "catalog_info", pa.table({"key": list(info), "value": list(info.values())}))
    names = [DOCUMENTS, "decisions", "rejects", "clusters", "occurrences", "selections",
             "spans", "partitions", "dataset_versions", "tombstones"]
    rows = {name: int(con.execute(f"SELECT count(*) FROM {name}").fetchall()[0][0])
            for name in names}
    partitions: dict[str, int] = {}
    for _, manifest in manifests:
        partitions[manifest.asset] = partitions.get(manifest.asset, 0) + 1
    return {"mode": info["mode"], "lookups": lookups, "rows": rows, "partitions": partitions,
            "dataset_versions": [version for version, _ in versions],
            "empty": [name for name in builder.empty if not name.startswith("_")]
            + ([DOCUMENTS] if "_documents_files" in builder.empty else []),
            "canonical_reused": reused, "canonical_computed": computed,
            "takedown_version": takedown_version}


def _lookups(con: duckdb.DuckDBPyConnection, lookups: bool, views: bool) -> None:
    """Sorted (and for URLs indexed) copies of the metadata for point look-ups."""
    sources = {"lookup_documents": (DOCUMENTS, "doc_id"),
               "lookup_decisions": ("decisions", "doc_id"),
               "lookup_selections": ("selections", "doc_id"),
               "lookup_spans": ("spans", "doc_id, dataset_version, shard, sequence, start")}
    for name, (source, order) in sources.items():
        if lookups and (views or source == "spans"):
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM {source} ORDER BY {order}")
        else:  # already a table sorted by doc_id (S3), or no lookups asked for
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM {source}")
    con.execute("CREATE VIEW lookup_rejects AS SELECT * FROM reject_index")
    if lookups:
        table = "lookup_documents" if views else DOCUMENTS
        # One index: a URL's own spelling has the same canonical form, so every URL look-up
        # is an equality on canonical_url (DuckDB's ART serves equality, not suffixes: domain
        # look-ups scan `host`).
        con.execute(f"CREATE INDEX {table}_canonical_url ON {table}(canonical_url)")
        con.execute("CREATE INDEX reject_index_canonical_url ON reject_index(canonical_url)")


# --- look-ups ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SpanRef:
    """A contiguous piece of a document occurrence in a dataset version: `sequence`, `start`,
    `end` as in spans.parquet (sequence within the shard, tokens within the sequence);
    `shard_token_start`/`end` the same as offsets within the shard."""

    dataset_version: str
    recipe: str | None
    current: bool  # the version a recipe points at now (all are, when none is marked)
    shard: int
    sequence: int
    start: int
    end: int
    shard_token_start: int
    shard_token_end: int
    occurrence: int
    phase: str | None


@dataclass(frozen=True)
class DecisionRef:
    asset: str
    partition: str
    stage: str
    verdict: str
    reason: str
    value: float | None
    detail: str | None
    kept_doc_id: str | None


@dataclass(frozen=True)
class SelectionRef:
    recipe: str
    dataset_version: str | None
    mix_version: str | None
    kept: bool | None
    rule: str | None
    kept_doc_id: str | None


@dataclass(frozen=True)
class Location:
    """Where a document (or a rejected record, `doc_id` None) went. `spans` lists every piece
    of it in every dataset version, current or not. `status`: `in_dataset` (spans in a current
    dataset version: one a recipe points at), `excluded` (a stage or a recipe selection left it
    out: see `decisions` and `selections`), `rejected` (dropped inside `documents`, before it
    got a doc_id), or `not_in_dataset` (nothing that explains why, for example no dataset
    version built yet, or only old versions hold it)."""

    doc_id: str | None
    url: str | None
    canonical_url: str | None
    host: str | None
    partition: str | None
    source: str | None
    snapshot: str | None
    warc_file: str | None
    warc_offset: int | None
    fetched_at: Any
    licence: str | None
    status: str
    spans: tuple[SpanRef, ...] = ()
    decisions: tuple[DecisionRef, ...] = ()
    selections: tuple[SelectionRef, ...] = ()
    taken_down: bool = False
    message: str | None = None
    match: str | None = None  # how find_url matched it: url, canonical_url, domain, doc_id

    @property
    def dataset_versions(self) -> list[str]:
        return sorted({span.dataset_version for span in self.spans})

    def explain(self) -> str:
        name = self.url or self.doc_id or "?"
        if self.status == "rejected":
            reasons = "; ".join(f"{d.stage}: {d.reason}" for d in self.decisions)
            return f"{name} was rejected in {self.partition} ({reasons})"
        lines = []
        for version in self.dataset_versions:
            pieces = [s for s in self.spans if s.dataset_version == version]
            where = ", ".join(f"shard {s.shard} tokens [{s.shard_token_start}, "
                              f"{s.shard_token_end})" for s in pieces[:5])
            more = f" and {len(pieces) - 5} more" if len(pieces) > 5 else ""
            state = "current" if pieces[0].current else "older version, still on disk"
            recipe = f"recipe {pieces[0].recipe}, " if pieces[0].recipe else ""
            lines.append(f"in {version} ({recipe}{state}): {where}{more}")
        for d in self.decisions:
            kept = f", kept copy {d.kept_doc_id}" if d.kept_doc_id else ""
            lines.append(f"{d.stage} [{d.partition}]: {d.verdict} ({d.reason}, "
                         f"value {d.value}{kept})")
        for s in self.selections:
            verb = "selected" if s.kept else "not selected"
            kept = f", kept copy {s.kept_doc_id}" if s.kept_doc_id else ""
            lines.append(f"mix[{s.recipe}] ({s.dataset_version}): {verb} by {s.rule}{kept}")
        if self.taken_down:
            lines.append("taken down (tombstoned)")
        if not lines:
            lines.append("no dataset version holds it and no stage recorded a decision")
        return f"{name} ({self.doc_id}, {self.status}): " + "; ".join(lines)


@dataclass(frozen=True)
class TokenLocation:
    """What token `position` of sequence `sequence` in `shard` of a dataset version is."""

    dataset_version: str
    shard: int
    sequence: int
    position: int
    shard_offset: int
    padding: bool
    span: SpanRef | None = None
    token_in_occurrence: int | None = None
    document: Location | None = None
    passed: tuple[str, ...] = ()  # stages that ran on its partition and did not flag it
    flagged: tuple[DecisionRef, ...] = ()  # default-threshold drops the recipe overrode

    def explain(self) -> str:
        """The answer in one line: the document, where it came from, and its token range."""
        where = (f"token {self.shard_offset} of shard {self.shard} in {self.dataset_version} "
                 f"(sequence {self.sequence}, position {self.position})")
        if self.padding or self.span is None:
            return f"{where}: padding, no document"
        doc = self.document
        span = self.span
        if doc is None:
            origin = "document not in the catalog"
        elif doc.warc_file:
            origin = (f"source {doc.source}, snapshot {doc.snapshot}, WARC {doc.warc_file} "
                      f"offset {doc.warc_offset}")
        else:
            origin = f"source {doc.source} (curated, no WARC record)"
        url = doc.url if doc is not None else "?"
        return (f"{where}: {doc.doc_id if doc else '?'} {url} ({origin}), phase "
                f"{span.phase}, occurrence {span.occurrence}, the document's token "
                f"{self.token_in_occurrence}; this piece is shard tokens "
                f"[{span.shard_token_start}, {span.shard_token_end})")


DOC_FIELDS = ("doc_id", "url", "canonical_url", "host", "partition", "source", "snapshot",
              "warc_file", "warc_offset", "fetched_at", "licence")


class Catalog:
    """A read-only connection to a refreshed catalog and the look-up API."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise FileNotFoundError(f"no catalog at {self.path}: run refresh_catalog first")
        # Attached read-only to a private in-memory database rather than opened by path:
        # DuckDB caches database instances by path within a process, so a second
        # `connect(path)` after a refresh would keep reading the replaced file.
        self.con = duckdb.connect(":memory:")
        self.con.execute(f"ATTACH {_literal(str(self.path))} AS lineage (READ_ONLY)")
        self.con.execute("USE lineage")
        self.info = dict(self.con.execute("SELECT key, value FROM catalog_info").fetchall())
        self._tombstones = bool(self.con.execute("SELECT count(*) FROM tombstones")
                                .fetchall()[0][0])

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[dict[str, Any]]:
        """Rows of any SQL over the catalog as dicts."""
        cursor = self.con.execute(sql, list(params or []))
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    # -- documents by URL ------------------------------------------------------------------

    def _documents(self, where: str, params: list[Any], limit: int) -> list[dict[str, Any]]:
        fields = ", ".join(DOC_FIELDS)
        return self.query(f"SELECT {fields} FROM lookup_documents WHERE {where} LIMIT {limit}",
                          params)

    def find_url(self, query: str, *, kind: str | None = None,
                 limit: int = 1000) -> list[Location]:
        """Every document (and rejected record) whose URL is `query`, whose canonical URL is
        `query`'s, or, for a domain, whose host is the domain or one of its subdomains: each with
        its spans in every dataset version, or the stages and selections that left it out."""
        kind = kind or ("url" if "://" in query or query.startswith("//") or "/" in query
                        else "domain")
        text = query.strip()
        if kind == "url":
            if "://" not in text and not text.startswith("//"):
                text = "https://" + text
            # The URL as given has the same canonical form: one indexed equality finds both.
            canonical = canonical_url(text)
            rows = self._documents("canonical_url = ?", [canonical], limit)
            rows.sort(key=lambda row: (row["url"] != text, row["doc_id"]))
            docs = {row["doc_id"]: row | {"match": "url" if row["url"] == text
                                          else "canonical_url"} for row in rows}
            rejects = [row | {"match": "url" if row["url"] == text else "canonical_url"}
                       for row in self.query(f"SELECT * FROM lookup_rejects WHERE "
                                             f"canonical_url = ? LIMIT {limit}", [canonical])]
        elif kind == "domain":
            domain = canonical_domain(text)
            where = "host = ? OR ends_with(host, ?)"
            params = [domain, "." + domain]
            docs = {row["doc_id"]: row | {"match": "domain"}
                    for row in self._documents(where, params, limit)}
            rejects = [row | {"match": "domain"} for row in self.query(
                f"SELECT * FROM lookup_rejects WHERE {where} LIMIT {limit}", params)]
        else:
            raise ValueError(f"kind {kind!r}: use 'url' or 'domain'")
        locations = self._locations(list(docs.values()))
        return locations + [self._reject_location(row) for row in rejects]

    def document(self, doc_id: str) -> Location | None:
        """The location of one document by doc_id."""
        rows = self._documents("doc_id = ?", [doc_id], 1)
        return self._locations([row | {"match": "doc_id"} for row in rows])[0] if rows else None

    def _by_doc(self, relation: str, columns: str, doc_ids: list[str],
                order: str) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {doc_id: [] for doc_id in doc_ids}
        if not doc_ids:
            return out
        if len(doc_ids) <= 16:
            rows = []
            for doc_id in doc_ids:
                rows += self.query(f"SELECT {columns} FROM {relation} WHERE doc_id = ? "
                                   f"ORDER BY {order}", [doc_id])
        else:
            rows = self.query(f"SELECT {columns} FROM {relation} WHERE doc_id IN "
                              f"(SELECT UNNEST(?::VARCHAR[])) ORDER BY doc_id, {order}",
                              [doc_ids])
        for row in rows:
            out[row["doc_id"]].append(row)
        return out

    def _locations(self, docs: list[dict[str, Any]]) -> list[Location]:
        ids = [row["doc_id"] for row in docs]
        spans = self._by_doc(
            "lookup_spans", "doc_id, dataset_version, recipe, current, shard, sequence, start, "
            "\"end\", shard_token_start, shard_token_end, occurrence, phase", ids,
            "dataset_version, shard, sequence, start")
        decisions = self._by_doc(
            "lookup_decisions", "doc_id, asset, partition, stage, verdict, reason, value, "
            "detail, kept_doc_id", ids, "asset, stage")
        selections = self._by_doc(
            "lookup_selections", "doc_id, recipe, dataset_version, mix_version, kept, rule, "
            "kept_doc_id", ids, "recipe")
        tomb = self._tombstoned(ids)
        out = []
        for row in docs:
            doc_id = row["doc_id"]
            span_refs = tuple(SpanRef(**{k: v for k, v in s.items() if k != "doc_id"})
                              for s in spans[doc_id])
            decision_refs = tuple(DecisionRef(**{k: v for k, v in d.items() if k != "doc_id"})
                                  for d in decisions[doc_id])
            selection_refs = tuple(SelectionRef(**{k: v for k, v in s.items()
                                                   if k != "doc_id"})
                                   for s in selections[doc_id])
            if any(span.current for span in span_refs):
                status = "in_dataset"
            elif any(d.verdict == "drop" for d in decision_refs) or any(
                    s.kept is False for s in selection_refs):
                status = "excluded"
            else:
                status = "not_in_dataset"
            out.append(Location(**{name: row[name] for name in DOC_FIELDS}, status=status,
                                spans=span_refs, decisions=decision_refs,
                                selections=selection_refs, taken_down=doc_id in tomb,
                                match=row.get("match")))
        return out

    def _tombstoned(self, doc_ids: list[str]) -> set[str]:
        if not doc_ids or not self._tombstones:
            return set()
        rows = self.con.execute("SELECT doc_id FROM tombstones WHERE doc_id IN "
                                "(SELECT UNNEST(?::VARCHAR[]))", [doc_ids]).fetchall()
        return {row[0] for row in rows}

    @staticmethod
    def _reject_location(row: dict[str, Any]) -> Location:
        decision = DecisionRef(row["asset"], row["partition"], row["stage"], "drop",
                               row["reason"], None, row["message"], None)
        return Location(None, row["url"], row["canonical_url"], row["host"], row["partition"],
                        None, None, row["warc_file"], row["warc_offset"], None, None,
                        "rejected", decisions=(decision,), message=row["message"],
                        match=row.get("match"))

    # -- tokens -------------------------------------------------------------------------------

    def _shard_index(self, dataset_version: str, shard: int | str) -> int:
        if isinstance(shard, int):
            return shard
        if shard.isdigit():
            return int(shard)
        rows = self.con.execute("SELECT shard FROM shard_files WHERE dataset_version = ? AND "
                                "name = ?", [dataset_version, shard]).fetchall()
        if not rows:
            raise KeyError(f"{dataset_version} has no shard {shard!r}")
        return int(rows[0][0])

    def at_token(self, dataset_version: str, shard: int | str, offset: int | None = None, *,
                 sequence: int | None = None, position: int | None = None) -> TokenLocation:
        """The document behind a token: `offset` counts tokens from the start of the shard
        (padding included), or give `sequence` (within the shard) and `position`."""
        found = self.con.execute("SELECT seq_len FROM dataset_versions WHERE dataset_version = ?",
                                 [dataset_version]).fetchall()
        if not found:
            known = ", ".join(row["dataset_version"] for row in self.dataset_versions())
            raise KeyError(f"no dataset version {dataset_version!r} in the catalog; versions: "
                           f"{known or 'none (build a dataset, then refresh the catalog)'}")
        seq_len = int(found[0][0])
        index = self._shard_index(dataset_version, shard)
        sizes = self.con.execute("SELECT sequences FROM shard_files WHERE dataset_version = ? "
                                 "AND shard = ?", [dataset_version, index]).fetchall()
        if not sizes:
            count = self.con.execute("SELECT count(*) FROM shard_files WHERE dataset_version = ?",
                                     [dataset_version]).fetchall()[0][0]
            raise KeyError(f"{dataset_version} has no shard {index}: its shards are 0 to "
                           f"{count - 1}")
        sequences = int(sizes[0][0])
        if offset is not None:
            if not 0 <= offset < sequences * seq_len:
                raise ValueError(f"token offset {offset} is outside shard {index} of "
                                 f"{dataset_version}: valid offsets are 0 to "
                                 f"{sequences * seq_len - 1} ({sequences} sequences of "
                                 f"{seq_len} tokens)")
            sequence, position = divmod(int(offset), seq_len)
        elif sequence is None or position is None:
            raise ValueError("give offset, or sequence and position")
        if not 0 <= position < seq_len:
            raise ValueError(f"position {position} is outside a sequence of {seq_len} tokens: "
                             f"valid positions are 0 to {seq_len - 1}")
        if not 0 <= sequence < sequences:
            raise ValueError(f"sequence {sequence} is outside shard {index} of "
                             f"{dataset_version}: valid sequences are 0 to {sequences - 1}")
        shard_offset = sequence * seq_len + position
        rows = self.query(
            "SELECT dataset_version, recipe, current, shard, sequence, start, \"end\", "
            "shard_token_start, shard_token_end, occurrence, phase, doc_id FROM spans "
            "WHERE dataset_version = ? "
            "AND shard = ? AND sequence = ? AND start <= ? AND \"end\" > ?",
            [dataset_version, index, sequence, position, position])
        if not rows:
            return TokenLocation(dataset_version, index, sequence, position, shard_offset, True)
        row = rows[0]
        doc_id = row.pop("doc_id")
        span = SpanRef(**row)
        before = self.con.execute(
            "SELECT coalesce(sum(\"end\" - start), 0) FROM lookup_spans WHERE doc_id = ? AND "
            "dataset_version = ? AND occurrence = ? AND (shard < ? OR (shard = ? AND "
            "(sequence < ? OR (sequence = ? AND start < ?))))",
            [doc_id, dataset_version, span.occurrence, index, index, sequence, sequence,
             span.start]).fetchall()[0][0]
        document = self.document(doc_id)
        passed: tuple[str, ...] = ()
        flagged: tuple[DecisionRef, ...] = ()
        if document is not None:
            stages = [r[0] for r in self.con.execute(
                "SELECT DISTINCT asset FROM partitions WHERE (partition = ? OR asset = ?) "
                "AND list_contains(tables, 'decisions') AND asset != ? ORDER BY asset",
                [document.partition, CROSS_DEDUP, MIX]).fetchall()]
            flagged = tuple(d for d in document.decisions if d.verdict == "drop")
            dropped = {d.asset for d in flagged}
            passed = tuple(stage for stage in stages if stage not in dropped)
        return TokenLocation(dataset_version, index, sequence, position, shard_offset, False,
                             span, int(before) + position - span.start, document, passed,
                             flagged)

    # -- versions -------------------------------------------------------------------------------

    def dataset_versions(self) -> list[dict[str, Any]]:
        return self.query("SELECT * FROM dataset_versions ORDER BY dataset_version")

    def why_not(self, doc_id: str, dataset_version: str) -> list[str]:
        """Why a document is not in `dataset_version`: its drops and the selection rule."""
        location = self.document(doc_id)
        if location is None:
            return ["unknown doc_id"]
        if dataset_version in location.dataset_versions:
            return []
        reasons = [f"{d.stage}: {d.reason}" for d in location.decisions if d.verdict == "drop"]
        reasons += [f"mix[{s.recipe}]: {s.rule}" for s in location.selections
                    if s.dataset_version == dataset_version and not s.kept]
        if location.taken_down:
            reasons.append("taken down")
        return reasons or ["no recorded reason (not selected by the recipe's partitions?)"]


def shard_offset_of(seq_len: int, sequence: int, position: int) -> int:
    """The token offset within a shard of `position` in `sequence` (padding counted)."""
    return sequence * seq_len + position


__all__ = ["Catalog", "CatalogSummary", "DecisionRef", "Location", "SelectionRef", "SpanRef",
           "TokenLocation", "read_manifests", "refresh_catalog", "shard_offset_of"]
