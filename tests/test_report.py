"""The funnel report: every section on the built-in sample, numbers that add up, a
self-contained page, the `report` asset's metadata, and the CLI (`corpus report`, progress)."""

from __future__ import annotations

import json
import re
import types
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from dagster import AssetKey
from typer.testing import CliRunner

from corpus_cli.main import _print_languages, app
from curation.config import SOURCE_PREFIX, load_pipeline, load_recipe
from curation.graph import (
    ALL,
    CROSS_DEDUP,
    CURATED_DEDUP,
    DECONTAMINATED,
    DOCUMENTS,
    MIX,
    PARTITION_DEDUP,
)
from curation.loader import served_phases
from curation.mix import RULES, duplicate_groups
from curation.partition import PartitionLayout
from curation.report import (
    BEFORE_QUALITY,
    DOCUMENT_STAGES,
    DUPLICATE_BUCKETS,
    EDITS,
    INGEST,
    PIPELINE_STAGES,
    PLOTS,
    PREVIEW_CHARS,
    STAGES,
    TOP_SITES,
    ReportError,
    _attribute,
    _funnel_rows,
    _Partition,
    build_report,
    report_key,
)
from curation.stages.dataset import curated_sources
from curation.storage import LocalStore

PARTITIONS = ["SAMPLE-01", "SAMPLE-02", "source:code", "source:reference"]  # the pipeline's
RECIPE_PARTITIONS = ["SAMPLE-01", "SAMPLE-02", "source:reference", "source:code"]
SECTIONS = ("summary", "funnel", "removals", "languages", "quality", "clusters",
            "duplicate_removals", "served_phases", "mixture", "samples")


@pytest.fixture(scope="module")
def built(sample_run):
    pipeline = load_pipeline(sample_run.pipeline_path)
    recipe = load_recipe(sample_run.base / "recipes" / "sample.yaml", pipeline)
    store = LocalStore(str(sample_run.root))
    curated = curated_sources(pipeline, recipe)
    return types.SimpleNamespace(store=store, recipe=recipe, curated=curated,
                                 report=build_report(store, recipe))


def test_the_report_has_every_section(built) -> None:
    data = built.report.data
    assert set(SECTIONS) <= set(data)
    assert data["partitions"] == RECIPE_PARTITIONS
    assert list(data["funnel"]["partitions"]) == RECIPE_PARTITIONS
    for rows in (data["funnel"]["total"], *data["funnel"]["partitions"].values()):
        assert [row["stage"] for row in rows] == list(STAGES)
    assert {row["language"] for row in data["languages"]} >= {"en", "de", "fr", "es", "ja"}
    # Japanese pages are judged by their own rules (curation/languages/ja.yaml): kept about as
    # often as English ones, and the recipe selects both.
    for row in data["languages"]:
        assert row["heuristics_drop_rate"] == row["heuristics_dropped"] / row["documents"]
    japanese = [r for r in data["languages"] if r["language"] == "ja"]
    assert japanese and all(r["heuristics_drop_rate"] < 0.3 and r["selected"] for r in japanese)
    quality = data["quality"]
    assert quality["top_fraction"] == 0.5 and set(quality["cutoffs"]) == {"en", "ja"}

    assert sum(map(sum, quality["histogram"].values())) == quality["documents"] > 0
    assert set(data["clusters"]) == {"url_dedup", "exact_dedup", "dedup_clusters",
                                     "cross_dedup"}
    assert all(c["duplicates"] > 0 for c in data["clusters"].values())
    shares = data["mixture"]["shares"]
    assert {(r["phase"], r["source"]) for r in shares} == {
        (phase, source) for phase in ("main", "anneal") for source in ("web", "reference", "code")}
    assert sum(data["mixture"]["tokens_by_source"].values()) == data["summary"]["shard_tokens"]
    samples = data["samples"]
    assert samples["rejects"]
    for stage in DOCUMENT_STAGES:
        assert len(samples[stage]["kept"]) == 3  # the sample keeps enough at every stage
        for item in samples[stage]["kept"] + samples[stage]["removed"]:
            assert len(item["text"]) <= PREVIEW_CHARS + 1
    # stages that dropped something show what they dropped, with the reason
    funnel = {row["stage"]: row for row in data["funnel"]["total"]}
    for stage in DOCUMENT_STAGES:
        removed = samples[stage]["removed"]
        assert len(removed) == min(3, funnel[stage]["dropped"])
        assert all(item["reason"] for item in removed)
    assert set(built.report.images) == set(PLOTS)
    assert all(png.startswith(b"\x89PNG") for png in built.report.images.values())
    page = built.report.html
    for anchor in ("funnel", "removals", "languages", "quality", "clusters", "mixture",
                   "phases", "samples"):
        assert f'id="{anchor}"' in page
    assert page.count("data:image/png;base64,") == len(PLOTS)


