"""The `line_dedup` stage: normalised lines that recur in more than `line_max_documents`
documents of a partition are removed (the rule of `curation.dedup.frequent_lines_sql`), as three
rounds of tasks on the local pool or Ray, over a hash-partitioned exchange in the store
(`curation.exchange`):

1. **Hash** (one task per documents part): hash the part's lines; send each line long enough
   to count (`line_min_chars`) to the exchange, keyed by its hash, and write the part's count
   of such lines per document.
2. **Count** (one task per bucket): a bucket holds every occurrence of its lines, so it finds
   its frequent lines (distinct documents over the threshold) alone; it writes their
   occurrences back to the store split by documents part.
3. **Edit** (the partition's tasks, one per documents part): a part's removed occurrences from
   every bucket become its `edits`, its edited documents (`part`) and its
   `empty_after_edits` drops. The outputs have one part per documents part, so `scrubbed`
   reads one part's edits, never the partition's.

Memory: a hash task holds one documents part; a count task one bucket, in DuckDB within its
share of the budget (`curation.exchange.task_settings`); an edit task one part's removed lines
and per-document counts, in DuckDB likewise. Nothing holds the partition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curation.config import DedupSettings, stable_hash
from curation.dedup import LINE_EDITS_ORDER, line_hash_table
from curation.duck import ResultFiles, duckdb_session, literal, register_parts, scalar
from curation.exchange import Exchange, bucket_count, scratch_bytes, task_settings
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
"""For sizing the exchange before any line is hashed: a mean of non-blank lines of at least
`line_min_chars` per extracted web page, on the generous side (a bucket that outgrows its
task's share spills; one that is too small only adds objects)."""
EXCHANGE_ROW_BYTES = 64
"""What one exchanged line takes in a count task's DuckDB (hash, doc_id, line, part)."""

OCCURRENCE_SCHEMA = pa.schema([("line_hash", pa.uint64()), ("doc_id", pa.string()),
                               ("line", pa.int32()), ("part", pa.int32())])
REMOVED_SCHEMA = pa.schema([("doc_id", pa.string()), ("line", pa.int32()),
                            ("line_hash", pa.uint64())])
DOCUMENT_LINES_SCHEMA = pa.schema([("doc_id", pa.string()), ("counted_lines", pa.int64())])


@dataclass(frozen=True)
class HashedPart:
    """What a hash task sends on: its exchange objects (bucket -> key), the key of its
    per-document counts, and its statistics."""

    exchanged: dict[int, str]
    document_lines: str
    lines: int
    documents: int


def send_lines(lines: pa.Table, part: int, exchange: Exchange, min_chars: int,
               counts_prefix: str) -> HashedPart:
    """Round 1 for one part's line hashes (`LINE_HASH_SCHEMA`): the lines of at least
    `min_chars` go to the exchange, keyed by their hash; the per-document counts of those lines
    go under `counts_prefix`."""
    counted = lines.filter(pc.greater_equal(lines["chars"], min_chars))
    occurrences = counted.select(["line_hash", "doc_id", "line"]).append_column(
        "part", pa.array(np.full(counted.num_rows, part, np.int32)))
    exchanged = exchange.write(f"part-{part:05d}", occurrences.cast(OCCURRENCE_SCHEMA),
                               "line_hash")
    per_document = counted.group_by("doc_id").aggregate([("line", "count")]).rename_columns(
        DOCUMENT_LINES_SCHEMA.names).cast(DOCUMENT_LINES_SCHEMA)
    key = f"{counts_prefix}/lines-{part:05d}.parquet"
    exchange.store.write_bytes(key, scratch_bytes(per_document))
    return HashedPart(exchanged, key, lines.num_rows, len(pc.unique(lines["doc_id"])))


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
    counts_prefix: str

    def __call__(self, part: int) -> HashedPart:
        return send_lines(self.source(part), part, self.exchange, self.min_chars,
                          self.counts_prefix)


@dataclass(frozen=True)
class CountBucket:
    """A count task: the bucket's frequent lines, their occurrences written per documents part
    (`{prefix}/removed/b{bucket}-p{part}`). Returns (frequent lines, part -> object key)."""

    store: Store
    prefix: str
    max_documents: int
    workers: int

    def __call__(self, task: tuple[int, list[str]]) -> tuple[int, dict[int, str]]:
        bucket, keys = task
        written: dict[int, str] = {}
        with duckdb_session(task_settings(self.workers)) as con:
            register_parts(con, "occurrences", self.store, keys, schema=OCCURRENCE_SCHEMA)
            # Two plain aggregates that spill, rather than count(DISTINCT). Neither form fits a
            # 192 MB share when one line is in tens of millions of documents (docs/scale.md,
            # "Skew": a combiner in the hash round is the fix).
            con.execute("CREATE TABLE frequent AS SELECT line_hash FROM (SELECT line_hash"
                        " FROM occurrences GROUP BY line_hash, doc_id) GROUP BY line_hash"
                        " HAVING count(*) > ?", [self.max_documents])
            reader = con.sql(
                "SELECT o.part, o.doc_id, o.line, o.line_hash FROM occurrences o"
                " SEMI JOIN frequent f ON o.line_hash = f.line_hash ORDER BY o.part"
            ).to_arrow_reader(1 << 16)
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
        key = f"{self.prefix}/removed/b{bucket:05d}-p{part:05d}.parquet"
        table = pa.Table.from_batches(batches).drop_columns(["part"]).cast(REMOVED_SCHEMA)
        self.store.write_bytes(key, scratch_bytes(table))
        return {part: key}


@dataclass(frozen=True)
class EditPart:
    """An edit task: one documents part's edits, edited documents and drops, from its removed
    occurrences (every bucket's) and its per-document line counts."""

    store: Store
    removed: tuple[tuple[str, ...], ...]
    hashed: tuple[HashedPart, ...]
    frequent_lines: int
    buckets: int
    workers: int

    def __call__(self, index: int) -> TaskOutput:
        hashed = self.hashed[index]
        with duckdb_session(task_settings(self.workers)) as con, ResultFiles() as local:
            register_parts(con, "removed", self.store, list(self.removed[index]),
                           schema=REMOVED_SCHEMA)
            register_parts(con, "counted", self.store, [hashed.document_lines])
            con.execute(
                "CREATE TABLE line_documents AS SELECT r.doc_id, count(*) AS lines_removed,"
                " count(*) = any_value(c.counted_lines) AS empty_after_edits"
                " FROM removed r JOIN counted c ON r.doc_id = c.doc_id GROUP BY r.doc_id")
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
    exchange = Exchange(store, f"{prefix}/exchange", buckets or bucket_count(
        rows * LINES_PER_DOCUMENT, EXCHANGE_ROW_BYTES, workers=workers))
    hash_task = _HashTask(source, exchange, settings.line_min_chars, f"{prefix}/counts")
    hashed = map_tasks(hash_task, range(parts), workers)
    filled = [(bucket, keys) for bucket, keys in enumerate(
        exchange.gather(part.exchanged for part in hashed)) if keys]
    counted = map_tasks(CountBucket(store, prefix, settings.line_max_documents, workers),
                        filled, workers)
    store.delete_prefix(exchange.prefix)  # read: its disk is free for the edit round
    removed: list[list[str]] = [[] for _ in range(parts)]
    for _, written in counted:
        for part, key in written.items():
            removed[part].append(key)
    return EditPart(store, tuple(tuple(keys) for keys in removed), tuple(hashed),
                    sum(frequent for frequent, _ in counted), exchange.buckets, workers)


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
