"""HTML decoding, cheap pre-extraction checks and main-text extraction."""

from __future__ import annotations

import codecs
import logging
import re
import signal
import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.encoding import detect_encoding
from resiliparse.parse.html import HTMLTree

from curation import trafilatura_xpath
from curation.config import DocumentsSettings, LanguagePrecheck
from curation.extract_fast import extract_hybrid
from curation.form_rescue import extract_keeping_forms, prose_lines, running_chars

# More replacement characters than this after the best decoding means the bytes are not text in
# any charset we could find.
MAX_REPLACEMENT_FRACTION = 0.01
# Deeper element nesting than this is not a real page (the deepest of 403 real pages in
# ../shared/data nests 510 elements by the measure below) and makes extractors slow:
# resiliparse's main-content pass is quadratic in depth, about 110 s at 100,000 nested divs, in C
# code that a time limit cannot interrupt.
MAX_HTML_DEPTH = 5000
# Control bytes (other than tab, line breaks, form feed and ESC) in the head of a payload above
# this fraction mean binary data, whatever the Content-Type says.
MAX_CONTROL_FRACTION = 0.01


class Rejected(Exception):
    """A record that cannot become a document; `reason` is the counted drop reason."""

    def __init__(self, reason: str, message: str = "") -> None:
        super().__init__(message or reason)
        self.reason = reason


# --- payload sniffing ------------------------------------------------------------------------

_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "PNG image"), (b"GIF87a", "GIF image"), (b"GIF89a", "GIF image"),
    (b"\xff\xd8\xff", "JPEG image"), (b"%PDF-", "PDF document"), (b"PK\x03\x04", "ZIP archive"),
    (b"\x1f\x8b", "gzip data"), (b"BZh", "bzip2 data"), (b"\xfd7zXZ\x00", "xz data"),
    (b"\x28\xb5\x2f\xfd", "zstd data"), (b"RIFF", "RIFF media (WebP, WAV, AVI)"),
    (b"wOFF", "WOFF font"), (b"wOF2", "WOFF2 font"), (b"OggS", "Ogg media"),
    (b"\x1a\x45\xdf\xa3", "Matroska/WebM media"), (b"ID3", "MP3 audio"),
    (b"\x00\x00\x01\x00", "icon"), (b"\x7fELF", "ELF executable"), (b"MZ", "Windows executable"),
)
_CONTROL_BYTES = bytes([*range(0x00, 0x09), *range(0x0E, 0x1B), *range(0x1C, 0x20)])
_BOMS = (codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def sniff_binary(payload: bytes) -> str | None:
    """What binary data the payload holds (by magic number or control bytes), or None for text.

    Servers label images, archives and downloads `text/html`; such bytes decode under a
    single-byte charset and would reach the extractor as garbage.
    """
    if payload.startswith(_BOMS):
        return None
    head = payload[:64].lstrip(b" \t\r\n")
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if payload[4:8] == b"ftyp":
        return "MP4/ISO media"
    sample = payload[:8192]
    controls = len(sample) - len(sample.translate(None, _CONTROL_BYTES))
    if sample and controls > MAX_CONTROL_FRACTION * len(sample):
        return f"binary data ({controls} control bytes in the first {len(sample)})"
    return None


def unwrap_payload(payload: bytes, limit: int) -> bytes:
    """The payload, gunzipped when it is a gzip stream (a body stored with its HTTP
    Content-Encoding); at most `limit` bytes are inflated, so a gzip bomb stays bounded."""
    if not payload.startswith(b"\x1f\x8b"):
        return payload
    inflater = zlib.decompressobj(31)
    try:
        body = inflater.decompress(payload, limit + 1)
    except zlib.error as error:
        raise Rejected("binary_payload", f"gzip data labelled HTML does not inflate: "
                                         f"{error}") from None
    if len(body) > limit:
        raise Rejected("too_large", f"gzip-encoded body inflates to over {limit} bytes")
    return body


# --- charset ---------------------------------------------------------------------------------


def _strict(payload: bytes, charset: str | None) -> str | None:
    if not charset:
        return None
    try:
        return payload.decode(charset)
    except (LookupError, UnicodeDecodeError):
        return None


@lru_cache(maxsize=256)
def _single_byte(charset: str) -> bool:
    """Whether a charset maps every byte to one character (latin-1, windows-1252, koi8-r...):
    such a charset decodes any bytes, so a wrong label never fails."""
    probe = "\u00e9\u00fc\u4e2d\u0416".encode()  # 9 bytes of UTF-8
    try:
        return len(probe.decode(charset, errors="replace")) == len(probe)
    except LookupError:
        return False


def decode_html(payload: bytes, declared: str | None) -> tuple[str, str]:
    """Text and the charset used: the HTTP header's, else the page's meta tag, else detection.

    A declared charset that fails to decode (a lying header) falls back to the meta tag and then
    to detection; bytes that decode under none of them are rejected as `bad_charset`. A
    single-byte label (latin-1, windows-1252...) cannot fail, so it is checked the other way:
    bytes that are valid UTF-8 and not plain ASCII are UTF-8 (text in a single-byte charset
    almost never forms valid multi-byte UTF-8 sequences), whatever the label says.
    """
    meta = detect_encoding(payload, from_html_meta=True)
    for charset in (declared, meta, detect_encoding(payload), "utf-8"):
        text = _strict(payload, charset)
        if text is not None:
            if charset and _single_byte(charset) and not payload.isascii():
                utf8 = _strict(payload, "utf-8")
                if utf8 is not None:
                    return utf8.removeprefix("\ufeff"), "utf-8"
            return text.removeprefix("\ufeff"), _normalise_charset(charset)
    lossy = payload.decode(meta or "utf-8", errors="replace")
    if lossy.count("\ufffd") > MAX_REPLACEMENT_FRACTION * max(len(lossy), 1):
        raise Rejected("bad_charset", f"bytes do not decode as {declared or meta or 'utf-8'}")
    return lossy, _normalise_charset(meta or "utf-8") + "+replaced"


def _normalise_charset(charset: str | None) -> str:
    return (charset or "utf-8").strip().lower()


# --- cheap checks before extraction ----------------------------------------------------------

_VOID = frozenset("area base br col embed hr img input link meta param source track wbr keygen "
                  "command basefont frame isindex".split())
# Greedy to the ">" (a lazy `[^>]*?` before an optional "/" backtracks at every character: this
# form scans 40% faster); a self-closed tag is one whose match ends in "/>".
_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9:-]*)[^>]*>")


