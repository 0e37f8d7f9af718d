"""The `embeddings` stage's throughput as the pipeline runs it: every part of a partition's
scrubbed text through `EmbeddingsWork` on the worker pool (each worker capped to its share of the
cores' BLAS threads, `curation.executor.worker_threads`), in documents per second and per core.

    bash scripts/setup.sh      # the built-in sample in ./data
    .venv/bin/python benchmarks/embeddings_stage.py [--root data] [--partition SAMPLE-01]
        [--workers 1 2] [--repeats 3] [--max-tokens 128 256]

Each run writes nothing: the tasks' outputs are computed and dropped. The time includes each
worker's model load (sha256 of the weights, about 0.3 s) and its tokenizer.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from curation.embeddings import EmbeddingSettings  # noqa: E402
from curation.executor import map_tasks  # noqa: E402
from curation.stages.base import DocumentsInput  # noqa: E402
from curation.stages.embeddings import EmbeddingsWork  # noqa: E402
from curation.storage import open_store  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default="data")
    parser.add_argument("--partition", default="SAMPLE-01")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, nargs="+", default=[128, 256])
    args = parser.parse_args()
    documents = DocumentsInput(open_store(args.root), args.partition, columns=("doc_id",))
    tasks = list(range(documents.task_count()))
    cores = len(os.sched_getaffinity(0))
    print(f"{args.partition}: {len(tasks)} parts, numpy backend, {cores} cores\n")
    print("| max tokens | workers | documents | median s | docs/s | docs/s per worker |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for max_tokens in args.max_tokens:
        work = EmbeddingsWork(documents, EmbeddingSettings(enabled=True, max_tokens=max_tokens,
                                                           backend="numpy"))
        for workers in args.workers:
            seconds, count = [], 0
            for _ in range(args.repeats):
                started = time.perf_counter()
                outputs = map_tasks(work, tasks, workers)
                seconds.append(time.perf_counter() - started)
                count = sum(output.stats.records_in for output in outputs)
            median = statistics.median(seconds)
            print(f"| {max_tokens} | {workers} | {count} | {median:.1f} | {count / median:.1f} | "
                  f"{count / median / workers:.1f} |")


if __name__ == "__main__":
    main()
