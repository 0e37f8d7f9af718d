"""The main job: every non-opt-in asset for a set of partitions, in dependency order.

A run of a job for a partition is skipped as up to date when its last successful run had the
same inputs fingerprint (`INPUTS_TAG`): the code versions of the job's assets, the pipeline and
recipe configuration, the storage root, the data versions of everything it reads from outside
the job, and for `per_snapshot` the partition's input files (names, sizes, modification
times).
"""

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from dagster import AssetKey, DagsterInstance, DagsterRunStatus, ExecuteInProcessResult, RunsFilter
from dagster._core.definitions.data_version import extract_data_version_from_entry

from corpus_assets.definitions import MAIN_JOBS, defs
from curation.config import load_pipeline, load_recipe, stable_hash
from curation.graph import ALL, PIPELINE_ORDER, WITHOUT_MANIFEST
from curation.partition import PartitionLayout
from curation.storage import S3Settings, Store, open_store
from resources import catalog_beside

# Jobs whose assets are partitioned by snapshot, and by recipe; the others run once.
PER_PARTITION_JOBS = {"per_snapshot", "scores"}
PER_RECIPE_JOBS = {"dataset"}
INPUTS_TAG = "corpus/inputs"
INPUT_JOB = "per_snapshot"  # the job that reads the partition's input files


@dataclass(frozen=True)
class JobRun:
    job: str
    partition: str | None
    result: ExecuteInProcessResult | None  # None when skipped as up to date
    skipped: bool = False

    @property
    def succeeded(self) -> bool:
        return self.skipped or bool(self.result and self.result.success)


def job_partitions(name: str, partitions: list[str], recipes: list[str]) -> list[str | None]:
    """The partitions a main job runs for: snapshots, recipes, or once (None)."""
    if name in PER_PARTITION_JOBS:
        return list(partitions)
    return list(recipes) if name in PER_RECIPE_JOBS else [None]


def run_main_jobs(
    instance: DagsterInstance,
    partitions: list[str],
    run_config: dict,
    on_run: Callable[[JobRun], None] | None = None,
    recipes: list[str] | None = None,
    jobs: tuple[str, ...] = MAIN_JOBS,
    record_inputs: bool = False,
    skip_up_to_date: bool = False,
) -> list[JobRun]:
    """Per-snapshot ingest and signals for each partition, then the pipeline-wide models, then
    the per-snapshot scores, then each recipe's dataset. A failed run does not stop the other
    partitions of its job, but no later job starts (each reads what the failed one writes).

    `record_inputs` tags each run with its inputs fingerprint; `skip_up_to_date` (which implies
    it) skips a run whose fingerprint matches its last success."""
    runs: list[JobRun] = []
    for name in (job for job in MAIN_JOBS if job in jobs):
        job = defs.resolve_job_def(name)
        for partition in job_partitions(name, partitions, recipes or []):
            tags = {}
            if record_inputs or skip_up_to_date:
                tags[INPUTS_TAG] = inputs_fingerprint(instance, name, partition, run_config)
            if skip_up_to_date and is_up_to_date(instance, name, partition, tags[INPUTS_TAG],
                                                 _store(run_config)):
                runs.append(JobRun(name, partition, None, skipped=True))
            else:
                result = job.execute_in_process(
                    partition_key=partition, instance=instance, run_config=run_config,
                    raise_on_error=False, tags=tags)
                runs.append(JobRun(name, partition, result))
            if on_run:
                on_run(runs[-1])
        if not all(run.succeeded for run in runs):
            return runs
    return runs


@cache
def pipeline_order() -> tuple[AssetKey, ...]:
    """Every asset in the order the pipeline runs them (`curation.graph.PIPELINE_ORDER`, a
    dependency order of the definitions' graph: tests/test_graph_names.py), so a summary reads
    as the pipeline runs."""
    return tuple(AssetKey(name) for name in PIPELINE_ORDER)


def job_asset_keys(name: str) -> list[AssetKey]:
    """The job's assets in pipeline order."""
    selected = defs.resolve_job_def(name).asset_layer.executable_asset_keys
    return [key for key in pipeline_order() if key in selected]


def is_up_to_date(instance: DagsterInstance, name: str, partition: str | None,
                  fingerprint: str, store: Store | None = None) -> bool:
    """True when the latest materialization of every asset of the job (for the partition) comes
    from one successful run with this inputs fingerprint and, given the `store`, the outputs
    are still there (a deleted data folder is rebuilt, not skipped: every manifest but those of
    `WITHOUT_MANIFEST` must be there)."""
    tags = {INPUTS_TAG: fingerprint, **({"dagster/partition": partition} if partition else {})}
    last = instance.get_runs(RunsFilter(job_name=name, tags=tags,
                                        statuses=[DagsterRunStatus.SUCCESS]), limit=1)
    if not last:
        return False
    for key in job_asset_keys(name):
        record = instance.get_latest_data_version_record(key, partition_key=partition)
        if record is None or record.run_id != last[0].run_id:
            return False
    return store is None or _outputs_present(store, name, partition)


