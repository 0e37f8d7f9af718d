"""A dependency-light reader over a shard build: numpy and the standard library only.

`ShardDataset` memory-maps every shard's `.bin` (the `.idx` is Megatron-Core's; this reader
needs only the manifest, since every sequence is `seq_len` tokens long) and gives, per sequence
`i`: its tokens, its padding mask (padding is always the end of a sequence; its length per
sequence is in `shard-NNNNN.padding.npy`), its document boundaries and segment ids for
block-diagonal attention masks. Boundaries come from EOS positions: the build encodes text with
special tokens disabled, so EOS appears only where an occurrence ends (the shard verifier
checks it), and a sequence may begin mid-document.

`SequenceSampler` gives each rank its sequence indices for an epoch: a permutation of the split
keyed by (seed, epoch) and dealt round-robin across ranks, with `state_dict()` /
`load_state_dict()` so a restarted run yields exactly the sequences it had not yet consumed.
Orders and the validation split come from a splitmix64 hash of the sequence index keyed by the
seed, in numpy integer arithmetic, so they are the same on every machine and numpy version
(numpy's random streams are not guaranteed across versions).

**Curriculum.** The manifest's `curriculum` (`curation.shards`) maps sequences to phases. With
`shuffle: within_phase` (the default) the sequences are grouped by the phases they hold, groups
served in the recipe's phase order (a boundary sequence holding the end of one phase and the
start of the next sits between the two), each group permuted on its own, every epoch; dealing
round-robin keeps that order in every rank's stream. `served_phases` lists the groups as
served, for the report. `shuffle: global`, and a manifest without a curriculum (an older
build), serve one group.

`torch_dataset` adapts a `ShardDataset` to `torch.utils.data.Dataset`; torch is imported only
there.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np

from curation.hashing import mix64

U64 = np.uint64
GOLDEN = U64(0x9E3779B97F4A7C15)
Split = Literal["train", "validation", "all"]
SHUFFLES = ("within_phase", "global")


def _salt(*parts: object) -> U64:
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return U64(int.from_bytes(digest, "little"))


def keyed_hash(indices: np.ndarray, *key: object) -> np.ndarray:
    """64-bit hash of each index, keyed by `key` (for example seed and epoch); distinct
    indices get distinct hashes."""
    with np.errstate(over="ignore"):
        return mix64(indices.astype(U64) * GOLDEN + _salt(*key))


def split_indices(
    count: int, seed: int, validation_fraction: float
) -> tuple[np.ndarray, np.ndarray]:
    """(train, validation) sequence indices: a sequence is held out when its keyed hash falls
    in the lowest `validation_fraction` of the 64-bit range. Deterministic and disjoint."""
    indices = np.arange(count, dtype=np.int64)
    held_out = held_out_mask(indices, seed, validation_fraction)
    return indices[~held_out], indices[held_out]


def held_out_mask(indices: np.ndarray, seed: int, validation_fraction: float) -> np.ndarray:
    """Whether each sequence of `indices` is in the validation split (`split_indices`' rule,
    for any range of sequences)."""
    if not 0.0 <= validation_fraction < 1.0:
        raise ValueError(f"validation_fraction {validation_fraction} is not in [0, 1)")
    threshold = U64(min(int(validation_fraction * 2.0**64), 2**64 - 1))
    return keyed_hash(indices, "validation", seed) < threshold


def epoch_order(indices: np.ndarray, seed: int, epoch: int,
                groups: np.ndarray | None = None) -> np.ndarray:
    """`indices` in the order of their hash keyed by (seed, epoch): a different permutation
    each epoch, the same on every run. With `groups` (per index, the served position of its
    phase group) all of group 0 first, then group 1, ..., each permuted on its own."""
    keys = keyed_hash(indices, "epoch", seed, epoch)
    if groups is None:
        return indices[np.argsort(keys, kind="stable")]
    return indices[np.lexsort((keys, groups))]


class ServedPhase(NamedTuple):
    """Sequences [first, end) served as one phase group: `phase` is the phase's name, or the
    names of the phases the sequences hold joined by "/" (a boundary between two phases, or
    everything under a global shuffle); `tokens` without padding, EOS included."""

    phase: str
    first: int
    end: int
    tokens: int


def curriculum(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The manifest's phase runs in sequence order; one run of everything for a manifest
    written before the curriculum was recorded."""
    if "curriculum" in manifest:
        return list(manifest["curriculum"])
    phases = list(manifest.get("phases") or ["all"])
    return [{"phases": phases, "first_sequence": 0,
             "end_sequence": manifest["totals"]["sequences"],
             "tokens": {"/".join(phases): manifest["totals"]["tokens"]}}]


