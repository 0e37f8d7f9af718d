"""Near-duplicate clustering (`curation.dedup`): wall time and peak memory against corpus size,
the cross-partition index as partitions are added, and connected components in and out of
memory.

    .venv/bin/python benchmarks/clustering.py [--sizes 1000000 2000000 4000000]
        [--memory-limit 1GB] [--tight-limit 300MB] [--partitions 4] [--partition-size 1000000]
        [--graph-edges 2500000] [--graph-budget-gb 0.25]
        [--only clustering cross components]

1. Builds (or reuses) seeded synthetic band tables under ``benchmarks/.work/clustering/``:
   `doc_id` (16 hex characters, like the project's ids) and 14 uint64 band hashes. About 10% of
   documents are in near-duplicate families of 2 to 20 members; each member copies each band
   of the family's first member with probability 1/2 (at least one), the rest are random.
   Three hot buckets, like the band value near-empty pages share: 2% of the documents on
   `band_00`, 1.5% on `band_05`, and 15,000 on `band_09`, all over the 10,000 cap.
2. Clustering: `cluster_near_duplicates` on each size's Parquet file in a fresh subprocess (so
   building the table does not count), DuckDB with `--memory-limit` and 2 threads, and the
   largest size again with `--tight-limit` to show that the limit, not the corpus, bounds
   memory. Peak memory is the child's VmHWM (exact high-water RSS; `getrusage`'s `ru_maxrss`
   survives exec on Linux and would report the parent's peak) beside the process tree's RSS
   sampled from /proc every 0.1 s (``benchmarks/measure.py``).
3. Cross index: `--partitions` partitions of `--partition-size` documents (the same generator,
   one seed each, plus a `text_hash`), 5% of each partition's documents copying the bands and
   text hash of documents of the one before; each `CrossIndex.add_partition` in its own
   subprocess, as a Dagster run would, then `clusters()`.
4. Components (`curation.components.connected_components_sql`) on a synthetic graph of
   `--graph-edges` edges between 16-hex-character string nodes: a 20% share of the edges is one
   long chain in shuffled order, 30% stars of heavy-tailed sizes, 50% a sparse random graph
   (a giant component and many small ones). Each path in its own subprocess under a
   `--graph-budget-gb` budget (DuckDB gets 75% of it): the DuckDB hooking rounds (the path the
   budget picks) and the in-memory union-find (forced by a budget the nodes fit), with their
   results compared by a checksum of (node, root).
5. Prints markdown tables; writes ``benchmarks/results/clustering.md`` when all experiments ran
   (not with `--only`).
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.measure import RESULT_PREFIX, run_measured  # noqa: E402
from curation.components import connected_components_sql, in_memory  # noqa: E402
from curation.dedup import CrossIndex, DuckDBSettings, cluster_near_duplicates  # noqa: E402
from curation.duck import MemoryBudget, duckdb_session, literal  # noqa: E402
from curation.storage import ROW_GROUP_ROWS  # noqa: E402

BANDS = 14
FAMILY_SHARE = 0.10
HOT = ((0, 0.02), (5, 0.015), (9, 15_000))  # (band, share of documents or a count)
CROSS_SHARE = 0.05
WORK = Path(__file__).resolve().parent / ".work" / "clustering"
RESULTS = Path(__file__).resolve().parent / "results" / "clustering.md"
MIB = 2**20
EXPERIMENTS = ["clustering", "cross", "components"]

# --- synthetic data -----------------------------------------------------------------------------


def family_sizes(rng: np.random.Generator, documents: int) -> np.ndarray:
    """Family sizes (2..20) covering about `FAMILY_SHARE` of the documents."""
    sizes = rng.integers(2, 21, size=int(documents * FAMILY_SHARE / 11) + 1)
    return sizes[np.cumsum(sizes) <= documents * FAMILY_SHARE]


def synthetic_bands(documents: int, seed: int = 0) -> pa.Table:
    """The band table described in the module docstring, plus a random `text_hash`; rows in
    random doc_id order."""
    rng = np.random.default_rng(seed)
    bands = rng.integers(0, 2**64, size=(documents, BANDS), dtype=np.uint64)
    sizes = family_sizes(rng, documents)
    first = np.repeat(np.concatenate([[0], np.cumsum(sizes)[:-1]]), sizes)
    copy = rng.random((first.size, BANDS)) < 0.5
    copy[np.arange(first.size), rng.integers(0, BANDS, first.size)] = True
    members = np.arange(first.size)
    bands[members] = np.where(copy, bands[first], bands[members])
    cursor = first.size
    for band, share in HOT:
        count = int(documents * share) if share < 1 else int(share)
        bands[cursor : cursor + count, band] = rng.integers(0, 2**64, dtype=np.uint64)
        cursor += count
    doc_ids = [f"{x:016x}" for x in rng.integers(0, 2**64, size=documents, dtype=np.uint64)]
    columns = {"doc_id": pa.array(doc_ids)}
    columns |= {f"band_{b:02d}": pa.array(bands[:, b]) for b in range(BANDS)}
    columns["text_hash"] = pa.array(rng.integers(0, 2**64, size=documents, dtype=np.uint64))
    return pa.table(columns).take(pa.array(rng.permutation(documents)))


def cached(path: Path, build: Callable[[], pa.Table], row_group_size: int | None = None) -> Path:
    """`path`, written by `build()` unless it exists."""
    if not path.exists():
        WORK.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        pq.write_table(build(), temporary, compression="zstd", row_group_size=row_group_size)
        temporary.replace(path)
    return path


def band_file(documents: int) -> Path:
    return cached(WORK / f"bands-{documents}.parquet", lambda: synthetic_bands(documents))


def partition_file(documents: int, partition: int) -> Path:
    """Partition `partition`: its own documents, the first `CROSS_SHARE` of them carrying the
    keys of other documents of partition `partition - 1`."""

    def build() -> pa.Table:
        table = synthetic_bands(documents, seed=100 + partition)
        if partition == 0:
            return table
        copies = int(documents * CROSS_SHARE)
        # Rows the partition before kept as its own (its first rows are copies in turn).
        previous = synthetic_bands(documents, seed=99 + partition).slice(copies, copies)
        previous = previous.set_column(0, "doc_id", table["doc_id"].slice(0, copies))
        return pa.concat_tables([previous, table.slice(copies)])

    return cached(WORK / f"partition-{documents}-{partition}.parquet", build)


def synthetic_graph(edges: int, seed: int = 0) -> pa.Table:
    """The graph of the module docstring: (`a`, `b`) string edges in random order."""
    rng = np.random.default_rng(seed)
    chain, stars = int(edges * 0.2), int(edges * 0.3)
    random_edges = edges - chain - stars
    sizes = np.minimum(rng.zipf(1.8, size=stars), 5_000)
    sizes = sizes[np.cumsum(sizes) <= stars]
    random_nodes = random_edges
    nodes = chain + 1 + int(sizes.sum()) + sizes.size + random_nodes
    order = rng.permutation(chain + 1)
    left = [order[:-1]]
    right = [order[1:]]
    centres = chain + 1 + np.arange(sizes.size)
    left.append(np.repeat(centres, sizes))
    right.append(chain + 1 + sizes.size + np.arange(int(sizes.sum())))
    base = nodes - random_nodes
    left.append(base + rng.integers(0, random_nodes, random_edges))
    right.append(base + rng.integers(0, random_nodes, random_edges))
    a, b = np.concatenate(left), np.concatenate(right)
    names = np.array([f"{x:016x}" for x in rng.integers(0, 2**63, size=nodes)])
    shuffle = rng.permutation(a.size)
    return pa.table({"a": names[a[shuffle]], "b": names[b[shuffle]]})


def graph_file(edges: int) -> Path:
    # Row groups as the stages write them: DuckDB decodes a row group's strings at once, and
    # pyarrow's default (a million rows) alone would not fit a 64 MB memory_limit.
    return cached(WORK / f"graph-{edges}-rg.parquet", lambda: synthetic_graph(edges),
                  ROW_GROUP_ROWS)


# --- measured children --------------------------------------------------------------------------


def high_water_mark() -> int:
    """This process's peak RSS (VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def settings(memory_limit: str) -> DuckDBSettings:
    return DuckDBSettings(memory_limit=memory_limit, threads=2, temp_directory=str(WORK))


