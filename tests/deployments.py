"""Deployment folders for the CLI tests: a pipeline.yaml (the repository's, edited), the
repository's recipes and the built-in sample's data, in a folder of their own."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from curation.sample.generate import generate_sample
from tests.conftest import REPO


def make_deployment(folder: Path, edit=None) -> Path:  # noqa: ANN001 - edit(dict) -> None
    """`folder` as a deployment of the sample; `edit` changes the pipeline's settings."""
    folder.mkdir(parents=True)
    generate_sample(folder / "data" / "sample")
    shutil.copytree(REPO / "recipes", folder / "recipes")
    settings = yaml.safe_load((REPO / "pipeline.yaml").read_text())
    if edit:
        edit(settings)
    (folder / "pipeline.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
    return folder


REAL = "CC-REAL"


def make_real_deployment(folder: Path) -> Path:
    """A deployment of one snapshot, CC-REAL, that the repository's pipeline.yaml does not
    declare (its WARC files are the sample's SAMPLE-02), and the source."""

    def only_real(settings: dict) -> None:
        settings["snapshots"] = {REAL: {"warc": {"path": "data/sample/warc/SAMPLE-02"}}}
        settings["quality"]["training_snapshots"] = [REAL]

    make_deployment(folder, only_real)
    recipe = folder / "recipes" / "sample.yaml"
    recipe.write_text(recipe.read_text().replace("[SAMPLE-01, SAMPLE-02]", f"[{REAL}]"))
    return folder