def _shuffle(manifest: dict[str, Any], shuffle: str | None) -> str:
    chosen = shuffle or manifest.get("shuffle", "within_phase")
    if chosen not in SHUFFLES:
        raise ValueError(f"shuffle {chosen!r}: use 'within_phase' or 'global'")
    return chosen


def _served_runs(manifest: dict[str, Any], shuffle: str | None) -> list[tuple[int, dict]]:
    """(group, run) in served order: groups ordered by the first and last phase they hold."""
    runs = curriculum(manifest)
    if _shuffle(manifest, shuffle) == "global":
        return [(0, run) for run in runs]
    order = {name: i for i, name in enumerate(manifest.get("phases") or [])}

    def key(run: dict[str, Any]) -> tuple[int, int]:
        held = [order.get(name, len(order)) for name in run["phases"]]
        return min(held), max(held)

    keys = sorted({key(run) for run in runs})
    return sorted(((keys.index(key(run)), run) for run in runs), key=lambda item: item[0])


def served_phases(manifest: dict[str, Any], shuffle: str | None = None) -> list[ServedPhase]:
    """The phase groups in the order the loader serves them each epoch (`shuffle` overrides
    the manifest's): [(phase, first, end, tokens)], one row per run of sequences."""
    served = _served_runs(manifest, shuffle)
    if _shuffle(manifest, shuffle) == "global":
        runs = [run for _, run in served]
        names = list(dict.fromkeys(name for run in runs for name in run["phases"]))
        return [ServedPhase("/".join(names), 0, runs[-1]["end_sequence"] if runs else 0,
                            sum(sum(run["tokens"].values()) for run in runs))]
    return [ServedPhase("/".join(run["phases"]), run["first_sequence"], run["end_sequence"],
                        sum(run["tokens"].values())) for _, run in served]


def phase_groups(manifest: dict[str, Any], shuffle: str | None = None) -> np.ndarray | None:
    """Per sequence, the served position of its phase group (`epoch_order`'s `groups`); None
    when everything is one group."""
    served = _served_runs(manifest, shuffle)
    if len({group for group, _ in served}) <= 1:
        return None
    groups = np.zeros(manifest["totals"]["sequences"], dtype=np.int64)
    for group, run in served:
        groups[run["first_sequence"] : run["end_sequence"]] = group
    return groups


