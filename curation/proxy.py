"""The ablation gate: train a small proxy LM on a dataset version's shards, score it zero-shot on
downstream multiple-choice tasks and on held-out text, and compare two versions.

Plain Python and PyTorch, no Dagster. torch is imported only by the functions that need it
(`train_proxy`, `heldout_loss`, `score_multiple_choice`, `run_proxy_eval`, `build_model`), so
settings, reports, the eval parsers, `compare` and the renderers work without it.

**Matched compute.** Every recipe is trained with the same `ProxySettings`: the same model shape,
the same token budget (`token_budget`, rounded up to whole optimizer steps), the same batch size,
schedule and seed. If a dataset has fewer tokens than the budget, its epochs repeat, each in the
loader's deterministic per-epoch order (`SequenceSampler`, keyed by the proxy's seed).

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

**Benchmarks** (`SUPPORTED_BENCHMARKS`, from the llm-foundry exports in `shared/data/evals`):
arc_easy, arc_challenge, openbookqa, piqa, copa, boolq and winogrande as stored, and commonsense_qa
and siqa, whose `choices` hold only letters, with their answer texts rebuilt from the lettered
"Choices:" block of the query (the block is removed from the context). Items per benchmark are
capped (`EvalSettings.max_items`) by a keyed hash of the line number with its own seed, so every
recipe and every training seed is scored on the same items.

**Comparison.** `compare(baseline, candidate, rule)` lines two `ProxyReport`s up per task and
gives a verdict (`ComparisonRule`, documented there); `render_comparison` writes it as markdown.
`ProxyReport` is a pydantic model: `to_json()` / `ProxyReport.from_json()` round-trip exactly.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from curation.evals import STANDARD_BENCHMARKS
from curation.loader import SequenceSampler, ShardDataset, keyed_hash

LOG = logging.getLogger(__name__)
REPORT_FORMAT = "proxy-eval/1"
Normalisation = Literal["chars", "tokens", "none"]

# The benchmarks with a multiple-choice parser (see `load_multiple_choice`).
SUPPORTED_BENCHMARKS: tuple[str, ...] = (
    "arc_easy", "arc_challenge", "openbookqa", "piqa", "copa", "boolq", "winogrande",
    "commonsense_qa", "siqa",
)


# --- settings --------------------------------------------------------------------------------


class EvalSettings(BaseModel):
    """Which benchmarks, how many items, how they are scored and how intervals are drawn."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    benchmarks: tuple[str, ...] = SUPPORTED_BENCHMARKS
    max_items: int | None = Field(default=500, ge=1)  # per benchmark; None: every item
    selection_seed: int = 0  # which items when capped: independent of the training seed
    normalisation: Normalisation = "chars"
    resamples: int = Field(default=1000, ge=1)  # bootstrap resamples per task
    confidence: float = Field(default=0.95, gt=0.0, lt=1.0)
    bootstrap_seed: int = 0
    batch_size: int = Field(default=32, ge=1)  # sequences per forward pass when scoring
    heldout_max_tokens: int | None = Field(default=200_000, ge=1)  # of the held-out texts

    @model_validator(mode="after")
    def _known_benchmarks(self) -> EvalSettings:
        unknown = [name for name in self.benchmarks if name not in SUPPORTED_BENCHMARKS]
        if unknown:
            raise ValueError(f"benchmarks {unknown} have no multiple-choice parser; "
                             f"supported: {list(SUPPORTED_BENCHMARKS)}")
        if len(set(self.benchmarks)) != len(self.benchmarks):
            raise ValueError(f"benchmarks {list(self.benchmarks)}: name each once")
        return self


