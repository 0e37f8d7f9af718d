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
and the parent's session only sorts them into the outputs. For near duplicates under FineWeb
parity (`near_dup_verification: none`) a bucket writes its star edges (hot buckets sampled as in
`near_duplicate_clusters_sql`). With verification (the default) the map tasks also send each
document's compact signature to a second exchange keyed by doc_id; a band bucket writes its
candidate pairs (`candidate_pairs_sql`) to a third, keyed by `doc_id`; a reduce per doc_id
bucket attaches that document's signature and re-sends the pair keyed by `other_doc_id`; a last
reduce per bucket compares the two signatures and writes the pairs that pass
(`verify_pairs_sql`): one bucket of pairs and signatures per task, and a signature crosses the
exchange once, not once per band (exchange bytes a document in
`benchmarks/results/near_dup_recall.md`). The parent's session runs the connected components
over the edges (or, on a Ray cluster, large-star/small-star tasks over the exchange do:
`dedup.components`, `curation.star_components`) and ranks, with the per-part ranking facts the
workers wrote. The parent's
DuckDB session is under the memory budget and its sorted results are streamed into local
Parquet files (`write_parquet_file`, the bytes `parquet_bytes` gives) that the task uploads by
streaming. Peak memory: one part in a map task, one bucket within its
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
import pyarrow.parquet as pq

