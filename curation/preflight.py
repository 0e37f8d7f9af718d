"""Everything a run needs, checked before any work (issue 18).

`load_pipeline` and `load_recipe` validate each file on its own. This adds what needs the disk
and both files together: every local input folder exists and holds input files, the positive
sources of the quality classifier are large enough to split, and every recipe loads against the
pipeline. `corpus config validate` prints the problems and the start of every CLI run refuses to
begin while there are any. Inputs on S3 or behind a listing are listed at run time only: here
their syntax is checked.
"""

from __future__ import annotations

import dataclasses
import glob
import gzip
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from curation.config import (
    SOURCE_PREFIX,
    ConfigError,
    ListingWarcInput,
    LocalWarcInput,
    PipelineConfig,
    Problem,
    RecipeConfig,
    SourceConfig,
    load_pipeline,
    load_recipe,
)
from curation.inputs import (
    SOURCE_SUFFIXES,
    WARC_SUFFIXES,
    InputListingError,
    list_locations,
)
from curation.quality import WITHOUT_CLASSIFIER, minimum_positives, too_few_positives
from curation.storage import InputReader

URI_SCHEMES = ("s3://", "http://", "https://")


@dataclass(frozen=True)
class Preflight:
    """The loaded configuration and every problem found; a run starts only when `ok`."""

    pipeline: PipelineConfig | None
    recipes: dict[Path, RecipeConfig]
    problems: list[Problem]

    @property
    def ok(self) -> bool:
        return not self.problems

    def skipped(self) -> list[str]:
        """What the pipeline leaves out, in words (nothing is a problem)."""
        reason = self.pipeline.classifier_skipped() if self.pipeline else None
        if reason is None:
            return []
        return [f"quality_classifier and quality_scores are skipped ({reason}): "
                f"{WITHOUT_CLASSIFIER}; to train it, add a quality: section with "
                "training_snapshots and mark a curated source classifier_positive: true"]


def recipes_beside(pipeline_path: Path) -> list[Path]:
    """The recipe files of a deployment: `recipes/*.yaml` beside its pipeline.yaml."""
    return sorted((Path(pipeline_path).resolve().parent / "recipes").glob("*.yaml"))


def preflight(pipeline_path: str | Path, recipe_paths: list[Path] | None = None) -> Preflight:
    """Loads the pipeline and the recipes (default: those beside it) and checks what a run
    needs of the disk; returns every problem found, not only the first."""
    pipeline_path = Path(pipeline_path)
    try:
        pipeline = load_pipeline(pipeline_path)
    except ConfigError as error:
        return Preflight(None, {}, _located(error.problems, pipeline_path))
    problems = input_problems(pipeline, pipeline_path)
    problems += classifier_problems(pipeline, pipeline_path)
    recipes = {}
    for path in recipe_paths if recipe_paths is not None else recipes_beside(pipeline_path):
        try:
            recipes[path] = load_recipe(path, pipeline)
        except ConfigError as error:
            problems += _located(error.problems, path)
    return Preflight(pipeline, recipes, problems)


def _located(problems: list[Problem], path: Path) -> list[Problem]:
    return [problem if problem.file else dataclasses.replace(problem, file=str(path))
            for problem in problems]


# --- inputs ----------------------------------------------------------------------------------


def input_problems(pipeline: PipelineConfig, pipeline_path: Path) -> list[Problem]:
    """Every snapshot's and source's inputs: local folders that exist and hold input files,
    URIs of a scheme the readers know."""
    problems = []
    for name, snapshot in sorted(pipeline.snapshots.items()):
        field = f"snapshots.{name}.warc"
        spec = snapshot.warc
        if isinstance(spec, LocalWarcInput):
            problems += _location_problems(pipeline, name, f"{field}.path", spec.path,
                                           f"WARC files ({', '.join(WARC_SUFFIXES)})",
                                           _subfolder_fix(pipeline, field, spec))
        elif isinstance(spec, ListingWarcInput):
            problems += _listing_problems(pipeline, field, spec)
    for name, source in sorted(pipeline.sources.items()):
        problems += _location_problems(
            pipeline, SOURCE_PREFIX + name, f"sources.{name}.path", source.path,
            f"{source.format} files ({', '.join(SOURCE_SUFFIXES[source.format])})")
    return [dataclasses.replace(problem, file=str(pipeline_path)) for problem in problems]


