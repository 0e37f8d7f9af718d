"""A deployment folder (pipeline.yaml, recipes, data root and Dagster home together) is what the
CLI and the UI work on: two deployments never share partitions, outputs or run history, and a
run launched from one deployment's UI reads that deployment's pipeline."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import free_port
from tests.deployments import REAL, make_deployment, make_real_deployment

runner = CliRunner()
@pytest.fixture
def deployments(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    sample = make_deployment(tmp_path / "sample")
    real = make_real_deployment(tmp_path / "real")
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.delenv("CORPUS_PROJECT_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    return sample, real


def corpus(*args: str):  # noqa: ANN201 - a click Result
    from corpus_cli.main import app

    return runner.invoke(app, list(args))


def test_each_deployment_has_its_own_instance_and_partitions(deployments) -> None:
    sample, real = deployments
    for folder in deployments:
        assert corpus("--project-dir", str(folder), "snapshots", "register").exit_code == 0
    listed = {folder: corpus("--project-dir", str(folder), "snapshots", "list").output.split()
              for folder in deployments}
    assert listed[sample] == ["SAMPLE-01", "SAMPLE-02", "source:code", "source:reference"]
    assert listed[real] == [REAL, "source:code", "source:reference"]
    assert (sample / ".dagster_home").is_dir() and (real / ".dagster_home").is_dir()

    os.chdir(real)  # the current directory chooses the deployment too
    removed = corpus("snapshots", "remove", REAL)
    assert removed.exit_code == 0 and "removed: CC-REAL" in removed.output
    assert corpus("snapshots", "list").output.split() == ["source:code", "source:reference"]
    unknown = corpus("snapshots", "remove", "SAMPLE-01")
    assert unknown.exit_code == 2 and "not registered here: SAMPLE-01" in unknown.output
    assert corpus("--project-dir", str(sample), "snapshots", "list").output.split() == [
        "SAMPLE-01", "SAMPLE-02", "source:code", "source:reference"]


def test_outside_a_deployment_the_cli_says_how_to_choose_one(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    listed = corpus("snapshots", "list")
    assert listed.exit_code == 2 and "--project-dir" in listed.output
    missing = corpus("--project-dir", str(tmp_path), "snapshots", "list")
    assert missing.exit_code == 2
    assert f"--project-dir {tmp_path}: not a deployment folder" in missing.output


def test_a_run_launched_without_run_config_reads_the_deployment(deployments) -> None:
    """What a run launched from `corpus ui` does: no run configuration, so the resources'
    defaults, which the UI's environment points at the deployment (from any directory)."""
    from corpus_cli.deployment import ui_environment

    sample, real = deployments
    os.chdir(real)
    assert corpus("snapshots", "register").exit_code == 0
    env = {**os.environ, **ui_environment()}
    os.chdir(sample)
    result = subprocess.run(
        [str(Path(sys.executable).parent / "dagster"), "asset", "materialize", "-m",
         "corpus_assets.definitions", "--select", "warc_files", "--partition", REAL],
        cwd=sample, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (real / "data" / "warc_files" / REAL / "_manifest.json").is_file()
    assert not (sample / "data" / "warc_files").exists()
    assert (real / ".dagster_home" / "history").is_dir()
    assert not (sample / ".dagster_home").exists()


def test_corpus_ui_stops_everything_it_started_on_sigterm(deployments) -> None:
    _, real = deployments
    env = {key: value for key, value in os.environ.items() if key != "DAGSTER_HOME"}
    log = real / "ui.log"
    with log.open("w") as output:
        ui = subprocess.Popen(
            [str(Path(sys.executable).parent / "corpus"), "--project-dir", str(real), "ui",
             "--port", str(free_port())], env=env, stdout=output, stderr=output,
            start_new_session=True)
    group = None
    try:
        group = _process_group(log, ui)
        deadline = time.monotonic() + 45
        while len(_members(group)) < 3:  # dagster dev, its webserver and its daemon
            assert ui.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "dagster dev did not start its processes"
            time.sleep(0.2)
        ui.send_signal(signal.SIGTERM)
        assert ui.wait(40) == 0
        assert _members(group) == [], "corpus ui left processes behind"
    finally:
        for leftover in {ui.pid, group} - {None}:
            if _members(leftover):
                os.killpg(leftover, signal.SIGKILL)


def _process_group(log: Path, ui: subprocess.Popen) -> int:
    """The process group `corpus ui` started dagster dev in, as it prints it."""
    deadline = time.monotonic() + 30
    while not (found := re.search(r"process group (\d+)", log.read_text())):
        assert ui.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.2)
    return int(found.group(1))


def _members(group: int) -> list[int]:
    """Processes still in the process group (zombies excluded)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == group:
            found.append(int(stat.parent.name))
    return found
