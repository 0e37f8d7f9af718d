"""Extraction coverage per language, and the 29 Japanese ClueWeb09 pages page by page.

    .venv/bin/python -m benchmarks.extraction_languages [--show-pages] [--no-gold]

1. Reads every WARC under ``shared/data/warc/`` with the project's reader (``curation.warc``)
   and sends each response record through the `documents` stage's own record path
   (``curation.stages.documents._process_record``: status, size, binary sniffing, charset
   decoding by ``curation.extract.decode_html``, then the extractor), once per extractor, with
   one extractor per WARC file as the stage has one task (and one trafilatura dedup cache) per
   file. The settings are ``pipeline.yaml``'s ``documents`` section with the language
   pre-check turned off (``languages: []``), so that every page reaches the extractor; how many
   pages the pre-check of ``pipeline.yaml`` (en, de, fr, es) would drop first is counted apart.
2. Prints, for each of the 29 responses of the ClueWeb09 Japanese WARC: URL, declared charsets
   (HTTP header, HTML meta), the charset the project decoded with, HTML bytes, characters out of
   each extractor and of the candidate fixes, how much of the page's product description (its
   one block of running text, ``<div class="detail">`` on this site) each keeps, and an
   automatic verdict (see `verdict`).
3. Prints a coverage table per language (fastText lid.176 through ``curation.language.identify``
   on resiliparse's main-content text, else trafilatura's): pages, share with non-empty text and
   median characters (empty pages count as 0) per extractor, and per WARC file.
4. Scores the baseline and the candidate fixes on the 181 English gold article pages
   (``benchmarks.extraction_frontier.load_gold`` and ``quality``: word F1 from
   ``curation.evaluation.word_scores``), and counts the pages whose text each fix changes.

The fix the pipeline adopted is `curation.form_rescue` (trafilatura's `rescue_forms` setting,
on by default); the baseline runs with it off, and `FixedExtractor` holds the alternatives
that were measured against it.
``--show-pages`` also prints each Japanese page's whole visible text and the extractions, for
judging by hand. One process, no pools (about a minute of one core).
Results and the judgement per page: ``benchmarks/results/extraction_languages.md``.
"""

from __future__ import annotations

import argparse
import logging
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from resiliparse.extract.html2text import extract_plain_text  # noqa: E402

from benchmarks.extraction_frontier import GoldPage, Option, load_gold, quality  # noqa: E402
from curation.config import DocumentsSettings, load_pipeline  # noqa: E402
from curation.extract import Extractor, Rejected, decode_html, unwrap_payload  # noqa: E402
from curation.extract_fast import extract_hybrid  # noqa: E402
from curation.form_rescue import (  # noqa: E402
    extract_keeping_forms,
    mostly_cjk,
    prose_lines,
    running_chars,
)
from curation.language import identify  # noqa: E402
from curation.stages.documents import Task, _Collector, _process_record  # noqa: E402
from curation.urlfilter import UrlFilter  # noqa: E402
from curation.warc import HTTP_HEAD_BYTES, WarcItem, iter_warc  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA = REPO_ROOT.parent / "shared" / "data"
WARC_DIR = DATA / "warc"
JA_WARC = WARC_DIR / "non_cc" / "clueweb09-ja_resiliparse-quirk_29responses.warc.gz"


# --------------------------------------------------------------------------- the fixes


# A page "has running text" (for the verdict) with at least this much of it, a mostly-CJK line
# counting its characters twice: one templated sentence (an error page's "If you would like to
# report this problem...") is not a page's main text.
MIN_PAGE_RUNNING = 200


def page_running_text(html: str) -> list[str]:
    """The running-text lines of the page's whole visible text (resiliparse, boilerplate
    included), or none when they add up to less than `MIN_PAGE_RUNNING`."""
    visible = extract_plain_text(html, main_content=False, alt_texts=False)
    lines = prose_lines(visible)
    weight = sum(len(line) * (2 if mostly_cjk(line) else 1) for line in lines)
    return lines if weight >= MIN_PAGE_RUNNING else []


