"""The project CLI: configuration errors stop before any work, naming the field."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from corpus_cli.main import BENCHMARKS, app
from tests.conftest import REPO
from tests.deployments import make_deployment

runner = CliRunner()


def test_help_lists_the_commands() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("sample", "snapshots", "config", "backfill", "ui", "report", "lineage",
                    "takedown", "shards", "benchmark", "export"):
        assert command in result.output
    for group, commands in (("lineage", ("url", "token", "asset", "refresh")),
                            ("takedown", ("add", "list", "audit", "purge")),
                            ("shards", ("verify", "inspect"))):
        listing = runner.invoke(app, [group, "--help"])
        assert listing.exit_code == 0 and all(c in listing.output for c in commands)


def test_benchmark_lists_every_script_with_its_purpose() -> None:
    result = runner.invoke(app, ["benchmark"])
    assert result.exit_code == 0
    assert {line.split()[0] for line in result.output.splitlines()} == set(BENCHMARKS)


def test_bad_pipeline_exits_2_naming_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "pipeline.yaml"
    bad.write_text("snapshots: {X: {warc: {path: a}}}\ndocuments: {extractor: magic}\n")
    result = runner.invoke(app, ["config", "validate", "--pipeline", str(bad)])
    assert result.exit_code == 2
    assert "documents.extractor" in result.output


def test_backfill_refuses_a_bad_pipeline_before_any_run(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    bad = tmp_path / "pipeline.yaml"
    bad.write_text("snapshots: {X: {warc: {path: a}}}\nsources: {b: {path: p}}\n")
    result = runner.invoke(app, ["backfill", "--pipeline", str(bad)])
    assert result.exit_code == 2
    assert "sources.b.licence" in result.output
    assert not (tmp_path / "home" / "history").exists()


def test_backfill_help_names_the_jobs_it_runs_and_refuses_an_unknown_job(tmp_path: Path,
                                                                          monkeypatch) -> None:
    from corpus_assets.definitions import MAIN_JOBS

    text = " ".join(runner.invoke(app, ["backfill", "--help"], terminal_width=200).output.split())
    assert "every per-snapshot asset" not in text
    assert all(job in text for job in MAIN_JOBS) and "--jobs" in text
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    result = runner.invoke(app, ["backfill", "--jobs", "per_snapshots", "--pipeline",
                                 str(REPO / "pipeline.yaml")])
    assert result.exit_code == 2
    assert "--jobs: unknown per_snapshots; one of: " + ", ".join(MAIN_JOBS) in result.output


def _stages(output: str) -> list[str]:
    """The stage column of the summary table."""
    lines = output.split("\nstage ", 1)[1].splitlines()[1:]
    return [line.split()[0] for line in lines if line.strip()]


@pytest.mark.slow
def test_a_rerun_skips_what_is_up_to_date(tmp_path: Path, monkeypatch) -> None:
    from dagster import AssetKey, DagsterInstance

    from corpus_assets.main_job import job_asset_keys

    folder = make_deployment(tmp_path / "deploy")
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.chdir(folder)
    command = ["backfill", "--partition", "source:reference", "--jobs", "per_snapshot",
               "--workers", "0"]
    first = runner.invoke(app, command)
    assert first.exit_code == 0, first.output
    # The summary lists the stages in pipeline order, not in the order their events came.
    assert _stages(first.output) == [key.to_user_string() for key in job_asset_keys(
        "per_snapshot")]

    def materializations() -> int:
        instance = DagsterInstance.from_config(str(folder / ".dagster_home"))
        try:
            return sum(len(instance.fetch_materializations(key, limit=100).records)
                       for key in map(AssetKey, ["warc_files", "documents", "scrubbed"]))
        finally:
            instance.dispose()

    before = materializations()
    again = runner.invoke(app, command)
    assert again.exit_code == 0, again.output
    assert "per_snapshot[source:reference]: up to date, skipped" in again.output
    assert materializations() == before
    # Declaring another snapshot changes nothing this partition reads.
    settings = yaml.safe_load((folder / "pipeline.yaml").read_text())
    settings["snapshots"]["NEW-01"] = {"warc": {"path": "data/sample/warc/SAMPLE-01"}}
    (folder / "pipeline.yaml").write_text(yaml.safe_dump(settings))
    declared = runner.invoke(app, command)
    assert "per_snapshot[source:reference]: up to date, skipped" in declared.output, \
        declared.output
    # A changed input file makes the partition stale again.
    source = next((folder / "data" / "sample" / "sources" / "reference").glob("*.jsonl"))
    modified = source.stat().st_mtime_ns + 10**9
    os.utime(source, ns=(modified, modified))
    changed = runner.invoke(app, command)
    assert changed.exit_code == 0, changed.output
    assert "up to date" not in changed.output
    assert materializations() == before + 3
    forced = runner.invoke(app, [*command, "--force"])
    assert forced.exit_code == 0 and "up to date" not in forced.output, forced.output
    assert materializations() == before + 6


def test_the_summary_follows_the_pipeline_and_reports_the_shards(sample_run) -> None:
    from corpus_assets.main_job import JobRun, job_asset_keys
    from corpus_cli.runs import summary_rows

    rows = {}
    for (job, partition), result in sample_run.results.items():
        rows[job, partition] = summary_rows(JobRun(job, partition, result))
        assert [row["stage"] for row in rows[job, partition]] == [
            key.to_user_string() for key in job_asset_keys(job)]
    dataset = {row["stage"]: row for row in rows["dataset", "sample"]}
    shards = dataset["shards"]["note"]
    tokens = shards.split(" tokens in ")[0]
    assert int(tokens.replace(",", "")) > 0
    # The report names the same dataset: its line repeats the shards' figures, then its path.
    assert dataset["report"]["note"].startswith(f"{shards}: ")


_DATASET_NOTE = re.compile(r"([\d,]+) tokens in ([\d,]+) shards, version (\w+)")


def test_the_report_line_shows_the_shard_manifests_totals(sample_run, tmp_path: Path,
                                                           monkeypatch) -> None:
    """`corpus backfill --jobs dataset` on a copy of the session's sample deployment (data and
    instance): the summary's report line gives the tokens and shards of the manifest it built."""
    folder = tmp_path / "deploy"
    for name in ("data", "home", "recipes"):
        shutil.copytree(sample_run.base / name, folder / name)
    shutil.copyfile(sample_run.pipeline_path, folder / "pipeline.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(folder / "home"))
    monkeypatch.chdir(folder)
    result = runner.invoke(app, ["backfill", "--jobs", "dataset", "--force", "--workers", "0"])
    assert result.exit_code == 0, result.output
    lines = {line.split()[0]: line for line in result.output.split("\nstage ", 1)[1].splitlines()
             if line.strip()}
    figures = _DATASET_NOTE.search(lines["report"])
    assert figures is not None, lines["report"]
    tokens, shards, version = figures.groups()
    manifest = json.loads((folder / "data" / "shards" / version / "manifest.json").read_text())
    assert int(tokens.replace(",", "")) == manifest["totals"]["tokens"] > 0
    assert int(shards.replace(",", "")) == len(manifest["shards"]) > 0
    assert _DATASET_NOTE.search(lines["shards"]).groups() == figures.groups()


def test_init_writes_a_deployment_for_your_own_warc_folder(tmp_path: Path, monkeypatch) -> None:
    from curation.sample.generate import generate_sample

    warc = generate_sample(tmp_path / "sample").root / "warc" / "SAMPLE-01"
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "my-crawl"
    written = runner.invoke(app, ["init", str(folder), "--warc", str(warc), "--snapshot",
                                  "MY-CRAWL"])
    assert written.exit_code == 0, written.output
    valid = runner.invoke(app, ["--project-dir", str(folder), "config", "validate"])
    assert valid.exit_code == 0, valid.output
    assert "partitions: MY-CRAWL" in valid.output and "recipe main" in valid.output
    registered = runner.invoke(app, ["--project-dir", str(folder), "snapshots", "register"])
    assert registered.exit_code == 0, registered.output
    listed = runner.invoke(app, ["--project-dir", str(folder), "snapshots", "list"])
    assert listed.output.split() == ["MY-CRAWL"]
    again = runner.invoke(app, ["init", str(folder), "--warc", str(warc)])
    assert again.exit_code == 2 and "exists" in again.output
    missing = runner.invoke(app, ["init", str(tmp_path / "other"), "--warc", "no/such/folder"])
    assert missing.exit_code == 2 and "--warc no/such/folder: not a folder" in missing.output
