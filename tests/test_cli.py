"""The project CLI: configuration errors stop before any work, naming the field."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from corpus_cli.main import BENCHMARKS, app

runner = CliRunner()


def test_help_lists_the_commands() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("sample", "snapshots", "config", "backfill", "ui", "report", "lineage",
                    "takedown", "shards", "benchmark"):
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