class ShardDataset:
    """Random access to the packed sequences of a shard build (local folder)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.manifest: dict[str, Any] = json.loads(
            (self.directory / "manifest.json").read_text(encoding="utf-8"))
        self.seq_len: int = self.manifest["seq_len"]
        self.dtype = np.dtype(self.manifest["dtype"]).newbyteorder("<")
        self.eos_id: int = self.manifest["eos_id"]
        self.pad_id: int = self.manifest["pad_id"]
        self.seed: int = self.manifest["seed"]
        self.shuffle: str = _shuffle(self.manifest, None)
        shards = self.manifest["shards"]
        self._first = np.array([s["first_sequence"] for s in shards], dtype=np.int64)
        self._length = sum(s["sequences"] for s in shards)
        self._tokens: list[np.ndarray | None] = [None] * len(shards)
        self._padding: list[np.ndarray | None] = [None] * len(shards)

    def __len__(self) -> int:
        return self._length

    def __getstate__(self) -> dict[str, Any]:
        # DataLoader workers reopen the memory maps instead of receiving copies of them.
        state = self.__dict__.copy()
        state["_tokens"] = [None] * len(self._tokens)
        state["_padding"] = [None] * len(self._padding)
        return state

    def _locate(self, index: int) -> tuple[int, int]:
        if not -self._length <= index < self._length:
            raise IndexError(f"sequence {index} out of range ({self._length} sequences)")
        index %= self._length
        shard = int(np.searchsorted(self._first, index, side="right")) - 1
        return shard, index - int(self._first[shard])

    def _shard_tokens(self, shard: int) -> np.ndarray:
        tokens = self._tokens[shard]
        if tokens is None:
            entry = self.manifest["shards"][shard]
            tokens = np.memmap(self.directory / entry["files"]["bin"]["name"], dtype=self.dtype,
                               mode="r", shape=(entry["sequences"], self.seq_len))
            self._tokens[shard] = tokens
        return tokens

    def _shard_padding(self, shard: int) -> np.ndarray:
        padding = self._padding[shard]
        if padding is None:
            name = self.manifest["shards"][shard]["files"]["padding"]["name"]
            padding = np.load(self.directory / name, allow_pickle=False)
            self._padding[shard] = padding
        return padding

    def served_phases(self) -> list[ServedPhase]:
        return served_phases(self.manifest)

    def phase_groups(self) -> np.ndarray | None:
        return phase_groups(self.manifest)

    def __getitem__(self, index: int) -> np.ndarray:
        """The `seq_len` token ids of sequence `index` (a read-only memory-mapped view)."""
        shard, row = self._locate(index)
        return self._shard_tokens(shard)[row]

    def padding(self, index: int) -> int:
        """How many padding tokens end sequence `index`."""
        shard, row = self._locate(index)
        return int(self._shard_padding(shard)[row])

    def padding_mask(self, index: int) -> np.ndarray:
        """True at padding positions (to mask out of the loss and attention)."""
        return np.arange(self.seq_len) >= self.seq_len - self.padding(index)

    def document_boundaries(self, index: int) -> np.ndarray:
        """Segment boundaries of sequence `index`, `cu_seqlens`-style: 0, the position after
        each EOS, and the end of the tokens; the padding, if any, is a last segment of its own
        up to `seq_len`."""
        return self._boundaries(*self._row(index))

    def segment_ids(self, index: int) -> np.ndarray:
        """Per position, which document segment it is in (0, 1, ...); -1 on padding. Equal ids
        on query and key positions (with causality) give the block-diagonal mask."""
        return self._segments(*self._row(index))

    def sample(self, index: int) -> dict[str, np.ndarray]:
        """Everything a training step needs about sequence `index`, as fixed-size arrays (the
        sequence's shard looked up once)."""
        tokens, valid = self._row(index)
        return {"input_ids": np.asarray(tokens).astype(np.int64),
                "padding_mask": np.arange(self.seq_len) >= valid,
                "segment_ids": self._segments(tokens, valid)}

    def _row(self, index: int) -> tuple[np.ndarray, int]:
        """Sequence `index`'s tokens (a memory-mapped view) and how many of them are not
        padding, from one lookup of its shard."""
        shard, row = self._locate(index)
        return (self._shard_tokens(shard)[row],
                self.seq_len - int(self._shard_padding(shard)[row]))

    def _boundaries(self, tokens: np.ndarray, valid: int) -> np.ndarray:
        ends = np.flatnonzero(np.asarray(tokens[:valid]) == self.eos_id) + 1
        bounds = np.unique(np.concatenate([[0], ends, [valid, self.seq_len]]))
        return bounds.astype(np.int32)

    def _segments(self, tokens: np.ndarray, valid: int) -> np.ndarray:
        bounds = self._boundaries(tokens, valid)
        segments = np.repeat(np.arange(len(bounds) - 1, dtype=np.int32), np.diff(bounds))
        segments[valid:] = -1
        return segments


class SequenceSampler:
    """One rank's sequence indices, epoch after epoch, with resumable state.

    Each epoch is a keyed permutation of the split's indices, within each phase group when
    `groups` gives one per sequence (`phase_groups`), dealt round-robin to the ranks (disjoint,
    and together covering the split, each rank's share in the epoch's order; with `drop_last`
    every rank gets the same count and the few left over, at the end of the last group, are
    skipped). Iterating yields the rest of the current epoch and then
    moves to the next one. `state_dict()` counts what was yielded: with a DataLoader that
    prefetches, save the position of what was actually consumed.
    """

    def __init__(
        self,
        num_sequences: int,
        seed: int,
        *,
        rank: int = 0,
        world_size: int = 1,
        split: Split = "train",
        validation_fraction: float = 0.0,
        shuffle: bool = True,
        drop_last: bool = False,
        groups: np.ndarray | None = None,
    ) -> None:
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in [0, world_size={world_size})")
        if split not in ("train", "validation", "all"):
            raise ValueError(f"split {split!r}: use 'train', 'validation' or 'all'")
        self.num_sequences, self.seed, self.rank, self.world_size = (num_sequences, seed, rank,
                                                                     world_size)
        self.split, self.validation_fraction = split, validation_fraction
        self.shuffle, self.drop_last = shuffle, drop_last
        train, validation = split_indices(num_sequences, seed, validation_fraction)
        self.indices = {"train": train, "validation": validation,
                        "all": np.arange(num_sequences, dtype=np.int64)}[split]
        if groups is not None and len(groups) != num_sequences:
            raise ValueError(f"groups has {len(groups)} entries for {num_sequences} sequences")
        self.sequence_groups = None if groups is None else np.asarray(groups, dtype=np.int64)
        self.groups = None if groups is None else self.sequence_groups[self.indices]
        self.curriculum = (None if groups is None else
                           hashlib.blake2b(np.asarray(groups, dtype="<i8").tobytes(),
                                           digest_size=8).hexdigest())
        self.epoch = 0
        self.position = 0

    def epoch_indices(self, epoch: int) -> np.ndarray:
        """This rank's indices for `epoch`, in order."""
        if self.shuffle:
            order = epoch_order(self.indices, self.seed, epoch, self.groups)
        elif self.groups is not None:
            order = self.indices[np.argsort(self.groups, kind="stable")]
        else:
            order = self.indices
        if self.drop_last:
            order = order[: len(order) // self.world_size * self.world_size]
        return order[self.rank :: self.world_size]

    def scaled_epoch(self, epoch: int, count: int) -> np.ndarray:
        """`count` of this rank's indices for `epoch` with the curriculum scaled down to them:
        each phase group keeps its share of `count` (largest remainders), taken from the start
        of its permutation, groups still in order. A run whose budget ends inside an epoch
        (a proxy at matched compute) still sees every phase, the last one last."""
        order = self.epoch_indices(epoch)
        if count >= len(order) or self.sequence_groups is None:
            return order[:count]
        group = self.sequence_groups[order]
        labels, sizes = np.unique(group, return_counts=True)
        exact = count * sizes / len(order)
        quota = np.floor(exact).astype(np.int64)
        extra = np.argsort(-(exact - quota), kind="stable")[: count - int(quota.sum())]
        quota[extra] += 1
        slot = np.searchsorted(labels, group)
        rank = np.arange(len(order)) - (np.cumsum(sizes) - sizes)[slot]
        return order[rank < quota[slot]]

    def __len__(self) -> int:
        return len(self.epoch_indices(self.epoch))

    def __iter__(self) -> Iterator[int]:
        indices = self.epoch_indices(self.epoch)
        while self.position < len(indices):
            index = int(indices[self.position])
            self.position += 1
            yield index
        self.epoch, self.position = self.epoch + 1, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch, self.position = epoch, 0

    def _identity(self) -> dict[str, Any]:
        return {"num_sequences": self.num_sequences, "seed": self.seed, "rank": self.rank,
                "world_size": self.world_size, "split": self.split,
                "validation_fraction": self.validation_fraction, "shuffle": self.shuffle,
                "drop_last": self.drop_last, "curriculum": self.curriculum}

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "position": self.position, **self._identity()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resumes at `state`; it must come from a sampler over the same data, seed, split and
        rank layout (a different one would yield other sequences)."""
        mismatched = {k: (state.get(k), v) for k, v in self._identity().items()
                      if state.get(k) != v}
        if mismatched:
            raise ValueError(f"state from a different sampler: {mismatched} (saved, current)")
        self.epoch, self.position = int(state["epoch"]), int(state["position"])


def sampler_for(dataset: ShardDataset, seed: int | None = None,
                **options: Any) -> SequenceSampler:
    """A sampler over `dataset` serving its curriculum (`phase_groups`), keyed by `seed`
    (default: the build's own)."""
    return SequenceSampler(len(dataset), dataset.seed if seed is None else seed,
                           groups=dataset.phase_groups(), **options)


@cache
def _torch_dataset_class() -> type:
    import torch  # only here: the loader itself needs numpy alone

    class TorchShardDataset(torch.utils.data.Dataset):
        """`ShardDataset` as tensors: input_ids (int64), padding_mask (bool, True at
        padding), segment_ids (int32, -1 on padding)."""

        def __init__(self, dataset: ShardDataset) -> None:
            self.dataset = dataset

        def __len__(self) -> int:
            return len(self.dataset)

        def __getitem__(self, index: int) -> dict[str, Any]:
            return {name: torch.from_numpy(np.ascontiguousarray(array))
                    for name, array in self.dataset.sample(int(index)).items()}

    return TorchShardDataset


def torch_dataset(dataset: ShardDataset) -> Any:
    """A `torch.utils.data.Dataset` over `dataset` (raises ImportError without torch). Use a
    `SequenceSampler` as the DataLoader's sampler for the epoch order and rank sharding."""
    return _torch_dataset_class()(dataset)
