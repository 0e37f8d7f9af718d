"""The hash-partitioned exchange between the tasks of a global step (no Dagster).

A step that groups rows by a key over a whole partition (line hashes, exact keys, LSH band
values) runs as two rounds of tasks, each on the local pool or on Ray (`map_tasks`): map tasks,
one per input part, write their rows split by the key's hash into `buckets` slices of one
object in the store (`Exchange.write`); reduce tasks, one per bucket, read their bucket's slice
of every map task's object (`register_slices`) and group them in a DuckDB session under their
share of the budget (`task_settings`). Every row of one key lands in the same bucket, so a
bucket's result is final: no task ever holds more than one part or one bucket, and the buckets
run on any node that can read the store. This is the shuffle of Spark and of datatrove's MinHash
stages, over the store, with no scheduler of its own.

One object a map task, each bucket a byte range of it, as Spark's sort shuffle writes one data
file a map task with an index: an object a bucket made map tasks x buckets objects, which grows
with the square of the input (455,000 at 10^8 documents), and on S3 as many PUTs; a map task
of 1.3M band rows took 0.524 CPU s to write its 446, 0.331 its one object
(benchmarks/exchange_objects.py). A slice is an Arrow IPC stream, so it is read on its own with
a ranged GET and needs no footer.

Which rows go to which bucket depends only on the key and the bucket count, never on the
worker count or the engine, so results are the same for 1 or N workers, local or Ray.
"""

from __future__ import annotations

import io
import math
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from curation.duck import (
    SCRATCH_IPC,
    DuckDBSettings,
    MemoryBudget,
    current_budget,
    register_parts,
    register_stream,
    spill_folder,
)
from curation.storage import Store

MAX_BUCKETS = 1024
"""Map tasks x buckets slices are written and read; beyond this many buckets, the slices get
small enough that per-slice overhead (a ranged read or GET, a stream's schema) dominates."""

_MIX = np.uint64(0x9E3779B97F4A7C15)


def bucket_ids(keys: np.ndarray, buckets: int) -> np.ndarray:
    """The bucket of each uint64 key: Fibonacci hashing (multiply, keep the high bits), so keys
    whose low bits are not uniform still spread evenly."""
    with np.errstate(over="ignore"):
        mixed = np.asarray(keys, dtype=np.uint64) * _MIX
    return ((mixed >> np.uint64(32)) % np.uint64(buckets)).astype(np.int64)


def bucket_count(rows: int, row_bytes: int, budget: MemoryBudget | None = None,
                 workers: int = 1) -> int:
    """Buckets enough that one bucket's rows (`rows` x `row_bytes` in all) fit a reduce task's
    DuckDB share (`task_settings`), so grouping a bucket seldom spills, and at least one per
    worker, so the reduce round runs on all of them; at most `MAX_BUCKETS` (past that each
    reduce task spills, still within its budget). Fewer buckets mean fewer objects: the map
    round writes up to map tasks x buckets of them."""
    share = _megabytes(task_settings(workers, budget).memory_limit) << 20
    wanted = max(workers, 1, math.ceil(rows * row_bytes / share))
    return min(MAX_BUCKETS, wanted)


def task_settings(workers: int, budget: MemoryBudget | None = None) -> DuckDBSettings:
    """DuckDB settings for one of `workers` tasks running at once on one machine: the budget
    (default: the current one) shared among them, each with one thread, since the tasks
    themselves fill the cores."""
    budget = budget or current_budget()
    share = MemoryBudget(budget.memory_gb / max(1, workers), 1, budget.spill_directory)
    return share.duckdb()


def scratch_bytes(table: pa.Table) -> bytes:
    """Parquet for a scratch object (a reduce task's result, a part's stored lines), read once
    and deleted: lz4 and no dictionaries (keys and doc_ids rarely repeat within a bucket), 2.5x
    faster to write than the stored layout's zstd with dictionaries, and smaller for these
    columns."""
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="lz4", use_dictionary=False)
    return sink.getvalue()


def _megabytes(limit: str) -> int:
    return int(limit.removesuffix("MB"))


@dataclass(frozen=True)
class Slice:
    """One bucket's rows from one map task: `length` bytes at `start` of the object `key`, an
    Arrow IPC stream."""

    key: str
    start: int
    length: int


@dataclass(frozen=True)
class Exchange:
    """The objects of one exchange: under `prefix` in `store`, one per map task, each in
    `buckets` slices."""

    store: Store
    prefix: str
    buckets: int

    def write(self, label: str, table: pa.Table, key: str | np.ndarray) -> dict[int, Slice]:
        """`table`'s rows split by the bucket of a uint64 key (its column `key`, or an array
        beside it that is not stored), one slice per non-empty bucket of one object named by
        `label` (unique per map task); returns bucket -> slice. Rows keep their order within a
        bucket. The object is written to a local file first (lz4, as the Parquet objects
        were), then stored: assembled in memory, it doubled a map task's memory."""
        ids = bucket_ids(key if isinstance(key, np.ndarray) else table[key].to_numpy(),
                         self.buckets)
        order = np.argsort(ids, kind="stable")
        bounds = np.searchsorted(ids[order], np.arange(self.buckets + 1))
        table = table.combine_chunks()  # `take` on many chunks resolves them on every call
        object_key = f"{self.prefix}/{label}.arrows"
        written: dict[int, Slice] = {}
        with tempfile.NamedTemporaryFile(prefix="exchange-", suffix=".arrows",
                                         dir=spill_folder()) as sink:
            for bucket in np.flatnonzero(np.diff(bounds)):
                start = sink.tell()  # one bucket's copy at a time, not the table reordered
                rows = table.take(pa.array(order[bounds[bucket]:bounds[bucket + 1]]))
                with pa.ipc.new_stream(sink, table.schema, options=SCRATCH_IPC) as stream:
                    stream.write_table(rows)
                written[int(bucket)] = Slice(object_key, start, sink.tell() - start)
            sink.flush()
            if written:
                self.store.write_file(object_key, Path(sink.name))
        return written

    def gather(self, written: Iterable[dict[int, Slice]]) -> list[list[Slice]]:
        """Per bucket, the slices the map tasks wrote (`write`'s returns), in task order."""
        buckets: list[list[Slice]] = [[] for _ in range(self.buckets)]
        for slices in written:
            for bucket, piece in slices.items():
                buckets[bucket].append(piece)
        return buckets


def read_slice(store: Store, piece: Slice) -> pa.Table:
    """The rows of one slice."""
    return pa.ipc.open_stream(store.read_range(piece.key, piece.start, piece.length)).read_all()


def register_slices(con: duckdb.DuckDBPyConnection, name: str, store: Store,
                    slices: Sequence[Slice], columns: Sequence[str] | None = None,
                    schema: pa.Schema | None = None) -> list[str]:
    """Temporary table `name` of the rows of `slices` (only `columns`, when given), streamed
    in (`register_stream`). Without slices, `schema` gives the empty relation its columns
    (`register_parts`)."""
    if not slices:
        return register_parts(con, name, store, [], columns, schema)
    first = read_slice(store, slices[0])
    wanted = list(columns) if columns else first.column_names

    def batches() -> Iterator[pa.RecordBatch]:
        for table in chain([first], (read_slice(store, piece) for piece in slices[1:])):
            yield from table.select(wanted).to_batches()

    register_stream(con, name, pa.RecordBatchReader.from_batches(first.select(wanted).schema,
                                                                 batches()))
    return con.sql(f"SELECT * FROM {name} LIMIT 0").columns
