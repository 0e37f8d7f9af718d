"""The parallel shard build (`plan_shards`, then `build_planned_shards`): the same bytes as the
serial `build_shards` for 1 and 2 workers and on a local Ray cluster, for both packings, with
ranges and buckets cut inside documents, and through an S3 store (buckets, range outputs and
shards all in the store, the work prefix gone after); and the plan's refusals."""

from __future__ import annotations

import hashlib
import math
from functools import partial
from pathlib import Path

import boto3
import pyarrow as pa
import pytest
import ray

from curation import executor
from curation.duck import DuckDBSettings, duckdb_session, register
from curation.graph import SCRUBBED
from curation.partition import Manifest, PartitionLayout
from curation.shards import (
    Occurrence,
    ShardSettings,
    build_planned_shards,
    build_shards,
    iter_planned,
    occurrence_lengths,
    order_occurrences,
    plan_shards,
    range_size,
    store_planned_shards,
)
from curation.stages.dataset import shard_plan, shards_work_prefix
from curation.storage import LocalStore, S3Store
from curation.tokenizer import PinnedTokenizer, load_tokenizer
from tests.conftest import MOTO_CREDENTIALS
from tests.test_shards import (
    INFO,
    PHASES,
    build,
    file_hashes,
    occurrences,
    real_documents,
    tokenizer_path,
)

# Small shards and buckets, so ranges and buckets begin and end inside documents and one long
# document spans several of each.
SMALL = {"seq_len": 64, "tokens_per_shard": 1024}
BUCKET_BYTES = 12_000


@pytest.fixture(scope="module")
def gpt2() -> PinnedTokenizer:
    return load_tokenizer(tokenizer_path("gpt2"))


@pytest.fixture(scope="module")
def items() -> list[Occurrence]:
    return occurrences(real_documents(80))


def occurrence_table(items: list[Occurrence], tokenizer: PinnedTokenizer) -> pa.Table:
    """The mix's columns, with exact token counts (EOS included), in no particular order."""
    return pa.table({
        "doc_id": [i.doc_id for i in items], "occurrence": [i.occurrence for i in items],
        "phase": [i.phase for i in items], "source": [i.source for i in items],
        "licence": [i.licence for i in items],
        "est_tokens": occurrence_lengths([i.text for i in items], tokenizer)})


def text_table(items: list[Occurrence]) -> pa.Table:
    texts = {i.doc_id: i.text for i in items}
    return pa.table({"doc_id": list(texts), "text": list(texts.values())})


def settings_of(**options: object) -> ShardSettings:
    return ShardSettings(**({"seq_len": 256, "tokens_per_shard": 4096, "seed": 11,
                             "phases": PHASES} | options))  # type: ignore[arg-type]


def planned(items: list[Occurrence], tokenizer: PinnedTokenizer, directory: Path, work: Path,
            workers: int, table: pa.Table | None = None, texts: pa.Table | None = None,
            **options: object) -> dict:
    """Plans the occurrences under a 64 MB DuckDB limit and builds them with `workers`."""
    settings = settings_of(**options)
    work.mkdir()
    with duckdb_session(DuckDBSettings("64MB", 1, str(work))) as con:
        register(con, "occurrences",
                 occurrence_table(items, tokenizer) if table is None else table)
        register(con, "texts", text_table(items) if texts is None else texts)
        plan = plan_shards(con, "occurrences", "texts", ("doc_id",), settings, work / "plan",
                           BUCKET_BYTES)
    return build_planned_shards(plan, tokenizer, directory, settings, INFO, workers).manifest


def waves_of_shards(shards: int, size: int, workers: int) -> int:
    """Shard-times until ranges of `size` shards are built by `workers` (waves of tasks)."""
    tasks = math.ceil(shards / size)
    return math.ceil(tasks / workers) * size


@pytest.mark.parametrize("workers", [1, 2, 8, 14, 16])
def test_range_size_finishes_soonest(workers) -> None:
    for shards in (1, 7, 12, 60, 61, 200, 1_000):
        size = range_size(shards, workers)
        best = min(waves_of_shards(shards, other, workers) for other in range(1, shards + 1))
        assert waves_of_shards(shards, size, workers) == best, (shards, workers, size)
    # Not one task per shard where fewer finish as soon: tasks near 4 per worker.
    assert range_size(1_000, workers) > 1
    assert range_size(60, 14) == 1  # 2 a range ran 3 waves of 14, the last with 2 tasks


@pytest.mark.parametrize("shape", [{}, SMALL], ids=["default", "small"])
def test_one_and_two_workers_write_the_serial_bytes(shape, items, gpt2, tmp_path) -> None:
    build(items, gpt2, tmp_path / "serial", **shape)
    serial = file_hashes(tmp_path / "serial")
    for workers in (1, 2):
        manifest = planned(items, gpt2, tmp_path / f"w{workers}", tmp_path / f"work{workers}",
                           workers, **shape)
        assert file_hashes(tmp_path / f"w{workers}") == serial
    assert len(manifest["shards"]) > 8 * 2  # more ranges than workers, each several shards


