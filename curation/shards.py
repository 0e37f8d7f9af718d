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
- **Curriculum.** The manifest's `curriculum` maps sequences to phases: the maximal runs of
  consecutive sequences that hold tokens of the same phases, each with its `phases` (in the
  recipe's order), `[first_sequence, end_sequence)` and `tokens` per phase (EOS included,
  padding not). Under `concat` that is one run per phase plus one boundary sequence holding the
  end of a phase and the start of the next; `best_fit` closes its open sequences at a phase
  change, so each phase is one run of its own and no sequence holds two. `shuffle`
  (`within_phase` or `global`) tells the loader (`curation.loader`) how to serve them.
- **Determinism.** Outputs depend on the occurrences, the tokenizer and the settings that shape
  them, never on batch sizes, thread or worker counts or the backend: Parquet row groups have a
  fixed size, JSON keys are sorted, nothing records a time. Two builds are byte-identical, and
  the parallel build writes the serial build's bytes.
- **Two builds, the same bytes.** `build_shards` streams ordered occurrences through one writer.
  At scale, `plan_shards` orders the occurrences out of core (DuckDB) and writes them with
  their text to buckets in a `Store` (a folder or an S3 prefix); `store_planned_shards` (or
  `build_planned_shards`, into a local folder) then builds ranges of whole shards in parallel
  tasks for `concat` packing (each occurrence's stream offset is the running sum of its exact
  token count, so a shard's occurrences, those cut at its edges included, are known before
  tokenizing) and streams the buckets through `build_shards` for `best_fit`, which stays
  serial: a best-fit sequence depends on every occurrence before it. A range task reads its
  buckets from the store and writes its shards and span rows back to it, returning only their
  manifest entries: a task on another machine of a Ray cluster needs no disk shared with the
  parent, which merges the span rows and writes the manifest last.
- **Memory.** `build_shards`: one tokenization batch, one shard's tokens, the open best-fit
  sequences and one Parquet row group of spans at a time. The plan: DuckDB's sort and join under
  the budget (spilling), one Arrow batch and two buckets of text (an eighth of the budget). A
  range task: one bucket's text (a sixteenth of the budget), one batch, one shard's tokens.
  The parent's merge of the tasks' span rows: one row group at a time.

`curation.shard_integrity.verify_shards` is the blocking integrity gate over what this writes.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import shutil
import struct
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any, Literal

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from curation.config import RecipeConfig
from curation.duck import MemoryBudget, current_budget, ident, literal, scalar
from curation.executor import map_tasks
from curation.storage import LocalStore, Store, parquet_bytes, read_parquet
from curation.tokenizer import PinnedTokenizer, tokenizer_from_bytes, tokenizer_threads

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
    # How the loader serves the sequences (recorded in the manifest; never changes a byte).
    shuffle: Literal["within_phase", "global"] = "within_phase"
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
        if self.shuffle not in ("within_phase", "global"):
            raise ValueError(f"shuffle {self.shuffle!r}: use 'within_phase' or 'global'")
        if not self.phases or len(set(self.phases)) != len(self.phases):
            raise ValueError(f"phases {self.phases!r}: give each phase once")
        if self.best_fit_window < 1 or self.batch_size < 1 or self.batch_chars < 1:
            raise ValueError("best_fit_window, batch_size and batch_chars must be positive")

    @classmethod
    def from_recipe(cls, recipe: RecipeConfig, **overrides: Any) -> ShardSettings:
        values: dict[str, Any] = {
            "seq_len": recipe.seq_len, "tokens_per_shard": recipe.tokens_per_shard,
            "seed": recipe.seed, "phases": tuple(phase.name for phase in recipe.phases),
            "packing": recipe.packing, "shuffle": recipe.shuffle}
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
    return _file_entry(path.name, data)


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
        self.add_table(pa.table({
            "shard": pa.array(np.full(len(pieces), shard, dtype=np.int32)),
            "sequence": pa.array((pieces.sequence - first_sequence).astype(np.int32)),
            "start": pa.array(pieces.start.astype(np.int32)),
            "end": pa.array(pieces.end.astype(np.int32)),
            "doc_id": pieces.doc_id, "occurrence": pa.array(pieces.occurrence),
            "phase": pieces.phase}, schema=SPAN_SCHEMA))

    def add_table(self, table: pa.Table) -> None:
        """Adds span rows (`SPAN_SCHEMA`) as they are."""
        self.pending.append(table)
        self.pending_rows += len(table)
        self.rows += len(table)
        if self.pending_rows >= SPAN_ROW_GROUP:
            self._flush(final=False)

    def _flush(self, final: bool) -> None:
        table = pa.concat_tables(self.pending) if self.pending else SPAN_SCHEMA.empty_table()
        whole = len(table) if final else len(table) // SPAN_ROW_GROUP * SPAN_ROW_GROUP
        for begin in range(0, whole, SPAN_ROW_GROUP):
            self._write_group(table.slice(begin, min(SPAN_ROW_GROUP, whole - begin)))
        rest = table.slice(whole)
        self.pending, self.pending_rows = ([rest] if len(rest) else []), len(rest)

    def _write_group(self, group: pa.Table) -> None:
        self.writer.write_table(group.combine_chunks(), row_group_size=SPAN_ROW_GROUP)

    def close(self) -> dict[str, Any]:
        self._flush(final=True)
        self.writer.close()
        os.replace(self.temporary, self.path)
        entry = {"name": self.path.name, "rows": self.rows}
        return entry | {"sha256": file_sha256(self.path), "bytes": self.path.stat().st_size}


