"""Benchmark decontamination: an index of eval items' word n-grams and a fast document scanner.

Words (`normalise_words`, the one definition for eval items and documents): every character
on its own goes through Unicode NFKD, loses its combining marks (diacritics), goes through NFKC
(so Hangul recomposes) and case folding, and becomes a space unless it is alphanumeric
(`str.isalnum`); the result is split on spaces. As a per-character map it makes NFKC-equivalent
spellings, case, accents, punctuation and whitespace irrelevant, and lets text be cut wherever a
separator is.

Keys: a word hashes to splitmix64(sum_k code_point[k] * P**k mod 2**64) (one constant for a
word longer than 65,536 characters, a blob that no benchmark holds); an L-gram at word position
i to sum_j word[i+j] * Q**j + SALT * L (mod 2**64). An item of at least `ngram` words gives its
distinct n-grams; a shorter item gives one key, its whole word sequence (so "Planets orbit the
Sun." is caught only whole). The index is the key table (`ngram_hash`, `length`, `item`) plus the
items table, and round-trips through Parquet.

Scanning is numpy over one document at a time: code points (UTF-32) go through a folding table
(separators to 0), word hashes come from prefix sums over the code points, n-gram keys from
prefix sums over the word hashes, and each key is probed in a bitmap of the index's keys (about
1% false positives) before an exact `searchsorted` check. Words holding one of the few
characters that fold to several ("ß", "½") or to none (a lone combining mark) take the reference
path, cached per distinct chunk. Short items are found from a small bitmap of their first words,
then checked at each short length. Only documents that hit get spans: a span covers the
separator-delimited chunks holding the matched words, trimmed of punctuation at both ends.

`residual_contamination` (`ResidualMatcher`) is a second, deliberately separate implementation
for the mix's gate.
"""

from __future__ import annotations

import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import regex
from pydantic import BaseModel, ConfigDict, Field

from curation.code import decontamination_tokens
from curation.evals import EvalBenchmark, EvalItem, content_hash
from curation.hashing import mix64

U64 = np.uint64
_MASK = (1 << 64) - 1
NORMALISER_VERSION = "decontamination-v1"  # bump when words or keys change: re-pins the index
CODE_NORMALISER_VERSION = "code-decontamination-v1"  # curation.code.decontamination_tokens
MAX_NGRAM = 64
_META_NGRAM = b"decontamination.ngram"
_META_VERSION = b"decontamination.normaliser"


