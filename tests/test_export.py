"""Exports of a dataset version (`curation.stages.export`, `corpus export`) on the README's
main job over the built-in sample: opened by the real `datasets` package and as nanoGPT reads
its files, the same bytes twice, and a takedown honoured without a rebuild."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from curation.config import load_pipeline, load_recipe
from curation.stages.export import ExportResult, ExportSettings, current_version, export_dataset
from curation.storage import LocalStore

RECIPE = "sample"
SMALL_FILES = ExportSettings(rows_per_file=200)  # several hf-parquet files from the sample


def _export(root: Path, pipeline_path: Path, fmt: str, out: Path,
            settings: ExportSettings = SMALL_FILES) -> ExportResult:
    pipeline = load_pipeline(pipeline_path)
    recipe = load_recipe(pipeline_path.parent / "recipes" / f"{RECIPE}.yaml", pipeline)
    return export_dataset(LocalStore(str(root)), RECIPE, recipe, pipeline, fmt, out, settings)


def _shards(root: Path) -> tuple[Path, dict]:
    folder = root / "shards" / current_version(LocalStore(str(root)), RECIPE)
    return folder, json.loads((folder / "manifest.json").read_text())


def _stream_order(folder: Path) -> list[tuple[str, int]]:
    """(doc_id, occurrence) in the order their first tokens appear in the shards."""
    spans = pq.read_table(folder / "spans.parquet").to_pylist()
    seen: dict[tuple[str, int], None] = {}
    for span in sorted(spans, key=lambda s: (s["shard"], s["sequence"], s["start"])):
        seen.setdefault((span["doc_id"], span["occurrence"]), None)
    return list(seen)


def _files(folder: Path) -> dict[str, bytes]:
    return {path.relative_to(folder).as_posix(): path.read_bytes()
            for path in sorted(folder.rglob("*")) if path.is_file()}


def test_hf_parquet_opens_in_datasets_with_lineage_in_stream_order(sample_run, tmp_path,
                                                                   monkeypatch) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    import datasets

    out = tmp_path / "hf"
    result = _export(sample_run.root, sample_run.pipeline_path, "hf-parquet", out)
    folder, manifest = _shards(sample_run.root)
    train = datasets.load_dataset("parquet", data_dir=str(out / "data"),
                                  cache_dir=str(tmp_path / "cache"))["train"]
    assert train.num_rows == result.rows == manifest["totals"]["occurrences"]
    parquet = [entry for entry in result.files if entry["name"].startswith("data/")]
    assert len(parquet) == -(-result.rows // 200) > 1
    assert list(zip(train["doc_id"], train["occurrence"], strict=True)) == _stream_order(folder)
    assert sum(train["token_count"]) == manifest["totals"]["tokens"]
    per_source = {}
    for source, tokens in zip(train["source"], train["token_count"], strict=True):
        per_source[source] = per_source.get(source, 0) + tokens
    assert per_source == manifest["tokens_by_source"]
    # lineage: every web row names its page and snapshot; curated rows have no snapshot
    documents = {row["doc_id"]: row for partition in (sample_run.root / "documents").iterdir()
                 for part in sorted(partition.glob("part-*.parquet"))
                 for row in pq.read_table(part, columns=["doc_id", "url", "snapshot"])
                 .to_pylist()}
    for row in train.select(range(0, train.num_rows, 25)):
        assert (row["url"], row["snapshot"]) == (documents[row["doc_id"]]["url"],
                                                 documents[row["doc_id"]]["snapshot"])
        assert (row["snapshot"] is None) == (row["source"] != "web")
    assert {"main", "anneal"} == set(train["phase"])


def test_an_occurrence_text_is_the_tokens_the_shards_hold(sample_run, tmp_path) -> None:
    from curation.shards import tokenize_batch
    from curation.stages.dataset import load_stored_tokenizer

    out = tmp_path / "hf"
    _export(sample_run.root, sample_run.pipeline_path, "hf-parquet", out)
    folder, manifest = _shards(sample_run.root)
    tokenizer = load_stored_tokenizer(LocalStore(str(sample_run.root)), RECIPE)
    rows = pq.read_table(out / "data" / "train-00000-of-00004.parquet").to_pylist()[:5]
    stream = np.fromfile(folder / "shard-00000.bin", dtype=manifest["dtype"])
    seq_len = manifest["seq_len"]
    spans = pq.read_table(folder / "spans.parquet").to_pylist()
    for row in rows:
        pieces = sorted((s for s in spans if (s["doc_id"], s["occurrence"]) ==
                         (row["doc_id"], row["occurrence"])),
                        key=lambda s: (s["sequence"], s["start"]))
        held = np.concatenate([stream[p["sequence"] * seq_len + p["start"]:
                                      p["sequence"] * seq_len + p["end"]] for p in pieces])
        assert held.tolist() == tokenize_batch([row["text"]], tokenizer)[0].tolist()
        assert held[-1] == manifest["eos_id"]
        assert row["token_count"] == len(held)


def test_nanogpt_files_are_the_shards_tokens_without_padding(sample_run, tmp_path) -> None:
    out = tmp_path / "nanogpt"
    result = _export(sample_run.root, sample_run.pipeline_path, "nanogpt", out,
                     ExportSettings(validation_fraction=0.0))
    folder, manifest = _shards(sample_run.root)
    # nanoGPT's train.py: np.memmap(train.bin, dtype=np.uint16), vocab_size from meta.pkl
    train = np.memmap(out / "train.bin", dtype=np.uint16, mode="r")
    assert pickle.loads((out / "meta.pkl").read_bytes()) == {
        "vocab_size": manifest["tokenizer"]["vocab_size"]}
    tokens = np.concatenate([np.fromfile(folder / f"shard-{n:05d}.bin", dtype=manifest["dtype"])
                             for n in range(len(manifest["shards"]))])
    padding = manifest["totals"]["padding_tokens"]
    assert padding > 0 and (out / "val.bin").stat().st_size == 0
    assert np.array_equal(train, tokens[:len(tokens) - padding])  # concat: the last is padded
    assert result.tokens == len(train) == manifest["totals"]["tokens"]

    held_out = _export(sample_run.root, sample_run.pipeline_path, "nanogpt", tmp_path / "val",
                       ExportSettings(validation_fraction=0.05))
    val = np.memmap(tmp_path / "val" / "val.bin", dtype=np.uint16, mode="r")
    train = np.memmap(tmp_path / "val" / "train.bin", dtype=np.uint16, mode="r")
    assert 0 < len(val) < 0.15 * len(train)
    assert len(val) + len(train) == held_out.tokens == manifest["totals"]["tokens"]


def test_an_export_is_the_same_bytes_twice(sample_run, tmp_path) -> None:
    for fmt in ("hf-parquet", "mds", "nanogpt"):
        first, second = tmp_path / f"{fmt}-1", tmp_path / f"{fmt}-2"
        _export(sample_run.root, sample_run.pipeline_path, fmt, first)
        _export(sample_run.root, sample_run.pipeline_path, fmt, second)
        assert _files(first) == _files(second)
        listed = json.loads((first / "export.json").read_text())["files"]
        assert sorted(entry["name"] for entry in listed) == sorted(
            name for name in _files(first) if name != "export.json")


def test_an_export_honours_a_takedown_issued_after_the_build(sample_run, tmp_path) -> None:
    from curation.takedowns import add_takedowns

    root = tmp_path / "data"
    shutil.copytree(sample_run.root, root)
    shutil.copytree(sample_run.base / "recipes", tmp_path / "recipes")
    pipeline_path = tmp_path / "pipeline.yaml"
    shutil.copyfile(sample_run.pipeline_path, pipeline_path)
    before = _export(root, pipeline_path, "hf-parquet", tmp_path / "before")
    rows = pq.read_table(tmp_path / "before" / "data").to_pylist()
    web = [row for row in rows if row["source"] == "web"]
    url = max(web, key=lambda row: row["token_count"])["url"]
    add_takedowns(LocalStore(str(root)), [url], "test", "2026-11-28T00:00:00Z")

    after = _export(root, pipeline_path, "hf-parquet", tmp_path / "after")
    kept = pq.read_table(tmp_path / "after" / "data").to_pylist()
    assert url not in {row["url"] for row in kept}
    gone = {row["doc_id"] for row in rows} - {row["doc_id"] for row in kept}
    assert gone and after.taken_down.documents >= len(gone)
    assert [r for r in rows if r["doc_id"] not in gone] == kept  # the rest in place
    assert after.taken_down.occurrences == before.rows - after.rows > 0
    assert after.taken_down.tokens == sum(r["token_count"] for r in rows if r["doc_id"] in gone)

    nanogpt = _export(root, pipeline_path, "nanogpt", tmp_path / "nanogpt")
    assert nanogpt.taken_down.tokens == after.taken_down.tokens
    assert nanogpt.tokens == after.tokens
    assert len(np.memmap(tmp_path / "nanogpt" / "train.bin", dtype=np.uint16, mode="r")) == \
        after.tokens


def test_a_version_that_is_not_current_is_refused(sample_run, tmp_path) -> None:
    from curation.stages.export import ExportError, recipe_of

    store = LocalStore(str(sample_run.root))
    assert recipe_of(store, current_version(store, RECIPE), [RECIPE]) == RECIPE
    with pytest.raises(ExportError, match="not the current dataset version"):
        recipe_of(store, "0123456789abcdef", [RECIPE])


def test_corpus_export_writes_a_recipe_version_and_names_a_bad_format(sample_run,
                                                                      tmp_path) -> None:
    from typer.testing import CliRunner

    from corpus_cli.main import app

    common = ["--root", str(sample_run.root), "--pipeline", str(sample_run.pipeline_path)]
    runner = CliRunner()
    result = runner.invoke(app, ["export", RECIPE, "--format", "nanogpt", "--out",
                                 str(tmp_path / "out"), *common])
    assert result.exit_code == 0, result.output
    version = current_version(LocalStore(str(sample_run.root)), RECIPE)
    assert f"{version} ({RECIPE}) as nanogpt" in result.output
    manifest = json.loads((tmp_path / "out" / "export.json").read_text())
    assert (manifest["dataset_version"], manifest["format"]) == (version, "nanogpt")
    bad = runner.invoke(app, ["export", RECIPE, "--format", "parquet", "--out",
                              str(tmp_path / "bad"), *common])
    assert bad.exit_code == 2 and "hf-parquet, mds, nanogpt" in bad.output
    assert not (tmp_path / "bad").exists()


def test_the_opt_in_asset_stores_exports_its_check_accounts_for(sample_run, tmp_path) -> None:
    from dagster import materialize
    from dagster_aws.s3 import S3Resource

    from checks.export import exports_match_shards
    from corpus_assets.dataset import mix, shards
    from corpus_assets.documents import documents
    from corpus_assets.export import exports
    from corpus_assets.lineage import takedowns
    from corpus_assets.scrubbed import scrubbed
    from curation.graph import EXPORTS
    from curation.stages.export import exports_prefix
    from resources import PipelineResource, StorageResource

    root = tmp_path / "data"
    shutil.copytree(sample_run.root, root)
    resources = {"pipeline": PipelineResource(path=str(sample_run.pipeline_path)),
                 "storage": StorageResource(root=str(root), s3=S3Resource())}
    upstream = [asset.to_source_asset() for asset in (mix, shards, takedowns, scrubbed,
                                                      documents)]

    def run(formats: list[str]):
        return materialize([exports, exports_match_shards, *upstream], selection=[EXPORTS],
                           partition_key=RECIPE, instance=sample_run.instance,
                           resources=resources, raise_on_error=False,
                           run_config={"ops": {EXPORTS: {"config": {"formats": formats}}}})

    result = run(["hf-parquet", "nanogpt"])
    assert result.success
    [check] = result.get_asset_check_evaluations()
    assert check.passed and check.metadata["formats"].value == ["hf-parquet", "nanogpt"]
    metadata = result.asset_materializations_for_node(EXPORTS)[0].metadata
    version = current_version(LocalStore(str(root)), RECIPE)
    assert metadata["hf-parquet.rows"].value == _shards(root)[1]["totals"]["occurrences"]
    assert (root / exports_prefix(version, "nanogpt") / "train.bin").is_file()
    (root / exports_prefix(version, "hf-parquet") / "data" /
     "train-00000-of-00001.parquet").unlink()
    [check] = run(["nanogpt"]).get_asset_check_evaluations()
    assert not check.passed and "train-00000-of-00001.parquet" in check.description
    failed = run(["parquet"])
    assert not failed.success


def test_the_card_describes_the_version_and_opens_the_folder_on_the_hub_layout(
        sample_run, tmp_path, monkeypatch) -> None:
    import yaml

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    import datasets

    out = tmp_path / "hf"
    result = _export(sample_run.root, sample_run.pipeline_path, "hf-parquet", out)
    _, front, body = (out / "README.md").read_text(encoding="utf-8").split("---\n", 2)
    meta = yaml.safe_load(front)
    assert meta["configs"] == [{"config_name": "default", "data_files": [
        {"split": "train", "path": "data/train-*"}]}]
    assert meta["size_categories"] == ["n<1K"] and set(meta["language"]) == {"en", "ja", "code"}
    _, manifest = _shards(sample_run.root)
    for source, tokens in manifest["tokens_by_source"].items():
        assert f"| {source} | {tokens:,} |" in body
    report = json.loads((sample_run.root / "reports" / RECIPE / "report.json").read_text())
    contamination = report["contamination"]
    mix = json.loads((sample_run.root / "mix" / RECIPE / "_manifest.json").read_text())
    # a document holding two benchmarks' items counts under each
    assert sum(row["documents_removed"] for row in contamination) >= \
        mix["extra"]["funnel"]["contaminated"] > 0
    for row in contamination:
        assert f"| {row['benchmark']} | {row['items']} | {row['documents']} |" in body
    # the recipe drops contaminated documents: the export's own re-scan finds none
    assert "decontamination scanner: no eval item found" in body
    assert f"takedown list `{result.taken_down.version}`" in body
    # every filter's settings, with the deployment's paths relative to it
    assert "\nheuristics:\n" in body and "\ndedup:\n" in body
    assert str(sample_run.base.resolve()) not in body
    # the Hub layout: `load_dataset` on the folder reads the card's configs
    train = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "cache"))["train"]
    assert train.num_rows == result.rows


def test_mds_is_what_mosaicml_streaming_writes_and_reads_back(sample_run, tmp_path) -> None:
    import subprocess

    from curation.stages.export import MDS_COLUMNS
    from tests.conftest import REPO
    from tests.test_mds import reference_python

    python = reference_python()
    limit = 1 << 16  # several shards from the sample
    _export(sample_run.root, sample_run.pipeline_path, "mds", tmp_path / "mds",
            ExportSettings(mds_size_limit=limit))
    _export(sample_run.root, sample_run.pipeline_path, "hf-parquet", tmp_path / "hf")
    rows = [{key: "" if value is None else value for key, value in row.items()}
            for row in pq.read_table(tmp_path / "hf" / "data").to_pylist()]
    (tmp_path / "samples.json").write_text(json.dumps(rows))
    spec = {"columns": MDS_COLUMNS, "cases": [{
        "samples": str(tmp_path / "samples.json"), "size_limit": limit,
        "ours": str(tmp_path / "mds" / "mds"), "theirs": str(tmp_path / "theirs")}]}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    subprocess.run([python, str(REPO / "tests" / "mds_reference.py"), str(tmp_path / "spec.json"),
                    str(tmp_path / "read.json")], check=True, timeout=120, cwd=tmp_path)
    assert json.loads((tmp_path / "read.json").read_text())["reads"][0] == rows
    ours = _files(tmp_path / "mds" / "mds")
    assert len(ours) > 2 and ours == _files(tmp_path / "theirs")
