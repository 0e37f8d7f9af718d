"""The two quality scorers side by side on real text: fastText (`curation.quality`) and the
neural head on all-MiniLM-L6-v2 vectors (`curation.neural_quality`), trained on the same
documents and judged on the same held-out ones, plus their documented combination (the mean of
percentile ranks among the held-out web documents).

    .venv/bin/python benchmarks/quality_models.py [--seeds 1 2 3 4 5] [--max-tokens 256]
        [--json FILE]

Two tasks. Positives: WikiText-2's test articles and every tenth 300-word chunk of six Project
Gutenberg books (`../shared/data/sources`); then, web against web, the gold main text of the
article-extraction benchmark's news and article pages (`../shared/data/html_extraction`).
Negatives: the main text (trafilatura, the pipeline's default settings) of every HTTP 200 HTML
response in the real WARC files of `../shared/data/warc` (Common Crawl, the Internet Archive,
wget, ClueWeb), at least 200 characters: real web pages, not generated spam. Positives are
capped to the negatives' count, as the pipeline balances the classes. Each seed draws another
cap and split (`curation.quality.class_split`); the table gives each scorer's held-out ROC AUC
per seed and the median, and the cost of each model.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(variable, "1")  # per-core figures

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from curation.embeddings import EmbeddingSettings, SentenceEncoder  # noqa: E402
from curation.neural_quality import combined_scores, train_head  # noqa: E402
from curation.quality import (  # noqa: E402
    HQ,
    LQ,
    QualityClassifierSettings,
    class_split,
    roc_auc,
    train_classifier,
)

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
BOOK_CHUNK_WORDS = 300
MIN_PAGE_CHARS = 200
_ARTICLE_TITLE = re.compile(r"^ = [^=].* = $")
# wikitext-2 writes in-word hyphens and number separators as " @-@ ", " @,@ ", " @.@ ".
_WIKITEXT_JOINER = re.compile(r" @(.)@ ")


def wikipedia_articles(data: Path = DATA) -> list[str]:
    """WikiText-2's test articles, its joiners undone."""
    raw = (data / "sources/wikipedia/wikitext-2-raw_wiki.test.raw").read_text("utf-8")
    articles: list[list[str]] = []
    for line in raw.splitlines():
        if _ARTICLE_TITLE.match(line):
            articles.append([])
        elif articles and line.strip():
            articles[-1].append(_WIKITEXT_JOINER.sub(r"\1", line.strip()))
    return ["\n".join(lines) for lines in articles if lines]


def gutenberg_chunks(data: Path = DATA) -> list[str]:
    """Consecutive 300-word chunks of the Project Gutenberg books, without PG's licence."""
    chunks = []
    for path in sorted((data / "sources/books_gutenberg").glob("pg*.txt")):
        text = path.read_bytes().decode("cp1252").replace("\r\n", "\n")
        # Project Gutenberg's licence header and footer are the same in every book.
        body = re.split(r"\*\*\* (?:START|END) OF TH[EI]S? PROJECT GUTENBERG[^\n]*", text)
        words = (body[1] if len(body) == 3 else text).split()
        chunks += [" ".join(words[i:i + BOOK_CHUNK_WORDS])
                   for i in range(0, len(words), BOOK_CHUNK_WORDS)]
    return chunks


def curated_texts(data: Path = DATA) -> list[str]:
    """The positives: every article, and every tenth book chunk (about twice the negatives,
    so each seed's cap draws another half)."""
    return wikipedia_articles(data) + gutenberg_chunks(data)[::10]


def article_bodies(data: Path = DATA) -> list[str]:
    """The gold main text of the article-extraction benchmark's 181 news and article pages:
    web pages an editor wrote, the harder positives (web against web)."""
    truth = json.loads((data / "html_extraction/article-extraction-benchmark/ground-truth.json")
                       .read_text("utf-8"))
    return [entry["articleBody"] for _, entry in sorted(truth.items())
            if len(entry.get("articleBody") or "") >= MIN_PAGE_CHARS]


def web_pages(data: Path = DATA) -> list[str]:
    """The main text of the real WARC files' HTML responses (at least 200 characters)."""
    from benchmarks.corpus import iter_warc_html, warc_source_files
    from curation.config import DocumentsSettings
    from curation.extract import Extractor, Rejected

    extractor = Extractor(DocumentsSettings())
    texts = []
    for path in warc_source_files(data):
        for page in iter_warc_html(path):
            try:
                text = extractor.extract(page.html, page.url)
            except Rejected:
                continue
            if len(text) >= MIN_PAGE_CHARS:
                texts.append(text)
    return texts


