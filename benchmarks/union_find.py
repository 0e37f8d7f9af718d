"""The in-memory union-find of `curation.components` against the one it replaced, on graphs
shaped like near-duplicate clusters (benchmarks/results/scale.md, "The union-find without its
passes over every node").

    .venv/bin/python benchmarks/union_find.py [--nodes 3000000 30000000]

For each size, draws clusters with Zipf sizes (exponent 1.6) over `nodes` nodes, each member
linked to a random member of its cluster and half of them once more (about 1.5 edges a node,
in a random order, as LSH star edges come out of the exchange), then runs, each in a fresh
process over batches of `EDGE_BATCH` edges: `connected_components` (ours: roots found along
the batch's own paths, int32 ids, a full pointer-jumping pass once per `nodes` edges) and the
previous code (int64 ids, a full pass after every hooking step of every batch). Prints CPU
seconds, the union-find's peak allocations a node (tracemalloc: the arrays and one batch's
temporaries), the process's peak RSS (the edges included) and whether the roots agree.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.measure import run_measured  # noqa: E402
from curation.components import EDGE_BATCH, connected_components  # noqa: E402


def graph(nodes: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Edges (a, b) of Zipf-sized clusters over `nodes` nodes, shuffled."""
    rng = np.random.default_rng(seed)
    sizes = np.minimum(rng.zipf(1.6, nodes // 4), 100_000)
    sizes = sizes[np.cumsum(sizes) <= nodes]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    cluster = np.repeat(np.arange(len(sizes)), sizes)
    node_of = rng.permutation(nodes)[:cluster.size]
    again = rng.integers(0, cluster.size, cluster.size // 2)
    members = np.concatenate([np.arange(cluster.size), again])
    partner = starts[cluster[members]] + (
        rng.random(members.size) * sizes[cluster[members]]).astype(np.int64)
    order = rng.permutation(members.size)
    return node_of[members][order], node_of[partner][order]


def previous(edges: list[tuple[np.ndarray, np.ndarray]], nodes: int) -> np.ndarray:
    """The union-find before: int64 ids, every node compressed after each hooking step."""
    parent = np.arange(nodes, dtype=np.int64)

    def compress() -> None:
        while True:
            grand = parent[parent]
            if np.array_equal(grand, parent):
                return
            parent[:] = grand

    for left, right in edges:
        while left.size:
            a, b = parent[left], parent[right]
            differ = a != b
            a, b, left, right = a[differ], b[differ], left[differ], right[differ]
            np.minimum.at(parent, np.maximum(a, b), np.minimum(a, b))
            compress()
    return parent


def child(folder: Path, implementation: str) -> None:
    """Runs one implementation over the saved graph; prints a JSON line."""
    a, b = np.load(folder / "a.npy"), np.load(folder / "b.npy")
    nodes = int(np.load(folder / "nodes.npy"))
    edges = [(a[i:i + EDGE_BATCH], b[i:i + EDGE_BATCH]) for i in range(0, a.size, EDGE_BATCH)]
    tracemalloc.start()  # numpy reports its arrays to it: the union-find's own peak
    start = time.process_time()
    roots = (connected_components if implementation == "ours" else previous)(edges, nodes)
    seconds = time.process_time() - start
    peak = tracemalloc.get_traced_memory()[1]
    print(json.dumps({"cpu_s": seconds, "bytes_per_node": peak / nodes,
                      "components": int(np.unique(roots).size),
                      "checksum": int(roots.astype(np.int64).sum())}))


def same(before: dict, after: dict) -> bool:
    return all(before[key] == after[key] for key in ("components", "checksum"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[3_000_000, 30_000_000])
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]), args.child[1])
        return 0
    print("| nodes | edges | previous CPU s | ours CPU s | speedup | previous bytes a node |"
          " ours bytes a node | previous peak RSS MiB | ours peak RSS MiB | same roots |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    with tempfile.TemporaryDirectory(prefix="union-find-") as work:
        folder = Path(work)
        for nodes in args.nodes:
            a, b = graph(nodes)
            np.save(folder / "a.npy", a)
            np.save(folder / "b.npy", b)
            np.save(folder / "nodes.npy", np.array(nodes))
            baseline = run_measured([sys.executable, __file__, "--child", work, "numpy"],
                                    folder / "baseline")
            peak = run_measured([sys.executable, __file__, "--child", work, "ours"],
                                folder / "ours")
            before, after = (json.loads(Path(f"{folder / name}.out").read_text())
                             for name in ("baseline", "ours"))
            print(f"| {nodes:,} | {a.size:,} | {before['cpu_s']:.1f} | {after['cpu_s']:.1f} |"
                  f" {before['cpu_s'] / after['cpu_s']:.1f}x |"
                  f" {before['bytes_per_node']:.1f} | {after['bytes_per_node']:.1f} |"
                  f" {baseline.peak_rss_bytes / 2**20:,.0f} | {peak.peak_rss_bytes / 2**20:,.0f} |"
                  f" {same(before, after)} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
