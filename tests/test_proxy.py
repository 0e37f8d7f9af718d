"""The ablation gate (`curation.proxy`): eval parsers on the real benchmark files, the
multiple-choice scorer on toy models that know the answers or nothing, the training loop on tiny
shards of real text (GPT-2), determinism, the comparison verdict and the report's JSON.

Tests that need torch skip without it (fail in CI); tests that read ../shared/data skip
without it (fail in CI)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from curation.evals import load_benchmark, read_benchmark_list
from curation.proxy.compare import ComparisonRule, compare, render_comparison, render_report
from curation.proxy.evalsets import (
    MultipleChoiceItem,
    benchmark_path,
    eval_sets,
    load_multiple_choice,
    parse_item,
)
from curation.proxy.reports import (
    SUPPORTED_BENCHMARKS,
    EvalSettings,
    HeldoutLoss,
    ProxyReport,
    ProxySettings,
    TaskScore,
    bootstrap_interval,
)
from curation.proxy.scoring import item_credit
from tests.conftest import require_shared_data
from tests.test_decontamination import EVALS_EXAMPLE
from tests.test_shards import build, occurrences, real_documents, require_module, tokenizer_path

# --- toy tokenizer and models -----------------------------------------------------------------


class CharTokenizer:
    """One id per character; id 0 is EOS."""

    eos_id = 0

    def __init__(self, alphabet: str) -> None:
        self.ids = {char: i + 1 for i, char in enumerate(sorted(set(alphabet)))}
        self.vocab_size = len(self.ids) + 1

    def encode_batch(self, texts):
        return [[self.ids[char] for char in text] for text in texts]


def torch_module():
    require_module("torch")
    import torch

    return torch


def uniform_model(vocab_size: int):
    """A "model" that gives every token the same probability."""
    torch = torch_module()

    class Uniform(torch.nn.Module):
        def forward(self, input_ids):
            return torch.zeros(*input_ids.shape, vocab_size)

    return Uniform()


def lookup_model(tokenizer: CharTokenizer, items: list[MultipleChoiceItem]):
    """A "model" that knows the gold answers: after any prefix of EOS + an item's gold text it
    puts a large logit on the gold text's next token, and is uniform elsewhere."""
    torch = torch_module()
    children: dict[tuple[int, int], int] = {}  # a trie of the gold texts: (node, id) -> node
    following: dict[int, int] = {}  # node -> the gold text's next id
    for item in items:
        prefix, scored = item.pairs()[item.gold]
        ids = [tokenizer.eos_id, *tokenizer.encode_batch([prefix + scored])[0]]
        node = 0
        for t in range(len(ids) - 1):
            node = children.setdefault((node, ids[t]), len(children) + 1)
            following[node] = ids[t + 1]

    class Lookup(torch.nn.Module):
        def forward(self, input_ids):
            logits = torch.zeros(*input_ids.shape, tokenizer.vocab_size)
            for b, row in enumerate(input_ids.tolist()):
                node = 0
                for t, token in enumerate(row):
                    node = children.get((node, token), -1)
                    if node in following:
                        logits[b, t, following[node]] = 12.0
            return logits

    return Lookup()


TOY_ITEMS = [
    MultipleChoiceItem("two plus two is", (" four", " five", " twenty two"), 0, item_id="t:1"),
    MultipleChoiceItem("the capital of france is", (" rome", " paris"), 1, item_id="t:2"),
    MultipleChoiceItem("the sky is", (" blue", " green", " red", " bluish grey"), 3,
                       item_id="t:3"),
    MultipleChoiceItem("", ("the cup fell off the shelf so the cup",
                            "the cup fell off the shelf so the shelf"), 0,
                       continuation=" was broken", item_id="t:4"),
    MultipleChoiceItem("snow is", (" cold", " hot"), 0, item_id="t:5"),
]
TOY_TOKENIZER = CharTokenizer("".join(t for item in TOY_ITEMS for pair in item.pairs()
                                      for t in pair))


# --- parsers on the real eval files ----------------------------------------------------------


@pytest.fixture(scope="module")
def evals_dir() -> Path:
    return require_shared_data() / "evals"