class DecontaminationSettings(BaseModel):
    """The `decontaminated` stage's section of pipeline.yaml."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ngram: int = Field(13, ge=1, le=MAX_NGRAM)
    # A document is a hit when it shares at least this many distinct keys (n-grams, or whole
    # short items) with the eval set.
    min_hits: int = Field(1, ge=1)
    # Code tokens per n-gram of the code index (code benchmarks, looked for in code sources):
    # 25 catches 99% of HumanEval solutions renamed and reformatted and flags no module of the
    # standard library (benchmarks/results/code.md).
    code_ngram: int = Field(25, ge=1, le=MAX_NGRAM)
    benchmarks: list[EvalBenchmark] = []


def suite_hash(settings: DecontaminationSettings, base_dir: Path | None = None) -> str:
    """Content hash that pins the eval-suite asset: the benchmark files' bytes and layouts, the
    n-gram sizes and the normalisers' versions (not `min_hits`, which does not change the
    index)."""
    return content_hash(
        settings.benchmarks, base_dir, f"{NORMALISER_VERSION}:ngram={settings.ngram}:"
        f"{CODE_NORMALISER_VERSION}:code_ngram={settings.code_ngram}"
    )


# --- words: the definition ----------------------------------------------------------------------


def _fold_char(ch: str) -> str:
    """One character as words see it: NFKD, combining marks (diacritics) dropped, NFKC (so
    Hangul recomposes), case-folded; anything not alphanumeric becomes a space."""
    bare = "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c))
    folded = unicodedata.normalize("NFKC", bare).casefold()
    return "".join(c if c.isalnum() else " " for c in folded)


class _FoldTable(dict[int, str]):
    """A lazy `str.translate` table over all of Unicode (filled as characters are met)."""

    def __missing__(self, code: int) -> str:
        value = self[code] = _fold_char(chr(code))
        return value


_FOLD = _FoldTable()


def normalise(text: str) -> str:
    return text.translate(_FOLD)


def normalise_words(text: str) -> list[str]:
    """The words of a text, as both eval items and documents are matched (the definition that
    the vectorised `document_words` implements)."""
    return text.translate(_FOLD).split()


# --- hashing ------------------------------------------------------------------------------------

_BLOCK = 1 << 16  # characters per hashing block, words per n-gram window
_CHAR_BASE = 0x9E3779B97F4A7C15  # odd, so invertible mod 2**64
_WORD_BASE = 0xD6E8FEB86659FD93
_LENGTH_SALT = 0xA0761D6478BD642F
_LONG_TOKEN = 0x5BD1E9955BD1E995  # the hash of every token longer than _BLOCK characters
_TABLE_SIZE = 0x20000  # the Basic and Supplementary Multilingual Planes (emoji included)
_COMPLEX = 0xFFFFFFFF  # folds to several characters, or lies beyond the table


def _powers(base: int, count: int) -> np.ndarray:
    values, value = [], 1
    for _ in range(count):  # once at import; exact in Python integers
        values.append(value)
        value = value * base & _MASK
    return np.array(values, dtype=U64)


_CHAR_POW = _powers(_CHAR_BASE, _BLOCK + 1)
_CHAR_INV = _powers(pow(_CHAR_BASE, -1, 1 << 64), _BLOCK + 1)
_WORD_POW = _powers(_WORD_BASE, _BLOCK + MAX_NGRAM)
_WORD_INV = _powers(pow(_WORD_BASE, -1, 1 << 64), _BLOCK + MAX_NGRAM)
_SALTS = np.array([(_LENGTH_SALT * n) & _MASK for n in range(MAX_NGRAM + 1)], dtype=U64)


@cache
def _code_table() -> np.ndarray:
    """Code point -> its folded code point: 0 for a separator, _COMPLEX where it folds to
    several characters ("ß" -> "ss", "½" -> "1 2") or to none (a lone combining mark, which
    joins its neighbours); words holding those take the slow path. Built once per process
    (about 0.15 s)."""
    values = []
    for code in range(_TABLE_SIZE):
        folded = _fold_char(chr(code))
        if len(folded) == 1:
            values.append(0 if folded == " " else ord(folded))
        else:
            values.append(_COMPLEX if folded.strip() or not folded else 0)
    values[-1] = _COMPLEX  # np.take(mode="clip") sends every code point beyond the table here
    return np.array(values, dtype=np.uint32)


def _code_points(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def token_hash(token: str) -> int:
    """The 64-bit hash of one normalised word (the reference for the vectorised path)."""
    codes = _code_points(token)
    if len(codes) > _BLOCK:
        return _LONG_TOKEN
    raw = (codes * _CHAR_POW[: len(codes)]).sum(dtype=U64)
    return int(mix64(np.array([raw], dtype=U64))[0])


class _ChunkCache(dict[str, tuple[int, ...]]):
    """Token hashes of chunks holding characters that fold to several; cleared when it grows
    past `limit` entries so memory stays bounded on any input."""

    limit = 200_000

    def __missing__(self, chunk: str) -> tuple[int, ...]:
        if len(self) >= self.limit:
            self.clear()
        value = self[chunk] = tuple(token_hash(t) for t in normalise_words(chunk))
        return value


_CHUNKS = _ChunkCache()


@dataclass
class _Words:
    """A text's word hashes and each word's character span (a word folded from a chunk with
    several words, like "don’t", has the chunk's span)."""

    hashes: np.ndarray
    starts: np.ndarray
    ends: np.ndarray


def _block_bounds(folded: np.ndarray) -> list[tuple[int, int, bool]]:
    """(start, end, is_monster) pieces of at most _BLOCK characters, cut after a separator; a
    chunk longer than a block (a "monster": a blob, never a benchmark word) is its own piece."""
    bounds, lo, size = [], 0, len(folded)
    while lo < size:
        if size - lo <= _BLOCK:
            bounds.append((lo, size, False))
            break
        separators = np.flatnonzero(folded[lo : lo + _BLOCK] == 0)
        if len(separators):
            cut = lo + int(separators[-1]) + 1
            bounds.append((lo, cut, False))
            lo = cut
            continue
        rest = np.flatnonzero(folded[lo:] == 0)
        end = lo + int(rest[0]) if len(rest) else size
        bounds.append((lo, end, True))
        lo = end
    return bounds


def _block_words(text: str, folded: np.ndarray, lo: int, hi: int) -> _Words:
    """Words of text[lo:hi]: runs of non-separators, hashed from prefix sums."""
    codes = folded[lo:hi]
    inside = np.zeros(hi - lo + 2, dtype=bool)
    np.not_equal(codes, 0, out=inside[1:-1])
    edges = np.flatnonzero(inside[1:] != inside[:-1])
    starts, ends = edges[0::2], edges[1::2]
    prefix = np.empty(hi - lo + 1, dtype=U64)
    prefix[0] = 0
    np.cumsum(codes * _CHAR_POW[: hi - lo], out=prefix[1:])
    words = _Words(mix64((prefix[ends] - prefix[starts]) * _CHAR_INV[starts]), starts, ends)
    complex_at = np.flatnonzero(codes == _COMPLEX)
    if len(complex_at):
        words = _complex_words(text[lo:hi], words, complex_at)
    if lo:
        words.starts, words.ends = words.starts + lo, words.ends + lo
    return words


def _complex_words(block: str, words: _Words, complex_at: np.ndarray) -> _Words:
    """Words holding a character that folds to several get their tokens from the reference
    normalisation: one or several ("ß" stays in one word, "1½" gives "11", "2")."""
    # A complex character is never a separator, so the first word ending after it holds it.
    special = np.unique(np.searchsorted(words.ends, complex_at, side="right"))
    cut = zip(words.starts[special].tolist(), words.ends[special].tolist(), strict=True)
    tokens = [_CHUNKS[block[s:e]] for s, e in cut]
    if all(len(t) == 1 for t in tokens):
        words.hashes[special] = [t[0] for t in tokens]
        return words
    counts = np.ones(len(words.hashes), dtype=np.int64)
    counts[special] = [len(t) for t in tokens]
    hashes = np.repeat(words.hashes, counts)
    offsets = np.cumsum(counts) - counts
    for at, values in zip(offsets[special].tolist(), tokens, strict=True):
        hashes[at : at + len(values)] = values
    return _Words(hashes, np.repeat(words.starts, counts), np.repeat(words.ends, counts))


def _monster_words(text: str, lo: int, hi: int) -> _Words:
    """A chunk longer than a block, normalised in Python (its tokens share its span)."""
    hashes = np.array([token_hash(t) for t in normalise_words(text[lo:hi])], dtype=U64)
    return _Words(hashes, np.full(len(hashes), lo), np.full(len(hashes), hi))


def document_words(text: str) -> _Words:
    """Word hashes of a text (equal to `token_hash` of each of `normalise_words(text)`) and
    their character spans."""
    folded = np.take(_code_table(), _code_points(text), mode="clip")
    if len(folded) <= _BLOCK:
        return _block_words(text, folded, 0, len(folded))
    pieces = [
        _monster_words(text, lo, hi) if monster else _block_words(text, folded, lo, hi)
        for lo, hi, monster in _block_bounds(folded)
    ]
    return _Words(
        np.concatenate([p.hashes for p in pieces]),
        np.concatenate([p.starts for p in pieces]),
        np.concatenate([p.ends for p in pieces]),
    )


def word_hashes(text: str) -> np.ndarray:
    return document_words(text).hashes


class _CodeHashes(dict[str, int]):
    """`token_hash` of code tokens, cached and bounded like `_ChunkCache`."""

    limit = 200_000

    def __missing__(self, token: str) -> int:
        if len(self) >= self.limit:
            self.clear()
        value = self[token] = token_hash(token)
        return value


_CODE_HASHES = _CodeHashes()


def code_words(text: str) -> _Words:
    """A code document's tokens as `curation.code.decontamination_tokens` makes them (renamed
    identifiers and reformatted layout give the same hashes), with their character spans."""
    tokens, starts, ends = decontamination_tokens(text)
    hashes = np.fromiter((_CODE_HASHES[t] for t in tokens), dtype=U64, count=len(tokens))
    return _Words(hashes, np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64))


