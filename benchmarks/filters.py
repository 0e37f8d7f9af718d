"""Heuristic filters: fidelity and speed of `curation.heuristics` against datatrove 0.10.

    .venv/bin/python benchmarks/filters.py [--records 5000] [--repeats 3] [--workers 1 2]

1. Builds (or reuses) the seeded WARC corpus of ``benchmarks/corpus.py`` and extracts every
   record's main text once with trafilatura and FineWeb's precision settings
   (``favor_precision=True, include_comments=False``; no cross-document deduplication, so each
   text depends on its page alone), cached as JSONL shards (one per WARC file) under
   ``benchmarks/.work/filters/texts-<records>/``.
2. Fidelity: datatrove's GopherRepetitionFilter, GopherQualityFilter, C4QualityFilter and
   FineWebQualityFilter (default arguments) each on every document on its own
   (``benchmarks/datatrove_filters.py`` in ``benchmarks/.venv-datatrove``), against our
   per-suite verdicts from `annotate` with default settings, every document taken as English as
   datatrove's filters do. C4's kept text is compared too: datatrove's rewritten text against
   our edits applied with `apply_c4_edits`.
3. Speed: per suite on one core (datatrove's word-split cache cleared before each filter call,
   so every suite pays for its own split, as it would alone; ours: one shared split plus the
   suite), and the whole chain as a fresh subprocess per run with 1 and 2 workers, one task per
   shard: datatrove's usual cascade (each filter sees the documents the previous one kept)
   against our `annotate` (every suite's signals for every document, nothing skipped).
4. Prints a markdown table and writes it to ``benchmarks/results/filters.md``; disagreement
   examples go to ``benchmarks/.work/filters/disagreements.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import platform
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.corpus import build_corpus  # noqa: E402
from benchmarks.extraction import ensure_datatrove_venv  # noqa: E402
from benchmarks.measure import run_json  # noqa: E402

BENCH_DIR = Path(__file__).resolve().parent
WORK_DIR = BENCH_DIR / ".work"
OUT_DIR = WORK_DIR / "filters"
RESULTS = BENCH_DIR / "results" / "filters.md"
DT_SCRIPT = BENCH_DIR / "datatrove_filters.py"
SUITES = ("gopher_repetition", "gopher_quality", "c4", "fineweb")
TEXTS_VERSION = 1
EXAMPLES_PER_KIND = 3

# datatrove's reason strings -> our rule names (without the suite prefix).
DT_REASONS = {
    "gopher_short_doc": "short_doc",
    "gopher_long_doc": "long_doc",
    "gopher_below_avg_threshold": "below_avg_word_length",
    "gopher_above_avg_threshold": "above_avg_word_length",
    "gopher_too_many_hashes": "too_many_hashes",
    "gopher_too_many_ellipsis": "too_many_ellipsis",
    "gopher_too_many_bullets": "too_many_bullets",
    "gopher_too_many_end_ellipsis": "too_many_end_ellipsis",
    "gopher_below_alpha_threshold": "below_alpha_threshold",
    "gopher_enough_stop_words": "few_stop_words",
    **{f"top_{n}_gram": f"top_{n}_gram_char_frac" for n in range(2, 5)},
    **{f"duplicated_{n}_n_grams": f"dup_{n}_gram_char_frac" for n in range(5, 11)},
}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- texts


def _extract_shard(job: tuple[Path, Path]) -> int:
    """Main texts of one WARC file's HTML responses -> one JSONL shard; returns the count."""
    import trafilatura

    from curation.extract import decode_html
    from curation.warc import WarcItem, iter_warc

    warc, out = job
    count = 0
    tmp = out.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for item in iter_warc(warc):
            if not isinstance(item, WarcItem) or item.record_type != "response" or not item.payload:
                continue
            html, _ = decode_html(item.payload, item.charset)
            text = trafilatura.extract(html, favor_precision=True, include_comments=False)
            if text and text.strip():
                row = {"id": f"{warc.name}:{item.offset}", "text": text}
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                count += 1
    tmp.rename(out)
    return count


