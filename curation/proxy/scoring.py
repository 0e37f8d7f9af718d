"""Scoring for the ablation gate: zero-shot multiple-choice accuracy and held-out loss of a
model, and `run_proxy_eval`, the whole run (train, then score) that yields a `ProxyReport`.
torch is imported only by the functions that need it.

**Scoring.** Zero-shot, by length-normalised log-likelihood: for each choice, the sum of the
log-probabilities of the choice's tokens given the context (an EOS token is put in front of the
context as the document start), divided by the choice's length in **characters** (the default,
`normalisation="chars"`, as in lm-eval's `acc_norm` and OLMES' per-character scoring; "tokens"
and "none" are available). Winogrande uses partial scoring: each option fills the blank and the
shared continuation after it is scored. The predicted choice is the highest score. **Ties**: an
item whose highest score is shared by k choices gives credit 1/k if the gold choice is one of them,
else 0, so a model that cannot tell the choices apart scores exactly the chance level (scores are
summed in float64, and a uniform model ties exactly under "tokens" normalisation). Accuracy is the
mean credit; its confidence interval is a seeded percentile bootstrap over items.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from curation.evals import EvalBenchmark
from curation.proxy.evalsets import MultipleChoiceItem, eval_sets
from curation.proxy.model import deterministic, import_torch, train_proxy
from curation.proxy.reports import (
    HeldoutLoss,
    Normalisation,
    ProxyReport,
    ProxySettings,
    TaskScore,
    bootstrap_interval,
    seed_of,
)

LOG = logging.getLogger(__name__)


# --- scoring -----------------------------------------------------------------------------------


class TokenizerLike(Protocol):
    """What scoring needs of a tokenizer (`curation.tokenizer.PinnedTokenizer` is one)."""

    eos_id: int

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]: ...


def _model_device(model: Any) -> Any:
    parameters = getattr(model, "parameters", None)
    if parameters is not None:
        for parameter in parameters():
            return parameter.device
    return import_torch().device("cpu")


def _max_len(model: Any, max_len: int | None) -> int:
    return max_len or getattr(model, "max_len", None) or 1024


def sequence_logprobs(
    model: Any,
    sequences: Sequence[tuple[list[int], int]],
    *,
    pad_id: int = 0,
    batch_size: int = 32,
) -> list[tuple[float, int]]:
    """(sum of log p, tokens scored) of the last `scored` tokens of each (ids, scored) pair;
    `ids` must fit the model (callers truncate). Batched by length, right-padded (causal
    attention keeps padding out of the scored positions), summed in float64.

    `model(input_ids) -> logits (batch, length, vocab)`; a model with a
    `token_logprobs(input_ids, targets, mask)` method (`ProxyLM`) is asked for the scored
    positions only, which skips the vocabulary projection everywhere else.
    """
    torch = import_torch()
    device = _model_device(model)
    order = sorted(range(len(sequences)), key=lambda i: (len(sequences[i][0]), i))
    results: list[tuple[float, int]] = [(0.0, 0)] * len(sequences)
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            width = max(len(sequences[i][0]) for i in chunk) - 1
            inputs = torch.full((len(chunk), width), pad_id, dtype=torch.int64)
            targets = torch.full((len(chunk), width), pad_id, dtype=torch.int64)
            mask = torch.zeros((len(chunk), width), dtype=torch.bool)
            for row, i in enumerate(chunk):
                ids, scored = sequences[i]
                if not 0 < scored < len(ids):
                    raise ValueError(f"sequence {i}: {scored} scored tokens of {len(ids)}")
                length = len(ids) - 1
                inputs[row, :length] = torch.tensor(ids[:-1])
                targets[row, :length] = torch.tensor(ids[1:])
                mask[row, length - scored:length] = True
            inputs, targets, mask = inputs.to(device), targets.to(device), mask.to(device)
            if hasattr(model, "token_logprobs"):
                logprobs = model.token_logprobs(inputs, targets, mask)
            else:
                logits = model(inputs).float()
                logprobs = torch.log_softmax(logits, dim=-1).gather(-1, targets[..., None])[..., 0]
            sums = (logprobs.double() * mask).sum(dim=1).cpu().tolist()
            counts = mask.sum(dim=1).cpu().tolist()
            for row, i in enumerate(chunk):
                results[i] = (float(sums[row]), int(counts[row]))
    return results


def choice_scores(
    model: Any,
    tokenizer: TokenizerLike,
    items: Sequence[MultipleChoiceItem],
    *,
    normalisation: Normalisation = "chars",
    batch_size: int = 32,
    max_len: int | None = None,
) -> list[list[float]]:
    """Per item, per choice: the scored text's summed token log-probs given its conditioning
    text, divided by the scored text's characters ("chars", leading space included), by its
    tokens ("tokens") or by nothing ("none"). The token sequence is EOS + conditioning tokens +
    scored tokens (each text tokenized on its own), cut from the left to `max_len + 1` tokens
    (`max_len`: the model's context, `model.max_len` when it has one)."""
    limit = _max_len(model, max_len) + 1
    pairs = [pair for item in items for pair in item.pairs()]
    encoded = tokenizer.encode_batch([text for pair in pairs for text in pair])
    sequences = []
    for k, (_, scored_text) in enumerate(pairs):
        context, scored = encoded[2 * k], encoded[2 * k + 1]
        if not scored:
            raise ValueError(f"choice text {scored_text!r} has no tokens")
        ids = ([tokenizer.eos_id] + list(context) + list(scored))[-limit:]
        sequences.append((ids, min(len(scored), len(ids) - 1)))
    totals = sequence_logprobs(model, sequences, pad_id=tokenizer.eos_id, batch_size=batch_size)
    scores, k = [], 0
    for item in items:
        row = []
        for _, scored_text in item.pairs():
            total, count = totals[k]
            divisor = {"chars": len(scored_text), "tokens": count, "none": 1}[normalisation]
            row.append(total / divisor)
            k += 1
        scores.append(row)
    return scores


def item_credit(scores: Sequence[float], gold: int) -> float:
    """1 / k when the gold choice is among the k choices sharing the highest score, else 0."""
    best = max(scores)
    winners = [i for i, score in enumerate(scores) if score == best]
    return 1.0 / len(winners) if gold in winners else 0.0


def score_multiple_choice(
    model: Any,
    tokenizer: TokenizerLike,
    items: Sequence[MultipleChoiceItem],
    *,
    name: str = "task",
    normalisation: Normalisation = "chars",
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    batch_size: int = 32,
    max_len: int | None = None,
) -> TaskScore:
    """Zero-shot accuracy of `model` on `items` (see `choice_scores` and `item_credit`) with a
    percentile bootstrap interval over items, seeded by (`seed`, `name`)."""
    if not items:
        raise ValueError(f"task {name!r}: no items")
    scores = choice_scores(model, tokenizer, items, normalisation=normalisation,
                           batch_size=batch_size, max_len=max_len)
    credit = [item_credit(row, item.gold) for row, item in zip(scores, items, strict=True)]
    low, high = bootstrap_interval(credit, resamples, confidence, seed_of(seed, name))
    return TaskScore(
        name=name, items=len(items), accuracy=float(np.mean(credit)), ci_low=low, ci_high=high,
        confidence=confidence, resamples=resamples,
        chance=float(np.mean([1.0 / len(item.choices) for item in items])),
        normalisation=normalisation, item_ids=[item.item_id for item in items],
        item_scores=credit)


def heldout_loss(
    model: Any,
    tokenizer: TokenizerLike,
    texts: Sequence[str],
    *,
    max_tokens: int | None = None,
    batch_size: int = 16,
    max_len: int | None = None,
) -> HeldoutLoss:
    """Next-token loss of `model` on held-out reference `texts` that no recipe trains on (the
    caller's choice, fixed across the recipes compared: for example the last articles of the
    WikiText-2 test file, ``shared/data/sources/wikipedia/wikitext-2-raw_wiki.test.raw``, kept
    out of every mix).

    Each text is EOS + its tokens, cut into consecutive pieces of the model's context (the
    first token of a later piece is predicted from the end of the previous one): every token is
    predicted once. With `max_tokens`, whole texts are taken in order until they hold at least
    that many tokens.
    """
    limit = _max_len(model, max_len)
    sequences: list[tuple[list[int], int]] = []
    total_tokens = total_bytes = used = 0
    for text, ids in zip(texts, tokenizer.encode_batch(list(texts)), strict=True):
        if max_tokens is not None and total_tokens >= max_tokens:
            break
        if not ids:
            continue
        stream = [tokenizer.eos_id, *ids]
        for start in range(0, len(ids), limit):
            piece = stream[start:start + limit + 1]
            sequences.append((piece, len(piece) - 1))
        total_tokens += len(ids)
        total_bytes += len(text.encode("utf-8"))
        used += 1
    if not sequences:
        raise ValueError("no held-out tokens")
    results = sequence_logprobs(model, sequences, pad_id=tokenizer.eos_id, batch_size=batch_size)
    nats = -sum(total for total, _ in results)
    return HeldoutLoss(loss=nats / total_tokens, bits_per_byte=nats / math.log(2) / total_bytes,
                       tokens=total_tokens, bytes=total_bytes, texts=used)


# --- the whole run ------------------------------------------------------------------------------


def _torch_version() -> str:
    return str(import_torch().__version__)


def run_proxy_eval(
    shards_dir: str | Path,
    tokenizer: TokenizerLike,
    heldout_texts: Sequence[str],
    evals_dir: str | Path | None,
    settings: ProxySettings | None = None,
    declared: Sequence[EvalBenchmark] = (),
) -> ProxyReport:
    """Trains the proxy on the shards, then measures the held-out loss and every benchmark of
    `settings.eval`: a built-in parser's file below `evals_dir` or one of the `declared`
    benchmarks (pipeline.yaml's) with choices (`evalsets.eval_sets`, which checks them before
    training). `tokenizer` must be the one the shards were built with (checked by hash when it
    has a `sha256`)."""
    settings = settings or ProxySettings()
    manifest_path = Path(shards_dir) / "manifest.json"
    manifest_raw = manifest_path.read_bytes()
    manifest = json.loads(manifest_raw)
    shard_tokenizer = manifest["tokenizer"]["sha256"]
    given = getattr(tokenizer, "sha256", None)
    if given is not None and given != shard_tokenizer:
        raise ValueError(f"tokenizer {given[:12]} is not the one the shards were built with "
                         f"({shard_tokenizer[:12]})")
    if int(getattr(tokenizer, "eos_id", manifest["eos_id"])) != manifest["eos_id"]:
        raise ValueError("the tokenizer's EOS id differs from the shards'")
    eval_loaders = eval_sets(settings.eval.benchmarks, evals_dir, declared)
    started = time.perf_counter()
    trained = train_proxy(shards_dir, settings)
    evaluation = settings.eval
    with deterministic(settings.threads, trained.device):
        heldout_started = time.perf_counter()
        heldout = heldout_loss(trained.model, tokenizer, heldout_texts,
                               max_tokens=evaluation.heldout_max_tokens,
                               batch_size=evaluation.batch_size)
        tasks_started = time.perf_counter()
        LOG.info("proxy held-out loss %.4f (%.0f s)", heldout.loss, tasks_started - started)
        tasks = [
            score_multiple_choice(
                trained.model, tokenizer,
                eval_loaders[name](evaluation.max_items, evaluation.selection_seed),
                name=name, normalisation=evaluation.normalisation,
                resamples=evaluation.resamples, confidence=evaluation.confidence,
                seed=evaluation.bootstrap_seed, batch_size=evaluation.batch_size)
            for name in evaluation.benchmarks]
        finished = time.perf_counter()
    return ProxyReport(
        dataset_version=str(manifest.get("version", "")),
        manifest_sha256=hashlib.sha256(manifest_raw).hexdigest(),
        tokenizer_sha256=shard_tokenizer, settings=settings, device=trained.device,
        torch_version=_torch_version(), parameters=trained.parameters, steps=trained.steps,
        tokens_trained=trained.tokens_trained, loss_tokens=trained.loss_tokens,
        epochs=trained.epochs, train_losses=trained.losses, heldout=heldout, tasks=tasks,
        wall_seconds={"train": trained.wall_seconds,
                      "heldout": tasks_started - heldout_started,
                      "tasks": finished - tasks_started, "total": finished - started})


