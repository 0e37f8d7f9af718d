"""The shards' integrity gate (no Dagster): `verify_shards` reads a dataset version's folder
and checks what `curation.shards` promises: file hashes, the Megatron index's offsets, the
vocabulary range, one EOS per occurrence, token and padding accounting, padding positions,
span tiling and the curriculum (the manifest's phase runs are the runs the spans hold)
(docs/architecture.md, "Data contracts: Shards").
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from curation.shards import (
    IDX_HEADER,
    IDX_VERSION,
    MANIFEST,
    MEGATRON_DTYPE_CODES,
    PhaseRun,
    file_sha256,
    merge_runs,
    read_manifest,
)


@dataclass(frozen=True)
class IntegrityFailure:
    """One failed check: `check` names it (sha256, idx, offsets, size, vocab, padding, eos,
    tokens, spans, curriculum, files), `file` the file concerned."""

    check: str
    file: str
    message: str


@dataclass
class IntegrityReport:
    failures: list[IntegrityFailure] = field(default_factory=list)
    shards: int = 0
    sequences: int = 0
    tokens: int = 0

    @property
    def ok(self) -> bool:
        return not self.failures

    def checks_failed(self) -> set[str]:
        return {failure.check for failure in self.failures}

    def fail(self, check: str, file: str, message: str) -> None:
        self.failures.append(IntegrityFailure(check, file, message))

    def summary(self) -> str:
        if self.ok:
            return f"ok: {self.shards} shards, {self.sequences} sequences, {self.tokens} tokens"
        return "\n".join(f"{f.check}: {f.file}: {f.message}" for f in self.failures)


@dataclass(frozen=True)
class _Expect:
    """What the manifest says every shard must look like."""

    directory: Path
    seq_len: int
    dtype: np.dtype
    vocab_size: int
    eos_id: int
    pad_id: int


def _check_hashes(expect: _Expect, shard: Mapping[str, Any], report: IntegrityReport) -> bool:
    """sha256 and size of the shard's files; False when a file is missing."""
    present = True
    for entry in shard["files"].values():
        path = expect.directory / entry["name"]
        if not path.is_file():
            report.fail("files", entry["name"], "missing")
            present = False
        elif file_sha256(path) != entry["sha256"]:
            report.fail("sha256", entry["name"], "content differs from the manifest's sha256")
    return present


def _check_index(expect: _Expect, shard: Mapping[str, Any], report: IntegrityReport) -> None:
    """The `.idx` layout: header, dtype code, counts, lengths, monotonic offsets."""
    name = shard["files"]["idx"]["name"]
    data = (expect.directory / name).read_bytes()
    count = shard["sequences"]
    if data[:9] != IDX_HEADER or struct.unpack_from("<Q", data, 9)[0] != IDX_VERSION:
        report.fail("idx", name, "not a Megatron-Core index (header or version)")
        return
    if data[17] != MEGATRON_DTYPE_CODES[expect.dtype.name]:
        report.fail("idx", name, f"dtype code {data[17]} is not {expect.dtype.name}'s")
    sequences, documents = struct.unpack_from("<QQ", data, 18)
    if (sequences, documents) != (count, count + 1) or len(data) != 34 + 4 * count + 16 * count + 8:
        report.fail("idx", name, f"{sequences} sequences / {documents} documents / {len(data)} "
                                 f"bytes; the manifest has {count} sequences")
        return
    lengths = np.frombuffer(data, "<i4", count, 34).astype(np.int64)
    pointers = np.frombuffer(data, "<i8", count, 34 + 4 * count)
    documents_index = np.frombuffer(data, "<i8", count + 1, 34 + 12 * count)
    itemsize = expect.dtype.itemsize
    if np.any(lengths != expect.seq_len):
        report.fail("idx", name, f"sequence lengths other than seq_len {expect.seq_len}")
    # Each sequence starts where the previous one ends, from byte 0 to the end of the .bin.
    steps = np.diff(np.append(pointers, count * expect.seq_len * itemsize))
    if count and (pointers[0] != 0 or np.any(steps != lengths * itemsize)):
        report.fail("offsets", name, "sequence pointers are not contiguous and increasing")
    if np.any(documents_index != np.arange(count + 1)):
        report.fail("offsets", name, "document indices are not 0, 1, ..., sequences")


def _load_tokens(
    expect: _Expect, shard: Mapping[str, Any], report: IntegrityReport
) -> np.ndarray | None:
    """The shard's tokens as (sequences, seq_len), or None when the `.bin` has the wrong size."""
    name = shard["files"]["bin"]["name"]
    path = expect.directory / name
    expected = shard["sequences"] * expect.seq_len * expect.dtype.itemsize
    size = path.stat().st_size
    if size != expected:
        report.fail("size", name, f"{size} bytes, expected {expected} (truncated or extended)")
        return None
    if not expected:
        return np.zeros((0, expect.seq_len), dtype=expect.dtype)
    return np.memmap(path, dtype=expect.dtype, mode="r", shape=(shard["sequences"],
                                                                expect.seq_len))