def prepare_texts(records: int, workers: int) -> Path:
    """The extracted texts as JSONL shards, built once per corpus and trafilatura version."""
    corpus = build_corpus(WORK_DIR, records=records, workers=workers, log=log)
    folder = OUT_DIR / f"texts-{records}"
    params = {
        "version": TEXTS_VERSION,
        "corpus": [f["sha256"] for f in corpus.manifest["files"]],
        "trafilatura": version("trafilatura"),
    }
    manifest = folder / "manifest.json"
    if manifest.exists() and json.loads(manifest.read_text()).get("params") == params:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.jsonl"):
        stale.unlink()
    jobs = [(w, folder / f"{w.name.removesuffix('.warc.gz')}.jsonl") for w in corpus.warc_files]
    log(f"extracting {corpus.records} records into {folder}")
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        counts = pool.map(_extract_shard, jobs, chunksize=1)
    manifest.write_text(json.dumps({"params": params, "documents": sum(counts)}, indent=2))
    return folder


def read_texts(folder: Path) -> list[dict[str, str]]:
    docs = []
    for path in sorted(folder.glob("*.jsonl")):
        with path.open(encoding="utf-8") as fh:
            docs.extend(json.loads(line) for line in fh)
    return docs


# --------------------------------------------------------------------------- runs




def datatrove_independent(python: Path, texts: Path) -> tuple[dict[str, Any], list[dict]]:
    output = OUT_DIR / "datatrove-verdicts.jsonl"
    command = [str(python), str(DT_SCRIPT), "--input-dir", str(texts), "--mode", "independent"]
    result = run_json(command + ["--output", str(output)])
    with output.open(encoding="utf-8") as fh:
        return result, [json.loads(line) for line in fh]


def ours_independent(docs: list[dict[str, str]]) -> tuple[dict[str, float], list[dict]]:
    """Per-document suite results (every document as English) and per-part seconds."""
    from curation.heuristics import Annotator, HeuristicsSettings
    from curation.text import split_text

    annotator = Annotator(HeuristicsSettings())
    english = annotator.language("en")
    seconds: Counter[str] = Counter()
    rows = []
    for doc in docs:
        start = time.perf_counter()
        split = split_text(doc["text"])
        seconds["split"] += time.perf_counter() - start
        row = {}
        for suite in SUITES:
            start = time.perf_counter()
            row[suite] = annotator.run_suite(suite, split, english)
            seconds[suite] += time.perf_counter() - start
        rows.append(row)
    return dict(seconds), rows


def _annotate_shard(path: Path) -> int:
    from curation.heuristics import HeuristicsSettings, annotate

    with path.open(encoding="utf-8") as fh:
        docs = [(json.loads(line)["text"], "en") for line in fh]
    return len(annotate(docs, HeuristicsSettings()))


def ours_cascade(texts: Path, workers: int) -> dict[str, Any]:
    """Our whole chain in this (fresh) process: read every shard and annotate it."""
    shards = sorted(texts.glob("*.jsonl"))
    start = time.perf_counter()
    if workers == 1:
        documents = sum(map(_annotate_shard, shards))
    else:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            documents = sum(pool.map(_annotate_shard, shards, chunksize=1))
    return {"wall_seconds": time.perf_counter() - start, "documents": documents}


def cascade_command(impl: str, python: Path, texts: Path, workers: int) -> list[str]:
    if impl == "datatrove":
        script = [str(python), str(DT_SCRIPT), "--mode", "cascade"]
    else:
        script = [sys.executable, str(Path(__file__).resolve()), "--ours-cascade"]
    return script + ["--input-dir", str(texts), "--workers", str(workers)]


@dataclass
class Timing:
    impl: str
    workers: int
    walls: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.walls)


def cascade_timings(python: Path, texts: Path, workers: list[int], repeats: int) -> list[Timing]:
    """Alternate the implementations run by run, so load on the shared machine hits both."""
    timings = [Timing(impl, w) for w in workers for impl in ("datatrove", "ours")]
    for repeat in range(repeats):
        for timing in timings:
            log(f"cascade {timing.impl} workers={timing.workers} run {repeat + 1}/{repeats}")
            command = cascade_command(timing.impl, python, texts, timing.workers)
            timing.walls.append(run_json(command)["wall_seconds"])
    return timings


# --------------------------------------------------------------------------- fidelity


def _ours_reason(result: Any, suite: str) -> str | None:
    return result.reason.removeprefix(f"{suite}.") if result.reason else None


def _dt_reason(verdict: list[Any]) -> str | None:
    keep, reason = verdict
    return None if keep else DT_REASONS.get(reason, reason)