def child(args: list[str], memory_limit: str) -> dict:
    """One measured step: `cluster FILE`, `add INDEX PARTITION FILE` or `clusters INDEX`."""
    match args:
        case ["cluster", path]:
            result = cluster_near_duplicates(Path(path), settings=settings(memory_limit))
            sizes = result.table["cluster_size"].to_numpy()
            return vars(result.stats) | {"largest": int(sizes.max()) if sizes.size else 0}
        case ["add", index, partition, path]:
            links = CrossIndex(index, settings=settings(memory_limit)).add_partition(
                partition, Path(path)
            )
            return {"links": links.num_rows}
        case ["clusters", index]:
            return vars(CrossIndex(index, settings=settings(memory_limit)).clusters().stats)
        case ["components", path, budget_gb, forced]:
            return components_child(Path(path), float(budget_gb), forced == "memory")
    raise SystemExit(f"unknown child command {args}")


def components_child(path: Path, budget_gb: float, force_memory: bool) -> dict:
    """Components of the edges at `path` under a `budget_gb` budget (DuckDB gets its share);
    `force_memory` picks the union-find by judging the nodes against a budget they fit."""
    budget = MemoryBudget(memory_gb=budget_gb, spill_directory=str(WORK))
    with duckdb_session(budget.duckdb()) as con:
        con.execute(f"CREATE VIEW edges AS SELECT * FROM read_parquet({literal(str(path))})")
        judged = MemoryBudget(memory_gb=1024) if force_memory else budget
        run = connected_components_sql(con, "edges", "found", budget=judged)
        components, largest, checksum = con.sql(
            "SELECT count(*), max(n), sum(h) FROM (SELECT root, count(*) AS n,"
            " sum(hash(node, root) % 1000000007) AS h FROM found GROUP BY root)").fetchall()[0]
    return {"rounds": run.rounds, "jumps": run.jumps, "nodes": run.nodes, "edges": run.edges,
            "components": components, "largest": largest, "checksum": int(checksum),
            "path": "in memory" if in_memory(run.nodes, judged) else "DuckDB rounds"}


