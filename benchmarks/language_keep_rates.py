"""Heuristics keep rates for Chinese, Japanese and Thai pages with and without the per-language
rules (word segmenters and FineWeb-2's thresholds, `curation/languages/`), beside English and
German pages of the same shape, and the speed of the heuristics with the segmenters.

    .venv/bin/python -m benchmarks.language_keep_rates [--speed-seconds 2] [--skip-speed]

1. Real text placed in pages: the Universal Declaration of Human Rights (``nltk_udhr2.zip``:
   ``eng``, ``cmn_hans``, ``jpn``, ``tha``, ``deu``) cut into its 31 sections (preamble and 30
   articles) and those into 10 pages of 3-4 consecutive sections, plus one page of the 6 long
   Tatoeba sentences (``tatoeba_long.txt``) per language. Every page is the same HTML template
   (title, h1, h2 per section, one paragraph per line), written into one WARC file with the
   project's sample WARC writer (``curation.sample.warc``), then run through the real stages:
   ``documents`` (trafilatura, FineWeb's settings, form rescue on, the language pre-check off),
   ``language`` (lid.176, targets en/zh/ja/th/de) and ``heuristics``, once with
   ``HeuristicsSettings()`` (the rules of ``curation/languages/``) and once with them switched
   off (``languages={"zh": None, "ja": None, "th": None}``: the English split and defaults).
2. The 29 Japanese ClueWeb09 pages, and the Internet Archive (Heritrix 2008) and wget (2024)
   WARCs as real English web pages, through the same three stages (the same settings)
   and the heuristics with and without the rules: kept counts, first drop reasons and the suites
   that drop, by the language the language stage found. Also the head of a CC-MAIN-2020-34 WARC
   (mostly Chinese spam-like hosts), and the alpha-word rule with trafilatura's table bars
   (``| cell | cell |``) left out, as a counterfactual.
3. Speed on one core (CPU seconds, ``time.process_time``): ``Annotator.annotate_one`` (the split
   and every suite: the stage's per-document work) over the 10 UDHR page texts of each of en,
   zh, ja, th, with the rules and without, passes repeated for at least ``--speed-seconds``;
   ``split_text`` alone apart. ``curation.text`` caches the split of every chunk it has seen,
   so each is timed warm (chunks seen before) and cold (caches emptied before each pass). The
   segmenters' load and first call are timed first, before anything else touches them.

Prints markdown. Results: ``benchmarks/results/language_keep_rates.md``.
"""

from __future__ import annotations

import argparse
import html
import logging
import re
import shutil
import statistics
import sys
import tempfile
import time
import zipfile
from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.language_id_models import tatoeba_items  # noqa: E402
from curation.config import DocumentsSettings, LanguagePrecheck, LanguageSettings  # noqa: E402
from curation.heuristics import Annotator, HeuristicsSettings, annotate  # noqa: E402
from curation.minhash import MinHashSettings  # noqa: E402
from curation.partition import PartitionLayout  # noqa: E402
from curation.sample.warc import Capture, SampleWarcWriter  # noqa: E402
from curation.segmenters import SEGMENTERS, load_segmenter  # noqa: E402
from curation.stages.base import DocumentsInput  # noqa: E402
from curation.stages.documents import run_documents  # noqa: E402
from curation.stages.heuristics import run_heuristics  # noqa: E402
from curation.stages.language import run_language  # noqa: E402
from curation.storage import LocalStore  # noqa: E402
from curation.text import HAS_ALPHA, forget_splits, split_text  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA = REPO_ROOT.parent / "shared" / "data"
UDHR_ZIP = DATA / "evals" / "langid" / "nltk_udhr2.zip"
CLUEWEB = DATA / "warc" / "non_cc" / "clueweb09-ja_resiliparse-quirk_29responses.warc.gz"
ENGLISH_WEB = [DATA / "warc" / "non_cc" / name for name in (
    "ia-heritrix-2008_archive-org-shallow_299responses.warc.gz",
    "dolma_wget-sample-0000_22responses.warc.gz",
    "dolma_wget-sample-0001_15responses.warc.gz")]
