"""Shards: tokenize -> shuffle order -> pack -> `.bin`/`.idx` + manifest + spans (no Dagster).

The output contract the training cluster streams (docs/architecture.md, "Data contracts: Shards"):

- **Order.** Within each phase, document occurrences are ordered by a keyed hash of
  (`doc_id`, `occurrence`) with the seed as key (blake2b, `shuffle_key`); phases follow each
  other in the given order. `order_occurrences` sorts; `build_shards` checks the order and fails
  on anything else. Removing a document cuts its tokens out of the stream and leaves every other
  occurrence's tokens and relative order intact.
- **Tokens.** Each occurrence is its text's tokens (`tokenizers`' `encode_batch`, in batches)
  followed by the EOS id. Packing into `seq_len` sequences is either `concat` (default: the
  token stream is cut every `seq_len` tokens; only the very last sequence is padded) or
  `best_fit` (an occurrence is split only when longer than `seq_len`; each piece goes to the open
  sequence with the least room that holds it, within a window of open sequences; the rest of a
  closed sequence is padding). Padding is always at the end of a sequence.
- **Files**, per shard of `tokens_per_shard // seq_len` whole sequences:
  `shard-NNNNN.bin` (token ids, little-endian `uint16` or `int32`), `shard-NNNNN.idx` (the
  Megatron-Core indexed-dataset index: one Megatron "document" per sequence, all of length
  `seq_len`) and `shard-NNNNN.padding.npy` (int32 per sequence: how many padding tokens end it).
  Then `spans.parquet` (one row per contiguous piece of an occurrence: `shard`, `sequence`
  within the shard, `start`, `end` within the sequence, `doc_id`, `occurrence`, `phase`) and
  `manifest.json`, written last, so a folder with a manifest is complete.
- **Determinism.** Outputs depend on the occurrences, the tokenizer and the settings that shape
  them, never on batch sizes or thread counts: Parquet row groups have a fixed size, JSON keys are
  sorted, nothing records a time. Two builds are byte-identical.
- **Memory.** Streaming: one tokenization batch, one shard's tokens, the open best-fit sequences
  and one Parquet row group of spans at a time.

`curation.shard_integrity.verify_shards` is the blocking integrity gate over what this writes.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import shutil
import struct
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from curation.config import RecipeConfig
from curation.storage import Store
from curation.tokenizer import PinnedTokenizer, tokenizer_threads

FORMAT = "corpus-shards/1"
MANIFEST = "manifest.json"
SPANS = "spans.parquet"
IDX_HEADER = b"MMIDIDX\x00\x00"  # megatron/core/datasets/indexed_dataset.py `_INDEX_HEADER`
IDX_VERSION = 1
# Megatron-Core `DType` codes.
MEGATRON_DTYPE_CODES = {"uint8": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5,
                        "float64": 6, "float32": 7, "uint16": 8}
SPAN_ROW_GROUP = 1 << 16
NO_VALUE = "(none)"  # the accounting key of an occurrence without source or licence
SHAPING_LIBRARIES = ("tokenizers", "numpy", "pyarrow")
SPAN_SCHEMA = pa.schema([
    ("shard", pa.int32()), ("sequence", pa.int32()), ("start", pa.int32()), ("end", pa.int32()),
    ("doc_id", pa.string()), ("occurrence", pa.int64()), ("phase", pa.string()),
])


# --- occurrences and their order ----------------------------------------------------------------


@dataclass(frozen=True)
class Occurrence:
    """One occurrence of a document in the mix (a document repeated twice has occurrences 0, 1)."""

    doc_id: str
    occurrence: int
    phase: str
    text: str
    source: str | None = None
    licence: str | None = None


def shuffle_key(doc_id: str, occurrence: int, seed: int) -> bytes:
    """16-byte blake2b of (`occurrence`, `doc_id`) keyed with the seed.

    A keyed hash of the occurrence alone, so an occurrence's place relative to every other one
    does not depend on which other documents are present.
    """
    key = str(seed).encode("ascii")
    message = int(occurrence).to_bytes(8, "little", signed=True) + doc_id.encode("utf-8")
    return hashlib.blake2b(message, key=key, digest_size=16).digest()


def _sort_key(
    doc_id: str, occurrence: int, phase: str, phase_index: Mapping[str, int], seed: int
) -> tuple[int, bytes, str, int]:
    if phase not in phase_index:
        raise ValueError(f"occurrence ({doc_id!r}, {occurrence}) has phase {phase!r}, not one "
                         f"of the recipe's phases {list(phase_index)}")
    # doc_id and occurrence break (astronomically unlikely) hash ties deterministically.
    return phase_index[phase], shuffle_key(doc_id, occurrence, seed), doc_id, occurrence


def shuffle_order(
    doc_ids: Sequence[str],
    occurrences: Sequence[int],
    phases: Sequence[str],
    phase_order: Sequence[str],
    seed: int,
) -> np.ndarray:
    """Positions of the given occurrences in shard order, from their key columns alone (so a
    caller can order a mix by its keys and fetch the texts in that order)."""
    index = {name: i for i, name in enumerate(phase_order)}
    keys = [_sort_key(d, int(o), p, index, seed)
            for d, o, p in zip(doc_ids, occurrences, phases, strict=True)]
    return np.array(sorted(range(len(keys)), key=keys.__getitem__), dtype=np.int64)


def order_occurrences(
    occurrences: Iterable[Occurrence], phase_order: Sequence[str], seed: int
) -> list[Occurrence]:
    """The occurrences in shard order (in memory; see `shuffle_order` for key columns)."""
    items = list(occurrences)
    order = shuffle_order([o.doc_id for o in items], [o.occurrence for o in items],
                          [o.phase for o in items], phase_order, seed)
    return [items[i] for i in order]


def occurrences_from_table(table: pa.Table) -> Iterator[Occurrence]:
    """Occurrences from Arrow columns `doc_id`, `occurrence`, `phase`, `text` and optionally
    `source` and `licence`, in row order."""
    for batch in table.to_batches():
        columns = batch.to_pydict()
        size = batch.num_rows
        sources = columns.get("source", [None] * size)
        licences = columns.get("licence", [None] * size)
        for row in range(size):
            yield Occurrence(columns["doc_id"][row], columns["occurrence"][row],
                             columns["phase"][row], columns["text"][row],
                             sources[row], licences[row])


class _OrderCheck:
    """Fails the build when occurrences arrive out of shard order or twice."""

    def __init__(self, phase_order: Sequence[str], seed: int) -> None:
        self.index = {name: i for i, name in enumerate(phase_order)}
        self.seed = seed
        self.last: tuple[int, bytes, str, int] | None = None

    def check(self, batch: Sequence[Occurrence]) -> None:
        for item in batch:
            key = _sort_key(item.doc_id, item.occurrence, item.phase, self.index, self.seed)
            if self.last is not None and key <= self.last:
                problem = "repeated" if key == self.last else "out of shard order"
                raise ValueError(f"occurrence ({item.doc_id!r}, {item.occurrence}) is {problem}; "
                                 "sort the input with order_occurrences / shuffle_order")
            self.last = key


# --- settings and build information ----------------------------------------------------------


@dataclass(frozen=True)
class ShardSettings:
    """What shapes the shards (all recorded in the manifest) and how fast they are made
    (`batch_size`, `batch_chars`, `threads`: never change a byte)."""

    seq_len: int
    tokens_per_shard: int
    seed: int
    phases: tuple[str, ...]
    packing: Literal["concat", "best_fit"] = "concat"
    best_fit_window: int = 256  # open sequences best-fit keeps before closing the oldest
    batch_size: int = 1024  # occurrences per encode_batch call
    # ...or fewer: an encoding holds about 85 bytes a token while the batch is converted.
    batch_chars: int = 2_000_000
    threads: int | None = None  # tokenizers' threads (None: its default)

    def __post_init__(self) -> None:
        if self.seq_len < 1 or self.tokens_per_shard < 1:
            raise ValueError("seq_len and tokens_per_shard must be positive")
        if self.packing not in ("concat", "best_fit"):
            raise ValueError(f"packing {self.packing!r}: use 'concat' or 'best_fit'")
        if not self.phases or len(set(self.phases)) != len(self.phases):
            raise ValueError(f"phases {self.phases!r}: give each phase once")
        if self.best_fit_window < 1 or self.batch_size < 1 or self.batch_chars < 1:
            raise ValueError("best_fit_window, batch_size and batch_chars must be positive")

    @classmethod
    def from_recipe(cls, recipe: RecipeConfig, **overrides: Any) -> ShardSettings:
        values: dict[str, Any] = {
            "seq_len": recipe.seq_len, "tokens_per_shard": recipe.tokens_per_shard,
            "seed": recipe.seed, "phases": tuple(phase.name for phase in recipe.phases),
            "packing": recipe.packing}
        return cls(**(values | overrides))

    @property
    def sequences_per_shard(self) -> int:
        """Whole sequences per shard (at least one, when `seq_len` exceeds the shard size)."""
        return max(1, self.tokens_per_shard // self.seq_len)

    def shaping(self) -> dict[str, Any]:
        shaping = {"seq_len": self.seq_len, "tokens_per_shard": self.tokens_per_shard,
                   "sequences_per_shard": self.sequences_per_shard, "seed": self.seed,
                   "phases": list(self.phases), "packing": self.packing}
        if self.packing == "best_fit":
            shaping["best_fit_window"] = self.best_fit_window
        return shaping


@dataclass(frozen=True)
class BuildInfo:
    """Identity of the dataset version, recorded in the manifest as given."""

    version: str
    recipe_hash: str
    pipeline_hash: str
    input_versions: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ShardBuild:
    """The written manifest, and where the time went (seconds; never in the manifest)."""

    directory: Path
    manifest: dict[str, Any]
    timings: dict[str, float]


class _Timer:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def time(self, name: str, function: Callable[..., Any], *args: Any) -> Any:
        start = time.perf_counter()
        try:
            return function(*args)
        finally:
            self.seconds[name] += time.perf_counter() - start


# --- tokenization ----------------------------------------------------------------------------


def _batches(items: Iterable[Occurrence], settings: ShardSettings) -> Iterator[list[Occurrence]]:
    batch: list[Occurrence] = []
    chars = 0
    for item in items:
        batch.append(item)
        chars += len(item.text)
        if len(batch) >= settings.batch_size or chars >= settings.batch_chars:
            yield batch
            batch, chars = [], 0
    if batch:
        yield batch


def occurrence_lengths(texts: Sequence[str], tokenizer: PinnedTokenizer) -> np.ndarray:
    """The tokens each text takes in the shards, its EOS included: the lengths `tokenize_batch`
    returns, without building the token stream (the mix plans its shares with them)."""
    encodings = tokenizer.tokenizer.encode_batch_fast(list(texts), add_special_tokens=False)
    return np.fromiter(map(len, encodings), dtype=np.int64, count=len(encodings)) + 1


def tokenize_batch(
    texts: Sequence[str], tokenizer: PinnedTokenizer
) -> tuple[np.ndarray, np.ndarray]:
    """Every text's tokens then EOS, as one flat array in the shard dtype, and the lengths.

    Each encoding's ids go straight into the flat array and the encodings are dropped: they
    hold token strings and offsets too, several times the size of the ids."""
    encodings = tokenizer.tokenizer.encode_batch_fast(list(texts), add_special_tokens=False)
    lengths = np.fromiter(map(len, encodings), dtype=np.int64, count=len(encodings)) + 1
    ends = np.cumsum(lengths)
    flat = np.empty(int(ends[-1]) if len(ends) else 0, dtype=tokenizer.dtype)
    for encoding, end, length in zip(encodings, ends.tolist(), lengths.tolist(), strict=True):
        flat[end - length : end - 1] = encoding.ids
    flat[ends - 1] = tokenizer.eos_id
    return flat, lengths


# --- pieces: which tokens of which occurrence sit where --------------------------------------


@dataclass(frozen=True)
class _Docs:
    """The occurrences of one batch, as columns."""

    doc_id: pa.Array
    occurrence: np.ndarray
    phase: pa.Array

    @classmethod
    def of(cls, batch: Sequence[Occurrence]) -> _Docs:
        return cls(pa.array([o.doc_id for o in batch], pa.string()),
                   np.array([o.occurrence for o in batch], dtype=np.int64),
                   pa.array([o.phase for o in batch], pa.string()))


@dataclass(frozen=True)
class _Pieces:
    """Contiguous pieces of occurrences: global sequence, [start, end) within it, owner, and
    whether the piece holds the occurrence's EOS (its last token)."""

    sequence: np.ndarray
    start: np.ndarray
    end: np.ndarray
    last: np.ndarray
    doc_id: pa.Array
    occurrence: np.ndarray
    phase: pa.Array

    @classmethod
    def empty(cls) -> _Pieces:
        nothing = np.zeros(0, dtype=np.int64)
        return cls(nothing, nothing, nothing, np.zeros(0, dtype=bool),
                   pa.array([], pa.string()), nothing, pa.array([], pa.string()))

    @classmethod
    def of(cls, docs: _Docs, owner: np.ndarray, sequence: np.ndarray, start: np.ndarray,
           end: np.ndarray, last: np.ndarray) -> _Pieces:
        take = pa.array(owner)
        return cls(sequence, start, end, last, docs.doc_id.take(take), docs.occurrence[owner],
                   docs.phase.take(take))

    def __len__(self) -> int:
        return len(self.sequence)

    def select(self, rows: slice) -> _Pieces:
        return _Pieces(self.sequence[rows], self.start[rows], self.end[rows], self.last[rows],
                       self.doc_id[rows], self.occurrence[rows], self.phase[rows])

    @staticmethod
    def concat(parts: Sequence[_Pieces]) -> _Pieces:
        if len(parts) == 1:
            return parts[0]
        return _Pieces(*(np.concatenate([getattr(p, name) for p in parts])
                         for name in ("sequence", "start", "end", "last")),
                       pa.concat_arrays([p.doc_id for p in parts]),
                       np.concatenate([p.occurrence for p in parts]),
                       pa.concat_arrays([p.phase for p in parts]))


