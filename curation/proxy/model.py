"""The proxy model of the ablation gate and its training loop (PyTorch, no Dagster). torch is
imported only by the functions that need it, so importing this module does not load it.

**Matched compute.** `train_proxy` trains for `ProxySettings.token_budget` input positions,
rounded up to whole optimizer steps, whatever the dataset's size (see `curation.proxy.reports`).
The data follows the build's curriculum as the loader serves it (each phase shuffled on its own,
phases in the recipe's order, every epoch); a budget that ends inside an epoch takes each phase's
share of what is left (`SequenceSampler.scaled_epoch`), so the run still ends on the last phase.

**The model.** A pre-LayerNorm decoder-only transformer: learned absolute positions, causal
self-attention (`scaled_dot_product_attention`), a GELU MLP, no dropout. The output head is an
adaptive softmax by default (`output_head="adaptive"`: token ids ranked by their frequency in the
shards being trained on, a full-width head for the 2,048 most frequent and narrower clusters for
the rest; exact normalised log-probabilities): with a 50k vocabulary a full softmax would cost more
than the whole small model on CPU. `output_head="full"` is a softmax tied to the token embedding
(the GPU configuration's). Attention is block-diagonal per document (`document_masking`, from the
loader's document boundaries: a token attends only to earlier tokens of its own document); padding
positions are masked out of the loss. A shard sequence longer than the proxy's `seq_len` is cut
into consecutive windows of `seq_len` positions.

**Determinism.** On CPU, a run is a function of the shards and the settings: the seed sets the
initial weights (`torch.manual_seed`) and the data order, `torch.use_deterministic_algorithms` is
on, the intra-op thread count is set explicitly (`threads`; the same count gives the same bits)
and nothing depends on the wall clock. On CUDA the deterministic switch is used in warn-only mode
(some kernels have no deterministic variant), so GPU runs are repeatable only approximately.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from curation.loader import SequenceSampler, ShardDataset, sampler_for
from curation.proxy.reports import ProxySettings

LOG = logging.getLogger(__name__)


# --- torch: the model -------------------------------------------------------------------------


def import_torch() -> Any:
    """torch, imported on first use: settings, reports and comparisons work without it."""
    import torch

    return torch


@cache
def _model_classes() -> tuple[type, type]:
    torch = import_torch()
    from torch import nn
    from torch.nn import functional

    class Block(nn.Module):
        def __init__(self, d_model: int, heads: int, mlp_ratio: int) -> None:
            super().__init__()
            self.heads = heads
            self.norm1 = nn.LayerNorm(d_model)
            self.qkv = nn.Linear(d_model, 3 * d_model)
            self.proj = nn.Linear(d_model, d_model)
            self.norm2 = nn.LayerNorm(d_model)
            self.fc = nn.Linear(d_model, mlp_ratio * d_model)
            self.out = nn.Linear(mlp_ratio * d_model, d_model)

        def forward(self, x: Any, mask: Any) -> Any:
            batch, length, width = x.shape
            q, k, v = self.qkv(self.norm1(x)).split(width, dim=-1)
            shape = (batch, length, self.heads, width // self.heads)
            q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
            if mask is None:
                y = functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                y = functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            x = x + self.proj(y.transpose(1, 2).reshape(batch, length, width))
            return x + self.out(functional.gelu(self.fc(self.norm2(x))))

    class ProxyLM(nn.Module):
        """Decoder-only transformer. Output head: a full softmax tied to the token embedding,
        or an adaptive softmax over ids ranked by frequency (`rank`, id -> rank)."""

        def __init__(self, vocab_size: int, settings: ProxySettings,
                     rank: np.ndarray | None = None) -> None:
            super().__init__()
            self.vocab_size, self.max_len = vocab_size, settings.seq_len
            self.embed = nn.Embedding(vocab_size, settings.d_model)
            self.position = nn.Embedding(settings.seq_len, settings.d_model)
            self.blocks = nn.ModuleList(Block(settings.d_model, settings.heads,
                                              settings.mlp_ratio) for _ in range(settings.layers))
            self.norm = nn.LayerNorm(settings.d_model)
            cutoffs = adaptive_cutoffs(settings, vocab_size)
            self.adaptive = None
            if cutoffs:
                self.adaptive = nn.AdaptiveLogSoftmaxWithLoss(
                    settings.d_model, vocab_size, cutoffs, settings.adaptive_div_value)
            order = np.arange(vocab_size) if rank is None else np.asarray(rank)
            if order.shape != (vocab_size,):
                raise ValueError(f"rank has shape {order.shape}, not ({vocab_size},)")
            self.register_buffer("rank", torch.from_numpy(order.astype(np.int64)))
            for name, parameter in self.named_parameters():
                if name.endswith("bias"):
                    nn.init.zeros_(parameter)
                elif parameter.dim() > 1:  # GPT-2 init, residual projections scaled down
                    std = 0.02 / math.sqrt(2 * settings.layers) if name.endswith(
                        ("proj.weight", "out.weight")) else 0.02
                    nn.init.normal_(parameter, 0.0, std)

        def hidden(self, input_ids: Any, segment_ids: Any = None) -> Any:
            """Final hidden states (batch, length, d_model). `segment_ids` (batch, length):
            attention stays within equal ids (block-diagonal), always causal."""
            length = input_ids.shape[1]
            if length > self.max_len:
                raise ValueError(f"{length} positions exceed the model's {self.max_len}")
            positions = torch.arange(length, device=input_ids.device)
            x = self.embed(input_ids) + self.position(positions)
            mask = None
            if segment_ids is not None:
                causal = torch.ones(length, length, dtype=torch.bool,
                                    device=input_ids.device).tril()
                mask = (causal & (segment_ids[:, :, None] == segment_ids[:, None, :]))[:, None]
            for block in self.blocks:
                x = block(x, mask)
            return self.norm(x)

        def target_logprobs(self, hidden: Any, targets: Any) -> Any:
            """log p(target) for rows of hidden states (n, d_model) and target ids (n,)."""
            if self.adaptive is not None:
                return self.adaptive(hidden.float(), self.rank[targets]).output
            logits = (hidden @ self.embed.weight.T).float()
            return -functional.cross_entropy(logits, targets, reduction="none")

        def forward(self, input_ids: Any, segment_ids: Any = None) -> Any:
            """Log-probabilities over token ids (batch, length, vocab), usable as logits."""
            hidden = self.hidden(input_ids, segment_ids)
            if self.adaptive is not None:
                ranked = self.adaptive.log_prob(hidden.flatten(0, 1).float())
                return ranked.index_select(-1, self.rank).view(*hidden.shape[:2], -1)
            return torch.log_softmax((hidden @ self.embed.weight.T).float(), dim=-1)

        def token_logprobs(self, input_ids: Any, targets: Any, mask: Any) -> Any:
            """log p(targets) at the positions where `mask` is true (0 elsewhere); the head
            runs only at those positions."""
            out = torch.zeros(input_ids.shape, dtype=torch.float32, device=input_ids.device)
            out[mask] = self.target_logprobs(self.hidden(input_ids)[mask], targets[mask])
            return out

        def loss_sum(self, input_ids: Any, targets: Any, weights: Any,
                     segment_ids: Any = None) -> Any:
            """Summed cross-entropy (nats) over the positions whose weight is non-zero."""
            keep = weights > 0
            hidden = self.hidden(input_ids, segment_ids)[keep]
            return -(self.target_logprobs(hidden, targets[keep]) * weights[keep]).sum()

    return Block, ProxyLM


def build_model(vocab_size: int, settings: ProxySettings, rank: np.ndarray | None = None) -> Any:
    """A freshly initialised `ProxyLM` (initial weights from the torch RNG: seed it first).
    `rank` (id -> frequency rank, see `frequency_rank`) orders ids for the adaptive head;
    None keeps id order."""
    return _model_classes()[1](vocab_size, settings, rank)


def adaptive_cutoffs(settings: ProxySettings, vocab_size: int) -> list[int]:
    """The adaptive head's cutoffs that fit the vocabulary; empty: use the full softmax."""
    if settings.output_head != "adaptive":
        return []
    return sorted({c for c in settings.adaptive_cutoffs if 0 < c < vocab_size - 1})


