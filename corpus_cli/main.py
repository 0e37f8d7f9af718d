"""The project CLI: what the Dagster CLI and UI do not cover."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer

from corpus_cli.common import (
    load_pipeline_or_exit,
    open_root,
    register,
    validated_recipes,
)
from corpus_cli.deployment import (
    PROJECT_DIR_ENV,
    PROJECT_ROOT,
    dagster_home,
    deployment_dir,
    enter_deployment,
    fail,
    open_instance,
    storage_root,
    ui_environment,
)
from corpus_cli.export import export
from corpus_cli.lineage import lineage_app, shards_app, takedown_app
from corpus_cli.runs import RunReport, add_run, print_failures, print_summary, run_line
from curation.config import ConfigError, dataset_version, load_pipeline, load_recipe
from curation.graph import ALL, REPORT, SHARDS
from curation.preflight import Preflight, preflight

app = typer.Typer(help="LLM pretraining-data platform: run, register, inspect. Works on one "
                  "deployment folder (pipeline.yaml, recipes/, data/, .dagster_home/): the current "
                  "directory or --project-dir.", no_args_is_help=True, add_completion=False)
sample_app = typer.Typer(help="The built-in sample: generate it, run the main job on it.",
                         no_args_is_help=True)
snapshots_app = typer.Typer(help="The snapshot partition set (snapshots and source:NAME keys).",
                            no_args_is_help=True)
config_app = typer.Typer(help="pipeline.yaml and recipes.", no_args_is_help=True)
app.add_typer(sample_app, name="sample")
app.add_typer(snapshots_app, name="snapshots")
app.add_typer(config_app, name="config")
app.add_typer(lineage_app, name="lineage")
app.add_typer(takedown_app, name="takedown")
app.add_typer(shards_app, name=SHARDS)
app.command("export")(export)

PipelineOption = Annotated[Path, typer.Option(help="The deployment's pipeline.yaml")]


@app.callback()
def choose_deployment(
    project_dir: Annotated[Path | None, typer.Option(
        "--project-dir", envvar=PROJECT_DIR_ENV,
        help="The deployment folder (its pipeline.yaml, recipes/, data/ and .dagster_home/); "
        "default: the current directory. Commands run in it, so relative paths are relative "
        "to it.")] = None,
) -> None:
    enter_deployment(project_dir)


# --- config ----------------------------------------------------------------------------------


@config_app.command("validate")
def config_validate(
    pipeline: PipelineOption = Path("pipeline.yaml"),
    recipe: Annotated[list[Path] | None, typer.Option(help="Recipe files to check")] = None,
) -> None:
    """Check everything a run needs (both files, input folders, positive sources, recipes;
    default: every recipes/*.yaml beside the pipeline), say what is skipped, and print the
    partitions and each recipe's configuration hash."""
    checked = preflight_or_exit(pipeline, recipe)
    config = checked.pipeline
    typer.echo(f"{pipeline}: valid; partitions: {', '.join(config.partition_keys())}")
    print_skipped(checked)
    if not checked.recipes:
        typer.echo(f"no recipes: add recipes/NAME.yaml beside {pipeline} to build a dataset")
    for path, loaded in checked.recipes.items():
        version = dataset_version(loaded, config, takedown_version="none",
                                  input_data_versions={}, code_versions={})
        typer.echo(f"{path}: valid; recipe {loaded.name}, configuration hash {version}")


def preflight_or_exit(pipeline: Path, recipes: list[Path] | None = None) -> Preflight:
    """Everything a run needs, checked before any work: on a problem, every problem (field
    and fix) and exit 2."""
    checked = preflight(pipeline, recipes)
    if not checked.ok:
        count = len(checked.problems)
        typer.secho(f"{pipeline}: {count} problem{'s' * (count > 1)} to fix before a run:",
                    fg=typer.colors.RED, err=True)
        for problem in checked.problems:
            typer.secho(f"  {problem}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    return checked


def print_skipped(checked: Preflight) -> None:
    for note in checked.skipped():
        typer.echo(f"skipped: {note}")


# --- partitions ------------------------------------------------------------------------------


@snapshots_app.command("register")
def snapshots_register(pipeline: PipelineOption = Path("pipeline.yaml")) -> None:
    """Register every snapshot and source of pipeline.yaml as a partition."""
    added = register(pipeline)
    typer.echo(f"registered: {', '.join(added)}" if added else "nothing new to register")


@snapshots_app.command("list")
def snapshots_list() -> None:
    """List this deployment's registered partitions, marking those its pipeline.yaml no longer
    declares."""
    from partitions import SNAPSHOT_PARTITIONS_NAME

    declared = set(load_pipeline_or_exit(Path("pipeline.yaml")).partition_keys())
    for key in open_instance().get_dynamic_partitions(SNAPSHOT_PARTITIONS_NAME):
        typer.echo(key if key in declared else f"{key}  (not in pipeline.yaml: "
                   f"`corpus snapshots remove {key}`)")


@snapshots_app.command("remove")
def snapshots_remove(
    key: Annotated[list[str], typer.Argument(help="Partition keys to remove")],
) -> None:
    """Remove partitions from this deployment's instance (their outputs under the data root and
    their run history stay)."""
    from partitions import SNAPSHOT_PARTITIONS_NAME

    instance = open_instance()
    known = set(instance.get_dynamic_partitions(SNAPSHOT_PARTITIONS_NAME))
    unknown = [name for name in key if name not in known]
    if unknown:
        typer.secho(f"not registered here: {', '.join(unknown)}; registered: "
                    f"{', '.join(sorted(known)) or 'none'}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    for name in key:
        instance.delete_dynamic_partition(SNAPSHOT_PARTITIONS_NAME, name)
    typer.echo(f"removed: {', '.join(key)}")


# --- running ---------------------------------------------------------------------------------


def _run_progress():  # noqa: ANN202 - a rich Progress
    """A progress bar of runs done / total with elapsed and remaining time, on stderr."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                    MofNCompleteColumn(), TextColumn("runs"), TimeElapsedColumn(),
                    TextColumn("left"), TimeRemainingColumn(), console=Console(stderr=True))


def _run_plan(partitions: list[str], recipes: list[str],
              jobs: tuple[str, ...] | None = None) -> list[str]:
    """`job[partition]` of every run `run_main_jobs` makes, in its order."""
    from corpus_assets.definitions import MAIN_JOBS
    from corpus_assets.main_job import job_partitions

    return [f"{job}[{key or ALL}]" for job in MAIN_JOBS if jobs is None or job in jobs
            for key in job_partitions(job, partitions, recipes)]


def materialize_partitions(partitions: list[str], workers: int, root: str, pipeline: Path,
                           jobs: tuple[str, ...] | None = None, force: bool = False,
                           verbose: bool = False) -> RunReport:
    """Runs the main jobs for the partitions on the deployment's instance, with a progress
    bar, skipping runs that are up to date unless `force`; Dagster's console log only with
    `verbose` (every event stays in the instance)."""
    from corpus_assets.definitions import MAIN_JOBS
    from corpus_assets.main_job import main_run_config, run_main_jobs

    print_skipped(preflight_or_exit(pipeline))  # what a run needs, before the first run
    started = time.perf_counter()
    recipes = validated_recipes(pipeline)
    plan = _run_plan(partitions, recipes, jobs)
    report = RunReport()
    with _run_progress() as progress:
        task = progress.add_task(f"running {plan[0]}" if plan else "", total=len(plan))

        def on_run(run) -> None:  # noqa: ANN001 - a JobRun
            add_run(report, run)
            progress.console.print(run_line(run, time.perf_counter() - started),
                                   markup=False, highlight=False)
            done = int(progress.tasks[0].completed) + 1
            progress.update(task, advance=1, description=f"running {plan[done]}"
                            if done < len(plan) else "main job done")

        run_config = main_run_config(str(pipeline.resolve()), storage_root(root), workers,
                                     log_level="INFO" if verbose else "CRITICAL")
        runs = run_main_jobs(open_instance(), partitions, run_config, on_run, recipes=recipes,
                             jobs=jobs or MAIN_JOBS, record_inputs=True,
                             skip_up_to_date=not force)
        report.not_run = plan[len(runs):]
        if report.not_run:
            progress.update(task, description=f"stopped: {len(report.not_run)} runs not started")
    return report


def _finish(report: RunReport, resume: str) -> None:
    """The summary table, then warnings and failures with the command that resumes; exit 1
    when anything failed."""
    print_summary(report.rows)
    print_failures(report, resume, str(dagster_home()))
    if not report.ok:
        raise typer.Exit(1)


def _note_foreign_pipeline(pipeline: Path) -> None:
    """Says where the runs of a pipeline from another folder go: this deployment's instance."""
    folder = pipeline.resolve().parent
    if folder != Path.cwd().resolve():
        typer.secho(f"note: {pipeline} is not this deployment's ({Path.cwd()}): its partitions "
                    f"and runs go to {dagster_home()}; --project-dir {folder} keeps them apart",
                    fg=typer.colors.YELLOW, err=True)


def _resume_command(partitions: list[str] | None, jobs: list[str] | None) -> str:
    words = ["corpus", "--project-dir", str(Path.cwd()), "backfill"]
    words += [f"--partition {key}" for key in partitions or []]
    words += [f"--jobs {job}" for job in jobs or []]
    return " ".join(words)


@app.command("backfill")
def backfill(
    partition: Annotated[list[str] | None, typer.Option(help="Partitions (default: all)")] = None,
    jobs: Annotated[list[str] | None, typer.Option(
        help="Main jobs to run, in their order (default: all five): per_snapshot, models, "
        "scores, dataset, lineage")] = None,
    workers: Annotated[int, typer.Option(help="Worker processes per partition")] = 2,
    root: Annotated[str, typer.Option(help="Storage root: folder or s3://bucket/prefix")] = "data",
    pipeline: PipelineOption = Path("pipeline.yaml"),
    force: Annotated[bool, typer.Option(help="Run even what is up to date")] = False,
    verbose: Annotated[bool, typer.Option(help="Print Dagster's event log as it runs")] = False,
) -> None:
    """Run the main jobs on the deployment's partitions and recipes, skipping what is up to date.

    Registers the partitions and recipes, then runs per_snapshot and scores per partition,
    models and lineage once, and dataset per recipe. A run whose inputs, configuration and code
    did not change since its last success is skipped as up to date (--force runs it)."""
    from corpus_assets.definitions import MAIN_JOBS

    unknown = sorted(set(jobs or []) - set(MAIN_JOBS))
    if unknown:
        typer.secho(f"--jobs: unknown {', '.join(unknown)}; one of: {', '.join(MAIN_JOBS)}",
                    fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    register(pipeline)
    _note_foreign_pipeline(pipeline)
    config = load_pipeline_or_exit(pipeline)
    undeclared = sorted(set(partition or []) - set(config.partition_keys()))
    if undeclared:
        typer.secho(f"--partition: {', '.join(undeclared)} not declared in {pipeline}; "
                    f"declared: {', '.join(config.partition_keys())}", fg=typer.colors.RED,
                    err=True)
        raise typer.Exit(2)
    report = materialize_partitions(partition or config.partition_keys(), workers, root,
                                    pipeline, tuple(jobs) if jobs else None, force, verbose)
    _finish(report, _resume_command(partition, jobs))


@sample_app.command("generate")
def sample_generate(
    out: Annotated[Path, typer.Option(help="Where to write the sample")] = Path("data/sample"),
    seed: int = 1234,
) -> None:
    """Write the built-in sample (WARC files, a curated source, an eval file, lists)."""
    from curation.sample.generate import generate_sample

    layout = generate_sample(out, seed=seed)
    typer.echo(f"sample: {layout.page_count} pages under {layout.root}")


def _print_languages(report_json: Path) -> None:
    """The report's language rows summed over partitions: the multilingual and code share."""
    totals: dict[str, list[int]] = {}
    for row in json.loads(report_json.read_text(encoding="utf-8"))["languages"]:
        counts = (row["documents"], row["heuristics_dropped"], row["selected"],
                  row["selected_tokens"])
        total = totals.get(row["language"], [0, 0, 0, 0])
        totals[row["language"]] = [a + b for a, b in zip(total, counts, strict=True)]
    typer.echo("\nlanguage     documents  heuristics drop  selected    tokens")
    for language, (documents, dropped, selected, tokens) in sorted(
            totals.items(), key=lambda item: -item[1][0]):
        typer.echo(f"{language:<12}{documents:>10}{dropped / documents:>17.1%}{selected:>10}"
                   f"{tokens:>10}")


@sample_app.command("run")
def sample_run(
    workers: Annotated[int, typer.Option(help="Worker processes per partition")] = 2,
    root: Annotated[str, typer.Option(help="Storage root")] = "data",
    force: Annotated[bool, typer.Option(help="Run even what is up to date")] = False,
    verbose: Annotated[bool, typer.Option(help="Print Dagster's event log as it runs")] = False,
) -> None:
    """The main job on the built-in sample, in the repository's own deployment folder:
    generate, register, materialize (skipping what is up to date), summarise."""
    os.chdir(PROJECT_ROOT)
    _refresh_sample(Path("data/sample"), 1234)
    pipeline = Path("pipeline.yaml")
    added = register(pipeline)
    typer.echo(f"registered partitions: {', '.join(added) or 'already registered'}")
    config = load_pipeline_or_exit(pipeline)
    report = materialize_partitions(config.partition_keys(), workers, root, pipeline,
                                    force=force, verbose=verbose)
    _finish(report, "corpus sample run")
    for name in validated_recipes(pipeline):
        report_html = Path(root) / "reports" / name / "report.html"
        if report_html.exists():
            _print_languages(report_html.with_name("report.json"))
            typer.echo(f"\nFunnel report of recipe {name}: {report_html.resolve()}")
    typer.echo(f"\nOpen the UI:  .venv/bin/corpus --project-dir {PROJECT_ROOT} ui"
               "\n              then browse http://127.0.0.1:3000")


# --- a new deployment ------------------------------------------------------------------------

PIPELINE_TEMPLATE = """\
# How every snapshot is processed (written by `corpus init`; README, "Configuration").
# Paths are relative to this file. Check: corpus config validate. Run: corpus backfill.
# Browse: corpus ui. Add curated sources (sources:), a quality classifier (quality:), eval
# suites to decontaminate against (decontamination:) and sentence embeddings
# (embeddings: {{enabled: true}}) as the README shows.
version: 1

snapshots:
  {snapshot}:
    warc: {{path: {warc}}}   # every .warc / .warc.gz file in the folder, or a glob

language:
  languages: [{languages}]   # the verdict keeps these; recipes may select fewer
"""

RECIPE_TEMPLATE = """\
# What one dataset version selects and how it mixes (recipes/NAME.yaml is the recipe NAME).
name: {name}
snapshots: [{snapshot}]
selection:
  languages: [{languages}]
phases:
  - {{name: main, fraction: 1.0, weights: {{web: 1.0}}}}
tokenizer: {{train_vocab_size: 4096}}   # or {{path: tokenizer.json}} for a pinned one
seq_len: 2048
seed: 1234
"""


@app.command("init")
def init(
    folder: Annotated[Path, typer.Argument(help="The new deployment folder")],
    warc: Annotated[Path, typer.Option(help="A folder of your WARC files (.warc, .warc.gz)")],
    snapshot: Annotated[str | None, typer.Option(
        help="The snapshot id (default: the WARC folder's name)")] = None,
    languages: Annotated[str, typer.Option(help="ISO codes to keep, comma-separated")] = "en",
) -> None:
    """Write a deployment folder for your own WARC files: pipeline.yaml and a recipe.

    Then run `corpus --project-dir FOLDER backfill` and `corpus --project-dir FOLDER ui`."""
    if (folder / "pipeline.yaml").exists():
        raise fail(f"{folder / 'pipeline.yaml'} exists; choose a new folder")
    if not warc.is_dir():
        raise fail(f"--warc {warc}: not a folder; pass the folder holding your WARC files")
    name = snapshot or re.sub(r"[^A-Za-z0-9_.-]+", "-", warc.resolve().name).strip("-.")
    codes = ", ".join(code.strip() for code in languages.split(",") if code.strip())
    (folder / "recipes").mkdir(parents=True, exist_ok=True)
    values = {"snapshot": name, "warc": json.dumps(str(warc.resolve())), "languages": codes,
              "name": "main"}
    (folder / "pipeline.yaml").write_text(PIPELINE_TEMPLATE.format(**values), encoding="utf-8")
    (folder / "recipes" / "main.yaml").write_text(RECIPE_TEMPLATE.format(**values),
                                                   encoding="utf-8")
    try:
        load_recipe(folder / "recipes" / "main.yaml", load_pipeline(folder / "pipeline.yaml"))
    except ConfigError as error:  # e.g. a snapshot id or language code the schema refuses
        shutil.rmtree(folder / "recipes")
        (folder / "pipeline.yaml").unlink()
        raise fail(f"corpus init: {error}") from None
    typer.echo(f"wrote {folder / 'pipeline.yaml'} (snapshot {name}) and "
               f"{folder / 'recipes' / 'main.yaml'}\nnext: corpus --project-dir {folder} "
               "backfill, then corpus --project-dir {folder} ui".replace("{folder}", str(folder)))


def _refresh_sample(folder: Path, seed: int) -> None:
    """Generates the sample beside `folder` and moves in only the files that differ, so an
    unchanged sample keeps its files' modification times and its runs stay up to date."""
    from curation.sample.generate import generate_sample

    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".sample-") as fresh:
        layout = generate_sample(Path(fresh), seed=seed)
        changed = 0
        for path in sorted(p for p in Path(fresh).rglob("*") if p.is_file()):
            target = folder / path.relative_to(fresh)
            if not target.is_file() or target.read_bytes() != path.read_bytes():
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(path, target)
                changed += 1
    typer.echo(f"sample: {layout.page_count} pages under {folder} ({changed} files written)")


@app.command(REPORT)
def report(
    recipe: Annotated[str, typer.Option(help="Recipe name: recipes/NAME.yaml beside the "
                                        "pipeline")],
    root: Annotated[str, typer.Option(help="Storage root: folder or s3://bucket/prefix")] = "data",
    out: Annotated[Path | None, typer.Option(
        help="Write the HTML here (default: {root}/reports/NAME/report.html with its PNGs)")
    ] = None,
    pipeline: PipelineOption = Path("pipeline.yaml"),
) -> None:
    """Write a recipe's funnel report (one self-contained HTML page) and print where."""
    from curation.report import ReportError, build_report, write_report
    from curation.storage import S3Settings, open_store

    config = load_pipeline_or_exit(pipeline)
    path = pipeline.resolve().parent / "recipes" / f"{recipe}.yaml"
    try:
        loaded = load_recipe(path, config)
    except (ConfigError, FileNotFoundError) as error:
        typer.secho(str(error), fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    store = open_store(root, S3Settings() if root.startswith("s3://") else None)
    try:
        built = build_report(store, loaded)
    except (ReportError, FileNotFoundError) as error:
        typer.secho(f"report[{recipe}]: {error}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from None
    if out is None:
        where = store.uri(write_report(store, built)["html"])
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(built.html, encoding="utf-8")
        where = str(out.resolve())
    summary = built.data["summary"]
    typer.echo(f"report[{recipe}]: {summary['documents']:,} documents -> "
               f"{summary['documents_selected']:,} selected, about "
               f"{summary['selected_tokens']:,} tokens; {summary['shard_tokens'] or 0:,} tokens "
               f"in {summary['shards']:,} shards")
    typer.echo(f"written: {where}")


@app.command("ablation")
def ablation_command(
    baseline: Annotated[str, typer.Argument(help="Recipe of the baseline proxy_eval")],
    candidate: Annotated[str, typer.Argument(help="Recipe of the candidate proxy_eval")],
    root: Annotated[str, typer.Option(help="Storage root")] = "data",
) -> None:
    """Two proxy_eval results side by side, and whether the candidate ships."""
    from corpus_assets.proxy import ablation

    table, ships = ablation(open_root(root), baseline, candidate)
    typer.echo(table)
    typer.echo(f"\nverdict: {'ships' if ships else 'hold'}")


# Benchmark scripts a user runs (the others are helpers they call, or datatrove's side).
BENCHMARKS = ("extraction", "filters", "minhash", "clustering", "decontamination", "pii",
              "tokenization", "catalog", "corpus", "proxy", "mix_fidelity", "gopher_alpha",
              "loader_throughput", "export")


@app.command("benchmark", context_settings={"allow_extra_args": True,
                                            "ignore_unknown_options": True})
def benchmark(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(help=f"One of: {', '.join(BENCHMARKS)}")] = None,
) -> None:
    """Run a benchmark script (it prints its table and writes benchmarks/results/NAME.md)."""
    if name is None:
        for script in BENCHMARKS:
            doc = (PROJECT_ROOT / "benchmarks" / f"{script}.py").read_text().split('"""')[1]
            typer.echo(f"{script:<18} {doc.strip().splitlines()[0]}")
        return
    if name not in BENCHMARKS:
        typer.secho(f"unknown benchmark {name!r}; one of: {', '.join(BENCHMARKS)}",
                    fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    script = PROJECT_ROOT / "benchmarks" / f"{name}.py"
    raise typer.Exit(subprocess.call([sys.executable, str(script), *ctx.args],
                                     cwd=PROJECT_ROOT))


@app.command("ui")
def ui(
    port: int = 3000,
    host: str = "127.0.0.1",
    root: Annotated[str, typer.Option(help="Storage root: folder or s3://bucket/prefix")] = "data",
) -> None:
    """Start the Dagster UI and daemon on this deployment; Ctrl-C stops it all.

    The UI shows the deployment's instance and partitions, and runs launched from it read the
    deployment's pipeline.yaml and data root."""
    pipeline = deployment_dir() / "pipeline.yaml"
    register(pipeline)
    env = {**os.environ, **ui_environment(root)}
    dagster = Path(sys.executable).parent / "dagster"
    # Its own process group, so a signal reaches dagster dev and everything it started.
    process = subprocess.Popen([str(dagster), "dev", "-w", str(PROJECT_ROOT / "workspace.yaml"),
                                "-h", host, "-p", str(port)], env=env, start_new_session=True)
    typer.echo(f"UI of {pipeline.parent}: http://{host}:{port} (dagster dev, process group "
               f"{process.pid}); Ctrl-C stops it", err=True)
    raise typer.Exit(wait_forwarding_signals(process))


def wait_forwarding_signals(process: subprocess.Popen, grace_seconds: float = 20) -> int:
    """Waits for `process`; SIGINT or SIGTERM is passed on to its process group, then the
    group is killed if it has not ended within `grace_seconds`."""
    stopping: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        stopping.append(signum)
        _signal_group(process.pid, signal.SIGTERM if signum == signal.SIGTERM else signal.SIGINT)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, forward)
    while process.poll() is None and not stopping:
        time.sleep(0.2)
    try:
        code = process.wait(grace_seconds)
    except subprocess.TimeoutExpired:
        code = -signal.SIGKILL
    _signal_group(process.pid, signal.SIGKILL)  # whatever it started and left behind
    return 0 if stopping else code


def _signal_group(group: int, signum: int) -> None:
    try:
        os.killpg(group, signum)
    except ProcessLookupError:  # the group has ended
        pass


if __name__ == "__main__":
    app()
