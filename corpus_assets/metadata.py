"""Stage statistics as typed Dagster metadata, so the UI plots them across partitions and runs."""


from collections import Counter
from collections.abc import Callable
from typing import Any

from dagster import AssetExecutionContext, MetadataValue

from curation.stats import StageStats
from curation.tasks import TaskResult

PREVIEW_CHARS = 300


def counter_table(counts: Counter[str], label: str) -> MetadataValue:
    lines = [f"| {label} | count |", "| --- | ---: |"]
    lines += [f"| {key} | {value} |" for key, value in counts.most_common()]
    return MetadataValue.md("\n".join(lines) if counts else f"no {label}")


def stage_metadata(stats: StageStats, wall_seconds: float) -> dict[str, Any]:
    """Rows in and out, bytes, survival, counts per reject reason, time and rate."""
    metadata: dict[str, Any] = {
        "records_in": MetadataValue.int(stats.records_in),
        "candidates": MetadataValue.int(stats.candidates),
        "rows_out": MetadataValue.int(stats.docs_out),
        "rejected": MetadataValue.int(stats.rejected),
        "survival_rate": MetadataValue.float(round(stats.survival, 4)),
        "input_bytes": MetadataValue.int(stats.input_bytes),
        "html_bytes": MetadataValue.int(stats.html_bytes),
        "text_bytes": MetadataValue.int(stats.text_bytes),
        "wall_seconds": MetadataValue.float(round(wall_seconds, 2)),
        "tasks_run": MetadataValue.int(stats.tasks_run),
        "tasks_skipped": MetadataValue.int(stats.tasks_skipped),
        "rejects_by_reason": counter_table(stats.rejects, "reason"),
        "non_html_by_type": counter_table(stats.non_html, "content type"),
        "records_by_type": counter_table(stats.record_types, "WARC record type"),
    }
    for reason, count in sorted(stats.rejects.items()):
        metadata[f"rejects.{reason}"] = MetadataValue.int(count)
    # Only when every task ran now: documents of tasks done earlier took no time in this run.
    if stats.tasks_run and not stats.tasks_skipped and wall_seconds:
        metadata["docs_per_second"] = MetadataValue.float(round(stats.docs_out / wall_seconds, 2))
    return metadata


def samples_preview(samples: list[dict[str, Any]], path: str) -> dict[str, Any]:
    """A truncated preview of the spot-check samples and the path of the purgeable file."""
    lines = []
    for row in samples:
        text = " ".join(row["text"].split())[:PREVIEW_CHARS]
        lines.append(f"**{row['doc_id']}** {row.get('url') or ''}\n\n> {text}…\n")
    return {
        "samples_preview": MetadataValue.md("\n".join(lines) or "no documents"),
        "samples_path": MetadataValue.path(path),
    }


def task_logger(context: AssetExecutionContext,
                partition: str) -> Callable[[TaskResult, int, int], None]:
    """Logs each finished task (not each document) with its output and progress."""

    def log(result: TaskResult, done: int, total: int) -> None:
        state = "skipped (done earlier)" if result.skipped else f"{result.stats.docs_out} kept"
        context.log.info(f"{context.op_execution_context.op.name}[{partition}] task "
                         f"{result.index}: {state}; {done}/{total} tasks")

    return log
