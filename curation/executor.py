"""Runs a partition's tasks on the local process pool (Ray comes in as another backend).

Results come back in task order whatever the worker count, so outputs never depend on it.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def map_tasks(
    fn: Callable[[T], R],
    tasks: Sequence[T],
    workers: int,
    on_done: Callable[[R, int, int], None] | None = None,
) -> list[R]:
    """`fn` over `tasks` with `workers` processes (0 runs them in this process, for debugging).

    Workers are spawned, not forked: the caller may be a Dagster run with threads of its own.
    """
    total = len(tasks)
    results: list[R | None] = [None] * total
    if workers <= 0:
        for position, task in enumerate(tasks):
            results[position] = fn(task)
            if on_done:
                on_done(results[position], position + 1, total)
        return results  # type: ignore[return-value]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, max(total, 1)), mp_context=context) as pool:
        futures = {pool.submit(fn, task): position for position, task in enumerate(tasks)}
        for done, future in enumerate(as_completed(futures), start=1):
            results[futures[future]] = future.result()
            if on_done:
                on_done(results[futures[future]], done, total)
    return results  # type: ignore[return-value]
