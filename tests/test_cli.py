"""The project CLI: configuration errors stop before any work, naming the field."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from corpus_cli.main import app

runner = CliRunner()


def test_help_lists_the_commands() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("sample", "snapshots", "config", "backfill", "ui"):
        assert command in result.output


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