# The head of a CC-MAIN-2020-34 WARC: 16 pages, most of them Chinese spam-like sites.
CC_2020 = DATA / "warc" / "cc-main-2020-34_resiliparse_16responses.warc.gz"

# lid.176 code -> (UDHR file in the zip, Tatoeba ISO 639-3 code)
LANGUAGES = {"en": ("udhr2/eng.txt", "eng"), "zh": ("udhr2/cmn_hans.txt", "cmn"),
             "ja": ("udhr2/jpn.txt", "jpn"), "th": ("udhr2/tha.txt", "tha"),
             "de": ("udhr2/deu.txt", "deu")}
SPEED_LANGUAGES = ("en", "zh", "ja", "th")
# A section heading: the preamble or an article number. jpn.txt writes article 23 as 弟23条
# (a typo for 第); cmn_hans.txt counts in Chinese numerals, jpn.txt in full-width digits.
HEADING = re.compile(r"(Preamble|Präambel|序言|〈前文〉|คำปรารภ|(Article|Artikel|ข้อ) \d+"
                     r"|[第弟][0-9０-９一二三四五六七八九十]+条)")
PAGES_PER_LANGUAGE = 10
RULED = ("zh", "ja", "th")
NEW = HeuristicsSettings()
# The old behaviour: null for a language switches its rules off (English split and defaults);
# an empty mapping would change nothing, being merged over the files.
OLD = HeuristicsSettings(languages=dict.fromkeys(RULED))
TARGETS = LanguageSettings(languages=list(LANGUAGES))


# --------------------------------------------------------------------------- the pages


def udhr_sections(name: str) -> tuple[str, list[tuple[str, list[str]]]]:
    """The declaration's title and its sections (heading, lines); lines before the first
    heading (a resolution number, a date) are left out."""
    with zipfile.ZipFile(UDHR_ZIP) as archive:
        lines = [line.strip() for line in archive.read(name).decode("utf-8").splitlines()]
    title, sections = lines[0], []
    for line in lines[1:]:
        if HEADING.fullmatch(line):
            sections.append((line, []))
        elif line and sections:
            sections[-1][1].append(line)
    if len(sections) != 31:
        raise SystemExit(f"{name}: {len(sections)} sections, expected 31")
    return title, sections


def page_html(title: str, sections: list[tuple[str, list[str]]]) -> str:
    """One template for every language: title, h1, then an h2 and paragraphs per section."""
    body = "".join((f"<h2>{html.escape(heading)}</h2>" if heading else "")
                   + "".join(f"<p>{html.escape(line)}</p>" for line in lines)
                   for heading, lines in sections)
    title = html.escape(title)
    return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{title}</title></head>"
            f"<body><article><h1>{title}</h1>{body}</article></body></html>")


def groups(items: list, count: int) -> list[list]:
    """`items` in `count` consecutive groups whose sizes differ by at most one."""
    size, extra = divmod(len(items), count)
    out, start = [], 0
    for index in range(count):
        end = start + size + (index < extra)
        out.append(items[start:end])
        start = end
    return out


def make_pages() -> list[tuple[str, str, str, str]]:
    """(language, kind, url, html) for every page."""
    pages = []
    tatoeba = tatoeba_items()
    for lang, (name, code) in LANGUAGES.items():
        title, sections = udhr_sections(name)
        for index, group in enumerate(groups(sections, PAGES_PER_LANGUAGE)):
            url = f"https://udhr.example.org/{lang}/page-{index + 1}.html"
            pages.append((lang, "udhr", url,
                          page_html(f"{title} ({index + 1}/{PAGES_PER_LANGUAGE})", group)))
        sentences = [item.text.strip() for item in tatoeba if item.source == code]
        pages.append((lang, "tatoeba", f"https://tatoeba.example.org/{lang}/long.html",
                      page_html(f"Tatoeba {code}", [("", sentences)])))
    return pages