@dataclass
class SuiteFidelity:
    suite: str
    documents: int = 0
    agree: int = 0
    same_reason: int = 0
    both_drop: int = 0
    dt_drops: int = 0
    our_drops: int = 0
    kinds: Counter[tuple[str, str]] = field(default_factory=Counter)
    examples: dict[tuple[str, str], list[str]] = field(default_factory=dict)

    def add(self, doc_id: str, dt: str | None, ours: str | None) -> None:
        self.documents += 1
        self.dt_drops += dt is not None
        self.our_drops += ours is not None
        if (dt is None) == (ours is None):
            self.agree += 1
            if dt is not None:
                self.both_drop += 1
                self.same_reason += dt == ours
            return
        kind = (dt or "keep", ours or "keep")
        self.kinds[kind] += 1
        self.examples.setdefault(kind, [])
        if len(self.examples[kind]) < EXAMPLES_PER_KIND:
            self.examples[kind].append(doc_id)

    @property
    def rate(self) -> float:
        return self.agree / self.documents if self.documents else 1.0


@dataclass
class Fidelity:
    suites: dict[str, SuiteFidelity]
    c4_text_same: int = 0
    c4_text_compared: int = 0
    c4_text_examples: list[str] = field(default_factory=list)
    words_same: int = 0
    words_total: int = 0
    overall_agree: int = 0
    cascade_agree: int = 0
    cascade_agree_edited: int = 0
    documents: int = 0


def _dt_cascade_keep(row: dict) -> bool:
    """datatrove's cascade verdict: FineWeb judges the text C4 left."""
    first = all(row[suite][0] for suite in SUITES[:3])
    return first and bool(row.get("fineweb_after_c4", [False])[0])


def _ours_on_edited(doc: dict[str, str], row: dict) -> bool:
    """Our suites with FineWeb on the C4-edited text, as a cascade would run them."""
    from curation.heuristics import FineWebSettings, apply_c4_edits, fineweb
    from curation.text import TERMINAL_PUNCTUATION, split_text

    if any(row[suite].reason for suite in SUITES[:3]):
        return False
    edited = split_text(apply_c4_edits(doc["text"], row["c4"].edits))
    return fineweb(edited, FineWebSettings(), tuple(sorted(TERMINAL_PUNCTUATION))).reason is None


def _digest(words: list[str]) -> str:
    """The same fingerprint of a word list as `datatrove_filters._digest`."""
    return hashlib.sha1("\n".join(words).encode("utf-8", "surrogatepass")).hexdigest()


def fidelity(docs: list[dict[str, str]], dt_rows: list[dict], ours: list[dict]) -> Fidelity:
    from curation.heuristics import apply_c4_edits
    from curation.text import split_text

    result = Fidelity({suite: SuiteFidelity(suite) for suite in SUITES})
    for doc, dt_row, our_row in zip(docs, dt_rows, ours, strict=True):
        assert dt_row["id"] == doc["id"]
        for suite in SUITES:
            result.suites[suite].add(
                doc["id"], _dt_reason(dt_row[suite]), _ours_reason(our_row[suite], suite)
            )
        dt_keep = all(dt_row[suite][0] for suite in SUITES)
        words = split_text(doc["text"]).words
        result.words_total += dt_row["words"][0]
        result.words_same += [len(words), _digest(words)] == dt_row["words"]
        our_keep = all(our_row[s].reason is None for s in SUITES)
        result.overall_agree += dt_keep == our_keep
        dt_cascade = _dt_cascade_keep(dt_row)
        result.cascade_agree += dt_cascade == our_keep
        result.cascade_agree_edited += dt_cascade == _ours_on_edited(doc, our_row)
        result.documents += 1
        if "c4_text" in dt_row and our_row["c4"].reason is None:
            result.c4_text_compared += 1
            if apply_c4_edits(doc["text"], our_row["c4"].edits) == dt_row["c4_text"]:
                result.c4_text_same += 1
            elif len(result.c4_text_examples) < EXAMPLES_PER_KIND:
                result.c4_text_examples.append(doc["id"])
    return result


# --------------------------------------------------------------------------- report


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.2f}%" if whole else "n/a"


