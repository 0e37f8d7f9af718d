"""What a takedown leaves behind (issue 18, item 6): no text of a taken-down document in a
sample, a report or metadata written after it; `purge` rewrites the reports, says or does the
rebuild it makes necessary, and lineage still answers for every dataset version on disk. On the
hand-built store of `test_catalog.py` and on a copy of the built-in sample through the CLI."""

from __future__ import annotations

import json
import shutil
import types
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from test_catalog import A1, A2, A3, A4, A5, build_store
from typer.testing import CliRunner

from corpus_cli.main import app
from curation.catalog import Catalog, refresh_catalog
from curation.config import load_pipeline, load_recipe
from curation.partition import PartitionLayout
from curation.report import build_report
from curation.stats import StageStats
from curation.storage import LocalStore
from curation.takedowns import (
    TakedownRequest,
    add_takedowns,
    current_takedowns,
    expand_takedowns,
    load_tombstones,
    purge,
    purged_documents,
    save_tombstones,
)
from curation.tasks import TaskResult, pick_samples

WHEN = "2026-11-25T00:00:00Z"
runner = CliRunner()


# --- the hand-built store ----------------------------------------------------------------------


def _results(store: LocalStore, asset: str, partition: str) -> list[TaskResult]:
    """One task result per stored part, every row a sample candidate (as a stage hands them)."""
    manifest = PartitionLayout(store, asset, partition).complete_manifest()
    results = []
    for index, part in enumerate(manifest.parts):
        ids = pq.read_table(store.uri(part.key), columns=["doc_id"])["doc_id"].to_pylist()
        results.append(TaskResult(index, {"part": part}, StageStats(), ids))
    return results


@pytest.mark.parametrize("asset", ["documents", "scrubbed"])
def test_spot_check_samples_written_after_a_takedown_leave_it_out(tmp_path, asset):
    store = build_store(tmp_path / "data")
    # Before any rebuild (no tombstones yet): the list's URL matches A1 and A2 directly.
    add_takedowns(store, [TakedownRequest("https://www.example.com/a", "opt-out", "url")],
                  "legal", WHEN)
    path = f"samples/{asset}/CC-A.jsonl"
    rows = pick_samples(store, _results(store, asset, "CC-A"), 10, path, partition="CC-A")
    written = [json.loads(line) for line in store.read_bytes(path).decode().splitlines()]
    assert {row["doc_id"] for row in rows} == {row["doc_id"] for row in written} == {A3, A4, A5}
    # After a rebuild the stored expansion (here: A3 and its copy A4) is left out too.
    save_tombstones(store, current_takedowns(store), {A1, A2, A3, A4})
    rows = pick_samples(store, _results(store, asset, "CC-A"), 10, path, partition="CC-A")
    assert [row["doc_id"] for row in rows] == [A5]


def test_tombstones_of_one_list_version_add_up_across_recipes(tmp_path):
    store = build_store(tmp_path / "data")
    takedowns = add_takedowns(store, [TakedownRequest("example.com", "spam", "domain")],
                              "legal", WHEN).takedowns
    save_tombstones(store, takedowns, {A1, A2})  # one recipe's partitions
    save_tombstones(store, takedowns, {A3})  # another recipe's
    assert load_tombstones(store).doc_ids == {A1, A2, A3}


def test_after_purge_lineage_still_finds_the_versions_on_disk(tmp_path):
    store = build_store(tmp_path / "data")
    # A5 (https://other.net/x) is only in v0, an older dataset version still on disk.
    takedowns = add_takedowns(store, [TakedownRequest("https://other.net/x", "opt-out", "url")],
                              "legal", WHEN).takedowns
    gone = expand_takedowns(store, takedowns)
    assert gone == {A5}
    save_tombstones(store, takedowns, gone)
    report = purge(store, gone, who="legal", when=WHEN)
    assert report.needs_rebuild
    ids = PartitionLayout(store, "documents", "CC-A").read_table(["doc_id"])["doc_id"]
    assert A5 not in ids.to_pylist()
    # What lineage keeps of it holds no text, and a rebuild still finds what it took down.
    kept = purged_documents(store)
    assert kept["doc_id"].to_pylist() == [A5] and "text" not in kept.column_names
    assert not any(f"text of {A5}".encode() in path.read_bytes()
                   for path in (tmp_path / "data" / "takedowns").rglob("*") if path.is_file())
    assert expand_takedowns(store, takedowns) == {A5}

    refresh_catalog(store, tmp_path / "catalog.duckdb")
    with Catalog(tmp_path / "catalog.duckdb") as catalog:
        [location] = catalog.find_url("https://other.net/x")
        assert location.doc_id == A5 and location.dataset_versions == ["v0"]
        assert location.taken_down and not any(span.current for span in location.spans)
    result = runner.invoke(app, ["lineage", "url", "https://other.net/x", "--root",
                                 str(tmp_path / "data"), "--catalog",
                                 str(tmp_path / "catalog.duckdb")])
    assert result.exit_code == 0, result.output
    assert f"({A5}," in result.output
    assert "in v0 (older version, still on disk)" in result.output


def test_purge_without_rebuild_says_what_to_rebuild_and_how(tmp_path):
    store = build_store(tmp_path / "data")
    takedowns = add_takedowns(store, [TakedownRequest("https://other.net/x", "opt-out", "url")],
                              "legal", WHEN).takedowns
    save_tombstones(store, takedowns, expand_takedowns(store, takedowns))
    root = str(tmp_path / "data")
    result = runner.invoke(app, ["takedown", "purge", "--who", "legal", "--no-rebuild",
                                 "--root", root])
    assert result.exit_code == 0, result.output
    assert "the purge changed documents/CC-A, scrubbed/CC-A" in result.output
    assert "stale until rebuilt" in result.output
    assert f"corpus takedown rebuild --who legal --root {root} --pipeline pipeline.yaml" \
        in result.output
    assert "older dataset versions still hold their tokens: v0" in result.output