def _solid_chars(text: str) -> int:
    """Characters other than whitespace and U+200B (the zero-width spaces some Tatoeba
    sentences put between words, which trafilatura drops)."""
    return sum(not c.isspace() and c != "\u200b" for c in text)


def visible_chars(page: str) -> int:
    """Non-space characters of a page's visible text (its body)."""
    body = re.sub(r"<head>.*?</head>", "", page)
    return _solid_chars(html.unescape(re.sub(r"<[^>]+>", "", body)))


def write_warc(path: Path, pages: list[tuple[str, str, str, str]]) -> None:
    headers = (("Content-Type", "text/html; charset=utf-8"), ("Server", "nginx"))
    captures = [Capture(url, "200 OK", headers, page.encode("utf-8"), "text/html")
                for _, _, url, page in pages]
    SampleWarcWriter(path, "LANG-PAGES", 1, datetime(2024, 5, 1, tzinfo=UTC)).write(captures)


# --------------------------------------------------------------------------- the stages


def extract_and_identify(store: LocalStore, partition: str, files: list[Path]) -> dict:
    """documents and language stages over one partition; returns the documents' rows."""
    settings = DocumentsSettings(language_precheck=LanguagePrecheck(enabled=False))
    run = run_documents(partition, [str(f) for f in files], store, settings, workers=0)
    run_language(DocumentsInput(store, partition), TARGETS, workers=0)
    docs = PartitionLayout(store, "documents", partition).read_table(["doc_id", "url", "text"])
    lang = PartitionLayout(store, "language", partition).read_table(
        ["doc_id", "language", "language_score"])
    assert docs["doc_id"].equals(lang["doc_id"])
    return {"run": run, "doc_id": docs["doc_id"].to_pylist(), "url": docs["url"].to_pylist(),
            "text": docs["text"].to_pylist(), "language": lang["language"].to_pylist(),
            "score": lang["language_score"].to_pylist()}


def heuristics(store: LocalStore, partition: str, settings: HeuristicsSettings) -> dict:
    run_heuristics(DocumentsInput(store, partition), settings, MinHashSettings(), workers=0)
    table = PartitionLayout(store, "heuristics", partition).read_table()
    return {name: table[name].to_pylist() for name in table.column_names}


def _reasons(reasons: list[str | None]) -> str:
    counts = Counter(r for r in reasons if r)
    return ", ".join(f"{r} {n}" for r, n in counts.most_common()) or "-"


def _pct(kept: int, total: int) -> str:
    return f"{kept}/{total} ({100 * kept / total:.0f}%)" if total else "0/0"


def _median(values: list) -> str:
    values = [v for v in values if v is not None]
    return f"{statistics.median(values):.2f}" if values else "-"


def _suite_drops(run: dict, idx: list[int]) -> str:
    """Documents each suite drops on its own (a document can count under several)."""
    suites = [column.removeprefix("keep_") for column in run if column.startswith("keep_")]
    failed = Counter(suite for suite in suites for i in idx if not run[f"keep_{suite}"][i])
    return ", ".join(f"{suite} {n}" for suite, n in failed.most_common()) or "-"


