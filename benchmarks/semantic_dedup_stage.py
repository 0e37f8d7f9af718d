"""The `semantic_dedup` stage at growing sizes: wall time, CPU time and peak memory of the whole
process tree (`benchmarks/measure.py`) for synthetic partitions of N documents, with the same
settings, so the table shows what bounds the memory.

    .venv/bin/python benchmarks/semantic_dedup_stage.py [--documents 20000 100000 400000]
        [--workers 2] [--memory-gb 2] [--json FILE]

A synthetic partition: parts of 20,000 documents whose vectors sit around `documents / 200`
topics (unit vectors, cosine about 0.5 to their topic), 5% of them near-copies of another
document of the partition (cosine about 0.97), with short texts whose lengths rank the
members. Each size runs in a child process (`SemanticWork` on the worker pool, as the asset
runs it); the table gives documents per second, CPU milliseconds per document, peak RSS, and
the planted copies found.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from benchmarks.measure import RESULT_PREFIX, run_measured  # noqa: E402
from curation.embeddings import DIMENSIONS  # noqa: E402
from curation.graph import DOCUMENTS, EMBEDDINGS  # noqa: E402
from curation.partition import Manifest, PartitionLayout  # noqa: E402
from curation.stages.embeddings import SCHEMA, vectors_array  # noqa: E402
from curation.storage import LocalStore  # noqa: E402

PARTITION = "SYN"
PART_ROWS = 20_000
COPY_SHARE = 0.05


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def generate(root: Path, documents: int, seed: int = 0) -> int:
    """The synthetic `documents` and `embeddings` partitions under `root`; returns the number
    of planted copies."""
    rng = np.random.default_rng(seed)
    topics = _unit(rng.normal(size=(max(1, documents // 200), DIMENSIONS)))
    store = LocalStore(str(root))
    layouts = {name: PartitionLayout(store, name, PARTITION) for name in (DOCUMENTS, EMBEDDINGS)}
    for layout in layouts.values():
        layout.prepare("synthetic")
    parts: dict[str, list] = {name: [] for name in layouts}
    copies = 0
    for index, start in enumerate(range(0, documents, PART_ROWS)):
        rows = min(PART_ROWS, documents - start)
        vectors = _unit(topics[rng.integers(len(topics), size=rows)]
                        + rng.normal(scale=1.2 / np.sqrt(DIMENSIONS), size=(rows, DIMENSIONS)))
        copied = np.flatnonzero(rng.random(rows) < COPY_SHARE)[1:]
        sources = rng.integers(0, copied, size=len(copied)) if len(copied) else copied
        vectors[copied] = _unit(vectors[sources] + rng.normal(
            scale=0.25 / np.sqrt(DIMENSIONS), size=(len(copied), DIMENSIONS)))
        copies += len(copied)
        doc_ids = [f"{start + row:016x}" for row in range(rows)]
        texts = ["x" * int(n) for n in rng.integers(50, 400, size=rows)]
        parts[DOCUMENTS].append(layouts[DOCUMENTS].write_part(index, pa.table({
            "doc_id": doc_ids, "source": ["web"] * rows, "snapshot": [PARTITION] * rows,
            "url": [f"https://example.com/{i}" for i in doc_ids], "text": texts})))
        parts[EMBEDDINGS].append(layouts[EMBEDDINGS].write_part(index, pa.table({
            "doc_id": doc_ids, "tokens": pa.array([128] * rows, pa.int16()),
            "embedding": vectors_array(vectors.astype(np.float16))}, schema=SCHEMA)))
    for name, layout in layouts.items():
        layout.write_manifest(Manifest(name, PARTITION, "synthetic", parts[name]))
    return copies


def child(root: Path, workers: int, memory_gb: float) -> None:
    from curation.duck import use_budget
    from curation.semantic_dedup import SemanticDedupSettings
    from curation.stages.base import DocumentsInput
    from curation.stages.semantic_dedup import SemanticWork

    use_budget(memory_gb)
    output = SemanticWork(DocumentsInput(LocalStore(str(root)), PARTITION),
                          SemanticDedupSettings(), workers)(0)
    print(RESULT_PREFIX + json.dumps({"dropped": output.stats.rejected,
                                      "kmeans_clusters": output.stats.counts["kmeans_clusters"],
                                      "pairs": output.stats.counts["candidate_pairs"]}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, nargs="+", default=[20_000, 100_000, 400_000])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-gb", type=float, default=2.0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.workers, args.memory_gb)
        return
    print(f"workers {args.workers}, budget {args.memory_gb} GB, default settings\n")
    print("| documents | k-means clusters | wall s | docs/s | CPU ms/doc | peak RSS MB | "
          "planted copies | dropped |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    rows = []
    for documents in args.documents:
        with tempfile.TemporaryDirectory(prefix="semdedup-") as folder:
            copies = generate(Path(folder) / "data", documents)
            run = run_measured([sys.executable, __file__, "--child", f"{folder}/data",
                                "--workers", str(args.workers),
                                "--memory-gb", str(args.memory_gb)], Path(folder) / "log")
            if not run.ok:
                raise SystemExit(run.log_path.read_text()[-3000:])
        row = {"documents": documents, "wall_s": round(run.wall_seconds, 1),
               "cpu_ms_per_doc": round(run.cpu_seconds * 1000 / documents, 3),
               "peak_rss_mb": round(run.peak_rss_bytes / 2**20), "copies": copies,
               **run.result}
        rows.append(row)
        print(f"| {documents:,} | {row['kmeans_clusters']} | {row['wall_s']} | "
              f"{documents / run.wall_seconds:,.0f} | {row['cpu_ms_per_doc']} | "
              f"{row['peak_rss_mb']} | {copies:,} | {row['dropped']:,} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
