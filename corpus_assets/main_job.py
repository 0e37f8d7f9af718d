"""The main job: every non-opt-in asset for a set of partitions, in dependency order."""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dagster import DagsterInstance, ExecuteInProcessResult

from corpus_assets.definitions import MAIN_JOBS, defs

# Jobs whose assets are partitioned by snapshot, and by recipe; the others run once.
PER_PARTITION_JOBS = {"per_snapshot", "scores"}
PER_RECIPE_JOBS = {"dataset"}


@dataclass(frozen=True)
class JobRun:
    job: str
    partition: str | None
    result: ExecuteInProcessResult


def run_main_jobs(
    instance: DagsterInstance,
    partitions: list[str],
    run_config: dict,
    on_run: Callable[[JobRun], None] | None = None,
    recipes: list[str] | None = None,
) -> list[JobRun]:
    """Per-snapshot ingest and signals for each partition, then the pipeline-wide models, then
    the per-snapshot scores, then each recipe's dataset; stops at the first failed run."""
    runs: list[JobRun] = []
    for name in MAIN_JOBS:
        job = defs.resolve_job_def(name)
        keys = (partitions if name in PER_PARTITION_JOBS
                else recipes or [] if name in PER_RECIPE_JOBS else [None])
        for partition in keys:
            result = job.execute_in_process(partition_key=partition, instance=instance,
                                            run_config=run_config, raise_on_error=False)
            runs.append(JobRun(name, partition, result))
            if on_run:
                on_run(runs[-1])
            if not result.success:
                return runs
    return runs


def main_run_config(pipeline: str, root: str, workers: int, log_level: str = "INFO") -> dict:
    resources = {"compute": {"config": {"workers": workers}},
                 "storage": {"config": {"root": root}},
                 "pipeline": {"config": {"path": pipeline}}}
    if "://" not in root:  # beside a local root; an S3 root keeps the default local file
        resources["catalog"] = {"config": {"path": str(Path(root) / "catalog.duckdb")}}
    return {"resources": resources,
            "loggers": {"console": {"config": {"log_level": log_level}}}}
