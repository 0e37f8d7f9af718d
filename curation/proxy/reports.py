"""Settings, results and their JSON for the ablation gate (`curation.proxy`).

`ProxySettings` shapes a whole proxy run (model, matched compute, optimizer, hardware) and
`EvalSettings` its scoring; `TaskScore`, `HeldoutLoss` and `ProxyReport` hold what a run
measured. `ProxyReport` is a pydantic model: `to_json()` / `ProxyReport.from_json()` round-trip
exactly. `bootstrap_interval` draws the seeded percentile intervals the scores and comparisons
carry. No torch.

**Matched compute.** Every recipe is trained with the same `ProxySettings`: the same model shape,
the same token budget (`token_budget`, rounded up to whole optimizer steps), the same batch size,
schedule and seed. If a dataset has fewer tokens than the budget, its epochs repeat, each in the
loader's deterministic per-epoch order (`SequenceSampler`, keyed by the proxy's seed).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

REPORT_FORMAT = "proxy-eval/1"
Normalisation = Literal["chars", "tokens", "none"]

# The benchmarks with a built-in parser of the llm-foundry export (`evalsets.load_multiple_choice`);
# others are declared with a field mapping in pipeline.yaml (`evalsets.eval_sets`).
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
    def _named_once(self) -> EvalSettings:
        # Which names exist is known where the sets are found (`evalsets.eval_sets`): a
        # benchmark declared in pipeline.yaml counts as much as a built-in parser.
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


def seed_of(*parts: object) -> int:
    """A 64-bit seed derived from `parts`, so each (seed, task) draws its own bootstrap."""
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

