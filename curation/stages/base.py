"""Per-document annotation stages: one task per `documents` part, signals plus decisions.

Stages annotate (docs/architecture.md, "Annotate, then select"): they write `doc_id` with their
signals and a verdict under the pipeline defaults, and a decision row for each drop, never
another copy of the text.

`AnnotateStage` is the shared shape, in the spirit of datatrove's `BaseFilter`: it reads the
task's `documents` part, hands it to the one method a stage writes (`annotate`), and turns the
`Annotation` it returns into the task's tables and statistics, so every annotate stage counts
and records its drops the same way. `AnnotateStage.run` runs it over a partition.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pyarrow as pa

from curation.config import stable_hash
from curation.graph import DOCUMENTS
from curation.partition import Manifest, PartitionLayout
from curation.schema import decisions_table
from curation.stats import StageStats
from curation.storage import Store
from curation.tasks import (
    MAIN_TABLE,
    PartitionResult,
    PartitionRun,
    TaskOutput,
    TaskResult,
    run_partition,
)


@dataclass(frozen=True)
class DocumentsInput:
    """The columns a stage reads from one `documents` partition, part by part."""

    store: Store
    partition: str
    columns: tuple[str, ...] = ("doc_id", "text")

    def upstream(self, asset: str) -> PartitionLayout:
        """The same partition of another asset a stage reads (its parts line up with ours)."""
        return PartitionLayout(self.store, asset, self.partition)

    @property
    def layout(self) -> PartitionLayout:
        return self.upstream(DOCUMENTS)

    def task_count(self) -> int:
        return len(self.layout.complete_manifest().parts)

    def data_version(self) -> str:
        return self.layout.complete_manifest().data_version

    def read(self, index: int) -> pa.Table:
        return self.layout.read_part(index, columns=list(self.columns))


@dataclass(frozen=True)
class Drop:
    """A document the stage drops under the pipeline defaults: one decision row."""

    doc_id: str
    reason: str
    value: float | None = None
    detail: str | None = None


@dataclass
class Annotation:
    """What a stage computed for one part.

    `signals` is the main table (one row per input document); `drops` the decision rows in the
    order they are written (a document may have several, e.g. one per eval item it contains,
    and still counts once per reason); `tables` the side tables (`edits`, `hits`, or
    `"other_asset:part"` for an asset in the stage's `also`); `counts` goes to
    `StageStats.counts`; `sample_ids` are the task's spot-check candidates.
    """

    signals: pa.Table
    drops: list[Drop] = field(default_factory=list)
    tables: dict[str, pa.Table] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    sample_ids: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class AnnotateStage(ABC):
    """One task per `documents` part: `annotate` computes, the base builds the rest.

    A subclass is a frozen dataclass too (tasks are pickled to worker processes and Ray) and
    sets `asset`. The base writes `Annotation.signals` as the part, a `decisions` table of its
    drops (stage `asset`, verdict `drop`) unless `writes_decisions` is False, and the side
    tables; its statistics count every input document as a record and a candidate, a
    document with any drop as rejected (once per reason) and every other one as kept.
    """

    documents: DocumentsInput

    asset: ClassVar[str]
    # Assets written in the same pass, by a side table named "asset:part" (PartitionRun.also).
    also: ClassVar[tuple[str, ...]] = ()
    # A stage that only scores (no verdict) has never written a decisions table: readers
    # tell "no verdict" from "nothing dropped" by it.
    writes_decisions: ClassVar[bool] = True
    # Reasons a task's statistics name even when nothing tripped them (a one-rule stage has
    # always reported its rule).
    reported_reasons: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def annotate(self, index: int, table: pa.Table) -> Annotation:
        """Signals and drops for part `index` (`table`: the `documents` columns read)."""

    def __call__(self, index: int) -> TaskOutput:
        table = self.documents.read(index)
        annotation = self.annotate(index, table)
        dropped = dict.fromkeys((drop.doc_id, drop.reason) for drop in annotation.drops)
        stats = StageStats(records_in=table.num_rows, candidates=table.num_rows,
                           docs_out=table.num_rows - len({doc_id for doc_id, _ in dropped}),
                           rejects=Counter(reason for _, reason in dropped))
        for reason in self.reported_reasons:
            stats.rejects.setdefault(reason, 0)
        stats.counts.update(annotation.counts)
        tables = {MAIN_TABLE: annotation.signals, **annotation.tables}
        if self.writes_decisions:
            tables["decisions"] = decisions_table([
                {"doc_id": drop.doc_id, "stage": self.asset, "verdict": "drop",
                 "reason": drop.reason, "value": drop.value, "detail": drop.detail}
                for drop in annotation.drops])
        return TaskOutput(tables, stats, annotation.sample_ids)

    def run(self, inputs: dict[str, Any], workers: int,
            on_task_done: Callable[[TaskResult, int, int], None] | None = None, *,
            samples: tuple[int, str] | None = None) -> PartitionResult:
        """Runs (or resumes) every part under the version `stable_hash(inputs)`: the kernel
        version, the settings and the data versions read (see `run_partition`)."""
        run = PartitionRun(self.documents.store, self.asset, self.documents.partition,
                           stable_hash(inputs), also=self.also)
        return run_partition(run, self.documents.task_count(), self, workers, on_task_done,
                             samples=samples)


SKIPPED = "skipped"


def write_skipped(layout: PartitionLayout, kernel_version: str, reason: str,
                  empty: pa.Table | None = None) -> Manifest:
    """A partition that holds no output and says why (`reason`, e.g. the section that turns
    the stage off), with `empty` as its one part when readers expect a table; it replaces
    any earlier output."""
    version = stable_hash({"kernel": kernel_version, SKIPPED: reason})
    layout.prepare(version)
    parts = [] if empty is None else [layout.write_part(0, empty)]
    manifest = Manifest(layout.asset, layout.partition, version, parts, extra={SKIPPED: reason})
    layout.write_manifest(manifest)
    return manifest


def skipped_reason(store: Store, asset: str, partition: str) -> str | None:
    """Why the stored partition of `asset` holds no output (`write_skipped`); None if it
    does."""
    return PartitionLayout(store, asset, partition).complete_manifest().extra.get(SKIPPED)