class ProxySettings(BaseModel):
    """Everything that shapes a proxy run. The defaults (2 layers x 128, 524,288 tokens, 9
    benchmarks of at most 500 items) train and score in 1-3 minutes on 2 CPU cores for a real
    dataset, under 10 even when other work keeps a core busy (benchmarks/results/proxy.md);
    `gpu()` is the larger configuration for a CUDA machine."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # model shape
    layers: int = Field(default=2, ge=1)
    d_model: int = Field(default=128, ge=8)
    heads: int = Field(default=4, ge=1)
    mlp_ratio: int = Field(default=4, ge=1)
    seq_len: int = Field(default=256, ge=2)  # context length (positions) of the proxy
    document_masking: bool = True  # block-diagonal causal attention per document
    # "adaptive": adaptive softmax over token ids ranked by their frequency in the shards
    # (exact log-probabilities at a fraction of a full vocabulary projection's cost: the
    # projection dominates a small model on CPU); "full": a tied full softmax.
    output_head: Literal["adaptive", "full"] = "adaptive"
    adaptive_cutoffs: tuple[int, ...] = (2048, 10240)  # frequency ranks where clusters start
    adaptive_div_value: float = Field(default=4.0, ge=1.0)
    # matched compute: the same for every recipe
    token_budget: int = Field(default=524_288, ge=1)  # input positions, rounded up to steps
    batch_size: int = Field(default=16, ge=1)  # sequences (windows) per optimizer step
    micro_batch_size: int | None = Field(default=8, ge=1)  # gradient accumulation; None: whole
    # optimizer and schedule
    learning_rate: float = Field(default=2e-3, gt=0.0)
    schedule: Literal["cosine", "linear", "constant"] = "cosine"
    warmup_fraction: float = Field(default=0.05, ge=0.0, lt=1.0)
    min_lr_ratio: float = Field(default=0.1, ge=0.0, le=1.0)
    weight_decay: float = Field(default=0.1, ge=0.0)
    beta1: float = Field(default=0.9, ge=0.0, lt=1.0)
    beta2: float = Field(default=0.95, ge=0.0, lt=1.0)
    grad_clip: float | None = Field(default=1.0, gt=0.0)
    # reproducibility and hardware
    seed: int = 0
    device: str = "auto"  # "auto": CUDA when present, else CPU; or any torch device string
    precision: Literal["fp32", "bf16"] = "fp32"  # bf16 autocast applies on CUDA only
    threads: int = Field(default=2, ge=1)  # torch intra-op threads (CPU)
    eval: EvalSettings = EvalSettings()

    @model_validator(mode="after")
    def _consistent(self) -> ProxySettings:
        if self.d_model % self.heads:
            raise ValueError(f"d_model {self.d_model} is not a multiple of heads {self.heads}")
        if self.micro_batch_size is not None and self.batch_size % self.micro_batch_size:
            raise ValueError(f"batch_size {self.batch_size} is not a multiple of "
                             f"micro_batch_size {self.micro_batch_size}")
        return self

    @classmethod
    def gpu(cls, **overrides: Any) -> ProxySettings:
        """The larger configuration for one CUDA GPU: the GPT-2 small shape (12 layers, 768
        wide, 12 heads, 1,024 positions; about 124 M parameters with GPT-2's vocabulary),
        2.5 B tokens (about 20 tokens per parameter), 256 x 1,024 tokens per step (about 9,500
        steps), bf16 autocast and every item of every benchmark. Not measured here (no GPU);
        at 6 x 124 M x 2.5 B = 1.9e18 FLOP it needs roughly 1.5-3 hours on one H100-class GPU.
        """
        values: dict[str, Any] = {
            "layers": 12, "d_model": 768, "heads": 12, "seq_len": 1024,
            "token_budget": 2_500_000_000, "batch_size": 256, "micro_batch_size": 16,
            "output_head": "full", "learning_rate": 6e-4, "warmup_fraction": 0.02,
            "device": "cuda",
            "precision": "bf16", "threads": 8,
            "eval": EvalSettings(max_items=None, resamples=10_000, batch_size=64,
                                 heldout_max_tokens=None),
        }
        return cls(**(values | overrides))


# --- multiple-choice items and their parsers --------------------------------------------------


@dataclass(frozen=True)
class MultipleChoiceItem:
    """One item: the context, the choices and the gold choice's index.

    Normally choice `i` is scored as the continuation of `context`. With `continuation` set
    (partial scoring, Winogrande), choice `i` is appended to `context` instead and the shared
    `continuation` is what gets scored after it.
    """

    context: str
    choices: tuple[str, ...]
    gold: int
    continuation: str = ""
    item_id: str = ""

    def __post_init__(self) -> None:
        if len(self.choices) < 2:
            raise ValueError(f"item {self.item_id!r}: needs at least two choices")
        if not 0 <= self.gold < len(self.choices):
            raise ValueError(f"item {self.item_id!r}: gold {self.gold} is out of range")

    def pairs(self) -> list[tuple[str, str]]:
        """(conditioning text, scored text) per choice."""
        if self.continuation:
            return [(self.context + choice, self.continuation) for choice in self.choices]
        return [(self.context, choice) for choice in self.choices]


_BENCHMARK_PATHS = {name: path for name, path, _ in STANDARD_BENCHMARKS}
_CHOICE_BLOCK = re.compile(r"\nChoices:\n((?:[A-Z]\. .*\n)+)")
_CHOICE_LINE = re.compile(r"^([A-Z])\. (.*)$", re.MULTILINE)
# Context suffix per benchmark whose query is a bare question (the llm-foundry delimiter).
_ANSWER_SUFFIX = {"arc_easy": "\nAnswer:", "arc_challenge": "\nAnswer:", "piqa": "\nAnswer:",
                  "boolq": "\nAnswer:", "openbookqa": "", "copa": ""}


def _field(record: dict[str, Any], name: str, kind: type, where: str) -> Any:
    value = record.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"{where}: field {name!r} is missing or not a {kind.__name__}")
    return value


def _gold(record: dict[str, Any], count: int, where: str) -> int:
    gold = _field(record, "gold", int, where)
    if not 0 <= gold < count:
        raise ValueError(f"{where}: gold {gold} is out of range for {count} choices")
    return gold


def _strings(values: list[Any], where: str) -> list[str]:
    if not all(isinstance(value, str) for value in values):
        raise ValueError(f"{where}: choices must be strings")
    return values


def parse_item(benchmark: str, record: dict[str, Any], item_id: str = "") -> MultipleChoiceItem:
    """A `MultipleChoiceItem` from one record of a supported benchmark's JSONL file."""
    where = f"{benchmark} {item_id}".strip()
    if benchmark == "winogrande":
        options = _strings(_field(record, "context_options", list, where), where)
        continuation = _field(record, "continuation", str, where).strip()
        return MultipleChoiceItem("", tuple(o.rstrip() for o in options),
                                  _gold(record, len(options), where), " " + continuation,
                                  item_id)
    query = _field(record, "query", str, where)
    choices = _strings(_field(record, "choices", list, where), where)
    gold = _gold(record, len(choices), where)
    if benchmark in ("commonsense_qa", "siqa"):
        block = _CHOICE_BLOCK.search(query)
        if block is None:
            raise ValueError(f"{where}: no lettered 'Choices:' block in the query")
        lettered = dict(_CHOICE_LINE.findall(block.group(1)))
        missing = [letter for letter in choices if letter not in lettered]
        if missing:
            raise ValueError(f"{where}: choices {missing} are not in the 'Choices:' block")
        context = (query[: block.start()] + "\n" + query[block.end():]).rstrip()
        return MultipleChoiceItem(context, tuple(" " + lettered[c].strip() for c in choices),
                                  gold, item_id=item_id)
    if benchmark not in _ANSWER_SUFFIX:
        raise ValueError(f"benchmark {benchmark!r} has no multiple-choice parser; "
                         f"supported: {list(SUPPORTED_BENCHMARKS)}")
    context = query.rstrip() + _ANSWER_SUFFIX[benchmark]
    return MultipleChoiceItem(context, tuple(" " + c.strip() for c in choices), gold,
                              item_id=item_id)


def benchmark_path(benchmark: str, evals_dir: str | Path) -> Path:
    """The JSONL file of a supported benchmark in a folder laid out like shared/data/evals."""
    if benchmark not in SUPPORTED_BENCHMARKS:
        raise ValueError(f"benchmark {benchmark!r} has no multiple-choice parser; "
                         f"supported: {list(SUPPORTED_BENCHMARKS)}")
    return Path(evals_dir) / _BENCHMARK_PATHS[benchmark]


def load_multiple_choice(
    benchmark: str,
    evals_dir: str | Path,
    max_items: int | None = None,
    selection_seed: int = 0,
) -> list[MultipleChoiceItem]:
    """The items of one benchmark in file order; with `max_items`, the `max_items` items whose
    line numbers have the lowest keyed hash (seeded by `selection_seed`), still in file order.
    Item ids are ``benchmark:line`` (1-based physical line)."""
    path = benchmark_path(benchmark, evals_dir)
    items = []
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}: line {line_no}: not valid JSON ({error.msg})") from None
            items.append(parse_item(benchmark, record, f"{benchmark}:{line_no}"))
    if max_items is not None and len(items) > max_items:
        lines = np.array([int(item.item_id.rsplit(":", 1)[1]) for item in items], dtype=np.int64)
        keys = keyed_hash(lines, "proxy-eval", benchmark, selection_seed)
        chosen = np.sort(np.argsort(keys, kind="stable")[:max_items])
        items = [items[i] for i in chosen]
    return items


