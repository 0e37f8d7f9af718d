"""Word segmenters for languages written without spaces, registered by name (no Dagster here).

The heuristic rules count words, and `str.split` finds almost none in Chinese, Japanese or Thai:
a whole paragraph is one "word" of 200 characters, so every page fails Gopher's word-length rule.
FineWeb-2 (datatrove's `word_tokenizers.py`) segments those languages with a real tokenizer, and
its per-language thresholds (`curation/languages/`) were tuned on exactly these tokenizers:

- `jieba` (zh): jieba's dictionary and algorithm, HMM on, through rjieba (jieba-rs, the Rust
  port, rather than jieba itself: a wheel with its dictionary compiled in, kept up).
- `sudachi_a` (ja): Sudachi, split mode A, with SudachiDict-core (spaCy's `ja`, FineWeb-2's).
- `thai_newmm` (th): PyThaiNLP's `newmm-safe` with its bundled word list.

A segmenter sees only a whitespace-free chunk holding a character of its script (`applies`);
every other chunk keeps the English split (`curation/text.py`), so a Latin word inside a Japanese
page is split as before and no token ever spans whitespace. Every dictionary ships in its wheel:
nothing is downloaded, and PyThaiNLP is told not to write its data folder.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache

import regex

Segment = Callable[[str], list[str]]

# Sudachi refuses input of 49,149 bytes or more; datatrove cuts Japanese at 40,000.
_SUDACHI_MAX_BYTES = 40_000
_JAPANESE_SENTENCE_END = regex.compile(r"(?<=[。！？])")


def _stripped(tokens: Iterable[str]) -> list[str]:
    """datatrove's clean-up: tokens stripped, empty ones dropped."""
    return [token for token in (t.strip() for t in tokens) if token]


def _jieba() -> Segment:
    import rjieba

    return lambda chunk: _stripped(rjieba.cut(chunk, hmm=True))


def _byte_bounded(chunk: str, limit: int) -> list[str]:
    """`chunk` in pieces of at most `limit` UTF-8 bytes, cut after a sentence end where one
    is near enough, else at a character."""
    if len(chunk.encode("utf-8")) < limit:
        return [chunk]
    pieces: list[str] = []
    current: list[str] = []
    size = 0  # bytes in `current`
    for sentence in _JAPANESE_SENTENCE_END.split(chunk):
        while len(sentence.encode("utf-8")) >= limit:  # a sentence too long on its own
            head = sentence[: limit // 4]  # at most 4 bytes a character
            pieces.append(head)
            sentence = sentence[len(head):]
        length = len(sentence.encode("utf-8"))
        if size + length >= limit:
            pieces.append("".join(current))
            current, size = [], 0
        current.append(sentence)
        size += length
    return [piece for piece in [*pieces, "".join(current)] if piece]


def _sudachi_a() -> Segment:
    from sudachipy import Dictionary, SplitMode

    # Every field stays loaded: asking for the surface alone switches off the plugin that
    # joins numbers, and "32,800" would come out as five tokens.
    tokenizer = Dictionary(dict="core").tokenizer(mode=SplitMode.A)

    def segment(chunk: str) -> list[str]:
        return _stripped(morpheme.surface()
                         for piece in _byte_bounded(chunk, _SUDACHI_MAX_BYTES)
                         for morpheme in tokenizer.tokenize(piece))

    return segment


def _thai_newmm() -> Segment:
    os.environ.setdefault("PYTHAINLP_READ_ONLY", "1")  # no ~/pythainlp-data
    from pythainlp.tokenize import word_tokenize

    return lambda chunk: _stripped(
        word_tokenize(chunk, engine="newmm-safe", keep_whitespace=False))


@dataclass(frozen=True)
class Segmenter:
    """A registered segmenter: whether a chunk holds a character of its script, and how to
    load it."""

    name: str
    applies: Callable[[str], object]
    load: Callable[[], Segment]


SEGMENTERS: dict[str, Segmenter] = {
    s.name: s
    for s in (
        Segmenter("jieba", regex.compile(r"\p{Han}").search, _jieba),
        Segmenter("sudachi_a", regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}]").search,
                  _sudachi_a),
        Segmenter("thai_newmm", regex.compile(r"\p{Thai}").search, _thai_newmm),
    )
}


@cache
def load_segmenter(name: str) -> Segment:
    """The segment function of a registered segmenter, loaded once per process."""
    return SEGMENTERS[name].load()
