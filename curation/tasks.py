"""Resumable tasks inside one asset partition.

A task writes its tables (the asset's main `part`, and named side tables such as `decisions`,
`edits` or `rejects`), then its completion marker; a task whose marker carries the current version
is not redone. The manifest is written last, listing every table's parts in task order, so the
output never depends on the worker count or on which tasks an earlier, killed run finished.

A run holds a lock on each partition it writes (`{asset}/{partition}/_lock`, see
`PartitionLock`), so two materializations of one partition never write it at once: the second
waits for the first, up to a bound, then stops with an error naming the holder; a lock whose
holder stopped heartbeating (or, on the same host, whose process is gone) is taken over.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from curation.executor import map_tasks
from curation.partition import LOCK_NAME, Manifest, PartFile, PartitionLayout
from curation.schema import sample_rank
from curation.stats import StageStats
from curation.storage import Store, read_parquet
from curation.takedowns import without_taken_down

MAIN_TABLE = "part"
log = logging.getLogger(__name__)


@dataclass
class TaskOutput:
    """What one task computed: its tables by name, its statistics and its sample candidates.
    A table may be a local Parquet file (`curation.storage.write_parquet_file`) when it need
    not fit in memory: it is streamed into the store, then deleted."""

    tables: dict[str, pa.Table | Path]
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
class Planned:
    """Work whose tasks need a round over the whole partition first (counts, an exchange):
    `plan` runs inside the partition's lock, after the partition is prepared and only when some
    task is not yet done, and returns the tasks' work. `scratch`: a store prefix the plan and
    tasks write for each other, removed (still inside the lock) once the tasks are done."""

    plan: Callable[[], TaskWork]
    scratch: str


def _nothing_to_do(index: int) -> TaskOutput:
    raise RuntimeError(f"task {index} has a current marker and must not run")


def _pending(run: PartitionRun, task_count: int) -> bool:
    return any((marker := run.layout.read_marker(index)) is None
               or marker["version"] != run.version for index in range(task_count))


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
            if isinstance(table, Path):
                table.unlink()
        output.stats.task_seconds = time.perf_counter() - started
        output.stats.tasks_run = 1
        layout.write_marker(index, {
            "version": self.run.version, "stats": output.stats.to_dict(),
            "parts": {name: asdict(part) for name, part in parts.items()},
            "sample_ids": output.sample_ids,
        })
        return TaskResult(index, parts, output.stats, output.sample_ids)


# --- partition locks -------------------------------------------------------------------------


def _env_seconds(name: str, default: float) -> float:
    value = os.environ.get(name)
    return float(value) if value not in (None, "") else default


@dataclass(frozen=True)
class LockSettings:
    """How a run waits for, keeps and takes over a partition lock (run configuration, never
    versioned). `CORPUS_LOCK_WAIT_SECONDS`, `CORPUS_LOCK_STALE_SECONDS` and
    `CORPUS_LOCK_HEARTBEAT_SECONDS` override the defaults."""

    # How long a run waits for a lock another live run holds before it gives up.
    wait_seconds: float = 300.0
    # A lock whose heartbeat is older than this (by the holder's clock, or unchanged for this
    # long as the waiter watches it) is stale and is taken over.
    stale_seconds: float = 120.0
    # How often the holder refreshes its heartbeat.
    heartbeat_seconds: float = 15.0
    # How often a waiting run looks again.
    poll_seconds: float = 0.5

    def __post_init__(self) -> None:
        if self.heartbeat_seconds >= self.stale_seconds:
            raise ValueError("heartbeat_seconds must be shorter than stale_seconds")

    @classmethod
    def from_env(cls) -> LockSettings:
        default = cls()
        return cls(
            wait_seconds=_env_seconds("CORPUS_LOCK_WAIT_SECONDS", default.wait_seconds),
            stale_seconds=_env_seconds("CORPUS_LOCK_STALE_SECONDS", default.stale_seconds),
            heartbeat_seconds=_env_seconds("CORPUS_LOCK_HEARTBEAT_SECONDS",
                                           default.heartbeat_seconds),
            poll_seconds=_env_seconds("CORPUS_LOCK_POLL_SECONDS", default.poll_seconds),
        )


class PartitionLockedError(RuntimeError):
    """Another live run holds the partition's lock and did not release it in time."""

    def __init__(self, label: str, holder: dict[str, Any], waited: float) -> None:
        age = time.time() - _heartbeat(holder)
        super().__init__(
            f"{label} is locked by run {holder.get('run_id')!r} (host {holder.get('host')}, "
            f"pid {holder.get('pid')}, started {_when(holder.get('started_at'))}, last "
            f"heartbeat {age:.1f} s ago); gave up after waiting {waited:.1f} s. Wait for that "
            f"run to finish, or stop it; a lock whose heartbeat stops is taken over after "
            f"the stale bound")
        self.holder = holder


class LockLostError(RuntimeError):
    """This run's lock was taken over (its heartbeat went stale): it must not finish."""


