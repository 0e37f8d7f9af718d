"""What an exchange object costs: one reduce bucket of near-duplicate band rows written as the
objects of F map tasks, then reduced (benchmarks/results/scale.md, "The union-find without its
passes over every node").

    .venv/bin/python benchmarks/exchange_objects.py [--rows 3000000] [--objects 100 1000]
        [--repeats 3]

A map round writes map tasks x buckets objects, so at a fixed bucket size the objects of one
bucket grow with the input: 102 map tasks at 10^7 synthetic documents, 1,020 at 10^8 (the
scale benchmark's parts of 65,536 documents). This draws one bucket's long band rows (band,
value, doc_id; `--rows`, about what a reduce task gets at 1 GB and two workers), splits them
into `--objects` objects written as the map tasks write them (`scratch_bytes`, a local
store), and reduces them as `BandBucket` does (`register_parts`, `band_rows_edges_sql`, one
thread, a 192 MB limit). Prints the median CPU seconds of each half and what each object
beyond the fewest costs.
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
from curation.exchange import scratch_bytes  # noqa: E402
from curation.storage import LocalStore  # noqa: E402


def bucket_rows(rows: int, seed: int = 0) -> pa.Table:
    """Long band rows with about three members a (band, value)."""
    rng = np.random.default_rng(seed)
    return pa.table({
        "band": pa.array([f"band_{i:02d}" for i in rng.integers(0, 14, rows)]),
        "value": pa.array(rng.integers(0, rows // 3, rows).astype(np.uint64)),
        "doc_id": pa.array([f"d{i:015d}" for i in rng.integers(0, 10**8, rows)]),
    }).cast(BAND_ROWS_SCHEMA)


def one_round(table: pa.Table, objects: int) -> tuple[float, float, int]:
    """CPU seconds to write `table` as `objects` objects and to reduce them; the edges."""
    with tempfile.TemporaryDirectory(prefix="exchange-objects-") as folder:
        store = LocalStore(folder)
        bounds = np.linspace(0, table.num_rows, objects + 1).astype(int)
        start = time.process_time()
        keys = []
        for number, (first, end) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
            keys.append(f"b00000/{number:05d}.parquet")
            store.write_bytes(keys[-1], scratch_bytes(table.slice(first, end - first)))
        written = time.process_time() - start
        start = time.process_time()
        with duckdb_session(DuckDBSettings("192MB", 1, folder)) as con:
            register_parts(con, "bands", store, keys, columns=BAND_ROWS_SCHEMA.names)
            band_rows_edges_sql(con, "bands", 10_000)
            edges = con.execute("SELECT count(*) FROM edges").fetchall()[0][0]
        return written, time.process_time() - start, edges


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--objects", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    table = bucket_rows(args.rows)
    print(f"one bucket of {args.rows:,} band rows\n")
    print("| objects | write CPU s | reduce CPU s | edges | ms an object beyond the fewest |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    base: tuple[int, float] | None = None
    for objects in args.objects:
        runs = [one_round(table, objects) for _ in range(args.repeats)]
        write = statistics.median(run[0] for run in runs)
        reduce = statistics.median(run[1] for run in runs)
        extra = "" if base is None else \
            f"{1000 * (write + reduce - base[1]) / (objects - base[0]):.2f}"
        base = base or (objects, write + reduce)
        print(f"| {objects:,} | {write:.2f} | {reduce:.2f} | {runs[0][2]:,} | {extra} |",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
