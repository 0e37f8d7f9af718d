"""Connected components in DuckDB (`curation.components`): both paths (in-memory union-find and
SQL hooking rounds) against known answers and a plain union-find, rounds on long chains, string
nodes, and a low memory limit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from curation.components import (
    ComponentsRun,
    connected_components,
    connected_components_sql,
    in_memory,
)
from curation.duck import DuckDBSettings, MemoryBudget, duckdb_session, memory_limit_bytes

LARGE = MemoryBudget(memory_gb=64)  # every test graph fits: the in-memory path
TINY = MemoryBudget(memory_gb=1e-6)  # no graph fits: the SQL path
PATHS = {"memory": LARGE, "sql": TINY}


def oracle(a: np.ndarray, b: np.ndarray) -> dict:
    """Smallest node of each node's component, by a plain union-find with path halving."""
    parent: dict = {}

    def find(x: int | str) -> int | str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for x, y in zip(a.tolist(), b.tolist(), strict=True):
        rx, ry = sorted((find(x), find(y)))
        parent[ry] = rx
    return {x: find(x) for x in parent}


def components(edges: pa.Table, budget: MemoryBudget, tmp_path: Path,
               memory_limit: str = "200MB", repeated: bool = False) -> tuple[dict, ComponentsRun]:
    settings = DuckDBSettings(memory_limit, threads=2, temp_directory=str(tmp_path))
    with duckdb_session(settings) as con:
        con.register("edge_input", edges)
        run = connected_components_sql(con, "edge_input", "found", budget=budget,
                                       repeated_edges=repeated)
        rows = con.sql("SELECT node, root FROM found").fetchall()
    assert len(rows) == run.nodes == len({node for node, _ in rows})
    return dict(rows), run


def integer_edges(a: np.ndarray, b: np.ndarray) -> pa.Table:
    return pa.table({"a": pa.array(a, pa.int64()), "b": pa.array(b, pa.int64())})


