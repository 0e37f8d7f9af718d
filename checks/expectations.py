"""great-expectations suites run as Dagster asset checks, and shared check helpers.

GX is imported lazily: it costs about 3 s and 270 MB, paid only by runs that execute a check.
"""


import importlib
import os
import threading
from dataclasses import dataclass
from typing import Any

import pandas as pd
from dagster import AssetCheckResult, AssetCheckSeverity, MetadataValue


@dataclass(frozen=True)
class Expectation:
    """One GX expectation by class name and keyword arguments, e.g.
    `Expectation("ExpectColumnValuesToBeUnique", {"column": "doc_id"})`."""

    name: str
    kwargs: dict[str, Any]


def import_in_background() -> None:
    """Starts importing GX on a daemon thread: a stage whose workers keep the run process idle
    calls it, so the import overlaps their work instead of delaying the check that follows
    (the documents contract: 4 to 5 s of a 10,000-record run's serial time, mostly this
    import, in benchmarks/compare.py)."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    threading.Thread(target=importlib.import_module, args=("great_expectations",),
                     name="import great_expectations", daemon=True).start()


def validate(frame: pd.DataFrame, suite_name: str,
             expectations: list[Expectation]) -> tuple[bool, list[dict[str, Any]]]:
    """Runs the expectations on a pandas frame in an ephemeral GX context."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    source = context.data_sources.add_pandas(suite_name)
    batch_definition = source.add_dataframe_asset(suite_name).add_batch_definition_whole_dataframe(
        "whole"
    )
    suite = gx.ExpectationSuite(name=suite_name)
    for expectation in expectations:
        suite.add_expectation(getattr(gx.expectations, expectation.name)(**expectation.kwargs))
    result = batch_definition.get_batch(batch_parameters={"dataframe": frame}).validate(suite)
    rows = [
        {
            "expectation": item.expectation_config.type,
            "column": item.expectation_config.kwargs.get("column"),
            "success": bool(item.success),
            "unexpected": int(item.result.get("unexpected_count") or 0),
            "examples": [str(value)[:80]
                         for value in (item.result.get("partial_unexpected_list") or [])[:3]],
        }
        for item in result.results
    ]
    return bool(result.success), rows


def expectations_result(passed: bool, rows: list[dict[str, Any]],
                        extra: dict[str, Any] | None = None) -> AssetCheckResult:
    table = ["| expectation | column | ok | unexpected | examples |",
             "| --- | --- | --- | ---: | --- |"]
    table += [f"| {r['expectation']} | {r['column']} | {'yes' if r['success'] else 'NO'} | "
              f"{r['unexpected']} | {', '.join(r['examples'])} |" for r in rows]
    metadata: dict[str, Any] = {
        "expectations": MetadataValue.md("\n".join(table)),
        "failed_expectations": MetadataValue.int(sum(not r["success"] for r in rows)),
    }
    metadata.update(extra or {})
    failed = [f"{r['expectation']}({r['column']}): {r['unexpected']} unexpected"
              + (f", e.g. {', '.join(r['examples'])}" if r["examples"] else "")
              for r in rows if not r["success"]]
    return AssetCheckResult(passed=passed, severity=AssetCheckSeverity.ERROR, metadata=metadata,
                            description="; ".join(failed) or f"all {len(rows)} expectations met")
