"""The dedup stages of one partition (URL, exact text, MinHash near duplicates, boilerplate
lines) and the cross-partition links, around the kernels in `curation/dedup.py`.

Clusters never depend on a recipe. Each non-kept member gets a decision row whose `kept_doc_id`
names the member the default ranking keeps (curated first, earliest snapshot, longest text); the
mix applies the same ranking to the members that pass its selection.

Memory: each stage is one task for the partition (or all partitions, for `cross_dedup`), and no
whole-partition table is held in Python. URL, exact and near-duplicate grouping run as map and
reduce tasks (`curation.executor.map_tasks`, local pool or Ray) over a hash-partitioned exchange
in the store (`curation.exchange`, under the work prefix `{asset}/{partition}/_work`, removed
after): map tasks read one part each (documents, or `minhash_signatures` for near duplicates)
and write its keyed rows split by bucket (exact keys with the ranking facts; band values in long
form, keyed by value and band); reduce tasks group one bucket each in a DuckDB session under
their share of the budget (`task_settings`), since every row of a key is in one bucket. For
exact keys a bucket's clusters and kept members are final: the reduce writes its decided rows,
and the parent's session only sorts them into the outputs. For near duplicates a bucket writes
its star edges (hot buckets sampled as in `near_duplicate_clusters_sql`); the parent's session
runs the connected components over all of them and ranks, with the per-part ranking facts the
workers wrote. The parent's DuckDB session is under the memory budget and its sorted results are
streamed into local Parquet files (`write_parquet_file`, the bytes `parquet_bytes` gives) that
the task uploads by streaming. Peak memory: one part in a map task, one bucket within its
DuckDB share in a reduce task, DuckDB's `memory_limit` in the parent (components, final sort),
one row group in the writer. Outputs do not depend on the bucket or worker count.
`cross_dedup` has the workers write each part's facts and keys to the work prefix and builds
its index and components in one session under the budget.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curation.config import DedupSettings, stable_hash
from curation.dedup import (
    BAND_ROWS_SCHEMA,
    CLUSTER_SCHEMA,
    EDGE_SCHEMA,
    ClusterStats,
    CrossIndex,
    Ranking,
    band_rows_edges_sql,
    bands_of,
    choose_kept_sql,
    edge_clusters_sql,
    key_clusters_sql,
    text_hash,
    url_hash,
)
from curation.duck import (
    ResultFiles,
    copy_to_parquet,
    current_budget,
    duckdb_session,
    literal,
    register_parts,
    register_table,
    scalar,
)
from curation.exchange import Exchange, bucket_count, task_settings
from curation.executor import map_tasks
from curation.graph import (
    ALL,
    CROSS_DEDUP,
    DEDUP_CLUSTERS,
    DOCUMENTS,
    EXACT_DEDUP,
    LINE_DEDUP,
    MINHASH_SIGNATURES,
    URL_DEDUP,
)
from curation.partition import Manifest, PartitionLayout
from curation.schema import DECISION_SCHEMA
from curation.stages.base import DocumentsInput
from curation.stages.line_dedup import run_line_dedup
from curation.stats import StageStats
from curation.storage import LocalStore, Store, parquet_bytes
from curation.tasks import PartitionResult, PartitionRun, TaskOutput, hold_locks, run_partition

KERNEL_VERSION = "dedup-1"
URL, EXACT, NEAR, LINES, CROSS = URL_DEDUP, EXACT_DEDUP, DEDUP_CLUSTERS, LINE_DEDUP, CROSS_DEDUP
REASONS = {URL: "duplicate_url", EXACT: "duplicate_text", NEAR: "near_duplicate",
           CROSS: "cross_partition_duplicate"}
OUTPUT_SCHEMA = pa.schema([*CLUSTER_SCHEMA, pa.field("kept_doc_id", pa.string()),
                           pa.field("keep", pa.bool_())])


_KEY_COLUMNS = {URL: "url_hash", EXACT: "text_hash"}
FACTS_SCHEMA = pa.schema([("doc_id", pa.string()), ("source", pa.string()),
                          ("snapshot", pa.string()), ("text_chars", pa.int32())])
KEYS_SCHEMA = pa.schema([("doc_id", pa.string()), ("url_hash", pa.uint64()),
                         ("text_hash", pa.uint64())])


@contextmanager
def _work_area(store: Store, layout: PartitionLayout) -> Iterator[str]:
    """A prefix in the store beside `layout` where workers leave per-part files for the
    parent's DuckDB (on S3 too, where Ray workers on other nodes write them); removed after,
    and before, in case a killed run left one."""
    prefix = layout.scratch_prefix
    store.delete_prefix(prefix)
    try:
        yield prefix
    finally:
        store.delete_prefix(prefix)


def _read_facts(store: Store, partition: str, index: int) -> tuple[pa.Table, pa.Table]:
    """One documents part (doc_id, source, snapshot, url, text) and its ranking facts."""
    part = DocumentsInput(store, partition).layout.read_part(
        index, columns=["doc_id", "source", "snapshot", "url", "text"])
    facts = part.select(["doc_id", "source", "snapshot"]).append_column(
        "text_chars", pc.utf8_length(part["text"]))
    return part, facts.cast(FACTS_SCHEMA)


def _key_hashes(part: pa.Table, key: str) -> pa.Array:
    """`url_hash` (null without a URL) or `text_hash` of each document of `part`."""
    if key == "url_hash":
        return pa.array([url_hash(url) if url else None for url in part["url"].to_pylist()],
                        pa.uint64())
    return pa.array([text_hash(text) for text in part["text"].to_pylist()], pa.uint64())


@dataclass(frozen=True)
class _PartFacts:
    """One documents part's ranking facts (doc_id, source, snapshot, text_chars), and for a
    partition in `keyed` its exact keys (url_hash, text_hash), written as Parquet under
    `prefix`. Returns the facts' key and the keys' key (None when not keyed)."""

    store: Store
    prefix: str
    keyed: frozenset[str]

    def __call__(self, task: tuple[str, int]) -> tuple[str, str | None]:
        partition, index = task
        part, facts = _read_facts(self.store, partition, index)
        name = f"{self.prefix}/{quote(partition, safe='')}-{index:05d}"
        self.store.write_bytes(f"{name}-facts.parquet", parquet_bytes(facts))
        if partition not in self.keyed:
            return f"{name}-facts.parquet", None
        keys = pa.table({"doc_id": part["doc_id"],
                         **{key: _key_hashes(part, key) for key in ("url_hash", "text_hash")}})
        self.store.write_bytes(f"{name}-keys.parquet", parquet_bytes(keys.cast(KEYS_SCHEMA)))
        return f"{name}-facts.parquet", f"{name}-keys.parquet"


@dataclass(frozen=True)
class _FactFiles:
    """The file keys `_PartFacts` wrote: every part's facts, each keyed partition's keys."""

    facts: list[str]
    keys: dict[str, list[str]]


def _part_facts(store: Store, prefix: str, partitions: Sequence[str], keyed: Collection[str],
                workers: int) -> _FactFiles:
    """`_PartFacts` of every part of `partitions` (with keys for those in `keyed`), on the
    workers."""
    tasks = [(partition, index) for partition in partitions
             for index in range(DocumentsInput(store, partition).task_count())]
    written = map_tasks(_PartFacts(store, prefix, frozenset(keyed)), tasks, workers)
    keys: dict[str, list[str]] = {partition: [] for partition in keyed}
    for (partition, _), (_, key) in zip(tasks, written, strict=True):
        if key is not None:
            keys[partition].append(key)
    return _FactFiles([facts for facts, _ in written], keys)


def _rank(con: duckdb.DuckDBPyConnection, clusters: str, facts: str,
          policy: str = "longest") -> None:
    """Table `decided` (`OUTPUT_SCHEMA`'s columns, unordered) from the relations `clusters`
    and `facts` of the session: each member with its cluster's kept member."""
    con.execute("CREATE TABLE members AS SELECT c.cluster_id, c.doc_id, f.source, f.snapshot,"
                f" f.text_chars FROM {clusters} c JOIN {facts} f ON c.doc_id = f.doc_id")
    choose_kept_sql(con, "members", "kept", Ranking(policy=policy))
    con.execute("CREATE TABLE decided AS SELECT c.doc_id, c.cluster_id, c.cluster_size,"
                f" k.kept_doc_id, c.doc_id = k.kept_doc_id AS keep FROM {clusters} c"
                " JOIN kept k ON c.doc_id = k.doc_id")


def _decide(con: duckdb.DuckDBPyConnection, clusters: ClusterStats, stage: str,
            files: ResultFiles, policy: str = "longest") -> TaskOutput:
    """From the tables `clusters` and `facts` of the session: the cluster rows with
    `kept_doc_id` and `keep` (the part), the drop decisions, and statistics; the rows are
    produced by DuckDB and streamed to local files."""
    _rank(con, "clusters", "facts", policy)
    return _outputs(con, clusters, stage, files, scalar(con, "SELECT count(*) FROM facts"))


def _outputs(con: duckdb.DuckDBPyConnection, clusters: ClusterStats, stage: str,
             files: ResultFiles, documents: int) -> TaskOutput:
    """The part (the relation `decided`, sorted), the drop decisions and the statistics of a
    partition of `documents` documents."""
    rows = files.write(con, "SELECT * FROM decided ORDER BY doc_id", OUTPUT_SCHEMA)
    decisions = files.write(
        con, f"SELECT doc_id, {literal(stage)} AS stage, 'drop' AS verdict,"
        f" {literal(REASONS[stage])} AS reason, cluster_size::DOUBLE AS value,"
        " cluster_id AS detail, kept_doc_id FROM decided WHERE NOT keep ORDER BY doc_id",
        DECISION_SCHEMA)
    dropped = scalar(con, "SELECT count(*) FROM decided WHERE NOT keep")
    stats = StageStats(records_in=documents, candidates=documents, docs_out=documents - dropped)
    stats.rejects[REASONS[stage]] = dropped
    stats.counts.update({f"cluster_size.{size}": count for size, count in con.sql(
        "SELECT cluster_size, count(*) FROM decided GROUP BY ALL ORDER BY ALL").fetchall()})
    stats.counts["clusters"] = clusters.clusters
    stats.counts["hot_buckets"] = clusters.hot_buckets
    stats.counts["capped_members"] = clusters.capped_members
    stats.counts["component_rounds"] = clusters.rounds
    return TaskOutput({"part": rows, "decisions": decisions}, stats)


# --- the exchange: grouping as map and reduce tasks -------------------------------------------

KEY_ROWS_SCHEMA = pa.schema([*FACTS_SCHEMA, pa.field("key", pa.uint64())])
KEY_ROW_BYTES = 96
"""About what one key row (doc_id, key, source, snapshot, text_chars) takes in DuckDB."""
BAND_ROW_BYTES = 64
"""About what one long band row (band, value, doc_id) takes in DuckDB."""
_BAND_MIX = 0xD1B54A32D192ED03  # odd: band i's values are moved by i times it, mod 2**64


@dataclass(frozen=True)
class _PartKeys:
    """Map task: one documents part's rows with a non-null exact key (its facts and `key`, the
    `url_hash` or `text_hash`) into the exchange, split by key. Returns the objects written
    and the part's document count."""

    store: Store
    partition: str
    exchange: Exchange
    key: str

    def __call__(self, index: int) -> tuple[dict[int, str], int]:
        part, facts = _read_facts(self.store, self.partition, index)
        keys = _key_hashes(part, self.key)
        rows = facts.append_column("key", keys).filter(pc.is_valid(keys))
        return self.exchange.write(f"{index:05d}", rows.cast(KEY_ROWS_SCHEMA), "key"), len(part)


@dataclass(frozen=True)
class _BucketTask:
    """A reduce task's common part: where its result object goes, and how many reduce tasks
    share the budget (`task_settings`)."""

    store: Store
    prefix: str
    workers: int

    def _store(self, files: ResultFiles, con: duckdb.DuckDBPyConnection, bucket: int,
               query: str, schema: pa.Schema) -> str:
        """`query`'s rows as the bucket's result object, streamed through a local file."""
        key = f"{self.prefix}/b{bucket:05d}.parquet"
        self.store.write_file(key, files.write(con, query, schema))
        files.remove()
        return key


@dataclass(frozen=True)
class KeyBucket(_BucketTask):
    """Reduce task: one bucket's exact-key rows grouped into clusters (every member of a key is
    in this bucket, so they are final) and ranked; the decided rows (`OUTPUT_SCHEMA`) written
    as one object. Returns its key and the bucket's clusters. Memory: the DuckDB share
    `task_settings(workers)`."""

    def __call__(self, task: tuple[int, list[str]]) -> tuple[str, int]:
        bucket, objects = task
        with duckdb_session(task_settings(self.workers)) as con, ResultFiles() as files:
            register_parts(con, "facts", self.store, objects, schema=KEY_ROWS_SCHEMA)
            stats = key_clusters_sql(con, "facts", "key", "clusters")
            _rank(con, "clusters", "facts")
            return self._store(files, con, bucket, "SELECT * FROM decided", OUTPUT_SCHEMA), \
                stats.clusters


@dataclass(frozen=True)
class _PartBands:
    """Map task: one `minhash_signatures` part's band hashes in long form (`BAND_ROWS_SCHEMA`,
    nulls left out) into the exchange, split by a key mixing the band's number into the value,
    so one value in two bands lands in independent buckets. Returns the objects written."""

    layout: PartitionLayout
    exchange: Exchange

    def __call__(self, index: int) -> dict[int, str]:
        return send_bands(self.layout.read_part(index), f"{index:05d}", self.exchange)


def send_bands(signatures: pa.Table, label: str, exchange: Exchange) -> dict[int, str]:
    """`signatures`' band hashes (`doc_id`, `band_NN`) into `exchange` in long form: the map
    side of near-duplicate grouping, for `_PartBands` and the scale benchmark."""
    tables = []
    for band in bands_of(signatures.column_names):
        rows = pa.table({"band": pa.array([band] * len(signatures), pa.string()),
                         "value": signatures[band], "doc_id": signatures["doc_id"]})
        rows = rows.filter(pc.is_valid(rows["value"])).cast(BAND_ROWS_SCHEMA)
        shift = np.uint64(int(band.removeprefix("band_")) * _BAND_MIX % 2**64)
        tables.append((rows, rows["value"].to_numpy() ^ shift))
    if not tables:
        return {}
    return exchange.write(label, pa.concat_tables([t for t, _ in tables]),
                          np.concatenate([keys for _, keys in tables]))


@dataclass(frozen=True)
class BandBucket(_BucketTask):
    """Reduce task: one bucket's band rows grouped per (band, value) into star edges, hot
    buckets sampled as in `near_duplicate_clusters_sql` (every row of a (band, value) is in
    this bucket); the edges (`EDGE_SCHEMA`) written as one object. Returns its key and the
    bucket's counts."""

    max_bucket_size: int = 10_000

    def __call__(self, task: tuple[int, list[str]]) -> tuple[str, ClusterStats]:
        bucket, objects = task
        with duckdb_session(task_settings(self.workers)) as con, ResultFiles() as files:
            register_parts(con, "bands", self.store, objects,
                           columns=BAND_ROWS_SCHEMA.names)
            stats = band_rows_edges_sql(con, "bands", self.max_bucket_size)
            return self._store(files, con, bucket, "SELECT * FROM edges", EDGE_SCHEMA), stats


def _reduced(output: TaskOutput, buckets: int) -> TaskOutput:
    """`output` with the number of reduce tasks the exchange ran (non-empty buckets)."""
    output.stats.counts["exchange_buckets"] = buckets
    return output


def reduce_stats(counts: list[ClusterStats]) -> ClusterStats:
    return ClusterStats(*(sum(getattr(c, name) for c in counts)
                          for name in ("buckets", "hot_buckets", "capped_members", "edges")))


@dataclass(frozen=True)
class ClusterWork:
    """One task for the whole partition, which runs the grouping as map and reduce tasks over
    an exchange in the store (`curation.exchange`) on the workers: map tasks split each part's
    keys (exact keys, or band values) by bucket, reduce tasks group one bucket each. Exact
    keys: a bucket's clusters and kept members are final, the parent only sorts them into the
    outputs. Near duplicates: the buckets' star edges go to the parent's connected components
    and ranking. `buckets` overrides the bucket count `bucket_count` picks."""

    documents: DocumentsInput
    stage: str
    settings: DedupSettings
    workers: int = 0
    buckets: int | None = None

    def __call__(self, index: int) -> TaskOutput:
        store, partition = self.documents.store, self.documents.partition
        with _work_area(store, PartitionLayout(store, self.stage, partition)) as work:
            if self.stage in _KEY_COLUMNS:
                return self._exact(work)
            return self._near(work)

    def _bucket_count(self, rows: int, row_bytes: int) -> int:
        return self.buckets or bucket_count(rows, row_bytes, workers=self.workers)

    def _reduce(self, reduce: Callable[[tuple[int, list[str]]], Any], exchange: Exchange,
                written: list[dict[int, str]]) -> list[Any]:
        tasks = [(bucket, objects) for bucket, objects in enumerate(exchange.gather(written))
                 if objects]
        reduced = map_tasks(reduce, tasks, self.workers)
        exchange.store.delete_prefix(exchange.prefix)  # read: its disk is free for what follows
        return reduced

    def _exact(self, work: str) -> TaskOutput:
        store, partition = self.documents.store, self.documents.partition
        rows = self.documents.layout.complete_manifest().rows
        exchange = Exchange(store, f"{work}/keys", self._bucket_count(rows, KEY_ROW_BYTES))
        mapped = map_tasks(_PartKeys(store, partition, exchange, _KEY_COLUMNS[self.stage]),
                           range(self.documents.task_count()), self.workers)
        reduced = self._reduce(KeyBucket(store, f"{work}/decided", self.workers), exchange,
                               [objects for objects, _ in mapped])
        with duckdb_session() as con, ResultFiles() as local:
            register_parts(con, "decided", store, [key for key, _ in reduced],
                           schema=OUTPUT_SCHEMA)
            clusters = ClusterStats(clusters=sum(count for _, count in reduced))
            return _reduced(_outputs(con, clusters, self.stage, local,
                                     sum(n for _, n in mapped)), len(reduced))

    def _near(self, work: str) -> TaskOutput:
        store, partition = self.documents.store, self.documents.partition
        signatures = PartitionLayout(store, MINHASH_SIGNATURES, partition)
        rows = signatures.complete_manifest().rows * self.settings.minhash.bands
        exchange = Exchange(store, f"{work}/bands", self._bucket_count(rows, BAND_ROW_BYTES))
        parts = len(signatures.complete_manifest().parts)
        written = map_tasks(_PartBands(signatures, exchange), range(parts), self.workers)
        reduced = self._reduce(
            BandBucket(store, f"{work}/edges", self.workers, self.settings.max_bucket_size),
            exchange, written)
        files = _part_facts(store, work, [partition], [], self.workers)
        with duckdb_session() as con, ResultFiles() as local:
            register_parts(con, "edges", store, [key for key, _ in reduced], schema=EDGE_SCHEMA)
            clusters = edge_clusters_sql(con, "edges", "clusters",
                                         reduce_stats([counts for _, counts in reduced]))
            register_parts(con, "facts", store, files.facts, schema=FACTS_SCHEMA)
            return _reduced(_decide(con, clusters, self.stage, local), len(reduced))


def run_partition_dedup(documents: DocumentsInput, stage: str, settings: DedupSettings,
                        upstream_versions: dict[str, str], workers: int = 0) -> PartitionResult:
    if stage == LINES:
        return run_line_dedup(documents, settings, upstream_versions, workers)
    work = ClusterWork(documents, stage, settings, workers)
    version = stable_hash({"kernel": KERNEL_VERSION, "stage": stage,
                           "settings": settings.model_dump(mode="json"),
                           "documents": documents.data_version(), **upstream_versions})
    run = PartitionRun(documents.store, stage, documents.partition, version)
    return run_partition(run, 1, work, workers=0)


# --- across partitions ------------------------------------------------------------------------


@dataclass(frozen=True)
class CrossRun:
    added: list[str]
    reused: list[str]
    links: int
    stats: StageStats
    manifest: Manifest


def cross_dedup_version(store: Store, partitions: list[str], settings: DedupSettings) -> str:
    """The links' version: the kernel, the settings and every partition's documents."""
    return stable_hash({"kernel": KERNEL_VERSION, "settings": settings.model_dump(),
                        DOCUMENTS: {p: DocumentsInput(store, p).data_version()
                                    for p in partitions}})


def run_cross_dedup(store: Store, partitions: list[str], settings: DedupSettings,
                    run_id: str | None = None, workers: int = 0) -> CrossRun:
    """Adds the partitions not yet in the index (only those are hashed), then clusters the links
    of all of them, names per cluster the member the default ranking keeps, and writes
    `cross_dedup[all]` under the partitions' versions, holding its lock throughout. The
    workers write each documents part's ranking facts (and the new partitions' keys) to the
    store; the index, the components and the ranking run in DuckDB over files, and the outputs
    are streamed to storage: memory is DuckDB's budget, not the number of documents."""
    layout = PartitionLayout(store, CROSS, ALL)
    version = cross_dedup_version(store, partitions, settings)
    with hold_locks(store, [CROSS], ALL, run_id=run_id):
        index_folder = local_index_folder(store)
        _drop_stale_index(store, partitions, settings, index_folder)
        index = CrossIndex(index_folder, max_bucket_size=settings.max_bucket_size)
        known = set(index.partitions())
        added = [p for p in partitions if p not in known]
        local = ResultFiles()
        try:
            with _work_area(store, layout) as work:
                files = _part_facts(store, work, partitions, added, workers)
                links = sum(_index_partition(index, store, partition, files.keys[partition],
                                             settings.cross_near_duplicates)
                            for partition in added)
                with duckdb_session() as con:
                    register_parts(con, "facts", store, files.facts, schema=FACTS_SCHEMA)
                    output = _decide(con, index.clusters_sql(con, "clusters"), CROSS, local)
            layout.prepare(version)
            manifest = Manifest(
                CROSS, ALL, version, [layout.write_part(0, output.tables["part"])],
                tables={"decisions": [layout.write_table("decisions", 0,
                                                         output.tables["decisions"])]},
                extra={"stats": output.stats.to_dict()})
            layout.write_manifest(manifest)
        finally:
            local.remove()
    return CrossRun(added, sorted(known), links, output.stats, manifest)


def _index_partition(index: CrossIndex, store: Store, partition: str, keys: list[str],
                     near: bool) -> int:
    """Adds `partition` to the index from its keys files (joined to its band hashes when
    `near`), staged in a local Parquet file by DuckDB (one session at a time, so the budget
    holds); returns its cross-partition links."""
    with tempfile.TemporaryDirectory(prefix="cross-keys-",
                                     dir=current_budget().spill_directory) as folder:
        path = Path(folder) / "keys.parquet"
        with duckdb_session() as con:
            register_parts(con, "new_keys", store, keys, schema=KEYS_SCHEMA)
            query = "SELECT * FROM new_keys"
            if near:
                register_table(con, "new_bands",
                               PartitionLayout(store, MINHASH_SIGNATURES, partition))
                query = ("SELECT k.*, b.* EXCLUDE (doc_id) FROM new_keys k"
                         " JOIN new_bands b ON k.doc_id = b.doc_id")
            copy_to_parquet(con, query, path)
        return index.index_partition(partition, path)


def _drop_stale_index(store: Store, partitions: list[str], settings: DedupSettings,
                      folder: Path) -> None:
    """The index is append-only: when an indexed partition's documents changed (or it is gone),
    or the settings changed, it is rebuilt from scratch rather than patched."""
    state = {"settings": settings.model_dump(mode="json"),
             "documents": {p: DocumentsInput(store, p).data_version() for p in partitions}}
    path = folder / "state.json"
    if path.exists():
        previous = json.loads(path.read_text())
        stale = previous["settings"] != state["settings"] or any(
            state["documents"].get(p) != v for p, v in previous["documents"].items())
        if stale:
            shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state, sort_keys=True))


def local_index_folder(store: Store) -> Path:
    """Where the cross index lives: under the root for a local store; on S3, a local working
    copy (the index's files would go through the Store, see `CrossIndex`)."""
    if isinstance(store, LocalStore):
        return Path(store.uri(f"{CROSS}/index"))
    return Path(tempfile.gettempdir()) / "corpus-cross-index" / stable_hash(store.uri(""))

