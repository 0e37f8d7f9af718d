"""great-expectations suites run as Dagster asset checks, and shared check helpers.

Each stage's output contract is a list of `TableSuite`s declared at module level beside its
check (data, so the docs and the UI show it); `contract_check` turns one into a blocking
`<asset>_contract` check. GX is imported lazily: it costs about 3 s and 270 MB, paid once per
run process, and a suite then takes about 40 ms on the sample's partitions.
"""


import importlib
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    MetadataValue,
    PartitionsDefinition,
    asset_check,
)

from checks.streams import columns_with_nulls, parquet_batches, parquet_metadata
from curation.duck import duckdb_session, ident, register_table, scalar
from curation.graph import ALL
from curation.partition import PartitionLayout
from curation.storage import Store
from resources import StorageResource


@dataclass(frozen=True)
class Expectation:
    """One GX expectation by class name and keyword arguments, e.g.
    `Expectation("ExpectColumnValuesToBeUnique", {"column": "doc_id"})`."""

    name: str
    kwargs: dict[str, Any]


def not_null(*columns: str) -> list[Expectation]:
    return [Expectation("ExpectColumnValuesToNotBeNull", {"column": c}) for c in columns]


def unique(column: str) -> Expectation:
    return Expectation("ExpectColumnValuesToBeUnique", {"column": column})


def between(column: str, low: float | None = None, high: float | None = None) -> Expectation:
    bounds = {k: v for k, v in (("min_value", low), ("max_value", high)) if v is not None}
    return Expectation("ExpectColumnValuesToBeBetween", {"column": column, **bounds})


def in_set(column: str, values: Sequence[str]) -> Expectation:
    return Expectation("ExpectColumnValuesToBeInSet", {"column": column, "value_set": list(values)})


def of_type(column: str, dtype: str) -> Expectation:
    """`dtype` as pandas names it once the column is converted (`float32`, `bool`, `int64`;
    `str` for a string column, checked value by value)."""
    return Expectation("ExpectColumnValuesToBeOfType", {"column": column, "type_": dtype})


@dataclass(frozen=True)
class Derived:
    """A column the suite judges, computed from a stored one in Arrow, so that long text never
    reaches pandas."""

    name: str
    source: str
    compute: Callable[[pa.ChunkedArray], pa.ChunkedArray]


TEXT_CHARS = Derived("text_chars", "text",
                     lambda text: pc.utf8_length(pc.utf8_trim_whitespace(text)))
"""Characters of the text without surrounding whitespace: null where the text is null."""


@dataclass(frozen=True)
class TableSuite:
    """The expectations on one stored table of an asset's partition: `part` (its main table) or
    a side table (`decisions`, `edits`, ...). Expectations on an `optional` column the table
    lacks are left out (a suite of signals the settings disable writes no columns)."""

    table: str
    expectations: tuple[Expectation, ...]
    derived: tuple[Derived, ...] = ()
    optional: frozenset[str] = frozenset()

    def present(self, columns: Sequence[str]) -> "TableSuite":
        """The suite without its expectations on optional columns not in `columns`."""
        absent = self.optional - set(columns)
        return replace(self, expectations=tuple(
            e for e in self.expectations if e.kwargs.get("column") not in absent))

    def judged_columns(self) -> list[str]:
        named = [e.kwargs["column"] for e in self.expectations if "column" in e.kwargs]
        named += [c for e in self.expectations for c in e.kwargs.get("column_list", ())]
        return list(dict.fromkeys(named))

    def stored_columns(self) -> list[str]:
        derived = {d.name: d.source for d in self.derived}
        return list(dict.fromkeys(derived.get(c, c) for c in self.judged_columns()))


def decisions_suite(asset: str, reasons: Sequence[str] | None = None) -> TableSuite:
    """The decision rows a stage writes for its drops (`curation.schema.DECISION_SCHEMA`)."""
    rows = [*not_null("doc_id", "reason"), in_set("stage", [asset]), in_set("verdict", ["drop"])]
    if reasons is not None:
        rows.append(in_set("reason", reasons))
    return TableSuite("decisions", tuple(rows))


