"""The exchange (curation/exchange.py): every row in exactly one bucket, by its key alone; bucket
counts sized to a reduce task's share of the budget."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from curation.duck import SPILL_ENV, MemoryBudget
from curation.exchange import (
    MAX_BUCKETS,
    Exchange,
    bucket_count,
    bucket_ids,
    read_slice,
    register_slices,
)
from curation.storage import LocalStore


def test_rows_land_in_one_bucket_by_key_and_keep_their_order(tmp_path: Path) -> None:
    store = LocalStore(str(tmp_path))
    keys = np.arange(0, 40_000, 4, dtype=np.uint64)  # low bits all zero: still spread
    table = pa.table({"key": keys, "row": np.arange(len(keys))})
    exchange = Exchange(store, "x", 8)
    first = exchange.write("a", table, "key")
    second = exchange.write("b", table.drop_columns(["key"]), keys)  # a key beside the table
    buckets = exchange.gather([first, second])
    assert len(buckets) == 8 and all(len(slices) == 2 for slices in buckets)
    ids = bucket_ids(keys, 8)
    assert np.bincount(ids).min() > 0.8 * len(keys) / 8
    for bucket, (a, b) in enumerate(buckets):
        rows = read_slice(store, a)
        assert rows["row"].to_pylist() == np.flatnonzero(ids == bucket).tolist()
        assert read_slice(store, b).column_names == ["row"]
        assert read_slice(store, b)["row"].equals(rows["row"])


def test_a_map_task_writes_one_object_whose_slices_tile_it(tmp_path: Path) -> None:
    """Map tasks x buckets objects grew with the square of the input; now one a map task."""
    store = LocalStore(str(tmp_path))
    keys = np.arange(10_000, dtype=np.uint64)
    exchange = Exchange(store, "x", 16)
    slices = [exchange.write(label, pa.table({"key": keys}), "key") for label in ("a", "b")]
    assert store.list("x") == ["x/a.arrows", "x/b.arrows"]
    for label, written in zip(("a", "b"), slices, strict=True):
        pieces = sorted(written.values(), key=lambda piece: piece.start)
        assert {piece.key for piece in pieces} == {f"x/{label}.arrows"}
        ends = [piece.start + piece.length for piece in pieces]
        assert [piece.start for piece in pieces] == [0, *ends[:-1]]
        assert ends[-1] == len(store.read_bytes(f"x/{label}.arrows"))
    assert Exchange(store, "y", 4).write("empty", pa.table({"key": keys[:0]}), "key") == {}
    assert store.list("y") == []


def test_a_reduce_task_gets_its_buckets_rows_in_a_temporary_table(tmp_path: Path) -> None:
    store = LocalStore(str(tmp_path))
    exchange = Exchange(store, "x", 4)
    rng = np.random.default_rng(0)
    tables = [pa.table({"key": rng.integers(0, 1 << 62, 50_000).astype(np.uint64),
                        "name": [f"d{i}" for i in range(50_000)]}) for _ in range(6)]
    buckets = exchange.gather(exchange.write(f"m{i}", table, "key")
                              for i, table in enumerate(tables))
    every = pa.concat_tables(tables)
    for bucket, slices in enumerate(buckets):
        con = duckdb.connect()
        assert register_slices(con, "rows", store, slices, columns=["name", "key"]) == \
            ["name", "key"]
        # in DuckDB's memory, spilled beyond its limit, not in its database file
        assert con.sql("SELECT temporary FROM duckdb_tables() WHERE table_name = 'rows'"
                       ).fetchall() == [(True,)]
        got = con.sql("SELECT key, name FROM rows ORDER BY key").to_arrow_table()
        want = every.filter(pa.array(bucket_ids(every["key"].to_numpy(), 4) == bucket))
        assert got.equals(want.sort_by("key").select(["key", "name"]))
    schema = pa.schema([("key", pa.uint64())])
    assert register_slices(duckdb.connect(), "none", store, [], schema=schema) == ["key"]


def test_bucket_count_fits_a_reduce_tasks_share() -> None:
    one_gb = MemoryBudget(memory_gb=1)
    assert bucket_count(1_000, 64, one_gb, workers=1) == 1
    assert bucket_count(1_000, 64, one_gb, workers=4) == 4  # one per worker at least
    rows = 100_000_000
    two = bucket_count(rows, 64, one_gb, workers=2)  # 6.4 GB over shares of 192 MiB
    assert two == 32
    assert bucket_count(rows, 64, MemoryBudget(memory_gb=4), workers=2) < two
    assert bucket_count(rows * 1000, 64, one_gb) == MAX_BUCKETS


def test_a_map_task_on_a_node_without_the_spill_folder_makes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ray node other than the driver's may not have the spill folder the budget names."""
    missing = tmp_path / "spill" / "on-this-node"
    monkeypatch.setenv(SPILL_ENV, str(missing))
    store = LocalStore(str(tmp_path / "store"))
    written = Exchange(store, "x", 2).write("m0", pa.table({"key": np.arange(10, dtype=np.uint64)}),
                                            "key")
    assert missing.is_dir() and list(missing.iterdir()) == []  # the local copy is removed
    assert sum(read_slice(store, piece).num_rows for piece in written.values()) == 10