def _check_rows(rows: list[dict]) -> None:
    for row in rows:
        assert row["documents_in"] == row["dropped"] + row["documents_out"], row
        if row["tokens_in"] is not None:
            assert row["tokens_in"] == row["tokens_dropped"] + row["tokens_out"], row
    for before, after in zip(rows, rows[1:], strict=False):
        assert after["documents_in"] == before["documents_out"]
        if after["stage"] != EDITS and before["stage"] != INGEST:
            assert after["tokens_in"] == before["tokens_out"]
    assert rows[1]["tokens_in"] == rows[0]["tokens_out"]


def test_the_funnel_adds_up(built, sample_run) -> None:
    data, store = built.report.data, built.store
    for partition, rows in data["funnel"]["partitions"].items():
        _check_rows(rows)
        documents = PartitionLayout(store, "documents", partition).complete_manifest()
        assert rows[0]["documents_out"] == documents.rows
        stats = documents.extra["stats"]
        assert rows[0]["documents_in"] == stats["candidates"]
        assert rows[0]["dropped"] == sum(stats["rejects"].values())
        language = PartitionLayout(store, "language", partition).read_table(name="decisions")
        assert rows[1]["flagged"] == len(set(language["doc_id"].to_pylist()))
    total = data["funnel"]["total"]
    _check_rows(total)
    for index, row in enumerate(total):
        for column in ("documents_in", "dropped", "documents_out", "flagged"):
            assert row[column] == sum(rows[index][column]
                                      for rows in data["funnel"]["partitions"].values())
    # documents in = kept + removed per reason, at every stage
    for row in total:
        removed = sum(r["dropped"] for r in data["removals"] if r["stage"] == row["stage"])
        assert removed == row["dropped"], row["stage"]
        tokens = sum(r["tokens_dropped"] for r in data["removals"]
                     if r["stage"] == row["stage"])
        if row["stage"] not in (INGEST, EDITS):
            assert tokens == row["tokens_dropped"], row["stage"]
    # the funnel ends with the mix's selection and its token pool
    mix = PartitionLayout(store, "mix", "sample").complete_manifest()
    kept = sum(PartitionLayout(store, "mix", "sample").read_table(
        ["kept"], name="decisions")["kept"].to_pylist())
    assert total[-1]["documents_out"] == kept == data["summary"]["documents_selected"]
    assert total[0]["documents_out"] == mix.extra["candidates"]
    assert sum(row["dropped"] for row in total if row["stage"] in DOCUMENT_STAGES) == \
        mix.extra["candidates"] - kept
    main = [r for r in data["mixture"]["shares"] if r["phase"] == "main"]
    assert total[-1]["tokens_out"] == sum(r["available_tokens"] for r in main)
    # a selection rule drops at most what the mix's own funnel counts for it (earlier pipeline
    # stages take their share first)
    by_stage = {row["stage"]: row for row in total}
    for rule in RULES:
        assert by_stage[f"selection.{rule}"]["dropped"] <= mix.extra["funnel"][rule]
    assert by_stage[DOCUMENT_STAGES[-1]]["dropped"] <= mix.extra.get("taken_down_documents", 0)
    assert data["summary"]["occurrences"] == mix.rows