def import_in_background() -> None:
    """Starts importing GX on a daemon thread: a stage whose workers keep the run process idle
    calls it, so the import overlaps their work instead of delaying the check that follows
    (the documents contract: 4 to 5 s of a 10,000-record run's serial time, mostly this
    import, in benchmarks/compare.py)."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    threading.Thread(target=importlib.import_module, args=("great_expectations",),
                     name="import great_expectations", daemon=True).start()


def validate(frame: pd.DataFrame, suite_name: str,
             expectations: Sequence[Expectation]) -> tuple[bool, list[dict[str, Any]]]:
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


def _absent(table: str, column: str | None) -> dict[str, Any]:
    return {"expectation": "expect_column_to_exist" if column else "expect_table_to_exist",
            "column": column or table, "success": False, "unexpected": 0, "examples": []}


def validate_table(table: pa.Table, suite: TableSuite, suite_name: str,
                   with_nulls: frozenset[str] = frozenset()) -> tuple[bool, list[dict]]:
    """One suite on a stored table: only the columns it judges reach pandas. A batch of a
    larger table names the columns `with_nulls` somewhere in the table: they take the pandas
    type a null gives the whole table's column (float for integers, object for booleans)."""
    suite = suite.present(table.column_names)
    missing = [c for c in suite.stored_columns() if c not in table.column_names]
    if missing:
        return False, [_absent(suite.table, column) for column in missing]
    for derived in suite.derived:
        table = table.append_column(derived.name, derived.compute(table[derived.source]))
    frame = table.select(suite.judged_columns()).to_pandas()
    for column in with_nulls & set(frame.columns):
        if pd.api.types.is_integer_dtype(frame[column]):
            frame[column] = frame[column].astype("float64")
        elif pd.api.types.is_bool_dtype(frame[column]):
            frame[column] = frame[column].astype(object)
    passed, rows = validate(frame, suite_name, suite.expectations)
    if suite.table != "part":
        rows = [{**row, "column": f"{suite.table}.{row['column']}"} for row in rows]
    return passed, rows


VALIDATION_BATCH_ROWS = 500_000
"""The most rows GX validates at once (pandas holds them, a few hundred bytes a row)."""
UNIQUE_EXPECTATIONS = ("ExpectColumnValuesToBeUnique", "ExpectCompoundColumnsToBeUnique")


def validate_batches(batches: Iterable[pa.Table], columns: Sequence[str], suite: TableSuite,
                     suite_name: str, duplicates: Callable[[list[str], bool], int] | None = None,
                     with_nulls: frozenset[str] = frozenset(),
                     ) -> tuple[bool, list[dict[str, Any]], int | None]:
    """One suite on a table that comes in `batches` (its stored `columns` named apart), one
    batch in memory at a time; also the number of rows (None where a judged column is missing
    and no batch was read). Each expectation's row sums the batches: success where every batch
    succeeds, the unexpected counted in all, the first examples in batch order. A uniqueness
    expectation spans batches: with more than one, `duplicates(columns, compound)` (the rows
    whose value, or combination of values, occurs more than once in the whole table; nulls
    ignored unless compound, as GX does) replaces its count and success; its examples stay
    those found within a batch."""
    suite = suite.present(columns)
    missing = [c for c in suite.stored_columns() if c not in columns]
    if missing:
        return False, [_absent(suite.table, column) for column in missing], None
    # GX reports a batch's expectations in its own order: rows are matched by what they judge.
    rows: dict[tuple[str, Any, int], dict[str, Any]] = {}
    count = batches_seen = 0
    for batch in batches:
        _, found = validate_table(batch, suite, suite_name, with_nulls)
        for position, row in enumerate(found):
            key = (row["expectation"], row["column"], sum(
                (other["expectation"], other["column"]) == (row["expectation"], row["column"])
                for other in found[:position]))
            seen = rows.setdefault(key, row)
            if seen is not row:
                rows[key] = {**seen, "success": seen["success"] and row["success"],
                             "unexpected": seen["unexpected"] + row["unexpected"],
                             "examples": (seen["examples"] + row["examples"])[:3]}
        count, batches_seen = count + batch.num_rows, batches_seen + 1
    if batches_seen > 1 and duplicates is not None:
        for expectation in suite.expectations:
            if expectation.name in UNIQUE_EXPECTATIONS:
                compound = "column_list" in expectation.kwargs
                judged = list(expectation.kwargs["column_list"] if compound
                              else [expectation.kwargs["column"]])
                key = next(key for key in rows if key[:2] == (
                    _snake(expectation.name), _reported_column(suite, expectation)))
                unexpected = duplicates(judged, compound)
                rows[key] = {**rows[key], "success": unexpected == 0, "unexpected": unexpected}
    return all(row["success"] for row in rows.values()), list(rows.values()), count


def _snake(name: str) -> str:
    """`ExpectColumnValuesToBeUnique` as GX reports it: `expect_column_values_to_be_unique`."""
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


def _reported_column(suite: TableSuite, expectation: Expectation) -> str | None:
    column = expectation.kwargs.get("column")
    return column if suite.table == "part" else f"{suite.table}.{column}"


def rebatch(tables: Iterable[pa.Table], rows: int) -> Iterator[pa.Table]:
    """The rows of `tables`, in order, in batches of `rows` (the last one shorter); one batch,
    empty, where there are no rows."""
    pending: list[pa.Table] = []
    held, schema, yielded = 0, None, False
    for table in tables:
        schema = schema or table.schema
        while table.num_rows:
            taken = table.slice(0, rows - held)
            table = table.slice(taken.num_rows)
            pending.append(taken)
            held += taken.num_rows
            if held == rows:
                yield pa.concat_tables(pending)
                pending, held, yielded = [], 0, True
    if pending or (not yielded and schema is not None):
        yield pa.concat_tables(pending) if pending else schema.empty_table()


