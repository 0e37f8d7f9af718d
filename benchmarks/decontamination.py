"""Decontamination: the index, speed, correctness and false-hit study of
`curation.decontamination` with the full eval set of ``shared/data/evals``.

    .venv/bin/python benchmarks/decontamination.py [--repeats 3] [--per-benchmark 300]

1. Index. Every benchmark of `examples/llm_foundry_evals.yaml` loaded and indexed with
   13-grams (items shorter than 13 words kept whole). Build time: median of ``--repeats``
   builds. Memory: the bytes of the index's arrays (`EvalIndex.nbytes`: sorted keys, owners,
   lengths, unique keys and the probe bitmaps) and tracemalloc's peak during one more build
   (items excluded: they are loaded before tracing starts). The Parquet files' size and a
   round trip are checked.
2. Speed, one core (the process is pinned to one CPU): `scan` over at least 5,000 real-derived
   documents, the extracted web pages of ``benchmarks/.work/filters/texts-5000/`` (made by
   ``benchmarks/filters.py``: trafilatura text of real WARC records, ~5,700 characters) plus the
   Gutenberg books and WikiText articles cut into ~1,000-word documents. Median of
   ``--repeats`` runs in one process after the index is built (the first run also fills the
   cache of words holding multi-character folds). docs/s and MB/s of UTF-8 text. The
   independent re-scan (`ResidualMatcher`) is timed on a 500-document slice for comparison.
3. Correctness: per benchmark ``--per-benchmark`` seeded items (all when it has fewer),
   each planted verbatim at a seeded place between paragraphs of a seeded real document (web,
   book or Wikipedia). Caught = a hit for that benchmark and item id; span ok = the hit's text
   is the document's text at its span, lies inside the planted item and starts with the item's
   first n-gram. The independent re-scan must report the same (document, item, n-gram count)
   set.
4. False hits: the clean books (Gutenberg novels and tiny Shakespeare, ~1,000-word documents),
   the WikiText-2 articles and the web pages scanned with n = 13, and, to show what the default
   leaves out, with n = 10 and 8. Every hit is listed with the matched text and, where a person
   has read it (`REVIEWED` below), whether it is real overlap or spurious.
5. Prints the tables and writes them to ``benchmarks/results/decontamination.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import statistics
import sys
import time
import tracemalloc
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from curation.decontamination import (  # noqa: E402
    EvalIndex,
    Hit,
    ResidualMatcher,
    build_index,
    document_words,
    index_metadata,
    normalise_words,
    scan,
)
from curation.evals import EvalItem, load_benchmarks, read_benchmark_list  # noqa: E402

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "results" / "decontamination.md"
DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data"
EVALS_EXAMPLE = BENCH_DIR.parent / "examples" / "llm_foundry_evals.yaml"
TEXTS_5000 = BENCH_DIR / ".work" / "filters" / "texts-5000"
NGRAM = 13
MIN_DOCS = 5000
DOC_WORDS = 1000
SEED = 1

# Hits on the clean text read by a person: (benchmark, item id) -> (verdict, why). Hits not
# listed here are printed as "not reviewed".
REVIEWED: dict[tuple[str, str], tuple[str, str]] = {
    ("boolq", "boolq:1997"): (
        "real overlap (stock formula)",
        'the passage quotes the US copyright notice "Entered according to act of Congress, '
        "in the year ..., in the clerk's office of the District Court of ...\", which the "
        "book's front matter also carries; shared legal boilerplate, not the BoolQ item",
    ),
    ("jeopardy", "jeopardy_all:929"): (
        "real overlap (quotation)",
        'the clue quotes Little Women ("a most important person, in her own opinion at '
        'least"); the book holds the quote, not the clue with its answer (Amy)',
    ),
    ("lambada_openai", "lambada_openai:2943"): (
        "spurious",
        'common phrase "the first time in my life that I"',
    ),
    ("lambada_openai", "lambada_openai:2190"): (
        "spurious",
        'common phrase "there\'s no need for me to say"',
    ),
    ("boolq", "boolq:2737"): (
        "spurious",
        'stock biography phrase "he played college football for the University of"',
    ),
    ("boolq", "boolq:2580"): (
        "spurious",
        'stock phrase "in the National Football League (NFL). As a"',
    ),
    ("boolq", "boolq:3075"): (
        "spurious",
        'stock phrase "selected for preservation in the United States National Film Registry"',
    ),
    ("mmlu", "test/high_school_european_history_test:144"): (
        "spurious",
        'a book title, "The Decline and Fall of the Roman Empire"',
    ),
    ("lambada_openai", "lambada_openai:2368"): (
        "spurious",
        "common phrase \"I can't tell you how many times I've\"",
    ),
    ("boolq", "boolq:2860"): (
        "spurious",
        'stock phrase "is a 501(c)(3) non-profit organization" (charity pages)',
    ),
    ("boolq", "boolq:1642"): (
        "spurious",
        'common phrase "in the upper left-hand corner of the"',
    ),
    ("mmlu", "test/high_school_european_history_test:2"): (
        "spurious",
        'a book title, "The Decline and Fall of the Roman Empire"',
    ),
}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- documents

_GUTENBERG_BODY = re.compile(r"\*\*\* START OF .*?\*\*\*(.*?)\*\*\* END OF ", re.DOTALL)
_WIKI_TITLE = re.compile(r"^ = [^=].* = $", re.MULTILINE)


def _cut(text: str, separator: str, words: int = DOC_WORDS) -> list[str]:
    """`text` cut at `separator`s into documents of about `words` words."""
    docs, current = [], []
    for part in text.split(separator):
        current.append(part)
        if sum(len(p.split()) for p in current) >= words:
            docs.append(separator.join(current).strip())
            current = []
    return docs


def book_documents(data_dir: Path) -> list[str]:
    """Gutenberg novels (cp1252, per PROVENANCE.md) and tiny Shakespeare, ~1,000-word docs."""
    docs = []
    folder = data_dir / "sources/books_gutenberg"
    for path in sorted(folder.glob("pg*.txt")):
        text = path.read_bytes().decode("cp1252").replace("\r\n", "\n")
        match = _GUTENBERG_BODY.search(text)
        docs += _cut(match.group(1) if match else text, "\n\n")
    shakespeare = (folder / "tinyshakespeare_input.txt").read_text(encoding="utf-8")
    return docs + _cut(shakespeare, "\n\n")


def wiki_articles(data_dir: Path) -> list[str]:
    raw = (data_dir / "sources/wikipedia/wikitext-2-raw_wiki.test.raw").read_bytes()
    text = raw.decode("utf-8").replace("\r\n", "\n")
    return [a.strip() for a in _WIKI_TITLE.split(text) if len(a.split()) >= 50]


def web_texts() -> list[str]:
    texts = []
    for path in sorted(TEXTS_5000.glob("*.jsonl")):
        with path.open(encoding="utf-8") as fh:
            texts += [json.loads(line)["text"] for line in fh]
    return texts


@dataclass
class Corpus:
    web: list[str]
    books: list[str]
    wiki: list[str]

    def speed_docs(self) -> tuple[list[str], str]:
        """At least MIN_DOCS documents and how they were made."""
        docs = self.web + self.books + self.wiki
        note = (
            f"{len(self.web):,} web pages (texts-5000) + {len(self.books):,} book and "
            f"{len(self.wiki):,} Wikipedia documents"
        )
        if len(docs) < MIN_DOCS:  # no web texts: repeat the book and Wikipedia documents
            docs = (docs * (MIN_DOCS // max(len(docs), 1) + 1))[:MIN_DOCS]
            note += f", repeated to {len(docs):,} (texts-5000 absent)"
        return docs, note


# --------------------------------------------------------------------------- index


def median_seconds(fn: Callable[[], Any], repeats: int) -> tuple[list[float], Any]:
    runs, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        runs.append(time.perf_counter() - start)
    return runs, result


def traced_peak(fn: Callable[[], Any]) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def index_section(items: list[EvalItem], repeats: int) -> tuple[EvalIndex, str]:
    log(f"building the index {repeats} times")
    runs, index = median_seconds(lambda: build_index(items, NGRAM), repeats)
    peak = traced_peak(lambda: build_index(items, NGRAM))
    meta = index_metadata(index)
    with TemporaryDirectory() as tmp:
        index.write(Path(tmp))
        parquet = sum(p.stat().st_size for p in Path(tmp).iterdir())
        back = EvalIndex.read(Path(tmp))
        assert (back.keys == index.keys).all() and back.items == index.items
    lines = [
        "| benchmark | items | short items (matched whole) | n-gram keys |",
        "|---|---|---|---|",
    ]
    for name, per in meta["per_benchmark"].items():
        lines.append(f"| {name} | {per['items']:,} | {per['short_items']:,} | {per['ngrams']:,} |")
    shorts = sum(p["short_items"] for p in meta["per_benchmark"].values())
    lines.append(
        f"| **all** | **{meta['items']:,}** | **{shorts:,}** | **{meta['keys']:,}** "
        f"({meta['distinct_keys']:,} distinct) |"
    )
    text = "\n".join(
        [
            "\n".join(lines),
            "",
            f"- build: {_runs(runs)} s, median **{statistics.median(runs):.2f} s** "
            f"(loading the items: separate, below)",
            f"- index arrays: **{index.nbytes() / 1e6:.1f} MB** (sorted keys, owners, lengths, "
            f"unique keys, bitmaps of {(1 << index._bitmap.log2) / 8e6:.1f} MB + short-item "
            f"starts); tracemalloc peak while building: **{peak / 1e6:.1f} MB**",
            f"- Parquet (zstd, `ngrams.parquet` + `items.parquet`): {parquet / 1e6:.1f} MB; "
            f"the round trip gives the same keys and items",
        ]
    )
    return index, text


def _runs(runs: Sequence[float]) -> str:
    return ", ".join(f"{r:.2f}" for r in runs)


# --------------------------------------------------------------------------- speed


def pin_one_core() -> str:
    cpu = sorted(os.sched_getaffinity(0))[-1]
    os.sched_setaffinity(0, {cpu})
    return f"pinned to CPU {cpu}"


def speed_section(
    index: EvalIndex, items: list[EvalItem], corpus: Corpus, repeats: int, pinned: str
) -> str:
    docs, note = corpus.speed_docs()
    megabytes = sum(len(d.encode("utf-8", "surrogatepass")) for d in docs) / 1e6
    words = sum(len(document_words(d).hashes) for d in docs) / len(docs)
    chars = sum(map(len, docs)) / len(docs)
    log(f"speed: {len(docs):,} documents, {repeats} runs")
    runs, hits = median_seconds(lambda: scan(index, docs), repeats)
    median = statistics.median(runs)
    words_runs, _ = median_seconds(lambda: [document_words(d) for d in docs], repeats)
    sample = docs[:500]
    matcher = ResidualMatcher(items, NGRAM)
    residual_runs, _ = median_seconds(lambda: matcher.scan(sample), 1)
    rate = len(docs) / median
    verdict = "**meets**" if rate >= 5000 else "**misses**"
    rows = [
        "| what is timed (one core) | runs (s) | docs/s (median) | MB/s | µs/doc |",
        "|---|---|---|---|---|",
        f"| `scan`: words, n-gram keys, probes, hits with spans | {_runs(runs)} | "
        f"**{rate:,.0f}** | {megabytes / median:.1f} | {median / len(docs) * 1e6:.0f} |",
        _speed_row(
            "word hashes alone (`document_words`, part of the row above)",
            words_runs,
            len(docs),
            megabytes,
        ),
        _speed_row(
            "independent re-scan (`ResidualMatcher.scan`), first 500 documents",
            residual_runs,
            len(sample),
            None,
        ),
    ]
    hit_docs = len({h.doc for h in hits})
    return "\n\n".join(
        [
            f"{len(docs):,} documents ({note}); {chars:,.0f} characters and {words:,.0f} words "
            f"on average; {megabytes:.1f} MB of UTF-8. Python {platform.python_version()}, "
            f"{os.cpu_count()} cores, {pinned}; shared machine, "
            f"medians. {hit_docs} of the documents hit.",
            "\n".join(rows),
            f"Target: at least 5,000 documents per second on one core: {verdict} "
            f"({rate:,.0f} docs/s).",
        ]
    )


def _speed_row(label: str, runs: Sequence[float], docs: int, megabytes: float | None) -> str:
    median = statistics.median(runs)
    mbs = f"{megabytes / median:.1f}" if megabytes else ""
    return f"| {label} | {_runs(runs)} | {docs / median:,.0f} | {mbs} | {median / docs * 1e6:.0f} |"


# --------------------------------------------------------------------------- correctness


@dataclass
class Planted:
    doc: str
    offset: int
    item: EvalItem


def plant_items(items: list[EvalItem], bases: list[str], per_benchmark: int) -> list[Planted]:
    rng = random.Random(SEED)
    grouped: dict[str, list[EvalItem]] = defaultdict(list)
    for item in items:
        grouped[item.benchmark].append(item)
    planted = []
    for group in grouped.values():
        for item in rng.sample(group, min(per_benchmark, len(group))):
            base = rng.choice(bases)
            cut = base.find("\n", int(len(base) * rng.uniform(0.1, 0.9)))
            cut = len(base) if cut < 0 else cut
            prefix = base[:cut] + "\n"
            planted.append(Planted(prefix + item.text + "\n" + base[cut:], len(prefix), item))
    return planted


def span_ok(hit: Hit, case: Planted) -> bool:
    words = normalise_words(case.item.text)
    return (
        hit.text == case.doc[hit.start : hit.end]
        and case.offset <= hit.start < hit.end <= case.offset + len(case.item.text)
        and normalise_words(hit.text)[: min(NGRAM, len(words))] == words[:NGRAM]
    )


def correctness_section(
    index: EvalIndex, items: list[EvalItem], corpus: Corpus, per_benchmark: int
) -> tuple[str, bool]:
    planted = plant_items(items, corpus.web + corpus.books + corpus.wiki, per_benchmark)
    docs = [p.doc for p in planted]
    log(f"correctness: {len(planted):,} planted items")
    start = time.perf_counter()
    hits = scan(index, docs)
    seconds = time.perf_counter() - start
    by_doc: dict[int, list[Hit]] = defaultdict(list)
    for hit in hits:
        by_doc[hit.doc].append(hit)
    ours = {(h.doc, h.benchmark, h.item_id, h.ngrams) for h in hits}
    theirs = {
        (r.doc, r.benchmark, r.item_id, r.ngrams) for r in ResidualMatcher(items, NGRAM).scan(docs)
    }
    stats: dict[str, Counter[str]] = defaultdict(Counter)
    for doc, case in enumerate(planted):
        own = [
            h
            for h in by_doc[doc]
            if (h.benchmark, h.item_id) == (case.item.benchmark, case.item.item_id)
        ]
        row = stats[case.item.benchmark]
        row["planted"] += 1
        row["caught"] += bool(own)
        row["span"] += bool(own) and span_ok(own[0], case)
        row["others"] += len(by_doc[doc]) - len(own)
    lines = [
        "| benchmark | planted | caught | share caught | span ok | other items hit too |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in stats.items():
        lines.append(
            f"| {name} | {row['planted']} | {row['caught']} | "
            f"{row['caught'] / row['planted']:.1%} | {row['span']} | {row['others']:,} |"
        )
    total = sum(r["planted"] for r in stats.values())
    caught = sum(r["caught"] for r in stats.values())
    spans = sum(r["span"] for r in stats.values())
    agree = ours == theirs
    lines.append(
        f"| **all** | **{total:,}** | **{caught:,}** | **{caught / total:.2%}** | **{spans:,}** | |"
    )
    summary = (
        f"Independent re-scan: {'**agrees**' if agree else '**DISAGREES**'} on all "
        f"{len(ours):,} (document, item, n-gram count) rows "
        f"({len(ours - theirs)} only ours, {len(theirs - ours)} only the re-scan's). "
        f"Scanning these documents, every one a hit with spans: {len(docs) / seconds:,.0f} "
        f"docs/s (one run)."
    )
    return "\n\n".join(["\n".join(lines), summary]), caught == total == spans and agree


# --------------------------------------------------------------------------- false hits


def false_hit_section(items: list[EvalItem], index: EvalIndex, corpus: Corpus) -> str:
    sources = {"books": corpus.books, "Wikipedia": corpus.wiki, "web (texts-5000)": corpus.web}
    tables, listed = [], []
    for ngram in (NGRAM, 10, 8):
        probe = index if ngram == NGRAM else build_index(items, ngram)
        rows = [
            "| source | documents | documents hit | false-hit rate | hits per benchmark |",
            "|---|---|---|---|---|",
        ]
        for name, docs in sources.items():
            hits = scan(probe, docs)
            hit_docs = len({h.doc for h in hits})
            per = Counter(h.benchmark for h in hits)
            rate = hit_docs / len(docs) if docs else 0.0
            per_text = ", ".join(f"{b} {n}" for b, n in per.most_common()) or "none"
            rows.append(f"| {name} | {len(docs):,} | {hit_docs} | {rate:.2%} | {per_text} |")
            listed += [(ngram, name, h) for h in hits]
        tables.append(
            f"**n = {ngram}**{' (default)' if ngram == NGRAM else ''}\n\n" + "\n".join(rows)
        )
    return "\n\n".join(tables + [hit_list(listed)])


def hit_list(listed: list[tuple[int, str, Hit]]) -> str:
    """One row per (n, source, item, matched text), with the number of documents."""
    if not listed:
        return "No hits at any n."
    rows = Counter(
        (ngram, source, hit.benchmark, hit.item_id, " ".join(hit.text.split()))
        for ngram, source, hit in listed
    )
    lines = [
        "Every hit, read (first matched span of each item; documents with that hit):",
        "",
        "| n | source | item | matched text | documents | verdict | why |",
        "|---|---|---|---|---|---|---|",
    ]
    for (ngram, source, benchmark, item_id, text), docs in rows.items():
        verdict, why = REVIEWED.get((benchmark, item_id), ("not reviewed", ""))
        quoted = text.replace("|", "\\|")
        lines.append(
            f'| {ngram} | {source} | {benchmark} `{item_id}` | "{quoted}" | {docs} | '
            f"{verdict} | {why} |"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------- report

NOTES = """## Notes

