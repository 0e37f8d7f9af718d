"""Connected components over string nodes at low DuckDB memory limits: the case that failed
the 10⁸ near-duplicate run (benchmarks/results/scale.md, "Near duplicates at 10⁸").

    .venv/bin/python benchmarks/components_low_memory.py [--edges 30000000] [--nodes 3000000]
        [--limits 70MB 200MB 400MB] [--threads 1 2]

Generates `--edges` random edges over `--nodes` 16-character doc ids in 30 Parquet files (one
giant component, as dense near-duplicate families give), then runs
`curation.components.connected_components_sql` over a view of them in a fresh process per
(memory limit, threads), on the SQL path (hooking rounds) and once on the in-memory path, and
`curation.star_components.exchange_components` (`--tasks`: large-star/small-star rounds of
tasks over a local store, as many pool workers as threads, the limit shared among them), and
prints wall seconds, peak RSS of the process tree and the outcome. The same ratio of nodes to
memory as 30M nodes under the 10⁸ run's 704 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.measure import run_measured  # noqa: E402

FILES = 30


def generate(folder: Path, edges: int, nodes: int) -> None:
    import duckdb

    folder.mkdir(parents=True, exist_ok=True)
    per_file = edges // FILES
    con = duckdb.connect()
    for f in range(FILES):
        con.execute(
            f"COPY (SELECT printf('d%015d', hash(i * 2 + {f}) % {nodes}) AS a,"
            f" printf('d%015d', hash(i * 2 + 1 + {f * 7}) % {nodes}) AS b"
            f" FROM range({f * per_file}, {(f + 1) * per_file}) t(i))"
            f" TO '{folder}/e{f:03d}.parquet' (FORMAT parquet)")


def one(folder: Path, memory_limit: str, threads: int, path: str) -> None:
    """Child: one components run; prints a JSON line."""
    from curation.components import connected_components_sql
    from curation.duck import DuckDBSettings, MemoryBudget, duckdb_session

    if path == "tasks":
        on_tasks(folder, memory_limit, threads)
        return
    budget = MemoryBudget(memory_gb=1e-6 if path == "sql" else 64)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as spill:
        try:
            with duckdb_session(DuckDBSettings(memory_limit, threads, spill)) as con:
                con.execute(f"CREATE VIEW edges AS SELECT * FROM '{folder}/*.parquet'")
                run = connected_components_sql(con, "edges", "found", budget=budget)
                roots = con.sql("SELECT count(DISTINCT root) FROM found").fetchall()[0][0]
            outcome = (f"ok: {run.nodes:,} nodes, {roots} components, {run.rounds} rounds,"
                       f" distinct nodes in {run.node_parts} parts")
        except MemoryError as error:
            outcome = f"failed: {str(error).split('Out of Memory Error: ')[-1][:70]}"
    print(json.dumps({"outcome": outcome, "seconds": time.perf_counter() - start}))


def on_tasks(folder: Path, memory_limit: str, workers: int) -> None:
    """Child: `exchange_components` over the edge files as objects of a local store, the
    limit shared among `workers` pool workers; prints a JSON line."""
    from curation.duck import MEMORY_ENV, duckdb_session
    from curation.star_components import exchange_components
    from curation.storage import LocalStore

    os.environ[MEMORY_ENV] = str(int(memory_limit.removesuffix("MB")) / 1024)
    start = time.perf_counter()
    store = LocalStore(str(folder.parent))
    keys = sorted(f"{folder.name}/{path.name}" for path in folder.glob("*.parquet"))
    with duckdb_session() as con:
        edges = con.execute(f"SELECT count(*) FROM '{folder}/*.parquet'").fetchall()[0][0]
    output = exchange_components(store, "star-work", keys, edges, workers, columns=("a", "b"))
    with duckdb_session() as con:
        nodes, roots = con.execute("SELECT count(*), count(DISTINCT root) FROM read_parquet(?)",
                                   [[store.uri(key) for key in output.labels]]).fetchall()[0]
    outcome = (f"ok: {nodes:,} nodes, {roots} components, {output.rounds} star rounds"
               f" (changed {output.changed}), {output.buckets} buckets")
    print(json.dumps({"outcome": outcome, "seconds": time.perf_counter() - start}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edges", type=int, default=30_000_000)
    parser.add_argument("--nodes", type=int, default=3_000_000)
    parser.add_argument("--limits", nargs="+", default=["70MB", "200MB", "400MB"])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--tasks", action="store_true",
                        help="also run exchange_components at each (limit, threads)")
    parser.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        folder, limit, threads, path = args.one
        one(Path(folder), limit, int(threads), path)
        return 0
    with tempfile.TemporaryDirectory(prefix="components-bench-") as work:
        folder = Path(work) / "edges"
        generate(folder, args.edges, args.nodes)
        runs = [(limit, threads, "sql") for limit in args.limits for threads in args.threads]
        runs.append((args.limits[-1], args.threads[-1], "memory"))
        if args.tasks:
            runs += [(limit, threads, "tasks") for limit in args.limits
                     for threads in args.threads]
        print(f"{args.edges:,} edges over {args.nodes:,} string nodes\n")
        print("| memory_limit | threads | path | wall s | peak RSS MiB | outcome |")
        print("| --- | ---: | --- | ---: | ---: | --- |")
        for limit, threads, path in runs:
            measured = run_measured([sys.executable, __file__, "--one", str(folder), limit,
                                     str(threads), path], Path(work) / f"{limit}-{threads}-{path}")
            result = measured.result or json.loads(
                (Path(work) / f"{limit}-{threads}-{path}.out").read_text().splitlines()[-1])
            print(f"| {limit} | {threads} | {path} | {measured.wall_seconds:.1f} |"
                  f" {measured.peak_rss_bytes / 2**20:,.0f} | {result['outcome']} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
