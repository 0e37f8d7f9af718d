"""The funnel report at scale: the built sample replicated (every per-document table's rows
repeated with suffixed ids, `benchmarks.report_aggregations.replicate_store`) gives the same
report under a tiny memory budget as under a large one, and its peak memory grows by less
than DuckDB's share of the budget when the documents grow fourfold."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.report_aggregations import measure, replicate_store

COPIES = 40  # 506 documents in the sample: about 20,000 (DuckDB's 64 MB full), then 80,000
TINY_GB = 0.1  # DuckDB gets 64 MB of it (curation.duck.MemoryBudget.duckdb)
DUCKDB_MIB = 64


@pytest.fixture(scope="module")
def stores(sample_run, tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    base = tmp_path_factory.mktemp("report-scale")
    found = {}
    for copies in (COPIES, 4 * COPIES):
        found[copies] = base / f"x{copies}"
        replicate_store(sample_run.root, found[copies], copies, part_rows=5_000)
    return found


def test_a_tiny_budget_gives_the_same_report(sample_run, stores) -> None:
    root = stores[COPIES]  # 20,000 documents: DuckDB's 64 MB floor spills without aborting
    recipe = sample_run.base / "recipes" / "sample.yaml"
    tiny = measure("report", root, sample_run.pipeline_path, recipe, TINY_GB)
    large = measure("report", root, sample_run.pipeline_path, recipe, 4.0)
    assert tiny["data"] == large["data"]
    summary = tiny["data"]["summary"]
    assert summary["documents"] == COPIES * 506 and summary["documents_selected"] > 0


def test_peak_memory_does_not_grow_with_the_documents(sample_run, stores) -> None:
    recipe = sample_run.base / "recipes" / "sample.yaml"
    small, big = (measure("report", stores[copies], sample_run.pipeline_path, recipe, TINY_GB)
                  for copies in (COPIES, 4 * COPIES))
    assert big["data"]["summary"]["documents"] == 4 * small["data"]["summary"]["documents"]
    # Holding every partition's documents (the report before) grew by about 80 MiB from 5,000
    # to 20,000 documents alone; both sizes here fill DuckDB's share, so the rest must spill.
    assert big["peak_mib"] - small["peak_mib"] < DUCKDB_MIB, (small, big)
