"""The scale paths, small: the benchmark's global steps over 200,000 synthetic documents under a
budget low enough to split the grouping into more exchange buckets (and make the components take
their SQL path) give what the generator planted and what a high-memory run gives."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from benchmarks import mix_groups
from benchmarks.scale import MIX_CLUSTERS, measure_step, prepare
from benchmarks.synthetic import (
    BAND_COLUMNS,
    HOT_VALUES,
    SIGNATURES,
    Families,
    Spec,
    expected_families,
    generate,
    partition_of,
    signatures,
    write_planted_clusters,
)
from curation.components import in_memory
from curation.duck import MemoryBudget

pytestmark = pytest.mark.slow  # its fixture runs every global step on 200,000 documents

LOW_GB = 0.008  # DuckDB's floor of 64 MB; the components' in-memory path up to ~82k nodes
HIGH_GB = 4.0
# Half of the documents in families: ~100k nodes, over the low budget's in-memory limit.
SPEC = Spec(documents=200_000, partitions=4, seed=3, duplicate_share=0.5, hot_fraction=0.0,
            lines_per_document=6.0)
STEPS = ("exact_keys", "near_dup", "line_counts", "mix")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[float, dict]:
    """Every step of `STEPS` on `SPEC`, measured, under the low and the high budget."""
    base = tmp_path_factory.mktemp("scale")
    data = prepare(base / "data", SPEC)
    results = {}
    for memory in (LOW_GB, HIGH_GB):
        out = base / f"out-{memory}"
        out.mkdir()
        rows = {step: measure_step(step, data.folder, out, memory, SPEC.documents)
                for step in STEPS}
        results[memory] = {"rows": rows, "out": out}
    return results


def _table(path: Path):  # noqa: ANN202 - a pyarrow table
    """A step's output file, or its folder of per-part files (line dedup), in part order."""
    return pq.read_table(path if path.exists() else path.with_suffix(""))


def test_near_duplicate_clusters_are_the_planted_families(runs: dict) -> None:
    clusters = _table(runs[LOW_GB]["out"] / "near_dup.parquet")
    found = dict(zip(clusters["doc_id"].to_pylist(), clusters["cluster_id"].to_pylist(),
                     strict=True))
    assert found == expected_families(SPEC)
    # ~100k clustered documents: over the low budget's in-memory limit, so the components ran
    # as SQL rounds in DuckDB; the high budget's run took the numpy union-find
    assert not in_memory(len(found), MemoryBudget(LOW_GB))
    assert runs[LOW_GB]["rows"]["near_dup"]["result"]["rounds"] > 0
    assert runs[HIGH_GB]["rows"]["near_dup"]["result"]["rounds"] == 0


@pytest.mark.parametrize("name", ["exact_text", "exact_url", "near_dup", "line_edits",
                                  "line_documents", "occurrences"])
def test_a_low_budget_gives_the_high_budgets_outputs(runs: dict, name: str) -> None:
    low = _table(runs[LOW_GB]["out"] / f"{name}.parquet")
    high = _table(runs[HIGH_GB]["out"] / f"{name}.parquet")
    assert low.num_rows > 0
    assert low.equals(high)


def test_the_low_budget_splits_the_grouping_into_more_buckets(runs: dict) -> None:
    """The exchange sizes its buckets to a reduce task's share of the budget: under the low
    budget more, smaller buckets, so none spills; the outputs are the same (above)."""
    low, high = runs[LOW_GB]["rows"], runs[HIGH_GB]["rows"]
    assert low["near_dup"]["result"]["buckets"] > high["near_dup"]["result"]["buckets"] >= 2
    # line counts size from the rows the first part sends, which fit either budget here
    assert low["line_counts"]["result"]["buckets"] >= high["line_counts"]["result"]["buckets"] >= 2
    assert low["exact_keys"]["result"]["text"]["buckets"] >= 2
    for row in low.values():  # measured: a process tree, CPU time and a JSON-able result
        assert row["peak_rss_mb"] > 0 and row["cpu_s"] > 0
        json.dumps(row)