# --- scores, reports and their JSON ----------------------------------------------------------


class TaskScore(BaseModel):
    """Zero-shot accuracy of one task with its bootstrap interval and the per-item credit."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    items: int
    accuracy: float
    ci_low: float
    ci_high: float
    confidence: float
    resamples: int
    chance: float  # the expected accuracy of a model that ties every item
    normalisation: Normalisation
    item_ids: list[str]
    item_scores: list[float]  # credit per item: 1, 0, or 1/k for a k-way tie with the gold


class HeldoutLoss(BaseModel):
    """Next-token loss on held-out reference text."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    loss: float  # mean nats per predicted token
    bits_per_byte: float  # total bits / UTF-8 bytes scored (comparable across tokenizers)
    tokens: int  # tokens predicted
    bytes: int  # UTF-8 bytes of the text those tokens cover
    texts: int


class ProxyReport(BaseModel):
    """What one proxy run measured: JSON-serialisable (`to_json` / `from_json` round-trip)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: str = REPORT_FORMAT
    dataset_version: str
    manifest_sha256: str
    tokenizer_sha256: str
    settings: ProxySettings
    device: str
    torch_version: str
    parameters: int
    steps: int
    tokens_trained: int  # input positions processed (steps x batch x window), the compute
    loss_tokens: int  # target tokens that entered the loss (padding excluded)
    epochs: float  # passes over the dataset's windows
    train_losses: list[float]  # per optimizer step (mean nats per loss token)
    heldout: HeldoutLoss
    tasks: list[TaskScore]
    wall_seconds: dict[str, float]  # train, heldout, tasks, total

    @property
    def mean_accuracy(self) -> float:
        return float(np.mean([task.accuracy for task in self.tasks])) if self.tasks else math.nan

    @property
    def final_train_loss(self) -> float:
        """Mean loss of the last 10% of steps (at least one)."""
        tail = self.train_losses[-max(1, len(self.train_losses) // 10):]
        return float(np.mean(tail)) if tail else math.nan

    def task(self, name: str) -> TaskScore:
        for task in self.tasks:
            if task.name == name:
                return task
        raise KeyError(f"no task {name!r} in the report of {self.dataset_version}")

    def to_json(self, indent: int | None = 1) -> str:
        return self.model_dump_json(indent=indent)

    @classmethod
    def from_json(cls, text: str | bytes) -> ProxyReport:
        return cls.model_validate_json(text)


# --- bootstrap -------------------------------------------------------------------------------


def _seed_of(*parts: object) -> int:
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def bootstrap_interval(
    values: Sequence[float], resamples: int, confidence: float, seed: int
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of `values` (numpy PCG64 seeded by `seed`)."""
    array = np.asarray(values, dtype=np.float64)
    if array.size == 0:
        return math.nan, math.nan
    rng = np.random.Generator(np.random.PCG64(seed))
    means = np.empty(resamples)
    for start in range(0, resamples, 256):  # bounded memory for large item counts
        count = min(256, resamples - start)
        means[start:start + count] = array[rng.integers(0, array.size, (count, array.size))
                                           ].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return float(low), float(high)


