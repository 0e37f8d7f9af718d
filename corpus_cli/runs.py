"""What the CLI prints about the main job's runs: a line per run, the per-stage summary in
pipeline order, and for every failure one line (asset, partition, check or step, and the reason),
then what did not run and the command that resumes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import typer

from curation.graph import ALL

# Dagster's own wrappers around the exception a step raised; the reason is further down.
_WRAPPERS = ("Dagster", "RemoteTraceback", "_RemoteTraceback")
_MAX_REASON = 400


@dataclass
class RunReport:
    """The summary rows, failures and warnings of the runs made, and the runs never started."""

    rows: list[dict] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)
    failed_runs: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures and not self.failed_runs


def label(run: Any) -> str:
    return f"{run.job}[{run.partition or ALL}]"


def run_line(run: Any, seconds: float) -> str:
    """One line per run as it ends: ok, FAILED or up to date."""
    if run.skipped:
        return f"{label(run)}: up to date, skipped"
    failed = len(check_failures(run)[0]) + len(step_failures(run))
    status = "ok" if run.result.success and not failed else f"FAILED ({failed} below)"
    return f"{label(run)}: run {run.result.run_id[:8]} {status} at {seconds:.1f} s"


def add_run(report: RunReport, run: Any) -> None:
    """Adds a finished (or skipped) run's rows, failures and warnings to the report."""
    if run.skipped:
        report.rows.append({"stage": f"({run.job} job)", "partition": run.partition or ALL,
                            "in": None, "out": None, "survival": None, "seconds": None,
                            "note": "up to date, skipped"})
        return
    report.rows += summary_rows(run)
    failures, warnings = check_failures(run)
    report.failures += failures + step_failures(run)
    report.warnings += warnings + input_file_warnings(run)
    if not run.result.success:
        report.failed_runs.append(run.result.run_id)
        missing = _not_materialized(run)
        if missing:
            report.incomplete.append(f"{label(run)}: not materialized: {', '.join(missing)}")


def check_failures(run: Any) -> tuple[list[str], list[str]]:
    """(failed blocking checks, failed warning checks), one line each with the reason."""
    failures, warnings = [], []
    for evaluation in run.result.get_asset_check_evaluations():
        if evaluation.passed:
            continue
        partition = evaluation.partition or run.partition or ALL
        where = f"{evaluation.asset_key.to_user_string()}[{partition}]"
        line = f"{where} check {evaluation.check_name}: {_check_reason(evaluation)}"
        (failures if evaluation.severity.value == "ERROR" else warnings).append(line)
    return failures, warnings


def input_file_warnings(run: Any) -> list[str]:
    """Files in a snapshot folder that are not WARC files, and input files that gave no
    documents, or only part of theirs, where the `documents_files_readable` gate let them
    through (its own line names them when it fails)."""
    from curation.inputs import name_files
    from curation.stages.documents import describe_problem_files

    failed = {evaluation.asset_key for evaluation in run.result.get_asset_check_evaluations()
              if evaluation.check_name == "documents_files_readable" and not evaluation.passed}
    lines = []
    for event in run.result.get_asset_materialization_events():
        materialization = event.event_specific_data.materialization
        where = f"{materialization.asset_key.to_user_string()}[{run.partition or ALL}]"
        ignored = materialization.metadata.get("ignored_files")
        if ignored is not None and ignored.value:
            lines.append(f"{where}: not WARC files, not read: {name_files(ignored.value)}")
        table = materialization.metadata.get("problem_files")
        if table is None or not table.value.records or materialization.asset_key in failed:
            continue
        rows = [record.data for record in table.value.records]
        lines.append(f"{where}: {len(rows)} input file(s) gave no documents or only part of "
                     f"theirs: {describe_problem_files(rows)}")
    return lines


def _check_reason(evaluation: Any) -> str:
    if evaluation.description:
        return _one_line(evaluation.description)
    values = ", ".join(f"{key}={getattr(value, 'value', value)}"
                       for key, value in (evaluation.metadata or {}).items())
    return _one_line(values or "no reason given")


def step_failures(run: Any) -> list[str]:
    """A line per step that raised (a failed blocking check's step is its check's line)."""
    from dagster import DagsterEventType

    if run.result.success:
        return []
    lines = []
    for event in run.result.all_events:
        if event.event_type != DagsterEventType.STEP_FAILURE:
            continue
        error = event.event_specific_data.error
        if error is None or error.cls_name == "DagsterAssetCheckFailedError":
            continue
        lines.append(f"{event.step_key}[{run.partition or ALL}] step failed: "
                     f"{error_line(error)}")
    return lines