def report_pages(pages: list, docs: dict, runs: dict[str, dict]) -> None:
    print("## 1. UDHR and Tatoeba pages through documents -> language -> heuristics\n")
    run = docs["run"]
    print(f"{len(pages)} pages written, {run.docs_out} documents out of the documents stage; "
          f"rejects: {dict(run.stats.rejects) or 'none'}.\n")
    made = Counter((lang, kind) for lang, kind, _, _ in pages)
    by_url = {url: (lang, kind) for lang, kind, url, _ in pages}
    visible = {url: visible_chars(page) for _, _, url, page in pages}
    rows: dict[tuple[str, str], list[int]] = defaultdict(list)
    for index, url in enumerate(docs["url"]):
        rows[by_url[url]].append(index)
    print("| language | pages | kind | extracted | chars kept | language stage says | "
          "median score | kept, per-language rules | kept, rules off (old) | drops, rules | "
          "drops, rules off |")
    print("|---|---:|---|---:|---:|---|---:|---:|---:|---|---|")
    for lang in LANGUAGES:
        for kind in ("udhr", "tatoeba", "all"):
            kinds = ("udhr", "tatoeba") if kind == "all" else (kind,)
            idx = [i for k in kinds for i in rows[lang, k]]
            total = sum(made[lang, k] for k in kinds)
            said = Counter(docs["language"][i] for i in idx)
            new = [runs["new"]["keep"][i] for i in idx]
            old = [runs["old"]["keep"][i] for i in idx]
            kept_chars = (sum(_solid_chars(docs["text"][i]) for i in idx)
                          / sum(visible[docs["url"][i]] for i in idx))
            print(f"| {lang} | {total} | {kind} | {len(idx)} | {100 * kept_chars:.0f}% | "
                  f"{', '.join(f'{k} {n}' for k, n in said.most_common())} | "
                  f"{_median([docs['score'][i] for i in idx])} | {_pct(sum(new), total)} | "
                  f"{_pct(sum(old), total)} | "
                  f"{_reasons([runs['new']['reason'][i] for i in idx])} | "
                  f"{_reasons([runs['old']['reason'][i] for i in idx])} |")
    print()
    print("Signals per language (UDHR pages, medians), rules / rules off:\n")
    signals = ("gopher_words", "gopher_mean_word_length", "gopher_alpha_words_frac",
               "gopher_stop_words", "fineweb_line_punct_ratio", "fineweb_short_line_ratio",
               "fineweb_char_dup_ratio", "top_2_gram_char_frac", "dup_10_gram_char_frac",
               "bad_word_density")
    present = [s for s in signals if s in runs["new"]]
    print("| language | chars | " + " | ".join(present) + " |")
    print("|---|---:|" + "---:|" * len(present))
    for lang in LANGUAGES:
        idx = rows[lang, "udhr"]
        chars = statistics.median(len(docs["text"][i]) for i in idx) if idx else 0
        cells = [f"{_median([runs['new'][s][i] for i in idx])} / "
                 f"{_median([runs['old'][s][i] for i in idx])}" for s in present]
        print(f"| {lang} | {chars:.0f} | " + " | ".join(cells) + " |")
    print()
    print("Every rule that drops a page within its suite (a page can count under several "
          "suites), UDHR + Tatoeba pages:\n")
    print("| language | rules | rules off |")
    print("|---|---|---|")
    for lang in LANGUAGES:
        idx = rows[lang, "udhr"] + rows[lang, "tatoeba"]
        print(f"| {lang} | {_suite_drops(runs['new'], idx)} | {_suite_drops(runs['old'], idx)} |")
    print()


def report_web(title: str, docs: dict, runs: dict[str, dict]) -> None:
    run = docs["run"]
    print(f"### {title}\n")
    print(f"{run.records_in} records in, {run.docs_out} documents out; documents-stage rejects: "
          f"{dict(run.stats.rejects.most_common()) or 'none'}.\n")
    by_language: dict[str, list[int]] = defaultdict(list)
    for index, lang in enumerate(docs["language"]):
        by_language[lang].append(index)
    print("| language (stage) | documents | median chars | kept, rules | kept, rules off | "
          "first drop reason, rules | first drop reason, rules off | suites that drop, rules "
          "| suites that drop, rules off |")
    print("|---|---:|---:|---:|---:|---|---|---|---|")
    for lang in sorted(by_language, key=lambda lang: (-len(by_language[lang]), lang)):
        idx = by_language[lang]
        chars = statistics.median(len(docs["text"][i]) for i in idx)
        new = sum(runs["new"]["keep"][i] for i in idx)
        old = sum(runs["old"]["keep"][i] for i in idx)
        print(f"| {lang} | {len(idx)} | {chars:.0f} | {_pct(new, len(idx))} | "
              f"{_pct(old, len(idx))} | {_reasons([runs['new']['reason'][i] for i in idx])} | "
              f"{_reasons([runs['old']['reason'][i] for i in idx])} | "
              f"{_suite_drops(runs['new'], idx)} | {_suite_drops(runs['old'], idx)} |")
    print()


