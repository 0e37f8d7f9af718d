"""The funnel report's aggregation step: `curation.report`'s own functions vs the whole step as
one polars (lazy) query vs DuckDB SQL, on one synthetic partition of realistic shape.

    .venv/bin/python benchmarks/report_aggregations.py [--docs 1000000] [--repeats 5]

The step measured is what `compute_report` does per partition once the tables are read: left
joins of the per-document tables on `doc_id` (documents with text bytes, language, quality
score, scrubbed bytes, one first-reason-of-drop table per pipeline stage, the mix's rules),
the first-failure attribution (stage and reason per document), then the funnel rows, the
removals per (stage, reason), the language mix and the per-flag counts. Reading Parquet is the
same for all three and left out. The input: `--docs` documents, 90 % web, 8 languages (1 %
none), each pipeline stage dropping about 4 % with one of 4 reasons (and writing a `keep`
row for 4 % more), the mix selecting about 60 % and dropping the rest under its rules.

Each implementation runs in a fresh process (so peak RSS is its own): median wall time over
`--repeats` runs, and the process's peak RSS after them minus its RSS with the inputs built.

Measured with 1,000,000 documents before the report moved its attribution (`_attribute`) to
polars: report (then pyarrow compute + numpy, `to_pylist` per flag column) 3.00 s / 450 MiB,
polars 1.46 s / 93 MiB, DuckDB 1.19 s / 726 MiB.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from curation import report  # noqa: E402
from curation.mix import DEFAULT_BYTES_PER_TOKEN, RULES, SELECTED  # noqa: E402
from curation.schema import WEB_SOURCE  # noqa: E402

IMPLEMENTATIONS = ("report", "polars", "duckdb")
LANGUAGES = ("en", "de", "fr", "es", "it", "nl", "pl", "pt")
FLAG_STAGES = [stage for stage, _ in report.PIPELINE_STAGES]


def _inputs(docs: int, seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    ids = np.array([f"doc-{i:09d}" for i in rng.permutation(docs)], dtype=object)
    sources = np.where(rng.random(docs) < 0.9, WEB_SOURCE, "wikipedia").astype(object)
    languages = np.array(LANGUAGES, dtype=object)[rng.integers(len(LANGUAGES), size=docs)]
    languages[rng.random(docs) < 0.01] = None
    text_bytes = rng.integers(200, 20_000, size=docs)
    tables = {
        "documents": pa.table({"doc_id": pa.array(ids, pa.string()),
                               "source": pa.array(sources, pa.string()),
                               "text_bytes": text_bytes}),
        "language": pa.table({"doc_id": pa.array(ids, pa.string()),
                              "language": pa.array(languages, pa.string())}),
        "quality": pa.table({"doc_id": pa.array(ids[sources == WEB_SOURCE], pa.string()),
                             "quality_score": rng.random(int((sources == WEB_SOURCE).sum()))}),
        "scrubbed": pa.table({"doc_id": pa.array(ids, pa.string()),
                              "final_bytes": (text_bytes * 0.95).astype(np.int64)}),
    }
    decisions = {}
    for stage in FLAG_STAGES:
        rows = rng.choice(docs, size=int(docs * 0.08), replace=False)
        verdict = np.where(np.arange(rows.size) % 2 == 0, "drop", "keep").astype(object)
        reason = np.array([f"{stage}_reason_{r}" for r in rng.integers(4, size=rows.size)],
                          dtype=object)
        decisions[stage] = pa.table({"doc_id": pa.array(ids[rows], pa.string()),
                                     "verdict": pa.array(verdict, pa.string()),
                                     "reason": pa.array(reason, pa.string())})
    rules = np.array([*RULES, *[SELECTED] * (len(RULES) * 2)], dtype=object)
    rule = rules[rng.integers(len(rules), size=docs)]
    tokens = np.where(rule == SELECTED, text_bytes // 4, 0)
    tables["mix"] = pa.table({"doc_id": pa.array(ids, pa.string()),
                              "rule": pa.array(rule, pa.string()),
                              "exact_tokens": pa.array(tokens, pa.int64(),
                                                       mask=rule != SELECTED)})
    return {"tables": tables, "decisions": decisions, "rate": DEFAULT_BYTES_PER_TOKEN}


# --- curation.report's own functions (pyarrow joins, polars attribution and languages) ---


def run_report(data: dict[str, Any]) -> Any:
    t = data["tables"]
    table = t["documents"]
    for name in ("language", "quality", "scrubbed"):
        table = report._join(table, t[name])
    for stage in FLAG_STAGES:
        table = report._join(table, report._drops(data["decisions"][stage], f"flag.{stage}"))
    table = report._join(table, t["mix"].rename_columns(["doc_id", "rule", "exact_tokens"]))
    table = table.sort_by("doc_id")
    rates = np.full(table.num_rows, data["rate"])
    final = pa.compute.coalesce(table["exact_tokens"],
                                pa.array(report._estimate(table["final_bytes"], rates)))
    frame = (table.append_column("tokens", pa.array(report._estimate(table["text_bytes"], rates)))
             .append_column("final_tokens", final).drop_columns(["exact_tokens"]))
    stage, reason = report._attribute(frame)
    part = report._Partition("p", frame, stage, reason)
    ingest = report._ingest_row({}, frame.num_rows)
    return (report._funnel_rows(part, ingest), report._removals([part], {}),
            report._languages([part]))


# --- polars ------------------------------------------------------------------------------


def run_polars(data: dict[str, Any]) -> Any:
    import polars as pl

    t = data["tables"]
    frame = pl.from_arrow(t["documents"]).lazy()
    for name in ("language", "quality", "scrubbed"):
        frame = frame.join(pl.from_arrow(t[name]).lazy(), on="doc_id", how="left")
    for stage in FLAG_STAGES:
        drops = (pl.from_arrow(data["decisions"][stage]).lazy()
                 .filter(pl.col("verdict") == "drop")
                 .group_by("doc_id").agg(pl.col("reason").min().alias(f"flag.{stage}")))
        frame = frame.join(drops, on="doc_id", how="left")
    frame = frame.join(pl.from_arrow(t["mix"]).lazy(), on="doc_id", how="left")

    def estimate(column: str) -> pl.Expr:
        return (pl.col(column).fill_null(0) / data["rate"]).round(0) \
            .clip(lower_bound=1).cast(pl.Int64)

    stage = pl.when(pl.col("rule") == SELECTED).then(pl.lit(""))
    reason = pl.when(pl.col("rule") == SELECTED).then(pl.lit(""))
    for name in FLAG_STAGES:
        hit = pl.col(f"flag.{name}").is_not_null()
        stage, reason = stage.when(hit).then(pl.lit(name)), reason.when(hit).then(
            pl.col(f"flag.{name}"))
    stage = stage.otherwise(report.SELECTION_PREFIX + pl.col("rule"))
    reason = reason.otherwise(pl.when(pl.col("rule") == "language").then(
        pl.format("language {} not in the recipe", pl.col("language").fill_null("None")))
        .otherwise(pl.col("rule")))
    frame = frame.sort("doc_id").with_columns(
        tokens=estimate("text_bytes"),
        final_tokens=pl.coalesce("exact_tokens", estimate("final_bytes")),
        stage=stage, reason=reason).collect()
    per_stage = frame.group_by("stage").agg(pl.len().alias("dropped"),
                                            pl.col("tokens").sum().alias("tokens_dropped"))
    selected = pl.col("stage") == ""
    flags = frame.select([pl.col(f"flag.{s}").is_not_null().sum().alias(s)
                          for s in FLAG_STAGES]
                         + [(pl.col(f"flag.{s}").is_not_null() & selected).sum()
                            .alias(f"kept.{s}") for s in FLAG_STAGES])
    removals = (frame.filter(~selected).group_by("stage", "reason")
                .agg(pl.len().alias("dropped"), pl.col("tokens").sum().alias("tokens_dropped")))
    flagged = [frame.group_by(f"flag.{s}").agg(pl.len()) for s in FLAG_STAGES]
    languages = (frame.with_columns(pl.col("language").fill_null("(none)"))
                 .group_by("language")
                 .agg(pl.len().alias("documents"), selected.sum().alias("selected"),
                      pl.when(selected).then(pl.col("final_tokens")).otherwise(0).sum()
                      .alias("selected_tokens"))
                 .sort(["documents", "language"], descending=[True, False]))
    return per_stage.rows(), flags.rows(), removals.rows(), [f.rows() for f in flagged], \
        languages.rows()


# --- DuckDB ------------------------------------------------------------------------------


def run_duckdb(data: dict[str, Any]) -> Any:
    import duckdb

    con = duckdb.connect()
    t = data["tables"]
    for name, table in t.items():
        con.register(name, table)
    joins, flag_columns = [], []
    for i, stage in enumerate(FLAG_STAGES):
        con.register(f"decisions_{i}", data["decisions"][stage])
        joins.append(f"LEFT JOIN (SELECT doc_id, min(reason) AS f FROM decisions_{i} "
                     f"WHERE verdict = 'drop' GROUP BY doc_id) d{i} USING (doc_id)")
        flag_columns.append(f'd{i}.f AS "flag.{stage}"')
    first = " ".join(f"WHEN \"flag.{s}\" IS NOT NULL THEN '{s}'" for s in FLAG_STAGES)
    first_reason = " ".join(f'WHEN "flag.{s}" IS NOT NULL THEN "flag.{s}"' for s in FLAG_STAGES)
    rate = data["rate"]
    con.execute(f"""
        CREATE TEMP TABLE frame AS
        WITH joined AS (
            SELECT doc_id, source, text_bytes, language, quality_score, final_bytes,
                   {", ".join(flag_columns)}, rule, exact_tokens
            FROM documents LEFT JOIN language USING (doc_id) LEFT JOIN quality USING (doc_id)
                 LEFT JOIN scrubbed USING (doc_id) {" ".join(joins)}
                 LEFT JOIN mix USING (doc_id))
        SELECT *, greatest(1, round_even(coalesce(text_bytes, 0) / {rate}, 0))::BIGINT
                  AS tokens,
               coalesce(exact_tokens, greatest(1, round_even(coalesce(final_bytes, 0) / {rate},
                                                             0))::BIGINT) AS final_tokens,
               CASE WHEN rule = '{SELECTED}' THEN '' {first}
                    ELSE '{report.SELECTION_PREFIX}' || rule END AS stage,
               CASE WHEN rule = '{SELECTED}' THEN '' {first_reason}
                    WHEN rule = 'language' THEN 'language ' || coalesce(language, 'None')
                                               || ' not in the recipe'
                    ELSE rule END AS reason
        FROM joined ORDER BY doc_id""")
    per_stage = con.execute("SELECT stage, count(*), sum(tokens) FROM frame GROUP BY stage"
                            ).fetchall()
    flags = con.execute("SELECT " + ", ".join(
        f'count("flag.{s}"), count("flag.{s}") FILTER (WHERE stage = \'\')'
        for s in FLAG_STAGES) + " FROM frame").fetchall()
    removals = con.execute("SELECT stage, reason, count(*), sum(tokens) FROM frame "
                           "WHERE stage <> '' GROUP BY stage, reason").fetchall()
    flagged = [con.execute(f'SELECT "flag.{s}", count(*) FROM frame GROUP BY 1').fetchall()
               for s in FLAG_STAGES]
    languages = con.execute(
        "SELECT coalesce(language, '(none)') AS l, count(*) AS n, count(*) FILTER "
        "(WHERE stage = '') , coalesce(sum(final_tokens) FILTER (WHERE stage = ''), 0) "
        "FROM frame GROUP BY l ORDER BY n DESC, l").fetchall()
    con.close()
    return per_stage, flags, removals, flagged, languages


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _one(implementation: str, docs: int, repeats: int) -> None:
    data = _inputs(docs)
    run = {"report": run_report, "polars": run_polars, "duckdb": run_duckdb}[implementation]
    run(data)  # warm-up: imports, thread pools
    base = _rss_mib()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run(data)
        times.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{statistics.median(times):.3f} {max(peak - base, 0):.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--impl", choices=IMPLEMENTATIONS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.impl:
        _one(args.impl, args.docs, args.repeats)
        return
    print(f"report aggregations, one partition of {args.docs:,} documents, median of "
          f"{args.repeats} runs\n")
    print("| implementation | median s | peak RSS over inputs (MiB) |")
    print("|---|---:|---:|")
    for implementation in IMPLEMENTATIONS:
        out = subprocess.run([sys.executable, __file__, "--impl", implementation, "--docs",
                              str(args.docs), "--repeats", str(args.repeats)],
                             check=True, capture_output=True, text=True).stdout.split()
        print(f"| {implementation} | {out[0]} | {out[1]} |")


if __name__ == "__main__":
    main()