FALLBACK_MIN_PROSE = 100
# How often each mode ran its second extraction (pages), for the cost of a fix.
SECOND_PASSES: Counter[str] = Counter()
# CPU seconds in `_process_record` per variant, over all WARCs.
CPU_SECONDS: Counter[str] = Counter()


@dataclass
class FixedExtractor(Extractor):
    """The pipeline's `Extractor` with its form rescue off and one alternative fix (trafilatura
    only), for comparison with the rescue the pipeline now runs (`curation.form_rescue`):

    - `retry_forms`: a second pass keeping forms, but only when trafilatura returns no text;
    - `keep_forms`: always extract with forms kept;
    - `hybrid_fallback`: when trafilatura returns no text, take the `hybrid` extractor's text if
      it holds at least `FALLBACK_MIN_PROSE` characters of running text;
    - `rescue_then_hybrid`: the pipeline's rescue, then `hybrid_fallback` when still empty.
    """

    mode: str = "retry_forms"

    def _extract(self, html: Any, url: str | None) -> str | None:
        options = self.settings.trafilatura
        if self.mode == "keep_forms":
            return extract_keeping_forms(html, url, options, self._cache,
                                         only_with_running_text=False)
        before = self.cache_state()
        text = super()._extract(html, url) or ""
        if self.mode == "rescue_then_hybrid":
            text = self._rescue_forms(html, url, text, before) or ""
        if text.strip():
            return text
        SECOND_PASSES[self.mode] += 1
        if self.mode == "retry_forms":
            trial = self.trial_cache(before)
            rescued = extract_keeping_forms(html, url, options, trial,
                                            only_with_running_text=False)
            self.adopt(trial)
            return rescued
        if self.mode in ("hybrid_fallback", "rescue_then_hybrid"):
            hybrid = extract_hybrid(html)
            return hybrid if running_chars(hybrid) >= FALLBACK_MIN_PROSE else text
        raise ValueError(f"unknown mode {self.mode!r}")


# --------------------------------------------------------------------------- extractors


@dataclass(frozen=True)
class Variant:
    key: str
    title: str
    make: Callable[[DocumentsSettings], Extractor]


def _without_rescue(settings: DocumentsSettings) -> DocumentsSettings:
    options = settings.trafilatura.model_copy(update={"rescue_forms": False})
    return settings.model_copy(update={"trafilatura": options})


def _plain(name: str, rescue: bool = False) -> Callable[[DocumentsSettings], Extractor]:
    def make(settings: DocumentsSettings) -> Extractor:
        chosen = settings if rescue else _without_rescue(settings)
        return Extractor(chosen.model_copy(update={"extractor": name}))

    return make


def _no_tables(settings: DocumentsSettings) -> Extractor:
    options = _without_rescue(settings).trafilatura.model_copy(update={"include_tables": False})
    return Extractor(settings.model_copy(update={"trafilatura": options}))


def _fixed(mode: str) -> Callable[[DocumentsSettings], Extractor]:
    def make(settings: DocumentsSettings) -> Extractor:
        options = settings.trafilatura.model_copy(
            update={"rescue_forms": mode == "rescue_then_hybrid"})
        return FixedExtractor(settings.model_copy(update={"trafilatura": options}), mode)

    return make


