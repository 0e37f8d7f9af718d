"""Semantic dedup (`curation.semantic_dedup`) on labelled pairs built from real text: precision and
recall per cosine threshold, recall per kind of rewrite, and the cost per document.

    .venv/bin/python benchmarks/semantic_dedup.py [--bases 300] [--max-tokens 128]
        [--thresholds 0.8 0.85 0.9 0.95] [--cluster-size 100] [--json FILE]

Passages (`passages`): the first 250 words of WikiText-2's test articles, of the article-
extraction benchmark's gold article text and of every 20th 300-word Project Gutenberg chunk
(`../shared/data`). Each passage gets three rewrites that a semantic dedup should find, seeded:
its sentences in another order (`shuffled`), a fifth of its sentences dropped (`dropped`) and its
first 60% of words (`truncated`); and a sibling it must not merge with: the next 250 words of
the same article or book (same topic, author and style, other text). All of them are embedded
and grouped together; a labelled pair counts as merged when both land in one group.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(variable, "1")  # per-core figures

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from benchmarks.quality_models import (  # noqa: E402
    DATA,
    article_bodies,
    gutenberg_chunks,
    wikipedia_articles,
)
from curation.embeddings import EmbeddingSettings, SentenceEncoder  # noqa: E402
from curation.semantic_dedup import SemanticDedupSettings, semantic_groups  # noqa: E402

PASSAGE_WORDS = 250
REWRITES = ("shuffled", "dropped", "truncated")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def passages(data: Path = DATA, bases: int = 300) -> list[tuple[str, str]]:
    """(passage, sibling): the first 250 words of a document and the next 250 of the same one,
    for documents long enough to have both; up to `bases`, interleaving the three sources."""
    sources = [wikipedia_articles(data), article_bodies(data), gutenberg_chunks(data)[::20]]
    pairs: list[tuple[str, str]] = []
    for group in sources:
        for text in group:
            words = text.split()
            if len(words) >= 2 * PASSAGE_WORDS and len(pairs) < bases:
                pairs.append((" ".join(words[:PASSAGE_WORDS]),
                              " ".join(words[PASSAGE_WORDS:2 * PASSAGE_WORDS])))
    return pairs


def rewrite(text: str, kind: str, rng: random.Random) -> str:
    """The passage rewritten as `kind` (`REWRITES`)."""
    if kind == "truncated":
        words = text.split()
        return " ".join(words[:int(len(words) * 0.6)])
    sentences = _SENTENCE_END.split(text)
    if kind == "shuffled":
        rng.shuffle(sentences)
    else:
        drop = set(rng.sample(range(len(sentences)), max(1, len(sentences) // 5))) \
            if len(sentences) > 1 else set()
        sentences = [s for i, s in enumerate(sentences) if i not in drop]
    return " ".join(sentences)


def labelled_pool(pairs: list[tuple[str, str]], seed: int = 7
                  ) -> tuple[list[str], list[tuple[int, int, str]]]:
    """Every text, and the labelled pairs (row, row, kind): a rewrite kind (a duplicate) or
    `sibling` (not one)."""
    rng = random.Random(seed)
    texts: list[str] = []
    labels: list[tuple[int, int, str]] = []
    for passage, sibling in pairs:
        base = len(texts)
        texts.append(passage)
        for kind in REWRITES:
            labels.append((base, len(texts), kind))
            texts.append(rewrite(passage, kind, rng))
        labels.append((base, len(texts), "sibling"))
        texts.append(sibling)
    return texts, labels


def score(kept: np.ndarray, labels: list[tuple[int, int, str]]) -> dict[str, Any]:
    """Precision and recall over the labelled pairs, and recall per rewrite kind."""
    merged = {kind: [kept[a] == kept[b] for a, b, k in labels if k == kind]
              for kind in (*REWRITES, "sibling")}
    found = sum(sum(merged[kind]) for kind in REWRITES)
    duplicates = sum(len(merged[kind]) for kind in REWRITES)
    false = sum(merged["sibling"])
    return {"recall": found / duplicates,
            "precision": found / (found + false) if found + false else 1.0,
            "siblings_merged": false / len(merged["sibling"]),
            **{f"recall_{kind}": float(np.mean(merged[kind])) for kind in REWRITES}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bases", type=int, default=300)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--thresholds", type=float, nargs="+", default=[0.8, 0.85, 0.9, 0.95])
    parser.add_argument("--cluster-size", type=int, default=100)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    texts, labels = labelled_pool(passages(bases=args.bases))
    encoder = SentenceEncoder(EmbeddingSettings(max_tokens=args.max_tokens, backend="numpy"))
    started = time.perf_counter()
    vectors = encoder.encode(texts)
    embed_seconds = time.perf_counter() - started
    print(f"{len(texts)} texts ({len(labels)} labelled pairs), embedded at {args.max_tokens} "
          f"tokens: {embed_seconds / len(texts) * 1000:.0f} ms a document (one CPU thread)\n")
    print("| threshold | precision | recall | shuffled | dropped | truncated | siblings merged "
          "| grouping ms/doc |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    rows = []
    for threshold in args.thresholds:
        settings = SemanticDedupSettings(threshold=threshold, cluster_size=args.cluster_size)
        started = time.perf_counter()
        groups = semantic_groups(vectors, None, settings)
        seconds = time.perf_counter() - started
        row = {"threshold": threshold, **score(groups.kept, labels),
               "grouping_ms_per_document": seconds / len(texts) * 1000}
        rows.append(row)
        print(f"| {threshold} | {row['precision']:.3f} | {row['recall']:.3f} | "
              f"{row['recall_shuffled']:.3f} | {row['recall_dropped']:.3f} | "
              f"{row['recall_truncated']:.3f} | {row['siblings_merged']:.3f} | "
              f"{row['grouping_ms_per_document']:.2f} |")
    if args.json:
        args.json.write_text(json.dumps({
            "texts": len(texts), "max_tokens": args.max_tokens,
            "embed_ms_per_document": embed_seconds / len(texts) * 1000, "rows": rows},
            indent=1))


if __name__ == "__main__":
    main()