def test_every_supported_benchmark_parses_with_the_gold_choice_the_file_names(evals_dir) -> None:
    specs = {spec.name: spec for spec in read_benchmark_list(EVALS_EXAMPLE, evals_dir)}
    for name in SUPPORTED_BENCHMARKS:
        items = load_multiple_choice(name, evals_dir)
        lines = [line for line in benchmark_path(name, evals_dir).read_text().splitlines()
                 if line.strip()]
        assert len(items) == len(lines) > 0, name
        # curation.evals pairs each prompt with its gold answer text: it must be ours.
        reference = load_benchmark(specs[name])
        assert len(reference) == len(items)
        for item, ref in zip(items, reference, strict=True):
            assert item.item_id == f"{name}:{ref.item_id.rsplit(':', 1)[1]}"
            gold = item.choices[item.gold]
            if name == "winogrande":
                assert gold + item.continuation == ref.text
            else:
                assert ref.text.endswith(gold.strip()), (name, item.item_id)
                assert gold.startswith(" ") and not item.continuation
        # (SIQA has a few items whose two answers are the same text: they always tie.)
        same = sum(len(set(item.choices)) < len(item.choices) for item in items)
        assert same <= len(items) // 100, name


def test_first_items_have_the_expected_context_choices_and_gold(evals_dir) -> None:
    first = {name: load_multiple_choice(name, evals_dir)[0] for name in SUPPORTED_BENCHMARKS}
    arc = first["arc_easy"]
    assert arc.context.startswith("Question: Which statement best explains why photosynthesis")
    assert arc.context.endswith("?\nAnswer:")
    assert arc.choices[arc.gold] == " Sunlight is the source of energy for nearly all ecosystems."
    assert first["copa"].context == "The man turned on the faucet, therefore"
    assert first["copa"].choices == (" the toilet filled with water.",
                                     " water flowed from the spout.")
    assert first["copa"].gold == 1
    assert first["openbookqa"].choices[first["openbookqa"].gold] == " quit eating lunch out"
    assert first["boolq"].choices == (" no", " yes") and first["boolq"].gold == 0
    assert first["boolq"].context.startswith("Passage: All biomass goes through")
    piqa = first["piqa"]
    assert piqa.context == "Question: How do I ready a guinea pig cage for it's new occupants?" \
                           "\nAnswer:"
    assert piqa.choices[piqa.gold].startswith(" Provide the guinea pig with a cage full of a "
                                              "few inches of bedding made of ripped paper")
    # lettered choices rebuilt from the query's "Choices:" block, which leaves the context
    csqa = first["commonsense_qa"]
    assert csqa.choices == (" bank", " department store", " mall", " new york")
    assert csqa.gold == 0
    assert csqa.context == ("Question: A revolving door is convenient for two direction travel, "
                            "but it also serves as a security measure at a what?\nAnswer:")
    siqa = first["siqa"]
    assert siqa.choices == (" make a new plan", " Find somewhere to go") and siqa.gold == 1
    assert "Choices:" not in siqa.context and siqa.context.endswith("\nAnswer:")
    wino = first["winogrande"]
    assert wino.context == "" and wino.continuation == " always got the easier cases."
    assert wino.choices[wino.gold] == "Sarah was a much better surgeon than Maria so Maria"


def test_capped_selection_is_a_fixed_subset_in_file_order(evals_dir) -> None:
    everything = load_multiple_choice("piqa", evals_dir)
    chosen = load_multiple_choice("piqa", evals_dir, max_items=50)
    assert chosen == load_multiple_choice("piqa", evals_dir, max_items=50)
    assert len(chosen) == 50 and set(chosen) <= set(everything)
    lines = [int(item.item_id.split(":")[1]) for item in chosen]
    assert lines == sorted(lines) and lines != list(range(1, 51))
    assert chosen != load_multiple_choice("piqa", evals_dir, max_items=50, selection_seed=1)
    assert len(load_multiple_choice("copa", evals_dir, max_items=500)) == 100