def html_depth(html: str, stop: int | None = None) -> int:
    """Deepest element nesting by a tag scan (void and self-closed elements do not nest; an
    end tag closes one level). Stops counting once `stop` is passed."""
    depth = deepest = 0
    for match in _TAG.finditer(html):
        closing, name = match.groups()
        if match.group()[-2] == "/" or name.lower() in _VOID:
            continue
        if closing:
            depth = max(depth - 1, 0)
            continue
        depth += 1
        if depth > deepest:
            deepest = depth
            if stop is not None and deepest > stop:
                break
    return deepest


def check_depth(html: str, limit: int = MAX_HTML_DEPTH) -> None:
    """Raises `Rejected('too_deep')` for pathologically nested markup (cheap: a page with fewer
    tags than the limit is not scanned)."""
    if html.count("<") <= limit:
        return
    depth = html_depth(html, stop=limit)
    if depth > limit:
        raise Rejected("too_deep", f"elements nest over {limit} deep")



def precheck_language(html: str | HTMLTree, settings: LanguagePrecheck,
                      languages: list[str]) -> None:
    """Raises `Rejected` when a cheap extraction is clearly in none of the target languages."""
    if not settings.enabled or not languages:
        return
    text = " ".join(extract_plain_text(html, main_content=False).split())[:4000]
    if len(text) < settings.min_chars:
        return
    from curation.language import language_model

    labels, scores = language_model().predict(text, k=settings.top_k)
    found = {label.removeprefix("__label__"): float(score) for label, score in
             zip(labels, scores, strict=True)}
    if not any(found.get(code, 0.0) >= settings.threshold for code in languages):
        top = max(found, key=found.__getitem__) if found else "unknown"
        raise Rejected("language_precheck", f"{top}:{found.get(top, 0.0):.2f}")


# --- extraction ------------------------------------------------------------------------------


