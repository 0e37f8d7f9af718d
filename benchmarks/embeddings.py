"""Embedding throughput for the model plane: all-MiniLM-L6-v2 (`curation.embeddings`) over real
Wikipedia articles, in documents per second per CPU core (numpy and torch on one thread) and per
GPU (torch on CUDA, when there is one), each against sentence-transformers on the same weights
where that package is installed (the vectors' largest difference and smallest cosine).

    .venv/bin/python benchmarks/embeddings.py [--documents 64] [--gpu-documents 20000]
        [--max-tokens 256] [--batch-size 32] [--gpu-batch-size 256]
        [--model-folder DIR --weights-sha256 HEX] [--json FILE]

Documents: the articles of WikiText-2's test split (`../shared/data/sources/wikipedia`), cycled
to the count asked for; nearly all are longer than `--max-tokens`, so every document costs the
full window. "tokenize" is the share of the time spent in the tokenizer (on the CPU, one thread).
``--model-folder`` points at a copy of the model's files (say, rounded to float16 to travel to a
lent GPU machine) with its weights' sha256.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

# One thread for the per-core figures: set before numpy loads its BLAS.
for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(variable, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from curation.embeddings import (  # noqa: E402
    EmbeddingSettings,
    ModelFiles,
    SentenceEncoder,
)

WIKI = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "sources" / \
    "wikipedia" / "wikitext-2-raw_wiki.test.raw"


def articles() -> list[str]:
    """WikiText-2's test articles (split at their top-level ` = Title = ` headings)."""
    text = WIKI.read_text(encoding="utf-8")
    pieces, current = [], []
    for line in text.splitlines():
        if line.startswith(" = ") and not line.startswith(" = = ") and current:
            pieces.append("\n".join(current).strip())
            current = []
        current.append(line)
    pieces.append("\n".join(current).strip())
    return [piece for piece in pieces if len(piece) > 500]


def cycled(texts: list[str], count: int) -> list[str]:
    return [texts[i % len(texts)] for i in range(count)]


def measure(encoder: SentenceEncoder, texts: list[str]) -> tuple[np.ndarray, dict[str, Any]]:
    tokenize = 0.0
    vectors = np.zeros((len(texts), 384), dtype=np.float32)
    tokens = 0
    start = time.perf_counter()
    batches = encoder.batches(texts)
    while True:
        began = time.perf_counter()
        try:
            rows, (ids, mask) = next(batches)
        except StopIteration:
            break
        tokenize += time.perf_counter() - began
        tokens += int(mask.sum())
        vectors[rows] = encoder.model(ids, mask)
    seconds = time.perf_counter() - start
    return vectors, {"documents": len(texts), "tokens": tokens, "seconds": seconds,
                     "docs_per_s": len(texts) / seconds, "tokens_per_s": tokens / seconds,
                     "tokenize_share": tokenize / seconds}


def reference(files: ModelFiles, texts: list[str], settings: EmbeddingSettings,
              device: str) -> np.ndarray | None:
    """sentence-transformers' vectors for the same files, when it is installed."""
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        return None
    model = SentenceTransformer(str(files.folder), device=device)
    model.max_seq_length = settings.max_tokens
    return model.encode(texts, batch_size=settings.batch_size, convert_to_numpy=True)


def agreement(ours: np.ndarray, theirs: np.ndarray | None) -> dict[str, float]:
    if theirs is None:
        return {}
    cosine = (ours * theirs).sum(1) / np.linalg.norm(ours, axis=1) / np.linalg.norm(theirs, axis=1)
    return {"max_abs_diff": float(np.abs(ours - theirs).max()),
            "min_cosine": float(cosine.min())}


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    files = ModelFiles(args.model_folder, args.weights_sha256) if args.model_folder \
        else ModelFiles.packaged()
    texts = articles()
    cpu_texts = cycled(texts, args.documents)
    rows = []
    for backend in ("numpy", "torch"):
        settings = EmbeddingSettings(max_tokens=args.max_tokens, batch_size=args.batch_size,
                                     backend=backend, device="cpu")
        try:
            encoder = SentenceEncoder(settings, files)
        except ImportError:
            continue
        if backend == "torch":
            import torch

            torch.set_num_threads(1)
        vectors, row = measure(encoder, cpu_texts)
        row |= {"backend": f"{backend} (CPU, 1 thread)", "batch_size": args.batch_size}
        row |= agreement(vectors, reference(files, cpu_texts, settings, "cpu"))
        rows.append(row)
    try:
        import torch
    except ImportError:
        return rows
    if torch.cuda.is_available():
        settings = EmbeddingSettings(max_tokens=args.max_tokens, batch_size=args.gpu_batch_size,
                                     backend="torch", device="cuda")
        encoder = SentenceEncoder(settings, files)
        measure(encoder, cycled(texts, settings.batch_size * 2))  # warm-up
        torch.cuda.synchronize()
        vectors, row = measure(encoder, cycled(texts, args.gpu_documents))
        head = args.documents
        row |= {"backend": f"torch ({torch.cuda.get_device_name()})",
                "batch_size": args.gpu_batch_size}
        row |= agreement(vectors[:head], reference(files, cpu_texts, settings, "cuda"))
        rows.append(row)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| backend | batch | documents | tokens | seconds | docs/s | tokens/s "
             "| tokenize share | vs sentence-transformers (max abs diff / min cosine) |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for row in rows:
        versus = f"{row['max_abs_diff']:.1e} / {row['min_cosine']:.6f}" \
            if "max_abs_diff" in row else "not installed"
        lines.append(f"| {row['backend']} | {row['batch_size']} | {row['documents']:,} "
                     f"| {row['tokens']:,} | {row['seconds']:.1f} | {row['docs_per_s']:,.1f} "
                     f"| {row['tokens_per_s']:,.0f} | {row['tokenize_share']:.0%} | {versus} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=64)
    parser.add_argument("--gpu-documents", type=int, default=20_000)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--gpu-batch-size", type=int, default=256)
    parser.add_argument("--model-folder", type=Path)
    parser.add_argument("--weights-sha256")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = run(args)
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