def test_malformed_records_fail_clearly() -> None:
    with pytest.raises(ValueError, match="gold 4 is out of range"):
        parse_item("arc_easy", {"query": "Q", "choices": ["a", "b"], "gold": 4}, "arc_easy:3")
    with pytest.raises(ValueError, match="not in the 'Choices:' block"):
        parse_item("siqa", {"query": "Context: x\nChoices:\nA. one\nB. two\nAnswer:",
                            "choices": ["A", "C"], "gold": 0})
    with pytest.raises(ValueError, match="no multiple-choice parser"):
        parse_item("gsm8k", {"query": "Q", "choices": ["a", "b"], "gold": 0})
    with pytest.raises(ValueError, match="'mmlu' is neither declared in pipeline.yaml"):
        eval_sets(EvalSettings(benchmarks=("mmlu",)).benchmarks, "/nowhere")
    with pytest.raises(ValueError, match="name each once"):
        EvalSettings(benchmarks=("copa", "copa"))


# --- scoring -----------------------------------------------------------------------------------


def test_tie_rule_splits_the_credit_among_the_tied_choices() -> None:
    assert item_credit([0.5, 0.1], 0) == 1.0
    assert item_credit([0.5, 0.1], 1) == 0.0
    assert item_credit([1.0, 1.0, 0.0], 0) == 0.5
    assert item_credit([1.0, 1.0, 0.0], 2) == 0.0
    assert item_credit([0.0, 2.0, 2.0, 2.0], 3) == pytest.approx(1 / 3)


def test_a_model_that_knows_the_answers_gets_full_marks() -> None:
    from curation.proxy.scoring import score_multiple_choice

    model = lookup_model(TOY_TOKENIZER, TOY_ITEMS)
    for normalisation in ("chars", "tokens", "none"):
        score = score_multiple_choice(model, TOY_TOKENIZER, TOY_ITEMS, name="toy",
                                      normalisation=normalisation, resamples=200, batch_size=2)
        assert score.accuracy == 1.0 and score.item_scores == [1.0] * len(TOY_ITEMS)
        assert (score.ci_low, score.ci_high) == (1.0, 1.0)
        assert score.item_ids == [item.item_id for item in TOY_ITEMS]


def test_a_uniform_model_ties_everywhere_and_scores_exactly_chance() -> None:
    from curation.proxy.scoring import choice_scores, score_multiple_choice

    model = uniform_model(TOY_TOKENIZER.vocab_size)
    score = score_multiple_choice(model, TOY_TOKENIZER, TOY_ITEMS, name="toy",
                                  normalisation="tokens", resamples=200)
    expected = [1 / len(item.choices) for item in TOY_ITEMS]
    assert score.item_scores == expected
    assert score.accuracy == pytest.approx(score.chance) and score.chance == np.mean(expected)
    # Unnormalised, a uniform model prefers the shortest choice (no tie).
    raw = choice_scores(model, TOY_TOKENIZER, TOY_ITEMS[:1], normalisation="none")[0]
    log_v = math.log(TOY_TOKENIZER.vocab_size)
    assert raw == pytest.approx([-len(c) * log_v for c in TOY_ITEMS[0].choices])


def test_length_normalisation_divides_by_characters_or_tokens() -> None:
    from curation.proxy.scoring import choice_scores
    from curation.tokenizer import load_tokenizer

    gpt2 = load_tokenizer(tokenizer_path("gpt2"))
    model = uniform_model(gpt2.vocab_size)
    item = MultipleChoiceItem("The weather today is", (" sunny", " extraordinarily unpleasant"), 0)
    tokens = [len(ids) for ids in gpt2.encode_batch(list(item.choices))]
    log_v = math.log(gpt2.vocab_size)
    by = {n: choice_scores(model, gpt2, [item], normalisation=n)[0]
          for n in ("chars", "tokens", "none")}
    assert by["none"] == pytest.approx([-n * log_v for n in tokens])
    assert by["tokens"] == pytest.approx([-log_v, -log_v])
    assert by["chars"] == pytest.approx([-n * log_v / len(c)
                                         for n, c in zip(tokens, item.choices, strict=True)])


