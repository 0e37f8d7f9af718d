"""Per-stage statistics that add up across tasks (datatrove's habit, typed)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Any

_COUNTERS = ("record_types", "non_html", "rejects", "counts")


@dataclass
class StageStats:
    """Counts for one stage over one task or, merged by `+`, over a partition.

    `candidates` is the survival denominator: the inputs the stage tries to turn into documents
    (HTML responses for WARC input, rows for curated sources, documents for later stages);
    `rejects` counts drops per reason and `counts` anything else a stage tallies.
    """

    records_in: int = 0
    candidates: int = 0
    docs_out: int = 0
    input_bytes: int = 0
    html_bytes: int = 0
    text_bytes: int = 0
    task_seconds: float = 0.0
    tasks_run: int = 0
    tasks_skipped: int = 0
    record_types: Counter[str] = field(default_factory=Counter)
    non_html: Counter[str] = field(default_factory=Counter)
    rejects: Counter[str] = field(default_factory=Counter)
    counts: Counter[str] = field(default_factory=Counter)

    def __add__(self, other: StageStats) -> StageStats:
        merged = StageStats()
        for item in fields(self):
            setattr(merged, item.name, getattr(self, item.name) + getattr(other, item.name))
        return merged

    @property
    def survival(self) -> float:
        return self.docs_out / self.candidates if self.candidates else 0.0

    @property
    def rejected(self) -> int:
        return sum(self.rejects.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            item.name: dict(sorted(getattr(self, item.name).items()))
            if item.name in _COUNTERS else getattr(self, item.name)
            for item in fields(self)
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> StageStats:
        values = {key: Counter(value) if key in _COUNTERS else value for key, value in raw.items()}
        return cls(**values)
