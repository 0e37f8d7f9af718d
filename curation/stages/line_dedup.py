"""The `line_dedup` stage: normalised lines that recur in more than `line_max_documents`
documents of a partition are removed (the rule of `curation.dedup.frequent_lines_sql`), as three
rounds of tasks on the local pool or Ray, over a hash-partitioned exchange in the store
(`curation.exchange`):

1. **Hash** (one task per documents part): hash the part's lines; keep the lines long enough
   to count (`line_min_chars`) in the store for the edit round, and send each distinct one to
   the exchange once, keyed by its hash, with the number of the part's documents that hold it
   (a combiner: a boilerplate line in millions of documents arrives as one row per part). The
   bucket count follows from the rows the first part sends per document.
2. **Count** (one task per bucket): a bucket holds every part's count of its lines, so it finds
   its frequent lines (documents over the threshold, summed over parts) alone; it writes them
   back to the store split by the documents parts that hold them.
3. **Edit** (the partition's tasks, one per documents part): a part's counted lines that are
   frequent become its `edits`, its edited documents (`part`) and its `empty_after_edits`
   drops. The outputs have one part per documents part, so `scrubbed` reads one part's edits,
   never the partition's.

Memory: a hash task holds one documents part; a count task one bucket of (line, part) counts,
in DuckDB within its share of the budget (`curation.exchange.task_settings`), however skewed
the lines; an edit task one part's counted lines and the frequent ones among them, in DuckDB
likewise. Nothing holds the partition.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curation.config import DedupSettings, stable_hash
from curation.dedup import LINE_EDITS_ORDER, line_hash_table
from curation.duck import ResultFiles, duckdb_session, literal, register_parts, scalar
from curation.exchange import (
    Exchange,
    Slice,
    bucket_count,
    register_slices,
    scratch_bytes,
    task_settings,
)
from curation.executor import map_tasks
from curation.graph import LINE_DEDUP
from curation.partition import PartitionLayout
from curation.schema import DECISION_SCHEMA, EDIT_SCHEMA
from curation.stages.base import DocumentsInput
from curation.stats import StageStats
from curation.storage import Store
from curation.tasks import PartitionResult, PartitionRun, Planned, TaskOutput, run_partition

KERNEL_VERSION = "line-dedup-2"
LINES_PER_DOCUMENT = 16
"""For sizing the exchange when the first part has no documents: a mean of non-blank lines of
at least `line_min_chars` per extracted web page, on the generous side (a bucket that outgrows
its task's share spills; one that is too small only adds slices)."""
EXCHANGE_ROW_BYTES = 32
"""What one exchanged row takes in a count task's DuckDB (hash, documents, part)."""

LINES_SCHEMA = pa.schema([("line_hash", pa.uint64()), ("doc_id", pa.string()),
                          ("line", pa.int32())])
PART_COUNTS_SCHEMA = pa.schema([("line_hash", pa.uint64()), ("documents", pa.int64()),
                                ("part", pa.int32())])
FREQUENT_SCHEMA = pa.schema([("line_hash", pa.uint64())])


@dataclass(frozen=True)
class HashedPart:
    """What a hash task sends on: its exchange slices (bucket -> slice), the key of its counted
    lines (`LINES_SCHEMA`), and its statistics."""

    exchanged: dict[int, Slice]
    lines_key: str
    lines: int
    documents: int


def _combined(lines: pa.Table, part: int, min_chars: int) -> tuple[pa.Table, pa.Table]:
    """A part's counted lines (`LINES_SCHEMA`: those of at least `min_chars`) and what its
    hash task sends: each distinct one once, with the number of the part's documents that hold
    it (`PART_COUNTS_SCHEMA`)."""
    counted = lines.filter(pc.greater_equal(lines["chars"], min_chars)).select(
        LINES_SCHEMA.names).cast(LINES_SCHEMA)
    per_line = counted.group_by("line_hash").aggregate([("doc_id", "count_distinct")])
    combined = per_line.rename_columns(["line_hash", "documents"]).append_column(
        "part", pa.array(np.full(per_line.num_rows, part, np.int32)))
    return counted, combined.cast(PART_COUNTS_SCHEMA)


def send_lines(lines: pa.Table, part: int, exchange: Exchange, min_chars: int,
               lines_prefix: str) -> HashedPart:
    """Round 1 for one part's line hashes (`LINE_HASH_SCHEMA`). The combiner: each distinct
    line of at least `min_chars` goes to the exchange once, with the number of the part's
    documents that hold it, so a line in millions of documents reaches its count task as one
    row per part, not one per occurrence. The counted lines themselves stay under
    `lines_prefix` for the part's edit task."""
    counted, combined = _combined(lines, part, min_chars)
    exchanged = exchange.write(f"part-{part:05d}", combined, "line_hash")
    key = f"{lines_prefix}/part-{part:05d}.parquet"
    exchange.store.write_bytes(key, scratch_bytes(counted))
    return HashedPart(exchanged, key, lines.num_rows, len(pc.unique(lines["doc_id"])))


def exchange_rows(source: LineSource, rows: int, min_chars: int) -> int:
    """The rows the hash round will send for `rows` documents, from the first part's rate
    (one part's hashing, so that the bucket count follows the data: too many buckets cost
    map tasks x buckets slices, which as objects dominated the round at 10^8 documents)."""
    lines = source(0)
    documents = len(pc.unique(lines["doc_id"]))
    if not documents:
        return rows * LINES_PER_DOCUMENT
    return math.ceil(_combined(lines, 0, min_chars)[1].num_rows / documents * rows)


class LineSource(Protocol):
    """Picklable: the line hashes (`LINE_HASH_SCHEMA`) of one part of the input."""

    def __call__(self, part: int) -> pa.Table: ...


@dataclass(frozen=True)
class _DocumentLines:
    """The stage's line source: a documents part, hashed."""

    documents: DocumentsInput

    def __call__(self, part: int) -> pa.Table:
        table = self.documents.read(part)
        return line_hash_table(table["doc_id"].to_pylist(), table["text"].to_pylist())


@dataclass(frozen=True)
class _HashTask:
    source: LineSource
    exchange: Exchange
    min_chars: int
    lines_prefix: str

    def __call__(self, part: int) -> HashedPart:
        return send_lines(self.source(part), part, self.exchange, self.min_chars,
                          self.lines_prefix)


@dataclass(frozen=True)
class CountBucket:
    """A count task: the bucket's frequent lines (more than `max_documents` documents over all
    parts), written per documents part that holds them (`{prefix}/frequent/b{bucket}-p{part}`).
    Returns (frequent lines, part -> object key)."""

    store: Store
    prefix: str
    max_documents: int
    workers: int

    def __call__(self, task: tuple[int, list[Slice]]) -> tuple[int, dict[int, str]]:
        bucket, slices = task
        written: dict[int, str] = {}
        with duckdb_session(task_settings(self.workers)) as con:
            register_slices(con, "part_counts", self.store, slices, schema=PART_COUNTS_SCHEMA)
            con.execute("CREATE TABLE frequent AS SELECT line_hash FROM part_counts"
                        " GROUP BY line_hash HAVING sum(documents) > ?", [self.max_documents])
            reader = con.sql(
                "SELECT c.part, c.line_hash FROM part_counts c SEMI JOIN frequent f"
                " ON c.line_hash = f.line_hash ORDER BY c.part").to_arrow_reader(1 << 16)
            pending: list[pa.RecordBatch] = []
            for batch in reader:
                for part in pc.unique(batch["part"]).to_pylist():
                    if pending and pending[0]["part"][0].as_py() != part:
                        written.update(self._write(bucket, pending))
                        pending = []
                    pending.append(batch.filter(pc.equal(batch["part"], part)))
            if pending:
                written.update(self._write(bucket, pending))
            return scalar(con, "SELECT count(*) FROM frequent"), written

    def _write(self, bucket: int, batches: list[pa.RecordBatch]) -> dict[int, str]:
        part = batches[0]["part"][0].as_py()
        key = f"{self.prefix}/frequent/b{bucket:05d}-p{part:05d}.parquet"
        table = pa.Table.from_batches(batches).drop_columns(["part"]).cast(FREQUENT_SCHEMA)
        self.store.write_bytes(key, scratch_bytes(table))
        return {part: key}


@dataclass(frozen=True)
class EditPart:
    """An edit task: one documents part's edits, edited documents and drops, from its counted
    lines and the frequent lines it holds (every bucket's)."""

    store: Store
    frequent: tuple[tuple[str, ...], ...]
    hashed: tuple[HashedPart, ...]
    frequent_lines: int
    buckets: int
    workers: int

    def __call__(self, index: int) -> TaskOutput:
        hashed = self.hashed[index]
        with duckdb_session(task_settings(self.workers)) as con, ResultFiles() as local:
            register_parts(con, "frequent", self.store, list(self.frequent[index]),
                           schema=FREQUENT_SCHEMA)
            register_parts(con, "counted", self.store, [hashed.lines_key], schema=LINES_SCHEMA)
            con.execute("CREATE TABLE removed AS SELECT doc_id, line FROM counted"
                        " SEMI JOIN frequent USING (line_hash)")
            con.execute(
                "CREATE TABLE line_documents AS SELECT r.doc_id, r.lines_removed,"
                " r.lines_removed = c.counted_lines AS empty_after_edits FROM"
                " (SELECT doc_id, count(*) AS lines_removed FROM removed GROUP BY doc_id) r"
                " JOIN (SELECT doc_id, count(*) AS counted_lines FROM counted"
                " GROUP BY doc_id) c USING (doc_id)")
            part = local.write(con, "SELECT * FROM line_documents ORDER BY doc_id")
            edits = local.write(
                con, f"SELECT doc_id, {literal(LINE_DEDUP)} AS stage, 'boilerplate_line' AS kind,"
                ' line, NULL::BIGINT AS start, NULL::BIGINT AS "end" FROM removed'
                f" ORDER BY {LINE_EDITS_ORDER}", EDIT_SCHEMA)
            decisions = local.write(
                con, f"SELECT doc_id, {literal(LINE_DEDUP)} AS stage, 'drop' AS verdict,"
                " 'empty_after_edits' AS reason, lines_removed::DOUBLE AS value,"
                " NULL::VARCHAR AS detail, NULL::VARCHAR AS kept_doc_id FROM line_documents"
                " WHERE empty_after_edits ORDER BY doc_id", DECISION_SCHEMA)
            edited, empty = con.sql(
                "SELECT count(*), count(*) FILTER (WHERE empty_after_edits)"
                " FROM line_documents").fetchall()[0]
            removed = scalar(con, "SELECT count(*) FROM removed")
        stats = StageStats(records_in=hashed.documents, candidates=hashed.documents,
                           docs_out=hashed.documents - empty)
        stats.rejects["empty_after_edits"] = empty
        stats.counts.update({"lines": hashed.lines, "lines_removed": removed,
                             "documents_edited": edited,
                             # counts of the whole partition, carried by its first task
                             "frequent_lines": self.frequent_lines if index == 0 else 0,
                             "exchange_buckets": self.buckets if index == 0 else 0})
        return TaskOutput({"part": part, "edits": edits, "decisions": decisions}, stats)


def plan_line_edits(source: LineSource, parts: int, rows: int, prefix: str, store: Store,
                    settings: DedupSettings, workers: int,
                    buckets: int | None = None) -> EditPart:
    """Rounds 1 and 2 (hash, count) over `parts` parts of `source` (`rows` documents in all,
    for sizing the exchange; `buckets` overrides it), writing under `prefix`; returns the edit
    tasks, which read what they wrote."""
    sent = exchange_rows(source, rows, settings.line_min_chars) if parts else 0
    exchange = Exchange(store, f"{prefix}/exchange", buckets or bucket_count(
        sent, EXCHANGE_ROW_BYTES, workers=workers))
    hash_task = _HashTask(source, exchange, settings.line_min_chars, f"{prefix}/lines")
    hashed = map_tasks(hash_task, range(parts), workers)
    filled = [(bucket, slices) for bucket, slices in enumerate(
        exchange.gather(part.exchanged for part in hashed)) if slices]
    counted = map_tasks(CountBucket(store, prefix, settings.line_max_documents, workers),
                        filled, workers)
    store.delete_prefix(exchange.prefix)  # read: its disk is free for the edit round
    frequent: list[list[str]] = [[] for _ in range(parts)]
    for _, written in counted:
        for part, key in written.items():
            frequent[part].append(key)
    return EditPart(store, tuple(tuple(keys) for keys in frequent), tuple(hashed),
                    sum(count for count, _ in counted), exchange.buckets, workers)


@dataclass(frozen=True)
class _LinePlan:
    """`plan_line_edits` over a documents partition, run by `run_partition` inside the
    partition's lock."""

    documents: DocumentsInput
    settings: DedupSettings
    workers: int
    buckets: int | None

    @property
    def prefix(self) -> str:
        return PartitionLayout(self.documents.store, LINE_DEDUP,
                               self.documents.partition).scratch_prefix

    def __call__(self) -> EditPart:
        self.documents.store.delete_prefix(self.prefix)
        rows = sum(part.rows for part in self.documents.layout.complete_manifest().parts)
        return plan_line_edits(_DocumentLines(self.documents), self.documents.task_count(),
                               rows, self.prefix, self.documents.store, self.settings,
                               self.workers, self.buckets)


def run_line_dedup(documents: DocumentsInput, settings: DedupSettings,
                   upstream_versions: dict[str, str], workers: int = 0,
                   buckets: int | None = None) -> PartitionResult:
    """`line_dedup` of one partition. `buckets`: the exchange's bucket count (default: from
    the documents' rows, the budget and `workers`, `curation.exchange.bucket_count`); the
    outputs do not depend on it."""
    version = stable_hash({"kernel": KERNEL_VERSION, "settings": settings.model_dump(mode="json"),
                           "documents": documents.data_version(), **upstream_versions})
    run = PartitionRun(documents.store, LINE_DEDUP, documents.partition, version)
    plan = _LinePlan(documents, settings, workers, buckets)
    return run_partition(run, documents.task_count(), Planned(plan, plan.prefix), workers)