def fidelity_table(fid: Fidelity) -> str:
    rows = [
        "| suite | agreement | datatrove drops | our drops | same first rule when both drop |"
        " top disagreements (datatrove -> ours: documents) |",
        "|---|---|---|---|---|---|",
    ]
    for sf in fid.suites.values():
        kinds = ", ".join(f"{a} -> {b}: {n}" for (a, b), n in sf.kinds.most_common(4)) or "none"
        rows.append(
            f"| {sf.suite} | **{_pct(sf.agree, sf.documents)}** ({sf.agree}/{sf.documents}) "
            f"| {sf.dt_drops} | {sf.our_drops} | {_pct(sf.same_reason, sf.both_drop)} "
            f"| {kinds} |"
        )
    rows.append(
        f"| all four (keep = every suite keeps) | **{_pct(fid.overall_agree, fid.documents)}** "
        f"| | | | |"
    )
    n = fid.documents
    rows.append(
        f"| datatrove's cascade verdict (its FineWeb sees C4's rewritten text) vs our `keep` "
        f"(FineWeb on the original text: annotate, then edit) | {_pct(fid.cascade_agree, n)} "
        f"| | | | vs ours with FineWeb re-run on our C4-edited text: "
        f"{_pct(fid.cascade_agree_edited, n)} |"
    )
    rows.append(
        f"\nWord split: spaCy's words (datatrove's `split_into_words`) reproduced exactly on "
        f"{fid.words_same} of {n} documents ({_pct(fid.words_same, n)}; "
        f"{fid.words_total:,} spaCy tokens)."
    )
    same, compared = fid.c4_text_same, fid.c4_text_compared
    rows.append(
        f"\nC4 line edits: on the {compared} documents both keep, datatrove's rewritten text "
        f"equals our edits applied (`apply_c4_edits`) for {same} ({_pct(same, compared)})."
    )
    return "\n".join(rows)


def speed_table(n: int, dt_seconds: dict[str, float], our_seconds: dict[str, float]) -> str:
    rows = [
        "| suite (one core, every document) | datatrove docs/s | ours docs/s (split + suite) "
        "| ours suite alone docs/s | ratio ours/datatrove |",
        "|---|---|---|---|---|",
    ]
    split = our_seconds["split"]
    for suite in SUITES:
        dt_rate = n / dt_seconds[suite]
        ours_rate = n / (split + our_seconds[suite])
        rows.append(
            f"| {suite} | {dt_rate:,.0f} | {ours_rate:,.0f} | {n / our_seconds[suite]:,.0f} "
            f"| {ours_rate / dt_rate:.1f}x |"
        )
    dt_total = sum(dt_seconds.values())
    our_total = split + sum(our_seconds[s] for s in SUITES)
    rows.append(
        f"| all four, each on every document | {n / dt_total:,.0f} | {n / our_total:,.0f} "
        f"| (split alone {n / split:,.0f}) | {dt_total / our_total:.1f}x |"
    )
    return "\n".join(rows)


def cascade_table(n: int, timings: list[Timing]) -> str:
    rows = [
        "| chain (fresh process, one task per shard) | workers | runs | median wall s "
        "| docs/s | ratio ours/datatrove |",
        "|---|---|---|---|---|---|",
    ]
    by_key = {(t.impl, t.workers): t for t in timings}
    for t in timings:
        dt = by_key[("datatrove", t.workers)]
        ratio = f"{dt.median / t.median:.1f}x" if t.impl == "ours" else ""
        label = "datatrove cascade" if t.impl == "datatrove" else "ours: annotate (all signals)"
        walls = ", ".join(f"{w:.1f}" for w in t.walls)
        rows.append(
            f"| {label} | {t.workers} | {walls} | {t.median:.1f} | {n / t.median:,.0f} | {ratio} |"
        )
    return "\n".join(rows)


def environment(n_docs: int, texts: Path) -> str:
    chars = sum(len(d["text"]) for d in read_texts(texts))
    return (
        f"{n_docs:,} documents ({chars / n_docs:,.0f} characters on average), "
        f"trafilatura {version('trafilatura')}; datatrove 0.10 with spaCy "
        f"(see `benchmarks/datatrove_filters.py`); Python {platform.python_version()}, "
        f"{os.cpu_count()} cores (shared machine: figures are medians, ratios matter)."
    )


