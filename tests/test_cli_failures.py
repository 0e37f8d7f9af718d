"""A failed run says why in one line per failure (asset, partition, check or step, reason), what
did not run and the command that resumes; no Dagster log or traceback in between."""

from __future__ import annotations

import re
import shutil

import pytest
from dagster import AssetCheckKey, AssetKey, DagsterInstance
from typer.testing import CliRunner

from corpus_assets.main_job import job_asset_keys
from tests.conftest import require_shared_data
from tests.deployments import make_deployment

runner = CliRunner()
SOURCE = "source:reference"
SURVIVAL = r"60 of 60 HTML responses survive extraction \(100\.00%\), outside " \
    r"documents\.survival \[10\.00%, 50\.00%\]"


def _survival_at_most_half(settings: dict) -> None:
    settings["documents"]["survival"] = {"min": 0.1, "max": 0.5}  # a curated source keeps 100%


@pytest.fixture(scope="module")
def failed_gate(tmp_path_factory: pytest.TempPathFactory):
    """A deployment whose documents gate fails on the curated source, after one backfill."""
    folder = make_deployment(tmp_path_factory.mktemp("failing") / "deploy",
                             _survival_at_most_half)
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("DAGSTER_HOME", raising=False)
        patch.chdir(folder.parent)
        result = runner.invoke(app(), ["--project-dir", str(folder), "backfill", "--partition",
                                       SOURCE, "--workers", "0"])
        yield folder, result, patch


def app():  # noqa: ANN201 - the typer app, imported late so the fixture's env applies
    from corpus_cli.main import app as corpus

    return corpus


def test_a_failed_gate_prints_its_reason_what_did_not_run_and_how_to_resume(failed_gate) -> None:
    folder, result, _ = failed_gate
    output = result.output
    assert result.exit_code == 1, output
    assert re.search(rf"documents\[{SOURCE}\] check documents_survival: {SOURCE}: {SURVIVAL}",
                     output), output
    later = [key.to_user_string() for key in job_asset_keys("per_snapshot")][2:]
    assert f"per_snapshot[{SOURCE}]: not materialized: {', '.join(later)}" in output
    assert (f"not run (they read what failed): models[all], scores[{SOURCE}], dataset[sample], "
            "lineage[all]") in output
    assert f"resume (what is up to date is skipped): corpus --project-dir {folder} backfill " \
        f"--partition {SOURCE}" in output
    # Dagster's console log and tracebacks stay in the instance.
    assert " - dagster - " not in output and "Traceback" not in output
    assert len(output.splitlines()) < 40, output


def test_the_ui_shows_the_same_reason_as_the_check_description(failed_gate) -> None:
    folder, _, _ = failed_gate
    instance = DagsterInstance.from_config(str(folder / ".dagster_home"))
    try:
        history = instance.event_log_storage.get_asset_check_execution_history(
            AssetCheckKey(AssetKey("documents"), "documents_survival"), limit=1)
        evaluation = history[0].event.dagster_event.asset_check_evaluation_data
    finally:
        instance.dispose()
    assert not evaluation.passed
    assert re.fullmatch(f"{SOURCE}: {SURVIVAL}", evaluation.description)


def test_a_failed_step_prints_the_exception_line_not_the_traceback(failed_gate) -> None:
    folder, _, patch = failed_gate
    patch.chdir(folder)  # the deployment chosen by the current directory
    result = runner.invoke(app(), ["backfill", "--partition", SOURCE, "--jobs", "scores",
                                   "--workers", "0"])
    assert result.exit_code == 1, result.output
    # The gate holds across runs: the scores refuse the partition, and say why in one line.
    assert re.search(rf"decontaminated\[{SOURCE}\] step failed: Failure: documents\[{SOURCE}\] "
                     r"failed its blocking check documents_survival in run [0-9a-f-]+; fix it",
                     result.output), result.output
    assert "Traceback" not in result.output and 'File "' not in result.output
    assert re.search(r"full logs: run [0-9a-f]{8} in the Dagster instance "
                     rf"{re.escape(str(folder / '.dagster_home'))}", result.output)


def test_files_the_gate_lets_through_are_named_in_a_warning(tmp_path, monkeypatch) -> None:
    """An empty WARC file within `gates.max_problem_files`: the partition passes, and the CLI
    still names the file; so is a real WET file in the folder, which is not read."""
    wet = require_shared_data() / "warc" / "cc-main-2024-22_whirlwind_1record.warc.wet.gz"

    def allow_one_problem_file(settings: dict) -> None:
        settings["gates"]["max_problem_files"] = 1

    folder = make_deployment(tmp_path / "deploy", allow_one_problem_file)
    warc = folder / "data" / "sample" / "warc" / "SAMPLE-02"
    (warc / "SAMPLE-02-empty.warc.gz").write_bytes(b"")
    shutil.copyfile(wet, warc / wet.name)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    result = runner.invoke(app(), ["--project-dir", str(folder), "backfill", "--partition",
                                   "SAMPLE-02", "--jobs", "per_snapshot", "--workers", "0"])
    assert result.exit_code == 0, result.output
    assert re.search(r"warning: documents\[SAMPLE-02\]: 1 input file\(s\) gave no documents or "
                     r"only part of theirs: SAMPLE-02-empty\.warc\.gz \(\w+", result.output), \
        result.output
    assert f"warning: warc_files[SAMPLE-02]: not WARC files, not read: {wet.name}" in result.output