def _recipe_groups(store: LocalStore, curated: list[str], doc_ids: pa.Array) -> dict[str, int]:
    """doc_id -> the size of its duplicate group among `doc_ids`, recomputed in memory from
    every stored cluster table the mix links (a curated partition: exact duplicates only)."""
    memberships = [PartitionLayout(store, asset, partition).read_table(["doc_id", "cluster_id"],
                                                                       name="part")
                   for partition in PARTITIONS for asset in PARTITION_DEDUP
                   if partition.removeprefix(SOURCE_PREFIX) not in curated
                   or asset == CURATED_DEDUP]
    memberships.append(PartitionLayout(store, CROSS_DEDUP, ALL).read_table(
        ["doc_id", "cluster_id"], name="part"))
    groups = duplicate_groups(doc_ids, memberships)["group_id"].to_pylist()
    sizes = {group: groups.count(group) for group in set(groups)}
    return {doc: sizes[group] for doc, group in zip(doc_ids.to_pylist(), groups, strict=True)}


def test_duplicate_removals_per_cluster_size_match_the_mix(built) -> None:
    """Per size bucket, the documents the mix's `duplicate` rule removed and their tokens,
    recomputed from the stored decisions, the stored clusters and the documents' text."""
    store, data = built.store, built.report.data
    layout = PartitionLayout(store, "mix", "sample")
    decisions = layout.read_table(["doc_id", "partition", "rule", "kept_doc_id"],
                                  name="decisions")
    size = _recipe_groups(store, built.curated, decisions["doc_id"].combine_chunks())
    rates = layout.complete_manifest().extra["bytes_per_token"]
    removed = decisions.filter(pc.equal(decisions["rule"], "duplicate")).to_pylist()
    assert len(removed) == layout.complete_manifest().extra["funnel"]["duplicate"] > 0
    tokens: dict[str, int] = {}
    for partition in PARTITIONS:
        documents = PartitionLayout(store, "documents", partition).read_table(
            ["doc_id", "source", "text"], name="part").to_pylist()
        tokens |= {d["doc_id"]: max(1, int(np.rint(len(d["text"].encode()) / rates.get(
            d["source"], 4.0)))) for d in documents}
    expected = {bucket: [0, 0] for bucket in DUPLICATE_BUCKETS}
    for row in removed:
        assert size[row["doc_id"]] == size[row["kept_doc_id"]] >= 2  # the same group
        bucket = next(b for b in DUPLICATE_BUCKETS
                      if b[0] <= size[row["doc_id"]] <= (b[1] or size[row["doc_id"]]))
        expected[bucket][0] += 1
        expected[bucket][1] += tokens[row["doc_id"]]
    rows = data["duplicate_removals"]
    assert [r["bucket"] for r in rows] == ["2", "3-4", "5-10", "11-100", "101+"]
    assert {(r["min_size"], r["max_size"]): [r["documents"], r["tokens"]] for r in rows} == \
        expected
    assert sum(1 for r in rows if r["documents"]) >= 2  # the sample has groups of several sizes
    page = built.report.html
    assert "Removed by the recipe's duplicate rule" in page


