"""Shared caches under concurrent writers: every worker of a run (and every run on the machine)
fetches the same classifier into the same local cache at once; each one must load a whole
model, never another writer's half-written file."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import shutil
import tempfile
import traceback
from pathlib import Path

import fasttext
import pytest
from dagster_aws.s3 import S3Resource

from curation.language import model_path as language_model_path
from curation.stages.dataset import local_shards
from curation.stages.quality import _local_model, model_key
from curation.storage import LocalStore, S3Store
from tests.conftest import MOTO_CREDENTIALS

WRITERS = 8
ROUNDS = 40


def _fetch_and_load(store_root: str, sha256: str, barrier, results) -> None:
    """One worker's first task: the model into the local cache, then fastText loads it."""
    try:
        barrier.wait(timeout=30)
        path = _local_model(LocalStore(store_root), sha256)
        fasttext.load_model(str(path))
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        results.put(None if digest == sha256 else f"cached model has sha256 {digest}")
    except BaseException:  # noqa: BLE001 - the child reports every failure to the parent
        results.put(traceback.format_exc(limit=2))


def _one_round(context, store_root: str, sha256: str) -> list[str]:
    barrier, results = context.Barrier(WRITERS), context.Queue()
    workers = [context.Process(target=_fetch_and_load, args=(store_root, sha256, barrier, results))
               for _ in range(WRITERS)]
    return _collect(workers, results)


def _collect(workers: list, results) -> list[str]:
    """Runs the workers; every failure they reported, and every one that died abnormally."""
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    # fastText may also abort the process on a half-written file: that is a failure too.
    failures = [f"worker exited with {worker.exitcode}" for worker in workers
                if worker.exitcode != 0]
    while not results.empty():
        failures.append(results.get())
    return [failure for failure in failures if failure is not None]


def test_concurrent_first_fetches_of_a_model_all_load_it(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # A real fastText model (lid.176.ftz) stored under its content hash, as the classifier is.
    model = language_model_path().read_bytes()
    sha256 = hashlib.sha256(model).hexdigest()
    store = LocalStore(str(tmp_path / "root"))
    store.write_bytes(model_key(sha256), model)
    # The cache lives under the system temporary folder: a private one for this test
    # (forked workers inherit it).
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    cache = tmp_path / "tmp" / "corpus-models" / sha256

    context = multiprocessing.get_context("fork")
    failures = []
    for _ in range(ROUNDS):
        shutil.rmtree(cache, ignore_errors=True)  # a first run: nothing cached yet
        failures += _one_round(context, store.root, sha256)
    assert not failures, f"{len(failures)} of {ROUNDS * WRITERS} loads failed:\n{failures[0]}"
    # Only the model is left: no writer's temporary file stays behind.
    assert [p.name for p in cache.iterdir()] == ["model.bin"]


def test_a_cached_model_cut_short_is_fetched_again(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """What the old race could leave behind for good: a writer killed half-way through the
    shared temporary file, renamed into place by another."""
    model = language_model_path().read_bytes()
    sha256 = hashlib.sha256(model).hexdigest()
    store = LocalStore(str(tmp_path / "root"))
    store.write_bytes(model_key(sha256), model)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    cached = tmp_path / "tmp" / "corpus-models" / sha256 / "model.bin"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(model[: len(model) // 2])
    path = _local_model(store, sha256)
    assert path == cached and path.read_bytes() == model
    fasttext.load_model(str(path))


# --- the CLI's download folder of a dataset version on an S3 root ----------------------------

SHARD_FILES = 3
DOWNLOADERS = 4
DOWNLOAD_ROUNDS = 6


def _download_and_read(endpoint: str, prefix: str, folder: str, expected: dict, barrier,
                       results) -> None:
    """`corpus shards verify` on an S3 root: the version into the shared folder, then read."""
    try:
        store = S3Store("s3://shards-race/root", S3Resource(endpoint_url=endpoint,
                                                             **MOTO_CREDENTIALS).get_client)
        barrier.wait(timeout=30)
        local = local_shards(store, prefix, folder)
        for name, digest in expected.items():
            found = hashlib.sha256((local / name).read_bytes()).hexdigest()
            if found != digest:
                results.put(f"{name} read while another download rewrote it")
    except BaseException:  # noqa: BLE001 - the child reports every failure to the parent
        results.put(traceback.format_exc(limit=2))


def test_concurrent_downloads_of_a_version_never_show_a_partial_file(s3_endpoint,
                                                                     tmp_path: Path) -> None:
    client = S3Resource(endpoint_url=s3_endpoint, **MOTO_CREDENTIALS).get_client()
    client.create_bucket(Bucket="shards-race")
    prefix, expected = "shards/v1", {}
    for index in range(SHARD_FILES):
        body = os.urandom(4 << 20)
        name = f"shard-{index:05d}.bin"
        client.put_object(Bucket="shards-race", Key=f"root/{prefix}/{name}", Body=body)
        expected[name] = hashlib.sha256(body).hexdigest()

    context = multiprocessing.get_context("fork")
    failures = []
    for round_index in range(DOWNLOAD_ROUNDS):
        folder = str(tmp_path / f"corpus-shards-{round_index}")
        barrier, results = context.Barrier(DOWNLOADERS), context.Queue()
        workers = [context.Process(target=_download_and_read, args=(
            s3_endpoint, prefix, folder, expected, barrier, results)) for _ in range(DOWNLOADERS)]
        failures += _collect(workers, results)
        assert sorted(p.name for p in Path(folder).iterdir()) == sorted(expected)
    assert not failures, f"{len(failures)} reads failed:\n{failures[0]}"
