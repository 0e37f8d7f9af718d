"""Single-step stages (one write, no tasks) hold their partition's lock too: a second
materialization of mix, shards, cross_dedup, the catalog... waits for the first, saying whom it
waits for, and gives up naming the holder without writing anything."""

from __future__ import annotations

import hashlib
import logging
import shutil
import threading
from pathlib import Path

import pytest
from dagster import instance_for_test, materialize
from dagster_aws.s3 import S3Resource

from corpus_assets.dataset import mix, shards, tokenizer
from corpus_assets.dedup import cross_dedup
from corpus_assets.lineage import catalog
from curation.storage import LocalStore
from curation.tasks import LockSettings, hold_locks
from partitions import RECIPE_PARTITIONS_NAME
from resources import CatalogResource, ComputeResource, PipelineResource, StorageResource

HOLDER = LockSettings(wait_seconds=1, stale_seconds=60, heartbeat_seconds=0.2, poll_seconds=0.1)


@pytest.fixture(scope="module")
def sample_copy(sample_run, tmp_path_factory) -> Path:
    """A copy of the built-in sample's folder, so that these runs leave the shared one alone."""
    base = tmp_path_factory.mktemp("locks") / "base"
    shutil.copytree(sample_run.base, base, ignore=shutil.ignore_patterns("home"))
    return base


def _resources(base: Path) -> dict:
    return {"pipeline": PipelineResource(path=str(base / "pipeline.yaml")),
            "storage": StorageResource(root=str(base / "data"), s3=S3Resource()),
            "compute": ComputeResource(workers=0),
            "catalog": CatalogResource(path=str(base / "data" / "catalog.duckdb"))}


def _files(root: Path) -> dict[str, str]:
    return {str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(root.rglob("*")) if path.is_file() and path.suffix != ".wal"}


def _materialize(base: Path, asset, partition: str | None):
    with instance_for_test(temp_dir=str(base / "home")) as instance:
        instance.add_dynamic_partitions(RECIPE_PARTITIONS_NAME, ["sample"])
        return materialize([asset], partition_key=partition, resources=_resources(base),
                           instance=instance, raise_on_error=False)


@pytest.mark.parametrize(("asset", "name", "partition"), [
    (mix, "mix", "sample"), (shards, "shards", "sample"), (tokenizer, "tokenizer", "sample"),
    (cross_dedup, "cross_dedup", None), (catalog, "catalog", None),
], ids=["mix", "shards", "tokenizer", "cross_dedup", "catalog"])
def test_a_second_run_of_a_single_step_stage_gives_up_naming_the_holder(
        sample_copy, monkeypatch, asset, name, partition) -> None:
    (sample_copy / "home").mkdir(exist_ok=True)
    monkeypatch.setenv("CORPUS_LOCK_WAIT_SECONDS", "1")
    monkeypatch.setenv("CORPUS_LOCK_POLL_SECONDS", "0.1")
    store = LocalStore(str(sample_copy / "data"))
    before = _files(sample_copy / "data")
    with hold_locks(store, [name], partition or "all", HOLDER, run_id="run-holding-it"):
        result = _materialize(sample_copy, asset, partition)
    assert not result.success
    failure = next(event for event in result.all_events if event.is_step_failure)
    message = failure.step_failure_data.error.to_string()
    assert f"{name}[{partition or 'all'}] is locked by run 'run-holding-it'" in message
    assert "gave up after waiting 1." in message
    after = _files(sample_copy / "data")
    assert after == before  # nothing written, and the holder's lock is released again
    assert not (sample_copy / "data" / name / (partition or "all") / "_lock").exists()


def test_a_second_mix_waits_for_the_first_then_writes_the_same_output(
        sample_copy, monkeypatch, caplog) -> None:
    (sample_copy / "home").mkdir(exist_ok=True)
    monkeypatch.setenv("CORPUS_LOCK_WAIT_SECONDS", "60")
    monkeypatch.setenv("CORPUS_LOCK_POLL_SECONDS", "0.1")
    store = LocalStore(str(sample_copy / "data"))
    mix_folder = sample_copy / "data" / "mix" / "sample"
    before = _files(mix_folder)
    released = threading.Event()
    with hold_locks(store, ["mix"], "sample", HOLDER, run_id="first-mix"):
        timer = threading.Timer(1.5, released.set)
        timer.start()

        def run() -> None:
            caplog.set_level(logging.INFO, logger="curation.tasks")
            outcome.append(_materialize(sample_copy, mix, "sample"))

        outcome: list = []
        worker = threading.Thread(target=run)
        worker.start()
        released.wait()
    worker.join(timeout=120)
    assert outcome and outcome[0].success
    assert "mix[sample]: waiting for the lock held by run 'first-mix'" in caplog.text
    assert _files(mix_folder) == before  # same inputs: the same mix, whole