def test_the_quality_histogram_counts_duplicates_before_the_cut(built) -> None:
    """Duplicate precedes quality in the mix: a duplicate never counts as above the cutoff."""
    assert "duplicate" in BEFORE_QUALITY and "quality" not in BEFORE_QUALITY
    assert BEFORE_QUALITY == set(RULES[:RULES.index("quality")])
    store, quality = built.store, built.report.data["quality"]
    decisions = PartitionLayout(store, "mix", "sample").read_table(["doc_id", "rule"],
                                                                   name="decisions")
    rule = dict(zip(decisions["doc_id"].to_pylist(), decisions["rule"].to_pylist(),
                    strict=True))
    scored = []
    for partition in PARTITIONS:
        layout = PartitionLayout(store, "quality_scores", partition)
        if layout.read_manifest() is None:
            continue
        scores = layout.read_table(["doc_id"], name="part")["doc_id"].to_pylist()
        documents = PartitionLayout(store, "documents", partition).read_table(
            ["doc_id", "source"], name="part").to_pylist()
        web = {d["doc_id"] for d in documents if d["source"] == "web"}
        scored += [doc for doc in scores if doc in web]
    above = sum(1 for doc in scored if rule[doc] not in BEFORE_QUALITY | {"quality"})
    assert sum(quality["histogram"]["above the cutoff"]) == above
    assert sum(quality["histogram"]["removed before the cutoff"]) >= sum(
        1 for doc in scored if rule[doc] == "duplicate") > 0


def test_the_phase_order_is_what_the_loader_serves(built) -> None:
    store, data = built.store, built.report.data
    prefix = PartitionLayout(store, "shards", "sample").complete_manifest().extra["prefix"]
    manifest = json.loads(store.read_bytes(f"{prefix}/manifest.json"))
    served = data["served_phases"]
    assert served["shuffle"] == manifest["shuffle"] == "within_phase"
    assert [(r["phase"], r["first_sequence"], r["end_sequence"], r["tokens"])
            for r in served["phases"]] == [tuple(p) for p in served_phases(manifest)]
    assert sum(r["tokens"] for r in served["phases"]) == manifest["totals"]["tokens"] > 0
    assert served["phases"][0]["phase"] == "main" and served["phases"][-1]["phase"] == "anneal"
    assert served["phases"][-1]["end_sequence"] == manifest["totals"]["sequences"]
    assert 'id="phases"' in built.report.html


def test_attribution_counts_a_recipe_override_as_kept() -> None:
    """First failing stage wins; a flagged document the recipe selects is kept, not dropped;
    a takedown comes last."""
    n = 6
    flags = {f"flag.{stage}": pa.array([None] * n, pa.string()) for stage, _ in PIPELINE_STAGES}
    flags["flag.language"] = pa.array(["low", "low", None, None, None, None])
    flags["flag.heuristics"] = pa.array(["rep", None, "rep", None, None, None])
    flags["flag.decontamination"] = pa.array([None, None, None, "hit", None, None])
    frame = pa.table({
        "doc_id": list("abcdef"), "source": ["web"] * n, "language": ["en"] * n,
        **flags,
        "rule": ["language", "selected", "heuristics", "selected", "quality", "takedown"],
        "tokens": pa.array([10, 20, 30, 40, 50, 60], pa.int64()),
        "final_tokens": pa.array([9, 18, 27, 36, 45, 54], pa.int64()),
    })
    stage, reason = _attribute(frame)
    assert stage.tolist() == ["language", "", "heuristics", "", "selection.quality",
                              "selection.takedown"]
    assert reason.tolist() == ["low", "", "rep", "", "quality", "takedown"]
    rows = {r["stage"]: r for r in _funnel_rows(
        _Partition("p", frame, stage, reason),
        {"stage": INGEST, "documents_in": 8, "dropped": 2, "documents_out": n,
         "tokens_in": None, "tokens_dropped": None, "tokens_out": None, "flagged": 2,
         "kept_by_recipe": 0})}
    language = rows["language"]
    assert (language["documents_in"], language["dropped"], language["documents_out"]) == (6, 1, 5)
    assert (language["flagged"], language["kept_by_recipe"]) == (2, 1)
    assert (language["tokens_in"], language["tokens_dropped"]) == (210, 10)
    assert rows["heuristics"]["flagged"] == 2 and rows["heuristics"]["dropped"] == 1
    assert rows["decontamination"]["kept_by_recipe"] == 1
    assert rows["selection.quality"]["dropped"] == 1
    assert rows["selection.takedown"]["dropped"] == 1
    assert DOCUMENT_STAGES[-1] == "selection.takedown"
    assert rows[DOCUMENT_STAGES[-1]]["documents_out"] == 2
    assert rows[EDITS]["documents_out"] == 2
    assert rows[EDITS]["tokens_in"] == 60 and rows[EDITS]["tokens_out"] == 54