def write_examples(fid: Fidelity, docs: list[dict[str, str]], ours: list[dict]) -> Path:
    """Disagreeing documents with both sides' signals, for investigation."""
    by_id = {d["id"]: (d, o) for d, o in zip(docs, ours, strict=True)}
    parts = ["# Filter disagreements (datatrove -> ours)\n"]
    for sf in fid.suites.values():
        for kind, ids in sf.examples.items():
            parts.append(f"## {sf.suite}: {kind[0]} -> {kind[1]} ({sf.kinds[kind]} documents)\n")
            for doc_id in ids:
                doc, row = by_id[doc_id]
                signals = {k: v for k, v in row[sf.suite].signals.items()}
                parts.append(
                    f"### {doc_id}\n\nsignals: `{signals}`\n\n```\n{doc['text'][:3000]}\n```\n"
                )
    for doc_id in fid.c4_text_examples:
        parts.append(
            f"## C4 text differs: {doc_id}\n\n```\n{by_id[doc_id][0]['text'][:3000]}\n```\n"
        )
    path = OUT_DIR / "disagreements.md"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


DIFFERENCES = """## What still differs from datatrove, and why

- **Word split.** `curation.text` ports spaCy's tokenizer chunk by chunk (text between
  whitespace), cached. spaCy's special-case pass also matches exceptions across a space: in
  "Re: o.December" it sees ": o" as the emoticon ":o", finds no rule for the spaced text, leaves
  it, and that match blocks merging "o" "." into the exception "o.". Per-chunk work cannot see
  the neighbouring chunk, so we give "o." there. The count above is every such case.
- **Duplicated n-grams.** datatrove keys Gopher's duplicated 5- to 10-grams by their words joined
  without spaces, so ("ab", "c") and ("a", "bc") are the same n-gram; we key by the word
  sequence (56-bit word hashes combined in uint64). Top 2- to 4-grams are joined with spaces
  there, which is the same as the sequence.
- **Cascade semantics.** datatrove's FineWeb filter judges the text C4 left; `annotate` judges the
  original text and records C4's line removals as edits that `scrubbed` applies later. The row
  above counts the documents whose overall verdict this changes; FineWeb re-run on our edited
  text reproduces the cascade.
- **Settings.** A threshold of 0 switches a rule off in datatrove (`if self.x and ...`); here
  `None` switches it off and 0 is a threshold. Defaults are the same.
- **Languages.** datatrove applies the English rules to every document; this benchmark annotates
  every document as English to compare. In the pipeline, stop words, C4's terminal-punctuation
  and sentence rules and the default bad-word list apply only to `english_only_languages`.
- **Speed comparison.** Our chain computes every signal of every suite for every document, as
  annotate-then-select needs; datatrove's cascade stops at the first filter that drops a
  document (later filters see fewer documents) and its Gopher quality filter reuses the word
  split Gopher repetition cached (`lru_cache`) when the same text passes both.
"""


def report(
    docs: list[dict[str, str]],
    texts: Path,
    fid: Fidelity,
    dt_seconds: dict[str, float],
    our_seconds: dict[str, float],
    timings: list[Timing],
) -> str:
    n = len(docs)
    return (
        "\n\n".join(
            [
                "# Heuristic filters: `curation.heuristics` against datatrove 0.10",
                "Command: `.venv/bin/python benchmarks/filters.py` (method: its docstring).",
                environment(n, texts),
                "## Fidelity (each suite on every document on its own, default thresholds)",
                fidelity_table(fid),
                "## Speed per suite",
                speed_table(n, dt_seconds, our_seconds),
                "## The whole chain",
                cascade_table(n, timings),
                DIFFERENCES,
            ]
        )
        + "\n"
    )


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each chain timing")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--no-timing", action="store_true", help="fidelity only")
    parser.add_argument("--ours-cascade", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--input-dir", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.ours_cascade:
        result = ours_cascade(args.input_dir, args.workers[0])
        print("RESULT " + json.dumps(result), flush=True)
        return 0
    python = ensure_datatrove_venv()
    texts = prepare_texts(args.records, max(args.workers))
    docs = read_texts(texts)
    log(f"{len(docs)} documents; datatrove, each filter on every document")
    dt_result, dt_rows = datatrove_independent(python, texts)
    log("ours, each suite on every document")
    our_seconds, ours = ours_independent(docs)
    fid = fidelity(docs, dt_rows, ours)
    log(f"disagreement examples: {write_examples(fid, docs, ours)}")
    timings = [] if args.no_timing else cascade_timings(python, texts, args.workers, args.repeats)
    text = report(docs, texts, fid, dt_result["seconds"], our_seconds, timings)
    print(text)
    if not args.no_timing:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