# --- torch: the model -------------------------------------------------------------------------


class TokenizerLike(Protocol):
    """What scoring needs of a tokenizer (`curation.tokenizer.PinnedTokenizer` is one)."""

    eos_id: int

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]: ...


def _torch() -> Any:
    import torch

    return torch


@cache
def _model_classes() -> tuple[type, type]:
    torch = _torch()
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
        return "cuda" if _torch().cuda.is_available() else "cpu"
    return device


@contextlib.contextmanager
def deterministic(threads: int, device: str = "cpu") -> Iterator[None]:
    """Deterministic algorithms on and `threads` intra-op threads for the block (restored
    after). CUDA: warn-only, since some CUDA kernels have no deterministic variant."""
    torch = _torch()
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


def _windows(sample: dict[str, np.ndarray], window: int) -> Iterator[tuple[np.ndarray, ...]]:
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


def _window_stream(dataset: ShardDataset, sampler: SequenceSampler,
                   window: int) -> Iterator[tuple[np.ndarray, ...]]:
    """Windows of the sampled sequences, epoch after epoch, forever."""
    if len(sampler) == 0:
        raise ValueError(f"{dataset.directory}: no sequences to train on")
    while True:
        for index in sampler:  # one epoch, then the sampler moves to the next
            yield from _windows(dataset.sample(index), window)


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
    torch = _torch()
    decay = [p for p in model.parameters() if p.dim() > 1]
    other = [p for p in model.parameters() if p.dim() <= 1]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": settings.weight_decay},
         {"params": other, "weight_decay": 0.0}],
        lr=settings.learning_rate, betas=(settings.beta1, settings.beta2), foreach=False)


