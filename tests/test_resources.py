"""The default resources read CORPUS_* when a run starts, not when the definitions are imported:
a code location loaded once follows the environment its runs start in (`corpus ui` sets
CORPUS_ROOT and CORPUS_PIPELINE for its deployment; backfills launched by the daemon take no run
configuration)."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterResourceFunctionError, build_resources, materialize
from dagster_aws.s3 import S3Resource

from resources import ComputeResource, PipelineResource, StorageResource


def _run_catalog(instance: DagsterInstance) -> None:
    from corpus_assets.definitions import defs
    from curation.graph import CATALOG

    result = materialize([defs.get_assets_def(CATALOG)], instance=instance,
                         resources=defs.resources)
    assert result.success


def test_a_run_writes_under_the_root_its_environment_names(tmp_path: Path, monkeypatch):
    import corpus_assets.definitions  # noqa: F401 - imported before the variable is set

    instance = DagsterInstance.ephemeral()
    for name in ("first", "second"):
        monkeypatch.setenv("CORPUS_ROOT", str(tmp_path / name))
        _run_catalog(instance)
        assert (tmp_path / name / "catalog.duckdb").is_file()


def test_unset_variables_keep_the_defaults(monkeypatch):
    for variable in ("CORPUS_ROOT", "CORPUS_PIPELINE", "CORPUS_WORKERS", "CORPUS_RAY_ADDRESS"):
        monkeypatch.delenv(variable, raising=False)
    assert StorageResource(s3=S3Resource()).from_environment().root == "data"
    assert PipelineResource().from_environment().path == "pipeline.yaml"
    assert ComputeResource().from_environment().workers == 2
    assert ComputeResource().from_environment().ray_address is None
    # A backfill takes no run configuration: the code server's environment names the cluster.
    monkeypatch.setenv("CORPUS_RAY_ADDRESS", "ray://head:10001")
    assert ComputeResource().from_environment().ray_address == "ray://head:10001"
    monkeypatch.setenv("CORPUS_WORKERS", "5")
    assert ComputeResource().from_environment().workers == 5
    # What run configuration sets wins over the environment.
    assert ComputeResource(workers=0).from_environment().workers == 0


def test_a_budget_too_small_per_worker_fails_when_the_run_starts() -> None:
    """Run configuration is checked when Dagster builds the resource, before any step."""
    launch = {"compute": ComputeResource.configure_at_launch()}
    with pytest.raises(DagsterResourceFunctionError) as failed, build_resources(
            launch, resource_config={"compute": {"config": {"memory_gb": 1, "workers": 4}}}):
        pass
    assert "memory_gb=1.0 shared by workers=4" in str(failed.value.__cause__)
    with pytest.raises(ValueError, match="greater than or equal to 0.5"):
        ComputeResource(memory_gb=0.25)
    with build_resources(launch, resource_config={"compute": {"config": {
            "memory_gb": 1, "workers": 2}}}) as built:
        assert (built.compute.memory_gb, built.compute.workers) == (1, 2)


def test_a_run_sets_its_budget_and_puts_the_previous_one_back(tmp_path: Path,
                                                               monkeypatch) -> None:
    from curation.duck import MEMORY_ENV, SPILL_ENV, current_budget

    monkeypatch.setenv(MEMORY_ENV, "3")
    monkeypatch.delenv(SPILL_ENV, raising=False)
    with build_resources({"compute": ComputeResource(workers=1, memory_gb=1,
                                                     spill_directory=str(tmp_path))}):
        assert (current_budget().memory_gb, current_budget().spill_directory) == (
            1, str(tmp_path))
    assert (current_budget().memory_gb, current_budget().spill_directory) == (3, None)