def _stored_duplicates(layout: PartitionLayout, table: str) -> Callable[[list[str], bool], int]:
    """The rows of the partition's `table` whose judged values repeat, counted by DuckDB over
    every part (its group-by spills under the budget); a uniqueness row keeps its batches'
    examples."""

    def duplicates(columns: list[str], compound: bool) -> int:
        names = ", ".join(ident(c) for c in columns)
        where = "" if compound else f" WHERE {ident(columns[0])} IS NOT NULL"
        with duckdb_session() as con:
            register_table(con, "judged", layout, table, columns)
            return scalar(con, f"SELECT sum(n) FROM (SELECT count(*) AS n FROM judged{where}"
                               f" GROUP BY {names} HAVING count(*) > 1)")
    return duplicates


def validate_stored(store: Store, keys: Sequence[str], suite: TableSuite, suite_name: str,
                    duplicates: Callable[[list[str], bool], int] | None = None,
                    ) -> tuple[bool, list[dict[str, Any]], int]:
    """One suite on the stored Parquet objects at `keys` (one table, in order), reading only
    the judged columns a row group at a time, validated in batches of VALIDATION_BATCH_ROWS;
    also the number of rows."""
    columns = parquet_metadata(store, keys[0]).schema.to_arrow_schema().names
    judged = suite.present(columns).stored_columns()
    batches = rebatch((batch for key in keys for batch in parquet_batches(store, key, judged)),
                      VALIDATION_BATCH_ROWS)
    with_nulls = columns_with_nulls(store, keys)
    with_nulls |= {d.name for d in suite.derived if d.source in with_nulls}
    passed, rows, count = validate_batches(batches, columns, suite, suite_name, duplicates,
                                           frozenset(with_nulls))
    if count is None:
        count = sum(parquet_metadata(store, key).num_rows for key in keys)
    return passed, rows, count


def validate_tables(layout: PartitionLayout,
                    suites: Sequence[TableSuite]) -> tuple[bool, list[dict[str, Any]], int]:
    """Every suite on its table of the partition; also the main table's row count. Only the
    judged columns are read, a row group at a time, and validated in batches of at most
    VALIDATION_BATCH_ROWS rows: memory is bounded by one batch (and, from a remote store, one
    part's bytes); a duplicate across batches is counted by DuckDB, which spills."""
    passed, rows, count = True, [], 0
    for suite in suites:
        try:
            parts = layout.complete_manifest().table_parts(suite.table)
        except FileNotFoundError:
            parts = []
        if not parts:
            passed, rows = False, [*rows, _absent(suite.table, None)]
            continue
        ok, found, rows_read = validate_stored(layout.store, [part.key for part in parts], suite,
                                               f"{layout.asset}.{suite.table}",
                                               _stored_duplicates(layout, suite.table))
        count = rows_read if suite.table == "part" else count
        passed, rows = passed and ok, rows + found
    return passed, rows, count


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


def contract_result(layout: PartitionLayout, suites: Sequence[TableSuite]) -> AssetCheckResult:
    passed, rows, count = validate_tables(layout, suites)
    return expectations_result(passed, rows, {"rows": MetadataValue.int(count)})


def describe(suites: Sequence[TableSuite]) -> str:
    """The suites in a line each, for the check's description (the UI shows it)."""
    lines = []
    for suite in suites:
        said = [e.name.removeprefix("Expect") + "(" + ", ".join(
            f"{key}={value}" for key, value in e.kwargs.items()) + ")" for e in suite.expectations]
        lines.append(f"{suite.table}: {'; '.join(said)}")
    return "great-expectations suite of the stored output. " + " | ".join(lines)


def contract_check(asset: str, suites: Sequence[TableSuite],
                   partitions_def: PartitionsDefinition | None) -> AssetChecksDefinition:
    """The blocking `<asset>_contract` check: every suite on its table of the checked partition
    (`ALL` for an unpartitioned asset); a failure names the expectation and the column."""

    @asset_check(asset=asset, name=f"{asset}_contract", blocking=True,
                 partitions_def=partitions_def, description=describe(suites))
    def contract(context: AssetCheckExecutionContext,
                 storage: StorageResource) -> AssetCheckResult:
        partition = context.op_execution_context.partition_key if partitions_def else ALL
        return contract_result(PartitionLayout(storage.store, asset, partition), suites)

    return contract


def with_expectation(suite: TableSuite, expectation: Expectation) -> TableSuite:
    """`suite` with one more expectation known only at run time."""
    return replace(suite, expectations=(*suite.expectations, expectation))