def train_proxy(shards_dir: str | Path, settings: ProxySettings | None = None) -> TrainedProxy:
    """Trains a fresh proxy on a shard build through the project's loader (`ShardDataset`,
    `SequenceSampler` keyed by `settings.seed` over all sequences) for `settings.token_budget`
    input positions, rounded up to whole optimizer steps of `batch_size` windows."""
    settings = settings or ProxySettings()
    torch = _torch()
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
        stream = _window_stream(dataset, SequenceSampler(len(dataset), settings.seed,
                                                         split="all"), window)
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


# --- scoring -----------------------------------------------------------------------------------


def _model_device(model: Any) -> Any:
    parameters = getattr(model, "parameters", None)
    if parameters is not None:
        for parameter in parameters():
            return parameter.device
    return _torch().device("cpu")


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
    torch = _torch()
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
    low, high = bootstrap_interval(credit, resamples, confidence, _seed_of(seed, name))
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
    return str(_torch().__version__)


def run_proxy_eval(
    shards_dir: str | Path,
    tokenizer: TokenizerLike,
    heldout_texts: Sequence[str],
    evals_dir: str | Path,
    settings: ProxySettings | None = None,
) -> ProxyReport:
    """Trains the proxy on the shards, then measures the held-out loss and every benchmark of
    `settings.eval`. `tokenizer` must be the one the shards were built with (checked by hash
    when it has a `sha256`)."""
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
                load_multiple_choice(name, evals_dir, evaluation.max_items,
                                     evaluation.selection_seed),
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


# --- comparison -------------------------------------------------------------------------------


class ComparisonRule(BaseModel):
    """When a candidate version ships against a baseline.

    The candidate ships when (1) no task is worse beyond its interval, (2) its mean accuracy
    over the tasks is not lower than the baseline's by more than `mean_tolerance`, (3) if
    `max_heldout_increase` is set, its held-out loss (nats per token) is not higher by more
    than that, and (4) with `require_matched_compute`, both runs used the same model shape,
    token budget, batch, schedule, seed and eval settings, trained the same number of tokens
    and scored the same tasks on the same items.

    "Worse beyond its interval" (`task_test`):
    - "baseline_interval" (default): the candidate's accuracy is below the lower end of the
      baseline's confidence interval for that task;
    - "paired_bootstrap": the upper end of the paired bootstrap interval of (candidate -
      baseline) accuracy over the same items is below zero (needs the same items; more
      sensitive, since both models answer the same questions).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_test: Literal["baseline_interval", "paired_bootstrap"] = "baseline_interval"
    mean_tolerance: float = Field(default=0.0, ge=0.0)
    max_heldout_increase: float | None = Field(default=None, ge=0.0)
    require_matched_compute: bool = True
    resamples: int = Field(default=1000, ge=1)  # paired bootstrap
    confidence: float = Field(default=0.95, gt=0.0, lt=1.0)
    seed: int = 0


class TaskComparison(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    items: int
    baseline: float
    baseline_ci: tuple[float, float]
    candidate: float
    candidate_ci: tuple[float, float]
    delta: float
    delta_ci: tuple[float, float] | None  # paired bootstrap; None when the items differ
    worse: bool  # beyond the interval, by the rule's task test
    better: bool  # the mirror image of `worse`


class Comparison(BaseModel):
    """A baseline and a candidate report side by side, with the verdict."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    baseline_version: str
    candidate_version: str
    rule: ComparisonRule
    tasks: list[TaskComparison]
    baseline_mean: float
    candidate_mean: float
    baseline_heldout: HeldoutLoss
    candidate_heldout: HeldoutLoss
    baseline_tokens: int
    candidate_tokens: int
    baseline_seconds: float
    candidate_seconds: float
    mismatches: list[str]  # settings that differ between the runs (compute, eval)
    ships: bool
    reasons: list[str]  # why not (empty when it ships)

    @property
    def verdict(self) -> str:
        return "ship" if self.ships else "hold"


