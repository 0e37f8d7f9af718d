"""The deployment folder the CLI and the UI work on: its `pipeline.yaml`, `recipes/`, data root
(`data/`) and Dagster instance (`.dagster_home/`) together, so two deployments never share
partitions, outputs or run history.

The folder is the current directory, or `--project-dir` / `CORPUS_PROJECT_DIR`; the CLI changes
into it, so every relative default (pipeline.yaml, data, recipes) names the deployment's own.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import typer

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PROJECT_DIR_ENV = "CORPUS_PROJECT_DIR"
PIPELINE_FILE = "pipeline.yaml"
DATA_ROOT = "data"
HOME_FOLDER = ".dagster_home"
HOW_TO_CHOOSE = (f"Run in a deployment folder, pass --project-dir DIR (or set {PROJECT_DIR_ENV}), "
                 "or create one with `corpus init DIR`")


def fail(message: str, code: int = 2) -> typer.Exit:
    """Prints `message` in red on stderr; returns the exit to raise."""
    typer.secho(message, fg=typer.colors.RED, err=True)
    return typer.Exit(code)


def enter_deployment(folder: Path | None) -> None:
    """Makes `folder` (a folder holding pipeline.yaml) the current directory."""
    if folder is None:
        return
    if not (folder / PIPELINE_FILE).is_file():
        raise fail(f"--project-dir {folder}: not a deployment folder (no {PIPELINE_FILE} in it); "
                   f"`corpus init {folder}` writes one")
    os.chdir(folder)


def deployment_dir() -> Path:
    """The current deployment folder; exits naming the fix when the current directory is not
    one."""
    here = Path.cwd()
    if not (here / PIPELINE_FILE).is_file():
        raise fail(f"{here}: no {PIPELINE_FILE} here. {HOW_TO_CHOOSE}")
    return here


def dagster_home() -> Path:
    """The Dagster instance folder: $DAGSTER_HOME when set, else the deployment's
    `.dagster_home`, with the repository's `dagster.yaml` copied in on first use (so the CLI and
    `corpus ui` share one instance per deployment)."""
    explicit = os.environ.get("DAGSTER_HOME")
    home = Path(explicit or deployment_dir() / HOME_FOLDER).resolve()
    home.mkdir(parents=True, exist_ok=True)
    settings = home / "dagster.yaml"
    if not settings.exists() and (PROJECT_ROOT / "dagster.yaml").exists():
        shutil.copyfile(PROJECT_ROOT / "dagster.yaml", settings)
    return home


def open_instance():  # noqa: ANN201 - a DagsterInstance (imported lazily: the CLI starts fast)
    """The deployment's Dagster instance (not $DAGSTER_HOME of an earlier deployment: the
    environment is left unchanged)."""
    from dagster import DagsterInstance

    return DagsterInstance.from_config(str(dagster_home()))


def storage_root(root: str) -> str:
    """A local root as an absolute path (run tags and the UI's defaults must not depend on the
    current directory); URIs unchanged."""
    return root if "://" in root else str(Path(root).resolve())


def ui_environment(root: str = DATA_ROOT) -> dict[str, str]:
    """What `corpus ui` sets for Dagster's processes: the deployment's instance, and the
    pipeline and root that runs launched without run configuration read (`resources`)."""
    return {"DAGSTER_HOME": str(dagster_home()),
            "CORPUS_PIPELINE": str(deployment_dir() / PIPELINE_FILE),
            "CORPUS_ROOT": storage_root(root)}