class _Expired(BaseException):
    """Raised by the alarm; a BaseException so that an extractor's own `except Exception`
    cannot swallow it and return half a page."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raises `Rejected('extract_timeout')` when the body uses more than `seconds` of CPU time.

    CPU time (ITIMER_PROF), not wall time: on a busy machine (other workers, other jobs) a page
    takes longer by the clock but not in CPU, and a wall-clock limit made the same input give
    different documents from run to run. Uses a signal, so it only applies in a process's main
    thread (worker processes are); elsewhere it runs the body unbounded rather than failing.
    It cannot interrupt C code that never returns to Python (see `check_depth`).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _expire(signum: int, frame: object) -> None:
        raise _Expired

    previous = signal.signal(signal.SIGPROF, _expire)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    except _Expired:
        raise Rejected("extract_timeout", f"extraction took over {seconds:g} s of CPU") from None
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


@dataclass
class Extractor:
    """Main-text extraction with the pipeline's extractor; make one per task.

    trafilatura's `deduplicate` drops text seen earlier in the same cache; a fresh cache per task
    keeps a task's output independent of which tasks a worker ran before it.
    """

    settings: DocumentsSettings

    def __post_init__(self) -> None:
        if self.settings.extractor == "trafilatura":
            from trafilatura.deduplication import LRUCache

            # Its per-page "discarding data" warnings are expected outcomes, counted here.
            logging.getLogger("trafilatura").setLevel(logging.ERROR)
            # Same text, 30% less time (1.42x): curation/trafilatura_xpath.py.
            trafilatura_xpath.install()

            self._cache = LRUCache(maxsize=4096)

    def parse(self, html: str) -> str | HTMLTree:
        """What the language pre-check and `extract` read: for the resiliparse extractors the
        parsed tree, so that a page is parsed once for the pre-check's cheap text and the main
        content (a parse is 0.56 ms a page on 2,000 benchmark-corpus pages; the output is
        unchanged); trafilatura parses with lxml itself."""
        return html if self.settings.extractor == "trafilatura" else HTMLTree.parse(html)

    def extract(self, html: str, url: str | None, parsed: str | HTMLTree | None = None) -> str:
        check_depth(html)
        try:
            with time_limit(self.settings.timeout_seconds):
                text = self._extract(html if parsed is None else parsed, url)
        except Rejected:
            raise
        except _Expired:
            # The timer fired as the body returned, before `time_limit` could disarm it (in
            # contextlib's exit): outside its `try`, so it is turned into the reject here.
            raise Rejected("extract_timeout", "extraction reached the CPU limit as it "
                           f"ended ({self.settings.timeout_seconds:g} s)") from None
        except Exception as error:  # noqa: BLE001 - any extractor failure is a counted reject
            raise Rejected("extract_error", f"{type(error).__name__}: {error}") from error
        text = (text or "").strip()
        if len(text) < self.settings.min_text_chars:
            raise Rejected("empty_text", "the extractor found no main text")
        return text

    def _extract(self, html: str | HTMLTree, url: str | None) -> str | None:
        if self.settings.extractor == "resiliparse":
            return extract_plain_text(html, main_content=True, alt_texts=False)
        if self.settings.extractor == "hybrid":
            # The fast path: resiliparse's main content minus the boilerplate it keeps (comments,
            # post metadata, header/footer, captions, cookie/newsletter/share/related boxes):
            # over 10x trafilatura-FineWeb's documents/s for a word F1 0.006 lower
            # (curation/extract_fast.py, benchmarks/results/extraction_frontier.md).
            return extract_hybrid(html)
        import trafilatura

        options = self.settings.trafilatura
        before = self.cache_state() if options.rescue_forms else None
        text = trafilatura.extract(
            html,
            url=url,
            favor_precision=options.favor_precision,
            include_comments=options.include_comments,
            include_tables=options.include_tables,
            deduplicate=self._cache if options.deduplicate else False,
        )
        if options.rescue_forms and not prose_lines(text or ""):
            return self._rescue_forms(html, url, text, before)
        return text

    def _rescue_forms(self, html: str, url: str | None, text: str | None,
                      before: OrderedDict | None) -> str | None:
        """`text`, or the page extracted again with its forms kept when that holds more running
        text (`curation.form_rescue`)."""
        trial = self.trial_cache(before)
        rescued = extract_keeping_forms(html, url, self.settings.trafilatura, trial)
        if rescued is None or running_chars(rescued) <= running_chars(text or ""):
            return text
        self.adopt(trial)
        return rescued

    # A second pass must count the page once in trafilatura's dedup cache, as one pass does
    # (counting it twice emptied later pages of the same file): it runs on a copy of the cache
    # as it was before the first pass, which replaces the cache only when its text is kept.
    def cache_state(self) -> OrderedDict | None:
        return self._cache.cache.copy() if self.settings.trafilatura.deduplicate else None

    def trial_cache(self, state: OrderedDict | None) -> Any:
        if state is None:
            return None
        from trafilatura.deduplication import LRUCache

        trial = LRUCache(maxsize=self._cache.maxsize)
        trial.cache = state
        return trial

    def adopt(self, trial: Any) -> None:
        if trial is not None:
            self._cache.cache = trial.cache