_COMPUTE_FIELDS = ("layers", "d_model", "heads", "mlp_ratio", "seq_len", "document_masking",
                   "token_budget", "batch_size", "learning_rate", "schedule", "warmup_fraction",
                   "min_lr_ratio", "weight_decay", "beta1", "beta2", "grad_clip", "seed",
                   "precision", "eval")


def _mismatches(baseline: ProxyReport, candidate: ProxyReport) -> list[str]:
    found = [f"settings.{name}" for name in _COMPUTE_FIELDS
             if getattr(baseline.settings, name) != getattr(candidate.settings, name)]
    if baseline.tokens_trained != candidate.tokens_trained:
        found.append(f"tokens_trained ({baseline.tokens_trained:,} vs "
                     f"{candidate.tokens_trained:,})")
    names = [task.name for task in baseline.tasks]
    if names != [task.name for task in candidate.tasks]:
        found.append("tasks")
    else:
        found.extend(f"items of {task.name}" for task in baseline.tasks
                     if task.item_ids != candidate.task(task.name).item_ids)
    return found


def _paired_interval(base: TaskScore, cand: TaskScore,
                     rule: ComparisonRule) -> tuple[float, float] | None:
    if base.item_ids != cand.item_ids or not base.item_ids:
        return None
    difference = np.asarray(cand.item_scores) - np.asarray(base.item_scores)
    return bootstrap_interval(difference, rule.resamples, rule.confidence,
                              _seed_of(rule.seed, "paired", base.name))


def compare(
    baseline: ProxyReport, candidate: ProxyReport, rule: ComparisonRule | None = None
) -> Comparison:
    """Per task accuracy and interval of both runs, held-out loss, tokens and wall time, and the
    verdict under `rule` (`ComparisonRule`; default: ship when no task is worse beyond the
    baseline's interval and the mean accuracy is not lower, on matched compute)."""
    rule = rule or ComparisonRule()
    rows: list[TaskComparison] = []
    reasons: list[str] = []
    candidate_names = {task.name for task in candidate.tasks}
    for base in baseline.tasks:
        if base.name not in candidate_names:
            reasons.append(f"{base.name}: not scored in the candidate")
            continue
        cand = candidate.task(base.name)
        paired = _paired_interval(base, cand, rule)
        if rule.task_test == "paired_bootstrap":
            if paired is None:
                reasons.append(f"{base.name}: different items, no paired interval")
                worse = better = False
            else:
                worse, better = paired[1] < 0.0, paired[0] > 0.0
        else:
            worse, better = cand.accuracy < base.ci_low, cand.accuracy > base.ci_high
        if worse:
            reasons.append(f"{base.name}: {cand.accuracy:.3f} is worse than {base.accuracy:.3f} "
                           f"beyond the interval ({rule.task_test})")
        rows.append(TaskComparison(
            name=base.name, items=base.items, baseline=base.accuracy,
            baseline_ci=(base.ci_low, base.ci_high), candidate=cand.accuracy,
            candidate_ci=(cand.ci_low, cand.ci_high), delta=cand.accuracy - base.accuracy,
            delta_ci=paired, worse=worse, better=better))
    extra = sorted(candidate_names - {task.name for task in baseline.tasks})
    if extra:
        reasons.append(f"tasks {extra} are not scored in the baseline")
    baseline_mean, candidate_mean = baseline.mean_accuracy, candidate.mean_accuracy
    if not candidate_mean >= baseline_mean - rule.mean_tolerance:
        reasons.append(f"mean accuracy {candidate_mean:.4f} is lower than the baseline's "
                       f"{baseline_mean:.4f}" + (f" by more than {rule.mean_tolerance}"
                                                 if rule.mean_tolerance else ""))
    increase = candidate.heldout.loss - baseline.heldout.loss
    if rule.max_heldout_increase is not None and increase > rule.max_heldout_increase:
        reasons.append(f"held-out loss rises by {increase:.4f} nats/token "
                       f"(allowed {rule.max_heldout_increase})")
    mismatches = _mismatches(baseline, candidate)
    if mismatches and rule.require_matched_compute:
        reasons.append("not matched: " + ", ".join(mismatches))
    return Comparison(
        baseline_version=baseline.dataset_version, candidate_version=candidate.dataset_version,
        rule=rule, tasks=rows, baseline_mean=baseline_mean, candidate_mean=candidate_mean,
        baseline_heldout=baseline.heldout, candidate_heldout=candidate.heldout,
        baseline_tokens=baseline.tokens_trained, candidate_tokens=candidate.tokens_trained,
        baseline_seconds=baseline.wall_seconds.get("total", math.nan),
        candidate_seconds=candidate.wall_seconds.get("total", math.nan),
        mismatches=mismatches, ships=not reasons, reasons=reasons)