def shuffled_chain(nodes: int, seed: int) -> pa.Table:
    """A path through every node in a random order, its edges in a random order and
    direction."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(nodes)
    a, b = order[:-1], order[1:]
    flip = rng.random(nodes - 1) < 0.5
    a, b = np.where(flip, b, a), np.where(flip, a, b)
    shuffle = rng.permutation(nodes - 1)
    return integer_edges(a[shuffle], b[shuffle])


@pytest.mark.parametrize("path", PATHS)
def test_long_shuffled_chain_is_one_component_in_few_rounds(path: str, tmp_path: Path) -> None:
    nodes = 100_000
    found, run = components(shuffled_chain(nodes, seed=1), PATHS[path], tmp_path)
    assert found == dict.fromkeys(range(nodes), 0)
    assert (run.nodes, run.edges) == (nodes, nodes - 1)
    if path == "sql":
        # Every root that is not a local minimum hooks each round: about log3(n) rounds.
        assert 1 <= run.rounds <= 20 and run.jumps <= 80
    else:
        assert run.rounds == 0


def test_sorted_chain_hooks_in_one_round_and_jumps_log_depth(tmp_path: Path) -> None:
    nodes = 50_000
    edges = integer_edges(np.arange(nodes - 1), np.arange(1, nodes))
    found, run = components(edges, TINY, tmp_path)
    assert set(found.values()) == {0}
    assert run.rounds == 1 and run.jumps <= 2 + int(np.log2(nodes))


@pytest.mark.parametrize("path", PATHS)
def test_stars_centred_on_largest_and_smallest_node(path: str, tmp_path: Path) -> None:
    leaves = np.arange(1, 1001)
    up = integer_edges(leaves, np.full(leaves.size, 5000))  # centre is the largest node
    down = integer_edges(np.full(leaves.size, 10_000), leaves + 10_000)  # centre is smallest
    found, run = components(pa.concat_tables([up, down]), PATHS[path], tmp_path)
    assert found == {**dict.fromkeys([*leaves.tolist(), 5000], 1),
                     **dict.fromkeys([10_000, *(leaves + 10_000).tolist()], 10_000)}
    assert run.rounds <= 2


@pytest.mark.parametrize("repeated", [False, True])
@pytest.mark.parametrize("path", PATHS)
def test_singletons_pairs_self_loops_and_duplicate_edges(path: str, repeated: bool,
                                                         tmp_path: Path) -> None:
    a = np.array([7, 3, 3, 9, 8, 20, 21, 21, 42])
    b = np.array([7, 4, 4, 8, 9, 21, 20, 22, 42])
    found, run = components(integer_edges(a, b), PATHS[path], tmp_path, repeated=repeated)
    assert found == {7: 7, 3: 3, 4: 3, 8: 8, 9: 8, 20: 20, 21: 20, 22: 20, 42: 42}
    # Both directions of one pair and a self-loop's repeat count once when they repeat.
    assert (run.edges, run.pairs) == (9, 6 if repeated else 9)


@pytest.mark.parametrize("seed", [2, 3])
def test_random_graphs_both_paths_match_union_find(seed: int, tmp_path: Path) -> None:
    rng = np.random.default_rng(seed)
    nodes = rng.integers(1_000, 20_000)
    # Sparse: many small components; dense: one giant component with stragglers.
    for edges in (nodes // 2, nodes * 2):
        a, b = rng.integers(0, nodes, edges), rng.integers(0, nodes, edges)
        a = a * 1_000_003 % (1 << 40)  # large, unordered ids
        b = b * 1_000_003 % (1 << 40)
        expected = oracle(a, b)
        memory, fast = components(integer_edges(a, b), LARGE, tmp_path)
        sql, slow = components(integer_edges(a, b), TINY, tmp_path)
        assert memory == sql == expected
        assert fast.rounds == 0 < slow.rounds <= 20


def test_string_nodes_root_is_the_smallest_string(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    a, b = rng.integers(0, 3000, 2500), rng.integers(0, 3000, 2500)
    names = np.array([f"doc-{rng.integers(1 << 30):09d}-{i}" for i in range(3000)])
    expected = oracle(names[a], names[b])
    edges = pa.table({"a": names[a], "b": names[b]})
    for budget in (LARGE, TINY):
        found, _ = components(edges, budget, tmp_path)
        assert found == expected
    # Byte order, not a locale: 'B' < 'a' < 'é'.
    found, _ = components(pa.table({"a": ["é", "a"], "b": ["a", "B"]}), TINY, tmp_path)
    assert found == {"é": "B", "a": "B", "B": "B"}


def test_low_memory_limit_completes(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    # Five long chains on disjoint ids, plus random shortcuts inside each.
    tables = []
    for offset in range(5):
        chain = shuffled_chain(20_000, seed=offset)
        shift = offset * 1_000_000
        tables.append(integer_edges(chain["a"].to_numpy() + shift, chain["b"].to_numpy() + shift))
        extra = rng.integers(0, 20_000, 2_000) + shift
        tables.append(integer_edges(extra, rng.permutation(extra)))
    edges = pa.concat_tables(tables)
    found, run = components(edges, TINY, tmp_path, memory_limit="64MB")
    roots = {offset * 1_000_000 for offset in range(5)}
    assert set(found.values()) == roots and run.nodes == 100_000
    assert found == {n: n // 1_000_000 * 1_000_000 for n in found}


def test_path_choice_follows_the_budget() -> None:
    assert in_memory(1_000, MemoryBudget(memory_gb=1))
    # 4 bytes a node and a batch of 2M edges at 48 bytes: 496 MB < half of 1 GiB < 576 MB
    assert in_memory(100_000_000, MemoryBudget(memory_gb=1))
    assert not in_memory(120_000_000, MemoryBudget(memory_gb=1))


@pytest.mark.parametrize("batch", [1, 7, 1_000])
def test_union_find_over_many_small_batches(batch: int) -> None:
    """Batches far smaller than the graph: roots are found by following the batch's own paths,
    with a full compression pass only once per `nodes` edges, so trees deepen between passes."""
    rng = np.random.default_rng(batch)
    chain = shuffled_chain(3_000, seed=batch)
    a = np.concatenate([chain["a"].to_numpy(), rng.integers(3_000, 6_000, 2_000)])
    b = np.concatenate([chain["b"].to_numpy(), rng.integers(3_000, 6_000, 2_000)])
    order = rng.permutation(a.size)
    a, b = a[order], b[order]
    roots = connected_components(
        ((a[i:i + batch], b[i:i + batch]) for i in range(0, a.size, batch)), 6_000)
    assert roots.dtype == np.int32  # the narrow ids under 2**31 nodes
    expected = oracle(a, b)
    assert {node: int(roots[node]) for node in expected} == expected
    alone = np.setdiff1d(np.arange(6_000), np.concatenate([a, b]))
    assert (roots[alone] == alone).all()


def test_in_memory_path_gives_duckdb_its_limit_back(tmp_path: Path) -> None:
    settings = DuckDBSettings("200MB", threads=1, temp_directory=str(tmp_path))
    with duckdb_session(settings) as con:
        before = memory_limit_bytes(con)
        con.register("edge_input", shuffled_chain(10_000, seed=4))
        run = connected_components_sql(con, "edge_input", "found", budget=LARGE)
        assert run.rounds == 0 and abs(memory_limit_bytes(con) - before) < 1 << 20



def test_distinct_nodes_run_in_parts_under_a_low_limit(tmp_path: Path) -> None:
    """Under 64 MB, 400,000 string occurrences are grouped in hash parts on disk (DuckDB's
    spilling string aggregate fails now and then at such limits), with the same answer."""
    rng = np.random.default_rng(7)
    a, b = rng.integers(0, 60_000, 200_000), rng.integers(0, 60_000, 200_000)
    names = np.array([f"doc-{i:012d}" for i in rng.permutation(60_000)])
    expected = oracle(names[a], names[b])
    found, run = components(pa.table({"a": names[a], "b": names[b]}), TINY, tmp_path,
                            memory_limit="64MB")
    assert run.node_parts >= 2 and run.rounds >= 1
    assert found == expected
    _, roomy = components(pa.table({"a": names[a], "b": names[b]}), TINY, tmp_path,
                          memory_limit="2GB")
    assert roomy.node_parts == 1


@pytest.mark.parametrize("path", PATHS)
def test_repeated_string_edges_in_parts_give_the_clusters_of_every_edge(path: str,
                                                                      tmp_path: Path) -> None:
    """Star edges repeated as LSH bands repeat them (each pair up to 14 times, either way
    round): the distinct pairs, found in hash parts under 64 MB, give every node and the
    components of all the edges."""
    rng = np.random.default_rng(8)
    a, b = rng.integers(0, 40_000, 30_000), rng.integers(0, 40_000, 30_000)
    repeats = rng.integers(1, 15, a.size)
    a, b = np.repeat(a, repeats), np.repeat(b, repeats)
    flip = rng.random(a.size) < 0.5
    a, b = np.where(flip, b, a), np.where(flip, a, b)
    names = np.array([f"doc-{i:012d}" for i in rng.permutation(40_000)])
    edges = pa.table({"a": names[a], "b": names[b]})
    found, run = components(edges, PATHS[path], tmp_path, memory_limit="64MB", repeated=True)
    assert found == oracle(names[a], names[b])
    distinct = {tuple(sorted(pair)) for pair in zip(a.tolist(), b.tolist(), strict=True)}
    assert (run.edges, run.pairs) == (a.size, len(distinct)) and run.edges > 4 * run.pairs
