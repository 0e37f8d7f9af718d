"""The global steps on a multi-node Ray cluster: a local cluster of two nodes (`ray.cluster_utils.
Cluster`, one CPU each), reached by its address as a real one would be, runs the steps that
dispatch tasks and writes the bytes the local process pool writes, and its workers, on either
node, work under the driver's memory budget."""

from __future__ import annotations

import hashlib
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import ray

from curation import executor
from curation.config import load_pipeline, load_recipe
from curation.duck import MEMORY_ENV, SPILL_ENV
from curation.graph import ALL, CROSS_DEDUP, DEDUP_CLUSTERS, LINE_DEDUP, MIX, SHARDS
from curation.partition import PartitionLayout
from curation.stages.base import DocumentsInput
from curation.stages.dataset import build_and_store_mix, load_stored_tokenizer, run_shards
from curation.stages.dedup import run_cross_dedup, run_partition_dedup
from curation.storage import LocalStore

RECIPE = "sample"
WORKERS = 2


@pytest.fixture(scope="module")
def cluster() -> Iterator[object]:
    """A head node and a worker node, one CPU each; the driver connects by address."""
    from ray.cluster_utils import Cluster

    try:
        started = Cluster(initialize_head=True,
                          head_node_args={"num_cpus": 1, "include_dashboard": False})
        started.add_node(num_cpus=1)
        started.wait_for_nodes()
    except Exception as error:  # noqa: BLE001 - any failure to start means no cluster here
        pytest.skip(f"Ray cannot start a local multi-node cluster here: {error!r}")
    try:
        yield started
    finally:
        executor.use_ray(None)
        ray.shutdown()
        started.shutdown()


@contextmanager
def backend(address: str | None) -> Iterator[None]:
    executor.use_ray(address)
    try:
        yield
    finally:
        executor.use_ray(None)


def where_and_budget(task: int) -> tuple[str, str | None, str | None]:
    """The node a task ran on and the budget it saw (a second, so both nodes get tasks)."""
    import os

    time.sleep(0.5)
    return (ray.get_runtime_context().get_node_id(), os.environ.get(MEMORY_ENV),
            os.environ.get(SPILL_ENV))


def test_every_node_works_under_the_drivers_budget(cluster, monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    # set after the nodes started: only the tasks' runtime environment can carry it to them
    monkeypatch.setenv(MEMORY_ENV, "0.25")
    monkeypatch.setenv(SPILL_ENV, str(tmp_path))
    # pytest imports this file under a name Ray's workers cannot import: ship it by value
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        with backend(cluster.address):
            seen = executor.map_tasks(where_and_budget, list(range(6)), WORKERS)
    finally:
        ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert len(ray.nodes()) == 2
    assert len({node for node, _, _ in seen}) == 2
    assert {(memory, spill) for _, memory, spill in seen} == {("0.25", str(tmp_path))}


def _drop(store: LocalStore, asset: str, partition: str | None = None) -> None:
    prefix = PartitionLayout(store, asset, partition).prefix if partition else asset
    shutil.rmtree(store.uri(prefix), ignore_errors=True)


def _hashes(store: LocalStore, asset: str, partition: str) -> list[tuple[str, str]]:
    manifest = PartitionLayout(store, asset, partition).complete_manifest()
    return [(name, part.sha256) for name in ["part", *sorted(manifest.tables)]
            for part in manifest.table_parts(name)]


def _file_hashes(folder: Path) -> dict[str, str]:
    return {str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.rglob("*")) if path.is_file()}


def _rerun(sample_run, folder: Path, address: str | None) -> dict[str, object]:
    """A copy of the sample's store with the global steps' outputs removed, rebuilt on
    `address` (None: the local pool); what they wrote."""
    shutil.copytree(sample_run.root, folder)
    store = LocalStore(str(folder))
    pipeline = load_pipeline(sample_run.pipeline_path)
    recipe = load_recipe(sample_run.base / "recipes" / f"{RECIPE}.yaml", pipeline)
    partitions = pipeline.partition_keys()
    snapshot = recipe.snapshots[0]
    for asset in (LINE_DEDUP, DEDUP_CLUSTERS):
        _drop(store, asset, snapshot)
    for asset in (CROSS_DEDUP, MIX, SHARDS):
        _drop(store, asset)
    # the connected components (dedup_clusters', cross_dedup's, the mix's) as star rounds of
    # tasks, spread over the nodes
    pipeline = pipeline.model_copy(update={"dedup": pipeline.dedup.model_copy(
        update={"components": "tasks"})})
    with backend(address):
        for asset in (LINE_DEDUP, DEDUP_CLUSTERS):
            run_partition_dedup(DocumentsInput(store, snapshot), asset, pipeline.dedup, {},
                                WORKERS)
        run_cross_dedup(store, partitions, pipeline.dedup, workers=WORKERS)
        build_and_store_mix(store, RECIPE, recipe, load_stored_tokenizer(store, RECIPE),
                            pipeline, workers=WORKERS)
        shards = run_shards(store, RECIPE, recipe, pipeline, WORKERS)
    return {"line_dedup": _hashes(store, LINE_DEDUP, snapshot),
            "dedup_clusters": _hashes(store, DEDUP_CLUSTERS, snapshot),
            "cross_dedup": _hashes(store, CROSS_DEDUP, ALL),
            "mix": _hashes(store, MIX, RECIPE),
            "shards": _file_hashes(Path(store.uri(shards.prefix)))}


def test_the_global_steps_on_two_nodes_write_the_local_pools_bytes(cluster, sample_run,
                                                                    tmp_path: Path) -> None:
    local = _rerun(sample_run, tmp_path / "local", None)
    on_ray = _rerun(sample_run, tmp_path / "ray", cluster.address)
    assert ray.is_initialized() and len(ray.nodes()) == 2
    assert local["shards"] and local["mix"] and local["cross_dedup"]
    assert on_ray == local
