"""Issue 18: everything a run needs is checked before any work, naming the field and the fix."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from typer.testing import CliRunner

from corpus_cli.main import app
from curation.config import SourceConfig, load_pipeline
from curation.preflight import count_records, preflight
from curation.quality import minimum_positives
from curation.sample.generate import generate_sample
from tests.conftest import REPO

runner = CliRunner()

RECIPE = """
name: {name}
snapshots: [CC]
phases: [{{name: main, fraction: 1, weights: {{web: 1}}}}]
tokenizer: {{train_vocab_size: 512}}
"""


def _deployment(tmp_path: Path, pipeline: str, recipes: dict[str, str] | None = None) -> Path:
    """pipeline.yaml, recipes/ and a snapshot folder `warc/CC` with one WARC file."""
    (tmp_path / "warc" / "CC").mkdir(parents=True, exist_ok=True)
    (tmp_path / "warc" / "CC" / "a.warc.gz").write_bytes(b"")
    (tmp_path / "recipes").mkdir(exist_ok=True)
    for file_name, text in (recipes or {}).items():
        (tmp_path / "recipes" / file_name).write_text(text)
    path = tmp_path / "pipeline.yaml"
    path.write_text(pipeline)
    return path


def _jsonl(folder: Path, count: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "part.jsonl").write_text("".join(f'{{"text": "text {i}"}}\n\n'
                                               for i in range(count)))


def test_the_repository_pipeline_and_recipes_pass(tmp_path: Path) -> None:
    generate_sample(tmp_path / "data" / "sample")
    shutil.copyfile(REPO / "pipeline.yaml", tmp_path / "pipeline.yaml")
    shutil.copytree(REPO / "recipes", tmp_path / "recipes")
    checked = preflight(tmp_path / "pipeline.yaml")
    assert checked.problems == []
    assert [recipe.name for recipe in checked.recipes.values()] == ["sample"]
    assert checked.skipped() == []  # the sample trains its classifier


def test_a_missing_or_empty_snapshot_folder_is_named_with_its_resolved_path(tmp_path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("not a WARC file")
    (tmp_path / "nested" / "2024").mkdir(parents=True)
    (tmp_path / "nested" / "2024" / "a.warc.gz").write_bytes(b"")
    path = _deployment(tmp_path, """
