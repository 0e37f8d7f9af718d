"""The curriculum reaches the trainer: the manifest maps sequences to phases exactly as the spans
record them, the loader serves each phase shuffled on its own and the phases in the recipe's
order (every rank, every epoch, across a resume), a recipe can still ask for one global shuffle,
and the proxy's budget ends on the last phase. Real builds of Wikipedia and Gutenberg text (GPT-2
tokenizer, main and anneal phases), serial and parallel, and the built-in sample's shards."""

from __future__ import annotations

import json
from collections import defaultdict
from itertools import islice
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from curation.config import ConfigError, load_recipe
from curation.graph import SHARDS
from curation.loader import (
    SequenceSampler,
    ShardDataset,
    epoch_order,
    phase_groups,
    sampler_for,
    served_phases,
)
from curation.partition import PartitionLayout
from curation.proxy.model import _window_stream
from curation.shards import ShardSettings, read_manifest
from curation.stages.dataset import shards_prefix
from curation.storage import LocalStore
from curation.tokenizer import PinnedTokenizer, load_tokenizer
from tests.conftest import REPO
from tests.test_shards import PHASES, build, occurrences, real_documents, tokenizer_path
from tests.test_shards_parallel import planned

SMALL = {"seq_len": 64, "tokens_per_shard": 1024}  # shards and ranges end inside documents


@pytest.fixture(scope="module")
def gpt2() -> PinnedTokenizer:
    return load_tokenizer(tokenizer_path("gpt2"))