def test_long_contexts_are_cut_from_the_left_to_the_model_context() -> None:
    from curation.proxy.scoring import choice_scores

    model = lookup_model(TOY_TOKENIZER, TOY_ITEMS)
    cut = choice_scores(model, TOY_TOKENIZER, TOY_ITEMS[:2], max_len=8, normalisation="none")
    assert len(cut) == 2 and all(len(row) == len(item.choices)
                                 for row, item in zip(cut, TOY_ITEMS, strict=False))


def test_heldout_loss_predicts_every_token_once() -> None:
    from curation.proxy.scoring import heldout_loss

    model = uniform_model(TOY_TOKENIZER.vocab_size)
    texts = ["the sky is blue" * 3, "snow is cold"]
    result = heldout_loss(model, TOY_TOKENIZER, texts, max_len=8)
    assert result.tokens == sum(map(len, texts)) and result.bytes == result.tokens
    assert result.loss == pytest.approx(math.log(TOY_TOKENIZER.vocab_size))
    assert result.bits_per_byte == pytest.approx(result.loss / math.log(2))
    assert heldout_loss(model, TOY_TOKENIZER, texts, max_tokens=10).texts == 1


def test_bootstrap_interval_is_seeded_and_brackets_the_mean() -> None:
    values = [1.0] * 30 + [0.0] * 70
    low, high = bootstrap_interval(values, 500, 0.95, seed=3)
    assert (low, high) == bootstrap_interval(values, 500, 0.95, seed=3)
    assert (low, high) != bootstrap_interval(values, 500, 0.95, seed=4)
    assert low < 0.3 < high and 0.15 < low and high < 0.45
    assert bootstrap_interval([1.0] * 10, 100, 0.9, seed=0) == (1.0, 1.0)


# --- the model --------------------------------------------------------------------------------


def tiny_settings(**overrides) -> ProxySettings:
    values = {"layers": 1, "d_model": 32, "heads": 2, "seq_len": 64, "batch_size": 4,
              "micro_batch_size": None, "token_budget": 4 * 64 * 30, "learning_rate": 1e-2,
              "threads": 1, "eval": EvalSettings(benchmarks=("copa", "arc_easy"), max_items=20,
                                                 resamples=100, heldout_max_tokens=2000)}
    return ProxySettings(**(values | overrides))


def test_block_diagonal_attention_keeps_documents_apart() -> None:
    torch = torch_module()
    from curation.proxy.model import build_model

    torch.manual_seed(0)
    model = build_model(100, tiny_settings(seq_len=12)).eval()
    ids = torch.randint(1, 100, (1, 12))
    changed = ids.clone()
    changed[0, :3] = (changed[0, :3] + 1) % 100  # edit the first document only
    segments = torch.tensor([[0] * 5 + [1] * 7])
    with torch.no_grad():
        masked = model.hidden(ids, segments), model.hidden(changed, segments)
        causal = model.hidden(ids), model.hidden(changed)
    assert torch.equal(masked[0][0, 5:], masked[1][0, 5:])
    assert not torch.allclose(causal[0][0, 5:], causal[1][0, 5:])
    assert not torch.allclose(masked[0][0, :5], masked[1][0, :5])


def test_adaptive_head_is_a_distribution_over_ids_in_any_rank_order() -> None:
    torch = torch_module()
    from curation.proxy.model import build_model

    settings = tiny_settings(adaptive_cutoffs=(20, 60), seq_len=16)
    rank = np.random.default_rng(0).permutation(200)
    torch.manual_seed(0)
    model = build_model(200, settings, rank).eval()
    assert model.adaptive is not None
    ids = torch.randint(0, 200, (2, 16))
    targets = torch.randint(0, 200, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.bool)
    with torch.no_grad():
        logprobs = model(ids)
        assert torch.allclose(logprobs.logsumexp(-1), torch.zeros(2, 16), atol=1e-5)
        picked = logprobs.gather(-1, targets[..., None])[..., 0]
        assert torch.allclose(model.token_logprobs(ids, targets, mask), picked, atol=1e-5)
    full = build_model(200, tiny_settings(output_head="full", seq_len=16))
    assert full.adaptive is None