def measure(args: list[str], memory_limit: str, log: str) -> dict:
    """Run `child(args)` in a fresh process: its result, wall time and peak memory."""
    cmd = [sys.executable, __file__, "--memory-limit", memory_limit, "--child", *args]
    measured = run_measured(cmd, WORK / log)
    if not measured.ok:
        raise SystemExit(f"{' '.join(args)} failed: see {measured.log_path}")
    return measured.result | {
        "wall": measured.wall_seconds,
        "sampled_rss": measured.peak_rss_bytes,
        "other_load": measured.other_load,
    }


# --- the two experiments ------------------------------------------------------------------------


def clustering_rows(sizes: list[int], memory_limit: str, tight_limit: str) -> list[dict]:
    runs = [(n, memory_limit) for n in sizes] + [(max(sizes), tight_limit)]
    rows = []
    for documents, limit in runs:
        row = measure(["cluster", str(band_file(documents))], limit, f"cluster-{documents}")
        rows.append(row | {"n": documents, "limit": limit})
    return rows


def cross_rows(partitions: int, documents: int, memory_limit: str) -> list[dict]:
    index = WORK / f"index-{documents}"
    shutil.rmtree(index, ignore_errors=True)
    rows = []
    for partition in range(partitions):
        path = partition_file(documents, partition)
        args = ["add", str(index), f"p{partition}", str(path)]
        rows.append(measure(args, memory_limit, f"add-{partition}") | {"step": f"add p{partition}"})
    rows.append(measure(["clusters", str(index)], memory_limit, "clusters") | {"step": "clusters"})
    rows[-1]["index_mib"] = sum(p.stat().st_size for p in index.rglob("*") if p.is_file()) / MIB
    return rows


def components_rows(edges: int, budget_gb: float) -> list[dict]:
    path = str(graph_file(edges))
    rows = [measure(["components", path, str(budget_gb), forced], "1GB", f"components-{forced}")
            for forced in ("budget", "memory")]
    if len({row["checksum"] for row in rows}) != 1:
        raise SystemExit("the two components paths disagree")
    return rows


def components_table(rows: list[dict], budget_gb: float) -> list[str]:
    first = rows[0]
    lines = [
        f"Connected components of {first['edges']:,} edges between {first['nodes']:,} string"
        f" nodes ({first['components']:,} components, the largest {first['largest']:,} nodes),"
        f" under a {budget_gb * 1024:,.0f} MiB budget (DuckDB memory_limit"
        f" {MemoryBudget(memory_gb=budget_gb).duckdb().memory_limit}), one process per path;"
        " both give the same (node, root) table:",
        "",
        "| path | wall s | peak RSS MiB (VmHWM) | sampled RSS MiB | rounds | pointer jumps |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['path']} | {r['wall']:.1f} | {r['hwm'] / MIB:,.0f}"
                     f" | {r['sampled_rss'] / MIB:,.0f} | {r['rounds']} | {r['jumps']} |")
    return lines


