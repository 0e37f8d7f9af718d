"""The Ray backend: a partition's tasks on a local Ray cluster (2 CPUs) give the same bytes as
the local process pool, even with another Ray running on the machine."""

from __future__ import annotations

from pathlib import Path

import ray
from dagster import build_init_resource_context
from ray.cluster_utils import Cluster

from curation import executor
from curation.config import DocumentsSettings
from curation.stages.documents import run_documents
from curation.storage import LocalStore
from resources import ComputeResource
from tests.test_documents import _inputs


def test_ray_and_the_local_pool_write_identical_partitions(shared_data, tmp_path: Path) -> None:
    settings = DocumentsSettings(extractor="resiliparse", timeout_seconds=120)
    inputs = _inputs(shared_data)
    local = run_documents("RAY", inputs, LocalStore(str(tmp_path / "local")), settings,
                          workers=2)
    # A Ray head already on the machine (`ray start`, another run's) is what a bare
    # ray.init() joins; `local` must start a Ray of its own beside it.
    other = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "resources": {"other_cluster": 1}})
    executor.use_ray("local")
    try:
        done = []
        on_ray = run_documents("RAY", inputs, LocalStore(str(tmp_path / "ray")), settings,
                               workers=2, on_task_done=lambda *args: done.append(args))
        resources = ray.cluster_resources()
        assert resources["CPU"] == 2 and "other_cluster" not in resources
    finally:
        executor.use_ray(None)
        ray.shutdown()
        other.shutdown()
    assert on_ray.stats.tasks_run == local.stats.tasks_run == len(inputs) == len(done)
    assert on_ray.manifest.data_version == local.manifest.data_version
    assert [p.sha256 for p in on_ray.manifest.parts] == [p.sha256 for p in local.manifest.parts]


def test_the_compute_resource_switches_the_backend_for_its_run() -> None:
    resource = ComputeResource(workers=2, ray_address="ray://head:10001")
    context = build_init_resource_context()
    resource.setup_for_execution(context)
    assert executor._RAY_ADDRESS == "ray://head:10001"
    resource.teardown_after_execution(context)
    assert executor._RAY_ADDRESS is None