def _load_padding(
    expect: _Expect, shard: Mapping[str, Any], report: IntegrityReport
) -> np.ndarray | None:
    name = shard["files"]["padding"]["name"]
    try:
        padding = np.load(expect.directory / name, allow_pickle=False)
    except (OSError, ValueError) as error:
        report.fail("padding", name, f"unreadable: {error}")
        return None
    if padding.shape != (shard["sequences"],) or np.any((padding < 0) | (padding > expect.seq_len)):
        report.fail("padding", name, "not one count in [0, seq_len] per sequence")
        return None
    return padding


def _check_tokens(expect: _Expect, shard: Mapping[str, Any], tokens: np.ndarray,
                  padding: np.ndarray, report: IntegrityReport) -> None:
    """Vocabulary range, padding content and accounting, and the EOS count, in blocks."""
    name = shard["files"]["bin"]["name"]
    out_of_range = eos = bad_padding = 0
    positions = np.arange(expect.seq_len)
    for begin in range(0, len(tokens), 4096):
        block = np.asarray(tokens[begin : begin + 4096])
        is_padding = positions >= (expect.seq_len - padding[begin : begin + 4096])[:, None]
        wide = block.astype(np.int64)
        out_of_range += int(np.count_nonzero((wide < 0) | (wide >= expect.vocab_size)))
        eos += int(np.count_nonzero((block == expect.eos_id) & ~is_padding))
        bad_padding += int(np.count_nonzero((block != expect.pad_id) & is_padding))
    if out_of_range:
        report.fail("vocab", name, f"{out_of_range} token ids outside [0, {expect.vocab_size})")
    if bad_padding:
        report.fail("padding", name, f"{bad_padding} padding positions do not hold pad id "
                                     f"{expect.pad_id}")
    if int(padding.sum()) != shard["padding_tokens"]:
        report.fail("padding", name, f"{int(padding.sum())} padding tokens recorded per "
                                     f"sequence, the manifest says {shard['padding_tokens']}")
    if eos != shard["occurrences_ending"]:
        report.fail("eos", name, f"{eos} EOS tokens outside padding, but "
                                 f"{shard['occurrences_ending']} occurrences end in this shard")
    if shard["tokens"] + shard["padding_tokens"] != shard["sequences"] * expect.seq_len:
        report.fail("tokens", name, "tokens + padding != sequences x seq_len")


def _span_tiling(glob: np.ndarray, start: np.ndarray, end: np.ndarray, room: np.ndarray) -> bool:
    """True when the spans (sorted by global sequence) cover [0, room) of every sequence
    contiguously, `room` being seq_len minus the sequence's padding."""
    if not len(glob):
        return not np.any(room)
    if np.any(np.diff(glob) < 0) or glob[0] < 0 or glob[-1] >= len(room) or np.any(end <= start):
        return False
    first = np.append(True, glob[1:] != glob[:-1])  # the first span of each sequence
    last = np.append(first[1:], True)
    following = np.flatnonzero(~first)
    covered = np.zeros(len(room), dtype=np.int64)
    covered[glob[last]] = end[last]
    return (bool(np.all(start[first] == 0)) and bool(np.all(start[following] == end[following - 1]))
            and bool(np.array_equal(covered, room)))


def _check_spans(expect: _Expect, manifest: Mapping[str, Any], paddings: dict[int, np.ndarray],
                 report: IntegrityReport) -> None:
    """Spans and padding tile every sequence exactly: every token has its document."""
    entry = manifest["spans"]
    path = expect.directory / entry["name"]
    if not path.is_file() or file_sha256(path) != entry["sha256"]:
        report.fail("sha256", entry["name"], "missing or content differs from the manifest")
        return
    spans = pq.read_table(path, columns=["shard", "sequence", "start", "end"])
    if len(spans) != entry["rows"]:
        report.fail("spans", entry["name"], f"{len(spans)} rows, the manifest says {entry['rows']}")
    if len(paddings) != len(manifest["shards"]):
        return  # a shard's padding is unreadable: already reported
    shard, sequence, start, end = (spans[c].to_numpy().astype(np.int64) for c in spans.column_names)
    first = np.array([s["first_sequence"] for s in manifest["shards"]] + [0], dtype=np.int64)
    glob = first[np.clip(shard, 0, len(first) - 1)] + sequence
    padding = np.concatenate([paddings[i] for i in range(len(paddings))] + [np.zeros(0, np.int64)])
    if np.any(shard >= len(manifest["shards"])) or not _span_tiling(
            glob, start, end, expect.seq_len - padding.astype(np.int64)):
        report.fail("spans", entry["name"], "spans and padding do not tile every sequence")


