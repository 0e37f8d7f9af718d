"""The project CLI: what the Dagster CLI and UI do not cover."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from corpus_cli.lineage import lineage_app, shards_app, takedown_app
from curation.config import (
    ConfigError,
    dataset_version,
    load_pipeline,
    load_recipe,
    recipe_names,
)

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_HOME = PROJECT_ROOT / ".dagster_home"

app = typer.Typer(help="LLM pretraining-data platform: run, register, inspect.",
                  no_args_is_help=True, add_completion=False)
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
app.add_typer(shards_app, name="shards")

PipelineOption = Annotated[Path, typer.Option(help="The deployment's pipeline.yaml")]


def dagster_home() -> Path:
    """The Dagster instance folder: $DAGSTER_HOME, else `.dagster_home` with the repo's
    `dagster.yaml` in it (so the CLI, `dagster dev` and the UI share one instance)."""
    home = Path(os.environ.get("DAGSTER_HOME") or DEFAULT_HOME).resolve()
    home.mkdir(parents=True, exist_ok=True)
    settings = home / "dagster.yaml"
    if not settings.exists() and (PROJECT_ROOT / "dagster.yaml").exists():
        shutil.copyfile(PROJECT_ROOT / "dagster.yaml", settings)
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def _instance():
    from dagster import DagsterInstance

    dagster_home()
    return DagsterInstance.get()


def _load_pipeline_or_exit(path: Path):
    try:
        return load_pipeline(path)
    except ConfigError as error:
        typer.secho(str(error), fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None


# --- config ----------------------------------------------------------------------------------


@config_app.command("validate")
def config_validate(
    pipeline: PipelineOption = Path("pipeline.yaml"),
    recipe: Annotated[list[Path] | None, typer.Option(help="Recipe files to check")] = None,
) -> None:
    """Validate pipeline.yaml and recipes; print partitions and each recipe's config version."""
    config = _load_pipeline_or_exit(pipeline)
    typer.echo(f"{pipeline}: valid; partitions: {', '.join(config.partition_keys())}")
    for path in recipe or []:
        try:
            loaded = load_recipe(path, config)
        except ConfigError as error:
            typer.secho(str(error), fg=typer.colors.RED, err=True)
            raise typer.Exit(2) from None
        version = dataset_version(loaded, config, takedown_version="none",
                                  input_data_versions={}, code_versions={})
        typer.echo(f"{path}: valid; recipe {loaded.name}, configuration hash {version}")


# --- partitions ------------------------------------------------------------------------------


def register(pipeline: Path) -> list[str]:
    """Adds the pipeline's partitions and the recipes beside it to the instance; returns the
    ones that were new."""
    from partitions import RECIPE_PARTITIONS_NAME, SNAPSHOT_PARTITIONS_NAME

    config = _load_pipeline_or_exit(pipeline)
    instance = _instance()
    added = []
    for name, declared in ((SNAPSHOT_PARTITIONS_NAME, config.partition_keys()),
                           (RECIPE_PARTITIONS_NAME, _recipes(pipeline))):
        known = set(instance.get_dynamic_partitions(name))
        missing = [key for key in declared if key not in known]
        if missing:
            instance.add_dynamic_partitions(name, missing)
        added += missing
    return added


def _recipes(pipeline: Path) -> list[str]:
    """The recipe partitions: every recipe beside the pipeline, validated now."""
    config = _load_pipeline_or_exit(pipeline)
    folder = pipeline.resolve().parent / "recipes"
    for name in recipe_names(folder):
        try:
            load_recipe(folder / f"{name}.yaml", config)
        except ConfigError as error:
            typer.secho(str(error), fg=typer.colors.RED, err=True)
            raise typer.Exit(2) from None
    return recipe_names(folder)


@snapshots_app.command("register")
def snapshots_register(pipeline: PipelineOption = Path("pipeline.yaml")) -> None:
    """Register every snapshot and source of pipeline.yaml as a partition."""
    added = register(pipeline)
    typer.echo(f"registered: {', '.join(added)}" if added else "nothing new to register")


@snapshots_app.command("list")
def snapshots_list() -> None:
    """List the registered partitions."""
    from partitions import SNAPSHOT_PARTITIONS_NAME

    for key in _instance().get_dynamic_partitions(SNAPSHOT_PARTITIONS_NAME):
        typer.echo(key)


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