# How an index reads text: its normaliser version by name (stored with the index).
TOKENISERS = {"words": (document_words, NORMALISER_VERSION),
              "code": (code_words, CODE_NORMALISER_VERSION)}


# --- keys -----------------------------------------------------------------------------------


def _prefix(hashes: np.ndarray) -> np.ndarray:
    """G[i] = sum_{j<i} hashes[j] * Q**j, over at most _BLOCK + MAX_NGRAM words."""
    prefix = np.empty(len(hashes) + 1, dtype=U64)
    prefix[0] = 0
    np.cumsum(hashes * _WORD_POW[: len(hashes)], out=prefix[1:])
    return prefix


def _keys_at(prefix: np.ndarray, positions: np.ndarray, lengths: np.ndarray | int) -> np.ndarray:
    """Keys of the grams of `lengths` words starting at `positions` (each inside the prefix)."""
    keys = (prefix[positions + lengths] - prefix[positions]) * _WORD_INV[positions]
    keys += _SALTS[lengths]
    return keys


def _all_keys(prefix: np.ndarray, length: int) -> np.ndarray:
    """Keys of every `length`-gram of the prefix's words."""
    count = len(prefix) - length
    if count <= 0:
        return np.empty(0, dtype=U64)
    keys = prefix[length:] - prefix[:count]
    keys *= _WORD_INV[:count]
    keys += _SALTS[length]
    return keys