def compare(positives: list[str], negatives: list[str], vectors: dict[str, np.ndarray],
            seed: int) -> dict[str, Any]:
    """Both models trained on one seed's split; AUCs on its held-out documents."""
    settings = QualityClassifierSettings(dim=32, bucket=100_000, epoch=25, lr=0.5, seed=seed,
                                         max_positives=len(negatives),
                                         training_snapshots=["web"])
    hq_train, hq_held = class_split(positives, settings.max_positives, settings, HQ)
    lq_train, lq_held = class_split(
        negatives, settings.negative_count(len(hq_train) + len(hq_held)), settings, LQ)
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        trained = train_classifier(positives, negatives, settings, Path(folder))
        fasttext_seconds = time.perf_counter() - started
        scorer = trained.scorer(settings)
        fasttext_hq = scorer.score([positives[i] for i in hq_held])
        fasttext_lq = scorer.score([negatives[i] for i in lq_held])
    started = time.perf_counter()
    head = train_head(vectors["hq"][hq_train], vectors["lq"][lq_train])
    head_seconds = time.perf_counter() - started
    neural_hq, neural_lq = head.score(vectors["hq"][hq_held]), head.score(vectors["lq"][lq_held])
    fasttext_reference, neural_reference = np.sort(fasttext_lq), np.sort(neural_lq)
    return {
        "seed": seed, "held_out": {HQ: len(hq_held), LQ: len(lq_held)},
        "fasttext_auc": roc_auc(fasttext_hq, fasttext_lq),
        "neural_auc": roc_auc(neural_hq, neural_lq),
        "combined_auc": roc_auc(
            combined_scores(fasttext_hq, neural_hq, fasttext_reference, neural_reference),
            combined_scores(fasttext_lq, neural_lq, fasttext_reference, neural_reference)),
        "fasttext_train_seconds": fasttext_seconds, "head_train_seconds": head_seconds,
        "fasttext_recorded_auc": trained.roc_auc,
    }


TASKS = {"curated (Wikipedia, books) against web pages": curated_texts,
         "news articles against web pages": article_bodies}


def run_task(name: str, positives: list[str], negatives: list[str], encoder: SentenceEncoder,
             lq_vectors: np.ndarray, seeds: list[int]) -> dict[str, Any]:
    started = time.perf_counter()
    vectors = {"hq": encoder.encode(positives), "lq": lq_vectors}
    embed_seconds = time.perf_counter() - started
    print(f"\n### {name}\n\n{len(positives)} positives, {len(negatives)} negatives; positives "
          f"embedded in {embed_seconds:.1f} s ({len(positives) / embed_seconds:.1f} docs/s, "
          "one CPU thread)\n")
    rows = [compare(positives, negatives, vectors, seed) for seed in seeds]
    print("| seed | held out (hq/lq) | fastText AUC | neural AUC | combined AUC |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        print(f"| {row['seed']} | {row['held_out'][HQ]}/{row['held_out'][LQ]} | "
              f"{row['fasttext_auc']:.4f} | {row['neural_auc']:.4f} | {row['combined_auc']:.4f} |")
    medians = {key: statistics.median(row[key] for row in rows)
               for key in ("fasttext_auc", "neural_auc", "combined_auc",
                           "fasttext_train_seconds", "head_train_seconds")}
    print(f"| median | | {medians['fasttext_auc']:.4f} | {medians['neural_auc']:.4f} | "
          f"{medians['combined_auc']:.4f} |")
    print(f"\ntraining, median: fastText {medians['fasttext_train_seconds']:.2f} s; neural head "
          f"{medians['head_train_seconds']:.3f} s (on vectors already made)")
    return {"positives": len(positives), "negatives": len(negatives),
            "positives_embed_docs_per_second": len(positives) / embed_seconds,
            "rows": rows, "medians": medians}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    negatives = web_pages()
    encoder = SentenceEncoder(EmbeddingSettings(max_tokens=args.max_tokens, backend="numpy"))
    lq_vectors = encoder.encode(negatives)
    print(f"negatives: {len(negatives)} real web pages; vectors of {args.max_tokens} tokens")
    results = {name: run_task(name, texts(), negatives, encoder, lq_vectors, args.seeds)
               for name, texts in TASKS.items()}
    if args.json:
        args.json.write_text(json.dumps({"max_tokens": args.max_tokens, "tasks": results},
                                        indent=1))


if __name__ == "__main__":
    main()
