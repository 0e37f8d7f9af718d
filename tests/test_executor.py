"""The local process pool: what a task frees goes back to the system before the next task."""

from __future__ import annotations

import pyarrow as pa

from curation.executor import map_tasks


def _rss_mb() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) // 1024 for line in status if line.startswith("VmRSS"))


def _memory_step(step: int) -> int:
    """Step 1 builds and drops about 200 MB of Arrow arrays and Python strings, as a stage's
    task does with its part; every step reports the worker's RSS."""
    if step == 1:
        strings = pa.array([f"{'x' * 200}{i}" for i in range(300_000)])
        tables = [pa.table({"text": strings}).combine_chunks() for _ in range(3)]
        copies = [text * 2 for text in strings.to_pylist()[:200_000]]
        del strings, tables, copies
    return _rss_mb()


def test_a_worker_hands_back_what_its_last_task_freed() -> None:
    # one worker runs the steps in order: before, right after freeing, and after the release
    before, freed, released = map_tasks(_memory_step, [0, 1, 2], workers=1)
    assert freed - before > 120  # the allocators kept the freed pages (184 MB measured)
    assert released - before < 80  # and gave them back once the task was done (48 MB left)
