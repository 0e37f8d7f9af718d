"""The hash-partitioned exchange between the tasks of a global step (no Dagster).

A step that groups rows by a key over a whole partition (line hashes, exact keys, LSH band
values) runs as two rounds of tasks, each on the local pool or on Ray (`map_tasks`): map tasks,
one per input part, write their rows split by the key's hash into `buckets` Parquet objects in
the store (`Exchange.write`); reduce tasks, one per bucket, read their bucket's objects and
group them in a DuckDB session under their share of the budget (`task_settings`). Every row of
one key lands in the same bucket, so a bucket's result is final: no task ever holds more than
one part or one bucket, and the buckets run on any node that can read the store. This is the
shuffle of Spark and of datatrove's MinHash stages, over the store, with no scheduler of its
own.

Which rows go to which bucket depends only on the key and the bucket count, never on the
worker count or the engine, so results are the same for 1 or N workers, local or Ray.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from curation.duck import DuckDBSettings, MemoryBudget, current_budget
from curation.storage import Store

MAX_BUCKETS = 1024
"""Map tasks x buckets objects are written; beyond this many buckets, the objects get small
enough that per-object overhead (an S3 PUT, a Parquet footer) dominates."""

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
    """Parquet for a scratch object (the exchange's, a reduce task's), read once and deleted:
    lz4 and no dictionaries (keys and doc_ids rarely repeat within a bucket), 2.5x faster to
    write than the stored layout's zstd with dictionaries, and smaller for these columns."""
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="lz4", use_dictionary=False)
    return sink.getvalue()


def _megabytes(limit: str) -> int:
    return int(limit.removesuffix("MB"))


@dataclass(frozen=True)
class Exchange:
    """The objects of one exchange: under `prefix` in `store`, `buckets` of them per map
    task."""

    store: Store
    prefix: str
    buckets: int

    def write(self, label: str, table: pa.Table, key: str | np.ndarray) -> dict[int, str]:
        """`table`'s rows split by the bucket of a uint64 key (its column `key`, or an array
        beside it that is not stored), one Parquet object per non-empty bucket, named by
        `label` (unique per map task); returns bucket -> object key. Rows keep their order
        within a bucket."""
        ids = bucket_ids(key if isinstance(key, np.ndarray) else table[key].to_numpy(),
                         self.buckets)
        order = np.argsort(ids, kind="stable")
        bounds = np.searchsorted(ids[order], np.arange(self.buckets + 1))
        table = table.combine_chunks()  # `take` on many chunks resolves them on every call
        written: dict[int, str] = {}
        for bucket in range(self.buckets):
            start, end = int(bounds[bucket]), int(bounds[bucket + 1])
            if end > start:  # one bucket's copy at a time, not the whole table reordered
                object_key = f"{self.prefix}/b{bucket:05d}/{label}.parquet"
                self.store.write_bytes(object_key,
                                       scratch_bytes(table.take(pa.array(order[start:end]))))
                written[bucket] = object_key
        return written

    def gather(self, written: Iterable[dict[int, str]]) -> list[list[str]]:
        """Per bucket, the object keys the map tasks wrote (`write`'s returns), in task
        order."""
        buckets: list[list[str]] = [[] for _ in range(self.buckets)]
        for objects in written:
            for bucket, object_key in objects.items():
                buckets[bucket].append(object_key)
        return buckets