def item_keys(text: str, ngram: int, tokens: str = "words") -> tuple[np.ndarray, int]:
    """An item's distinct keys and their length in words: its n-grams, or itself whole when it
    is shorter (0 keys for a text without words); `tokens` names the `TOKENISERS` entry."""
    hashes = TOKENISERS[tokens][0](text).hashes
    length = min(ngram, len(hashes))
    if length == 0:
        return np.empty(0, dtype=U64), 0
    windows = range(0, len(hashes) - length + 1, _BLOCK)
    keys = [_all_keys(_prefix(hashes[lo : lo + _BLOCK + length - 1]), length) for lo in windows]
    return np.unique(np.concatenate(keys)), length


# --- the index ----------------------------------------------------------------------------------


class _Bitmap:
    """A set of 64-bit keys as bits addressed by their top bits: a fast prefilter with no false
    negatives (false positives go on to the exact check)."""

    def __init__(self, keys: np.ndarray, bits_per_key: int = 64):
        wanted = max(len(keys) * bits_per_key, 1 << 12)
        self.log2 = min((wanted - 1).bit_length(), 34)
        self.shift = U64(64 - self.log2)
        self.bits = np.zeros((1 << self.log2) // 8, dtype=np.uint8)
        for lo in range(0, len(keys), 1 << 16):  # in slices: the temporaries stay small
            index = keys[lo : lo + (1 << 16)] >> self.shift
            bit = np.left_shift(1, (index & U64(7)).astype(np.uint8), dtype=np.uint8)
            np.bitwise_or.at(self.bits, index >> U64(3), bit)

    def positions(self, keys: np.ndarray) -> np.ndarray:
        """Indices of the `keys` that may be in the set."""
        index = keys >> self.shift
        byte = self.bits[index >> U64(3)]
        return np.flatnonzero((byte >> (index & U64(7)).astype(np.uint8)) & 1)


@dataclass(frozen=True)
class Hit:
    """A document holding an eval item: `ngrams` distinct keys of the item (its n-grams, or 1
    for a short item matched whole) out of its `item_ngrams` are in the document, the first at
    text[start:end]. A share well below 1 often means text that many items share (MMLU's
    moral-scenarios question stem is in 900 items), not the item itself."""

    doc: int
    benchmark: str
    item_id: str
    ngrams: int
    item_ngrams: int
    start: int
    end: int
    text: str


# (word position, length in words, index into EvalIndex.unique_keys)
_Match = tuple[int, int, int]


class EvalIndex:
    """Every eval item's keys: `keys` sorted, with `key_items` (row of `items`) and
    `key_lengths` beside them. The probe structures are derived, rebuilt on load. `tokens`
    names how items and documents are read (`TOKENISERS`): words, or code tokens."""

    def __init__(
        self,
        ngram: int,
        items: Sequence[EvalItem],
        keys: np.ndarray,
        key_items: np.ndarray,
        key_lengths: np.ndarray,
        tokens: str = "words",
    ):
        order = np.lexsort((key_items, keys))
        self.ngram = ngram
        self.tokens = tokens
        self._words, self.normaliser = TOKENISERS[tokens]
        self.items = list(items)
        self.keys = np.ascontiguousarray(keys[order], dtype=U64)
        self.key_items = np.ascontiguousarray(key_items[order], dtype=np.int32)
        self.key_lengths = np.ascontiguousarray(key_lengths[order], dtype=np.uint16)
        # The keys are sorted: runs of equal keys without np.unique's re-sort and its copies.
        starts = np.ones(len(self.keys), dtype=bool)
        np.not_equal(self.keys[1:], self.keys[:-1], out=starts[1:])
        first = np.flatnonzero(starts).astype(np.int32)
        self.unique_keys = self.keys[first]
        self.first_row = first
        self.row_count = np.diff(first, append=np.int32(len(self.keys))).astype(np.int32)
        self.short_lengths = sorted({int(x) for x in np.unique(self.key_lengths)} - {ngram})
        self.item_key_counts = np.bincount(self.key_items, minlength=len(self.items))
        self._longest = max([ngram, *self.short_lengths])
        self._bitmap = _Bitmap(self.unique_keys)
        self._short_starts = self._short_start_bitmap()

    @classmethod
    def build(cls, items: Sequence[EvalItem], ngram: int = 13, tokens: str = "words"
              ) -> EvalIndex:
        per_item = [item_keys(item.text, ngram, tokens) for item in items]
        counts = np.array([len(keys) for keys, _ in per_item], dtype=np.int64)
        lengths = np.array([length for _, length in per_item], dtype=np.uint16)
        keys = np.concatenate([np.empty(0, U64)] + [keys for keys, _ in per_item])
        del per_item  # the per-item arrays, before the sort's copies
        owners = np.repeat(np.arange(len(items), dtype=np.int32), counts)
        return cls(ngram, items, keys, owners, np.repeat(lengths, counts), tokens)

    def _short_start_bitmap(self) -> _Bitmap | None:
        """Keys of the first `min(short_lengths)` words of every short item."""
        if not self.short_lengths:
            return None
        first = self.short_lengths[0]
        owners = np.unique(self.key_items[self.key_lengths < self.ngram])
        starts = [
            _all_keys(_prefix(self._words(self.items[i].text).hashes[:first]), first)
            for i in owners
        ]
        return _Bitmap(np.concatenate(starts), bits_per_key=256)

    def nbytes(self) -> int:
        """Bytes of the index's arrays (keys, owners, lengths, unique keys, bitmaps)."""
        arrays = [
            self.keys,
            self.key_items,
            self.key_lengths,
            self.unique_keys,
            self.first_row,
            self.row_count,
            self._bitmap.bits,
        ]
        if self._short_starts is not None:
            arrays.append(self._short_starts.bits)
        return sum(a.nbytes for a in arrays)

    # -- storing

    def to_tables(self) -> dict[str, pa.Table]:
        """Two Arrow tables. `ngrams`: ngram_hash (uint64), length (words), item (row of
        `items`), and benchmark and item_id (for queries); `items`:
        benchmark, item_id, text. Schema metadata: n-gram size and normaliser version."""
        meta = {_META_NGRAM: str(self.ngram).encode(), _META_VERSION: self.normaliser.encode()}
        benchmarks = pa.array([i.benchmark for i in self.items], pa.string())
        item_ids = pa.array([i.item_id for i in self.items], pa.string())
        owners = pa.array(self.key_items, pa.int32())
        ngrams = pa.table(
            {
                "ngram_hash": pa.array(self.keys, pa.uint64()),
                "length": pa.array(self.key_lengths, pa.uint16()),
                "item": owners,
                # Plain strings, which Parquet dictionary-encodes itself: pyarrow wrote an
                # Arrow dictionary column differently the first time a table was written.
                "benchmark": benchmarks.take(owners),
                "item_id": item_ids.take(owners),
            }
        )
        texts = pa.array([i.text for i in self.items], pa.large_string())
        items = pa.table({"benchmark": benchmarks, "item_id": item_ids, "text": texts})
        return {
            "ngrams": ngrams.replace_schema_metadata(meta),
            "items": items.replace_schema_metadata(meta),
        }

    @classmethod
    def from_tables(cls, ngrams: pa.Table, items: pa.Table) -> EvalIndex:
        meta = ngrams.schema.metadata or {}
        version = meta.get(_META_VERSION, b"").decode()
        tokens = [name for name, (_, known) in TOKENISERS.items() if known == version]
        if not tokens:
            known = ", ".join(repr(v) for _, v in TOKENISERS.values())
            raise ValueError(f"index made by normaliser {version!r}, not one of {known}")
        columns = items.select(["benchmark", "item_id", "text"]).to_pydict()
        rows = zip(columns["benchmark"], columns["item_id"], columns["text"], strict=True)
        return cls(
            int(meta[_META_NGRAM]),
            [EvalItem(*row) for row in rows],
            ngrams["ngram_hash"].to_numpy(),
            ngrams["item"].to_numpy(),
            ngrams["length"].to_numpy(),
            tokens[0],
        )

    def write(self, folder: Path) -> None:
        """`ngrams.parquet` and `items.parquet` (zstd) in `folder`."""
        folder.mkdir(parents=True, exist_ok=True)
        for name, table in self.to_tables().items():
            pq.write_table(table, folder / f"{name}.parquet", compression="zstd")

    @classmethod
    def read(cls, folder: Path) -> EvalIndex:
        return cls.from_tables(
            pq.read_table(folder / "ngrams.parquet"), pq.read_table(folder / "items.parquet")
        )

    # -- scanning

    def matches(self, hashes: np.ndarray) -> list[_Match]:
        """Every key of the index found in a document's word hashes."""
        found: list[_Match] = []
        for lo in range(0, max(len(hashes), 1), _BLOCK):  # windows overlap by the longest key
            prefix = _prefix(hashes[lo : lo + _BLOCK + self._longest - 1])
            window = self._ngram_matches(prefix) + self._short_matches(prefix)
            found += [(p + lo, length, at) for p, length, at in window] if lo else window
        return found

    def _ngram_matches(self, prefix: np.ndarray) -> list[_Match]:
        keys = _all_keys(prefix, self.ngram)[:_BLOCK]
        maybe = self._bitmap.positions(keys)
        return self._verified(maybe, self.ngram, keys[maybe]) if len(maybe) else []

    def _short_matches(self, prefix: np.ndarray) -> list[_Match]:
        """Whole short items: positions whose first words start one, checked at every short
        length at once."""
        if self._short_starts is None:
            return []
        words = len(prefix) - 1
        maybe = self._short_starts.positions(_all_keys(prefix, self.short_lengths[0])[:_BLOCK])
        if not len(maybe):
            return []
        positions = np.repeat(maybe, len(self.short_lengths))
        lengths = np.tile(np.array(self.short_lengths, dtype=np.int64), len(maybe))
        fits = positions + lengths <= words
        positions, lengths = positions[fits], lengths[fits]
        keys = _keys_at(prefix, positions, lengths)
        maybe = self._bitmap.positions(keys)
        return self._verified(positions[maybe], lengths[maybe], keys[maybe])

    def _verified(
        self, positions: np.ndarray, lengths: np.ndarray | int, keys: np.ndarray
    ) -> list[_Match]:
        """The candidates whose keys are in the index."""
        at = np.searchsorted(self.unique_keys, keys)
        at[at == len(self.unique_keys)] = 0
        ok = self.unique_keys[at] == keys
        if not ok.any():
            return []
        sizes = np.broadcast_to(lengths, positions.shape)[ok].tolist()
        return list(zip(positions[ok].tolist(), sizes, at[ok].tolist(), strict=True))

    def items_of(self, unique_at: int) -> np.ndarray:
        """Rows of `items` holding the key `unique_keys[unique_at]`."""
        row = int(self.first_row[unique_at])
        return self.key_items[row : row + int(self.row_count[unique_at])]

    def document_hits(self, doc: int, text: str, min_hits: int = 1) -> list[Hit]:
        """The hits of one document: none unless it shares `min_hits` distinct keys."""
        words = self._words(text)
        found = self.matches(words.hashes)
        if not found or len({at for _, _, at in found}) < min_hits:
            return []
        keys_of: dict[int, set[int]] = defaultdict(set)
        first: dict[int, tuple[int, int]] = {}
        for position, length, at in sorted(found):
            for item in self.items_of(at).tolist():
                keys_of[item].add(at)
                first.setdefault(item, (position, length))
        hits = []
        for item, keys in keys_of.items():
            start, end = _span(text, words, *first[item], trim=self.tokens == "words")
            of = self.items[item]
            total = int(self.item_key_counts[item])
            hits.append(
                Hit(doc, of.benchmark, of.item_id, len(keys), total, start, end, text[start:end])
            )
        return sorted(hits, key=lambda h: (h.start, h.benchmark, h.item_id))


def _span(text: str, words: _Words, position: int, length: int, trim: bool = True
          ) -> tuple[int, int]:
    """Characters of the matched words' chunks, without the punctuation at either end when
    `trim` (code tokens are their own spans: a `:` is code, and what follows it a comment)."""
    start, end = int(words.starts[position]), int(words.ends[position + length - 1])
    if not trim:
        return start, end
    while start < end and not _FOLD[ord(text[start])].strip():
        start += 1
    while end > start and not _FOLD[ord(text[end - 1])].strip():
        end -= 1
    return start, end


def build_index(items: Sequence[EvalItem], ngram: int = 13) -> EvalIndex:
    return EvalIndex.build(items, ngram)


def scan(index: EvalIndex, texts: Iterable[str], min_hits: int = 1) -> list[Hit]:
    """Hits of every document; `Hit.doc` is the text's position in `texts`."""
    hits: list[Hit] = []
    for doc, text in enumerate(texts):
        hits += index.document_hits(doc, text, min_hits)
    return hits


_HIT_COLUMNS = {
    "benchmark": pa.string(),
    "item_id": pa.string(),
    "ngrams": pa.int32(),
    "item_ngrams": pa.int32(),
    "start": pa.int64(),
    "end": pa.int64(),
    "text": pa.large_string(),
}


def hits_table(hits: Sequence[Hit], doc_ids: Sequence[str] | None = None) -> pa.Table:
    """Hits as an Arrow table; with `doc_ids` (one per scanned text) a `doc_id` column replaces
    the texts' positions."""
    first = (
        {"doc_id": pa.array([doc_ids[h.doc] for h in hits], pa.string())}
        if doc_ids is not None
        else {"doc": pa.array([h.doc for h in hits], pa.int64())}
    )
    rest = {c: pa.array([getattr(h, c) for h in hits], t) for c, t in _HIT_COLUMNS.items()}
    return pa.table({**first, **rest})


def index_metadata(index: EvalIndex) -> dict[str, Any]:
    """Per benchmark: items, items shorter than n (matched whole), items without words, keys;
    and the index's totals and array bytes."""
    per: dict[str, dict[str, int]] = {}
    for item in index.items:
        per.setdefault(
            item.benchmark, {"items": 0, "short_items": 0, "empty_items": 0, "ngrams": 0}
        )["items"] += 1
    benchmark_of = np.array([item.benchmark for item in index.items], dtype=object)
    for name, count in Counter(benchmark_of[index.key_items].tolist()).items():
        per[name]["ngrams"] = count
    short = np.unique(index.key_items[index.key_lengths < index.ngram])
    for name, count in Counter(benchmark_of[short].tolist()).items():
        per[name]["short_items"] = count
    keyless = np.setdiff1d(np.arange(len(index.items)), index.key_items)
    for name, count in Counter(benchmark_of[keyless].tolist()).items():
        per[name]["empty_items"] = count
    return {
        "ngram": index.ngram,
        "items": len(index.items),
        "keys": len(index.keys),
        "distinct_keys": len(index.unique_keys),
        "index_bytes": index.nbytes(),
        "per_benchmark": per,
    }


# --- the independent re-scan ----------------------------------------------------------------

_MARKS = regex.compile(r"\p{M}+")
_WORD = regex.compile(r"[\p{L}\p{N}]+")


def _independent_words(text: str) -> list[str]:
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text).casefold())
    return _WORD.findall(_MARKS.sub("", text))


