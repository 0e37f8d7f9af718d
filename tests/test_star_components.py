"""Connected components as tasks over the exchange (`curation.star_components`): the answer of a
plain union-find and of `connected_components_sql` on long chains, stars, one giant component,
pairs, self-loops and many singletons, with 1 bucket or many, in this process or in a pool of
workers, over a real local store; the exchange's objects are removed."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curation.config import load_pipeline
from curation.duck import duckdb_session
from curation.exchange import scratch_bytes
from curation.graph import DEDUP_CLUSTERS
from curation.mix import group_ids
from curation.partition import PartitionLayout
from curation.stages.base import DocumentsInput
from curation.stages.dedup import run_partition_dedup
from curation.star_components import ComponentsOutput, TaskPlacement, exchange_components
from curation.storage import LocalStore
from tests.test_components import LARGE, components, oracle, shuffled_chain


def named(table: pa.Table) -> pa.Table:
    """Integer edges (a, b) as doc_id strings of one width, so string order is number order."""
    return pa.table({"doc_id": [f"d{x:06d}" for x in table["a"].to_pylist()],
                     "other_doc_id": [f"d{x:06d}" for x in table["b"].to_pylist()]})


def run(edges: pa.Table, tmp_path: Path, *, objects: int = 3, workers: int = 0,
        buckets: int | None = None) -> tuple[dict, ComponentsOutput]:
    """`exchange_components` over `edges` split into `objects` edge objects."""
    store = LocalStore(str(tmp_path / "store"))
    keys = []
    for index, chunk in enumerate(np.array_split(np.arange(edges.num_rows), objects)):
        key = f"edges/part-{index}.parquet"
        store.write_bytes(key, scratch_bytes(edges.take(pa.array(chunk, pa.int64()))))
        keys.append(key)
    output = exchange_components(store, "work/components", keys, edges.num_rows, workers,
                                 buckets)
    labels = pa.concat_tables([pq.read_table(tmp_path / "store" / key) for key in output.labels]
                              or [pa.table({"node": pa.array([], pa.string()),
                                            "root": pa.array([], pa.string())})])
    found = dict(zip(labels["node"].to_pylist(), labels["root"].to_pylist(), strict=True))
    assert len(found) == labels.num_rows  # every node once
    assert not list((tmp_path / "store" / "work" / "components").glob("step-*"))
    return found, output


def expected(edges: pa.Table) -> dict:
    return oracle(np.array(edges["doc_id"].to_pylist()),
                  np.array(edges["other_doc_id"].to_pylist()))


@pytest.mark.parametrize("buckets", [1, 7])
def test_long_shuffled_chain_is_one_component(buckets: int, tmp_path: Path) -> None:
    edges = named(shuffled_chain(3000, seed=1))
    found, output = run(edges, tmp_path, buckets=buckets)
    assert found == expected(edges)
    assert set(found.values()) == {"d000000"}
    assert 1 < output.rounds < 40 and output.changed[-1] == 0 and output.changed[0] > 0


def test_stars_a_giant_component_and_pairs(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    largest_centre = [(999, x) for x in range(900, 999)]  # star on its largest node
    smallest_centre = [(100, x) for x in range(101, 200)]
    giant = [(int(x), int(y)) for x, y in rng.integers(200, 800, size=(3000, 2))]
    pairs = [(2 * x + 1000, 2 * x + 1001) for x in range(200)]
    rows = largest_centre + smallest_centre + giant + pairs
    rng.shuffle(rows)
    edges = named(pa.table({"a": [a for a, _ in rows], "b": [b for _, b in rows]}))
    found, _ = run(edges, tmp_path, objects=5, buckets=4)
    assert found == expected(edges)
    assert len(set(found.values())) == 2 + 1 + 200  # two stars, the giant, the pairs


def test_self_loops_and_duplicate_edges(tmp_path: Path) -> None:
    edges = pa.table({"doc_id": ["b", "a", "c", "c", "e", "d", "x"],
                      "other_doc_id": ["a", "b", "c", "a", "e", "d", "x"]})
    found, _ = run(edges, tmp_path, objects=2, buckets=3)
    assert found == {"a": "a", "b": "a", "c": "a", "d": "d", "e": "e", "x": "x"}


@pytest.mark.parametrize("seed", [0, 1])
def test_random_graphs_match_the_sql_components_in_a_pool(seed: int, tmp_path: Path) -> None:
    rng = np.random.default_rng(seed)
    nodes = 4000
    a, b = rng.integers(0, nodes, 3000), rng.integers(0, nodes, 3000)
    edges = named(pa.table({"a": a, "b": b}))
    found, output = run(edges, tmp_path, objects=4, workers=2, buckets=5)
    sql, _ = components(edges.rename_columns(["a", "b"]), LARGE, tmp_path / "sql")
    assert found == sql == expected(edges)
    assert output.buckets == 5


def test_no_edges_gives_no_labels(tmp_path: Path) -> None:
    empty = pa.table({"doc_id": pa.array([], pa.string()),
                      "other_doc_id": pa.array([], pa.string())})
    found, output = run(empty, tmp_path, objects=1, buckets=2)
    assert found == {} and output.labels == [] and output.rounds == 1


def _dedup_clusters(sample_run, folder: Path, components: str) -> tuple[list, dict]:
    """The sample's dedup_clusters rebuilt in a copy of its store with `components`: each
    table's part hashes, and the stage's statistics."""
    shutil.copytree(sample_run.root, folder)
    store = LocalStore(str(folder))
    pipeline = load_pipeline(sample_run.pipeline_path)
    snapshot = pipeline.partition_keys()[0]
    shutil.rmtree(store.uri(PartitionLayout(store, DEDUP_CLUSTERS, snapshot).prefix))
    settings = pipeline.dedup.model_copy(update={"components": components})
    run_partition_dedup(DocumentsInput(store, snapshot), DEDUP_CLUSTERS, settings, {}, 2)
    manifest = PartitionLayout(store, DEDUP_CLUSTERS, snapshot).complete_manifest()
    hashes = [(name, part.sha256) for name in ["part", *sorted(manifest.tables)]
              for part in manifest.table_parts(name)]
    return hashes, manifest.extra["stats"]["counts"]


def test_the_stage_writes_the_same_clusters_on_tasks_as_in_the_parent(sample_run,
                                                                      tmp_path: Path) -> None:
    parent, parent_counts = _dedup_clusters(sample_run, tmp_path / "parent", "parent")
    tasks, task_counts = _dedup_clusters(sample_run, tmp_path / "tasks", "tasks")
    assert tasks == parent
    assert parent_counts["clusters"] > 0 and "component_rounds" not in parent_counts  # 0
    assert task_counts["component_rounds"] >= 1
    assert {k: v for k, v in task_counts.items() if k != "component_rounds"} == {
        k: v for k, v in parent_counts.items() if k != "component_rounds"}


def test_the_mix_groups_come_out_the_same_as_tasks(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    doc_ids = [f"d{x:05d}" for x in range(3000)]
    members = pa.table({"scope": rng.choice(["exact_dedup/A", "dedup_clusters/A"], 2000),
                        "cluster_id": [f"c{x}" for x in rng.integers(0, 600, 2000)],
                        "doc_id": rng.choice(doc_ids, 2000)})
    store = LocalStore(str(tmp_path / "store"))
    found = {}
    for name, placement in (("parent", None),
                            ("tasks", TaskPlacement(store, "mix/x/_work/components", 2, "tasks"))):
        with duckdb_session() as con:
            con.register("documents", pa.table({"doc_id": doc_ids}))
            con.register("members", members)
            group_ids(con, "documents", "members", "groups", placement=placement)
            found[name] = dict(con.sql("SELECT doc_id, group_id FROM groups").fetchall())
    assert found["tasks"] == found["parent"]
    clustered = set(members["doc_id"].to_pylist())
    assert found["parent"].keys() == clustered
    assert 1 < len(set(found["parent"].values())) < len(clustered)
    assert not (tmp_path / "store" / "mix").exists() or not any(
        (tmp_path / "store" / "mix").rglob("*.parquet"))