def test_a_local_ray_cluster_writes_the_serial_bytes(items, gpt2, tmp_path) -> None:
    few = items[:40]
    build(few, gpt2, tmp_path / "serial", **SMALL)
    executor.use_ray("local")
    try:
        planned(few, gpt2, tmp_path / "ray", tmp_path / "work", 2, **SMALL)
        assert ray.is_initialized() and ray.cluster_resources()["CPU"] == 2
    finally:
        executor.use_ray(None)
        ray.shutdown()
    assert file_hashes(tmp_path / "ray") == file_hashes(tmp_path / "serial")


def test_an_s3_store_gets_the_serial_bytes_and_keeps_no_work_prefix(s3_endpoint, items, gpt2,
                                                                    tmp_path) -> None:
    few = items[:40]
    build(few, gpt2, tmp_path / "serial", **SMALL)
    # A picklable client factory: the range tasks make their own clients.
    client = partial(boto3.client, "s3", endpoint_url=s3_endpoint, **MOTO_CREDENTIALS)
    client().create_bucket(Bucket="shard-build")
    occurrences = occurrence_table(few, gpt2)
    occurrences = occurrences.append_column("partition", pa.array(["p0"] * len(few)))
    settings = settings_of(**SMALL)
    for store in (LocalStore(str(tmp_path / "root")),
                  S3Store("s3://shard-build/root", client)):
        scrubbed = PartitionLayout(store, SCRUBBED, "p0")
        scrubbed.write_manifest(Manifest(SCRUBBED, "p0", "v0",
                                         [scrubbed.write_part(0, text_table(few))]))
        work = shards_work_prefix(INFO.version)
        with shard_plan(store, occurrences, settings, work) as plan:
            assert store.list(f"{work}/buckets")
            store_planned_shards(plan, gpt2, store, "shards/out", settings, INFO, 2)
            assert store.list(f"{work}/ranges")
        assert store.list("shards/_work") == []
        stored = {key.rsplit("/", 1)[1]: hashlib.sha256(store.read_bytes(key)).hexdigest()
                  for key in store.list("shards/out")}
        assert stored == file_hashes(tmp_path / "serial")


def test_best_fit_streams_the_buckets_into_the_serial_build(items, gpt2, tmp_path) -> None:
    options = {"packing": "best_fit", "seq_len": 512, "best_fit_window": 8}
    build(items, gpt2, tmp_path / "serial", **options)
    planned(items, gpt2, tmp_path / "planned", tmp_path / "work", 2, **options)
    assert file_hashes(tmp_path / "planned") == file_hashes(tmp_path / "serial")


def test_the_plan_streams_the_shuffle_order(items, gpt2, tmp_path) -> None:
    settings = settings_of()
    with duckdb_session(DuckDBSettings("64MB", 1, str(tmp_path))) as con:
        register(con, "occurrences", occurrence_table(items[::-1], gpt2))
        register(con, "texts", text_table(items))
        plan = plan_shards(con, "occurrences", "texts", ("doc_id",), settings, tmp_path / "p",
                           BUCKET_BYTES)
    assert list(iter_planned(plan)) == order_occurrences(items, PHASES, settings.seed)
    assert plan.last_bucket > 20 and plan.occurrences == len(items)


def test_no_occurrences_give_the_serial_empty_build(gpt2, tmp_path) -> None:
    build_shards([], gpt2, tmp_path / "serial", settings_of(), INFO)
    manifest = planned([], gpt2, tmp_path / "planned", tmp_path / "work", 2)
    assert manifest["shards"] == [] and manifest["totals"]["tokens"] == 0
    assert file_hashes(tmp_path / "planned") == file_hashes(tmp_path / "serial")


def test_the_plan_refuses_wrong_counts_missing_text_and_bad_occurrences(items, gpt2,
                                                                         tmp_path) -> None:
    few = items[:12]
    table = occurrence_table(few, gpt2)
    wrong = table.set_column(5, "est_tokens", pa.array(
        [n + (i == 3) for i, n in enumerate(table["est_tokens"].to_pylist())]))
    with pytest.raises(ValueError, match="est_tokens says"):
        planned(few, gpt2, tmp_path / "a", tmp_path / "wa", 0, table=wrong)
    with pytest.raises(ValueError, match="must hold the text of every document once"):
        planned(few, gpt2, tmp_path / "b", tmp_path / "wb", 0, texts=text_table(few).slice(1))
    with pytest.raises(ValueError, match="is repeated"):
        planned(few, gpt2, tmp_path / "c", tmp_path / "wc", 0,
                table=pa.concat_tables([table, table.slice(0, 1)]))
    other = table.set_column(2, "phase", pa.array(["other"] * len(few)))
    with pytest.raises(ValueError, match="not one of the recipe's phases"):
        planned(few, gpt2, tmp_path / "d", tmp_path / "wd", 0, table=other)
    assert not (tmp_path / "a" / "manifest.json").exists()  # a failed build publishes nothing