def frequency_rank(directory: str | Path, vocab_size: int) -> np.ndarray:
    """id -> rank of each token id by its count in a shard build (padding excluded), most
    frequent first, ties (and unseen ids) in id order. Reads the `.bin` and padding files the
    manifest lists, one shard at a time."""
    directory = Path(directory)
    manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    dtype, seq_len = np.dtype(manifest["dtype"]).newbyteorder("<"), manifest["seq_len"]
    counts = np.zeros(vocab_size, dtype=np.int64)
    for shard in manifest["shards"]:
        files = shard["files"]
        tokens = np.memmap(directory / files["bin"]["name"], dtype=dtype, mode="r",
                           shape=(shard["sequences"], seq_len))
        padding = np.load(directory / files["padding"]["name"], allow_pickle=False)
        valid = np.arange(seq_len)[None, :] < (seq_len - padding)[:, None]
        counts += np.bincount(np.asarray(tokens)[valid].astype(np.int64), minlength=vocab_size
                              )[:vocab_size]
    order = np.lexsort((np.arange(vocab_size), -counts))
    rank = np.empty(vocab_size, dtype=np.int64)
    rank[order] = np.arange(vocab_size)
    return rank


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if import_torch().cuda.is_available() else "cpu"
    return device


@contextlib.contextmanager
def deterministic(threads: int, device: str = "cpu") -> Iterator[None]:
    """Deterministic algorithms on and `threads` intra-op threads for the block (restored
    after). CUDA: warn-only, since some CUDA kernels have no deterministic variant."""
    torch = import_torch()
    was_on, was_warn = (torch.are_deterministic_algorithms_enabled(),
                        torch.is_deterministic_algorithms_warn_only_enabled())
    old_threads = torch.get_num_threads()
    torch.use_deterministic_algorithms(True, warn_only=device.startswith("cuda"))
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(old_threads)
        torch.use_deterministic_algorithms(was_on, warn_only=was_warn)


