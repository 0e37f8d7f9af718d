"""The hash partitioning of `curation.duck.write_hash_parts` (Arrow IPC streams) against the
Parquet writers it replaced, at the shape of near duplicates' distinct edges at 10^8 documents
(benchmarks/results/scale.md, "Hash parts and exchange slices").

    .venv/bin/python benchmarks/hash_parts.py [--parts 207] [--batches 1136]

Each implementation runs in a fresh process: it streams `batches` batches of 2^18 pairs of
string nodes (13-digit ids, a `part` column from their hash) into `parts` parts, then groups
each part's distinct pairs in DuckDB (1 GB limit), as `curation.components` does. The default
shape is the one measured in the near-duplicate step at 10^8 (207 parts, 1,136 batches). Prints
CPU seconds of the writing and the grouping, the process's peak RSS, the parts' bytes on disk
and the distinct pairs found (the same for both).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.measure import run_measured  # noqa: E402
from curation.duck import hash_part, write_hash_parts  # noqa: E402

BATCH_ROWS = 1 << 18
NODES = 1 << 40  # 13-digit ids, the length of the synthetic documents' ids


def batches(count: int, parts: int) -> Iterator[pa.RecordBatch]:
    """`count` batches of pairs drawn from a pool a tenth their number, so pairs repeat."""
    rng = np.random.default_rng(0)
    pool = rng.integers(0, NODES, count * BATCH_ROWS // 10)
    for _ in range(count):
        a, b = pool[rng.integers(0, pool.size, BATCH_ROWS)], pool[rng.integers(0, pool.size,
                                                                               BATCH_ROWS)]
        yield pa.record_batch({"a": pc.cast(pa.array(a), pa.string()),
                               "b": pc.cast(pa.array(b), pa.string()),
                               "part": pa.array((a ^ b) % parts)})


def previous(reader: Iterator[pa.RecordBatch], parts: int, folder: Path) -> list[Path]:
    """`write_hash_parts` before: a Parquet writer a part, a row group a part a batch."""
    writers: dict[int, pq.ParquetWriter] = {}
    try:
        for batch in reader:
            rows = pa.Table.from_batches([batch]).group_by(["a", "b", "part"]).aggregate([])
            rows = rows.sort_by("part")
            bounds = np.searchsorted(rows.column("part").to_numpy(), np.arange(parts + 1))
            for index in np.flatnonzero(np.diff(bounds)):
                if index not in writers:
                    writers[index] = pq.ParquetWriter(folder / f"part-{index}.parquet",
                                                      rows.schema)
                writers[index].write_table(rows.slice(bounds[index],
                                                      bounds[index + 1] - bounds[index]))
    finally:
        for writer in writers.values():
            writer.close()
    return [folder / f"part-{index}.parquet" for index in sorted(writers)]


def child(implementation: str, parts: int, count: int, work: Path) -> None:
    """Writes and groups the parts with one implementation; prints a JSON line."""
    start = time.process_time()
    if implementation == "ours":
        files = write_hash_parts(batches(count, parts), parts, work, distinct=["a", "b"])
    else:
        files = previous(batches(count, parts), parts, work)
    written = time.process_time()
    con = duckdb.connect()
    con.execute("SET memory_limit = '1GB'")
    con.execute("SET threads = 1")
    pairs = 0
    for path in files:
        if implementation == "ours":
            with hash_part(con, "part_rows", path) as rows:
                pairs += con.execute(f"SELECT count(*) FROM (SELECT DISTINCT a, b FROM {rows})"
                                     ).fetchall()[0][0]
        else:
            pairs += con.execute("SELECT count(*) FROM (SELECT DISTINCT a, b FROM"
                                 " read_parquet(?))", [str(path)]).fetchall()[0][0]
    print(json.dumps({"write_cpu_s": written - start, "group_cpu_s": time.process_time() - written,
                      "disk_bytes": sum(path.stat().st_size for path in files), "pairs": pairs}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", type=int, default=207)
    parser.add_argument("--batches", type=int, default=1136)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.parts, args.batches, args.work)
        return 0
    print("| writer | parts | batches | write CPU s | group CPU s | peak RSS MiB | disk MB |"
          " distinct pairs |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory(prefix="hash-parts-") as folder:
        for implementation in ("previous", "ours"):
            work = Path(folder) / implementation
            work.mkdir()
            run = run_measured([sys.executable, __file__, "--child", implementation, "--parts",
                                str(args.parts), "--batches", str(args.batches), "--work",
                                str(work)], Path(folder) / f"{implementation}-log")
            if run.returncode:
                raise SystemExit(run.log_path.read_text())
            result = json.loads((Path(folder) / f"{implementation}-log.out").read_text())
            print(f"| {'Parquet (previous)' if implementation == 'previous' else 'IPC (ours)'} |"
                  f" {args.parts} | {args.batches:,} | {result['write_cpu_s']:.1f} |"
                  f" {result['group_cpu_s']:.1f} | {run.peak_rss_bytes / 2**20:,.0f} |"
                  f" {result['disk_bytes'] / 1e6:,.0f} | {result['pairs']:,} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