# --- writing ---------------------------------------------------------------------------------


def _atomic_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")


def _write_file(path: Path, data: bytes | memoryview) -> dict[str, Any]:
    """Writes under a temporary name then renames; returns the manifest entry of the file."""
    temporary = _atomic_path(path)
    with open(temporary, "wb") as handle:
        handle.write(data)
    os.replace(temporary, path)
    return {"name": path.name, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def megatron_index(sequences: int, seq_len: int, dtype: np.dtype) -> bytes:
    """The `.idx` bytes Megatron-Core's `_IndexWriter` writes for `sequences` sequences of
    `seq_len` tokens, each its own document."""
    lengths = np.full(sequences, seq_len, dtype="<i4")
    pointers = np.arange(sequences, dtype="<i8") * (seq_len * dtype.itemsize)
    documents = np.arange(sequences + 1, dtype="<i8")
    header = (IDX_HEADER + struct.pack("<Q", IDX_VERSION)
              + struct.pack("<B", MEGATRON_DTYPE_CODES[dtype.name])
              + struct.pack("<Q", sequences) + struct.pack("<Q", len(documents)))
    return header + lengths.tobytes() + pointers.tobytes() + documents.tobytes()


def _npy_bytes(array: np.ndarray) -> bytes:
    sink = _BytesSink()
    np.lib.format.write_array(sink, array, version=(1, 0), allow_pickle=False)
    return b"".join(sink.parts)


class _BytesSink:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.parts.append(bytes(data))
        return len(data)


class _SpanWriter:
    """Streams spans into `spans.parquet` in row groups of a fixed size (so the bytes do not
    depend on how the rows arrived)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.temporary = _atomic_path(path)
        self.writer = pq.ParquetWriter(self.temporary, SPAN_SCHEMA, compression="zstd")
        self.pending: list[pa.Table] = []
        self.pending_rows = 0
        self.rows = 0

    def add(self, shard: int, first_sequence: int, pieces: _Pieces) -> None:
        table = pa.table({
            "shard": pa.array(np.full(len(pieces), shard, dtype=np.int32)),
            "sequence": pa.array((pieces.sequence - first_sequence).astype(np.int32)),
            "start": pa.array(pieces.start.astype(np.int32)),
            "end": pa.array(pieces.end.astype(np.int32)),
            "doc_id": pieces.doc_id, "occurrence": pa.array(pieces.occurrence),
            "phase": pieces.phase}, schema=SPAN_SCHEMA)
        self.pending.append(table)
        self.pending_rows += len(table)
        self.rows += len(table)
        if self.pending_rows >= SPAN_ROW_GROUP:
            self._flush(final=False)

    def _flush(self, final: bool) -> None:
        table = pa.concat_tables(self.pending) if self.pending else SPAN_SCHEMA.empty_table()
        whole = len(table) if final else len(table) // SPAN_ROW_GROUP * SPAN_ROW_GROUP
        for begin in range(0, whole, SPAN_ROW_GROUP):
            group = table.slice(begin, min(SPAN_ROW_GROUP, whole - begin))
            self.writer.write_table(group.combine_chunks(), row_group_size=SPAN_ROW_GROUP)
        rest = table.slice(whole)
        self.pending, self.pending_rows = ([rest] if len(rest) else []), len(rest)

    def close(self) -> dict[str, Any]:
        self._flush(final=True)
        self.writer.close()
        os.replace(self.temporary, self.path)
        entry = {"name": self.path.name, "rows": self.rows}
        return entry | {"sha256": file_sha256(self.path), "bytes": self.path.stat().st_size}


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


class _ShardWriter:
    """Collects whole sequences into a shard's buffer; writes a shard when it is full."""

    def __init__(self, directory: Path, settings: ShardSettings, dtype: np.dtype) -> None:
        self.directory, self.seq_len, self.dtype = directory, settings.seq_len, dtype
        self.per_shard = settings.sequences_per_shard
        self.tokens = np.empty((self.per_shard, self.seq_len), dtype=dtype)
        self.padding = np.zeros(self.per_shard, dtype="<i4")
        self.filled = 0  # sequences in the current shard
        self.written = 0  # sequences in finished shards
        self.pieces: list[_Pieces] = []
        self.spans = _SpanWriter(directory / SPANS)
        self.shards: list[dict[str, Any]] = []

    @property
    def total_sequences(self) -> int:
        return self.written + self.filled

    def append(self, tokens: np.ndarray, padding: np.ndarray, pieces: _Pieces) -> None:
        """Adds whole sequences (rows of `tokens`) and the pieces that lie in them."""
        if len(pieces) and pieces.sequence[-1] >= self.total_sequences + len(tokens):
            raise AssertionError("a piece refers to a sequence not yet written")
        self.pieces.append(pieces)
        done = 0
        while done < len(tokens):
            take = min(len(tokens) - done, self.per_shard - self.filled)
            self.tokens[self.filled : self.filled + take] = tokens[done : done + take]
            self.padding[self.filled : self.filled + take] = padding[done : done + take]
            self.filled += take
            done += take
            if self.filled == self.per_shard:
                self._write_shard()

    def _shard_pieces(self) -> _Pieces:
        """Pieces of the current shard, in order; later ones stay pending."""
        pieces = _Pieces.concat(self.pieces) if self.pieces else _Pieces.empty()
        cut = int(np.searchsorted(pieces.sequence, self.written + self.filled, side="left"))
        rest = pieces.select(slice(cut, None))
        self.pieces = [rest] if len(rest) else []
        return pieces.select(slice(0, cut))

    def _write_shard(self) -> None:
        index, count = len(self.shards), self.filled
        name = f"shard-{index:05d}"
        pieces = self._shard_pieces()
        self.spans.add(index, self.written, pieces)
        tokens = self.tokens[:count]
        padding = self.padding[:count]
        files = {
            "bin": _write_file(self.directory / f"{name}.bin", memoryview(tokens).cast("B")),
            "idx": _write_file(self.directory / f"{name}.idx",
                               megatron_index(count, self.seq_len, self.dtype)),
            "padding": _write_file(self.directory / f"{name}.padding.npy", _npy_bytes(padding)),
        }
        padded = int(padding.sum())
        self.shards.append({
            "name": name, "files": files, "first_sequence": self.written, "sequences": count,
            "tokens": count * self.seq_len - padded, "padding_tokens": padded,
            "padded_sequences": int(np.count_nonzero(padding)),
            "occurrences_ending": int(np.count_nonzero(pieces.last))})
        self.written += count
        self.filled = 0

    def close(self) -> dict[str, Any]:
        if self.filled:
            self._write_shard()
        if self.pieces and len(_Pieces.concat(self.pieces)):
            raise AssertionError("pieces left over after the last shard")
        return self.spans.close()


# --- packing ---------------------------------------------------------------------------------


class _ConcatPacker:
    """The token stream cut every `seq_len` tokens; only the very last sequence is padded."""

    def __init__(self, writer: _ShardWriter, seq_len: int, pad_id: int) -> None:
        self.writer, self.seq_len, self.pad_id = writer, seq_len, pad_id
        self.tail = np.zeros(0, dtype=writer.dtype)  # tokens of the unfinished sequence
        self.tail_pieces = _Pieces.empty()
        self.position = 0  # stream position of the first token of `tail`

    def add(self, docs: _Docs, tokens: np.ndarray, lengths: np.ndarray) -> None:
        pieces = self._pieces(docs, lengths)
        stream = np.concatenate([self.tail, tokens])
        whole = len(stream) // self.seq_len
        boundary = self.position // self.seq_len + whole  # first sequence not finished
        pieces = _Pieces.concat([self.tail_pieces, pieces])
        cut = int(np.searchsorted(pieces.sequence, boundary, side="left"))
        self.writer.append(stream[: whole * self.seq_len].reshape(whole, self.seq_len),
                           np.zeros(whole, dtype="<i4"), pieces.select(slice(0, cut)))
        self.tail = stream[whole * self.seq_len :].copy()
        self.tail_pieces = pieces.select(slice(cut, None))
        self.position += whole * self.seq_len

    def _pieces(self, docs: _Docs, lengths: np.ndarray) -> _Pieces:
        """Each occurrence's [start, end) in the stream, split at sequence boundaries."""
        length = self.seq_len
        ends = self.position + len(self.tail) + np.cumsum(lengths)
        starts = ends - lengths
        first, last = starts // length, (ends - 1) // length
        counts = last - first + 1
        owner = np.repeat(np.arange(len(lengths)), counts)
        step = np.arange(len(owner)) - np.repeat(np.cumsum(counts) - counts, counts)
        sequence = first[owner] + step
        base = sequence * length
        start = np.maximum(starts[owner], base) - base
        end = np.minimum(ends[owner], base + length) - base
        return _Pieces.of(docs, owner, sequence, start, end, sequence == last[owner])

    def finish(self) -> None:
        if not len(self.tail):
            return
        padding = self.seq_len - len(self.tail)
        row = np.full((1, self.seq_len), self.pad_id, dtype=self.writer.dtype)
        row[0, : len(self.tail)] = self.tail
        self.writer.append(row, np.array([padding], dtype="<i4"), self.tail_pieces)
        self.tail = self.tail[:0]


@dataclass
class _Bin:
    """A best-fit sequence being filled: its own token row and the pieces placed in it."""

    serial: int
    row: np.ndarray
    fill: int = 0
    parts: list[tuple[int, int, int, bool]] = field(default_factory=list)  # doc, start, end, last

    def put(self, tokens: np.ndarray, handle: int, last: bool) -> None:
        # Copied, so an open sequence never keeps a whole tokenization batch alive.
        self.row[self.fill : self.fill + len(tokens)] = tokens
        self.parts.append((handle, self.fill, self.fill + len(tokens), last))
        self.fill += len(tokens)


class _BestFitPacker:
    """Best fit within a window of open sequences; occurrences split only when longer than
    `seq_len` (whole `seq_len` chunks become sequences of their own, the rest is placed).

    A piece goes to the open sequence with the least room that holds it, else to a new one; a
    full sequence is written at once; past `window` open sequences the oldest is closed and
    padded. Sequences are written in the order they close, so the output depends on the input
    order alone."""

    def __init__(self, writer: _ShardWriter, seq_len: int, pad_id: int, window: int) -> None:
        self.writer, self.seq_len, self.pad_id, self.window = writer, seq_len, pad_id, window
        self.open: dict[int, _Bin] = {}  # by serial: insertion order is age
        self.room: list[tuple[int, int]] = []  # sorted (free tokens, serial) of open sequences
        self.serial = 0
        self.owners: dict[int, tuple[str, int, str]] = {}  # handle -> doc_id, occurrence, phase
        self.handle = 0

    def add(self, docs: _Docs, tokens: np.ndarray, lengths: np.ndarray) -> None:
        ends = np.cumsum(lengths).tolist()
        doc_ids, phases = docs.doc_id.to_pylist(), docs.phase.to_pylist()
        for row, (end, length) in enumerate(zip(ends, lengths.tolist(), strict=True)):
            self.owners[self.handle] = (doc_ids[row], int(docs.occurrence[row]), phases[row])
            self._place(tokens[end - length : end], self.handle)
            self.handle += 1

    def _place(self, tokens: np.ndarray, handle: int) -> None:
        # Whole chunks first; the last piece (1 to seq_len tokens, with the EOS) is fitted.
        whole = (len(tokens) - 1) // self.seq_len
        for chunk in range(whole):
            target = self._new_bin()
            target.put(tokens[chunk * self.seq_len : (chunk + 1) * self.seq_len], handle, False)
            self._emit(target)
        self._fit(tokens[whole * self.seq_len :], handle)

    def _new_bin(self) -> _Bin:
        self.serial += 1
        return _Bin(self.serial, np.full(self.seq_len, self.pad_id, dtype=self.writer.dtype))

    def _fit(self, tokens: np.ndarray, handle: int) -> None:
        spot = bisect.bisect_left(self.room, (len(tokens), -1))
        if spot < len(self.room):
            target = self.open[self.room.pop(spot)[1]]
        else:
            if len(self.open) >= self.window:
                self._close(next(iter(self.open)))
            target = self._new_bin()
            self.open[target.serial] = target
        target.put(tokens, handle, True)
        if target.fill == self.seq_len:
            del self.open[target.serial]
            self._emit(target)
        else:
            bisect.insort(self.room, (self.seq_len - target.fill, target.serial))

    def _close(self, serial: int) -> None:
        target = self.open.pop(serial)
        self.room.remove((self.seq_len - target.fill, serial))
        self._emit(target)

    def _emit(self, target: _Bin) -> None:
        handles, starts, ends, lasts = (list(column) for column in zip(*target.parts, strict=True))
        owners = [self.owners.pop(h) if last else self.owners[h]
                  for h, last in zip(handles, lasts, strict=True)]
        pieces = _Pieces(np.full(len(handles), self.writer.total_sequences, dtype=np.int64),
                         np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64),
                         np.array(lasts, dtype=bool),
                         pa.array([owner[0] for owner in owners], pa.string()),
                         np.array([owner[1] for owner in owners], dtype=np.int64),
                         pa.array([owner[2] for owner in owners], pa.string()))
        padding = np.array([self.seq_len - target.fill], dtype="<i4")
        self.writer.append(target.row[None, :], padding, pieces)

    def finish(self) -> None:
        for serial in list(self.open):
            self._close(serial)