def _run_plan(partitions: list[str], recipes: list[str]) -> list[str]:
    """`job[partition]` of every run `run_main_jobs` makes, in its order."""
    from corpus_assets.definitions import MAIN_JOBS
    from corpus_assets.main_job import PER_PARTITION_JOBS, PER_RECIPE_JOBS

    return [f"{job}[{key}]" for job in MAIN_JOBS
            for key in (partitions if job in PER_PARTITION_JOBS
                        else recipes if job in PER_RECIPE_JOBS else ["all"])]


def materialize_partitions(partitions: list[str], workers: int, root: str,
                           pipeline: Path) -> list[dict]:
    """Runs the main jobs for the partitions on the instance, with a progress bar; returns
    summary rows."""
    from corpus_assets.main_job import main_run_config, run_main_jobs

    started = time.perf_counter()
    recipes = _recipes(pipeline)
    plan = _run_plan(partitions, recipes)
    with _run_progress() as progress:
        task = progress.add_task(f"running {plan[0]}" if plan else "", total=len(plan))

        def on_run(run) -> None:  # noqa: ANN001 - a JobRun
            result = run.result
            failed = [c.check_name for c in result.get_asset_check_evaluations()
                      if not c.passed and c.severity.value == "ERROR"]
            status = "ok" if result.success and not failed else f"FAILED {failed or ''}"
            line = (f"{run.job}[{run.partition or 'all'}]: run {result.run_id[:8]} {status} "
                    f"at {time.perf_counter() - started:.1f} s")
            progress.console.print(line, markup=False, highlight=False)
            done = int(progress.tasks[0].completed) + 1
            progress.update(task, advance=1, description=f"running {plan[done]}"
                            if done < len(plan) else "main job done")

        runs = run_main_jobs(_instance(), partitions,
                             main_run_config(str(pipeline), root, workers), on_run,
                             recipes=recipes)
    if not runs[-1].result.success:
        raise typer.Exit(1)
    return [row for run in runs for row in _summary_rows(run.result, run.partition or "all")]


def _summary_rows(result, partition: str) -> list[dict]:
    rows = []
    for event in result.get_asset_materialization_events():
        materialization = event.event_specific_data.materialization
        meta = {key: value.value for key, value in materialization.metadata.items()}
        stage = materialization.asset_key.to_user_string()
        rows.append({
            "stage": stage, "partition": partition,
            "in": meta.get("candidates", meta.get("files")),
            "out": meta.get("rows_out", meta.get("documents_selected", meta.get("files"))),
            "survival": meta.get("survival_rate"),
            "seconds": meta.get("wall_seconds", meta.get("train_seconds")),
            "note": _note(meta),
        })
    return rows


def _note(meta: dict) -> str:
    if "roc_auc" in meta:
        return f"held-out ROC AUC {meta['roc_auc']:.3f}"
    if "dataset_version" in meta:
        return (f"{meta.get('tokens', 0):,} tokens in {meta.get('shards', 0)} shards, "
                f"version {meta['dataset_version']}")
    if "vocab_size" in meta:
        return f"{meta['how']} tokenizer, {meta['vocab_size']:,} ids"
    if "estimated_tokens" in meta:
        return f"{meta['occurrences']:,} occurrences, about {meta['estimated_tokens']:,} tokens"
    return ""


def print_summary(rows: list[dict]) -> None:
    typer.echo(f"\n{'stage':<20}{'partition':<18}{'in':>7}{'out':>7}{'survival':>10}{'s':>7}")
    for row in rows:
        survival = "" if row["survival"] is None else f"{row['survival']:.1%}"
        seconds = "" if row["seconds"] is None else f"{row['seconds']:.1f}"
        count_in = "" if row["in"] is None else row["in"]
        count_out = "" if row["out"] is None else row["out"]
        typer.echo(f"{row['stage']:<20}{row['partition']:<18}{count_in:>7}{count_out:>7}"
                   f"{survival:>10}{seconds:>7}  {row['note']}".rstrip())