def test_the_page_is_self_contained(built) -> None:
    page = built.report.html
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", page, re.I)
    assert not re.search(r"<(?:script|link|iframe)\b", page, re.I)
    assert "@import" not in page and "url(" not in page
    assert all(src.startswith("data:image/png;base64,")
               for src in re.findall(r'src="([^"]*)"', page))


def test_the_asset_materializes_with_metadata(sample_run) -> None:
    result = sample_run.results[("dataset", "sample")]
    events = [e.event_specific_data.materialization
              for e in result.get_asset_materialization_events()
              if e.event_specific_data.materialization.asset_key == AssetKey("report")]
    assert len(events) == 1
    metadata = {key: value.value for key, value in events[0].metadata.items()}
    for key in ("funnel", "removals_by_reason", "mixture", "duplicates_by_cluster_size",
                "served_phases"):
        assert metadata[key].startswith("| ")
    assert "selection.quality" in metadata["funnel"]
    assert metadata["documents_in"] > metadata["documents_out"] > 0
    assert metadata["shard_tokens"] > 0 and metadata["selected_tokens_est"] > 0
    assert metadata["funnel_plot"].startswith("![funnel](data:image/png;base64,")
    assert metadata["report_path"].endswith("reports/sample/report.html")
    assert metadata["report_url"].startswith("file://")
    folder = sample_run.root / "reports" / "sample"
    assert (sample_run.root / report_key("sample")).read_text().startswith("<!DOCTYPE html>")
    assert {p.name for p in folder.glob("*.png")} == {f"{name}.png" for name in PLOTS}


def test_a_missing_mix_is_a_clear_error(built, tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"mix\[sample\] is not complete"):
        build_report(LocalStore(str(tmp_path)), built.recipe)


runner = CliRunner()


def test_cli_report_writes_the_page(sample_run, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = runner.invoke(app, ["report", "--recipe", "sample", "--root",
                                 str(sample_run.root), "--out", str(out), "--pipeline",
                                 str(sample_run.pipeline_path)])
    assert result.exit_code == 0, result.output
    assert f"written: {out.resolve()}" in result.output
    assert "selected" in result.output
    assert out.read_text().startswith("<!DOCTYPE html>")
    missing = runner.invoke(app, ["report", "--recipe", "nope", "--root", str(sample_run.root),
                                  "--pipeline", str(sample_run.pipeline_path)])
    assert missing.exit_code == 2


def test_help_lists_every_command_with_a_description() -> None:
    result = runner.invoke(app, ["--help"], terminal_width=160)
    assert result.exit_code == 0
    names = [c.name for c in app.registered_commands] + [g.name for g in app.registered_groups]
    assert "report" in names
    for name in names:
        line = next((ln for ln in result.output.splitlines() if f" {name} " in ln), "")
        assert re.search(rf"\b{name}\s+\S", line), f"{name} has no description"


def test_progress_counts_the_runs(sample_run, monkeypatch, capsys, tmp_path: Path) -> None:
    """`sample run` and `backfill` show runs done / total with elapsed and remaining time; the
    plan matches the runs `run_main_jobs` made on the sample."""
    import corpus_assets.main_job as main_job
    from corpus_cli import main as cli

    assert cli._run_plan(PARTITIONS, ["sample"]) == [
        f"{job}[{partition or 'all'}]" for job, partition in sample_run.results]
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))

    def fake(instance, partitions, run_config, on_run=None, recipes=None,  # noqa: ANN001, ANN202
             **options):  # noqa: ANN003 - jobs, skip_up_to_date
        runs = []
        for label in cli._run_plan(partitions, recipes):
            job, partition = label[:-1].split("[")
            result = types.SimpleNamespace(
                success=True, run_id="0123456789", get_asset_check_evaluations=list,
                get_asset_materialization_events=list)
            runs.append(main_job.JobRun(job, partition, result))
            on_run(runs[-1])
        return runs

    monkeypatch.setattr(main_job, "run_main_jobs", fake)
    cli.materialize_partitions(PARTITIONS, 1, str(tmp_path / "data"),
                               sample_run.pipeline_path)
    err = capsys.readouterr().err
    assert "dataset[sample]: run 01234567 ok" in err
    assert re.search(r"(\d+)/\1 runs \d+:\d\d:\d\d left \d+:\d\d:\d\d", err), err