# --- accounting and the manifest -------------------------------------------------------------


class _Accounting:
    """Tokens (EOS included) and occurrences per source, phase and licence, and per source
    within each phase (what the mix's share gate compares with the recipe's targets)."""

    def __init__(self) -> None:
        self.tokens: dict[str, dict[str, int]] = {
            "source": defaultdict(int), "phase": defaultdict(int), "licence": defaultdict(int)}
        self.phase_source: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.occurrences: dict[str, int] = defaultdict(int)

    def add(self, batch: Sequence[Occurrence], lengths: np.ndarray) -> None:
        for item, length in zip(batch, lengths.tolist(), strict=True):
            self.tokens["source"][item.source or NO_VALUE] += length
            self.tokens["phase"][item.phase] += length
            self.tokens["licence"][item.licence or NO_VALUE] += length
            self.phase_source[item.phase][item.source or NO_VALUE] += length
            self.occurrences[item.phase] += 1


def library_versions() -> dict[str, str]:
    return {name: version(name) for name in SHAPING_LIBRARIES}


def _manifest(
    settings: ShardSettings, info: BuildInfo, tokenizer: PinnedTokenizer,
    writer: _ShardWriter, spans: dict[str, Any], accounting: _Accounting,
) -> dict[str, Any]:
    shards = writer.shards
    padding = sum(s["padding_tokens"] for s in shards)
    return {
        "format": FORMAT, "version": info.version, "recipe_hash": info.recipe_hash,
        "pipeline_hash": info.pipeline_hash, "inputs": dict(sorted(info.input_versions.items())),
        **settings.shaping(),
        "tokenizer": {"sha256": tokenizer.sha256, "vocab_size": tokenizer.vocab_size},
        "dtype": tokenizer.dtype.name, "eos_id": tokenizer.eos_id, "pad_id": tokenizer.pad_id,
        "libraries": library_versions(), "shards": shards, "spans": spans,
        "totals": {"sequences": writer.total_sequences,
                   "tokens": sum(s["tokens"] for s in shards), "padding_tokens": padding,
                   "padded_sequences": sum(s["padded_sequences"] for s in shards),
                   "occurrences": sum(accounting.occurrences.values())},
        "occurrences_by_phase": dict(accounting.occurrences),
        "tokens_by_source": dict(accounting.tokens["source"]),
        "tokens_by_phase": dict(accounting.tokens["phase"]),
        "tokens_by_licence": dict(accounting.tokens["licence"]),
        "tokens_by_phase_source": {phase: dict(sources)
                                   for phase, sources in accounting.phase_source.items()},
    }


