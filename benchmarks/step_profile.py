"""A global step of the scale benchmark, statement by statement: every `execute` of its DuckDB
session timed (wall and CPU seconds of this process), in one process under the budget.

    .venv/bin/python benchmarks/step_profile.py --step mix --work /tmp/scale100m \
        [--memory-gb 1] [--top 25]

`--work` is a folder of `benchmarks/scale.py`: its data, and for the mix the clusters in its
`out/` (`--steps planted_clusters,mix`, or `exact_keys,near_dup,mix`). `--step near_dup` first
times its map and reduce rounds (the CPU of the whole process tree: the pool's workers too),
then its connected components statement by statement. Prints the total, each phase's peak RSS
(the tree's, and this process's alone) and the statements with the most wall time; writes
every statement's times to `<step>_profile.json` under `--work`. Compare two sizes by their
statements' CPU seconds. `--step cross_components` times the connected components over the
cross-partition index a `--steps cross_index` run left in `out/cross` (the index itself is
not rebuilt). `--step cross_last` indexes the last partition again, statement by statement,
against the earlier ones of that index (a scratch index under `out/cross-last` whose earlier
partitions' files are links to the run's; removed after).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest.mock import patch
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.measure import TreeSampler  # noqa: E402
from benchmarks.scale import (  # noqa: E402
    _mix_session,
    _near_dup_components,
    _near_dup_edges,
    _spec_of,
)
from benchmarks.synthetic import SIGNATURES, Generated  # noqa: E402
from curation import dedup  # noqa: E402
from curation.dedup import CrossIndex  # noqa: E402
from curation.duck import MEMORY_ENV, SPILL_ENV, duckdb_session  # noqa: E402

SAMPLE_INTERVAL = 0.2


class TimedConnection:
    """A DuckDB connection whose `execute` records (wall s, CPU s, statement)."""

    def __init__(self, con: Any) -> None:
        self.con = con
        self.times: list[tuple[float, float, str]] = []

    def execute(self, sql: str, *args: Any) -> Any:
        wall, cpu = time.perf_counter(), time.process_time()
        result = self.con.execute(sql, *args)
        self.times.append((time.perf_counter() - wall, time.process_time() - cpu,
                           " ".join(str(sql).split())))
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.con, name)


class Phases:
    """Wall and CPU seconds of consecutive phases, the CPU of this process's whole tree, and
    each phase's peak RSS: of the tree, and of this process alone (without the workers)."""

    def __init__(self) -> None:
        self.sampler = TreeSampler(os.getpid(), SAMPLE_INTERVAL).start()
        self.times: dict[str, tuple[float, float]] = {}
        self.peaks: dict[str, tuple[int, int]] = {}
        self._mark = self._now()
        self._since = time.time()

    def _now(self) -> tuple[float, float]:
        self.sampler.sample()
        return time.perf_counter(), self.sampler.cpu_seconds

    def end(self, phase: str) -> None:
        now = self._now()
        self.times[phase] = (now[0] - self._mark[0], now[1] - self._mark[1])
        window = [(tree, own) for at, tree, own in self.sampler.timeline if at >= self._since]
        self.peaks[phase] = (max(tree for tree, _ in window), max(own for _, own in window))
        self._mark, self._since = now, time.time()


def _cross_last(data: Generated, out: Path, timed: TimedConnection) -> None:
    """The last partition indexed again in `timed` (`--step cross_last`)."""
    source, scratch = out / "cross", out / "cross-last"
    names = data.spec.partition_names()
    shutil.rmtree(scratch, ignore_errors=True)
    for earlier in names[:-1]:
        for path in source.rglob(f"{quote(earlier, safe='')}.*"):
            link = scratch / path.relative_to(source)
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(path)

    @contextmanager
    def session(*_: Any, **__: Any) -> Iterator[TimedConnection]:
        yield timed

    try:
        with patch.object(dedup, "duckdb_session", session):
            CrossIndex(scratch).index_partition(names[-1], data.files(SIGNATURES)[-1])
    finally:
        shutil.rmtree(scratch)


def _profile(step: str, data: Generated, out: Path, phases: Phases) -> list[Any]:
    """Run `step` with its session timed; the statements' times."""
    with duckdb_session() as con:
        timed = TimedConnection(con)
        if step == "mix":
            _mix_session(data, out, timed)
        elif step == "cross_components":
            CrossIndex(out / "cross").clusters_sql(timed, "clusters")
        elif step == "cross_last":
            _cross_last(data, out, timed)
        else:
            store, reduced = _near_dup_edges(data, out)
            phases.end("map and reduce")
            _near_dup_components(store, reduced, out, timed)
            store.delete_prefix("work")
    phases.end("components" if step != "mix" else "session")
    return timed.times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--step", choices=("mix", "near_dup", "cross_components", "cross_last"),
                        default="mix")
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--memory-gb", type=float, default=1.0)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    spill = args.work / "profile-spill"
    spill.mkdir(exist_ok=True)
    os.environ[MEMORY_ENV], os.environ[SPILL_ENV] = str(args.memory_gb), str(spill)

    data = Generated(args.work / "data", _spec_of(args.work / "data"))
    phases = Phases()
    statements = _profile(args.step, data, args.work / "out", phases)
    phases.sampler.stop()
    wall = sum(seconds for seconds, _ in phases.times.values())
    cpu = sum(cpu_seconds for _, cpu_seconds in phases.times.values())
    print(f"total: {wall:.1f} s wall, {cpu:.1f} CPU s (process tree)")
    for phase, (seconds, cpu_seconds) in phases.times.items():
        tree, own = (peak / 2**20 for peak in phases.peaks[phase])
        print(f"  {phase}: {seconds:.1f} s wall, {cpu_seconds:.1f} CPU s, peak RSS {tree:,.0f} MiB"
              f" (this process alone {own:,.0f})")
    print("\n| wall s | CPU s | statement |\n|---:|---:|---|")
    for seconds, cpu_seconds, sql in sorted(statements, reverse=True)[:args.top]:
        print(f"| {seconds:.1f} | {cpu_seconds:.1f} | {sql[:150]} |")
    (args.work / f"{args.step}_profile.json").write_text(json.dumps(
        {"wall_s": wall, "cpu_s": cpu, "phases": phases.times, "peaks": phases.peaks,
         "statements": statements},
        indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
