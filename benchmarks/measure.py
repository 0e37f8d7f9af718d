"""Run a command as a subprocess and measure its wall time, CPU time and peak memory.

Peak memory is sampled from ``/proc`` every ``interval`` seconds over the whole process tree of
the child (the child, its worker pools, datatrove's forkserver, Manager and extraction sandboxes):
the peak of the summed RSS, and the peak of the summed PSS (``smaps_rollup``), which counts pages
shared between forked processes once. Processes that live shorter than the interval can be missed.
The same samples give the tree's CPU time (user + system, to each process's last sample), and
/proc/stat the machine's busy time, so a run on a shared machine reports how many cores others
kept busy meanwhile."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
CLK_TCK = os.sysconf("SC_CLK_TCK")
RESULT_PREFIX = "RESULT "


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (index 0 is field 3, the state)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()


def _ppid(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[1]) if fields else None


def _cpu(pid: int) -> tuple[tuple[int, int], float] | None:
    """((pid, start time), user + system CPU seconds) of one process."""
    fields = _stat_fields(pid)
    if not fields:
        return None
    return (pid, int(fields[19])), (int(fields[11]) + int(fields[12])) / CLK_TCK


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy (all cores), from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = values[:8]
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


def process_tree(root: int) -> list[int]:
    """``root`` and all its live descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            parent = _ppid(int(entry))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def _rss(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_SIZE
    except (OSError, IndexError, ValueError):
        return 0


def _pss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


@dataclass
class TreeSampler:
    """Background thread that records the peak summed RSS and PSS of a process tree."""

    root: int
    interval: float = 0.1
    peak_rss: int = 0
    peak_pss: int = 0
    peak_processes: int = 0
    cpu: dict[tuple[int, int], float] = field(default_factory=dict)
    # (epoch seconds, summed RSS bytes, the root process's own RSS bytes) of every sample:
    # per-stage peaks from stage windows, the root's apart from its children's (workers).
    timeline: list[tuple[float, int, int]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> TreeSampler:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def sample(self) -> None:
        pids = process_tree(self.root)
        self.peak_processes = max(self.peak_processes, len(pids))
        rss = sum(_rss(p) for p in pids)
        self.timeline.append((time.time(), rss, _rss(self.root)))
        self.peak_rss = max(self.peak_rss, rss)
        self.peak_pss = max(self.peak_pss, sum(_pss(p) for p in pids))
        for sample in filter(None, map(_cpu, pids)):
            self.cpu[sample[0]] = max(self.cpu.get(sample[0], 0.0), sample[1])

    @property
    def cpu_seconds(self) -> float:
        """CPU time of every process seen in the tree (to the last sample of each)."""
        return sum(self.cpu.values())


@dataclass
class Measured:
    """One measured subprocess run."""

    returncode: int
    wall_seconds: float
    peak_rss_bytes: int
    peak_pss_bytes: int
    peak_processes: int
    cpu_seconds: float
    machine_busy_seconds: float
    result: dict[str, Any] | None
    log_path: Path
    timeline: list[tuple[float, int, int]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.result is not None

    @property
    def other_load(self) -> float:
        """Cores kept busy by everything outside the measured tree, on average over the run."""
        return max(0.0, self.machine_busy_seconds - self.cpu_seconds) / self.wall_seconds


def _parse_result(stdout_path: Path) -> dict[str, Any] | None:
    lines = [ln for ln in stdout_path.read_text(errors="replace").splitlines() if ln]
    for line in reversed(lines):
        if line.startswith(RESULT_PREFIX):
            return json.loads(line.removeprefix(RESULT_PREFIX))
    return None


def run_measured(
    cmd: Sequence[str],
    log_prefix: Path,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    interval: float = 0.1,
) -> Measured:
    """Run ``cmd``; stdout goes to ``<log_prefix>.out``, stderr to ``<log_prefix>.err``."""
    out_path, err_path = log_prefix.with_suffix(".out"), log_prefix.with_suffix(".err")
    with out_path.open("wb") as out, err_path.open("wb") as err:
        start, busy, own = time.perf_counter(), machine_busy_seconds(), time.process_time()
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=err, cwd=cwd, env=env)
        sampler = TreeSampler(proc.pid, interval).start()
        returncode = proc.wait()
        wall, busy = time.perf_counter() - start, machine_busy_seconds() - busy
        sampler.stop()
        busy -= time.process_time() - own  # the sampler's own CPU is not "others"
    return Measured(
        returncode=returncode,
        wall_seconds=wall,
        peak_rss_bytes=sampler.peak_rss,
        peak_pss_bytes=sampler.peak_pss,
        peak_processes=sampler.peak_processes,
        cpu_seconds=sampler.cpu_seconds,
        machine_busy_seconds=busy,
        result=_parse_result(out_path),
        log_path=err_path,
        timeline=sampler.timeline,
    )


def run_child(script: str | Path, args: Sequence[str], log_prefix: Path, cwd: Path,
              env: dict[str, str]) -> Measured:
    """``python SCRIPT --child ARGS...`` measured (`run_measured`); fails with the end of its
    stderr unless it exited 0 with a ``RESULT`` line."""
    measured = run_measured([sys.executable, str(script), "--child", *args], log_prefix,
                            cwd=cwd, env=env)
    if not measured.ok:
        raise RuntimeError(f"{list(args[:3])} failed: {measured.log_path.read_text()[-3000:]}")
    return measured


def run_json(command: list[str]) -> dict[str, Any]:
    """Run a subprocess and parse its last ``RESULT {json}`` line."""
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{command[:3]} failed:\n{done.stderr[-4000:]}")
    last = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")][-1]
    return json.loads(last.removeprefix("RESULT "))