# --- markdown ----------------------------------------------------------------------------------


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def _interval(values: tuple[float, float] | None, signed: bool = False) -> str:
    if values is None:
        return "n/a"
    sign = "+" if signed else ""
    return f"[{100 * values[0]:{sign}.1f}, {100 * values[1]:{sign}.1f}]"


def render_comparison(comparison: Comparison) -> str:
    """The comparison as markdown: verdict, one row per task (accuracy % with intervals, the
    paired delta), the mean, held-out loss, tokens trained and wall time."""
    c = comparison
    head = (f"**Verdict: {c.verdict}** (candidate `{c.candidate_version}` vs baseline "
            f"`{c.baseline_version}`, task test `{c.rule.task_test}`)")
    lines = [head, ""]
    lines += [f"- {reason}" for reason in c.reasons]
    if c.reasons:
        lines.append("")
    lines += ["| task | items | baseline % | candidate % | delta (pts) | paired delta CI | |",
              "|---|---:|---|---|---:|---|---|"]
    for row in c.tasks:
        mark = "worse" if row.worse else "better" if row.better else ""
        lines.append(f"| {row.name} | {row.items} | {_pct(row.baseline)} "
                     f"{_interval(row.baseline_ci)} | {_pct(row.candidate)} "
                     f"{_interval(row.candidate_ci)} | {100 * row.delta:+.1f} | "
                     f"{_interval(row.delta_ci, signed=True)} | {mark} |")
    lines.append(f"| **mean** | | {_pct(c.baseline_mean)} | {_pct(c.candidate_mean)} | "
                 f"{100 * (c.candidate_mean - c.baseline_mean):+.1f} | | |")
    lines += ["", "| | baseline | candidate |", "|---|---:|---:|",
              f"| held-out loss (nats/token) | {c.baseline_heldout.loss:.4f} | "
              f"{c.candidate_heldout.loss:.4f} |",
              f"| held-out bits/byte | {c.baseline_heldout.bits_per_byte:.4f} | "
              f"{c.candidate_heldout.bits_per_byte:.4f} |",
              f"| tokens trained | {c.baseline_tokens:,} | {c.candidate_tokens:,} |",
              f"| wall time (s) | {c.baseline_seconds:.1f} | {c.candidate_seconds:.1f} |"]
    if c.mismatches:
        lines += ["", "Runs differ in: " + ", ".join(c.mismatches)]
    return "\n".join(lines) + "\n"


def render_report(report: ProxyReport) -> str:
    """One run as markdown (for an asset's metadata)."""
    lines = [f"Proxy on `{report.dataset_version}`: {report.parameters:,} parameters, "
             f"{report.tokens_trained:,} tokens ({report.steps} steps, {report.epochs:.2f} "
             f"epochs) on {report.device}, {report.wall_seconds.get('total', math.nan):.1f} s",
             "", "| task | items | accuracy % | interval | chance % |", "|---|---:|---:|---|---:|"]
    for task in report.tasks:
        lines.append(f"| {task.name} | {task.items} | {_pct(task.accuracy)} | "
                     f"{_interval((task.ci_low, task.ci_high))} | {_pct(task.chance)} |")
    lines += [f"| **mean** | | {_pct(report.mean_accuracy)} | | |", "",
              f"Train loss (last 10% of steps): {report.final_train_loss:.4f}; held-out loss "
              f"{report.heldout.loss:.4f} nats/token, {report.heldout.bits_per_byte:.4f} "
              f"bits/byte over {report.heldout.tokens:,} tokens"]
    return "\n".join(lines) + "\n"