def _outputs_present(store: Store, name: str, partition: str | None) -> bool:
    assets = [key.to_user_string() for key in job_asset_keys(name)]
    return all(PartitionLayout(store, asset, partition or ALL).is_complete()
               for asset in assets if asset not in WITHOUT_MANIFEST)


def inputs_fingerprint(instance: DagsterInstance, name: str, partition: str | None,
                       run_config: dict) -> str:
    """A hash of everything a run of the job for the partition reads (see the module's
    docstring); the run configuration's worker count and loggers are left out."""
    resources = run_config["resources"]
    pipeline_path = Path(resources["pipeline"]["config"]["path"])
    pipeline = load_pipeline(pipeline_path)
    payload: dict = {
        "job": name, "partition": partition,
        "code": {key.to_user_string(): defs.resolve_asset_graph().get(key).code_version
                 for key in job_asset_keys(name)},
        "pipeline": _pipeline_settings(pipeline, name, partition),
        "root": resources["storage"]["config"]["root"],
        "upstream": _upstream_data_versions(instance, name, partition),
    }
    if name in PER_RECIPE_JOBS and partition:
        recipe = pipeline_path.resolve().parent / "recipes" / f"{partition}.yaml"
        payload["recipe"] = load_recipe(recipe, pipeline).model_dump(mode="json")
    if name == INPUT_JOB and partition:
        payload["input_files"] = _input_files(pipeline, partition)
    return stable_hash(payload, 24)


def _store(run_config: dict) -> Store:
    """The run's storage root, with S3 settings from the standard AWS environment."""
    return open_store(run_config["resources"]["storage"]["config"]["root"], S3Settings())


def _pipeline_settings(pipeline, name: str, partition: str | None) -> dict:  # noqa: ANN001
    """The pipeline's settings a run reads: a per-snapshot run reads its own partition's entry
    and no other's, so declaring a snapshot or a source leaves the others up to date."""
    settings = pipeline.model_dump(mode="json")
    if name in PER_PARTITION_JOBS and partition:
        del settings["snapshots"], settings["sources"]
        settings["entry"] = pipeline.partition_entry(partition).model_dump(mode="json")
    return settings


def _upstream_data_versions(instance: DagsterInstance, name: str,
                            partition: str | None) -> dict[str, str | None]:
    """The latest data version of every asset partition the job reads from outside itself: the
    same partition of a same-partitioned parent, else every partition of the parent (the
    project's mappings are identity or `every_partition`)."""
    graph = defs.resolve_asset_graph()
    inside = set(job_asset_keys(name))
    versions: dict[str, str | None] = {}
    for key in inside:
        node = graph.get(key)
        for parent_key in node.parent_keys - inside:
            parent = graph.get(parent_key).partitions_def
            if parent is None:
                keys: list[str | None] = [None]
            elif parent == node.partitions_def:
                keys = [partition]
            else:
                keys = list(instance.get_dynamic_partitions(parent.name))
            for parent_partition in keys:
                record = instance.get_latest_data_version_record(
                    parent_key, partition_key=parent_partition)
                version = extract_data_version_from_entry(record.event_log_entry) if record \
                    else None
                label = f"{parent_key.to_user_string()}[{parent_partition or ALL}]"
                versions[label] = version.value if version else None
    return versions


def _input_files(pipeline, partition: str) -> list:  # noqa: ANN001 - PipelineConfig
    """The partition's input locations with size and modification time where local (remote
    inputs by name); an input that cannot be listed leaves the error text, so the run goes
    ahead and reports it."""
    from curation.inputs import list_locations
    from curation.storage import InputReader

    try:
        locations = list_locations(pipeline, partition, InputReader(S3Settings()))
    except Exception as error:  # noqa: BLE001 - any listing error: run it and let it fail there
        return [f"unlisted: {error}"]
    files = []
    for location in locations:
        path = Path(location)
        stat = path.stat() if "://" not in location and path.exists() else None
        files.append([location, stat.st_size, stat.st_mtime_ns] if stat else [location])
    return files


def main_run_config(pipeline: str, root: str, workers: int, log_level: str = "INFO") -> dict:
    resources = {"compute": {"config": {"workers": workers}},
                 "storage": {"config": {"root": root}},
                 "pipeline": {"config": {"path": pipeline}}}
    if "://" not in root:  # beside a local root; an S3 root keeps the default local file
        resources["catalog"] = {"config": {"path": catalog_beside(root)}}
    return {"resources": resources,
            "loggers": {"console": {"config": {"log_level": log_level}}}}