def test_windows_cut_long_sequences_and_mask_padding_targets() -> None:
    from curation.proxy.model import sequence_windows

    sample = {"input_ids": np.arange(1, 11, dtype=np.int64),
              "padding_mask": np.arange(10) >= 8, "segment_ids": np.array([0] * 8 + [-1] * 2)}
    windows = list(sequence_windows(sample, 4))
    assert len(windows) == 3
    inputs, targets, weights, segments = (np.concatenate(c) for c in zip(*windows, strict=True))
    assert inputs.tolist() == [*range(1, 11), 0, 0]
    assert targets[:7].tolist() == list(range(2, 9))
    assert weights.tolist() == [1.0] * 7 + [0.0] * 5  # targets 9, 10 are padding
    assert segments.tolist() == [0] * 8 + [-1] * 4


def test_settings_are_frozen_strict_and_the_gpu_configuration_is_valid() -> None:
    settings = ProxySettings()
    with pytest.raises(ValueError):
        ProxySettings(layer=3)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="multiple of heads"):
        ProxySettings(d_model=100, heads=3)
    with pytest.raises(ValueError):
        settings.seed = 3  # type: ignore[misc]
    gpu = ProxySettings.gpu()
    assert (gpu.layers, gpu.d_model, gpu.seq_len, gpu.device) == (12, 768, 1024, "cuda")
    assert gpu.token_budget > 1000 * settings.token_budget
    assert ProxySettings.model_validate_json(gpu.model_dump_json()) == gpu


# --- training on tiny shards of real text -------------------------------------------------------


@pytest.fixture(scope="module")
def gpt2():
    from curation.tokenizer import load_tokenizer

    return load_tokenizer(tokenizer_path("gpt2"))


@pytest.fixture(scope="module")
def tiny_shards(tmp_path_factory: pytest.TempPathFactory, gpt2) -> Path:
    directory = tmp_path_factory.mktemp("proxy-shards")
    build(occurrences(real_documents(30)), gpt2, directory)
    return directory


@pytest.fixture(scope="module")
def heldout() -> list[str]:
    wiki = (require_shared_data() / "sources" / "wikipedia" / "wikitext-2-raw_wiki.test.raw")
    return [wiki.read_text(encoding="utf-8")[-6000:]]  # the file's end: past real_documents


@pytest.fixture(scope="module")
def runs(tiny_shards, gpt2, heldout) -> dict[str, ProxyReport]:
    torch_module()
    from curation.proxy.scoring import run_proxy_eval

    evals = require_shared_data() / "evals"
    return {name: run_proxy_eval(tiny_shards, gpt2, heldout, evals, tiny_settings(seed=seed))
            for name, seed in (("first", 0), ("again", 0), ("other", 1))}


def test_a_few_training_steps_lower_the_loss(runs) -> None:
    losses = runs["first"].train_losses
    assert len(losses) == runs["first"].steps == 30
    assert losses[0] > 7.0  # about uniform over the adaptive head's clusters
    assert np.mean(losses[-5:]) < losses[0] - 1.5
    report = runs["first"]
    assert report.tokens_trained == 30 * 4 * 64 and 0 < report.loss_tokens <= 30 * 4 * 64
    assert report.heldout.tokens > 1000 and report.heldout.loss < losses[0]


def test_the_same_seed_gives_identical_numbers_and_another_seed_differs(runs) -> None:
    first, again, other = runs["first"], runs["again"], runs["other"]
    assert first.train_losses == again.train_losses
    assert first.heldout == again.heldout
    assert first.tasks == again.tasks
    assert first.model_dump(exclude={"wall_seconds"}) == again.model_dump(exclude={"wall_seconds"})
    assert other.train_losses != first.train_losses
    assert other.heldout.loss != first.heldout.loss
    assert [t.item_ids for t in other.tasks] == [t.item_ids for t in first.tasks]


def test_the_report_round_trips_through_json_and_renders(runs) -> None:
    report = runs["first"]
    text = report.to_json()
    assert json.loads(text)["format"] == "proxy-eval/1"
    assert ProxyReport.from_json(text) == report
    assert [task.name for task in report.tasks] == ["copa", "arc_easy"]
    markdown = render_report(report)
    assert "| copa | 20 |" in markdown and "held-out loss" in markdown
    verdict = compare(report, runs["again"])
    assert verdict.ships and verdict.mismatches == []
    assert "settings.seed" in compare(report, runs["other"]).mismatches