# --- training ---------------------------------------------------------------------------------


@dataclass
class TrainedProxy:
    """A trained proxy: the model (in eval mode) and how its training went."""

    model: Any
    settings: ProxySettings
    device: str
    steps: int
    losses: list[float]  # per optimizer step
    tokens_trained: int  # input positions processed: steps x batch_size x window
    loss_tokens: int  # targets in the loss
    epochs: float  # windows consumed / windows in the dataset
    wall_seconds: float
    parameters: int


def sequence_windows(
    sample: dict[str, np.ndarray], window: int
) -> Iterator[tuple[np.ndarray, ...]]:
    """(inputs, targets, weights, segment ids) of each `window`-position piece of a sequence.

    Position p predicts token p + 1 of the same shard sequence; a target that is padding or
    past the sequence's end has weight 0 (and id 0). Short last pieces are filled the same way.
    """
    tokens, padding, segments = (sample["input_ids"], sample["padding_mask"],
                                 sample["segment_ids"])
    length = len(tokens)
    valid_target = np.zeros(length, dtype=np.float32)
    valid_target[:-1] = ~padding[1:]
    targets = np.zeros(length, dtype=np.int64)
    targets[:-1] = tokens[1:]
    for start in range(0, length, window):
        stop = min(start + window, length)
        pad = window - (stop - start)
        yield (np.pad(tokens[start:stop], (0, pad)), np.pad(targets[start:stop], (0, pad)),
               np.pad(valid_target[start:stop], (0, pad)),
               np.pad(segments[start:stop], (0, pad), constant_values=-1))


def _window_stream(dataset: ShardDataset, sampler: SequenceSampler, window: int,
                   sequences: int) -> Iterator[tuple[np.ndarray, ...]]:
    """Windows of `sequences` sampled sequences: whole epochs in the loader's curriculum
    order, then what is left as a scaled-down epoch (each phase its share, the last phase
    last), so the budget's end trains on the anneal data as a full run's does."""
    if len(sampler) == 0:
        raise ValueError(f"{dataset.directory}: no sequences to train on")
    epoch = 0
    while sequences > 0:
        order = sampler.scaled_epoch(epoch, sequences)
        for index in order.tolist():
            yield from sequence_windows(dataset.sample(index), window)
        sequences, epoch = sequences - len(order), epoch + 1