# trafilatura writes a table row as "| cell | cell |": each bar is a word of its own, and not
# an alphabetic one. The ClueWeb shop's footer uses U+2502 as a separator in the same way.
TABLE_BARS = re.compile(r"[|│]")


def alpha_rule(text: str, lang: str, settings: HeuristicsSettings) -> tuple[float, float, float]:
    """The alpha-word share, the share of words that are table bars, and the alpha-word
    share with the bars left out."""
    split = split_text(text, settings.segmenter(lang))
    alpha = (split.word_flags & np.uint64(HAS_ALPHA)) != 0
    bars = sum(1 for word in split.words if word in ("|", "│"))
    n = len(split.words)
    return (alpha.sum() / n if n else 0.0, bars / n if n else 0.0,
            alpha.sum() / (n - bars) if n > bars else 0.0)


def report_table_bars(sets: list[tuple[str, dict, str]]) -> None:
    """The alpha rule with and without the table bars, and the whole verdict on the text with
    the bars taken out (a counterfactual: the extractor's table rendering, not the page)."""
    print("### The alpha-word rule and trafilatura's table bars\n")
    print("`below_alpha_threshold` counts every word, and trafilatura renders a table cell "
          "boundary as a `|` word. Counterfactual columns: the alpha share without the `|` / `│` "
          "words, and the same documents with every `|` and `│` replaced by a space, through "
          "`annotate` (same settings, the language stage's language).\n")
    print("| documents | settings | n | alpha threshold | alpha rule trips | median alpha share "
          "| median bar share | alpha trips without bars | kept | kept without bars | "
          "drops without bars |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---|")
    for title, docs, lang in sets:
        idx = [i for i, found in enumerate(docs["language"]) if found == lang]
        texts = [docs["text"][i] for i in idx]
        for name, settings in (("rules", NEW), ("rules off", OLD)):
            limit = settings.for_language(lang).gopher_quality.min_alpha_words_ratio
            shares = [alpha_rule(t, lang, settings) for t in texts]
            kept = annotate([(t, lang) for t in texts], settings)
            stripped = annotate([(TABLE_BARS.sub(" ", t), lang) for t in texts], settings)
            print(f"| {title} ({lang}) | {name} | {len(idx)} | {limit} | "
                  f"{sum(a < limit for a, _, _ in shares)} | "
                  f"{statistics.median(a for a, _, _ in shares):.2f} | "
                  f"{statistics.median(b for _, b, _ in shares):.2f} | "
                  f"{sum(c < limit for _, _, c in shares)} | {_pct(sum(kept.keep), len(idx))} | "
                  f"{_pct(sum(stripped.keep), len(idx))} | {_reasons(stripped.reason)} |")
    print()


# --------------------------------------------------------------------------- speed


def segmenter_loads() -> list[tuple[str, float, float]]:
    """(name, load seconds, first call seconds), wall clock, in a process that has not
    loaded them yet."""
    samples = {"jieba": "人人生而自由,在尊严和权利上一律平等。",
               "sudachi_a": "すべての人間は、生まれながらにして自由である。",
               "thai_newmm": "มนุษย์ทั้งหลายเกิดมาอิสระเสรี"}
    out = []
    for name in SEGMENTERS:
        start = time.perf_counter()
        segment = load_segmenter(name)
        loaded = time.perf_counter()
        segment(samples[name])
        out.append((name, loaded - start, time.perf_counter() - loaded))
    return out


def cpu_per_pass(work: Callable[[], object], target: float, repeats: int,
                 cold: bool) -> float:
    """CPU seconds of one `work()`, over enough passes for `target` seconds, median of
    `repeats` such runs; `cold`: the split caches are emptied (untimed) before every pass,
    else one untimed pass warms them first."""
    if not cold:
        work()
    runs = []
    for _ in range(repeats):
        spent, passes = 0.0, 0
        while spent < target or passes < 3:
            if cold:
                forget_splits()
            start = time.process_time()
            work()
            spent += time.process_time() - start
            passes += 1
        runs.append(spent / passes)
    return statistics.median(runs)


