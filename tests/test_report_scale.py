"""The funnel report at scale: the built sample replicated (every per-document table's rows
repeated with suffixed ids, `benchmarks.report_aggregations.replicate_store`) gives the same
report under a tiny memory budget as under a large one, and its peak memory grows by less
than DuckDB's share of the budget when the documents grow fourfold."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.report_aggregations import measure, replicate_store
from curation.config import load_recipe
from curation.graph import CROSS_DEDUP, DOCUMENTS
from curation.partition import PartitionLayout
from curation.storage import LocalStore

COPIES = 40  # 553 documents in the sample: about 22,000, then 88,000
TINY_GB = 0.1  # DuckDB gets 64 MB of it (curation.duck.MemoryBudget.duckdb)
DUCKDB_MIB = 64
# Rows a replicated part holds, as a documents task's part is bounded by its input file: a part
# of the sample's code files (10 KB each, 4x a web page) is read a row group at a time, so the
# parts must not grow with the copies (at 5,000 rows, the code source's one part did: 11 MB of
# text at 40 copies, 45 MB at 160).
PART_ROWS = 1_000


@pytest.fixture(scope="module")
def stores(sample_run, tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    base = tmp_path_factory.mktemp("report-scale")
    found = {}
    for copies in (COPIES, 4 * COPIES):
        found[copies] = base / f"x{copies}"
        replicate_store(sample_run.root, found[copies], copies, part_rows=PART_ROWS)
    return found


def test_a_tiny_budget_gives_the_same_report(sample_run, stores) -> None:
    root = stores[COPIES]  # 22,000 documents: DuckDB's 64 MB floor spills without aborting
    recipe = sample_run.base / "recipes" / "sample.yaml"
    tiny = measure("report", root, sample_run.pipeline_path, recipe, TINY_GB)
    large = measure("report", root, sample_run.pipeline_path, recipe, 4.0)
    assert tiny["data"] == large["data"]
    summary = tiny["data"]["summary"]
    store = LocalStore(str(sample_run.root))
    sample = sum(PartitionLayout(store, DOCUMENTS, partition).complete_manifest().rows
                 for partition in load_recipe(recipe).partition_keys())
    assert summary["documents"] == COPIES * sample and summary["documents_selected"] > 0


def test_peak_memory_does_not_grow_with_the_documents(sample_run, stores) -> None:
    recipe = sample_run.base / "recipes" / "sample.yaml"
    small, big = (measure("report", stores[copies], sample_run.pipeline_path, recipe, TINY_GB)
                  for copies in (COPIES, 4 * COPIES))
    assert big["data"]["summary"]["documents"] == 4 * small["data"]["summary"]["documents"]
    # Holding every partition's documents (the report before) grew by about 80 MiB from 5,000
    # to 20,000 documents alone; both sizes here fill DuckDB's share, so the rest must spill.
    assert big["peak_mib"] - small["peak_mib"] < DUCKDB_MIB, (small, big)


def test_the_report_grouped_in_hash_parts_gives_the_same_report(sample_run, stores,
                                                               monkeypatch) -> None:
    from curation import report
    from curation.config import load_pipeline

    recipe = load_recipe(sample_run.base / "recipes" / "sample.yaml",
                         load_pipeline(sample_run.pipeline_path))
    store = LocalStore(str(stores[COPIES]))
    parts: list[int] = []
    write = report.write_hash_parts

    def counted(*args, **kwargs) -> list[Path]:
        files = write(*args, **kwargs)
        parts.append(len(files))
        return files

    monkeypatch.setattr(report, "write_hash_parts", counted)
    whole = report.compute_report(store, recipe)
    # each partition's frame; cross_dedup's clusters by doc_id, then by cluster; the domains
    assert parts == [1] * (len(recipe.partition_keys()) + 3)
    assert whole["domains"] and whole["clusters"][CROSS_DEDUP]["clusters"]
    parts.clear()
    monkeypatch.setattr(report, "GROUP_BYTES", 1 << 18)  # a few hundred documents a part
    split = report.compute_report(store, recipe)
    assert max(parts) >= 4, parts  # the web partitions in several parts
    assert split == whole