def _heartbeat(holder: dict[str, Any]) -> float:
    """The holder's last heartbeat (0, long ago, when the lock holds none readable)."""
    try:
        return float(holder.get("heartbeat") or 0)
    except (TypeError, ValueError):
        return 0.0


def _when(stamp: Any) -> str:
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(float(stamp)))
    except (TypeError, ValueError):
        return "?"


def new_run_id() -> str:
    return os.environ.get("CORPUS_RUN_ID") or \
        f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def _process_gone(holder: dict[str, Any]) -> bool:
    """Whether the holder ran on this host in a process that no longer exists."""
    if holder.get("host") != socket.gethostname():
        return False
    try:
        pid = int(holder.get("pid"))
    except (TypeError, ValueError):
        return False
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class PartitionLock:
    """A lock object in the store: created only if absent (local: `os.link`, an O_EXCL-style
    create that never shows a half-written file; S3: a conditional PUT with `If-None-Match: *`),
    holding the run's id and a heartbeat time that a thread refreshes with compare-and-swap
    writes (local: under `flock`; S3: `If-Match: <ETag>`). Takeovers of stale locks use the
    same compare-and-swap, so of two runs that find one stale lock only one gets it."""

    def __init__(self, store: Store, key: str, label: str, run_id: str,
                 settings: LockSettings) -> None:
        self.store, self.key, self.label, self.run_id = store, key, label, run_id
        self.settings = settings
        self.started_at = time.time()
        self.token: str | None = None
        self.lost: str | None = None
        self.took_over: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._token_lock = threading.Lock()

    def _payload(self) -> bytes:
        return json.dumps({
            "run_id": self.run_id, "host": socket.gethostname(), "pid": os.getpid(),
            "started_at": self.started_at, "heartbeat": time.time(), "lock": self.label,
        }, sort_keys=True).encode()

    def _stale(self, holder: dict[str, Any], unchanged_for: float) -> str | None:
        age = time.time() - _heartbeat(holder)
        if age > self.settings.stale_seconds:
            return f"its heartbeat is {age:.1f} s old"
        if unchanged_for > self.settings.stale_seconds:
            return f"it has not changed for {unchanged_for:.1f} s"
        if _process_gone(holder):
            return f"its process {holder.get('pid')} on this host is gone"
        return None

    def acquire(self) -> None:
        started = time.monotonic()
        seen: tuple[str, float] | None = None  # (token, first seen) of the current holder's lock
        while True:
            token = self.store.create_if_absent(self.key, self._payload())
            if token is not None:
                self.token = token
                break
            current = self.store.read_versioned(self.key)
            if current is None:
                continue  # released in between: try to create it again
            data, token = current
            try:
                holder = json.loads(data)
                if not isinstance(holder, dict):
                    raise ValueError("not an object")
            except ValueError:
                holder = {"run_id": None, "heartbeat": 0}  # unreadable: stale at once
            now = time.monotonic()
            if seen is None or seen[0] != token:
                seen = (token, now)
            reason = self._stale(holder, now - seen[1])
            if reason is not None:
                taken = self.store.replace_if_match(self.key, self._payload(), token)
                if taken is not None:
                    self.token = taken
                    self.took_over = holder
                    log.warning("%s: took over the stale lock of run %r (%s)", self.label,
                                holder.get("run_id"), reason)
                    break
                continue  # another run took it, or the holder just heartbeated
            waited = now - started
            if waited >= self.settings.wait_seconds:
                raise PartitionLockedError(self.label, holder, waited)
            log.info("%s: waiting for the lock held by run %r", self.label, holder.get("run_id"))
            time.sleep(min(self.settings.poll_seconds,
                           max(self.settings.wait_seconds - waited, 0.01)))
        self._thread = threading.Thread(target=self._heartbeat, name=f"lock {self.label}",
                                        daemon=True)
        self._thread.start()

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.settings.heartbeat_seconds):
            with self._token_lock:
                if self.token is None:
                    return
                try:
                    token = self.store.replace_if_match(self.key, self._payload(), self.token)
                except Exception as error:  # noqa: BLE001 - retried at the next beat
                    log.warning("%s: heartbeat failed: %s", self.label, error)
                    continue
                if token is None:
                    self.lost = "another run took the lock over (this run's heartbeat was " \
                                "stale)"
                    self.token = None
                    log.error("%s: lost the lock: %s", self.label, self.lost)
                    return
                self.token = token

    def check(self) -> None:
        if self.lost is not None:
            raise LockLostError(f"{self.label}: run {self.run_id!r} lost its lock: {self.lost}")

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._token_lock:
            if self.token is not None:
                try:
                    self.store.delete_if_match(self.key, self.token)
                except Exception as error:  # noqa: BLE001 - a leftover lock goes stale
                    log.warning("%s: could not release the lock: %s", self.label, error)
                self.token = None