def report_speed(docs: dict, target: float, repeats: int) -> None:
    print("## 3. Speed: heuristics on one core\n")
    print(f"The 10 UDHR page texts of each language out of the documents stage, per document "
          f"`Annotator.annotate_one` (split + every suite, the stage's per-document work; the "
          f"`Annotator` built once, outside the timing), passes repeated for at least "
          f"{target:g} CPU s, median of {repeats}. `curation.text` caches the split of every "
          f"whitespace-separated chunk it has seen. **warm**: every chunk seen before (an "
          f"English corpus is close to this: its chunks are words); **cold**: the caches "
          f"emptied before every pass (a Chinese or Japanese chunk is a whole clause or line, "
          f"rarely seen twice, so those corpora are close to this). `split` is "
          f"`split_text` alone, same regime; its share of the whole.\n")
    texts = {lang: [t for t, u in zip(docs["text"], docs["url"], strict=True)
                    if u.startswith(f"https://udhr.example.org/{lang}/")]
             for lang in SPEED_LANGUAGES}
    rows = []
    setups = []
    for name, settings in (("rules", NEW), ("rules off", OLD)):
        forget_splits()
        start = time.process_time()
        annotator = Annotator(settings)
        for lang in SPEED_LANGUAGES:
            annotator.language(lang)  # compile each language's settings and bad-word list
        setups.append((name, time.process_time() - start))
        for lang in SPEED_LANGUAGES:
            pages = texts[lang]
            segmenter = settings.segmenter(lang)
            megabytes = sum(len(t.encode("utf-8")) for t in pages) / 1e6
            for cold in (False, True):
                seconds = cpu_per_pass(
                    lambda p=pages, a=annotator, lang=lang: [a.annotate_one(t, lang) for t in p],
                    target, repeats, cold)
                split = cpu_per_pass(
                    lambda p=pages, s=segmenter: [split_text(t, s) for t in p],
                    target / 2, repeats, cold)
                rows.append({"lang": lang, "settings": name, "cold": cold, "docs": len(pages),
                             "mb": megabytes, "seconds": seconds, "split": split,
                             "segmenter": segmenter or "English split"})
    english = {(r["settings"], r["cold"]): r for r in rows if r["lang"] == "en"}
    print("| language | settings | word split | caches | docs | MB | docs/s | MB/s | "
          "split share | docs/s vs en, same settings and caches | MB/s vs en | "
          "docs/s vs en warm | MB/s vs en warm |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in sorted(rows, key=lambda r: (r["settings"] != "rules",
                                          SPEED_LANGUAGES.index(r["lang"]), r["cold"])):
        en = english[row["settings"], row["cold"]]
        en_warm = english[row["settings"], False]
        docs_s, mb_s = row["docs"] / row["seconds"], row["mb"] / row["seconds"]
        print(f"| {row['lang']} | {row['settings']} | {row['segmenter']} | "
              f"{'cold' if row['cold'] else 'warm'} | {row['docs']} | {row['mb']:.3f} | "
              f"{docs_s:,.0f} | {mb_s:.2f} | {100 * row['split'] / row['seconds']:.0f}% | "
              f"{docs_s / (en['docs'] / en['seconds']):.2f}x | "
              f"{mb_s / (en['mb'] / en['seconds']):.2f}x | "
              f"{docs_s / (en_warm['docs'] / en_warm['seconds']):.2f}x | "
              f"{mb_s / (en_warm['mb'] / en_warm['seconds']):.2f}x |")
    print()
    print("`Annotator` set-up (settings compiled for en, zh, ja, th; segmented bad-word lists), "
          "CPU s, caches empty: " + ", ".join(f"{n} {s:.2f}" for n, s in setups) + ". The "
          "stage builds one per part of documents (`annotate_splits`).\n")


# --------------------------------------------------------------------------- main


ALPHA_BANDS = ((0.0, 0.6), (0.6, 0.8), (0.8, 1.01))