def _learning_rate(settings: ProxySettings, step: int, steps: int) -> float:
    warmup = round(settings.warmup_fraction * steps)
    if step < warmup:
        return settings.learning_rate * (step + 1) / warmup
    if settings.schedule == "constant" or steps - warmup <= 1:
        return settings.learning_rate
    progress = (step - warmup) / (steps - warmup - 1)
    floor = settings.min_lr_ratio
    shape = (0.5 * (1 + math.cos(math.pi * progress)) if settings.schedule == "cosine"
             else 1 - progress)
    return settings.learning_rate * (floor + (1 - floor) * shape)


def _optimizer(model: Any, settings: ProxySettings) -> Any:
    torch = import_torch()
    decay = [p for p in model.parameters() if p.dim() > 1]
    other = [p for p in model.parameters() if p.dim() <= 1]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": settings.weight_decay},
         {"params": other, "weight_decay": 0.0}],
        lr=settings.learning_rate, betas=(settings.beta1, settings.beta2), foreach=False)


def train_proxy(shards_dir: str | Path, settings: ProxySettings | None = None) -> TrainedProxy:
    """Trains a fresh proxy on a shard build through the project's loader (`ShardDataset`,
    `sampler_for` keyed by `settings.seed` over all sequences, serving the build's curriculum)
    for `settings.token_budget` input positions, rounded up to whole optimizer steps of
    `batch_size` windows."""
    settings = settings or ProxySettings()
    torch = import_torch()
    started = time.perf_counter()
    dataset = ShardDataset(shards_dir)
    vocab_size = int(dataset.manifest["tokenizer"]["vocab_size"])
    window = min(settings.seq_len, dataset.seq_len)
    steps = max(1, math.ceil(settings.token_budget / (settings.batch_size * window)))
    windows_per_sequence = math.ceil(dataset.seq_len / window)
    micro = settings.micro_batch_size or settings.batch_size
    device = resolve_device(settings.device)
    autocast = (torch.autocast("cuda", dtype=torch.bfloat16)
                if settings.precision == "bf16" and device.startswith("cuda")
                else contextlib.nullcontext())
    with deterministic(settings.threads, device):
        rank = (frequency_rank(shards_dir, vocab_size)
                if adaptive_cutoffs(settings, vocab_size) else None)
        torch.manual_seed(settings.seed)
        model = build_model(vocab_size, settings, rank).to(device)
        model.train()
        optimizer = _optimizer(model, settings)
        stream = _window_stream(dataset, sampler_for(dataset, settings.seed, split="all"),
                                window, math.ceil(steps * settings.batch_size
                                                  / windows_per_sequence))
        losses: list[float] = []
        loss_tokens = 0
        for step in range(steps):
            batch = [next(stream) for _ in range(settings.batch_size)]
            inputs, targets, weights, segments = (
                torch.from_numpy(np.stack(column)).to(device)
                for column in zip(*batch, strict=True))
            count = float(weights.sum())
            for group in optimizer.param_groups:
                group["lr"] = _learning_rate(settings, step, steps)
            optimizer.zero_grad(set_to_none=True)
            total = 0.0
            for start in range(0, settings.batch_size, micro):
                part = slice(start, start + micro)
                with autocast:
                    loss = model.loss_sum(
                        inputs[part], targets[part], weights[part],
                        segments[part] if settings.document_masking else None)
                (loss / max(count, 1.0)).backward()
                total += float(loss.detach())
            if settings.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), settings.grad_clip)
            optimizer.step()
            losses.append(total / max(count, 1.0))
            loss_tokens += int(count)
            if (step + 1) % max(1, steps // 10) == 0 or step + 1 == steps:
                LOG.info("proxy step %d/%d: loss %.4f, %.0f s", step + 1, steps, losses[-1],
                         time.perf_counter() - started)
        model.eval()
    return TrainedProxy(
        model=model, settings=settings, device=device, steps=steps, losses=losses,
        tokens_trained=steps * settings.batch_size * window, loss_tokens=loss_tokens,
        epochs=steps * settings.batch_size / (len(dataset) * windows_per_sequence),
        wall_seconds=time.perf_counter() - started,
        parameters=sum(p.numel() for p in model.parameters()))

