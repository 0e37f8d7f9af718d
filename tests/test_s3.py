"""The S3 code path against a real S3 API: moto's server on 127.0.0.1."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path

import boto3
import duckdb
import numpy as np
import pyarrow as pa
import pytest
from dagster import instance_for_test, materialize
from dagster_aws.s3 import S3Resource

import checks.documents
import checks.warc_files
from corpus_assets.documents import documents
from corpus_assets.main_job import main_run_config, run_main_jobs
from corpus_assets.warc_files import warc_files
from curation.config import load_pipeline
from curation.exchange import Exchange, bucket_ids, register_slices
from curation.partition import PartitionLayout
from curation.storage import LocalStore, S3Settings, S3Store
from partitions import RECIPE_PARTITIONS_NAME, SNAPSHOT_PARTITIONS_NAME
from resources import ComputeResource, PipelineResource, StorageResource
from tests.conftest import MOTO_CREDENTIALS

CRAWL = "crawl-data/CC-MAIN-2099-01"
FILES = [
    "warc/cc-main-2020-34_resiliparse_16responses.warc.gz",
    "warc/non_cc/dolma_wget-sample-0000_22responses.warc.gz",
    "warc/non_cc/dolma_wget-sample-0001_15responses.warc.gz",
]
CREDENTIALS = MOTO_CREDENTIALS


@pytest.fixture
def s3(s3_endpoint):
    return S3Resource(endpoint_url=s3_endpoint, **CREDENTIALS)


def test_s3_store_writes_whole_objects_and_lists_by_folder(s3) -> None:
    client = s3.get_client()
    client.create_bucket(Bucket="store-test")
    store = S3Store("s3://store-test/root", s3.get_client)
    store.write_bytes("a/part-00000.parquet", b"one")
    store.write_bytes("a/_manifest.json", b"{}")
    store.write_bytes("ab/part-00000.parquet", b"other partition")
    assert store.list("a") == ["a/_manifest.json", "a/part-00000.parquet"]
    assert store.read_bytes("a/part-00000.parquet") == b"one"
    assert store.exists("a/_manifest.json") and not store.exists("a/missing")
    assert store.delete_prefix("a") == 2 and store.list("a") == []
    assert store.list("ab") == ["ab/part-00000.parquet"]


def test_an_exchange_on_s3_reads_each_bucket_by_a_ranged_get(s3) -> None:
    s3.get_client().create_bucket(Bucket="exchange-test")
    store = S3Store("s3://exchange-test/root", s3.get_client)
    keys = np.arange(1_000, dtype=np.uint64)
    exchange = Exchange(store, "work/x", 4)
    buckets = exchange.gather([exchange.write("m0", pa.table({"key": keys}), "key"),
                               exchange.write("m1", pa.table({"key": keys + 1_000}), "key")])
    assert store.list("work/x") == ["work/x/m0.arrows", "work/x/m1.arrows"]
    assert store.read_range("work/x/m0.arrows", 2, 3) == store.read_bytes("work/x/m0.arrows")[2:5]
    for bucket, slices in enumerate(buckets):
        con = duckdb.connect()
        register_slices(con, "rows", store, slices)
        got = [key for (key,) in con.execute("SELECT key FROM rows ORDER BY key").fetchall()]
        every = np.arange(2_000, dtype=np.uint64)
        assert got == every[bucket_ids(every, 4) == bucket].tolist()


def _upload_crawl(client, shared: Path) -> None:
    client.create_bucket(Bucket="crawl")
    client.create_bucket(Bucket="corpus")
    paths = []
    for index, name in enumerate(FILES):
        key = f"{CRAWL}/segments/1700000000.{index}/warc/CC-MAIN-{index:05d}.warc.gz"
        client.put_object(Bucket="crawl", Key=key, Body=(shared / name).read_bytes())
        paths.append(key)
    listing = gzip.compress(("\n".join(paths) + "\n").encode())
    client.put_object(Bucket="crawl", Key=f"{CRAWL}/warc.paths.gz", Body=listing)


def _pipeline(tmp_path: Path) -> Path:
    path = tmp_path / "pipeline.yaml"
    path.write_text(f"""