@pytest.fixture(scope="module")
def builds(gpt2, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("curriculum")
    items = occurrences(real_documents(80))
    for name, options in {"concat": {}, "best_fit": {"packing": "best_fit"},
                          "global": {"shuffle": "global"}}.items():
        build(items, gpt2, root / name, **SMALL, **options)
    return {name: root / name for name in ("concat", "best_fit", "global")}


def sequence_phases(directory: Path) -> dict[int, list[tuple[int, str, int]]]:
    """Per sequence, its pieces as (start, phase, tokens), from spans.parquet alone."""
    first = [s["first_sequence"] for s in read_manifest(directory)["shards"]]
    pieces: dict[int, list[tuple[int, str, int]]] = defaultdict(list)
    for span in pq.read_table(directory / "spans.parquet").to_pylist():
        pieces[first[span["shard"]] + span["sequence"]].append(
            (span["start"], span["phase"], span["end"] - span["start"]))
    return {sequence: sorted(rows) for sequence, rows in pieces.items()}


def token_phases(pieces: dict[int, list[tuple[int, str, int]]], served: list[int]) -> np.ndarray:
    """The phase index (0 main, 1 anneal) of every token of `served`, in serving order."""
    return np.concatenate([np.repeat([PHASES.index(phase) for _, phase, _ in pieces[s]],
                                     [tokens for _, _, tokens in pieces[s]]) for s in served])


def holds(pieces: dict[int, list[tuple[int, str, int]]], sequence: int) -> set[str]:
    return {phase for _, phase, _ in pieces[sequence]}


# --- the manifest ----------------------------------------------------------------------------


@pytest.mark.parametrize("packing", ["concat", "best_fit"])
def test_the_manifest_curriculum_is_what_the_spans_hold(builds, packing) -> None:
    directory = builds[packing]
    manifest = read_manifest(directory)
    pieces = sequence_phases(directory)
    expected: list[dict] = []
    for sequence in range(manifest["totals"]["sequences"]):
        tokens: dict[str, int] = defaultdict(int)
        for _, phase, count in pieces[sequence]:
            tokens[phase] += count
        names = [p for p in PHASES if p in tokens]
        if expected and expected[-1]["phases"] == names:
            expected[-1]["end_sequence"] = sequence + 1
            for name in names:
                expected[-1]["tokens"][name] += tokens[name]
        else:
            expected.append({"phases": names, "first_sequence": sequence,
                             "end_sequence": sequence + 1, "tokens": dict(tokens)})
    assert manifest["curriculum"] == expected
    totals: dict[str, int] = defaultdict(int)
    for run in manifest["curriculum"]:
        for name, count in run["tokens"].items():
            totals[name] += count
    assert totals == manifest["tokens_by_phase"]
    assert manifest["shuffle"] == "within_phase"
    if packing == "concat":  # one boundary sequence between the two phases
        assert [run["phases"] for run in expected] == [["main"], ["main", "anneal"], ["anneal"]]
        assert expected[1]["end_sequence"] - expected[1]["first_sequence"] == 1
    else:  # the open sequences close at the phase change: no sequence holds both
        assert [run["phases"] for run in expected] == [["main"], ["anneal"]]


def test_a_parallel_build_records_the_same_curriculum(builds, gpt2, tmp_path) -> None:
    items = occurrences(real_documents(80))
    serial = read_manifest(builds["concat"])
    for workers in (1, 2):
        manifest = planned(items, gpt2, tmp_path / f"w{workers}", tmp_path / f"work{workers}",
                           workers, **SMALL)
        assert len(manifest["shards"]) > 16  # phase runs cross shard and range edges
        assert manifest["curriculum"] == serial["curriculum"]
        assert (tmp_path / f"w{workers}" / "manifest.json").read_bytes() == (
            builds["concat"] / "manifest.json").read_bytes()


def test_served_phases_lists_the_groups_in_serving_order(builds) -> None:
    concat = read_manifest(builds["concat"])
    boundary = concat["curriculum"][1]["first_sequence"]
    served = served_phases(concat)
    assert [(s.phase, s.first, s.end) for s in served] == [
        ("main", 0, boundary), ("main/anneal", boundary, boundary + 1),
        ("anneal", boundary + 1, concat["totals"]["sequences"])]
    assert sum(s.tokens for s in served) == concat["totals"]["tokens"]
    best_fit = read_manifest(builds["best_fit"])
    assert [s.phase for s in served_phases(best_fit)] == ["main", "anneal"]
    assert sum(s.tokens for s in served_phases(best_fit)) == best_fit["totals"]["tokens"]
    assert [tuple(s) for s in served_phases(read_manifest(builds["global"]))] == [
        ("main/anneal", 0, concat["totals"]["sequences"], concat["totals"]["tokens"])]


# --- serving order ---------------------------------------------------------------------------


@pytest.mark.parametrize("packing", ["concat", "best_fit"])
@pytest.mark.parametrize("world_size", [1, 2])
@pytest.mark.parametrize("validation_fraction", [0.0, 0.1])
def test_every_anneal_token_comes_after_every_main_token_in_each_rank(
        builds, packing, world_size, validation_fraction) -> None:
    dataset = ShardDataset(builds[packing])
    pieces = sequence_phases(builds[packing])
    epochs = []
    for rank in range(world_size):
        sampler = sampler_for(dataset, rank=rank, world_size=world_size,
                              validation_fraction=validation_fraction)
        for _ in range(2):  # every epoch, not only the first
            served = list(sampler)
            phases = token_phases(pieces, served)
            assert np.all(np.diff(phases) >= 0) and phases[0] == 0 and phases[-1] == 1
            epochs.append(served)
            assert served[: len(served) // 4] != sorted(served[: len(served) // 4])  # shuffled
    assert epochs[0] != epochs[1]  # a new permutation each epoch
    assert sampler_for(dataset, rank=0, world_size=world_size,
                       validation_fraction=validation_fraction).epoch_indices(0).tolist() == (
        epochs[0])  # deterministic from the seed


def test_best_fit_closes_its_open_sequences_at_the_phase_change(builds) -> None:
    pieces = sequence_phases(builds["best_fit"])
    held = [holds(pieces, s) for s in range(len(pieces))]
    assert all(len(h) == 1 for h in held)
    change = held.index({"anneal"})
    assert held[:change] == [{"main"}] * change and {"anneal"} == set().union(*held[change:])
    assert ShardDataset(builds["best_fit"]).padding(change - 1) > 0  # closed part-filled


def test_resume_across_the_phase_boundary_gives_the_same_rest(builds) -> None:
    dataset = ShardDataset(builds["concat"])
    pieces = sequence_phases(builds["concat"])
    options = {"rank": 1, "world_size": 2, "validation_fraction": 0.1}
    reference = sampler_for(dataset, **options)
    epoch0, epoch1 = list(reference), list(reference)
    boundary = next(i for i, s in enumerate(epoch0) if "anneal" in holds(pieces, s))
    for step in (boundary - 1, boundary, boundary + 1, boundary + 5):
        sampler = sampler_for(dataset, **options)
        consumed = list(islice(iter(sampler), step))
        state = json.loads(json.dumps(sampler.state_dict()))  # as a checkpoint stores it
        resumed = sampler_for(dataset, **options)
        resumed.load_state_dict(state)
        rest = list(resumed)
        assert consumed + rest == epoch0
        assert list(resumed) == epoch1
    plain = SequenceSampler(len(dataset), dataset.seed, **options)  # no curriculum
    with pytest.raises(ValueError, match="curriculum"):
        plain.load_state_dict(state)


def test_a_global_shuffle_mixes_the_phases(builds) -> None:
    dataset = ShardDataset(builds["global"])
    assert dataset.shuffle == "global" and dataset.phase_groups() is None
    pieces = sequence_phases(builds["global"])
    served = list(sampler_for(dataset))
    assert served == epoch_order(np.arange(len(dataset)), dataset.seed, 0).tolist()
    first_half = {phase for s in served[: len(served) // 2] for phase in holds(pieces, s)}
    assert first_half == {"main", "anneal"}
    within = phase_groups(dataset.manifest, "within_phase")  # the same build served in order
    ordered = SequenceSampler(len(dataset), dataset.seed, groups=within).epoch_indices(0)
    assert np.all(np.diff(token_phases(pieces, ordered.tolist())) >= 0)


def test_the_shuffle_setting_is_validated_naming_the_field(tmp_path) -> None:
    text = (REPO / "recipes" / "sample.yaml").read_text(encoding="utf-8")
    recipe_path = tmp_path / "sample.yaml"
    recipe_path.write_text(text + "shuffle: random\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"shuffle: .*within_phase.*global"):
        load_recipe(recipe_path)
    recipe_path.write_text(text + "shuffle: global\n", encoding="utf-8")
    recipe = load_recipe(recipe_path)
    assert ShardSettings.from_recipe(recipe).shuffle == "global"
    assert ShardSettings.from_recipe(load_recipe(REPO / "recipes" / "sample.yaml")).shuffle == (
        "within_phase")
    with pytest.raises(ValueError, match="shuffle 'random'"):
        ShardSettings(seq_len=8, tokens_per_shard=64, seed=0, phases=("a",),
                      shuffle="random")  # type: ignore[arg-type]


def test_a_manifest_without_a_curriculum_is_one_phase(builds) -> None:
    manifest = read_manifest(builds["concat"])
    old = {k: v for k, v in manifest.items() if k not in ("curriculum", "shuffle")}
    assert phase_groups(old) is None
    assert [tuple(s) for s in served_phases(old)] == [
        ("main/anneal", 0, manifest["totals"]["sequences"], manifest["totals"]["tokens"])]
    with pytest.raises(ValueError, match="shuffle 'random'"):
        served_phases(manifest, "random")


# --- the proxy's budget ----------------------------------------------------------------------


def test_the_proxy_budget_ends_on_the_last_phase(builds) -> None:
    dataset = ShardDataset(builds["concat"])
    pieces = sequence_phases(builds["concat"])
    sampler = sampler_for(dataset, 7, split="all")
    count = len(dataset) // 5  # a budget well inside one epoch
    scaled = sampler.scaled_epoch(0, count)
    assert len(scaled) == count and len(set(scaled.tolist())) == count
    phases = token_phases(pieces, scaled.tolist())
    assert np.all(np.diff(phases) >= 0) and phases[-1] == 1
    groups = dataset.phase_groups()[scaled]
    shares = np.bincount(groups, minlength=3) / count
    assert np.allclose(shares, np.bincount(dataset.phase_groups(), minlength=3) / len(dataset),
                       atol=1 / count + 1e-9)
    # each phase's share is the start of that phase's permutation
    full = sampler.epoch_indices(0)
    for group in range(3):
        taken = scaled[groups == group].tolist()
        assert taken == full[dataset.phase_groups()[full] == group][: len(taken)].tolist()
    window = dataset.seq_len
    streamed = [w[0] for w in _window_stream(dataset, sampler, window, len(dataset) + count)]
    assert len(streamed) == len(dataset) + count  # one whole epoch, then the scaled one
    second = sampler.scaled_epoch(1, count)  # the next epoch's permutation, scaled
    assert second.tolist() != scaled.tolist()
    for position, index in enumerate([*full.tolist(), *second.tolist()]):
        assert np.array_equal(streamed[position], dataset[index])


# --- the built-in sample ---------------------------------------------------------------------


def test_the_sample_shards_serve_main_then_anneal(sample_run) -> None:
    store = LocalStore(str(sample_run.root))
    version = PartitionLayout(store, SHARDS, "sample").complete_manifest().version
    directory = Path(store.uri(shards_prefix(version)))
    dataset = ShardDataset(directory)
    assert [p for s in dataset.served_phases() for p in s.phase.split("/")][0] == "main"
    assert dataset.served_phases()[-1].phase == "anneal"
    pieces = sequence_phases(directory)
    for world_size in (1, 2):
        for rank in range(world_size):
            served = list(sampler_for(dataset, rank=rank, world_size=world_size))
            assert np.all(np.diff(token_phases(pieces, served)) >= 0)