- **Why no false hits at n = 13.** Thirteen consecutive normalised words almost never recur by
  chance; the hits that appear at n = 10 and 8 are stock phrases ("the first time in my life
  that I", "the National Football League (NFL)"), a book title, and two real shared texts: a
  BoolQ passage that quotes the 19th-century US copyright notice also printed in a Gutenberg
  book's front matter, and a Jeopardy clue that quotes *Little Women*. Neither real overlap is
  the benchmark item leaking: the book holds the quotation, not the clue with its answer or the
  passage with its question. LAMBADA's passages come from BookCorpus novels, not Gutenberg, and
  the 61 WikiText test articles do not hold any of BoolQ's 3,270 passages, so this clean text
  has no true contamination at n = 13; a corpus that did hold them would be caught (see the
  planted study, where a single verbatim item is always caught).
- **Short items.** 4,520 items (PIQA, CommonsenseQA, TriviaQA, OpenBookQA, MMLU ...) have fewer
  than 13 words together with their answer; each is one key, matched only whole ("Which reflects
  light? mirror"), never by a part. None of them appears in the clean text.
- **Text many items share.** A key can belong to many items: MMLU's moral-scenarios question
  stem is in 900 items, BoolQ passages carry several questions, WinoGrande sentences come in
  twin pairs. A planted item therefore also hits those siblings (the "other items hit too"
  column); `Hit.item_ngrams` gives each item's number of keys, so a sibling matched only on
  the shared stem shows a small share.
- **How the speed is reached.** Per document the work is numpy over arrays: code points
  through a folding table, word hashes from prefix sums, 13-gram keys from prefix sums over
  the words, one bitmap probe per key (about 1% pass) and an exact `searchsorted` on the few
  that pass; short items need a probe of 3-word prefixes. Only documents that hit go back to
  Python, for spans. Words holding one of the few characters that fold to several characters
  or to none (ß, ½, a lone combining mark) are normalised in Python, cached per chunk.
- **The independent re-scan** (`ResidualMatcher`, for the mix's gate) shares no code with the
  scanner beyond the item list: `regex` words, Python tuples in dicts. It is about ten times
  slower per document (speed table) and agrees with the scanner exactly on the planted
  documents, n-gram counts included.
"""


def report(sections: dict[str, str]) -> str:
    parts = [
        "# Decontamination: `curation.decontamination` (index, speed, correctness, false hits)",
        "Command: `.venv/bin/python benchmarks/decontamination.py` (method: its docstring).",
    ]
    parts += [f"## {title}\n\n{body}" for title, body in sections.items()]
    return "\n\n".join(parts) + "\n\n" + NOTES


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--per-benchmark", type=int, default=300)
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    pinned = pin_one_core()
    start = time.perf_counter()
    items = load_benchmarks(read_benchmark_list(EVALS_EXAMPLE, args.data_dir / "evals"))
    load_s = time.perf_counter() - start
    corpus = Corpus(web_texts(), book_documents(args.data_dir), wiki_articles(args.data_dir))
    index, index_text = index_section(items, args.repeats)
    index_text += f"\n- loading the {len(items):,} items from the files: {load_s:.2f} s"
    print(index_text, flush=True)
    speed = speed_section(index, items, corpus, args.repeats, pinned)
    print(speed, flush=True)
    correctness, ok = correctness_section(index, items, corpus, args.per_benchmark)
    print(correctness, flush=True)
    log("false hits on clean text (n = 13, 10, 8)")
    false_hits = false_hit_section(items, index, corpus)
    print(false_hits, flush=True)
    sections = {
        "Index (n = 13)": index_text,
        "Scan speed": speed,
        "Correctness: planted items": correctness,
        "False hits on clean text": false_hits,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(report(sections), encoding="utf-8")
    log(f"wrote {RESULTS}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
