"""HTML decoding, cheap pre-extraction checks and main-text extraction."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.encoding import detect_encoding

from curation.config import DocumentsSettings, LanguagePrecheck

# More replacement characters than this after the best decoding means the bytes are not text in
# any charset we could find.
MAX_REPLACEMENT_FRACTION = 0.01


class Rejected(Exception):
    """A record that cannot become a document; `reason` is the counted drop reason."""

    def __init__(self, reason: str, message: str = "") -> None:
        super().__init__(message or reason)
        self.reason = reason


# --- charset ---------------------------------------------------------------------------------


def _strict(payload: bytes, charset: str | None) -> str | None:
    if not charset:
        return None
    try:
        return payload.decode(charset)
    except (LookupError, UnicodeDecodeError):
        return None


def decode_html(payload: bytes, declared: str | None) -> tuple[str, str]:
    """Text and the charset used: the HTTP header's, else the page's meta tag, else detection.

    A declared charset that fails to decode (a lying header) falls back to the meta tag and then
    to detection; bytes that decode under none of them are rejected as `bad_charset`.
    """
    meta = detect_encoding(payload, from_html_meta=True)
    for charset in (declared, meta, detect_encoding(payload), "utf-8"):
        text = _strict(payload, charset)
        if text is not None:
            return text.removeprefix("\ufeff"), _normalise_charset(charset)
    lossy = payload.decode(meta or "utf-8", errors="replace")
    if lossy.count("\ufffd") > MAX_REPLACEMENT_FRACTION * max(len(lossy), 1):
        raise Rejected("bad_charset", f"bytes do not decode as {declared or meta or 'utf-8'}")
    return lossy, _normalise_charset(meta or "utf-8") + "+replaced"


def _normalise_charset(charset: str | None) -> str:
    return (charset or "utf-8").strip().lower()


# --- cheap checks before extraction ----------------------------------------------------------


def precheck_language(html: str, settings: LanguagePrecheck, languages: list[str]) -> None:
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
    """Raises `Rejected('extract_timeout')` when the body runs longer than `seconds`.

    Uses SIGALRM, so it only applies in a process's main thread (worker processes are); elsewhere
    it runs the body unbounded rather than failing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _expire(signum: int, frame: object) -> None:
        raise _Expired

    previous = signal.signal(signal.SIGALRM, _expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _Expired:
        raise Rejected("extract_timeout", f"extraction took over {seconds:g} s") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


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

            self._cache = LRUCache(maxsize=4096)

    def extract(self, html: str, url: str | None) -> str:
        try:
            with time_limit(self.settings.timeout_seconds):
                text = self._extract(html, url)
        except Rejected:
            raise
        except Exception as error:  # noqa: BLE001 - any extractor failure is a counted reject
            raise Rejected("extract_error", f"{type(error).__name__}: {error}") from error
        text = (text or "").strip()
        if len(text) < self.settings.min_text_chars:
            raise Rejected("empty_text", "the extractor found no main text")
        return text

    def _extract(self, html: str, url: str | None) -> str | None:
        if self.settings.extractor == "resiliparse":
            return extract_plain_text(html, main_content=True, alt_texts=False)
        import trafilatura

        options = self.settings.trafilatura
        return trafilatura.extract(
            html,
            url=url,
            favor_precision=options.favor_precision,
            include_comments=options.include_comments,
            include_tables=options.include_tables,
            deduplicate=self._cache if options.deduplicate else False,
        )