@dataclass(frozen=True)
class Residual:
    """An eval item found again: `ngrams` distinct n-grams of it (1 for a short item matched
    whole) are in document `doc`."""

    doc: int
    benchmark: str
    item_id: str
    ngrams: int


class ResidualMatcher:
    """Eval items still present in text, by a second implementation written apart from the
    scanner, for the mix's gate ("re-scan with a matcher independent of the one that
    annotated"). The gate must not share the annotator's failure modes: a bug in the folding
    table, the hashing, the bitmap, the block cutting or the index's Parquet round trip would
    hide contamination from both if the gate reused them. Here words come from the `regex`
    module (`[\\p{L}\\p{N}]+` after NFKC, case folding, NFKD and dropping marks), and n-grams are
    Python tuples in dicts, with no hashing of ours; it is built from the items, not from the
    index. It follows the same rules (n-grams; items shorter than n matched whole), so the two
    agree on English text; they may differ on scripts where `\\p{M}` and `str.isalnum` disagree.
    About 2 ms per 1,500-word document, 3 s to build for the full eval set."""

    def __init__(self, items: Sequence[EvalItem], ngram: int = 13):
        self.items, self.ngram = list(items), ngram
        self.grams: dict[tuple[str, ...], list[int]] = defaultdict(list)
        # Short items by first word, then length: a position looks only at lengths that exist.
        self.shorts: dict[str, dict[int, dict[tuple[str, ...], list[int]]]] = defaultdict(
            lambda: defaultdict(lambda: defaultdict(list))
        )
        for i, item in enumerate(self.items):
            words = _independent_words(item.text)
            if len(words) >= ngram:
                for j in range(len(words) - ngram + 1):
                    self.grams[tuple(words[j : j + ngram])].append(i)
            elif words:
                self.shorts[words[0]][len(words)][tuple(words)].append(i)

    def grams_in(self, text: str) -> dict[int, set[tuple[str, ...]]]:
        """Item row -> its n-grams (or whole self) found in `text`."""
        words = _independent_words(text)
        found: dict[int, set[tuple[str, ...]]] = defaultdict(set)
        for j in range(len(words) - self.ngram + 1):
            gram = tuple(words[j : j + self.ngram])
            for i in self.grams.get(gram, ()):
                found[i].add(gram)
        for j, word in enumerate(words):
            for length, wholes in self.shorts.get(word, {}).items():
                whole = tuple(words[j : j + length])
                for i in wholes.get(whole, ()):
                    found[i].add(whole)
        return found

    def scan(self, texts: Iterable[str]) -> list[Residual]:
        residuals = []
        for doc, text in enumerate(texts):
            for i, grams in sorted(self.grams_in(text).items()):
                item = self.items[i]
                residuals.append(Residual(doc, item.benchmark, item.item_id, len(grams)))
        return residuals


def residual_contamination(
    texts: Iterable[str], items: Sequence[EvalItem], ngram: int = 13
) -> list[Residual]:
    """`ResidualMatcher(items, ngram).scan(texts)`: see `ResidualMatcher` for why it exists."""
    return ResidualMatcher(items, ngram).scan(texts)