def verify_shards(directory: str | Path, vocab_size: int | None = None) -> IntegrityReport:
    """Checks a build against its manifest; `vocab_size` defaults to the manifest's tokenizer."""
    directory = Path(directory)
    report = IntegrityReport()
    try:
        manifest = read_manifest(directory)
    except (OSError, ValueError) as error:
        report.fail("files", MANIFEST, f"unreadable: {error}")
        return report
    expect = _Expect(directory, manifest["seq_len"], np.dtype(manifest["dtype"]).newbyteorder("<"),
                     vocab_size or manifest["tokenizer"]["vocab_size"], manifest["eos_id"],
                     manifest["pad_id"])
    paddings: dict[int, np.ndarray] = {}
    for index, shard in enumerate(manifest["shards"]):
        report.shards += 1
        report.sequences += shard["sequences"]
        if not _check_hashes(expect, shard, report):
            continue
        _check_index(expect, shard, report)
        tokens, padding = _load_tokens(expect, shard, report), _load_padding(expect, shard, report)
        if padding is not None:
            paddings[index] = padding
        if tokens is not None and padding is not None:
            report.tokens += tokens.size
            _check_tokens(expect, shard, tokens, padding, report)
    _check_totals(manifest, report)
    _check_spans(expect, manifest, paddings, report)
    _check_curriculum(expect, manifest, report)
    return report


def _check_totals(manifest: Mapping[str, Any], report: IntegrityReport) -> None:
    totals, shards = manifest["totals"], manifest["shards"]
    ending = sum(s["occurrences_ending"] for s in shards)
    if ending != totals["occurrences"]:
        report.fail("eos", MANIFEST, f"{ending} occurrences end in shards, {totals['occurrences']} "
                                     "were packed")
    sequences = sum(s["sequences"] for s in shards)
    if totals["tokens"] + totals["padding_tokens"] != sequences * manifest["seq_len"]:
        report.fail("tokens", MANIFEST, "tokens + padding != sequences x seq_len")


def _sequence_runs(sequence: np.ndarray, phase: np.ndarray, tokens: np.ndarray,
                   names: list[str]) -> list[PhaseRun]:
    """Runs of consecutive sequences holding the same phases, from span pieces (global
    `sequence`, `phase` index into `names`, `tokens`) of whole sequences, sorted by sequence."""
    if not len(sequence):
        return []
    ids, row = np.unique(sequence, return_inverse=True)
    counts = np.zeros((len(ids), len(names)), dtype=np.int64)
    np.add.at(counts, (row, phase), tokens)
    present = counts > 0
    # a new run where the phases present change or a sequence is skipped
    starts = np.flatnonzero(np.r_[True, np.any(present[1:] != present[:-1], axis=1)
                                  | (np.diff(ids) != 1)])
    sums = np.add.reduceat(counts, starts, axis=0)
    return [PhaseRun(tuple(n for n, t in zip(names, total, strict=True) if t), int(ids[start]),
                     int(ids[end - 1]) + 1, tuple(int(t) for t in total if t))
            for start, end, total in zip(starts, [*starts[1:], len(ids)], sums.tolist(),
                                         strict=True)]


def _check_curriculum(expect: _Expect, manifest: Mapping[str, Any],
                      report: IntegrityReport) -> None:
    """The manifest's `curriculum` (when it has one) equals the phase runs rebuilt from
    `spans.parquet`, read one row group at a time: the rows of a group's last sequence wait for
    the next group, so each sequence is counted whole."""
    if "curriculum" not in manifest:
        return  # written before the curriculum was recorded: the loader serves one run
    entry = manifest["spans"]
    path = expect.directory / entry["name"]
    if not path.is_file():
        return  # already reported by the span check
    names = list(manifest.get("phases") or [])
    first = np.array([s["first_sequence"] for s in manifest["shards"]] + [0], dtype=np.int64)
    runs: list[PhaseRun] = []
    held = (np.zeros(0, np.int64),) * 3
    spans = pq.ParquetFile(path)
    for group in range(spans.num_row_groups):
        table = spans.read_row_group(group, columns=["shard", "sequence", "start", "end",
                                                     "phase"])
        phase = _phase_index(table["phase"], names)
        if phase is None:
            report.fail("curriculum", entry["name"], "spans name a phase the manifest's "
                                                     f"phases {names} do not")
            return
        shard, sequence, start, end = (table[c].to_numpy().astype(np.int64)
                                       for c in ("shard", "sequence", "start", "end"))
        pieces = [np.concatenate([old, new]) for old, new in zip(held, (
            first[np.clip(shard, 0, len(first) - 1)] + sequence, phase, end - start),
            strict=True)]
        last = pieces[0] == pieces[0][-1] if len(pieces[0]) else np.zeros(0, bool)
        held = tuple(column[last] for column in pieces)
        # only the last run can join the new ones: earlier runs stay as they are
        runs[-1:] = merge_runs([*runs[-1:], *_sequence_runs(*(c[~last] for c in pieces),
                                                            names)])
    runs[-1:] = merge_runs([*runs[-1:], *_sequence_runs(*held, names)])
    rebuilt = [run.entry() for run in runs]
    if rebuilt != list(manifest["curriculum"]):
        report.fail("curriculum", MANIFEST, f"the curriculum's {len(manifest['curriculum'])} "
                                            f"phase runs differ from the {len(rebuilt)} the "
                                            "spans hold")


def _phase_index(phases: pa.ChunkedArray, names: list[str]) -> np.ndarray | None:
    """Each span's phase as its index in `names`; None when one is not there."""
    index = pc.index_in(phases, value_set=pa.array(names, pa.string()))
    if index.null_count:
        return None
    return index.to_numpy().astype(np.int64)
