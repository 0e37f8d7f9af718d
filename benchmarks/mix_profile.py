"""The scale benchmark's mix step, statement by statement: every `execute` of its DuckDB
session timed (wall and CPU seconds of this process), in one process under the budget.

    .venv/bin/python benchmarks/mix_profile.py --work /tmp/scale100m [--memory-gb 1] [--top 25]

`--work` is a folder of `benchmarks/scale.py` (`--work DIR --steps planted_clusters,mix`, or
`exact_keys,near_dup,mix`): its data and the clusters in its `out/`. Prints the total and the
statements with the most wall time; writes every statement's times to `mix_profile.json`
under `--work`. Compare two sizes by their statements' CPU seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.scale import _mix_session, _spec_of  # noqa: E402
from benchmarks.synthetic import Generated  # noqa: E402
from curation.duck import MEMORY_ENV, SPILL_ENV, duckdb_session  # noqa: E402


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--memory-gb", type=float, default=1.0)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    spill = args.work / "profile-spill"
    spill.mkdir(exist_ok=True)
    os.environ[MEMORY_ENV], os.environ[SPILL_ENV] = str(args.memory_gb), str(spill)

    data = Generated(args.work / "data", _spec_of(args.work / "data"))
    wall, cpu = time.perf_counter(), time.process_time()
    with duckdb_session() as con:
        timed = TimedConnection(con)
        _mix_session(data, args.work / "out", timed)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"total: {wall:.1f} s wall, {cpu:.1f} CPU s\n")
    print("| wall s | CPU s | statement |\n|---:|---:|---|")
    for seconds, cpu_seconds, sql in sorted(timed.times, reverse=True)[:args.top]:
        print(f"| {seconds:.1f} | {cpu_seconds:.1f} | {sql[:150]} |")
    (args.work / "mix_profile.json").write_text(json.dumps(
        {"wall_s": wall, "cpu_s": cpu, "statements": timed.times}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
