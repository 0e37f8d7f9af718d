"""Shared fixtures: the real data under ../shared/data and the built-in sample, materialized
once per session on a real Dagster instance."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"


def require_shared_data() -> Path:
    """../shared/data, or a skip with the reason; in CI (CI=true) its absence is a failure."""
    if SHARED_DATA.is_dir():
        return SHARED_DATA
    if os.environ.get("CI"):
        pytest.fail(f"{SHARED_DATA} is missing; CI must have ../shared/data beside the repo")
    pytest.skip(f"{SHARED_DATA} is not present on this machine")


@pytest.fixture(autouse=True)
def _budget_environment():
    """Each test starts from the session's memory budget: `use_budget` exports the budget to
    this process's environment for its workers (a run's compute resource puts the previous one
    back at its end; a test that calls it directly does not), and a test's budget must not
    reach the next test on the same worker."""
    from curation.duck import budget_environment, restore_budget

    saved = budget_environment()
    yield
    restore_budget(saved)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    return require_shared_data()


@dataclass
class SampleRun:
    base: Path
    root: Path
    pipeline_path: Path
    instance: object
    results: dict  # (job, partition or None) -> ExecuteInProcessResult


SAMPLE_RUN_TIMEOUT = 900
"""Seconds a test using `sample_run` may take: the first one pays for the whole main job on the
sample (about 300 s on the 2-core CI machine with the model plane on), the others take
seconds."""


SAMPLE_GROUP = "sample_run"


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Groups for pytest-xdist (`--dist loadgroup --no-loadscope-reorder`, scripts/test.sh):
    every test of the built-in sample in one group, so the session builds it once; any other
    test with its module, whose fixtures are then built once. The sample's group goes first,
    then the groups holding a `slow` test, so no long test starts last on one worker while
    the other sits idle."""
    groups = {}
    for item in items:
        uses_sample = "sample_run" in getattr(item, "fixturenames", ())
        if uses_sample and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SAMPLE_RUN_TIMEOUT))
        groups[item] = SAMPLE_GROUP if uses_sample else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(groups[item]))
    slow_groups = {groups[item] for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: 0 if groups[item] == SAMPLE_GROUP
               else 1 if groups[item] in slow_groups else 2)


def one_snapshot_resources(folder: Path) -> dict:
    """Resources over a pipeline of one snapshot, `CC`, and defaults for everything else (the
    model plane off), storing under `folder/data`."""
    from dagster_aws.s3 import S3Resource

    from resources import ComputeResource, PipelineResource, StorageResource

    (folder / "pipeline.yaml").write_text("snapshots: {CC: {warc: {path: warc}}}\n")
    return {"pipeline": PipelineResource(path=str(folder / "pipeline.yaml")),
            "storage": StorageResource(root=str(folder / "data"), s3=S3Resource()),
            "compute": ComputeResource(workers=0)}


@pytest.fixture(scope="session")
def sample_run(tmp_path_factory: pytest.TempPathFactory):
    """The README's main job on the built-in sample: generated, registered and materialized
    through the real `per_snapshot` job on a test instance, once for the whole session."""
    from dagster import instance_for_test

    from corpus_assets.main_job import main_run_config, run_main_jobs
    from curation.config import load_pipeline
    from curation.sample.generate import generate_sample
    from partitions import RECIPE_PARTITIONS_NAME, SNAPSHOT_PARTITIONS_NAME

    base = tmp_path_factory.mktemp("sample-run")
    shutil.copyfile(REPO / "pipeline.yaml", base / "pipeline.yaml")
    shutil.copytree(REPO / "recipes", base / "recipes")
    generate_sample(base / "data" / "sample")
    pipeline = load_pipeline(base / "pipeline.yaml")
    (base / "home").mkdir()
    with instance_for_test(temp_dir=str(base / "home")) as instance:
        instance.add_dynamic_partitions(SNAPSHOT_PARTITIONS_NAME, pipeline.partition_keys())
        instance.add_dynamic_partitions(RECIPE_PARTITIONS_NAME, ["sample"])
        runs = run_main_jobs(instance, pipeline.partition_keys(), main_run_config(
            str(base / "pipeline.yaml"), str(base / "data"), workers=2), recipes=["sample"])
        yield SampleRun(base, base / "data", base / "pipeline.yaml", instance,
                        {(run.job, run.partition): run.result for run in runs})


# --- a real S3 API: moto's server on 127.0.0.1 ------------------------------------------------

MOTO_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing",
                    "region_name": "us-east-1"}


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def s3_endpoint():
    """moto's S3 server on a free port of 127.0.0.1, one per test module."""
    import subprocess
    import sys
    import time

    import requests

    port = free_port()
    server = Path(sys.executable).parent / "moto_server"
    process = subprocess.Popen([str(server), "-H", "127.0.0.1", "-p", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            requests.get(endpoint, timeout=1)
            break
        except (requests.ConnectionError, requests.Timeout):  # a loaded machine starts it slowly
            assert time.monotonic() < deadline, "moto_server did not start"
            time.sleep(0.2)
    yield endpoint
    process.terminate()
    process.wait(timeout=10)