def report_like_for_like(sets: list[tuple[str, dict, dict]]) -> None:
    """Keep rates by the share of words with a letter (each language's own words, rules on):
    English pages made up like the shop pages (listings, catalogues, setlists) beside them."""
    print("### Like for like: kept by the share of words with a letter\n")
    print("The share each page's own words give (rules on: Sudachi for ja). Pages below 0.6 are "
          "listings, catalogues, tables of prices and codes in either language.\n")
    print("| documents | " + " | ".join(f"share {low:.1f}-{min(high, 1):.1f}"
                                     for low, high in ALPHA_BANDS) + " |")
    print("|---|" + "---:|" * len(ALPHA_BANDS))
    for title, docs, run in sets:
        shares = run["new"]["gopher_alpha_words_frac"]
        cells = []
        for low, high in ALPHA_BANDS:
            idx = [i for i, share in enumerate(shares) if low <= (share or 0.0) < high]
            cells.append(_pct(sum(run["new"]["keep"][i] for i in idx), len(idx)))
        print(f"| {title} ({len(docs['text'])}) | " + " | ".join(cells) + " |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--speed-seconds", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--skip-speed", action="store_true")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    started = time.perf_counter()
    for lang in RULED:  # fail loudly if the settings do not switch what they should
        if NEW.segmenter(lang) is None or OLD.segmenter(lang) is not None:
            raise SystemExit(f"{lang}: rules on gives segmenter {NEW.segmenter(lang)!r}, "
                             f"rules off {OLD.segmenter(lang)!r}")

    loads = segmenter_loads()
    pages = make_pages()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        warc = root / "lang-pages.warc.gz"
        write_warc(warc, pages)
        store = LocalStore(str(root / "new"))
        inputs = {"PAGES": [warc], "CLUEWEB": [CLUEWEB], "WEB": ENGLISH_WEB, "CC2020": [CC_2020]}
        docs = {name: extract_and_identify(store, name, files) for name, files in inputs.items()}
        # The same documents and languages under each heuristics setting: a copy of the store.
        shutil.copytree(root / "new", root / "old")
        stores = {"new": store, "old": LocalStore(str(root / "old"))}
        settings = {"new": NEW, "old": OLD}
        runs = {part: {name: heuristics(stores[name], part, settings[name]) for name in stores}
                for part in inputs}
        for part in inputs:
            assert runs[part]["new"]["doc_id"] == docs[part]["doc_id"]
            assert runs[part]["old"]["doc_id"] == docs[part]["doc_id"]

    report_pages(pages, docs["PAGES"], runs["PAGES"])
    print("## 2. Real web pages: ClueWeb09 Japanese against English IA / wget pages\n")
    report_web("ClueWeb09 Japanese (29 responses)", docs["CLUEWEB"], runs["CLUEWEB"])
    report_web("Internet Archive 2008 + wget 2024 (3 WARCs)", docs["WEB"], runs["WEB"])
    report_web("CC-MAIN-2020-34 head (16 responses; mostly Chinese spam-like hosts)",
               docs["CC2020"], runs["CC2020"])
    report_table_bars([("ClueWeb09", docs["CLUEWEB"], "ja"), ("IA + wget", docs["WEB"], "en")])
    report_like_for_like([("ClueWeb09 ja", docs["CLUEWEB"], runs["CLUEWEB"]),
                          ("IA + wget en", docs["WEB"], runs["WEB"])])
    if not args.skip_speed:
        report_speed(docs["PAGES"], args.speed_seconds, args.repeats)
    print("Segmenter load (first `load_segmenter`, imports and dictionary) and first call on "
          "one sentence, wall seconds, before any other use in this process:\n")
    print("| segmenter | load s | first call s |")
    print("|---|---:|---:|")
    for name, load, first in loads:
        print(f"| {name} | {load:.2f} | {first:.2f} |")
    print(f"\nTotal wall time {time.perf_counter() - started:.0f} s.")


if __name__ == "__main__":
    main()
