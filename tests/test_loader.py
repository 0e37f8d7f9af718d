"""The shard loader over a real build (GPT-2, Wikipedia and Gutenberg text): random access,
epoch order, rank sharding, resume, the validation split, document boundaries, torch."""

from __future__ import annotations

from collections import Counter
from itertools import islice
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from curation.loader import (
    SequenceSampler,
    ShardDataset,
    epoch_order,
    sampler_for,
    split_indices,
    torch_dataset,
)
from curation.shards import read_manifest
from curation.tokenizer import load_tokenizer
from tests.test_shards import (
    build,
    occurrences,
    read_tokens,
    real_documents,
    require_module,
    tokenizer_path,
)


@pytest.fixture(scope="module", params=["concat", "best_fit"])
def built(request, tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp(request.param)
    tokenizer = load_tokenizer(tokenizer_path("gpt2"))
    build(occurrences(real_documents(80)), tokenizer, directory, packing=request.param)
    return directory


@pytest.fixture(scope="module")
def dataset(built: Path) -> ShardDataset:
    return ShardDataset(built)


def test_len_and_random_access_match_the_files(dataset: ShardDataset, built: Path) -> None:
    tokens, padding = read_tokens(built)
    assert len(dataset) == len(tokens) == read_manifest(built)["totals"]["sequences"]
    for index in [0, 1, 15, 16, 17, len(tokens) // 2, len(tokens) - 1, -1]:
        assert np.array_equal(dataset[index], tokens[index])
        assert dataset.padding(index) == padding[index]
    with pytest.raises(IndexError):
        dataset[len(tokens)]


def test_epoch_order_is_a_deterministic_permutation_that_changes_per_epoch(dataset) -> None:
    indices = np.arange(len(dataset))
    first = epoch_order(indices, seed=11, epoch=0)
    assert np.array_equal(np.sort(first), indices)
    assert np.array_equal(first, epoch_order(indices, seed=11, epoch=0))
    assert not np.array_equal(first, epoch_order(indices, seed=11, epoch=1))
    assert not np.array_equal(first, epoch_order(indices, seed=12, epoch=0))
    assert not np.array_equal(first, indices)
    sampler = sampler_for(dataset)
    one, two = list(sampler), list(sampler)  # iterating moves on to the next epoch
    assert sorted(one) == sorted(two) == list(range(len(dataset))) and one != two


def test_ranks_are_disjoint_and_cover_the_split(dataset) -> None:
    for world_size in (1, 3, 4):
        shares = [list(sampler_for(dataset, rank=r, world_size=world_size))
                  for r in range(world_size)]
        counts = Counter(index for share in shares for index in share)
        assert set(counts) == set(range(len(dataset))) and set(counts.values()) == {1}
        assert max(map(len, shares)) - min(map(len, shares)) <= 1
    even = [len(sampler_for(dataset, rank=r, world_size=3, drop_last=True)) for r in range(3)]
    assert len(set(even)) == 1 and sum(even) > len(dataset) - 3


def test_resume_from_any_step_gives_exactly_the_rest(dataset) -> None:
    options = {"rank": 1, "world_size": 2, "validation_fraction": 0.1}
    reference = sampler_for(dataset, **options)
    epoch0, epoch1 = list(reference), list(reference)
    for step in (0, 1, 7, len(epoch0) - 1, len(epoch0)):
        sampler = sampler_for(dataset, **options)
        consumed = list(islice(iter(sampler), step))
        state = sampler.state_dict()
        resumed = sampler_for(dataset, **options)
        resumed.load_state_dict(state)
        assert consumed + list(resumed) == epoch0
        assert list(resumed) == epoch1  # and the next epoch continues as it would have
    with pytest.raises(ValueError, match="different sampler"):
        sampler_for(dataset, rank=0, world_size=2).load_state_dict(state)


def test_validation_split_is_deterministic_and_disjoint(dataset) -> None:
    train, validation = split_indices(len(dataset), seed=11, validation_fraction=0.2)
    assert not set(train) & set(validation)
    assert sorted([*train, *validation]) == list(range(len(dataset)))
    assert 0.1 < len(validation) / len(dataset) < 0.3
    again = split_indices(len(dataset), seed=11, validation_fraction=0.2)
    assert np.array_equal(again[1], validation)
    held_out = sampler_for(dataset, split="validation", validation_fraction=0.2)
    assert sorted(held_out) == sorted(validation.tolist())
    trained = sampler_for(dataset, split="train", validation_fraction=0.2)
    assert not set(trained) & set(validation.tolist())
    assert len(split_indices(len(dataset), 11, 0.0)[1]) == 0


def test_document_boundaries_follow_the_spans(dataset, built: Path) -> None:
    spans = pq.read_table(built / "spans.parquet").to_pylist()
    first = [s["first_sequence"] for s in dataset.manifest["shards"]]
    ends: dict[int, list[int]] = {}
    for span in spans:
        ends.setdefault(first[span["shard"]] + span["sequence"], []).append(span["end"])
    for index in range(len(dataset)):
        valid = dataset.seq_len - dataset.padding(index)
        expected = sorted({0, *ends[index], valid, dataset.seq_len})
        assert dataset.document_boundaries(index).tolist() == expected
        segments = dataset.segment_ids(index)
        mask = dataset.padding_mask(index)
        assert np.all(segments[mask] == -1) and np.all(segments[~mask] >= 0)
        assert int(mask.sum()) == dataset.padding(index)
        assert np.all(np.diff(segments[~mask]) >= 0)
        sample = dataset.sample(index)  # one lookup of the shard: the same arrays
        assert np.array_equal(sample["input_ids"], np.asarray(dataset[index], np.int64))
        assert np.array_equal(sample["padding_mask"], mask)
        assert np.array_equal(sample["segment_ids"], segments)
    assert any(len(dataset.document_boundaries(i)) > 3 for i in range(len(dataset)))


def test_torch_dataset_adapter(dataset) -> None:
    require_module("torch")
    import torch

    adapted = torch_dataset(dataset)
    assert len(adapted) == len(dataset)
    sampler = sampler_for(dataset, rank=0, world_size=2)
    loader = torch.utils.data.DataLoader(adapted, batch_size=4, sampler=sampler)
    batch = next(iter(loader))
    first = list(sampler_for(dataset, rank=0, world_size=2))[:4]
    assert batch["input_ids"].shape == (4, dataset.seq_len)
    assert batch["input_ids"].dtype == torch.int64
    assert torch.equal(batch["input_ids"][1], torch.from_numpy(dataset[first[1]].astype(np.int64)))
    assert batch["padding_mask"].dtype == torch.bool and batch["segment_ids"].dtype == torch.int32


def test_sampler_rejects_bad_layouts() -> None:
    with pytest.raises(ValueError, match="rank"):
        SequenceSampler(10, 0, rank=2, world_size=2)
    with pytest.raises(ValueError, match="validation_fraction"):
        SequenceSampler(10, 0, validation_fraction=1.0)