def clustering_table(rows: list[dict]) -> list[str]:
    lines = [
        "| documents | DuckDB memory_limit | wall s | s per M docs | peak RSS MiB (VmHWM)"
        " | sampled RSS MiB | buckets | hot buckets | capped members | edges | clustered docs"
        " | clusters | largest | others' load (cores) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['n']:,} | {r['limit']} | {r['wall']:.1f} | {r['wall'] / r['n'] * 1e6:.1f}"
            f" | {r['hwm'] / MIB:,.0f} | {r['sampled_rss'] / MIB:,.0f} | {r['buckets']:,}"
            f" | {r['hot_buckets']} | {r['capped_members']:,} | {r['edges']:,}"
            f" | {r['documents']:,} | {r['clusters']:,} | {r['largest']:,}"
            f" | {r['other_load']:.2f} |"
        )
    same = [r for r in rows if r["limit"] == rows[0]["limit"]]
    first, last = same[0], same[-1]
    return lines + [
        "",
        f"From {first['n']:,} to {last['n']:,} documents ({last['n'] / first['n']:.0f}x) at the "
        f"same limit: wall time x{last['wall'] / first['wall']:.2f}, peak RSS "
        f"x{last['hwm'] / first['hwm']:.2f}.",
    ]


def cross_table(rows: list[dict], documents: int) -> list[str]:
    lines = [
        f"Cross index, partitions of {documents:,} documents ({CROSS_SHARE:.0%} of each copying "
        "the keys of the partition before; keys: 14 bands and a text hash), one process per step:",
        "",
        "| step | wall s | peak RSS MiB (VmHWM) | cross links added | union: links, clustered docs,"
        " clusters |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        links = f"{r['links']:,}" if "links" in r else ""
        union = "" if links else f"{r['edges']:,}, {r['documents']:,}, {r['clusters']:,}"
        peak = r["hwm"] / MIB
        lines.append(f"| {r['step']} | {r['wall']:.1f} | {peak:,.0f} | {links} | {union} |")
    size = rows[-1]["index_mib"]
    return lines + ["", f"Index on disk after the last partition: {size:,.0f} MiB."]


def markdown(sections: list[list[str]]) -> str:
    return "\n".join(
        [
            "# Near-duplicate clustering: time and memory against corpus size",
            "",
            "Command: `.venv/bin/python benchmarks/clustering.py` (method: its docstring).",
            "",
            "Synthetic band tables (14 uint64 bands, ~10% of documents in families of 2-20, "
            "three hot buckets over the 10,000 cap), DuckDB 2 threads; Python "
            f"{platform.python_version()}, 2 cores (shared machine).",
            "",
            *(line for section in sections for line in [*section, ""]),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 2_000_000, 4_000_000])
    parser.add_argument("--memory-limit", default="1GB")
    parser.add_argument("--tight-limit", default="300MB")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--partition-size", type=int, default=1_000_000)
    parser.add_argument("--graph-edges", type=int, default=2_500_000)
    parser.add_argument("--graph-budget-gb", type=float, default=0.25)
    parser.add_argument("--only", nargs="+", choices=EXPERIMENTS, default=EXPERIMENTS)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        start = time.perf_counter()
        result = child(args.child, args.memory_limit)
        result |= {"seconds": time.perf_counter() - start, "hwm": high_water_mark()}
        print(RESULT_PREFIX + json.dumps(result), flush=True)
        return
    sections = []
    if "clustering" in args.only:
        sections.append(clustering_table(
            clustering_rows(args.sizes, args.memory_limit, args.tight_limit)))
    if "cross" in args.only:
        sections.append(cross_table(
            cross_rows(args.partitions, args.partition_size, args.memory_limit),
            args.partition_size))
    if "components" in args.only:
        sections.append(components_table(
            components_rows(args.graph_edges, args.graph_budget_gb), args.graph_budget_gb))
    text = markdown(sections)
    if args.only == EXPERIMENTS:
        RESULTS.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
