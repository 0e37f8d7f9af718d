"""The README's "Your own crawl" walkthrough, as a new user runs it: its pipeline.yaml and recipe
are read from the README itself (so the README cannot drift from what works), pointed at real
WARC files and real books, and run with the `corpus` command from the deployment folder."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, require_shared_data

pytestmark = pytest.mark.slow  # the walkthrough: every job through `corpus`, and reruns

CORPUS = [str(Path(sys.executable).parent / "corpus")]
WALKTHROUGH = "## Your own crawl"


def walkthrough_files() -> dict[str, str]:
    """The files the walkthrough tells the user to write: a ```yaml block whose first line is a
    `# FILE` comment, in the README's "Your own crawl" section."""
    readme = (REPO / "README.md").read_text()
    section = readme.split(WALKTHROUGH, 1)[1].split("\n## ", 1)[0]
    files = {}
    for block in re.findall(r"```yaml\n(.*?)```", section, flags=re.S):
        name = re.match(r"# (\S+)", block)
        assert name, f"a yaml block in the walkthrough does not start with '# FILE':\n{block}"
        files[name.group(1)] = block
    return files


def corpus(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*CORPUS, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env={"PATH": "/usr/bin:/bin", "HOME": str(cwd)})


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    shared = require_shared_data()
    folder = tmp_path_factory.mktemp("my-corpus")
    for name, text in walkthrough_files().items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    (folder / "warc").mkdir()
    for warc in sorted((shared / "warc" / "non_cc").glob("dolma_*.warc.gz")):
        shutil.copyfile(warc, folder / "warc" / warc.name)
    (folder / "books").mkdir()
    for book in ("pg84.txt", "pg64317.txt"):
        shutil.copyfile(shared / "sources" / "books_gutenberg" / book, folder / "books" / book)
    return folder


def test_the_walkthrough_names_both_files() -> None:
    files = walkthrough_files()
    assert "pipeline.yaml" in files and any(f.startswith("recipes/") for f in files)


@pytest.fixture(scope="module")
def first_run(deployment: Path) -> subprocess.CompletedProcess:
    """`config validate`, then `backfill`, as the walkthrough says (once for the module)."""
    validated = corpus("config", "validate", cwd=deployment)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    return corpus("backfill", cwd=deployment)


def test_the_first_run_builds_the_dataset_in_the_deployment(
        deployment: Path, first_run: subprocess.CompletedProcess) -> None:
    assert first_run.returncode == 0, first_run.stdout[-4000:] + first_run.stderr[-4000:]
    # The deployment's own instance and data root.
    assert (deployment / ".dagster_home").is_dir()
    manifests = list((deployment / "data" / "shards").glob("*/manifest.json"))
    assert len(manifests) == 1
    by_source = json.loads(manifests[0].read_text())["tokens_by_source"]
    assert by_source.get("web", 0) > 0 and by_source.get("books", 0) > 0
    assert (deployment / "data" / "reports" / "mine" / "report.html").is_file()


def test_a_second_run_skips_what_is_up_to_date(
        deployment: Path, first_run: subprocess.CompletedProcess) -> None:
    assert first_run.returncode == 0
    again = corpus("backfill", cwd=deployment)
    assert again.returncode == 0, again.stdout[-4000:] + again.stderr[-4000:]
    assert "up to date" in again.stdout + again.stderr


def test_deleted_outputs_are_rebuilt_not_skipped(
        deployment: Path, first_run: subprocess.CompletedProcess) -> None:
    assert first_run.returncode == 0
    shutil.rmtree(deployment / "data" / "shards")
    again = corpus("backfill", cwd=deployment)
    assert again.returncode == 0, again.stdout[-4000:] + again.stderr[-4000:]
    output = again.stdout + again.stderr
    assert "per_snapshot[MY-CRAWL-01]: up to date, skipped" in output
    assert re.search(r"dataset\[mine\]: run \w+ ok", output), output
    assert len(list((deployment / "data" / "shards").glob("*/manifest.json"))) == 1