version: 1
snapshots:
  CC-MAIN-2099-01:
    warc:
      listing: s3://crawl/{CRAWL}/warc.paths.gz
      base: s3://crawl/
      sample: {{files: 2, method: first}}
  BY-PREFIX:
    warc: {{s3_prefix: s3://crawl/{CRAWL}/segments/}}
documents: {{survival: {{min: 0.3, max: 1.0}}}}
""")
    return path


def test_ingest_on_s3_with_common_crawl_layout(shared_data, s3, tmp_path) -> None:
    client = s3.get_client()
    _upload_crawl(client, shared_data)
    resources = {
        "pipeline": PipelineResource(path=str(_pipeline(tmp_path))),
        "storage": StorageResource(root="s3://corpus/v1", s3=s3),
        "compute": ComputeResource(workers=2),
    }
    (tmp_path / "home").mkdir()
    with instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        instance.add_dynamic_partitions(SNAPSHOT_PARTITIONS_NAME, ["CC-MAIN-2099-01", "BY-PREFIX"])
        for partition in ("CC-MAIN-2099-01", "BY-PREFIX"):
            result = materialize(
                [warc_files, documents, checks.warc_files.warc_files_listed,
                 checks.documents.documents_contract, checks.documents.documents_survival],
                partition_key=partition, resources=resources, instance=instance,
            )
            assert result.success
            assert all(check.passed for check in result.get_asset_check_evaluations())

    store = S3Store("s3://corpus/v1", s3.get_client)
    listed = PartitionLayout(store, "warc_files", "CC-MAIN-2099-01").read_table().to_pylist()
    assert [row["location"].rsplit("/", 1)[1] for row in listed] == [
        "CC-MAIN-00000.warc.gz", "CC-MAIN-00001.warc.gz"]
    for row in listed:
        body = client.get_object(Bucket="crawl", Key=row["location"][len("s3://crawl/"):])
        assert row["etag"] == body["ETag"].strip('"')
        assert row["sha256"] == hashlib.sha256(body["Body"].read()).hexdigest()

    by_prefix = PartitionLayout(store, "documents", "BY-PREFIX")
    manifest = by_prefix.read_manifest()
    assert manifest is not None and len(manifest.parts) == 3
    table = by_prefix.read_table()
    assert table.num_rows == manifest.rows > 40
    assert all(loc.startswith("s3://crawl/") for loc in table["warc_file"].to_pylist())
    assert store.exists("samples/documents/BY-PREFIX.jsonl")
    assert json.loads(store.read_bytes(manifest.parts[0].key.replace(
        "part-00000.parquet", "_tasks/task-00000.json")))["version"] == manifest.version
    # Nothing is written outside the root, and no temporary objects are left behind.
    keys = [entry["Key"] for entry in client.list_objects_v2(Bucket="corpus")["Contents"]]
    assert all(key.startswith("v1/") and not key.endswith(".tmp") for key in keys)


def test_store_pickles_with_its_s3_settings_and_loads_without_dagster(s3_endpoint) -> None:
    # The resource's own settings reach worker processes; nothing relies on ambient credentials,
    # and a worker that unpickles a task's store does not import Dagster (seconds per worker).
    import pickle
    import subprocess
    import sys

    resource = S3Resource(endpoint_url=s3_endpoint, **CREDENTIALS)
    storage = StorageResource(root="s3://corpus-two/x", s3=resource)
    boto3.client("s3", endpoint_url=s3_endpoint, **CREDENTIALS).create_bucket(Bucket="corpus-two")
    worker = ("import pickle, sys; pickle.loads(sys.stdin.buffer.read()).write_bytes('k', b'v');"
              "print(sorted(m for m in sys.modules if m.startswith('dagster')))")
    loaded = subprocess.run([sys.executable, "-c", worker], input=pickle.dumps(storage.store),
                            capture_output=True, check=True, env={"PATH": "/usr/bin:/bin"})
    assert loaded.stdout.decode().strip() == "[]"
    assert pickle.loads(pickle.dumps(storage.store)).read_bytes("k") == b"v"


def test_s3_settings_make_the_client_the_resource_makes() -> None:
    from dataclasses import fields

    assert [field.name for field in fields(S3Settings)] == list(S3Resource.model_fields)
    resource = S3Resource(endpoint_url="http://127.0.0.1:9", region_name="eu-west-3",
                          max_attempts=7, aws_access_key_id="key", aws_secret_access_key="secret",
                          aws_session_token="token", use_ssl=False)
    ours = S3Settings(**{name: getattr(resource, name) for name in S3Resource.model_fields})()
    theirs = resource.get_client()
    for client in (ours, theirs):
        credentials = client._request_signer._credentials
        assert (client.meta.endpoint_url, client.meta.region_name, client.meta.config.retries,
                credentials.access_key, credentials.secret_key, credentials.token) == (
            "http://127.0.0.1:9", "eu-west-3", {"total_max_attempts": 8, "mode": "standard"},
            "key", "secret", "token")
    from botocore import UNSIGNED

    for client in (S3Settings(use_unsigned_session=True)(),
                   S3Resource(use_unsigned_session=True).get_client()):
        _, signer = client.meta.events.emit_until_response(
            "choose-signer.s3.GetObject", signing_name="s3", region_name="us-east-1",
            signature_version="s3v4", context={})
        assert signer is UNSIGNED


# --- the five main jobs on an S3 root ----------------------------------------------------------

SAMPLE_CRAWL = "crawl-data/CC-MAIN-2099-02"


def _upload_sample(client, warc: Path) -> None:
    """SAMPLE-01's WARC files laid out like a Common Crawl snapshot (listing + segments);
    SAMPLE-02's under a plain prefix."""
    client.create_bucket(Bucket="sample-crawl")
    client.create_bucket(Bucket="sample-corpus")
    paths = []
    for index, path in enumerate(sorted((warc / "SAMPLE-01").glob("*.warc.gz"))):
        key = f"{SAMPLE_CRAWL}/segments/1700000000.{index}/warc/{path.name}"
        client.put_object(Bucket="sample-crawl", Key=key, Body=path.read_bytes())
        paths.append(key)
    client.put_object(Bucket="sample-crawl", Key=f"{SAMPLE_CRAWL}/warc.paths.gz",
                      Body=gzip.compress(("\n".join(paths) + "\n").encode()))
    for path in sorted((warc / "SAMPLE-02").glob("*.warc.gz")):
        client.put_object(Bucket="sample-crawl", Key=f"plain/SAMPLE-02/{path.name}",
                          Body=path.read_bytes())


@pytest.fixture(scope="module")
def s3_sample(sample_run, s3_endpoint, tmp_path_factory):
    """The README's five main jobs (per_snapshot, models, scores, dataset, lineage) on the
    built-in sample with the storage root on S3 and the WARC input read from S3, through the
    default resources: S3 settings come from the standard AWS environment, as in production."""
    base = tmp_path_factory.mktemp("s3-sample")
    for name in ("pipeline.yaml", "recipes", "data/sample/sources", "data/sample/evals",
                 "data/sample/lists"):
        copy = shutil.copytree if (sample_run.base / name).is_dir() else shutil.copyfile
        (base / name).parent.mkdir(parents=True, exist_ok=True)
        copy(sample_run.base / name, base / name)
    text = (base / "pipeline.yaml").read_text()
    text = text.replace("warc: {path: data/sample/warc/SAMPLE-01}",
                        f"warc: {{listing: 's3://sample-crawl/{SAMPLE_CRAWL}/warc.paths.gz', "
                        "base: 's3://sample-crawl/'}")
    text = text.replace("warc: {path: data/sample/warc/SAMPLE-02}",
                        "warc: {s3_prefix: 's3://sample-crawl/plain/SAMPLE-02/'}")
    assert "data/sample/warc" not in text
    # The model plane writes through the same Store as every stage; off here it keeps this
    # second whole run of the sample inside the test timeout (its vectors cost about 100 s).
    assert text.count("\n  enabled: true") == 1  # the embeddings section's
    text = text.replace("\n  enabled: true", "\n  enabled: false")
    (base / "pipeline.yaml").write_text(text)
    client = boto3.client("s3", endpoint_url=s3_endpoint, **CREDENTIALS)
    _upload_sample(client, sample_run.root / "sample" / "warc")

    environment = {"AWS_ENDPOINT_URL": s3_endpoint, "AWS_ACCESS_KEY_ID": "testing",
                   "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in environment.items():
            patch.setenv(name, value)
        pipeline = load_pipeline(base / "pipeline.yaml")
        run_config = main_run_config(str(base / "pipeline.yaml"), "s3://sample-corpus/v1",
                                     workers=2)
        run_config["resources"]["catalog"] = {"config": {"path": str(base / "catalog.duckdb")}}
        (base / "home").mkdir()
        with instance_for_test(temp_dir=str(base / "home")) as instance:
            instance.add_dynamic_partitions(SNAPSHOT_PARTITIONS_NAME, pipeline.partition_keys())
            instance.add_dynamic_partitions(RECIPE_PARTITIONS_NAME, ["sample"])
            runs = run_main_jobs(instance, pipeline.partition_keys(), run_config,
                                 recipes=["sample"])
            store = S3Store("s3://sample-corpus/v1", lambda: boto3.client(
                "s3", endpoint_url=s3_endpoint, **CREDENTIALS))
            yield {"runs": runs, "store": store, "client": client, "base": base,
                   "instance": instance}


# Its setup is the whole sample's main job on moto's S3 (about 280 s on the 2-core VM, past
# 600 s when the machine is loaded).
@pytest.mark.timeout(900)
def test_the_main_jobs_run_whole_on_an_s3_root(s3_sample, sample_run) -> None:
    runs = s3_sample["runs"]
    assert [(run.job, run.partition) for run in runs] == [
        (run.job, run.partition) for run in map(_as_job_run, sample_run.results.items())]
    for run in runs:
        assert run.result.success, (run.job, run.partition)
        failed = [e.check_name for e in run.result.get_asset_check_evaluations() if not e.passed]
        assert failed == [], (run.job, run.partition)
    keys = [entry["Key"] for page in s3_sample["client"].get_paginator("list_objects_v2")
            .paginate(Bucket="sample-corpus") for entry in page.get("Contents", [])]
    assert all(key.startswith("v1/") and not key.endswith((".tmp", "/_lock")) for key in keys)
    for asset in ("documents", "scrubbed", "quality_scores", "decontaminated", "mix"):
        assert any(key.startswith(f"v1/{asset}/") for key in keys), asset
    listed = PartitionLayout(s3_sample["store"], "warc_files", "SAMPLE-01").read_table()
    assert all(location.startswith(f"s3://sample-crawl/{SAMPLE_CRAWL}/segments/")
               for location in listed["location"].to_pylist())


def test_the_s3_run_yields_the_local_runs_token_stream(s3_sample, sample_run) -> None:
    # The same WARC bytes from another place: the same documents, selection and tokens.
    store = s3_sample["store"]
    local = LocalStore(str(sample_run.root))
    for asset in ("documents", "scrubbed"):
        for partition in ("SAMPLE-01", "SAMPLE-02"):
            ours = PartitionLayout(store, asset, partition).read_table()
            theirs = PartitionLayout(local, asset, partition).read_table()
            assert ours.column("doc_id").equals(theirs.column("doc_id")), (asset, partition)
            assert ours.column("text").equals(theirs.column("text")), (asset, partition)
    s3_version = PartitionLayout(store, "shards", "sample").complete_manifest().version
    local_version = PartitionLayout(local, "shards", "sample").complete_manifest().version
    s3_bin = store.read_bytes(f"shards/{s3_version}/shard-00000.bin")
    local_bin = (sample_run.root / "shards" / local_version / "shard-00000.bin").read_bytes()
    assert len(s3_bin) > 10_000 and s3_bin == local_bin


def test_lineage_queries_answer_from_an_s3_root(s3_sample) -> None:
    from curation.catalog import Catalog

    store = s3_sample["store"]
    version = PartitionLayout(store, "shards", "sample").complete_manifest().version
    with Catalog(str(s3_sample["base"] / "catalog.duckdb")) as catalog:
        token = catalog.at_token(version, 0, 100)
        assert not token.padding and token.document is not None
        assert token.document.warc_file.startswith("s3://sample-crawl/")
        assert "documents" in token.passed or "heuristics" in token.passed
        found = catalog.find_url(token.document.url)
    assert any(location.doc_id == token.document.doc_id and location.status == "in_dataset"
               for location in found)


def _as_job_run(item):
    from corpus_assets.main_job import JobRun

    (job, partition), result = item
    return JobRun(job, partition, result)