def test_sample_run_prints_the_language_rows(built, tmp_path, capsys) -> None:
    report_json = tmp_path / "report.json"
    report_json.write_text(json.dumps(built.report.data, default=str))
    _print_languages(report_json)
    lines = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()
             if line.strip()}
    rows = [r for r in built.report.data["languages"] if r["language"] == "ja"]
    documents, selected = (sum(r[key] for r in rows) for key in ("documents", "selected"))
    assert lines["ja"][1] == str(documents) and lines["ja"][3] == str(selected)
    assert {"en", "python"} <= set(lines)


def test_contamination_and_cross_clusters_match_the_stored_tables(built) -> None:
    """Per benchmark, the items, documents, their mix rules and top web domains, and the
    cross-partition cluster sizes over the recipe's documents, recomputed from the stored
    hits, decisions, documents and clusters."""
    import polars as pl

    store, data = built.store, built.report.data

    def table(asset: str, partition: str, columns: list[str], name: str) -> pl.DataFrame:
        layout = PartitionLayout(store, asset, partition)
        parts = layout.complete_manifest().table_parts(name)
        return pl.from_arrow(layout.read_table(columns, name=name)) if parts else \
            pl.DataFrame(schema=dict.fromkeys(columns, pl.String))

    hits = pl.concat([table(DECONTAMINATED, p, ["doc_id", "benchmark", "item_id"], "hits")
                      for p in RECIPE_PARTITIONS])
    documents = pl.concat([table(DOCUMENTS, p, ["doc_id", "domain"], "part")
                           for p in RECIPE_PARTITIONS])
    rules = table(MIX, "sample", ["doc_id", "rule"], "decisions")
    pairs = hits.select("benchmark", "doc_id").unique().join(rules, on="doc_id")
    expected = []
    for (benchmark,), group in sorted(pairs.group_by("benchmark")):
        sites = (group.join(documents, on="doc_id").drop_nulls("domain")
                 .group_by("domain").len().sort(["len", "domain"], descending=[True, False]))
        expected.append({
            "benchmark": benchmark,
            "items": hits.filter(pl.col("benchmark") == benchmark)["item_id"].n_unique(),
            "documents": group.height,
            "documents_removed": group.filter(pl.col("rule") == "contaminated").height,
            "documents_kept": group.filter(pl.col("rule") == "selected").height,
            "top_domains": [{"domain": d, "documents": n}
                            for d, n in sites.head(TOP_SITES).iter_rows()]})
    found = data["contamination"]
    assert [{k: v for k, v in row.items() if k != "tokens_removed"} for row in found] == expected
    assert any(row["documents_removed"] for row in found)
    assert all((row["tokens_removed"] > 0) == (row["documents_removed"] > 0) for row in found)

    cross = table(CROSS_DEDUP, ALL, ["doc_id", "cluster_id"], "part").join(
        documents.select("doc_id"), on="doc_id", how="semi")
    sizes = Counter(cross.group_by("cluster_id").len()["len"].to_list())
    clusters = data["clusters"][CROSS_DEDUP]
    assert clusters["sizes"] == {str(s): n for s, n in sorted(sizes.items()) if s > 1}
    assert clusters["largest"] == max(sizes) and clusters["clusters"] > 0
