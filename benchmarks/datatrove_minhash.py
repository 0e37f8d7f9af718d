"""datatrove side of the MinHash benchmark: its signature step on extracted texts.

Runs inside ``benchmarks/.venv-datatrove`` (datatrove 0.10 cannot share the project's
environment); ``benchmarks/minhash.py`` starts it as a subprocess and imports nothing from it.
Input: a folder of JSONL shards, one ``{"id", "text"}`` object a line (read before timing). The
last stdout line is ``RESULT {json}``.

Timed: ``MinhashDedupSignature.run`` with FineWeb's ``MinhashConfig`` (5-grams, 14 buckets of 8
hashes, 64-bit xxhash, datatrove's default text normalisation), one task over every document:
text normalisation, spaCy word split, shingle hashing, signatures, and writing and sorting its
14 bucket files on local disk (the step's real work). One document goes through
``get_shingles`` first, untimed, so spaCy's loading is not counted. Then, also timed, the same
documents through ``get_shingles`` alone and ``get_signature`` alone, for the breakdown.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input-dir", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=0, help="first N documents (0: all)")
    return parser.parse_args(argv)


def read_docs(input_dir: Path, limit: int) -> list[dict[str, str]]:
    docs = []
    for path in sorted(input_dir.glob("*.jsonl")):
        with path.open(encoding="utf-8") as fh:
            docs.extend(json.loads(line) for line in fh)
    return docs[:limit] if limit else docs


def run(args: argparse.Namespace) -> dict[str, Any]:
    from datatrove.data import Document
    from datatrove.pipeline.dedup.minhash import MinhashConfig, MinhashDedupSignature
    from datatrove.utils.hashing import HashConfig

    rows = read_docs(args.input_dir, args.limit)
    docs = [Document(text=row["text"], id=row["id"]) for row in rows]
    config = MinhashConfig(
        n_grams=5,
        num_buckets=14,
        hashes_per_bucket=8,
        seed=1,
        hash_config=HashConfig(precision=64, hash_fc="xxhash"),
    )
    out = Path(tempfile.mkdtemp(prefix="dt-minhash-"))
    try:
        step = MinhashDedupSignature(output_folder=str(out), config=config)
        step.get_shingles(docs[0].text)  # loads spaCy: not part of the per-document cost
        start = time.perf_counter()
        step.run(iter(docs), rank=0, world_size=1)
        step_seconds = time.perf_counter() - start
        start = time.perf_counter()
        shingles = [step.get_shingles(doc.text) for doc in docs]
        shingle_seconds = time.perf_counter() - start
        start = time.perf_counter()
        for sh in shingles:
            if sh.size:
                step.get_signature(sh)
        signature_seconds = time.perf_counter() - start
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return {
        "documents": len(docs),
        "without_shingles": sum(1 for sh in shingles if not sh.size),
        "step_seconds": step_seconds,
        "shingle_seconds": shingle_seconds,
        "signature_seconds": signature_seconds,
        "versions": {name: version(name) for name in ("datatrove", "spacy", "xxhash")},
    }


def main(argv: list[str] | None = None) -> int:
    result = run(parse_args(argv))
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