def _location_problems(pipeline: PipelineConfig, partition: str, field: str, value: str,
                       what: str, fix: str = "") -> list[Problem]:
    """A folder or glob (listed as the run lists it), or an s3:// prefix (syntax only); `fix`
    says how to fix an empty one when more is known than that it is empty."""
    if "://" in value:
        if value.startswith("s3://") and len(value) > len("s3://"):
            return []
        return [Problem("", field, f"{value!r} is neither a local path nor s3://bucket/prefix",
                        "give a folder, a glob or an s3:// prefix")]
    resolved = pipeline.resolve(value)
    if not Path(resolved).exists() and not glob.glob(resolved):
        return [Problem("", field, f"no such folder or file: {resolved}",
                        "create it or correct the path (relative to the pipeline.yaml folder)")]
    try:
        found = list_locations(pipeline, partition, InputReader())
    except InputListingError:
        found = []
    if found:
        return []
    return [Problem("", field, f"no {what} in {resolved}",
                    fix or "put the input files there or point the path at them")]


def _subfolder_fix(pipeline: PipelineConfig, field: str, spec: LocalWarcInput) -> str:
    """How to read WARC files that sit only in the subfolders of a non-recursive folder."""
    folder = Path(pipeline.resolve(spec.path))
    if spec.recursive or "://" in spec.path or not folder.is_dir():
        return ""
    nested = any(path.name.endswith(WARC_SUFFIXES) for path in folder.rglob("*"))
    return f"the WARC files are in its subfolders: set {field}.recursive: true" if nested else ""


def _listing_problems(pipeline: PipelineConfig, field: str,
                      spec: ListingWarcInput) -> list[Problem]:
    problems = []
    for name, value in (("listing", spec.listing), ("base", spec.base)):
        if "://" in value:
            if not value.startswith(URI_SCHEMES):
                problems.append(Problem("", f"{field}.{name}", f"{value!r}: unknown scheme",
                                        f"use a local path or {', '.join(URI_SCHEMES)}"))
        elif not Path(pipeline.resolve(value)).exists():
            problems.append(Problem("", f"{field}.{name}",
                                    f"no such file or folder: {pipeline.resolve(value)}",
                                    "correct the path (relative to the pipeline.yaml folder)"))
    return problems


# --- the quality classifier ------------------------------------------------------------------


def classifier_problems(pipeline: PipelineConfig, pipeline_path: Path) -> list[Problem]:
    """Positive sources too small to give both a training and a held-out set. Local sources
    are counted (stopping once there are enough); a source on S3 is counted at run time."""
    settings = pipeline.quality
    if settings is None or pipeline.classifier_skipped():
        return []
    needed = minimum_positives(settings)
    positives = {name: source for name, source in sorted(pipeline.sources.items())
                 if source.classifier_positive}
    if any("://" in source.path for source in positives.values()):
        return []
    counts = {}
    for name, source in positives.items():
        try:
            files = list_locations(pipeline, SOURCE_PREFIX + name, InputReader())
        except InputListingError:
            files = []  # reported by input_problems
        counts[name] = count_records(files, source, stop_at=needed)
    reason = too_few_positives(settings, counts)
    if reason is None:
        return []
    if settings.max_positives < needed <= sum(counts.values()):
        return [Problem(str(pipeline_path), "quality.max_positives", reason,
                        f"raise quality.max_positives to at least {needed}")]
    fields = ", ".join(f"sources.{name}.classifier_positive" for name in positives)
    return [Problem(str(pipeline_path), fields, reason,
                    "add texts, mark another curated source classifier_positive: true, or "
                    "remove the quality: section to skip the classifier")]


def count_records(files: list[str], source: SourceConfig, stop_at: int | None = None) -> int:
    """Records in a source's local files as the documents stage reads them (a text file is one
    record, a JSONL line one, a Parquet row one), counted up to `stop_at`."""
    limit = stop_at if stop_at is not None else float("inf")
    total = 0
    for path in files:
        if total >= limit:
            break
        if source.format == "text":
            total += 1
        elif source.format == "parquet":
            total += pq.ParquetFile(path).metadata.num_rows
        else:
            total += _jsonl_lines(path, limit - total)
    return total


def _jsonl_lines(path: str, limit: float) -> int:
    """Non-blank lines, up to `limit` (a large source is not read to the end)."""
    opener = gzip.open if path.endswith(".gz") else open
    count = 0
    with opener(path, "rt", encoding="utf-8", errors="replace") as handle:
        for line in handle:
            count += bool(line.strip())
            if count >= limit:
                break
    return count