VARIANTS = [
    Variant("trafilatura", "trafilatura (FineWeb's settings, no rescue)", _plain("trafilatura")),
    Variant("hybrid", "hybrid", _plain("hybrid")),
    Variant("resiliparse", "resiliparse", _plain("resiliparse")),
    Variant("rescue_forms", "**fix** (the pipeline's default): rescue forms when no running text",
            _plain("trafilatura", rescue=True)),
    Variant("retry_forms", "alt: retry keeping forms when empty", _fixed("retry_forms")),
    Variant("keep_forms", "alt: always keep forms", _fixed("keep_forms")),
    Variant("hybrid_fallback", "alt: hybrid fallback", _fixed("hybrid_fallback")),
    Variant("rescue_then_hybrid", "alt: rescue forms, then hybrid fallback",
            _fixed("rescue_then_hybrid")),
    Variant("no_tables", "alt: trafilatura include_tables=False", _no_tables),
]
ALONE = "trafilatura_alone"  # trafilatura with a fresh dedup cache for this page only


# --------------------------------------------------------------------------- reading


_META_CHARSET = re.compile(rb"""<meta[^>]+?charset\s*=\s*["']?\s*([A-Za-z0-9_:.-]+)""", re.I)
_MOJIBAKE = re.compile("[\u00c2-\u00f4][\u0080-\u00bf\u2018-\u203a\u20ac\u0152-\u0178]")


def meta_charset(payload: bytes) -> str | None:
    """The charset an HTML meta tag declares in the first 8 KB (`<meta charset>` or
    `http-equiv` Content-Type), as written."""
    found = _META_CHARSET.search(payload[:8192])
    return found.group(1).decode("ascii", "replace").lower() if found else None


@dataclass
class Page:
    file: str
    offset: int
    url: str
    header_charset: str | None
    meta_charset: str | None
    charset: str
    html_bytes: int
    html: str
    texts: dict[str, str] = field(default_factory=dict)
    rejects: dict[str, str] = field(default_factory=dict)
    language: str = "none"
    precheck_dropped: bool = False

    def chars(self, key: str) -> int:
        return len(self.texts.get(key, ""))

    @property
    def rejected_before_extraction(self) -> str | None:
        """The stage's reject reason when the record never reached the extractor (HTTP status,
        size, binary payload, charset...), else None."""
        reason = self.rejects.get("trafilatura")
        return reason if reason and reason not in EXTRACTION_REASONS else None

    @property
    def replacement_chars(self) -> int:
        return self.html.count("\ufffd")


# The stage's reject reasons that come out of the extractor itself.
EXTRACTION_REASONS = frozenset({"empty_text", "extract_error", "extract_timeout"})


def _decode(item: WarcItem, settings: DocumentsSettings) -> tuple[str, str, int] | None:
    try:
        payload = unwrap_payload(item.payload or b"", settings.max_html_bytes)
        html, charset = decode_html(payload, item.charset)
    except Rejected:
        return None
    return html, charset, len(payload)


def read_file(path: Path, settings: DocumentsSettings, precheck: DocumentsSettings) -> list[Page]:
    """Every HTML response of one WARC through `_process_record`, once per variant (one
    extractor per variant for the whole file, as the stage's one task per file)."""
    task = Task(0, "bench", str(path))
    url_filter = UrlFilter.load(settings.url_filter.domain_blocklist,
                                settings.url_filter.banned_substrings,
                                settings.url_filter.use_default_substrings)
    runs = [(variant.key, variant.make(settings), _Collector(task, 0)) for variant in VARIANTS]
    precheck_run = (Extractor(precheck), _Collector(task, 0))
    pages: list[Page] = []
    for item in iter_warc(path, settings.max_html_bytes + HTTP_HEAD_BYTES):
        if not isinstance(item, WarcItem) or item.record_type != "response":
            continue
        if not (item.content_type or "").startswith(("text/html", "application/xhtml+xml")):
            continue
        decoded = _decode(item, settings)
        html, charset, size = decoded if decoded else ("", "undecodable", len(item.payload or b""))
        page = Page(path.name, item.offset, item.url or "", item.charset,
                    meta_charset(item.payload or b""), charset, size, html)
        for key, extractor, out in runs:
            rows, rejects = len(out.rows), len(out.rejects)
            started = time.process_time()
            _process_record(item, task, settings, extractor, url_filter, out)
            CPU_SECONDS[key] += time.process_time() - started
            if len(out.rows) > rows:
                page.texts[key] = out.rows[-1]["text"]
                page.charset = out.rows[-1]["charset"]
            elif len(out.rejects) > rejects:
                page.rejects[key] = out.rejects[-1]["reason"]
        before = len(precheck_run[1].rejects)
        _process_record(item, task, precheck, precheck_run[0], url_filter, precheck_run[1])
        page.precheck_dropped = len(precheck_run[1].rejects) > before and \
            precheck_run[1].rejects[-1]["reason"] == "language_precheck"
        if html and not page.rejected_before_extraction:
            try:
                alone = Extractor(settings).extract(html, item.url)
            except Rejected:
                alone = ""
            page.texts[ALONE] = alone
        pages.append(page)
    return pages