# --- the built-in sample, through the CLI --------------------------------------------------------


def _texts(store: LocalStore, doc_ids: set[str]) -> dict[str, str]:
    """doc_id -> the first 40 characters (whitespace flattened) of its extracted text."""
    out = {}
    for partition in ("SAMPLE-01", "SAMPLE-02", "source:code", "source:reference"):
        table = PartitionLayout(store, "documents", partition).read_table(["doc_id", "text"])
        table = table.filter(pc.is_in(table["doc_id"], pa.array(sorted(doc_ids))))
        for doc_id, text in zip(table["doc_id"].to_pylist(), table["text"].to_pylist(),
                                strict=True):
            out[doc_id] = " ".join(text.split())[:40]
    return out


def _sampled_ids(report_json: Path) -> set[str]:
    data = json.loads(report_json.read_text())
    return {item["doc_id"] for stage, picks in data["samples"].items() if stage != "rejects"
            for items in picks.values() for item in items}


@pytest.fixture(scope="module")
def taken_down(sample_run, tmp_path_factory):
    """A deployment folder copied from the sample; one selected web page the report samples
    is taken down with `corpus takedown add` (which rebuilds every recipe's dataset)."""
    deploy = tmp_path_factory.mktemp("trail")
    shutil.copyfile(sample_run.pipeline_path, deploy / "pipeline.yaml")
    shutil.copytree(sample_run.base / "recipes", deploy / "recipes")
    shutil.copytree(sample_run.root, deploy / "data")
    store = LocalStore(str(deploy / "data"))
    old = PartitionLayout(store, "shards", "sample").complete_manifest().version
    in_shards = set(pq.read_table(deploy / "data" / "shards" / old / "spans.parquet")
                    ["doc_id"].to_pylist())
    report_json = deploy / "data" / "reports" / "sample" / "report.json"
    data = json.loads(report_json.read_text())
    victim = next(item for stage, picks in data["samples"].items() if stage != "rejects"
                  for item in picks["kept"] if item["doc_id"] in in_shards
                  and item["partition"].startswith("SAMPLE-"))
    # The report as it was: a recipe whose rebuild fails keeps such a report on disk.
    shutil.copytree(report_json.parent, deploy / "data" / "reports" / "before")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(deploy)
        patch.setenv("DAGSTER_HOME", str(deploy / "home"))
        added = runner.invoke(app, ["takedown", "add", "--url", victim["url"], "--reason",
                                    "opt-out", "--who", "legal"])
        assert added.exit_code == 0, added.output
        gone = set(load_tombstones(store).doc_ids)
        texts = _texts(store, gone)
        purged = runner.invoke(app, ["takedown", "purge", "--who", "legal"])
    yield types.SimpleNamespace(deploy=deploy, store=store, victim=victim, old=old, gone=gone,
                                texts=texts, purged=purged, sample_run=sample_run)


def test_the_report_rebuilt_with_a_takedown_shows_none_of_its_text(taken_down):
    assert taken_down.victim["doc_id"] in taken_down.gone
    reports = taken_down.deploy / "data" / "reports"
    # Read before the purge rewrote anything: the rebuild's own report (`takedown add`).
    data = json.loads((reports / "sample" / "report.json").read_text())
    assert data["summary"]["taken_down_documents"] == len(taken_down.gone)
    assert not _sampled_ids(reports / "sample" / "report.json") & taken_down.gone
    page = (reports / "sample" / "report.html").read_text()
    assert not any(doc_id in page for doc_id in taken_down.gone)
    assert not any(text in page for text in taken_down.texts.values())
    assert "their text is never shown" in page


def test_purge_rewrites_old_reports_and_rebuilds(taken_down):
    result = taken_down.purged
    assert result.exit_code == 0, result.output
    assert "rebuilt in" in result.output and taken_down.old in result.output
    before = taken_down.deploy / "data" / "reports" / "before"
    assert not _sampled_ids(before / "report.json") & taken_down.gone
    page = (before / "report.html").read_text()
    assert not any(text in page for text in taken_down.texts.values())
    assert '<div class="doc kept">' in page  # the other samples stay
    # The purge made every mix stale; the rebuild leaves a report that can be made again.
    pipeline = load_pipeline(taken_down.deploy / "pipeline.yaml")
    recipe = load_recipe(taken_down.deploy / "recipes" / "sample.yaml", pipeline)
    built = build_report(taken_down.store, recipe)
    left = sum(PartitionLayout(taken_down.store, "documents", p).complete_manifest().rows
               for p in built.data["partitions"])
    assert built.data["summary"]["documents"] == left
    for path in (taken_down.deploy / "data" / "samples").rglob("*.jsonl"):
        assert not {json.loads(line)["doc_id"] for line in path.read_text().splitlines()
                    if line.strip()} & taken_down.gone


def test_lineage_url_after_purge_names_the_old_version(taken_down):
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(taken_down.deploy)
        result = runner.invoke(app, ["lineage", "url", taken_down.victim["url"]])
    assert result.exit_code == 0, result.output
    line = next(line for line in result.output.splitlines()
                if f"({taken_down.victim['doc_id']}," in line)
    assert f"in {taken_down.old} (" in line and "older version, still on disk" in line
    assert "taken down" in line
