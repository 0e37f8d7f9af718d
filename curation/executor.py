"""Runs a partition's tasks on the local process pool, or on Ray when a Ray address is set.

Results come back in task order whatever the worker count or backend, so outputs never depend
on them. The backend is run configuration (`ComputeResource.ray_address` calls `use_ray`), never
part of a version. `use_ray` takes "local" (a cluster started in this process) or the address of
a running cluster (`ray.init(address=...)`); Ray tasks carry the memory budget's variables
(`budget_environment`), so workers on every node work under the driver's budget.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, TypeVar

from curation.duck import budget_environment
from curation.graph import WORKER_PRELOAD

T = TypeVar("T")
R = TypeVar("R")

# The Ray cluster the tasks go to ("local" starts one in this process); None: the local pool.
_RAY_ADDRESS: str | None = None


def use_ray(address: str | None) -> None:
    """Send the tasks of later `map_tasks` calls to the Ray cluster at `address` (None: back to
    the local process pool)."""
    global _RAY_ADDRESS
    _RAY_ADDRESS = address


# The pooled stages' modules (`curation.graph.WORKER_PRELOAD`), imported once by the fork
# server: each stage's workers then start by fork in milliseconds, where a spawned worker paid a
# fresh interpreter and about 0.6 s of imports per stage (py-spy on a 1-worker run of
# `benchmarks/compare.py`: 3.7 s of worker imports over the run's five pooled stages).
_PRELOAD = list(WORKER_PRELOAD)


def ray_address() -> str | None:
    """The Ray cluster `map_tasks` runs on (`use_ray`), or None for the local pool."""
    return _RAY_ADDRESS


def _pool_context() -> multiprocessing.context.BaseContext:
    """A fork server's context: a single-threaded process started once per run process that
    has imported `_PRELOAD`; forking from it is safe whatever threads the caller runs."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    return context


# What numeric libraries read for their thread count: torch at its import, OpenBLAS and
# OpenMP runtimes at load (those already loaded are set through threadpoolctl).
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def worker_threads(workers: int) -> int:
    """The threads each of `workers` pool workers gives its numeric libraries: the cores this
    process may use, shared. Each library otherwise starts a thread per core in every worker:
    two embeddings workers on 2 cores took 60 s for what they do in 14 s with one BLAS thread
    each."""
    return max(1, len(os.sched_getaffinity(0)) // max(workers, 1))


def _adopt(environment: dict[str, str], cwd: str, threads: int) -> None:
    """A forked worker takes the caller's environment and working directory as they are now,
    as a spawned one would (the fork server has those of its own start), and its share of
    the cores for numeric libraries (`worker_threads`)."""
    from threadpoolctl import threadpool_limits

    os.environ.clear()
    os.environ.update(environment)
    os.environ.update(dict.fromkeys(THREAD_VARIABLES, str(threads)))
    threadpool_limits(threads)
    os.chdir(cwd)


def _libc_malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to trim
        return None


_MALLOC_TRIM = _libc_malloc_trim()


def release_memory() -> None:
    """Hand back to the system what the last task freed. pyarrow's pool (mimalloc) and glibc's
    malloc both keep freed pages resident, so a long-lived worker's RSS climbed over its first
    8 to 20 tasks, and a worker's peak grew with its number of tasks (measured on the four
    per-document stages after `documents`: 15 to 40 MB a worker less, no measurable time)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def _call(fn: Callable[[T], R], task: T) -> R:
    try:
        return fn(task)
    finally:
        release_memory()


def ray_resources(fn: Callable[..., Any]) -> dict[str, float]:
    """What each Ray task of `fn` reserves: one CPU, unless `fn` says otherwise with a
    `ray_resources()` method (a GPU stage asks for `num_gpus`, so Ray places its tasks on GPU
    nodes and gives each a device)."""
    asked = getattr(fn, "ray_resources", None)
    return asked() if callable(asked) else {"num_cpus": 1}


def _ray_map(fn: Callable[[T], R], tasks: Sequence[T], workers: int,
             on_done: Callable[[R, int, int], None] | None) -> list[R]:
    import ray

    if not ray.is_initialized():
        if _RAY_ADDRESS == "local":
            # address="local": a Ray of this process's own, even where another Ray runs on
            # the machine (ray.init without an address would join that one).
            ray.init(address="local", num_cpus=max(workers, 1), include_dashboard=False,
                     log_to_driver=False)
        else:
            ray.init(address=_RAY_ADDRESS, log_to_driver=False)
    remote = ray.remote(max_retries=2)(_call).options(
        **ray_resources(fn), runtime_env={"env_vars": budget_environment()})
    work = ray.put(fn)  # shipped once, not with every task
    pending = {remote.remote(work, task): position for position, task in enumerate(tasks)}
    results: list[R | None] = [None] * len(tasks)
    done = 0
    waiting = list(pending)
    while waiting:
        ready, waiting = ray.wait(waiting, num_returns=1)
        position = pending[ready[0]]
        results[position] = ray.get(ready[0])
        done += 1
        if on_done:
            on_done(results[position], done, len(tasks))
    return results  # type: ignore[return-value]


def map_tasks(
    fn: Callable[[T], R],
    tasks: Sequence[T],
    workers: int,
    on_done: Callable[[R, int, int], None] | None = None,
) -> list[R]:
    """`fn` over `tasks` with `workers` processes (0 runs them in this process, for debugging).

    Workers are forked from a fork server, never from the caller (a Dagster run with threads
    of its own): see `_pool_context`.
    """
    if _RAY_ADDRESS is not None and tasks:
        return _ray_map(fn, tasks, workers, on_done)
    total = len(tasks)
    results: list[R | None] = [None] * total
    if workers <= 0:
        for position, task in enumerate(tasks):
            results[position] = fn(task)
            if on_done:
                on_done(results[position], position + 1, total)
        return results  # type: ignore[return-value]
    processes = min(workers, max(total, 1))
    with ProcessPoolExecutor(max_workers=processes, mp_context=_pool_context(),
                             initializer=_adopt,
                             initargs=(dict(os.environ), os.getcwd(),
                                       worker_threads(processes))) as pool:
        futures = {pool.submit(_call, fn, task): position
                   for position, task in enumerate(tasks)}
        try:
            for done, future in enumerate(as_completed(futures), start=1):
                results[futures[future]] = future.result()
                if on_done:
                    on_done(results[futures[future]], done, total)
        except BaseException:
            # A failed task or callback (a lost partition lock) stops the run now: tasks not
            # yet started are cancelled instead of running to the end first.
            for future in futures:
                future.cancel()
            raise
    return results  # type: ignore[return-value]