snapshots:
  CC: {warc: {path: warc/CC}}
  GONE: {warc: {path: warc/GONE}}
  EMPTY: {warc: {path: empty}}
  NESTED: {warc: {path: nested}}
  DEEP: {warc: {path: nested, recursive: true}}
  LISTED: {warc: {listing: lists/warc.paths.gz}}
  ON-S3: {warc: {s3_prefix: s3://bucket/crawl/}}
  CC-MAIN: {warc: {listing: 's3://commoncrawl/crawl-data/CC-MAIN-2024-10/warc.paths.gz'}}
""")
    problems = {problem.field: problem for problem in preflight(path).problems}
    assert sorted(problems) == ["snapshots.EMPTY.warc.path", "snapshots.GONE.warc.path",
                                "snapshots.LISTED.warc.listing", "snapshots.NESTED.warc.path"]
    assert problems["snapshots.NESTED.warc.path"].fix == \
        "the WARC files are in its subfolders: set snapshots.NESTED.warc.recursive: true"
    gone = problems["snapshots.GONE.warc.path"]
    assert gone.file == str(path)
    assert gone.message == f"no such folder or file: {tmp_path.resolve() / 'warc' / 'GONE'}"
    assert gone.fix
    assert str(tmp_path.resolve() / "empty") in problems["snapshots.EMPTY.warc.path"].message
    assert "no WARC files" in problems["snapshots.EMPTY.warc.path"].message
    assert str(tmp_path.resolve() / "lists" / "warc.paths.gz") in \
        problems["snapshots.LISTED.warc.listing"].message


def test_a_missing_source_folder_is_named(tmp_path: Path) -> None:
    path = _deployment(tmp_path, "snapshots: {CC: {warc: {path: warc/CC}}}\n"
                                 "sources: {books: {path: books/, format: text, licence: pd}}\n")
    [problem] = preflight(path).problems
    assert problem.field == "sources.books.path"
    assert str(tmp_path.resolve() / "books") in problem.message


POSITIVE = """
snapshots: {CC: {warc: {path: warc/CC}}}
sources: {hq: {path: hq, licence: cc0, classifier_positive: true}}
quality: {training_snapshots: [CC]%s}
"""


def test_a_positive_source_too_small_to_split_names_the_source_and_the_minimum(tmp_path):
    path = _deployment(tmp_path, POSITIVE % "")
    needed = minimum_positives(load_pipeline(path).quality)
    _jsonl(tmp_path / "hq", 7)
    [problem] = preflight(path).problems
    assert problem.field == "sources.hq.classifier_positive"
    assert "hold 7 texts (hq: 7)" in problem.message
    assert f"needs at least {needed}" in problem.message
    assert "remove the quality: section" in problem.fix
    _jsonl(tmp_path / "hq", needed)
    assert preflight(path).problems == []


def test_a_cap_below_the_minimum_names_max_positives(tmp_path: Path) -> None:
    path = _deployment(tmp_path, POSITIVE % ", max_positives: 20")
    needed = minimum_positives(load_pipeline(path).quality)
    _jsonl(tmp_path / "hq", needed)
    [problem] = preflight(path).problems
    assert problem.field == "quality.max_positives"
    assert f"at least {needed}" in problem.fix


def test_records_are_counted_as_the_documents_stage_reads_them(tmp_path: Path) -> None:
    _jsonl(tmp_path / "j", 12)  # with a blank line after each record
    pq.write_table(pa.table({"text": [f"row {i}" for i in range(9)]}), tmp_path / "p.parquet")
    for index in range(3):
        (tmp_path / f"book{index}.txt").write_text("a whole book")

    def count(files: list[Path], fmt: str, stop_at: int | None = None) -> int:
        source = SourceConfig(path=".", format=fmt, licence="x")
        return count_records([str(f) for f in files], source, stop_at)

    assert count([tmp_path / "j" / "part.jsonl"], "jsonl") == 12
    assert count([tmp_path / "j" / "part.jsonl"], "jsonl", stop_at=5) == 5
    assert count([tmp_path / "p.parquet"], "parquet") == 9
    assert count(sorted(tmp_path.glob("book*.txt")), "text") == 3


def test_without_a_classifier_preflight_passes_and_says_what_is_skipped(tmp_path) -> None:
    path = _deployment(tmp_path, "snapshots: {CC: {warc: {path: warc/CC}}}\n",
                       {"r.yaml": RECIPE.format(name="r")})
    checked = preflight(path)
    assert checked.problems == []
    [note] = checked.skipped()
    assert note.startswith("quality_classifier and quality_scores are skipped (pipeline.yaml "
                           "has no quality: section)")
    assert "selection.quality_top_fraction" in note


def test_every_problem_of_the_recipes_beside_the_pipeline_is_listed(tmp_path: Path) -> None:
    path = _deployment(tmp_path, "snapshots: {CC: {warc: {path: warc/CC}}}\n", {
        "good.yaml": RECIPE.format(name="good"),
        "misnamed.yaml": RECIPE.format(name="other"),
        "english.yaml": RECIPE.format(name="english") + "selection: {languages: [english]}\n",
        "scored.yaml": RECIPE.format(name="scored") + "selection: {quality_top_fraction: 0.1}\n",
    })
    checked = preflight(path)
    assert [r.name for r in checked.recipes.values()] == ["good"]
    found = {(Path(problem.file).name, problem.field) for problem in checked.problems}
    assert found == {("misnamed.yaml", "name"), ("english.yaml", "selection.languages"),
                     ("scored.yaml", "selection.quality_top_fraction")}


# --- the CLI -------------------------------------------------------------------------------


def test_config_validate_checks_the_recipes_beside_the_pipeline_by_default(tmp_path) -> None:
    path = _deployment(tmp_path, "snapshots: {CC: {warc: {path: warc/CC}}}\n",
                       {"mine.yaml": RECIPE.format(name="other")})
    result = runner.invoke(app, ["config", "validate", "--pipeline", str(path)])
    assert result.exit_code == 2
    assert (f"{tmp_path / 'recipes' / 'mine.yaml'}: name: 'other' differs from the file name "
            "'mine.yaml'") in result.output
    (tmp_path / "recipes" / "mine.yaml").write_text(RECIPE.format(name="mine"))
    result = runner.invoke(app, ["config", "validate", "--pipeline", str(path)])
    assert result.exit_code == 0, result.output
    assert "skipped: quality_classifier and quality_scores are skipped" in result.output
    assert f"{tmp_path / 'recipes' / 'mine.yaml'}: valid; recipe mine" in result.output


def test_backfill_refuses_a_missing_snapshot_folder_before_any_work(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    path = _deployment(tmp_path, "snapshots: {CC: {warc: {path: warc/CC}}, "
                                 "GONE: {warc: {path: warc/GONE}}}\n")
    root = tmp_path / "data"
    result = runner.invoke(app, ["backfill", "--pipeline", str(path), "--root", str(root)])
    assert result.exit_code == 2
    assert (f"snapshots.GONE.warc.path: no such folder or file: "
            f"{tmp_path.resolve() / 'warc' / 'GONE'}") in result.output
    assert not root.exists()