def test_epochs_repeat_when_the_budget_exceeds_the_data(gpt2, tmp_path: Path) -> None:
    torch_module()
    from curation.loader import ShardDataset
    from curation.proxy.model import train_proxy

    build(occurrences(real_documents(3)), gpt2, tmp_path)
    sequences = len(ShardDataset(tmp_path))
    windows = sequences * (256 // 64)
    settings = tiny_settings(token_budget=64 * 4 * (windows // 4 + 1) * 2)  # > 2 epochs
    trained = train_proxy(tmp_path, settings)
    assert trained.epochs > 2.0
    assert trained.tokens_trained == trained.steps * 4 * 64 >= settings.token_budget
    assert len(trained.losses) == trained.steps and all(map(math.isfinite, trained.losses))


def test_the_full_softmax_head_trains_and_scores_too(tiny_shards, gpt2) -> None:
    torch_module()
    from curation.proxy.model import train_proxy
    from curation.proxy.scoring import score_multiple_choice

    settings = tiny_settings(output_head="full", token_budget=4 * 64 * 8)
    trained = train_proxy(tiny_shards, settings)
    assert trained.model.adaptive is None and trained.steps == 8
    assert trained.losses[-1] < trained.losses[0]
    score = score_multiple_choice(trained.model, gpt2, TOY_ITEMS, normalisation="tokens")
    assert 0.0 <= score.accuracy <= 1.0 and score.items == len(TOY_ITEMS)


def test_the_tokenizer_must_be_the_shards_own(tiny_shards, heldout) -> None:
    torch_module()
    from curation.proxy.scoring import run_proxy_eval

    stranger = SimpleNamespace(sha256="0" * 64, eos_id=50256, encode_batch=None)
    with pytest.raises(ValueError, match="not the one the shards were built with"):
        run_proxy_eval(tiny_shards, stranger, heldout, "/nonexistent", tiny_settings())


def test_frequency_rank_puts_frequent_tokens_first(tiny_shards) -> None:
    from curation.loader import ShardDataset
    from curation.proxy.model import frequency_rank

    rank = frequency_rank(tiny_shards, 50257)
    assert sorted(rank.tolist()) == list(range(50257))
    dataset = ShardDataset(tiny_shards)
    stream = np.concatenate([np.asarray(dataset[i])[: 256 - dataset.padding(i)]
                             for i in range(len(dataset))])
    counts = np.bincount(stream.astype(np.int64), minlength=50257)
    assert rank[int(np.argmax(counts))] == 0
    assert np.all(np.diff(counts[np.argsort(rank)]) <= 0)


# --- comparison on constructed reports ----------------------------------------------------------


def task(name: str, scores: list[float], seed: int = 0) -> TaskScore:
    low, high = bootstrap_interval(scores, 500, 0.95, seed)
    return TaskScore(name=name, items=len(scores), accuracy=float(np.mean(scores)), ci_low=low,
                     ci_high=high, confidence=0.95, resamples=500, chance=0.5,
                     normalisation="chars", item_ids=[f"{name}:{i}" for i in range(len(scores))],
                     item_scores=scores)


def report(version: str, tasks: list[TaskScore], *, loss: float = 5.0,
           tokens: int = 1000, settings: ProxySettings | None = None) -> ProxyReport:
    return ProxyReport(
        dataset_version=version, manifest_sha256="m" * 64, tokenizer_sha256="t" * 64,
        settings=settings or ProxySettings(), device="cpu", torch_version="2.13.0",
        parameters=123, steps=10, tokens_trained=tokens, loss_tokens=tokens - 5, epochs=0.5,
        train_losses=[10.0, 8.5, 7.25], heldout=HeldoutLoss(loss=loss, bits_per_byte=1.5,
                                                             tokens=100, bytes=400, texts=1),
        tasks=tasks, wall_seconds={"train": 1.0, "heldout": 0.5, "tasks": 0.25, "total": 1.75})


def flips(count: int, ones: int, changed: int, to: float) -> list[float]:
    """`ones` items right out of `count`, then `changed` of them set to `to`."""
    scores = [1.0] * ones + [0.0] * (count - ones)
    for i in range(changed):
        scores[i if to == 0.0 else ones + i] = to
    return scores


def test_the_verdict_follows_the_default_rule() -> None:
    base = report("v1", [task("a", flips(100, 60, 0, 0)), task("b", flips(100, 50, 0, 0))])
    same = compare(base, report("v2", base.tasks))
    assert same.ships and same.verdict == "ship" and same.reasons == []

    # task a far below the baseline's interval, even though the mean goes up
    worse_a = report("v2", [task("a", flips(100, 60, 25, 0.0)), task("b", flips(100, 50, 40, 1.0))])
    verdict = compare(base, worse_a)
    assert not verdict.ships and verdict.candidate_mean > verdict.baseline_mean
    assert [row.worse for row in verdict.tasks] == [True, False]
    assert [row.better for row in verdict.tasks] == [False, True]
    assert any(reason.startswith("a:") for reason in verdict.reasons)

    # within every interval, but a lower mean: holds unless the tolerance allows it
    slightly = report("v2", [task("a", flips(100, 60, 2, 0.0)),
                             task("b", base.tasks[1].item_scores)])
    verdict = compare(base, slightly)
    assert not verdict.ships and not any(row.worse for row in verdict.tasks)
    assert verdict.reasons == [reason for reason in verdict.reasons if "mean accuracy" in reason]
    assert compare(base, slightly, ComparisonRule(mean_tolerance=0.02)).ships

    # held-out loss only counts when the rule says so
    assert compare(base, report("v2", base.tasks, loss=5.5)).ships
    assert not compare(base, report("v2", base.tasks, loss=5.5),
                       ComparisonRule(max_heldout_increase=0.1)).ships


def test_unmatched_compute_holds_unless_allowed() -> None:
    base = report("v1", [task("a", flips(50, 30, 0, 0))])
    bigger = report("v2", base.tasks, tokens=2000,
                    settings=ProxySettings(token_budget=2_000_000))
    verdict = compare(base, bigger)
    assert not verdict.ships
    assert verdict.mismatches[0] == "settings.token_budget"
    assert any("tokens_trained" in m for m in verdict.mismatches)
    assert compare(base, bigger, ComparisonRule(require_matched_compute=False)).ships
    fewer = report("v2", [task("a", flips(50, 30, 0, 0)[:40])])
    assert "items of a" in compare(base, fewer).mismatches


def test_the_paired_rule_sees_consistent_losses_the_interval_rule_misses() -> None:
    base = report("v1", [task("a", flips(100, 60, 0, 0)), task("b", flips(100, 50, 0, 0))])
    # 6 items of a lost, 6 items of b gained: equal mean, a stays inside the baseline interval
    cand = report("v2", [task("a", flips(100, 60, 6, 0.0)), task("b", flips(100, 50, 6, 1.0))])
    assert compare(base, cand).ships
    paired = compare(base, cand, ComparisonRule(task_test="paired_bootstrap"))
    assert not paired.ships
    assert [row.worse for row in paired.tasks] == [True, False]
    assert paired.tasks[0].delta_ci is not None and paired.tasks[0].delta_ci[1] < 0


def test_comparison_renders_as_markdown_and_serialises() -> None:
    from curation.proxy.compare import Comparison

    base = report("v1", [task("arc_easy", flips(100, 60, 0, 0))])
    cand = report("v2", [task("arc_easy", flips(100, 60, 25, 0.0))])
    verdict = compare(base, cand)
    text = render_comparison(verdict)
    assert text.startswith("**Verdict: hold** (candidate `v2` vs baseline `v1`")
    assert "| arc_easy | 100 | 60.0 [" in text and "| worse |" in text
    assert "| tokens trained | 1,000 | 1,000 |" in text and "| **mean** |" in text
    assert Comparison.model_validate_json(verdict.model_dump_json()) == verdict
    assert ProxyReport.from_json(base.to_json()) == base
