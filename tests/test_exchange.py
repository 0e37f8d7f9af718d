"""The exchange (curation/exchange.py): every row in exactly one bucket, by its key alone; bucket
counts sized to a reduce task's share of the budget."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from curation.duck import MemoryBudget
from curation.exchange import MAX_BUCKETS, Exchange, bucket_count, bucket_ids
from curation.storage import LocalStore


def test_rows_land_in_one_bucket_by_key_and_keep_their_order(tmp_path: Path) -> None:
    store = LocalStore(str(tmp_path))
    keys = np.arange(0, 40_000, 4, dtype=np.uint64)  # low bits all zero: still spread
    table = pa.table({"key": keys, "row": np.arange(len(keys))})
    exchange = Exchange(store, "x", 8)
    first = exchange.write("a", table, "key")
    second = exchange.write("b", table.drop_columns(["key"]), keys)  # a key beside the table
    buckets = exchange.gather([first, second])
    assert len(buckets) == 8 and all(len(objects) == 2 for objects in buckets)
    ids = bucket_ids(keys, 8)
    assert np.bincount(ids).min() > 0.8 * len(keys) / 8
    for bucket, (a, b) in enumerate(buckets):
        rows = pq.read_table(store.uri(a))
        assert rows["row"].to_pylist() == np.flatnonzero(ids == bucket).tolist()
        assert pq.read_table(store.uri(b)).column_names == ["row"]
        assert pq.read_table(store.uri(b))["row"].equals(rows["row"])


def test_bucket_count_fits_a_reduce_tasks_share() -> None:
    one_gb = MemoryBudget(memory_gb=1)
    assert bucket_count(1_000, 64, one_gb, workers=1) == 1
    assert bucket_count(1_000, 64, one_gb, workers=4) == 4  # one per worker at least
    rows = 100_000_000
    two = bucket_count(rows, 64, one_gb, workers=2)  # 6.4 GB over shares of 192 MiB
    assert two == 32
    assert bucket_count(rows, 64, MemoryBudget(memory_gb=4), workers=2) < two
    assert bucket_count(rows * 1000, 64, one_gb) == MAX_BUCKETS
