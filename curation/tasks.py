"""Resumable tasks inside one asset partition.

A task writes its tables (the asset's main `part`, and named side tables such as `decisions`,
`edits` or `rejects`), then its completion marker; a task whose marker carries the current version
is not redone. The manifest is written last, listing every table's parts in task order, so the
output never depends on the worker count or on which tasks an earlier, killed run finished.
"""

from __future__ import annotations

import heapq
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from curation.executor import map_tasks
from curation.partition import Manifest, PartFile, PartitionLayout
from curation.schema import sample_rank
from curation.stats import StageStats
from curation.storage import Store, read_parquet

MAIN_TABLE = "part"


@dataclass
class TaskOutput:
    """What one task computed: its tables by name, its statistics and its sample candidates."""

    tables: dict[str, pa.Table]
    stats: StageStats
    sample_ids: list[str] = field(default_factory=list)


@dataclass
class TaskResult:
    index: int
    parts: dict[str, PartFile]
    stats: StageStats
    sample_ids: list[str]
    skipped: bool = False


class TaskWork(Protocol):
    """Picklable work for one task index (worker processes, Ray tasks)."""

    def __call__(self, index: int) -> TaskOutput: ...


@dataclass(frozen=True)
class PartitionRun:
    """One run of an asset partition: where it writes and under which version.

    `also` names assets computed in the same pass (a multi-asset): a task's table named
    `"other_asset:part"` goes to that asset's partition, which gets a manifest of its own.
    """

    store: Store
    asset: str
    partition: str
    version: str
    also: tuple[str, ...] = ()

    @property
    def layout(self) -> PartitionLayout:
        return PartitionLayout(self.store, self.asset, self.partition)

    def layout_for(self, name: str) -> tuple[PartitionLayout, str]:
        """The layout and table name a task table goes to."""
        asset, _, table = name.rpartition(":")
        if not asset:
            return self.layout, table
        if asset not in self.also:
            raise ValueError(f"table {name!r} names an asset this run does not write")
        return PartitionLayout(self.store, asset, self.partition), table


@dataclass(frozen=True)
class _RunTask:
    run: PartitionRun
    work: TaskWork

    def __call__(self, index: int) -> TaskResult:
        layout = self.run.layout
        marker = layout.read_marker(index)
        if marker is not None and marker["version"] == self.run.version:
            stats = StageStats.from_dict(marker["stats"])
            stats.tasks_run, stats.tasks_skipped = 0, 1
            parts = {name: PartFile(**part) for name, part in marker["parts"].items()}
            return TaskResult(index, parts, stats, marker["sample_ids"], skipped=True)
        started = time.perf_counter()
        output = self.work(index)
        parts = {}
        for name, table in sorted(output.tables.items()):
            target, table_name = self.run.layout_for(name)
            parts[name] = target.write_table(table_name, index, table)
        output.stats.task_seconds = time.perf_counter() - started
        output.stats.tasks_run = 1
        layout.write_marker(index, {
            "version": self.run.version, "stats": output.stats.to_dict(),
            "parts": {name: asdict(part) for name, part in parts.items()},
            "sample_ids": output.sample_ids,
        })
        return TaskResult(index, parts, output.stats, output.sample_ids)


@dataclass
class PartitionResult:
    manifest: Manifest
    stats: StageStats
    results: list[TaskResult]
    wall_seconds: float


def run_partition(
    run: PartitionRun,
    task_count: int,
    work: TaskWork,
    workers: int,
    on_task_done: Callable[[TaskResult, int, int], None] | None = None,
    extra: dict[str, Any] | None = None,
) -> PartitionResult:
    """Runs (or resumes) every task of a partition and writes its manifest last."""
    started = time.perf_counter()
    for asset in (run.asset, *run.also):
        PartitionLayout(run.store, asset, run.partition).prepare(run.version)
    results = map_tasks(_RunTask(run, work), list(range(task_count)), workers, on_task_done)
    stats = sum((result.stats for result in results), StageStats())
    for asset in run.also:
        PartitionLayout(run.store, asset, run.partition).write_manifest(
            _manifest(run, asset, results, {}))
    manifest = _manifest(run, run.asset, results, {"stats": stats.to_dict(), **(extra or {})})
    run.layout.write_manifest(manifest)
    return PartitionResult(manifest, stats, results, time.perf_counter() - started)


def _manifest(run: PartitionRun, asset: str, results: list[TaskResult],
              extra: dict[str, Any]) -> Manifest:
    prefix = "" if asset == run.asset else f"{asset}:"
    names = sorted({name.removeprefix(prefix) for result in results for name in result.parts
                    if name.startswith(prefix) and (prefix or ":" not in name)})
    parts = {name: [r.parts[prefix + name] for r in results if prefix + name in r.parts]
             for name in names}
    return Manifest(asset, run.partition, run.version, parts.pop(MAIN_TABLE, []),
                    tables=parts, extra=extra)


def pick_samples(store: Store, results: Sequence[TaskResult], size: int,
                 path: str) -> list[dict[str, Any]]:
    """Spot-check samples written to `path` (JSON lines), chosen by a hash of the doc_id so they
    do not depend on task order or worker count."""
    candidates = [doc_id for result in results for doc_id in result.sample_ids]
    chosen = set(heapq.nsmallest(size, candidates, key=sample_rank))
    rows: list[dict[str, Any]] = []
    for result in results:
        if chosen.intersection(result.sample_ids):
            table = read_parquet(store, result.parts[MAIN_TABLE].key)
            rows.extend(table.filter(pc.is_in(table["doc_id"], pa.array(sorted(chosen))))
                        .to_pylist())
    rows.sort(key=lambda row: sample_rank(row["doc_id"]))
    lines = [json.dumps(row, default=str, ensure_ascii=False) for row in rows]
    store.write_bytes(path, ("\n".join(lines) + "\n").encode())
    return rows


def sample_candidates(doc_ids: Sequence[str], size: int) -> list[str]:
    return heapq.nsmallest(size, doc_ids, key=sample_rank)