@contextlib.contextmanager
def hold_locks(store: Store, assets: Iterable[str], partition: str,
               settings: LockSettings | None = None,
               run_id: str | None = None) -> Iterator[list[PartitionLock]]:
    """Holds the lock of `partition` of every asset in `assets` (in a fixed order, so two runs
    never deadlock) for the duration of the block. Single-step stages (mix, shards, cross_dedup,
    the catalog...) take it directly; `run_partition` takes it for multi-task ones."""
    settings = settings or LockSettings.from_env()
    run_id = run_id or new_run_id()
    held: list[PartitionLock] = []
    try:
        for asset in sorted(set(assets)):
            layout = PartitionLayout(store, asset, partition)
            lock = PartitionLock(store, lock_key(layout), f"{asset}[{partition}]", run_id,
                                 settings)
            lock.acquire()
            held.append(lock)
        yield held
    finally:
        for lock in reversed(held):
            lock.release()


def partition_locks(run: PartitionRun, settings: LockSettings | None = None,
                    run_id: str | None = None) -> contextlib.AbstractContextManager[
                        list[PartitionLock]]:
    """The locks of every partition `run` writes."""
    return hold_locks(run.store, (run.asset, *run.also), run.partition, settings, run_id)


def lock_key(layout: PartitionLayout) -> str:
    return f"{layout.prefix}/{LOCK_NAME}"


@dataclass
class PartitionResult:
    manifest: Manifest
    stats: StageStats
    results: list[TaskResult]
    wall_seconds: float
    samples: list[dict[str, Any]] = field(default_factory=list)


def run_partition(
    run: PartitionRun,
    task_count: int,
    work: TaskWork | Planned,
    workers: int,
    on_task_done: Callable[[TaskResult, int, int], None] | None = None,
    extra: dict[str, Any] | None = None,
    *,
    lock: LockSettings | None = None,
    run_id: str | None = None,
    samples: tuple[int, str] | None = None,
) -> PartitionResult:
    """Runs (or resumes) every task of a partition and writes its manifest last, holding the
    partition's lock throughout. `samples` = (size, key): spot-check samples are drawn from the
    parts before the lock is released (the next run may clear them)."""
    started = time.perf_counter()
    with partition_locks(run, lock, run_id) as held:
        def check_locks() -> None:
            for partition_lock in held:
                partition_lock.check()

        def done(result: TaskResult, finished: int, total: int) -> None:
            check_locks()
            if on_task_done is not None:
                on_task_done(result, finished, total)

        for asset in (run.asset, *run.also):
            PartitionLayout(run.store, asset, run.partition).prepare(run.version)
            _remove_temporaries(run.store, PartitionLayout(run.store, asset, run.partition))
        scratch = work.scratch if isinstance(work, Planned) else None
        try:
            if isinstance(work, Planned):
                work = work.plan() if _pending(run, task_count) else _nothing_to_do
            results = map_tasks(_RunTask(run, work), list(range(task_count)), workers, done)
        finally:
            if scratch is not None:
                run.store.delete_prefix(scratch)
        stats = sum((result.stats for result in results), StageStats())
        check_locks()
        for asset in run.also:
            PartitionLayout(run.store, asset, run.partition).write_manifest(
                _manifest(run, asset, results, {}))
        manifest = _manifest(run, run.asset, results, {"stats": stats.to_dict(), **(extra or {})})
        check_locks()
        run.layout.write_manifest(manifest)
        picked = pick_samples(run.store, results, *samples, partition=run.partition) \
            if samples else []
    return PartitionResult(manifest, stats, results, time.perf_counter() - started, picked)


def _remove_temporaries(store: Store, layout: PartitionLayout) -> None:
    """Temporary files a killed run left (local stores only; S3 PUTs leave none)."""
    remove = getattr(store, "remove_temporaries", None)
    if remove is None:
        return
    removed = remove(layout.prefix, keep=(LOCK_NAME,))
    removed += remove(layout.table_key("rejects", 0).rsplit("/", 1)[0], f"{layout.asset}-")
    if removed:
        log.info("%s[%s]: removed %d temporary files a killed run left", layout.asset,
                 layout.partition, removed)


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
                 path: str, partition: str | None = None) -> list[dict[str, Any]]:
    """Spot-check samples written to `path` (JSON lines), chosen by a hash of the doc_id so they
    do not depend on task order or worker count; never a taken-down document of `partition`
    (the sample is a copy of text)."""
    candidates = [doc_id for result in results for doc_id in result.sample_ids]
    chosen = set(heapq.nsmallest(size, candidates, key=sample_rank))
    rows: list[dict[str, Any]] = []
    for result in results:
        if chosen.intersection(result.sample_ids):
            table = read_parquet(store, result.parts[MAIN_TABLE].key)
            table = table.filter(pc.is_in(table["doc_id"], pa.array(sorted(chosen))))
            rows.extend(without_taken_down(store, table, partition).to_pylist())
    rows.sort(key=lambda row: sample_rank(row["doc_id"]))
    lines = [json.dumps(row, default=str, ensure_ascii=False) for row in rows]
    store.write_bytes(path, ("\n".join(lines) + "\n").encode())
    return rows


def sample_candidates(doc_ids: Sequence[str], size: int) -> list[str]:
    return heapq.nsmallest(size, doc_ids, key=sample_rank)
