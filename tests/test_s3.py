"""The S3 code path against a real S3 API: moto's server on 127.0.0.1."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import boto3
import pytest
from dagster import instance_for_test, materialize
from dagster_aws.s3 import S3Resource

import checks.documents
import checks.warc_files
from corpus_assets.documents import documents
from corpus_assets.warc_files import warc_files
from curation.partition import PartitionLayout
from curation.storage import S3Store
from partitions import SNAPSHOT_PARTITIONS_NAME
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


def test_whole_graph_on_s3_with_common_crawl_layout(shared_data, s3, tmp_path) -> None:
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


def test_store_pickles_with_its_s3_settings(s3_endpoint) -> None:
    # The resource's own settings reach worker processes; nothing relies on ambient credentials.
    resource = S3Resource(endpoint_url=s3_endpoint, **CREDENTIALS)
    storage = StorageResource(root="s3://corpus-two/x", s3=resource)
    boto3.client("s3", endpoint_url=s3_endpoint, **CREDENTIALS).create_bucket(Bucket="corpus-two")
    import pickle

    store = pickle.loads(pickle.dumps(storage.store))
    store.write_bytes("k", b"v")
    assert store.read_bytes("k") == b"v"