@app.command("backfill")
def backfill(
    partition: Annotated[list[str] | None, typer.Option(help="Partitions (default: all)")] = None,
    workers: Annotated[int, typer.Option(help="Worker processes per partition")] = 2,
    root: Annotated[str, typer.Option(help="Storage root: folder or s3://bucket/prefix")] = "data",
    pipeline: PipelineOption = Path("pipeline.yaml"),
) -> None:
    """Register and materialize every per-snapshot asset for the given partitions."""
    register(pipeline)
    config = _load_pipeline_or_exit(pipeline)
    print_summary(materialize_partitions(partition or config.partition_keys(), workers, root,
                                         pipeline))


@sample_app.command("generate")
def sample_generate(
    out: Annotated[Path, typer.Option(help="Where to write the sample")] = Path("data/sample"),
    seed: int = 1234,
) -> None:
    """Write the built-in sample (WARC files, a curated source, an eval file, lists)."""
    from curation.sample.generate import generate_sample

    layout = generate_sample(out, seed=seed)
    typer.echo(f"sample: {layout.page_count} pages under {layout.root}")


@sample_app.command("run")
def sample_run(
    workers: Annotated[int, typer.Option(help="Worker processes per partition")] = 2,
    root: Annotated[str, typer.Option(help="Storage root")] = "data",
) -> None:
    """The main job on the built-in sample: generate, register, materialize, summarise."""
    os.chdir(PROJECT_ROOT)
    sample_generate(Path("data/sample"), 1234)
    pipeline = Path("pipeline.yaml")
    added = register(pipeline)
    typer.echo(f"registered partitions: {', '.join(added) or 'already registered'}")
    config = _load_pipeline_or_exit(pipeline)
    rows = materialize_partitions(config.partition_keys(), workers, root, pipeline)
    print_summary(rows)
    for name in _recipes(pipeline):
        report_html = Path(root) / "reports" / name / "report.html"
        if report_html.exists():
            typer.echo(f"\nFunnel report of recipe {name}: {report_html.resolve()}")
    typer.echo(
        f"\nOpen the UI:  DAGSTER_HOME={dagster_home()} .venv/bin/dagster dev -w workspace.yaml"
        "\n              (or: .venv/bin/corpus ui), then browse http://127.0.0.1:3000"
    )


@app.command("report")
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
    from curation.storage import open_store
    from resources import S3ClientFactory

    config = _load_pipeline_or_exit(pipeline)
    path = pipeline.resolve().parent / "recipes" / f"{recipe}.yaml"
    try:
        loaded = load_recipe(path, config)
    except (ConfigError, FileNotFoundError) as error:
        typer.secho(str(error), fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    store = open_store(root, S3ClientFactory(()) if root.startswith("s3://") else None)
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
               f"in the shards")
    typer.echo(f"written: {where}")


@app.command("ablation")
def ablation_command(
    baseline: Annotated[str, typer.Argument(help="Recipe of the baseline proxy_eval")],
    candidate: Annotated[str, typer.Argument(help="Recipe of the candidate proxy_eval")],
    root: Annotated[str, typer.Option(help="Storage root")] = "data",
) -> None:
    """Two proxy_eval results side by side, and whether the candidate ships."""
    from corpus_assets.proxy import ablation
    from corpus_cli.lineage import _store

    table, ships = ablation(_store(root), baseline, candidate)
    typer.echo(table)
    typer.echo(f"\nverdict: {'ships' if ships else 'hold'}")


# Benchmark scripts a user runs (the others are helpers they call, or datatrove's side).
BENCHMARKS = ("extraction", "filters", "minhash", "clustering", "decontamination", "pii",
              "tokenization", "catalog", "corpus", "proxy")


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
            typer.echo(f"{script:<16}{doc.strip().splitlines()[0]}")
        return
    if name not in BENCHMARKS:
        typer.secho(f"unknown benchmark {name!r}; one of: {', '.join(BENCHMARKS)}",
                    fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    script = PROJECT_ROOT / "benchmarks" / f"{name}.py"
    raise typer.Exit(subprocess.call([sys.executable, str(script), *ctx.args],
                                     cwd=PROJECT_ROOT))


@app.command("ui")
def ui(port: int = 3000, host: str = "127.0.0.1") -> None:
    """Start the Dagster UI and daemon on this project's instance."""
    os.chdir(PROJECT_ROOT)
    dagster_home()
    dagster = Path(sys.executable).parent / "dagster"
    raise typer.Exit(subprocess.call([str(dagster), "dev", "-w", "workspace.yaml", "-h", host,
                                      "-p", str(port)]))


if __name__ == "__main__":
    app()