from curation.config import DedupSettings, stable_hash
from curation.dedup import (
    BAND_ROWS_SCHEMA,
    CLUSTER_SCHEMA,
    EDGE_SCHEMA,
    PAIR_SCHEMA,
    SIGNATURE_ROWS_SCHEMA,
    SIGNED_PAIR_SCHEMA,
    ClusterStats,
    CrossIndex,
    Ranking,
    Verification,
    band_rows_edges_sql,
    bands_of,
    candidate_pairs_sql,
    choose_kept_sql,
    key_clusters_sql,
    rebanded_columns,
    rebanded_rows,
    signature_table,
    stored_edge_clusters_sql,
    string_hash,
    text_hash,
    url_hash,
    verify_pairs_sql,
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
from curation.exchange import Exchange, Slice, bucket_count, register_slices, task_settings
from curation.executor import map_tasks
from curation.graph import (
    ALL,
    CROSS_DEDUP,
    DEDUP_CLUSTERS,
    DOCUMENTS,
    EXACT_DEDUP,
    LINE_DEDUP,
    MINHASH_SIGNATURES,
    SEMANTIC_DEDUP,
    URL_DEDUP,
)
from curation.minhash import SIGNATURE_COLUMN
from curation.partition import Manifest, PartitionLayout
from curation.schema import DECISION_SCHEMA
from curation.stages.base import DocumentsInput
from curation.stages.line_dedup import run_line_dedup
from curation.star_components import TaskPlacement
from curation.stats import StageStats
from curation.storage import LocalStore, Store, parquet_bytes, read_parquet
from curation.tasks import PartitionResult, PartitionRun, TaskOutput, hold_locks, run_partition

KERNEL_VERSION = "dedup-2"
URL, EXACT, NEAR, LINES, CROSS = URL_DEDUP, EXACT_DEDUP, DEDUP_CLUSTERS, LINE_DEDUP, CROSS_DEDUP
REASONS = {URL: "duplicate_url", EXACT: "duplicate_text", NEAR: "near_duplicate",
           CROSS: "cross_partition_duplicate", SEMANTIC_DEDUP: "semantic_duplicate"}
OUTPUT_SCHEMA = pa.schema([*CLUSTER_SCHEMA, pa.field("kept_doc_id", pa.string()),
                           pa.field("keep", pa.bool_())])


_KEY_COLUMNS = {URL: "url_hash", EXACT: "text_hash"}
FACTS_SCHEMA = pa.schema([("doc_id", pa.string()), ("source", pa.string()),
                          ("snapshot", pa.string()), ("text_chars", pa.int32())])
KEYS_SCHEMA = pa.schema([("doc_id", pa.string()), ("url_hash", pa.uint64()),
                         ("text_hash", pa.uint64())])


@contextmanager
def work_area(store: Store, layout: PartitionLayout) -> Iterator[str]:
    """A prefix in the store beside `layout` where workers leave per-part files for the
    parent's DuckDB (on S3 too, where Ray workers on other nodes write them); removed after,
    and before, in case a killed run left one."""
    prefix = layout.scratch_prefix
    store.delete_prefix(prefix)
    try:
        yield prefix
    finally:
        store.delete_prefix(prefix)


def read_facts(store: Store, partition: str, index: int) -> tuple[pa.Table, pa.Table]:
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
        part, facts = read_facts(self.store, partition, index)
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
    return decided_outputs(con, clusters, stage, files,
                           scalar(con, "SELECT count(*) FROM facts"))


def decided_outputs(con: duckdb.DuckDBPyConnection, clusters: ClusterStats, stage: str,
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
    stats.counts["candidate_pairs"] = clusters.candidates
    return TaskOutput({"part": rows, "decisions": decisions}, stats)


# --- the exchange: grouping as map and reduce tasks -------------------------------------------

KEY_ROWS_SCHEMA = pa.schema([*FACTS_SCHEMA, pa.field("key", pa.uint64())])
KEY_ROW_BYTES = 96
"""About what one key row (doc_id, key, source, snapshot, text_chars) takes in DuckDB."""
BAND_ROW_BYTES = 64
"""About what one long band row (band, value, doc_id) takes in DuckDB."""
SIGNATURE_ROW_BYTES = 320
"""About what one document's compact signature row (doc_id, 224 bytes) takes in DuckDB, with
its share of candidate pairs."""
_BAND_MIX = 0xD1B54A32D192ED03  # odd: band i's values are moved by i times it, mod 2**64


@dataclass(frozen=True)
class _PartKeys:
    """Map task: one documents part's rows with a non-null exact key (its facts and `key`, the
    `url_hash` or `text_hash`) into the exchange, split by key. Returns the slices written
    and the part's document count."""

    store: Store
    partition: str
    exchange: Exchange
    key: str

    def __call__(self, index: int) -> tuple[dict[int, Slice], int]:
        part, facts = read_facts(self.store, self.partition, index)
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

    def __call__(self, task: tuple[int, list[Slice]]) -> tuple[str, int]:
        bucket, slices = task
        with duckdb_session(task_settings(self.workers)) as con, ResultFiles() as files:
            register_slices(con, "facts", self.store, slices, schema=KEY_ROWS_SCHEMA)
            stats = key_clusters_sql(con, "facts", "key", "clusters")
            _rank(con, "clusters", "facts")
            return self._store(files, con, bucket, "SELECT * FROM decided", OUTPUT_SCHEMA), \
                stats.clusters


@dataclass(frozen=True)
class _PartBands:
    """Map task: one `minhash_signatures` part's band hashes in long form (`BAND_ROWS_SCHEMA`,
    nulls left out) into the exchange, split by a key mixing the band's number into the value,
    so one value in two bands lands in independent buckets. With a `verification`, the bands
    are the compact signature re-banded to its shape, and the signatures go to `signed`, keyed
    by doc_id. Returns the slices written to each."""

    layout: PartitionLayout
    exchange: Exchange
    verification: Verification | None = None
    signed: Exchange | None = None

    def __call__(self, index: int) -> tuple[dict[int, Slice], dict[int, Slice]]:
        part = self.layout.read_part(index)
        if self.verification is None or self.signed is None:
            return send_bands(part, f"{index:05d}", self.exchange), {}
        _require_signature(part, self.layout.partition)
        rows = rebanded_rows(part, self.verification)
        signatures = signature_table(part)
        return (self.exchange.write(f"{index:05d}", rows, band_keys(rows)),
                self.signed.write(f"{index:05d}", signatures, doc_keys(signatures["doc_id"])))


def doc_keys(doc_ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The exchange key of a doc_id (`string_hash`): a candidate pair meets the signatures
    of its documents in the bucket of the doc_id it is keyed by."""
    return np.fromiter((string_hash(doc_id) for doc_id in doc_ids.to_pylist()),
                       dtype=np.uint64, count=len(doc_ids))


def send_bands(signatures: pa.Table, label: str, exchange: Exchange) -> dict[int, Slice]:
    """`signatures`' band hashes (`doc_id`, `band_NN`) into `exchange` in long form: the map
    side of near-duplicate grouping, for `_PartBands` and the scale benchmark."""
    tables = []
    for band in bands_of(signatures.column_names):
        rows = pa.table({"band": pa.array([band] * len(signatures), pa.string()),
                         "value": signatures[band], "doc_id": signatures["doc_id"]})
        tables.append(rows.filter(pc.is_valid(rows["value"])).cast(BAND_ROWS_SCHEMA))
    if not tables:
        return {}
    rows = pa.concat_tables(tables)
    return exchange.write(label, rows, band_keys(rows))


def band_keys(rows: pa.Table) -> np.ndarray:
    """The exchange key of each long band row: its value moved by its band's number, so one
    value in two bands lands in independent buckets."""
    numbers = pc.cast(pc.utf8_slice_codeunits(rows["band"], 5), pa.uint64()).to_numpy()
    with np.errstate(over="ignore"):
        return rows["value"].to_numpy() ^ (numbers * np.uint64(_BAND_MIX))


@dataclass(frozen=True)
class BandBucket(_BucketTask):
    """Reduce task: one bucket's band rows grouped per (band, value) into star edges, hot
    buckets sampled as in `near_duplicate_clusters_sql` (every row of a (band, value) is in
    this bucket); the edges (`EDGE_SCHEMA`) written as one object. Returns its key and the
    bucket's counts."""

    max_bucket_size: int = 10_000

    def __call__(self, task: tuple[int, list[Slice]]) -> tuple[str, ClusterStats]:
        bucket, slices = task
        with duckdb_session(task_settings(self.workers)) as con, ResultFiles() as files:
            register_slices(con, "bands", self.store, slices,
                            columns=BAND_ROWS_SCHEMA.names)
            stats = band_rows_edges_sql(con, "bands", self.max_bucket_size)
            return self._store(files, con, bucket, "SELECT * FROM edges", EDGE_SCHEMA), stats


@dataclass(frozen=True)
class PairBucket:
    """Verification, round 1 (reduce of the band exchange): one bucket's candidate pairs
    (`candidate_pairs_sql`) into the `pairs` exchange, keyed by `doc_id`. Returns the slices
    written and the bucket's counts."""

    pairs: Exchange
    workers: int
    verification: Verification
    max_bucket_size: int = 10_000

    def __call__(self, task: tuple[int, list[Slice]]) -> tuple[dict[int, Slice], ClusterStats]:
        bucket, slices = task
        with duckdb_session(task_settings(self.workers)) as con:
            register_slices(con, "bands", self.pairs.store, slices,
                            columns=BAND_ROWS_SCHEMA.names)
            buckets, hot, capped, candidates = candidate_pairs_sql(
                con, "bands", self.max_bucket_size, self.verification.window)
            pairs = con.sql("SELECT * FROM pairs").to_arrow_table().cast(PAIR_SCHEMA)
        stats = ClusterStats(buckets, hot, capped, candidates=candidates)
        return self.pairs.write(f"{bucket:05d}", pairs, doc_keys(pairs["doc_id"])), stats


@dataclass(frozen=True)
class SignPairs:
    """Verification, round 2 (per doc_id bucket): the bucket's distinct candidate pairs with
    the signature of their `doc_id` (in the same bucket of `signed`), into the `signed_pairs`
    exchange keyed by `other_doc_id`. Returns the slices written."""

    signed_pairs: Exchange
    workers: int

    def __call__(self, task: tuple[int, list[Slice], list[Slice]]) -> dict[int, Slice]:
        bucket, pairs, signatures = task
        with duckdb_session(task_settings(self.workers)) as con:
            register_slices(con, "pairs", self.signed_pairs.store, pairs, schema=PAIR_SCHEMA)
            register_slices(con, "sigs", self.signed_pairs.store, signatures,
                            schema=SIGNATURE_ROWS_SCHEMA)
            signed = con.sql("SELECT p.doc_id, p.other_doc_id, s.signature FROM (SELECT"
                             " DISTINCT * FROM pairs) p JOIN sigs s ON p.doc_id = s.doc_id"
                             ).to_arrow_table().cast(SIGNED_PAIR_SCHEMA)
        return self.signed_pairs.write(f"{bucket:05d}", signed, doc_keys(signed["other_doc_id"]))


@dataclass(frozen=True)
class VerifyBucket(_BucketTask):
    """Verification, round 3 (per doc_id bucket): the signed pairs whose `other_doc_id` is in
    this bucket, compared with its signature (`verify_pairs_sql`); the verified edges
    (`EDGE_SCHEMA`) written as one object. Returns its key."""

    threshold: float = 0.6

    def __call__(self, task: tuple[int, list[Slice], list[Slice]]) -> str:
        bucket, pairs, signatures = task
        with duckdb_session(task_settings(self.workers)) as con, ResultFiles() as files:
            register_slices(con, "pairs", self.store, pairs, schema=SIGNED_PAIR_SCHEMA)
            register_slices(con, "sigs", self.store, signatures, schema=SIGNATURE_ROWS_SCHEMA)
            verify_pairs_sql(con, "SELECT p.doc_id, p.other_doc_id, p.signature AS a,"
                             " s.signature AS b FROM pairs p JOIN sigs s"
                             " ON p.other_doc_id = s.doc_id", self.threshold)
            return self._store(files, con, bucket, "SELECT * FROM edges", EDGE_SCHEMA)


def _reduced(output: TaskOutput, buckets: int) -> TaskOutput:
    """`output` with the number of reduce tasks the exchange ran (non-empty buckets)."""
    output.stats.counts["exchange_buckets"] = buckets
    return output


def reduce_stats(counts: list[ClusterStats]) -> ClusterStats:
    names = ("buckets", "hot_buckets", "capped_members", "edges", "candidates")
    return ClusterStats(**{name: sum(getattr(c, name) for c in counts) for name in names})


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
        with work_area(store, PartitionLayout(store, self.stage, partition)) as work:
            if self.stage in _KEY_COLUMNS:
                return self._exact(work)
            return self._near(work)

    def _bucket_count(self, rows: int, row_bytes: int) -> int:
        return self.buckets or bucket_count(rows, row_bytes, workers=self.workers)

    def _reduce(self, reduce: Callable[[tuple[int, list[Slice]]], Any], exchange: Exchange,
                written: list[dict[int, Slice]]) -> list[Any]:
        tasks = [(bucket, slices) for bucket, slices in enumerate(exchange.gather(written))
                 if slices]
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
                               [slices for slices, _ in mapped])
        with duckdb_session() as con, ResultFiles() as local:
            register_parts(con, "decided", store, [key for key, _ in reduced],
                           schema=OUTPUT_SCHEMA)
            clusters = ClusterStats(clusters=sum(count for _, count in reduced))
            return _reduced(decided_outputs(con, clusters, self.stage, local,
                                     sum(n for _, n in mapped)), len(reduced))

    def _near(self, work: str) -> TaskOutput:
        store, partition = self.documents.store, self.documents.partition
        signatures = PartitionLayout(store, MINHASH_SIGNATURES, partition)
        verification = self.settings.verification()
        documents = signatures.complete_manifest().rows
        bands = self.settings.minhash.bands if verification is None else verification.bands
        exchange = Exchange(store, f"{work}/bands",
                            self._bucket_count(documents * bands, BAND_ROW_BYTES))
        signed = Exchange(store, f"{work}/signatures",
                          self._bucket_count(documents, SIGNATURE_ROW_BYTES))
        parts = len(signatures.complete_manifest().parts)
        mapped = map_tasks(_PartBands(signatures, exchange, verification, signed),
                           range(parts), self.workers)
        written = [bands for bands, _ in mapped]
        if verification is None:
            reduced = self._reduce(
                BandBucket(store, f"{work}/edges", self.workers, self.settings.max_bucket_size),
                exchange, written)
            edges, stats = [key for key, _ in reduced], [counts for _, counts in reduced]
        else:
            edges, stats = self._verify(work, exchange, written, signed,
                                        [sigs for _, sigs in mapped], verification)
        files = _part_facts(store, work, [partition], [], self.workers)
        placement = TaskPlacement(store, f"{work}/components", self.workers,
                                  self.settings.components)
        with duckdb_session() as con, ResultFiles() as local:
            clusters = stored_edge_clusters_sql(con, edges, "clusters", reduce_stats(stats),
                                                placement)
            register_parts(con, "facts", store, files.facts, schema=FACTS_SCHEMA)
            return _reduced(_decide(con, clusters, self.stage, local), len(stats))

    def _verify(self, work: str, exchange: Exchange, written: list[dict[int, Slice]],
                signed: Exchange, signatures: list[dict[int, Slice]],
                verification: Verification) -> tuple[list[str], list[ClusterStats]]:
        """The band buckets' candidate pairs, verified in two more rounds keyed by doc_id (a
        pair meets its first document's signature, then its second's): the verified edges'
        objects and the band buckets' counts. A document's signature crosses the exchange
        once, not once per band."""
        store = exchange.store
        pairs = Exchange(store, f"{work}/pairs", signed.buckets)
        reduced = self._reduce(PairBucket(pairs, self.workers, verification,
                                          self.settings.max_bucket_size), exchange, written)
        by_doc = signed.gather(signatures)
        first = pairs.gather([slices for slices, _ in reduced])
        signed_pairs = Exchange(store, f"{work}/signed_pairs", signed.buckets)
        second = map_tasks(SignPairs(signed_pairs, self.workers),
                           [(b, first[b], by_doc[b]) for b in range(signed.buckets) if first[b]],
                           self.workers)
        store.delete_prefix(pairs.prefix)
        candidates = signed_pairs.gather(second)
        edges = map_tasks(VerifyBucket(store, f"{work}/edges", self.workers,
                                       verification.threshold),
                          [(b, candidates[b], by_doc[b]) for b in range(signed.buckets)
                           if candidates[b]], self.workers)
        store.delete_prefix(signed_pairs.prefix)
        store.delete_prefix(signed.prefix)
        return edges, [counts for _, counts in reduced]


def run_partition_dedup(documents: DocumentsInput, stage: str, settings: DedupSettings,
                        upstream_versions: dict[str, str], workers: int = 0) -> PartitionResult:
    if stage == LINES:
        return run_line_dedup(documents, settings, upstream_versions, workers)
    work = ClusterWork(documents, stage, settings, workers)
    version = stable_hash({"kernel": KERNEL_VERSION, "stage": stage,
                           "settings": settings.shaping(),
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
    return stable_hash({"kernel": KERNEL_VERSION, "settings": settings.shaping(),
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
        index = CrossIndex(index_folder, max_bucket_size=settings.max_bucket_size,
                           verification=settings.verification())
        known = set(index.partitions())
        added = [p for p in partitions if p not in known]
        local = ResultFiles()
        try:
            with work_area(store, layout) as work:
                files = _part_facts(store, work, partitions, added, workers)
                links = sum(_index_partition(index, store, partition, files.keys[partition],
                                             settings.cross_near_duplicates)
                            for partition in added)
                with duckdb_session() as con:
                    register_parts(con, "facts", store, files.facts, schema=FACTS_SCHEMA)
                    placement = TaskPlacement(store, f"{work}/components", workers,
                                              settings.components)
                    output = _decide(con, index.clusters_sql(con, "clusters", placement),
                                     CROSS, local)
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
    `near`: the stored ones, or with the index's verification the signatures re-banded part
    by part), staged in a local Parquet file by DuckDB (one session at a time, so the budget
    holds); returns its cross-partition links."""
    with tempfile.TemporaryDirectory(prefix="cross-keys-",
                                     dir=current_budget().spill_directory) as folder:
        path = Path(folder) / "keys.parquet"
        with duckdb_session() as con:
            register_parts(con, "new_keys", store, keys, schema=KEYS_SCHEMA)
            query = "SELECT * FROM new_keys"
            if near:
                signatures = PartitionLayout(store, MINHASH_SIGNATURES, partition)
                if index.verification is None:
                    register_table(con, "new_bands", signatures)
                else:
                    bands = Path(folder) / "bands.parquet"
                    _write_rebanded(signatures, index.verification, bands)
                    con.execute(f"CREATE VIEW new_bands AS SELECT * FROM"
                                f" read_parquet({literal(str(bands))})")
                query = ("SELECT k.*, b.* EXCLUDE (doc_id) FROM new_keys k"
                         " JOIN new_bands b ON k.doc_id = b.doc_id")
            copy_to_parquet(con, query, path)
        return index.index_partition(partition, path)


def _require_signature(signatures: pa.Table, partition: str) -> None:
    """Verification needs the compact signature, which older `minhash_signatures` lack."""
    if SIGNATURE_COLUMN not in signatures.column_names:
        raise ValueError(
            f"{MINHASH_SIGNATURES} of {partition} has no {SIGNATURE_COLUMN!r} column (written"
            " before near-duplicate verification): rematerialize it, or set"
            " dedup.near_dup_verification: none")


def _write_rebanded(signatures: PartitionLayout, verification: Verification,
                    path: Path) -> None:
    """The partition's signatures re-banded in the verification's shape (`rebanded_columns`),
    one stored part at a time, into one local Parquet file."""
    writer = None
    try:
        for part in signatures.complete_manifest().table_parts("part"):
            table = read_parquet(signatures.store, part.key)
            _require_signature(table, signatures.partition)
            table = rebanded_columns(table, verification)
            writer = writer or pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()


def _drop_stale_index(store: Store, partitions: list[str], settings: DedupSettings,
                      folder: Path) -> None:
    """The index is append-only: when an indexed partition's documents changed (or it is gone),
    or the settings changed, it is rebuilt from scratch rather than patched."""
    state = {"settings": settings.shaping(),
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

