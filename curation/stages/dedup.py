"""The dedup stages of one partition (URL, exact text, MinHash near duplicates, boilerplate
lines) and the cross-partition links, around the kernels in `curation/dedup.py`.

Clusters never depend on a recipe. Each non-kept member gets a decision row whose `kept_doc_id`
names the member the default ranking keeps (curated first, earliest snapshot, longest text); the
mix applies the same ranking to the members that pass its selection.

Memory: each stage is one task for the whole partition (or all partitions, for `cross_dedup`),
but no whole-partition table is held in Python. Workers read one documents part at a time and
write its per-part facts (ranking facts, URL and text hashes, line hashes) as Parquet to a work
prefix in the store (`{asset}/{partition}/_work`, removed after); one DuckDB session under the
memory budget reads those files and the signatures, groups, finds the components, ranks, and
its sorted results are streamed into local Parquet files (`write_parquet_file`, the bytes
`parquet_bytes` gives) that the task uploads by streaming. Peak memory: one part in a worker,
DuckDB's `memory_limit`, one row group in the writer.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from curation.config import DedupSettings, stable_hash
from curation.dedup import (
    CLUSTER_SCHEMA,
    LINE_EDITS_ORDER,
    LINE_HASH_SCHEMA,
    ClusterStats,
    CrossIndex,
    Ranking,
    choose_kept_sql,
    frequent_lines_sql,
    key_clusters_sql,
    line_hash_table,
    near_duplicate_clusters_sql,
    text_hash,
    url_hash,
)
from curation.duck import (
    copy_to_parquet,
    current_budget,
    duckdb_session,
    literal,
    register_parts,
    register_table,
    scalar,
)
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
from curation.schema import DECISION_SCHEMA, EDIT_SCHEMA
from curation.stages.base import DocumentsInput
from curation.stats import StageStats
from curation.storage import ROW_GROUP_ROWS, LocalStore, Store, parquet_bytes, write_parquet_file
from curation.tasks import PartitionResult, PartitionRun, TaskOutput, hold_locks, run_partition

KERNEL_VERSION = "dedup-1"
URL, EXACT, NEAR, LINES, CROSS = URL_DEDUP, EXACT_DEDUP, DEDUP_CLUSTERS, LINE_DEDUP, CROSS_DEDUP
REASONS = {URL: "duplicate_url", EXACT: "duplicate_text", NEAR: "near_duplicate",
           CROSS: "cross_partition_duplicate"}
OUTPUT_SCHEMA = pa.schema([*CLUSTER_SCHEMA, pa.field("kept_doc_id", pa.string()),
                           pa.field("keep", pa.bool_())])


_KEY_COLUMNS = {URL: "url_hash", EXACT: "text_hash"}
WORK = "_work"
FACTS_SCHEMA = pa.schema([("doc_id", pa.string()), ("source", pa.string()),
                          ("snapshot", pa.string()), ("text_chars", pa.int32())])
KEYS_SCHEMA = pa.schema([("doc_id", pa.string()), ("url_hash", pa.uint64()),
                         ("text_hash", pa.uint64())])


@contextmanager
def _work_area(store: Store, layout: PartitionLayout) -> Iterator[str]:
    """A prefix in the store beside `layout` where workers leave per-part files for the
    parent's DuckDB (on S3 too, where Ray workers on other nodes write them); removed after,
    and before, in case a killed run left one."""
    prefix = f"{layout.prefix}/{WORK}"
    store.delete_prefix(prefix)
    try:
        yield prefix
    finally:
        store.delete_prefix(prefix)


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
        part = DocumentsInput(self.store, partition).layout.read_part(
            index, columns=["doc_id", "source", "snapshot", "url", "text"])
        name = f"{self.prefix}/{quote(partition, safe='')}-{index:05d}"
        facts = part.select(["doc_id", "source", "snapshot"]).append_column(
            "text_chars", pc.utf8_length(part["text"]))
        self.store.write_bytes(f"{name}-facts.parquet", parquet_bytes(facts.cast(FACTS_SCHEMA)))
        if partition not in self.keyed:
            return f"{name}-facts.parquet", None
        keys = pa.table({
            "doc_id": part["doc_id"],
            "url_hash": pa.array([url_hash(url) if url else None
                                  for url in part["url"].to_pylist()], pa.uint64()),
            "text_hash": pa.array([text_hash(text) for text in part["text"].to_pylist()],
                                  pa.uint64())}).cast(KEYS_SCHEMA)
        self.store.write_bytes(f"{name}-keys.parquet", parquet_bytes(keys))
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


class _LocalFiles:
    """Local Parquet files a step writes from DuckDB results (in the spill folder), streamed:
    the caller hands them on (`TaskOutput` deletes them once stored); on an error they are
    deleted here."""

    def __init__(self) -> None:
        self.paths: list[Path] = []

    def __enter__(self) -> _LocalFiles:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is not None:
            self.remove()

    def remove(self) -> None:
        for path in self.paths:
            path.unlink(missing_ok=True)

    def write(self, con: duckdb.DuckDBPyConnection, query: str,
              schema: pa.Schema | None = None) -> Path:
        """`query`'s rows as a Parquet file with `parquet_bytes`' layout (`schema`, default the
        query's own)."""
        handle, name = tempfile.mkstemp(prefix="dedup-", suffix=".parquet",
                                        dir=current_budget().spill_directory)
        os.close(handle)
        path = Path(name)
        self.paths.append(path)
        reader = con.sql(query).to_arrow_reader(ROW_GROUP_ROWS)
        write_parquet_file(path, schema or reader.schema, reader)
        return path


def _decide(con: duckdb.DuckDBPyConnection, clusters: ClusterStats, stage: str,
            files: _LocalFiles, policy: str = "longest") -> TaskOutput:
    """From the tables `clusters` and `facts` of the session: the cluster rows with
    `kept_doc_id` and `keep` (the part), the drop decisions, and statistics; the rows are
    produced by DuckDB and streamed to local files."""
    con.execute("CREATE TABLE members AS SELECT c.cluster_id, c.doc_id, f.source, f.snapshot,"
                " f.text_chars FROM clusters c JOIN facts f ON c.doc_id = f.doc_id")
    choose_kept_sql(con, "members", "kept", Ranking(policy=policy))
    con.execute("CREATE TABLE decided AS SELECT c.doc_id, c.cluster_id, c.cluster_size,"
                " k.kept_doc_id, c.doc_id = k.kept_doc_id AS keep FROM clusters c"
                " JOIN kept k ON c.doc_id = k.doc_id")
    rows = files.write(con, "SELECT * FROM decided ORDER BY doc_id", OUTPUT_SCHEMA)
    decisions = files.write(
        con, f"SELECT doc_id, {literal(stage)} AS stage, 'drop' AS verdict,"
        f" {literal(REASONS[stage])} AS reason, cluster_size::DOUBLE AS value,"
        " cluster_id AS detail, kept_doc_id FROM decided WHERE NOT keep ORDER BY doc_id",
        DECISION_SCHEMA)
    documents = scalar(con, "SELECT count(*) FROM facts")
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


@dataclass(frozen=True)
class ClusterWork:
    """One task for the whole partition: grouping needs every document's key. The workers
    write each documents part's facts to the store; DuckDB groups, finds the components,
    ranks and writes the outputs."""

    documents: DocumentsInput
    stage: str
    settings: DedupSettings
    workers: int = 0

    def __call__(self, index: int) -> TaskOutput:
        key = _KEY_COLUMNS.get(self.stage)
        store, partition = self.documents.store, self.documents.partition
        with _work_area(store, PartitionLayout(store, self.stage, partition)) as work:
            files = _part_facts(store, work, [partition], [partition] if key else [],
                                self.workers)
            with duckdb_session() as con, _LocalFiles() as local:
                register_parts(con, "facts", store, files.facts, schema=FACTS_SCHEMA)
                if key is None:
                    register_table(con, "signatures",
                                   PartitionLayout(store, MINHASH_SIGNATURES, partition))
                    clusters = near_duplicate_clusters_sql(
                        con, "signatures", "clusters",
                        max_bucket_size=self.settings.max_bucket_size)
                else:
                    register_parts(con, "keys", store, files.keys[partition],
                                   schema=KEYS_SCHEMA)
                    clusters = key_clusters_sql(con, "keys", key, "clusters")
                return _decide(con, clusters, self.stage, local)


@dataclass(frozen=True)
class _PartLineHashes:
    """One documents part's line hashes, written as Parquet under `prefix`; returns its key."""

    documents: DocumentsInput
    prefix: str

    def __call__(self, part: int) -> str:
        table = self.documents.read(part)
        key = f"{self.prefix}/lines-{part:05d}.parquet"
        self.documents.store.write_bytes(key, parquet_bytes(line_hash_table(
            table["doc_id"].to_pylist(), table["text"].to_pylist())))
        return key


@dataclass(frozen=True)
class LineWork:
    """One task for the whole partition (a line is frequent across all of it); the lines of
    each document part are hashed on the workers, most of the stage's time, and written to the
    store; DuckDB counts them and writes the outputs."""

    documents: DocumentsInput
    settings: DedupSettings
    workers: int = 0

    def __call__(self, index: int) -> TaskOutput:
        store = self.documents.store
        with _work_area(store, PartitionLayout(store, LINES, self.documents.partition)) as work:
            keys = map_tasks(_PartLineHashes(self.documents, work),
                             range(self.documents.task_count()), self.workers)
            with duckdb_session() as con, _LocalFiles() as local:
                register_parts(con, "lines", store, keys, schema=LINE_HASH_SCHEMA)
                frequent = frequent_lines_sql(con, "lines",
                                              max_documents=self.settings.line_max_documents,
                                              min_chars=self.settings.line_min_chars)
                part = local.write(con, "SELECT * FROM line_documents ORDER BY doc_id")
                edits = local.write(
                    con, f"SELECT doc_id, {literal(LINES)} AS stage, 'boilerplate_line' AS kind,"
                    ' line, NULL::BIGINT AS start, NULL::BIGINT AS "end" FROM line_edits'
                    f" ORDER BY {LINE_EDITS_ORDER}", EDIT_SCHEMA)
                decisions = local.write(
                    con, f"SELECT doc_id, {literal(LINES)} AS stage, 'drop' AS verdict,"
                    " 'empty_after_edits' AS reason, lines_removed::DOUBLE AS value,"
                    " NULL::VARCHAR AS detail, NULL::VARCHAR AS kept_doc_id FROM line_documents"
                    " WHERE empty_after_edits ORDER BY doc_id", DECISION_SCHEMA)
                lines, documents = con.sql(
                    "SELECT count(*), count(DISTINCT doc_id) FROM lines").fetchall()[0]
                edited, empty = con.sql(
                    "SELECT count(*), count(*) FILTER (WHERE empty_after_edits)"
                    " FROM line_documents").fetchall()[0]
                removed = scalar(con, "SELECT count(*) FROM line_edits")
        stats = StageStats(records_in=documents, candidates=documents, docs_out=documents - empty)
        stats.rejects["empty_after_edits"] = empty
        stats.counts.update({"lines": lines, "lines_removed": removed, "frequent_lines": frequent,
                             "documents_edited": edited})
        return TaskOutput({"part": part, "edits": edits, "decisions": decisions}, stats)


def run_partition_dedup(documents: DocumentsInput, stage: str, settings: DedupSettings,
                        upstream_versions: dict[str, str], workers: int = 0) -> PartitionResult:
    work = LineWork(documents, settings, workers) if stage == LINES else ClusterWork(
        documents, stage, settings, workers)
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
        local = _LocalFiles()
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