def label_languages(pages: list[Page]) -> None:
    texts = [page.texts.get("resiliparse") or page.texts.get("trafilatura") or ""
             for page in pages]
    labelled = [index for index, text in enumerate(texts) if text.strip()]
    labels, _ = identify([texts[index] for index in labelled])
    for index, label in zip(labelled, labels, strict=True):
        pages[index].language = label


# --------------------------------------------------------------------------- judging


def _squash(text: str) -> str:
    return "".join(text.split())


def kept_share(lines: list[str], text: str) -> float:
    """Share of the characters of `lines` whose line appears (whitespace ignored) in `text`."""
    total = sum(len(line) for line in lines)
    if not total:
        return 0.0
    squashed = _squash(text)
    return sum(len(line) for line in lines if _squash(line) in squashed) / total


def clueweb_description(html: str) -> list[str]:
    """This site's product description, the page's one block of running text: the sentences
    of `<div class="detail">` after its heading."""
    from trafilatura.utils import load_html

    tree = load_html(html)
    blocks = [" ".join(div.text_content().split()) for div in tree.iter("div")
              if div.get("class") == "detail"] if tree is not None else []
    text = " ".join(blocks)
    text = re.sub(r"^アイテム(?:詳細)?情報\s*", "", text)
    return [part for part in re.split(r"(?<=[。！☆♪★])|\s+", text) if len(part) >= 4]


def _in_form(html: str, lines: list[str]) -> bool:
    """Whether most of `lines` (by characters) sit inside a `<form>` of trafilatura's parse."""
    from trafilatura.utils import load_html

    tree = load_html(html)
    if tree is None:
        return False
    forms = _squash(" ".join(form.text_content() for form in tree.iter("form")))
    inside = sum(len(line) for line in lines if _squash(line) in forms)
    return inside * 2 > sum(len(line) for line in lines)


def verdict(page: Page, key: str = "trafilatura") -> str:
    """An automatic verdict on one extractor's text for the page (trafilatura's by default),
    checked by hand for the Japanese pages (benchmarks/results/extraction_languages.md).

    The page's running text is `prose_lines` of resiliparse's whole-page text (every visible
    line, boilerplate included). `ok` when the extractor keeps at least half of it (by
    characters); `correct: no running text` when the page has none (navigation, link lists,
    forms, galleries) and the output is empty; `correct: repeat` when trafilatura alone on the
    page keeps it but the file's dedup cache dropped it as seen before; otherwise a failure:
    `charset` when the decoding needed replacement characters or left UTF-8-read-as-latin-1
    sequences in a single-byte decoding, else `layout`, naming `<form>` when most of the missed
    lines are inside a form (which trafilatura deletes with everything in it).
    """
    if not page.html:
        return "undecodable"
    if page.rejected_before_extraction:
        return f"rejected before extraction ({page.rejected_before_extraction})"
    prose = page_running_text(page.html)
    text = page.texts.get(key, "")
    if not prose:
        return "correct: no running text" if not text else "ok (no running text on the page)"
    if kept_share(prose, text) >= 0.5:
        return "ok"
    output = "boilerplate only" if text else "empty"
    if key == "trafilatura" and kept_share(prose, page.texts.get(ALONE, "")) >= 0.5:
        return "correct: repeat of an earlier page (dedup)" if not text else "ok (dedup)"
    if key == "trafilatura" and not text and page.texts.get(ALONE):
        output = "empty (what was left was dropped as a repeat by dedup)"
    single_byte = page.charset.split("+")[0] not in ("utf-8", "utf-16", "euc-jp", "shift_jis",
                                                     "gb18030", "gbk", "big5", "euc-kr")
    if page.replacement_chars > 0.01 * len(page.html) or (
            single_byte and len(_MOJIBAKE.findall(page.html)) >= 5):
        return f"failure: charset; {output}"
    missed = [line for line in prose if _squash(line) not in _squash(text)]
    cause = "running text inside <form>" if _in_form(page.html, missed) else "running text missed"
    return f"failure: layout, {cause}; {output}"


