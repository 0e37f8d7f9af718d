"""The funnel report's memory at scale: `compute_report` (and `refresh_catalog`) on a built
sample store replicated `copies` times, each in a fresh process under a memory budget.

    .venv/bin/python benchmarks/report_aggregations.py [--root data] [--copies 50 200]
                                                       [--memory-gb 0.1] [--duckdb-floor]

`replicate_store` copies a store and repeats every row of every per-document table (each
complete partition's part and side tables with a `doc_id` column, shards excepted) `copies`
times, with doc ids, cluster ids and kept doc ids suffixed per copy, written as parts of at
most `part_rows` rows: the recipe's partitions then hold `copies` times the documents, in
consistent inputs (the mix's decisions, clusters, flags), and the report's numbers scale with
them. Each measurement runs in a fresh process under `use_budget(--memory-gb)`: wall time and
peak RSS (`VmHWM` of /proc/self/status), which must not grow with the copies.
`--duckdb-floor` instead finds, per store, the smallest DuckDB memory limit the report
completes under.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from curation.graph import SHARDS  # noqa: E402
from curation.partition import Manifest, PartitionLayout  # noqa: E402
from curation.storage import LocalStore, read_parquet  # noqa: E402

SUFFIXED = ("doc_id", "cluster_id", "kept_doc_id")


def _copies(table: pa.Table, copies: int) -> pa.Table:
    """`table` repeated `copies` times, copy k's ids suffixed with `~k` (copy 0 unchanged)."""
    tables = []
    for k in range(copies):
        copy = table
        for name in SUFFIXED:
            if k and name in copy.column_names:
                column = copy[name].cast(pa.string())
                copy = copy.set_column(copy.column_names.index(name), name,
                                       pc.binary_join_element_wise(column, f"~{k}", ""))
        tables.append(copy.cast(table.schema))
    return pa.concat_tables(tables)


def replicate_store(source: Path, target: Path, copies: int, part_rows: int = 20_000) -> None:
    """A copy of the store at `source` under `target` whose per-document tables hold every row
    `copies` times (see the module docstring)."""
    shutil.copytree(source, target, dirs_exist_ok=True)
    store = LocalStore(str(target))
    for key in [k for k in store.list("") if k.endswith("/_manifest.json")]:
        manifest = Manifest.from_json(store.read_bytes(key).decode())
        if manifest.asset == SHARDS:
            continue
        layout = PartitionLayout(store, manifest.asset, manifest.partition)
        for name in ["part", *manifest.tables]:
            parts, written = manifest.table_parts(name), []
            if not parts or "doc_id" not in read_parquet(store, parts[0].key).column_names:
                continue
            for part in parts:
                table = _copies(read_parquet(store, part.key), copies)
                store.delete(part.key)
                for start in range(0, max(table.num_rows, 1), part_rows):
                    index = 100_000 + len(written)  # clear of the original part numbers
                    written.append(layout.write_table(name, index,
                                                      table.slice(start, part_rows)))
            if name == "part":
                manifest.parts = written
            else:
                manifest.tables[name] = written
        layout.write_manifest(manifest)


def _vmhwm_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(step: str, root: Path, pipeline: Path, recipe: Path, memory_gb: float) -> dict:
    """Runs `step` ("report": `compute_report`, "catalog": `refresh_catalog`) on the store at
    `root` in a fresh process under a `memory_gb` budget; returns its JSON line: seconds,
    peak RSS in MiB and (report) the report's data."""
    out = subprocess.run([sys.executable, __file__, "--step", step, "--root", str(root),
                          "--pipeline", str(pipeline), "--recipe", str(recipe),
                          "--memory-gb", str(memory_gb)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


def _step(args: argparse.Namespace) -> None:
    from curation.config import load_pipeline, load_recipe
    from curation.duck import use_budget

    use_budget(args.memory_gb)
    store = LocalStore(str(args.root))
    result: dict = {}
    start = time.perf_counter()
    if args.step == "report":
        from curation.report import compute_report

        recipe = load_recipe(args.recipe, load_pipeline(args.pipeline))
        result["data"] = compute_report(store, recipe)
    else:
        from curation.catalog import refresh_catalog

        refresh_catalog(store, args.root / "catalog-bench.duckdb")
    result.update(seconds=round(time.perf_counter() - start, 2), peak_mib=round(_vmhwm_mib()))
    print(json.dumps(result, sort_keys=True))


def duckdb_floor(root: Path, pipeline: Path, recipe: Path) -> int:
    """The smallest DuckDB memory limit (MB, one thread, to 4 MB) under which `compute_report`
    completes on the store at `root`: below the budget's 64 MB floor, so the DuckDB settings
    are swapped in directly rather than through `use_budget`."""
    from curation import duck
    from curation.config import load_pipeline, load_recipe
    from curation.report import compute_report

    loaded = load_recipe(recipe, load_pipeline(pipeline))

    def completes(megabytes: int) -> bool:
        duck.default_settings = lambda: duck.DuckDBSettings(f"{megabytes}MB", 1, None)
        try:
            compute_report(LocalStore(str(root)), loaded)
        except duck.BudgetTooSmallError:
            return False
        return True

    low, high = 8, 1024
    while high - low > 4:
        middle = (low + high) // 2
        low, high = (low, middle) if completes(middle) else (middle, high)
    return high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path("data"))
    parser.add_argument("--pipeline", type=Path, default=Path("pipeline.yaml"))
    parser.add_argument("--recipe", type=Path, default=Path("recipes/sample.yaml"))
    parser.add_argument("--copies", type=int, nargs="+", default=[50, 200])
    parser.add_argument("--memory-gb", type=float, default=0.1)
    parser.add_argument("--work", type=Path, default=Path("benchmarks/.work/report"))
    parser.add_argument("--step", choices=("report", "catalog"), help=argparse.SUPPRESS)
    parser.add_argument("--duckdb-floor", action="store_true",
                        help="find the report's smallest DuckDB memory limit per store instead")
    args = parser.parse_args()
    if args.step:
        _step(args)
        return
    if args.duckdb_floor:
        print("| copies | report's DuckDB floor (MB) |\n|---:|---:|")
        for copies in args.copies:
            root = args.work / f"x{copies}"
            shutil.rmtree(root, ignore_errors=True)
            replicate_store(args.root, root, copies, part_rows=1_000)
            print(f"| {copies} | {duckdb_floor(root, args.pipeline, args.recipe)} |", flush=True)
            shutil.rmtree(root, ignore_errors=True)
        return
    print(f"budget {args.memory_gb} GB; fresh process per run\n")
    print("| step | copies | documents | seconds | peak RSS (MiB) |")
    print("|---|---:|---:|---:|---:|")
    for copies in args.copies:
        root = args.work / f"x{copies}"
        shutil.rmtree(root, ignore_errors=True)
        replicate_store(args.root, root, copies)
        for step in ("report", "catalog"):
            found = measure(step, root, args.pipeline, args.recipe, args.memory_gb)
            documents = found["data"]["summary"]["documents"] if "data" in found else ""
            print(f"| {step} | {copies} | {documents} | {found['seconds']} | "
                  f"{found['peak_mib']} |", flush=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
