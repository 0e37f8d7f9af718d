"""The code path's per-document work on real code (the interpreter's standard library), one core,
beside the prose path on the same files.

    .venv/bin/python -m benchmarks.code_stages [--files N] [--repeats 3]

Rows: the code suite (`heuristics.annotate_code`) against the prose suites on one word split
(`annotate_splits`); code shingles and their MinHash signatures against word shingles; the
scrubber's PII search with and without the code-only secret search. Medians of `--repeats`
passes, in documents and MB per second on one core.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from benchmarks.code_decontamination import stdlib_files
from curation.code import find_secrets
from curation.heuristics import annotate_code, annotate_splits
from curation.minhash import (
    MinHashSettings,
    code_shingle_hashes,
    signatures,
    signatures_from_shingles,
)
from curation.pii import find_pii
from curation.text import split_text


def _timed(work: Callable[[], object], repeats: int) -> float:
    seconds = []
    for _ in range(repeats):
        start = time.process_time()
        work()
        seconds.append(time.process_time() - start)
    return statistics.median(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    files = stdlib_files(args.files)
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in files]
    paths = [str(p) for p in files]
    megabytes = sum(len(t.encode()) for t in texts) / 1e6
    minhash = MinHashSettings()

    def prose_suites() -> None:
        annotate_splits([split_text(t) for t in texts], ["en"] * len(texts))

    rows = [
        ("code suite (annotate_code)", lambda: annotate_code(texts, paths)),
        ("prose suites (split + annotate_splits)", prose_suites),
        ("code shingles + signatures", lambda: signatures_from_shingles(
            [code_shingle_hashes(t, minhash) for t in texts], minhash)),
        ("word shingles + signatures (split)", lambda: signatures(
            [split_text(t) for t in texts], minhash)),
        ("PII search (find_pii)", lambda: [find_pii(t) for t in texts]),
        ("secret search (find_secrets)", lambda: [find_secrets(t) for t in texts]),
    ]
    print(f"{len(texts)} files, {megabytes:.1f} MB, one core, median of {args.repeats}")
    print(f"{'step':<42}{'CPU s':>8}{'docs/s':>10}{'MB/s':>8}")
    for name, work in rows:
        seconds = _timed(work, args.repeats)
        print(f"{name:<42}{seconds:>8.2f}{len(texts) / seconds:>10,.0f}"
              f"{megabytes / seconds:>8.2f}")


if __name__ == "__main__":
    main()