def short_verdict(page: Page, key: str = "trafilatura") -> str:
    return verdict(page, key).split(";")[0].split(" (")[0]


# --------------------------------------------------------------------------- tables


COLUMNS = ["trafilatura", ALONE, "hybrid", "resiliparse", "rescue_forms", "retry_forms",
           "keep_forms", "hybrid_fallback", "rescue_then_hybrid", "no_tables"]
HEADS = {"trafilatura": "trafilatura", ALONE: "traf. page alone", "hybrid": "hybrid",
         "resiliparse": "resiliparse", "rescue_forms": "**fix**: rescue forms",
         "retry_forms": "alt: retry forms if empty", "keep_forms": "alt: keep forms",
         "hybrid_fallback": "alt: hybrid fallback",
         "rescue_then_hybrid": "alt: rescue, then hybrid",
         "no_tables": "alt: include_tables=False"}


def _md(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def japanese_table(pages: list[Page]) -> str:
    head = ["#", "URL (www.uraharajuku.st/shopdetail/...)", "HTTP charset", "meta charset",
            "decoded as", "U+FFFD", "HTML bytes", *[f"{HEADS[key]} chars" for key in COLUMNS],
            "description chars", "description kept: trafilatura / fix / resiliparse",
            "verdict on trafilatura (automatic)", "verdict on the fix"]
    rows = []
    for index, page in enumerate(pages):
        description = clueweb_description(page.html)
        shares = " / ".join(f"{kept_share(description, page.texts.get(key, '')):.0%}"
                            for key in ("trafilatura", "rescue_forms", "resiliparse"))
        rows.append([str(index), page.url.split("/shopdetail/", 1)[-1], str(page.header_charset),
                     str(page.meta_charset), page.charset, str(page.replacement_chars),
                     str(page.html_bytes), *[str(page.chars(key)) for key in COLUMNS],
                     str(sum(map(len, description))), shares, verdict(page),
                     verdict(page, "rescue_forms")])
    return _md(head, rows)


def japanese_summary(pages: list[Page]) -> str:
    rows = []
    for key in COLUMNS:
        kept, density = [], []
        for page in pages:
            description = clueweb_description(page.html)
            text = page.texts.get(key, "")
            kept.append(kept_share(description, text))
            if text:
                found = sum(len(part) for part in description if _squash(part) in _squash(text))
                density.append(found / len(_squash(text)))
        rows.append([HEADS[key], str(sum(1 for page in pages if page.chars(key))),
                     str(sum(share >= 0.9 for share in kept)), f"{statistics.mean(kept):.0%}",
                     f"{statistics.mean(density):.0%}" if density else "-",
                     f"{statistics.median(page.chars(key) for page in pages):.0f}"])
    return _md(["extractor", f"pages with text (of {len(pages)})",
                "pages keeping >= 90% of the description", "mean share of the description kept",
                "description share of the text (pages with text)", "median chars"], rows)


def _coverage_cells(group: list[Page], keys: list[str]) -> list[str]:
    cells = []
    for key in keys:
        nonempty = sum(1 for page in group if page.chars(key))
        median = statistics.median(page.chars(key) for page in group)
        cells.append(f"{nonempty / len(group):.0%} ({nonempty}), {median:.0f}")
    return cells


COVERAGE_KEYS = ["trafilatura", "hybrid", "resiliparse", "rescue_forms"]


def _empty_verdicts(group: list[Page]) -> str:
    found = Counter(short_verdict(page) for page in group if not page.chars("trafilatura"))
    return ", ".join(f"{kind} {count}" for kind, count in found.most_common()) or "-"


def coverage_table(pages: list[Page], by: Callable[[Page], str], label: str) -> str:
    """Pages that reached the extractor, grouped by `by`."""
    reached = [page for page in pages if page.html and not page.rejected_before_extraction]
    groups: dict[str, list[Page]] = defaultdict(list)
    for page in reached:
        groups[by(page)].append(page)
    head = [label, "HTML pages extracted",
            *[f"{HEADS[key]}: non-empty, median chars" for key in COVERAGE_KEYS],
            "trafilatura empty: automatic verdicts",
            "dropped first by pipeline.yaml's language pre-check"]
    rows = []
    for name, group in sorted(groups.items(), key=lambda item: (-len(item[1]), item[0])):
        rows.append([name, str(len(group)), *_coverage_cells(group, COVERAGE_KEYS),
                     _empty_verdicts(group), str(sum(page.precheck_dropped for page in group))])
    rows.append(["all", str(len(reached)), *_coverage_cells(reached, COVERAGE_KEYS),
                 _empty_verdicts(reached), str(sum(page.precheck_dropped for page in reached))])
    return _md(head, rows)


def rejected_line(pages: list[Page]) -> str:
    found = Counter(page.rejected_before_extraction or "undecodable" for page in pages
                    if not page.html or page.rejected_before_extraction)
    return (f"{sum(found.values())} more HTML responses never reach the extractor: "
            + ", ".join(f"{reason} {count}" for reason, count in found.most_common()) + ".")


def _passes(passes: Counter[str], key: str) -> str:
    """Second extractions a fix ran (the pipeline's own rescue does not count them: `-`)."""
    if key in ("trafilatura", "keep_forms", "no_tables", "rescue_forms"):
        return "-"
    return str(passes.get(key, 0))


def changed_table(pages: list[Page], passes: Counter[str]) -> str:
    """Per fix: pages whose text differs from trafilatura's, outside the Japanese WARC."""
    rows = []
    others = [page for page in pages if page.file != JA_WARC.name and page.html
              and not page.rejected_before_extraction]
    rows.append(["trafilatura (pipeline)", str(len(others)), "-", "-", "-",
                  f"{CPU_SECONDS['trafilatura']:.1f}"])
    for key in ("rescue_forms", "retry_forms", "keep_forms", "hybrid_fallback",
                "rescue_then_hybrid", "no_tables"):
        changed = [page for page in others if page.texts.get(key, "") !=
                   page.texts.get("trafilatura", "")]
        detail = "; ".join(f"{page.url[:70]} ({page.language}): {page.chars('trafilatura')} -> "
                           f"{page.chars(key)}" for page in changed[:6]) or "none"
        if len(changed) > 6:
            emptied = sum(1 for page in changed if not page.chars(key))
            detail += f"; and {len(changed) - 6} more ({emptied} of all {len(changed)} emptied)"
        rows.append([HEADS[key], str(len(others)), _passes(passes, key), str(len(changed)),
                     detail, f"{CPU_SECONDS[key]:.1f}"])
    return _md(["fix", "pages extracted (all WARCs but the Japanese one)",
                "second extractions (all WARCs, the Japanese one included)", "pages changed",
                "which: chars before -> after", "CPU s, all WARCs (one run, noisy)"],
               rows)


# --------------------------------------------------------------------------- gold


def _gold_option(variant: Variant, settings: DocumentsSettings) -> Option:
    def make() -> Callable[[str, str | None], str | None]:
        extractor = variant.make(settings)

        def run(html: str, url: str | None) -> str | None:
            try:
                return extractor.extract(html, url)
            except Rejected:
                return ""

        return run

    return Option(variant.title, make, "")


def gold_table(settings: DocumentsSettings, pages: list[GoldPage]) -> str:
    rows = []
    baseline: list[str] = []
    for variant in VARIANTS:
        if variant.key in ("hybrid", "resiliparse"):
            continue
        option = _gold_option(variant, settings)
        scores = quality(option, pages)
        run = option.make()
        before = Counter(SECOND_PASSES)
        texts = [run(page.html, page.url) or "" for page in pages]
        passes = SECOND_PASSES - before
        baseline = baseline or texts
        changed = sum(a != b for a, b in zip(baseline, texts, strict=True))
        empty = sum(not text.strip() for text in texts)
        rows.append([variant.title, f"{scores.f1:.4f}", f"{scores.precision:.4f}",
                     f"{scores.recall:.4f}", f"{scores.f1_tune:.4f} / {scores.f1_held_out:.4f}",
                     str(empty), _passes(passes, variant.key), str(changed)])
    return _md(["extractor", f"word F1 ({len(pages)})", "precision", "recall",
                "F1 tune / held-out half", "empty pages", "second extractions",
                "pages changed vs trafilatura"], rows)


# --------------------------------------------------------------------------- main


def show_pages(pages: list[Page]) -> None:
    for index, page in enumerate(pages):
        visible = extract_plain_text(page.html, main_content=False, alt_texts=False)
        print(f"\n===== {index} {page.url} [{page.charset}] {verdict(page)}")
        print("--- visible text (resiliparse, whole page):\n" + visible)
        for key in ("trafilatura", ALONE, "rescue_forms"):
            print(f"--- {HEADS[key]}:\n{page.texts.get(key, '')}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipeline", type=Path, default=REPO_ROOT / "pipeline.yaml")
    parser.add_argument("--show-pages", action="store_true",
                        help="print each Japanese page's visible text and extractions")
    parser.add_argument("--no-gold", action="store_true", help="skip the English gold pages")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.getLogger("trafilatura").setLevel(logging.ERROR)
    started = time.process_time()
    precheck = load_pipeline(args.pipeline).documents
    settings = precheck.model_copy(update={"languages": []})
    files = sorted(path for path in WARC_DIR.rglob("*") if ".warc" in path.name)
    pages: list[Page] = []
    for path in files:
        pages += read_file(path, settings, precheck)
    passes = Counter(SECOND_PASSES)
    label_languages(pages)
    japanese = [page for page in pages if page.file == JA_WARC.name]
    if args.show_pages:
        show_pages(japanese)
    print(f"## The {len(japanese)} responses of {JA_WARC.name}\n")
    print(japanese_table(japanese))
    print()
    print(japanese_summary(japanese))
    print("\n## Coverage per language (all WARCs)\n")
    print(coverage_table(pages, lambda page: page.language, "language"))
    print("\n" + rejected_line(pages))
    print("\n## Coverage per WARC file and language\n")
    print(coverage_table(pages, lambda page: f"{page.file} / {page.language}", "file / language"))
    print("\n## Pages the fixes change outside the Japanese WARC\n")
    print(changed_table(pages, passes))
    if not args.no_gold:
        print("\n## English gold article pages (word F1, benchmarks/extraction_frontier.py)\n")
        print(gold_table(settings, load_gold()))
    print(f"\n{len(files)} WARC files, {len(pages)} HTML responses; "
          f"{time.process_time() - started:.0f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
