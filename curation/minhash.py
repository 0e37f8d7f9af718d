"""MinHash signatures and LSH band hashes over the shared word split (no Dagster here).

FineWeb's near-duplicate set-up (datatrove `MinhashConfig`): word 5-gram shingles, 14 bands of 8
rows (112 permutations), 64-bit values. A pair of documents with Jaccard similarity `s` shares at
least one band hash with probability `1 - (1 - s**8)**14` (0.5 near s = 0.72, 0.92 at s = 0.8).

Per document, from the `SplitText` the heuristic filters already made (datatrove re-splits the
text with spaCy for MinHash; this is most of its MinHash time):

1. **Words.** The split's words, normalised (see `MinHashSettings`) and hashed to 64 bits once
   per distinct word in the process (`SplitText.per_token`: a numpy gather per document).
2. **Shingles.** Each window of `ngram` consecutive word hashes -> one 64-bit hash: a weighted
   sum of the window with fixed odd weights (order matters), then the splitmix64 finaliser, all
   vectorised over the windows. A document with fewer words than `ngram` (but at least one) is
   one shingle of all its words, so short texts still get a signature (datatrove gives them
   none) and two identical short texts are candidates.
3. **Signatures.** `bands * rows` permutations applied to every shingle hash at once (a
   permutations x shingles matrix, in blocks so memory stays bounded), minimum over shingles.
4. **Band hashes.** Each band's `rows` minima -> one 64-bit hash (xxHash64-style rounds), the
   keys an LSH bucket grouping compares.
5. **Compact signature.** The low 16 bits of every row (`compact_signatures`), stored beside
   the band hashes: near-duplicate verification compares a candidate pair's rows, and re-bands
   them into another shape, without recomputing anything from text.

Permutations (`MinHashSettings.permutation`):

- `affine64` (default): `h_k(x) = a_k * x + b_k mod 2**64` with `a_k` odd. Every `h_k` is a
  bijection of the 64-bit values (a true permutation), and the wrap-around of uint64 arithmetic
  *is* the modulus, so it costs one multiply and one add per matrix cell. The minimum is decided
  by the top bits, and the top bits of `a * x mod 2**64` are Dietzfelbinger's multiply-shift
  family (2-approximately universal); the inputs are already well-mixed shingle hashes, so the
  per-row collision probability is the Jaccard similarity (measured in `benchmarks/minhash.py`).
- `mersenne61`: the textbook universal family `(a_k * x + b_k) mod p`, `p = 2**61 - 1`, over
  shingle hashes reduced mod p. A 122-bit product does not fit uint64, so the multiplication is
  split into 32-bit limbs and folded with `2**61 = 1 (mod p)`; exact (tested against Python
  integers) but about half the speed. datatrove computes `(x * a + b) % p` in uint64,
  which silently wraps before the modulus, so its maps are not permutations.

Parameters come from blake2b of the seed, never from a numpy random stream, so the same seed
gives the same signatures on every machine and numpy version. Band hashes are pure uint64
arithmetic, stable across processes.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Callable, Sequence
from functools import cache
from typing import Literal

import numpy as np
import pyarrow as pa
import regex
from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from curation.code import shingle_tokens
from curation.hashing import mix64
from curation.text import IS_PUNCT, NON_SYMBOL, SplitText

U64 = np.uint64
EMPTY_SIGNATURE = U64(np.iinfo(np.uint64).max)  # every row of a document without words
MERSENNE_61 = U64((1 << 61) - 1)
MAX_PERMUTATIONS = 4096
MAX_NGRAM = 64
# Shingles per matrix block: bounds memory (about 1 MB at 112 permutations); larger blocks
# measured no faster.
_BLOCK_ROWS = 1024


class MinHashSettings(BaseModel):
    """The MinHash shape (FineWeb's by default) and the word normalisation before shingling.

    Normalisation, applied per word of the shared spaCy-compatible split (so the choices cost a
    cached look-up, not a pass over the text); the defaults follow datatrove's `simplify_text`
    where a word-level rule can:

    - `lowercase`: `str.lower()`, so case changes do not break shingles.
    - `drop_punctuation`: words made only of punctuation or symbols (datatrove's punctuation
      characters, or all Unicode `P*`) are left out, so "a , b" and "a b" give the same
      shingles. Punctuation inside a word ("e.g.", "n't", "U.S.") stays: spaCy already split
      off the affixes (datatrove instead blanks every punctuation character before splitting).
    - `normalise_numbers`: every run of digits, with an optional decimal part, becomes "0"
      (datatrove's rule), so templated pages that differ in dates or prices still match.
    - `strip_diacritics`: NFD, then combining marks dropped ("café" = "cafe"), as datatrove.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    ngram: int = 5
    bands: int = 14
    rows: int = 8
    seed: int = 1
    hash_bits: Literal[64] = 64
    permutation: Literal["affine64", "mersenne61"] = "affine64"
    lowercase: bool = True
    drop_punctuation: bool = True
    normalise_numbers: bool = True
    strip_diacritics: bool = True

    @field_validator("ngram")
    @classmethod
    def _check_ngram(cls, value: int) -> int:
        if not 1 <= value <= MAX_NGRAM:
            raise ValueError(f"ngram is the shingle size in words: 1 to {MAX_NGRAM}, got {value}")
        return value

    @field_validator("bands", "rows")
    @classmethod
    def _check_positive(cls, value: int) -> int:
        if value < 1:
            raise ValueError(f"must be at least 1, got {value}")
        return value

    @field_validator("seed")
    @classmethod
    def _check_seed(cls, value: int) -> int:
        if not 0 <= value < 2**63:
            raise ValueError(f"seed must be in [0, 2**63), got {value}")
        return value

    @model_validator(mode="after")
    def _check_permutations(self) -> MinHashSettings:
        if self.permutations > MAX_PERMUTATIONS:
            raise ValueError(
                f"bands * rows = {self.bands} * {self.rows} = {self.permutations} permutations; "
                f"at most {MAX_PERMUTATIONS}"
            )
        return self

    @property
    def permutations(self) -> int:
        return self.bands * self.rows


# --- words -----------------------------------------------------------------------------------

# datatrove's NUMBERS_PATTERN (datatrove.utils.text): digits in any script, optional decimals.
_NUMBER = regex.compile(r"\p{Nd}+(?:[.,،٫⎖⎗⎘]\p{Nd}+)?")
_COMBINING_MARK = regex.compile(r"\p{Mn}+")


def _word_hash(word: str) -> int:
    digest = hashlib.blake2b(word.encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(digest.digest(), "little")


def normalise_word(word: str, settings: MinHashSettings) -> str:
    """One word as the shingles see it (the punctuation rule is applied per token, elsewhere)."""
    return _normaliser(settings.lowercase, settings.normalise_numbers, settings.strip_diacritics)(
        word
    )


@cache
def _normaliser(lowercase: bool, numbers: bool, diacritics: bool) -> Callable[[str], str]:
    def normalise(word: str) -> str:
        if lowercase:
            word = word.lower()
        if numbers and not word.isalpha():  # letters alone hold no digit: skip the regex
            word = _NUMBER.sub("0", word)
        if diacritics and not word.isascii():
            word = _COMBINING_MARK.sub("", unicodedata.normalize("NFD", word))
        return word

    return normalise


def word_hashes(split: SplitText, settings: MinHashSettings) -> np.ndarray:
    """64-bit hashes of the document's normalised words, in order (uint64)."""
    options = (settings.lowercase, settings.normalise_numbers, settings.strip_diacritics)
    normalise = _normaliser(*options)
    # Every word is hashed, punctuation too, and dropped afterwards with the split's flags:
    # a numpy mask is cheaper than building a filtered word list.
    hashes = split.per_token(("minhash", *options), lambda word: _word_hash(normalise(word)))
    if settings.drop_punctuation:
        flags = split.word_flags
        hashes = hashes[((flags & U64(NON_SYMBOL)) != 0) & ((flags & U64(IS_PUNCT)) == 0)]
    return hashes


# --- shingles --------------------------------------------------------------------------------


def _constants(label: str, count: int) -> np.ndarray:
    """`count` fixed 64-bit constants derived from `label` (the same everywhere)."""
    raw = b"".join(
        hashlib.blake2b(f"{label}:{i}".encode(), digest_size=8).digest() for i in range(count)
    )
    return np.frombuffer(raw, dtype="<u8").astype(np.uint64)


_WINDOW_WEIGHTS = _constants("minhash-window-weight", MAX_NGRAM) | U64(1)  # odd: invertible


def shingles_from_words(words: np.ndarray, ngram: int) -> np.ndarray:
    """Hashes of the word `ngram`-grams (one shingle of all words when there are fewer)."""
    width = min(ngram, len(words))
    if width == 0:
        return np.empty(0, dtype=np.uint64)
    count = len(words) - width + 1
    acc = words[:count] * _WINDOW_WEIGHTS[0]
    for j in range(1, width):
        acc += words[j : j + count] * _WINDOW_WEIGHTS[j]
    return mix64(acc)


def shingle_hashes(split: SplitText, settings: MinHashSettings) -> np.ndarray:
    """The document's shingle hashes (uint64, one per window, duplicates kept)."""
    return shingles_from_words(word_hashes(split, settings), settings.ngram)


def code_shingle_hashes(text: str, settings: MinHashSettings) -> np.ndarray:
    """A code file's shingle hashes: `ngram`-grams of StarCoder's near-dedup tokens
    (`curation.code.shingle_tokens`), with case and identifiers as they are."""
    tokens = shingle_tokens(text)
    hashes = np.fromiter(map(_word_hash, tokens), dtype=np.uint64, count=len(tokens))
    return shingles_from_words(hashes, settings.ngram)


# --- permutations and signatures -------------------------------------------------------------


class _Permutations:
    """The seeded permutation parameters and their application to a block of shingles. Values
    are laid out permutations x shingles: each permutation's row is contiguous, so the minimum
    over a document's shingles is a contiguous reduction (about a third faster than the
    transposed layout)."""

    def __init__(self, kind: str, seed: int, count: int) -> None:
        self.kind = kind
        a = _constants(f"minhash-a:{seed}", count)
        b = _constants(f"minhash-b:{seed}", count)
        if kind == "affine64":
            self.a, self.b = a | U64(1), b  # odd multipliers: bijections of the uint64 values
        else:
            self.a, self.b = _mod_p(a), _mod_p(b)
            self.a[self.a == 0] = U64(1)  # a = 0 would map everything to b
        # Column vectors, broadcast against a row of shingles.
        self._a, self._b = self.a[:, None], self.b[:, None]
        self._a_lo = self._a & U64(0xFFFFFFFF)
        self._a_hi = self._a >> U64(32)
        self._a_hi8 = self._a_hi * U64(8)  # 2**64 = 8 (mod p)

    def apply(self, x: np.ndarray) -> np.ndarray:
        """(count, len(x)) permuted values; x must be reduced mod p for mersenne61."""
        if self.kind == "affine64":
            out = np.multiply(self._a, x)  # wraps mod 2**64: that is the modulus
            out += self._b
            return out
        return self._mersenne(x)

    def _mersenne(self, x: np.ndarray) -> np.ndarray:
        """(a * x + b) mod (2**61 - 1) with 32-bit limbs: x = xh 2**32 + xl, a = ah 2**32 + al,
        a x = ah xh 2**64 + (ah xl + al xh) 2**32 + al xl, each term folded with 2**61 = 1."""
        xl = x & U64(0xFFFFFFFF)
        xh = x >> U64(32)  # < 2**29
        low = self._a_lo * xl  # < 2**64, exact
        mid = self._a_lo * xh
        mid += self._a_hi * xl  # < 2**62
        out = self._a_hi8 * xh  # ah xh 2**64 = 8 ah xh < 2**61
        out += mid >> U64(29)  # mid 2**32 = (mid >> 29) 2**61 + (mid mod 2**29) 2**32
        mid &= U64((1 << 29) - 1)
        mid <<= U64(32)
        out += mid
        out += low & MERSENNE_61
        low >>= U64(61)
        out += low
        out += self._b  # each of the four big terms < 2**61: the sum < 2**63 + small
        return _fold_p(out)


def _fold_p(x: np.ndarray) -> np.ndarray:
    """x (< 2**64) reduced to [0, p) in place: x = (x >> 61) 2**61 + (x & p), 2**61 = 1."""
    high = x >> U64(61)
    x &= MERSENNE_61
    x += high
    np.subtract(x, MERSENNE_61, out=x, where=x >= MERSENNE_61)
    return x


def _mod_p(x: np.ndarray) -> np.ndarray:
    return _fold_p(x.copy())


@cache
def _permutations(kind: str, seed: int, count: int) -> _Permutations:
    return _Permutations(kind, seed, count)


def signatures(splits: Sequence[SplitText], settings: MinHashSettings) -> np.ndarray:
    """(len(splits), bands * rows) uint64 MinHash signatures of the documents."""
    return signatures_from_shingles([shingle_hashes(s, settings) for s in splits], settings)


def signatures_from_shingles(
    shingles: Sequence[np.ndarray], settings: MinHashSettings
) -> np.ndarray:
    """Signatures of documents given as shingle-hash arrays. All documents' shingles go through
    the permutations together, in blocks of rows, and `np.minimum.reduceat` takes each
    document's minimum: no Python loop per document or per shingle. A document without shingles
    gets `EMPTY_SIGNATURE` in every row."""
    perms = _permutations(settings.permutation, settings.seed, settings.permutations)
    counts = np.fromiter(map(len, shingles), dtype=np.int64, count=len(shingles))
    sigs = np.full((len(shingles), settings.permutations), EMPTY_SIGNATURE, dtype=np.uint64)
    if not counts.any():
        return sigs
    flat = np.concatenate([np.asarray(s, dtype=np.uint64) for s in shingles])
    if settings.permutation == "mersenne61":
        flat = _mod_p(flat)
    ends = np.cumsum(counts)
    starts = ends - counts
    for r0 in range(0, len(flat), _BLOCK_ROWS):
        r1 = min(r0 + _BLOCK_ROWS, len(flat))
        # Documents with at least one shingle in [r0, r1): their segments start within the block.
        docs = np.arange(np.searchsorted(ends, r0, "right"), np.searchsorted(starts, r1, "left"))
        docs = docs[counts[docs] > 0]
        segments = np.maximum(starts[docs], r0) - r0
        mins = np.minimum.reduceat(perms.apply(flat[r0:r1]), segments, axis=1)
        sigs[docs] = np.minimum(sigs[docs], mins.T)
    return sigs


# --- band hashes -----------------------------------------------------------------------------

# xxHash64's primes: its round (multiply, rotate, multiply) spreads every input bit.
_P1 = U64(0x9E3779B185EBCA87)
_P2 = U64(0xC2B2AE3D27D4EB4F)
_P3 = U64(0x165667B19E3779F9)
_P4 = U64(0x85EBCA77C2B2AE63)


def _rotl(x: np.ndarray, bits: int) -> np.ndarray:
    return (x << U64(bits)) | (x >> U64(64 - bits))


def band_hashes(sigs: np.ndarray, settings: MinHashSettings) -> np.ndarray:
    """(n_docs, bands) uint64: one hash per band of `rows` signature values. xxHash64-style
    (its round per row, its avalanche at the end; not byte-compatible with xxh64), seeded by
    the band index so equal rows in different bands do not give equal keys."""
    sigs = np.asarray(sigs, dtype=np.uint64)
    if sigs.ndim != 2 or sigs.shape[1] != settings.permutations:
        raise ValueError(
            f"signatures must have shape (n_docs, {settings.permutations}) for "
            f"{settings.bands} bands x {settings.rows} rows, got {sigs.shape}"
        )
    rows = sigs.reshape(len(sigs), settings.bands, settings.rows)
    band_seeds = _constants(f"minhash-band:{settings.seed}", settings.bands)
    acc = np.broadcast_to(band_seeds + _P3, (len(sigs), settings.bands)).copy()
    for r in range(settings.rows):
        lane = _rotl(rows[:, :, r] * _P2, 31) * _P1
        acc = _rotl(acc ^ lane, 27) * _P1 + _P4
    acc ^= acc >> U64(33)  # xxh64's avalanche
    acc *= _P2
    acc ^= acc >> U64(29)
    acc *= _P3
    acc ^= acc >> U64(32)
    return acc


# --- exact similarity and the LSH curve ------------------------------------------------------


def jaccard(a_shingles: np.ndarray, b_shingles: np.ndarray) -> float:
    """Exact Jaccard similarity of two shingle-hash collections taken as sets (two empty
    documents count as identical: 1.0, matching their equal `EMPTY_SIGNATURE`s)."""
    a = np.unique(np.asarray(a_shingles, dtype=np.uint64))
    b = np.unique(np.asarray(b_shingles, dtype=np.uint64))
    union = len(np.union1d(a, b))
    if union == 0:
        return 1.0
    return len(np.intersect1d(a, b, assume_unique=True)) / union


def candidate_probability(s: float | np.ndarray, bands: int, rows: int) -> float | np.ndarray:
    """Probability that a pair with Jaccard similarity `s` shares at least one band hash."""
    return 1.0 - (1.0 - np.asarray(s, dtype=np.float64) ** rows) ** bands


# --- Arrow -----------------------------------------------------------------------------------


def band_column(band: int) -> str:
    return f"band_{band:02d}"


SIGNATURE_COLUMN = "signature"
ROW_BITS = 16
"""Bits of each signature row kept in the stored `signature` (b-bit MinHash, Li and Koenig
2010): two different minima agree by chance with probability 2**-16, so the agreement of the
stored rows is the Jaccard estimate within 1.5e-5, at a quarter of the 64-bit size (224 bytes a
document at 112 permutations)."""


def compact_signatures(sigs: np.ndarray) -> np.ndarray:
    """(n_docs, permutations) uint16: the low `ROW_BITS` bits of each signature row. The low
    bits, not the high ones: a minimum is small, so its high bits are mostly zero."""
    return (np.asarray(sigs, dtype=np.uint64) & U64((1 << ROW_BITS) - 1)).astype("<u2")


def signature_rows(column: pa.Array | pa.ChunkedArray, permutations: int) -> np.ndarray:
    """The stored `signature` column back as (n_docs, permutations) uint16."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    width = permutations * ROW_BITS // 8
    if column.type != pa.binary(width):
        raise ValueError(f"signature column must be fixed_size_binary({width}) for "
                         f"{permutations} permutations, got {column.type}")
    data = np.frombuffer(column.buffers()[1], dtype="<u2", count=(column.offset + len(column))
                         * permutations)
    return data[column.offset * permutations:].reshape(len(column), permutations)


def row_agreement(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per pair of rows of `a` and `b` ((n, permutations) each): the share of signature rows
    that agree, the MinHash estimate of their Jaccard similarity."""
    return np.count_nonzero(a == b, axis=1) / a.shape[1]


def signatures_schema(bands: int, permutations: int = 0) -> pa.Schema:
    """`doc_id`, one uint64 column per band and, when `permutations`, the compact signature
    (`signature`: fixed_size_binary of `permutations` little-endian uint16 rows, see
    `compact_signatures`) that near-duplicate verification and re-banding read. Separate band
    columns rather than one fixed-size list: a bucket grouping handles one band at a time (pairs
    only count within a band), and Parquet then reads just `doc_id` and that band's column,
    with its own statistics, so each pass is `SELECT band_NN, doc_id ... GROUP BY band_NN` over
    two columns and its memory is bounded by one band, without unnesting lists."""
    fields = [pa.field("doc_id", pa.string(), nullable=False)]
    fields += [pa.field(band_column(b), pa.uint64(), nullable=False) for b in range(bands)]
    if permutations:
        fields.append(pa.field(SIGNATURE_COLUMN, pa.binary(permutations * ROW_BITS // 8),
                               nullable=False))
    return pa.schema(fields)


def signatures_table(doc_ids: Sequence[str], band_hashes: np.ndarray,
                     signatures: np.ndarray | None = None) -> pa.Table:
    """The documents' band hashes (and their compact signatures, when `signatures` is given)
    as an Arrow table (see `signatures_schema`)."""
    hashes = np.asarray(band_hashes, dtype=np.uint64)
    if hashes.ndim != 2 or len(hashes) != len(doc_ids):
        raise ValueError(
            f"band_hashes must have shape (len(doc_ids), bands) = ({len(doc_ids)}, bands), "
            f"got {hashes.shape}"
        )
    permutations = 0 if signatures is None else np.shape(signatures)[1]
    schema = signatures_schema(hashes.shape[1], permutations)
    columns = [pa.array(doc_ids, type=pa.string())]
    columns += [pa.array(hashes[:, b]) for b in range(hashes.shape[1])]
    if signatures is not None:
        rows = np.ascontiguousarray(compact_signatures(signatures))
        if len(rows) != len(doc_ids):
            raise ValueError(f"signatures has {len(rows)} rows for {len(doc_ids)} doc_ids")
        columns.append(pa.FixedSizeBinaryArray.from_buffers(
            schema.field(SIGNATURE_COLUMN).type, len(rows), [None, pa.py_buffer(rows.tobytes())]))
    return pa.Table.from_arrays(columns, schema=schema)
