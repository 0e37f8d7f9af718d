"""Comparison of two proxy runs and the markdown of runs and comparisons. No torch.

**Comparison.** `compare(baseline, candidate, rule)` lines two `ProxyReport`s up per task and
gives a verdict (`ComparisonRule`, documented there); `render_comparison` writes it as markdown,
`render_report` writes one run.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from curation.proxy.reports import (
    HeldoutLoss,
    ProxyReport,
    TaskScore,
    bootstrap_interval,
    seed_of,
)

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
                              seed_of(rule.seed, "paired", base.name))


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
