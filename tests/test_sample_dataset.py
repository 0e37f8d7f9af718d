"""The dataset assets (tokenizer, mix, shards) on the built-in sample: byte-identical rebuilds
whatever the worker count, Megatron-readable shards, and a recipe change that recomputes
nothing upstream of the mix."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from dagster import AssetKey

from corpus_assets.definitions import defs
from corpus_assets.main_job import main_run_config
from curation.config import TokenizerSpec, load_pipeline, load_recipe
from curation.loader import ShardDataset
from curation.partition import PartitionLayout
from curation.shard_integrity import verify_shards
from curation.shards import BuildInfo, ShardSettings, build_shards
from curation.stages.dataset import (
    build_tokenizer,
    load_stored_tokenizer,
    ordered_occurrences,
    read_occurrences,
)
from curation.storage import LocalStore
from partitions import RECIPE_PARTITIONS_NAME
from tests.test_shards import require_module

UPSTREAM = ["documents", "language", "heuristics", "url_dedup", "exact_dedup",
            "dedup_clusters", "line_dedup", "scrubbed", "quality_scores", "decontaminated",
            "cross_dedup", "quality_classifier", "eval_suite"]


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def dataset(sample_run) -> dict:
    store = LocalStore(str(sample_run.root))
    recipe = load_recipe(sample_run.base / "recipes" / "sample.yaml")
    version = PartitionLayout(store, "shards", "sample").complete_manifest().version
    return {"store": store, "recipe": recipe, "folder": Path(store.uri(f"shards/{version}")),
            "version": version}


def test_one_and_two_workers_build_byte_identical_shards(dataset, tmp_path: Path) -> None:
    store, recipe = dataset["store"], dataset["recipe"]
    occurrences = read_occurrences(store, "sample")
    tokenizer = load_stored_tokenizer(store, "sample")
    manifest = json.loads((dataset["folder"] / "manifest.json").read_text())
    info = BuildInfo(manifest["version"], manifest["recipe_hash"], manifest["pipeline_hash"],
                     manifest["inputs"])
    builds = {}
    for threads in (1, 2):
        out = tmp_path / f"threads-{threads}"
        build_shards(ordered_occurrences(store, occurrences, recipe), tokenizer, out,
                     ShardSettings.from_recipe(recipe, threads=threads), info)
        builds[threads] = _digests(out)
    assert builds[1] == builds[2] == _digests(dataset["folder"])
    assert {"manifest.json", "spans.parquet", "shard-00000.bin", "shard-00000.idx"} <= set(
        builds[1])


def test_the_published_shards_pass_integrity_and_load(dataset) -> None:
    report = verify_shards(dataset["folder"])
    assert report.ok, report.summary()
    loaded = ShardDataset(dataset["folder"])
    manifest = json.loads((dataset["folder"] / "manifest.json").read_text())
    assert len(loaded) == manifest["totals"]["sequences"] > 100
    assert manifest["tokens_by_phase"]["main"] > manifest["tokens_by_phase"]["anneal"] > 0
    assert set(manifest["tokens_by_source"]) == {"web", "reference", "code"}


def test_megatron_core_reads_the_sample_shards(dataset) -> None:
    require_module("torch")
    require_module("megatron.core")
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    loaded = ShardDataset(dataset["folder"])
    reader = IndexedDataset(str(dataset["folder"] / "shard-00000"))
    assert len(reader) > 0
    for i in range(len(reader)):
        assert reader[i].tolist() == loaded[i].tolist()


def test_a_recipe_change_recomputes_only_the_dataset_assets(sample_run, dataset) -> None:
    recipes = sample_run.base / "recipes"
    changed = (recipes / "sample.yaml").read_text().replace(
        "weights: {web: 0.7, reference: 0.15, code: 0.15}",
        "weights: {web: 0.6, reference: 0.25, code: 0.15}").replace(
        "name: sample\n", "name: sample-b\n")  # a recipe's name is its file's name
    assert "0.6" in changed and "name: sample-b\n" in changed
    (recipes / "sample-b.yaml").write_text(changed)
    instance = sample_run.instance
    instance.add_dynamic_partitions(RECIPE_PARTITIONS_NAME, ["sample-b"])

    def materializations() -> dict[str, int]:
        return {asset: len(instance.fetch_materializations(AssetKey(asset), limit=1000).records)
                for asset in UPSTREAM}

    before = materializations()
    result = defs.resolve_job_def("dataset").execute_in_process(
        partition_key="sample-b", instance=instance, raise_on_error=False,
        run_config=main_run_config(str(sample_run.pipeline_path), str(sample_run.root), 2))
    assert result.success
    assert materializations() == before  # nothing upstream of the mix ran again
    store = dataset["store"]
    # The tokenizer is trained on the sources, not the mix: the weights leave it unchanged.
    assert load_stored_tokenizer(store, "sample-b").sha256 == \
        load_stored_tokenizer(store, "sample").sha256
    other = PartitionLayout(store, "shards", "sample-b").complete_manifest().version
    assert other != dataset["version"]
    web = {name: json.loads(Path(store.uri(f"shards/{v}/manifest.json")).read_text())
           ["tokens_by_source"] for name, v in (("a", dataset["version"]), ("b", other))}
    assert web["b"]["reference"] / sum(web["b"].values()) > \
        web["a"]["reference"] / sum(web["a"].values())
    shutil.rmtree(Path(store.uri(f"shards/{other}")))
    # The session's instance goes on to other tests (the UI's partition counts among them).
    instance.delete_dynamic_partition(RECIPE_PARTITIONS_NAME, "sample-b")


@pytest.mark.parametrize(("name", "dtype"), [("gpt2", "uint16"), ("olmo2-dolma2", "int32")])
def test_a_pinned_tokenizer_is_stored_under_its_content_hash(sample_run, dataset, shared_data,
                                                             name, dtype) -> None:
    path = shared_data / "tokenizers" / name / "tokenizer.json"
    recipe = dataset["recipe"].model_copy(update={"tokenizer": TokenizerSpec(path=str(path))})
    pipeline = load_pipeline(sample_run.pipeline_path)
    build = build_tokenizer(dataset["store"], pipeline, f"pinned-{name}", recipe)
    assert (build.how, build.rebuilt) == ("pinned", True)
    assert build.tokenizer.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert np.dtype(build.tokenizer.dtype).name == dtype
    again = build_tokenizer(dataset["store"], pipeline, f"pinned-{name}", recipe)
    assert not again.rebuilt and again.tokenizer.sha256 == build.tokenizer.sha256