def manifest_bytes(manifest: Mapping[str, Any]) -> bytes:
    """Canonical JSON: sorted keys, fixed indentation, no timestamps."""
    return (json.dumps(manifest, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode()


def read_manifest(directory: str | Path) -> dict[str, Any]:
    return json.loads((Path(directory) / MANIFEST).read_text(encoding="utf-8"))


# --- the build -------------------------------------------------------------------------------


def _prepare(directory: Path, overwrite: bool) -> None:
    if directory.exists() and any(directory.iterdir()):
        if not overwrite:
            raise FileExistsError(f"{directory} is not empty; pass overwrite=True to replace it")
        shutil.rmtree(directory)
    directory.mkdir(parents=True, exist_ok=True)


def build_shards(
    occurrences: Iterable[Occurrence],
    tokenizer: PinnedTokenizer,
    directory: str | Path,
    settings: ShardSettings,
    info: BuildInfo,
    *,
    overwrite: bool = False,
) -> ShardBuild:
    """Tokenizes, packs and writes the occurrences (already in `order_occurrences` order) into
    `directory`; `manifest.json` is written last."""
    directory = Path(directory)
    _prepare(directory, overwrite)
    timer = _Timer()
    writer = _ShardWriter(directory, settings, tokenizer.dtype)
    packer: _ConcatPacker | _BestFitPacker = (
        _ConcatPacker(writer, settings.seq_len, tokenizer.pad_id) if settings.packing == "concat"
        else _BestFitPacker(writer, settings.seq_len, tokenizer.pad_id, settings.best_fit_window))
    checker, accounting = _OrderCheck(settings.phases, settings.seed), _Accounting()
    with tokenizer_threads(settings.threads):
        for batch in _batches(occurrences, settings):
            timer.time("order_check", checker.check, batch)
            texts = [item.text for item in batch]
            tokens, lengths = timer.time("tokenize", tokenize_batch, texts, tokenizer)
            accounting.add(batch, lengths)
            timer.time("pack_and_write", packer.add, _Docs.of(batch), tokens, lengths)
    timer.time("pack_and_write", packer.finish)
    spans = timer.time("pack_and_write", writer.close)
    manifest = _manifest(settings, info, tokenizer, writer, spans, accounting)
    timer.time("manifest", _write_file, directory / MANIFEST, manifest_bytes(manifest))
    return ShardBuild(directory, manifest, dict(timer.seconds))


def shard_files(manifest: Mapping[str, Any]) -> list[str]:
    """Every file a manifest lists, manifest excluded."""
    names = [entry["name"] for shard in manifest["shards"] for entry in shard["files"].values()]
    return [*names, manifest["spans"]["name"]]


def upload_shards(directory: str | Path, store: Store, prefix: str) -> list[str]:
    """Copies a finished build to `store` under `prefix`, manifest last (so a reader never sees
    a manifest whose files are missing). Returns the keys written."""
    directory = Path(directory)
    manifest = read_manifest(directory)
    keys = []
    for name in [*shard_files(manifest), MANIFEST]:
        key = f"{prefix.rstrip('/')}/{name}"
        store.write_bytes(key, (directory / name).read_bytes())
        keys.append(key)
    return keys