def error_line(error: Any) -> str:
    """The exception a step raised, as `Class: message` on one line: the first error in the
    chain that is not one of Dagster's wrappers (never the traceback)."""
    chain = error
    while chain.cause is not None and chain.cls_name.startswith(_WRAPPERS):
        chain = chain.cause
    message = chain.message.strip()
    prefix, _, rest = message.partition(": ")
    if "." in prefix and " " not in prefix:  # `module.path.Class: text` -> `Class: text`
        message = f"{prefix.rsplit('.', 1)[-1]}: {rest}"
    return _one_line(message)


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _MAX_REASON else line[:_MAX_REASON - 3] + "..."


def _not_materialized(run: Any) -> list[str]:
    from corpus_assets.main_job import job_asset_keys

    done = {event.asset_key for event in run.result.get_asset_materialization_events()}
    return [key.to_user_string() for key in job_asset_keys(run.job) if key not in done]


# --- the per-stage summary -------------------------------------------------------------------


def summary_rows(run: Any) -> list[dict]:
    """One row per materialization of the run, in pipeline order."""
    from corpus_assets.main_job import pipeline_order

    rank = {key: index for index, key in enumerate(pipeline_order())}
    events = sorted(run.result.get_asset_materialization_events(),
                    key=lambda event: rank.get(event.asset_key, len(rank)))
    rows = []
    for event in events:
        materialization = event.event_specific_data.materialization
        meta = {key: value.value for key, value in materialization.metadata.items()}
        rows.append({
            "stage": materialization.asset_key.to_user_string(),
            "partition": run.partition or ALL,
            "in": meta.get("candidates", meta.get("files")),
            "out": meta.get("rows_out", meta.get("documents_selected", meta.get("files"))),
            "survival": meta.get("survival_rate"),
            "seconds": meta.get("wall_seconds", meta.get("train_seconds")),
            "note": note(meta),
        })
    return rows


def note(meta: dict) -> str:
    """The stage-specific figure of the summary line, from the materialization's metadata."""
    if "roc_auc" in meta:
        return f"held-out ROC AUC {meta['roc_auc']:.3f}"
    if "mean_accuracy" in meta:  # proxy_eval names a dataset version but holds no shards
        return (f"mean accuracy {meta['mean_accuracy']:.3f} after {meta['tokens_trained']:,} "
                f"tokens, version {meta['dataset_version']}")
    shards = meta.get("shards")  # a count of files, in the shards' and the report's metadata
    if "dataset_version" in meta and shards is not None:
        # The report has other token figures, so it calls the shards' total `shard_tokens`.
        tokens = meta["shard_tokens"] if "report_path" in meta else meta["tokens"]
        line = f"{tokens:,} tokens in {shards:,} shards, version {meta['dataset_version']}"
        return f"{line}: {meta['report_path']}" if "report_path" in meta else line
    if "vocab_size" in meta:
        return f"{meta['how']} tokenizer, {meta['vocab_size']:,} ids"
    if "occurrences" in meta and "tokens" in meta:
        return f"{meta['occurrences']:,} occurrences, {meta['tokens']:,} tokens"
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


def print_failures(report: RunReport, resume: str, home: str) -> None:
    """Warnings, then every failure with its reason, what did not run, where the full logs
    are and the command that resumes (on stderr)."""
    for line in report.warnings:
        typer.secho(f"warning: {line}", fg=typer.colors.YELLOW, err=True)
    if report.ok:
        return
    typer.secho(f"\n{len(report.failures)} failure(s):", fg=typer.colors.RED, err=True)
    for line in report.failures:
        typer.secho(f"  {line}", fg=typer.colors.RED, err=True)
    for line in report.incomplete:
        typer.secho(f"  {line}", err=True)
    if report.not_run:
        typer.secho(f"not run (they read what failed): {', '.join(report.not_run)}", err=True)
    runs = ", ".join(run_id[:8] for run_id in report.failed_runs)
    typer.secho(f"full logs: run {runs} in the Dagster instance {home} (corpus ui, Runs), or "
                "re-run with --verbose", err=True)
    typer.secho(f"fix the cause, then resume (what is up to date is skipped): {resume}",
                err=True)