class _SpanParts(_SpanWriter):
    """A range task's span rows as objects of one row group each under `prefix` of `store`, so
    the parent merges them holding one row group, wherever the task ran."""

    def __init__(self, store: Store, prefix: str) -> None:
        self.store, self.prefix = store, prefix
        self.pending, self.pending_rows, self.rows, self.parts = [], 0, 0, 0

    def _write_group(self, group: pa.Table) -> None:
        self.store.write_bytes(_span_part(self.prefix, self.parts), parquet_bytes(group))
        self.parts += 1

    def close(self) -> dict[str, Any]:
        self._flush(final=True)
        return {"rows": self.rows, "parts": self.parts}


def _span_part(prefix: str, number: int) -> str:
    return _join(prefix, f"spans-{number:05d}.parquet")


def _join(prefix: str, *names: str) -> str:
    """A store key: `names` under `prefix` ("" is the store's root)."""
    return "/".join(part for part in (prefix, *names) if part)


def _file_entry(name: str, data: bytes | memoryview) -> dict[str, Any]:
    return {"name": name, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


@dataclass(frozen=True)
class _StoreFiles:
    """Writes a shard's files to their keys under `prefix` of `store` (picklable: a range task
    on any machine writes its shards where the parent publishes them)."""

    store: Store
    prefix: str

    def __call__(self, name: str, data: bytes | memoryview) -> dict[str, Any]:
        self.store.write_bytes(_join(self.prefix, name), bytes(data))
        return _file_entry(name, data)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


class _ShardWriter:
    """Collects whole sequences into a shard's buffer; writes a shard when it is full.

    A range of the stream starts at shard `first_shard`, whose first sequence is
    `first_sequence` (a parallel build's task); sequence numbers are global."""

    def __init__(self, files: Callable[[str, bytes | memoryview], dict[str, Any]],
                 settings: ShardSettings, dtype: np.dtype, spans: _SpanWriter,
                 first_shard: int = 0, first_sequence: int = 0) -> None:
        self.files, self.seq_len, self.dtype = files, settings.seq_len, dtype
        self.per_shard = settings.sequences_per_shard
        self.tokens = np.empty((self.per_shard, self.seq_len), dtype=dtype)
        self.padding = np.zeros(self.per_shard, dtype="<i4")
        self.filled = 0  # sequences in the current shard
        self.written = first_sequence  # sequences before the current shard
        self.first_shard = first_shard
        self.pieces: list[_Pieces] = []
        self.spans = spans
        self.shards: list[dict[str, Any]] = []
        self.phases = pa.array(settings.phases, pa.string())
        self.runs: list[PhaseRun] = []

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
        index, count = self.first_shard + len(self.shards), self.filled
        name = f"shard-{index:05d}"
        pieces = self._shard_pieces()
        self.spans.add(index, self.written, pieces)
        tokens = self.tokens[:count]
        padding = self.padding[:count]
        files = {
            "bin": self.files(f"{name}.bin", memoryview(tokens).cast("B")),
            "idx": self.files(f"{name}.idx", megatron_index(count, self.seq_len, self.dtype)),
            "padding": self.files(f"{name}.padding.npy", _npy_bytes(padding)),
        }
        padded = int(padding.sum())
        self.runs = merge_runs([*self.runs, *self._phase_runs(pieces, count)])
        self.shards.append({
            "name": name, "files": files, "first_sequence": self.written, "sequences": count,
            "tokens": count * self.seq_len - padded, "padding_tokens": padded,
            "padded_sequences": int(np.count_nonzero(padding)),
            "occurrences_ending": int(np.count_nonzero(pieces.last))})
        self.written += count
        self.filled = 0

    def _phase_runs(self, pieces: _Pieces, count: int) -> list[PhaseRun]:
        """The current shard's sequences as runs of the same phases (`PhaseRun`)."""
        phase = pc.index_in(pieces.phase, value_set=self.phases).to_numpy(zero_copy_only=False)
        tokens = np.zeros((count, len(self.phases)), dtype=np.int64)
        np.add.at(tokens, (pieces.sequence - self.written, phase.astype(np.int64)),
                  pieces.end - pieces.start)
        present = tokens > 0
        starts = np.flatnonzero(np.r_[True, np.any(present[1:] != present[:-1], axis=1)])
        sums = np.add.reduceat(tokens, starts, axis=0)
        names = self.phases.to_pylist()
        return [PhaseRun(tuple(n for n, t in zip(names, total, strict=True) if t),
                         self.written + int(start), self.written + int(end),
                         tuple(int(t) for t in total if t))
                for start, end, total in zip(starts, [*starts[1:], count], sums.tolist(),
                                             strict=True)]

    def close(self) -> dict[str, Any]:
        if self.filled:
            self._write_shard()
        if self.pieces and len(_Pieces.concat(self.pieces)):
            raise AssertionError("pieces left over after the last shard")
        return self.spans.close()


# --- packing ---------------------------------------------------------------------------------


class _ConcatPacker:
    """The token stream cut every `seq_len` tokens; only the very last sequence is padded."""

    def __init__(self, writer: _ShardWriter, seq_len: int, pad_id: int,
                 position: int = 0) -> None:
        self.writer, self.seq_len, self.pad_id = writer, seq_len, pad_id
        self.tail = np.zeros(0, dtype=writer.dtype)  # tokens of the unfinished sequence
        self.tail_pieces = _Pieces.empty()
        self.position = position  # stream position of the first token of `tail`

    def add(self, docs: _Docs, tokens: np.ndarray, lengths: np.ndarray,
            complete: np.ndarray | None = None) -> None:
        """Appends occurrences' tokens (`lengths` each) to the stream; `complete` says which
        hold their last token (default: all; a range's last occurrence may be cut)."""
        pieces = self._pieces(docs, lengths, complete)
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

    def _pieces(self, docs: _Docs, lengths: np.ndarray,
                complete: np.ndarray | None) -> _Pieces:
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
        ending = sequence == last[owner]
        if complete is not None:
            ending &= complete[owner]
        return _Pieces.of(docs, owner, sequence, start, end, ending)

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
    padded. At a phase change every open sequence is closed first, so no sequence holds two
    phases and the curriculum stays exact (at most `window` part-filled sequences a boundary).
    Sequences are written in the order they close, so the output depends on the input order
    alone."""

    def __init__(self, writer: _ShardWriter, seq_len: int, pad_id: int, window: int) -> None:
        self.writer, self.seq_len, self.pad_id, self.window = writer, seq_len, pad_id, window
        self.open: dict[int, _Bin] = {}  # by serial: insertion order is age
        self.room: list[tuple[int, int]] = []  # sorted (free tokens, serial) of open sequences
        self.serial = 0
        self.owners: dict[int, tuple[str, int, str]] = {}  # handle -> doc_id, occurrence, phase
        self.handle = 0
        self.phase: str | None = None

    def add(self, docs: _Docs, tokens: np.ndarray, lengths: np.ndarray) -> None:
        ends = np.cumsum(lengths).tolist()
        doc_ids, phases = docs.doc_id.to_pylist(), docs.phase.to_pylist()
        for row, (end, length) in enumerate(zip(ends, lengths.tolist(), strict=True)):
            if phases[row] != self.phase:
                self.finish()
                self.phase = phases[row]
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


@dataclass(frozen=True)
class PhaseRun:
    """Consecutive sequences [first, end) holding tokens of `phases` (in the recipe's order),
    `tokens[i]` of `phases[i]`."""

    phases: tuple[str, ...]
    first: int
    end: int
    tokens: tuple[int, ...]

    def entry(self) -> dict[str, Any]:
        return {"phases": list(self.phases), "first_sequence": self.first,
                "end_sequence": self.end, "tokens": dict(zip(self.phases, self.tokens,
                                                             strict=True))}


def merge_runs(runs: Iterable[PhaseRun]) -> list[PhaseRun]:
    """`runs` (in sequence order) with adjacent runs of the same phases joined: a shard's or a
    range's edge is no edge of the curriculum."""
    merged: list[PhaseRun] = []
    for run in runs:
        last = merged[-1] if merged else None
        if last is not None and last.phases == run.phases and last.end == run.first:
            merged[-1] = PhaseRun(run.phases, last.first, run.end,
                                  tuple(a + b for a, b in zip(last.tokens, run.tokens,
                                                              strict=True)))
        else:
            merged.append(run)
    return merged



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
            self.add_group(item.phase, item.source, item.licence, length, 1)

    def add_group(self, phase: str, source: str | None, licence: str | None, tokens: int,
                  occurrences: int) -> None:
        self.tokens["source"][source or NO_VALUE] += tokens
        self.tokens["phase"][phase] += tokens
        self.tokens["licence"][licence or NO_VALUE] += tokens
        self.phase_source[phase][source or NO_VALUE] += tokens
        self.occurrences[phase] += occurrences


def library_versions() -> dict[str, str]:
    return {name: version(name) for name in SHAPING_LIBRARIES}


def _manifest(
    settings: ShardSettings, info: BuildInfo, tokenizer: PinnedTokenizer,
    shards: list[dict[str, Any]], spans: dict[str, Any], accounting: _Accounting,
    runs: Sequence[PhaseRun],
) -> dict[str, Any]:
    padding = sum(s["padding_tokens"] for s in shards)
    return {
        "format": FORMAT, "version": info.version, "recipe_hash": info.recipe_hash,
        "pipeline_hash": info.pipeline_hash, "inputs": dict(sorted(info.input_versions.items())),
        **settings.shaping(),
        "tokenizer": {"sha256": tokenizer.sha256, "vocab_size": tokenizer.vocab_size},
        "dtype": tokenizer.dtype.name, "eos_id": tokenizer.eos_id, "pad_id": tokenizer.pad_id,
        "libraries": library_versions(), "shards": shards, "spans": spans,
        "shuffle": settings.shuffle, "curriculum": [run.entry() for run in runs],
        "totals": {"sequences": sum(s["sequences"] for s in shards),
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
    writer = _ShardWriter(lambda name, data: _write_file(directory / name, data), settings,
                          tokenizer.dtype, _SpanWriter(directory / SPANS))
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
    manifest = _manifest(settings, info, tokenizer, writer.shards, spans, accounting,
                         writer.runs)
    timer.time("manifest", _write_file, directory / MANIFEST, manifest_bytes(manifest))
    return ShardBuild(directory, manifest, dict(timer.seconds))


# --- the parallel build: buckets in shard order, then one task per range of shards -----------

PLAN_BATCH = 1 << 16  # occurrences per Arrow batch while keying and numbering them
PLAN_COLUMNS = ("doc_id", "occurrence", "phase", "source", "licence", "est_tokens")
BUCKETS = "buckets"  # under the plan's prefix: the buckets, `chunk=K/part-NNNNN.parquet`
RANGES = "ranges"  # under the plan's prefix: each range task's span rows, `range-NNNNN/`
TASKS_PER_WORKER = 4  # ranges per worker, so a slow range does not leave the others idle


def bucket_bytes(budget: MemoryBudget) -> int:
    """Text bytes per bucket. A task holds one bucket's text, twice while it sorts it, beside
    one shard's tokens and one tokenization batch: a sixteenth of the budget keeps the text to
    an eighth of it."""
    return max(1 << 20, budget.memory_bytes // 16)


@dataclass(frozen=True)
class Buckets:
    """Where a plan's buckets are: `parts[K]` Parquet objects of bucket K under
    `{prefix}/buckets/chunk=K/` of `store` (picklable: a task on any machine reads them)."""

    store: Store
    prefix: str
    parts: tuple[int, ...]


@dataclass(frozen=True)
class ShardPlan:
    """The occurrences in shard order, each with its stream `offset` (first token) and its text,
    written to buckets of about `bucket_bytes` bytes of text (`plan_shards`)."""

    buckets: Buckets
    bucket_bytes: int
    total_tokens: int
    occurrences: int
    shard_buckets: tuple[int, ...]  # per output shard: the bucket holding its first token
    last_bucket: int
    accounting: _Accounting


def _bucket_part(prefix: str, bucket: int, part: int) -> str:
    return _join(prefix, BUCKETS, f"chunk={bucket}", f"part-{part:05d}.parquet")


def read_bucket(buckets: Buckets, number: int) -> pa.Table | None:
    """Bucket `number` in stream order (None: no occurrence starts in it), its objects read
    one at a time."""
    count = buckets.parts[number] if number < len(buckets.parts) else 0
    if not count:
        return None
    return pa.concat_tables([read_parquet(buckets.store, _bucket_part(buckets.prefix, number, part))
                             for part in range(count)]).sort_by("offset")


def plan_shards(
    con: duckdb.DuckDBPyConnection, occurrences: str, texts: str, keys: Sequence[str],
    settings: ShardSettings, folder: Path, bytes_per_bucket: int | None = None, *,
    store: Store | None = None, prefix: str = "", carry: Sequence[str] = (),
) -> ShardPlan:
    """Orders the occurrences and writes them with their text to buckets under `prefix` of
    `store` (default: `folder` itself), where range tasks on any machine read them; `folder`
    is this process's local work folder.

    `occurrences` names a relation of `con` with `PLAN_COLUMNS` (`est_tokens`: each
    occurrence's tokens in the shards, EOS included, as `occurrence_lengths` counts them) and
    the `keys` columns; `texts` one with the `keys` columns and `text`, a row per document.
    `carry`: more columns for the bucket rows, each `o.NAME` (a key) or `t.NAME` (of `texts`).

    1. Each occurrence's phase index and `shuffle_key`, computed a batch at a time, go to
       `keyed.parquet`.
    2. DuckDB sorts them by (phase index, key, doc_id, occurrence), each with its text's
       length in bytes; the running sum of `est_tokens` over that stream is each occurrence's
       `offset`, and the running sum of text bytes before it, divided by `bytes_per_bucket`,
       its bucket (`ordered.parquet`). Buckets hold consecutive occurrences.
    3. DuckDB joins the ordered occurrences with their text, streaming the texts past the
       occurrences' hash table, and `_write_buckets` writes each bucket's rows to objects of
       its own: text is never sorted, and a bucket is sorted by the task that reads it.

    Memory: one Arrow batch of occurrences and two buckets' worth of text (an eighth of the
    budget) and the Parquet bytes of the part being written, in this process; DuckDB's sort
    and join under the session's memory limit, spilling to its temporary folder."""
    folder.mkdir(parents=True, exist_ok=True)
    per_bucket = bytes_per_bucket or bucket_bytes(current_budget())
    keyed, ordered = folder / "keyed.parquet", folder / "ordered.parquet"
    extra = [key for key in keys if key not in PLAN_COLUMNS]
    _write_keys(con, occurrences, [*extra, *PLAN_COLUMNS], settings, keyed)
    keyed_rows = f"read_parquet({literal(str(keyed))})"
    repeated = con.execute(f"SELECT doc_id, occurrence FROM {keyed_rows}"
                           " GROUP BY ALL HAVING count(*) > 1 LIMIT 1").fetchall()
    if repeated:
        raise ValueError(f"occurrence {tuple(repeated[0])} is repeated")
    join = " AND ".join(f"o.{ident(key)} = t.{ident(key)}" for key in keys)
    count = scalar(con, f"SELECT count(*) FROM {keyed_rows}")
    # DuckDB builds its hash table on the side with fewer rows, here the texts: every text in
    # memory (or spilled) at once. The optimizer that swaps sides is off for the two joins, so
    # the occurrences, written on the right, are the build side and the texts stream past.
    con.execute("SET disabled_optimizers = 'build_side_probe_side'")
    try:
        total, texts_found, text_bytes = _number(
            con, f"{texts} t JOIN {keyed_rows} o ON {join}", ordered, per_bucket)
        if texts_found != count:
            raise ValueError(f"{count} occurrences but {texts_found} with text: `{texts}` must "
                             "hold the text of every document once")
        buckets, copied = _write_buckets(
            con, f"{texts} t JOIN read_parquet({literal(str(ordered))}) o ON {join}",
            store or LocalStore(str(folder)), prefix, per_bucket,
            max(1, text_bytes // max(1, count)), carry)
    finally:
        con.execute("RESET disabled_optimizers")
    if copied != count:
        raise ValueError(f"{count} occurrences but {copied} rows with text: `{texts}` "
                         "changed while it was read")
    span = settings.sequences_per_shard * settings.seq_len
    source = f"read_parquet({literal(str(ordered))})"
    # The occurrence holding shard s's first token s * span: the one where s falls in
    # [ceil(offset / span), ceil(end / span)).
    starts = con.execute(
        f"SELECT s, chunk FROM (SELECT unnest(range((\"offset\" + {span} - 1) // {span},"
        f" (\"offset\" + est_tokens + {span} - 1) // {span})) AS s, chunk FROM {source})"
        " ORDER BY s").fetchall()
    accounting = _Accounting()
    for phase, source_name, licence, tokens, number in con.execute(
            f"SELECT phase, source, licence, sum(est_tokens), count(*) FROM {source}"
            " GROUP BY ALL ORDER BY ALL").fetchall():
        accounting.add_group(phase, source_name, licence, int(tokens), int(number))
    last = scalar(con, f"SELECT max(chunk) FROM {source}")
    return ShardPlan(buckets, per_bucket, total, count,
                     tuple(chunk for _, chunk in starts), last, accounting)


def _write_buckets(con: duckdb.DuckDBPyConnection, joined: str, store: Store, prefix: str,
                   per_bucket: int, row_bytes: int, carry: Sequence[str] = ()
                   ) -> tuple[Buckets, int]:
    """Writes the rows of `joined` (occurrences `o` with their texts `t`, streamed in the texts'
    order) to objects of their bucket under `prefix`; returns the buckets and the rows written.

    Rows wait in a buffer per bucket, written out as a file of the bucket when it reaches a
    quarter of a bucket, and the largest buffers are written when all together pass two
    buckets' worth. Not DuckDB's `COPY ... PARTITION_BY`: it buffers rows for every bucket and
    a row group for every open file beyond its memory limit when rows are whole documents
    (under a 61 MB limit, 4,572 rows of 23 KB into 15 buckets failed with every setting of
    `partitioned_write_flush_threshold` and `partitioned_write_max_open_files` but one row and
    one thread).

    Objects are uncompressed: each is written once and read by a range task or two, and zstd
    made writing them the plan's largest cost (147 MB of text: 1.0 s to write with zstd, 0.16 s
    without; 0.64 s against 0.28 s to read)."""
    held: dict[int, list[pa.Table]] = defaultdict(list)
    sizes: dict[int, int] = defaultdict(int)
    files: dict[int, int] = defaultdict(int)

    def flush(bucket: int) -> None:
        store.write_bytes(_bucket_part(prefix, bucket, files[bucket]),
                          parquet_bytes(pa.concat_tables(held.pop(bucket)), compression="none"))
        files[bucket] += 1
        del sizes[bucket]

    carried = "".join(f", {column}" for column in carry)
    reader = con.sql(
        f"SELECT o.\"offset\", o.est_tokens, o.doc_id, o.occurrence, o.phase, o.source,"
        f" o.licence, t.text{carried}, o.chunk FROM {joined}"
    ).to_arrow_reader(max(1, per_bucket // 4 // row_bytes))
    written = 0
    for batch in reader:
        rows = pa.Table.from_batches([batch])
        chunks = rows["chunk"].to_numpy()
        for bucket in np.unique(chunks).tolist():
            part = rows.filter(pa.array(chunks == bucket)).drop_columns(["chunk"])
            held[bucket].append(part)
            sizes[bucket] += part.nbytes
            if sizes[bucket] >= per_bucket // 4:
                flush(bucket)
        while sum(sizes.values()) > 2 * per_bucket:
            flush(max(sizes, key=sizes.__getitem__))
        written += rows.num_rows
    for bucket in sorted(held):
        flush(bucket)
    parts = tuple(files[bucket] for bucket in range(max(files, default=-1) + 1))
    return Buckets(store, prefix, parts), written

def _write_keys(con: duckdb.DuckDBPyConnection, occurrences: str, columns: Sequence[str],
                settings: ShardSettings, path: Path) -> None:
    select = ", ".join(ident(column) for column in columns)
    reader = con.sql(f"SELECT {select} FROM {occurrences}").to_arrow_reader(PLAN_BATCH)
    index = {name: i for i, name in enumerate(settings.phases)}
    schema = reader.schema.append(pa.field("phase_index", pa.int32())).append(
        pa.field("shuffle_key", pa.binary(16)))
    with pq.ParquetWriter(path, schema) as writer:
        for batch in reader:
            keys = [_sort_key(d, o, p, index, settings.seed) for d, o, p in zip(
                batch["doc_id"].to_pylist(), batch["occurrence"].to_pylist(),
                batch["phase"].to_pylist(), strict=True)]
            writer.write_batch(pa.RecordBatch.from_arrays(
                [*batch.columns, pa.array([key[0] for key in keys], pa.int32()),
                 pa.array([key[1] for key in keys], pa.binary(16))], schema=schema))


def _number(con: duckdb.DuckDBPyConnection, joined: str, path: Path,
            per_bucket: int) -> tuple[int, int, int]:
    """Writes the keyed occurrences that have a text (`joined`: keyed rows `o`, texts `t`) in
    shard order with `offset` and `chunk`; returns the total tokens, the number of rows and
    their text bytes."""
    reader = con.sql(
        f"SELECT o.* EXCLUDE (phase_index, shuffle_key), strlen(t.text) AS text_bytes"
        f" FROM {joined} ORDER BY o.phase_index, o.shuffle_key, o.doc_id, o.occurrence"
    ).to_arrow_reader(PLAN_BATCH)
    schema = reader.schema.append(pa.field("offset", pa.int64())).append(
        pa.field("chunk", pa.int64()))
    position = text_bytes = count = 0
    with pq.ParquetWriter(path, schema) as writer:
        for batch in reader:
            lengths = batch["est_tokens"].to_numpy(zero_copy_only=False).astype(np.int64)
            if len(lengths) and lengths.min() < 1:
                raise ValueError("est_tokens must count at least the EOS of every occurrence")
            sizes = batch["text_bytes"].to_numpy(zero_copy_only=False).astype(np.int64)
            bytes_before = text_bytes + np.cumsum(sizes) - sizes
            ends = position + np.cumsum(lengths)
            writer.write_batch(pa.RecordBatch.from_arrays(
                [*batch.columns, pa.array(ends - lengths),
                 pa.array(bytes_before // per_bucket)], schema=schema))
            position = int(ends[-1]) if len(ends) else position
            text_bytes += int(sizes.sum())
            count += len(lengths)
    return position, count, text_bytes


def iter_planned(plan: ShardPlan) -> Iterator[Occurrence]:
    """The planned occurrences with their text, in shard order, one bucket in memory."""
    for number in range(len(plan.buckets.parts)):
        rows = read_bucket(plan.buckets, number)
        if rows is not None:
            yield from occurrences_from_table(rows)


@dataclass(frozen=True)
class _Range:
    """A task: the whole shards from `first_shard` on that hold stream tokens [start, stop)."""

    first_shard: int
    start: int
    stop: int
    buckets: tuple[int, ...]
    final: bool  # holds the stream's end, so its last sequence may be padded
    spans: str  # the store prefix of its span rows (`_SpanParts`)


def range_size(shards: int, workers: int) -> int:
    """Shards per range task: the size whose tasks finish soonest when `workers` build them
    (waves of `workers` tasks, a task's time in shards), ties going to the size whose task
    count is nearest `TASKS_PER_WORKER` per worker. With 60 shards on 14 workers, ranges of
    2 shards (30 tasks) run 3 waves, the last with 2 tasks: 6 shard-times where 5 suffice."""
    workers = max(1, workers)

    def cost(size: int) -> tuple[int, int]:
        tasks = -(-shards // size)
        return -(-tasks // workers) * size, abs(tasks - TASKS_PER_WORKER * workers)

    return min(range(1, max(1, -(-shards // workers)) + 1), key=cost)


def _ranges(plan: ShardPlan, settings: ShardSettings, workers: int) -> list[_Range]:
    span = settings.sequences_per_shard * settings.seq_len
    shards = len(plan.shard_buckets)
    size = range_size(shards, workers)
    ranges = []
    for first in range(0, shards, size):
        after = min(first + size, shards)
        last = plan.shard_buckets[after] if after < shards else plan.last_bucket
        ranges.append(_Range(first, first * span, min(after * span, plan.total_tokens),
                             tuple(range(plan.shard_buckets[first], last + 1)),
                             after == shards,
                             _join(plan.buckets.prefix, RANGES, f"range-{first:05d}")))
    return ranges


@dataclass(frozen=True)
class _TokenizerSource:
    """What a worker rebuilds the tokenizer from (once per process: `_worker_tokenizer`)."""

    json_bytes: bytes
    sha256: str
    eos_token: str

    @classmethod
    def of(cls, tokenizer: PinnedTokenizer) -> _TokenizerSource:
        return cls(tokenizer.json_bytes, tokenizer.sha256,
                   tokenizer.tokenizer.id_to_token(tokenizer.eos_id))


_WORKER_TOKENIZERS: dict[tuple[str, str], PinnedTokenizer] = {}


def _worker_tokenizer(source: _TokenizerSource) -> PinnedTokenizer:
    key = (source.sha256, source.eos_token)
    if key not in _WORKER_TOKENIZERS:
        _WORKER_TOKENIZERS[key] = tokenizer_from_bytes(source.json_bytes, source.eos_token)
    return _WORKER_TOKENIZERS[key]


@dataclass(frozen=True)
class _RangeBuilder:
    """Builds one range's shards (`.bin`, `.idx`, `.padding.npy` straight to their keys in the
    output store) and its span rows (objects under the range's work prefix); returns the
    shards' manifest entries, the number of span objects and its phase runs. Nothing stays on
    the machine that ran it. Memory: one bucket's rows (`bucket_bytes` of text), one
    tokenization batch and one shard's tokens (twice while it is uploaded)."""

    buckets: Buckets
    output: _StoreFiles
    settings: ShardSettings
    tokenizer: _TokenizerSource

    def __call__(self, task: _Range) -> tuple[list[dict[str, Any]], int, list[PhaseRun]]:
        tokenizer = _worker_tokenizer(self.tokenizer)
        seq_len = self.settings.seq_len
        spans = _SpanParts(self.buckets.store, task.spans)
        writer = _ShardWriter(self.output, self.settings, tokenizer.dtype, spans,
                              task.first_shard, task.start // seq_len)
        packer = _ConcatPacker(writer, seq_len, tokenizer.pad_id, task.start)
        with tokenizer_threads(self.settings.threads):
            for number in task.buckets:
                rows = read_bucket(self.buckets, number)
                if rows is None:
                    continue
                offsets = rows["offset"].to_numpy()
                inside = (offsets < task.stop) & (offsets + rows["est_tokens"].to_numpy()
                                                  > task.start)
                rows = rows.filter(pa.array(inside))
                for batch in _row_batches(rows, self.settings):
                    _pack_rows(batch, tokenizer, packer, task)
        if task.final:
            packer.finish()
        elif len(packer.tail):
            raise AssertionError("a range that is not the last ended inside a sequence")
        writer.close()
        return writer.shards, spans.parts, writer.runs


def _row_batches(rows: pa.Table, settings: ShardSettings) -> Iterator[pa.Table]:
    """Slices of `rows` as `_batches` cuts occurrences (by count and characters)."""
    begin = count = chars = 0
    for row, size in enumerate(pc.utf8_length(rows["text"]).to_pylist()):
        count, chars = count + 1, chars + size
        if count >= settings.batch_size or chars >= settings.batch_chars:
            yield rows.slice(begin, row + 1 - begin)
            begin, count, chars = row + 1, 0, 0
    if begin < rows.num_rows:
        yield rows.slice(begin)


def _pack_rows(rows: pa.Table, tokenizer: PinnedTokenizer, packer: _ConcatPacker,
               task: _Range) -> None:
    """Tokenizes consecutive occurrences and packs the part of them inside the task's range."""
    tokens, lengths = tokenize_batch(rows["text"].to_pylist(), tokenizer)
    planned = rows["est_tokens"].to_numpy()
    if not np.array_equal(lengths, planned):
        bad = int(np.flatnonzero(lengths != planned)[0])
        raise ValueError(
            f"occurrence ({rows['doc_id'][bad].as_py()!r}, {rows['occurrence'][bad].as_py()}) "
            f"has {lengths[bad]} tokens, but est_tokens says {planned[bad]}: the shard plan "
            "needs the exact counts of this tokenizer (EOS included)")
    starts = rows["offset"].to_numpy()
    ends = starts + lengths
    first = int(starts[0])
    inside = tokens[max(0, task.start - first) : task.stop - first]
    kept = np.minimum(ends, task.stop) - np.maximum(starts, task.start)
    docs = _Docs(rows["doc_id"].combine_chunks().cast(pa.string()), rows["occurrence"].to_numpy(),
                 rows["phase"].combine_chunks().cast(pa.string()))
    packer.add(docs, inside, kept, ends <= task.stop)


def _merge_spans(store: Store, keys: Sequence[str], target: Path) -> dict[str, Any]:
    """The ranges' span objects, in order, rewritten in `SPAN_ROW_GROUP` row groups: the bytes
    of a serial build's `spans.parquet`. One object (a row group) and one row group in
    memory."""
    spans = _SpanWriter(target)
    for key in keys:
        spans.add_table(read_parquet(store, key).cast(SPAN_SCHEMA))
    return spans.close()


def build_planned_shards(
    plan: ShardPlan,
    tokenizer: PinnedTokenizer,
    directory: str | Path,
    settings: ShardSettings,
    info: BuildInfo,
    workers: int,
    *,
    overwrite: bool = False,
) -> ShardBuild:
    """The shards of a plan in a local `directory`, byte-identical to `build_shards` over
    `iter_planned(plan)` (`store_planned_shards` into a local store; memory as there)."""
    if settings.packing == "best_fit":
        return build_shards(iter_planned(plan), tokenizer, directory, settings, info,
                            overwrite=overwrite)
    directory = Path(directory)
    _prepare(directory, overwrite)
    manifest, timings = _build_ranges(plan, tokenizer, LocalStore(str(directory)), "",
                                      settings, info, workers)
    return ShardBuild(directory, manifest, timings)


def store_planned_shards(
    plan: ShardPlan,
    tokenizer: PinnedTokenizer,
    store: Store,
    prefix: str,
    settings: ShardSettings,
    info: BuildInfo,
    workers: int,
) -> dict[str, Any]:
    """The shards of a plan under `prefix` of `store`, `manifest.json` last; returns the
    manifest.

    `concat`: every occurrence's stream offset is known, so each shard's occurrences (with the
    ones cut at its edges) are too: ranges of whole shards are built by `map_tasks` over
    `workers` (the local pool, or Ray under `use_ray`), each reading only the buckets its tokens
    lie in from the plan's store and writing its shards to their keys under `prefix` and its
    span rows to the plan's prefix, so a task needs no disk shared with this process; then
    the ranges' span rows are merged into `spans.parquet` (a local file, uploaded) and
    `manifest.json` is written last. Memory per worker: one bucket's text and one shard's
    tokens; here one row group of spans.

    `best_fit` fills each sequence from a window of open ones, so a sequence depends on every
    occurrence before it: it stays one serial build in a local folder, streaming the buckets in
    order (one bucket in memory), then uploaded file by file (`upload_shards`)."""
    if settings.packing == "best_fit":
        with tempfile.TemporaryDirectory(prefix="shards-",
                                         dir=current_budget().spill_directory) as folder:
            build = build_shards(iter_planned(plan), tokenizer, Path(folder) / "out", settings,
                                 info)
            upload_shards(build.directory, store, prefix)
            return build.manifest
    return _build_ranges(plan, tokenizer, store, prefix, settings, info, workers)[0]


def _build_ranges(
    plan: ShardPlan, tokenizer: PinnedTokenizer, store: Store, prefix: str,
    settings: ShardSettings, info: BuildInfo, workers: int,
) -> tuple[dict[str, Any], dict[str, float]]:
    timer = _Timer()
    ranges = _ranges(plan, settings, workers)
    builder = _RangeBuilder(plan.buckets, _StoreFiles(store, prefix), settings,
                            _TokenizerSource.of(tokenizer))
    results = timer.time("ranges", map_tasks, builder, ranges, workers)
    shards = [entry for entries, _, _ in results for entry in entries]
    keys = [_span_part(task.spans, number)
            for task, (_, parts, _) in zip(ranges, results, strict=True)
            for number in range(parts)]
    with tempfile.TemporaryDirectory(prefix="spans-",
                                     dir=current_budget().spill_directory) as folder:
        path = Path(folder) / SPANS
        spans = timer.time("spans", _merge_spans, plan.buckets.store, keys, path)
        timer.time("spans", store.write_file, _join(prefix, SPANS), path)
    manifest = _manifest(settings, info, tokenizer, shards, spans, plan.accounting,
                         merge_runs(run for _, _, runs in results for run in runs))
    timer.time("manifest", store.write_bytes, _join(prefix, MANIFEST), manifest_bytes(manifest))
    return manifest, dict(timer.seconds)


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
        store.write_file(key, directory / name)
        keys.append(key)
    return keys
