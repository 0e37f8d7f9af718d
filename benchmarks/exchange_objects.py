"""What the exchange's objects cost: a map task's band rows written as one object of bucket
slices (`Exchange.write`) against an object a bucket (the layout it replaced), and one reduce
bucket read from the map tasks' slices against their objects (benchmarks/results/scale.md,
"Hash parts and exchange slices").

    .venv/bin/python benchmarks/exchange_objects.py [--map-tasks 1020] [--buckets 446]
        [--bucket-rows 3000000] [--sample-tasks 8] [--repeats 3]

The defaults are near duplicates' band exchange at 10^8 synthetic documents and 1 GB: 1,020
map tasks (parts of 65,536 documents, 14 bands: about 1.37M band rows each), 446 buckets of
about 3M rows. Map: `--sample-tasks` map tasks' rows written both ways to a local store (CPU
seconds, objects and MB a map task). Reduce: one bucket's rows split over `--map-tasks`
pieces, each in its own object (a slice, or an object of the old layout), registered
(`register_slices` / `register_parts`) and reduced as `BandBucket` does
(`band_rows_edges_sql`, one thread, a 192 MB limit). Prints medians, and the whole round's
CPU seconds estimated as map tasks x a map task + buckets x a bucket.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from curation.dedup import BAND_ROWS_SCHEMA, band_rows_edges_sql  # noqa: E402
from curation.duck import DuckDBSettings, duckdb_session, register_parts  # noqa: E402
from curation.exchange import Exchange, bucket_ids, register_slices, scratch_bytes  # noqa: E402
from curation.storage import LocalStore  # noqa: E402

BANDS = 14


def band_rows(rows: int, seed: int = 0) -> pa.Table:
    """Long band rows with about three members a (band, value)."""
    rng = np.random.default_rng(seed)
    return pa.table({
        "band": pa.array([f"band_{i:02d}" for i in rng.integers(0, BANDS, rows)]),
        "value": pa.array(rng.integers(0, max(rows // 3, 1), rows).astype(np.uint64)),
        "doc_id": pa.array([f"d{i:015d}" for i in rng.integers(0, 10**8, rows)]),
    }).cast(BAND_ROWS_SCHEMA)


def write_objects(store: LocalStore, label: str, table: pa.Table, buckets: int) -> int:
    """The layout before: a Parquet object a non-empty bucket; returns how many."""
    ids = bucket_ids(table["value"].to_numpy(), buckets)
    order = np.argsort(ids, kind="stable")
    bounds = np.searchsorted(ids[order], np.arange(buckets + 1))
    for bucket in np.flatnonzero(np.diff(bounds)):
        rows = table.take(pa.array(order[bounds[bucket]:bounds[bucket + 1]]))
        store.write_bytes(f"x/b{bucket:05d}/{label}.parquet", scratch_bytes(rows))
    return int(np.count_nonzero(np.diff(bounds)))


def map_round(tables: list[pa.Table], buckets: int, layout: str) -> tuple[float, int, float]:
    """CPU seconds a map task, objects a map task and MB a map task."""
    with tempfile.TemporaryDirectory(prefix="exchange-map-") as folder:
        store = LocalStore(folder)
        start, objects = time.process_time(), 0
        for number, table in enumerate(tables):
            if layout == "slices":
                Exchange(store, "x", buckets).write(f"{number:05d}", table, "value")
                objects += 1
            else:
                objects += write_objects(store, f"{number:05d}", table, buckets)
        seconds = (time.process_time() - start) / len(tables)
        size = sum(path.stat().st_size for path in Path(folder).rglob("*") if path.is_file())
        return seconds, objects // len(tables), size / 1e6 / len(tables)


def reduce_round(table: pa.Table, pieces: int, layout: str) -> tuple[float, int]:
    """CPU seconds to register and reduce one bucket of `pieces` objects; the edges."""
    with tempfile.TemporaryDirectory(prefix="exchange-reduce-") as folder:
        store = LocalStore(folder)
        bounds = np.linspace(0, table.num_rows, pieces + 1).astype(int)
        parts = [table.slice(first, end - first)
                 for first, end in zip(bounds[:-1], bounds[1:], strict=True)]
        if layout == "slices":
            exchange = Exchange(store, "x", 1)
            slices = [exchange.write(f"{n:05d}", part, np.zeros(part.num_rows, np.uint64))[0]
                      for n, part in enumerate(parts)]
        else:
            keys = [f"x/b00000/{n:05d}.parquet" for n in range(pieces)]
            for key, part in zip(keys, parts, strict=True):
                store.write_bytes(key, scratch_bytes(part))
        start = time.process_time()
        with duckdb_session(DuckDBSettings("192MB", 1, folder)) as con:
            if layout == "slices":
                register_slices(con, "bands", store, slices, columns=BAND_ROWS_SCHEMA.names)
            else:
                register_parts(con, "bands", store, keys, columns=BAND_ROWS_SCHEMA.names)
            band_rows_edges_sql(con, "bands", 10_000)
            edges = con.execute("SELECT count(*) FROM edges").fetchall()[0][0]
        return time.process_time() - start, edges


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--map-tasks", type=int, default=1020)
    parser.add_argument("--buckets", type=int, default=446)
    parser.add_argument("--bucket-rows", type=int, default=3_000_000)
    parser.add_argument("--sample-tasks", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    map_rows = args.bucket_rows * args.buckets // args.map_tasks
    tables = [band_rows(map_rows, seed) for seed in range(args.sample_tasks)]
    bucket = band_rows(args.bucket_rows)
    print(f"{args.map_tasks:,} map tasks of {map_rows:,} band rows, {args.buckets} buckets of"
          f" {args.bucket_rows:,}\n")
    print("| layout | objects a map task | MB a map task | map CPU s a task |"
          " reduce CPU s a bucket | edges | round CPU s (estimated) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for layout in ("objects", "slices"):
        maps = [map_round(tables, args.buckets, layout) for _ in range(args.repeats)]
        reduces = [reduce_round(bucket, args.map_tasks, layout) for _ in range(args.repeats)]
        mapped = statistics.median(seconds for seconds, _, _ in maps)
        reduced = statistics.median(seconds for seconds, _ in reduces)
        name = "an object a bucket (before)" if layout == "objects" else "slices of one object"
        print(f"| {name} | {maps[0][1]:,} | {maps[0][2]:.1f} | {mapped:.3f} | {reduced:.2f} |"
              f" {reduces[0][1]:,} | {args.map_tasks * mapped + args.buckets * reduced:,.0f} |",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