def test_exact_clusters_are_the_planted_exact_copies(runs: dict) -> None:
    clusters = _table(runs[LOW_GB]["out"] / "exact_text.parquet")
    families = expected_families(SPEC)
    # every exact copy belongs to its near-duplicate family, and is clustered with its family's
    # other exact copies only
    assert all(families[d] <= c for d, c in zip(clusters["doc_id"].to_pylist(),
                                               clusters["cluster_id"].to_pylist(), strict=True))
    roots = {families[d] for d in clusters["doc_id"].to_pylist()}
    assert len(roots) == pc.count_distinct(clusters["cluster_id"]).as_py()


def test_the_planted_clusters_are_the_clusters_the_steps_find(runs: dict,
                                                              tmp_path: Path) -> None:
    """What `--steps planted_clusters` writes in place of exact_keys and near_dup (no hot
    buckets in `SPEC`, so none capped)."""
    members = write_planted_clusters(tmp_path, SPEC)
    for name in MIX_CLUSTERS:
        found = _table(runs[LOW_GB]["out"] / name).select(["doc_id", "cluster_id"])
        planted = pq.read_table(tmp_path / name)
        assert members[name] == planted.num_rows > 10_000
        assert planted.cast(found.schema).equals(found)


def test_the_mix_selects_one_member_per_duplicate_group(runs: dict) -> None:
    result = runs[LOW_GB]["rows"]["mix"]["result"]
    assert 0 < result["selected"] < result["candidates"] == SPEC.documents
    clustered = sum(_table(runs[LOW_GB]["out"] / name).num_rows for name in MIX_CLUSTERS)
    assert result["memberships"] == clustered > 0
    occurrences = _table(runs[LOW_GB]["out"] / "occurrences.parquet")
    families = expected_families(SPEC)
    chosen = {families.get(d, d) for d in set(occurrences["doc_id"].to_pylist())}
    assert len(chosen) == len(set(occurrences["doc_id"].to_pylist()))


def test_the_generator_plants_heavy_tails_hot_buckets_and_cross_partition_copies(
        tmp_path: Path) -> None:
    spec = Spec(documents=100_000, partitions=8, seed=5, hot_fraction=0.02)
    families = Families.draw(spec)
    sizes = np.diff(families.starts)
    assert (sizes == 1).mean() > 0.8  # most documents are unique...
    assert sizes.max() >= 500  # ...and a few families are large (a power law)
    generated = generate(tmp_path, spec)
    bands = pq.read_table(generated.files(SIGNATURES), columns=BAND_COLUMNS[-1:])
    counts = pc.value_counts(bands[BAND_COLUMNS[-1]]).to_pylist()
    hot = sorted((c["counts"] for c in counts), reverse=True)[:HOT_VALUES]
    assert min(hot) > 300  # a few band values shared by hundreds of unrelated documents
    biggest = int(np.argmax(sizes))
    members = np.arange(families.starts[biggest], families.starts[biggest + 1])
    assert len(set(partition_of(members, spec).tolist())) == spec.partitions  # across all
    table = signatures(members, families, spec)
    anchor = BAND_COLUMNS[biggest % len(BAND_COLUMNS)]
    assert pc.count_distinct(table[anchor]).as_py() == 1  # the family shares its anchor band
    assert len(generated.files(SIGNATURES)) == spec.partitions


def test_the_mix_groups_benchmark_finds_one_answer_on_both_graphs(tmp_path: Path, capsys) -> None:
    """`benchmarks/mix_groups.py` at a budget that sends the documents' graph (90k nodes)
    to the SQL rounds: the clusters' graph gives the same groups."""
    mix_groups.main(["--documents", "300000", "--memory-gb", str(LOW_GB), "--work",
                     str(tmp_path)])
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines()
            if line.startswith("| 300,000")]
    assert [row[2].strip() for row in rows] == list(mix_groups.GRAPHS)
    assert [row[-1].strip() for row in rows] == ["(first)", "yes"]
    assert len({row[-2] for row in rows}) == 1 and int(rows[0][-2].replace(",", "")) > 200_000
