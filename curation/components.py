"""Connected components of an edge relation, in memory bounded by the budget (no Dagster).

`connected_components_sql` labels every node of a DuckDB edge relation with the smallest node
of its component. Nodes are first given dense BIGINT ids in node order (so the smallest id of a
component is its smallest node), then:

- few nodes (`union_find_bytes(nodes)`, 4 bytes a node and one batch, within `IN_MEMORY_SHARE`
  of the budget): a numpy union-find over the id pairs streamed out of DuckDB in batches;
- otherwise: rounds of min-hooking with pointer jumping run by DuckDB, which spills. Each round
  hooks every root that has a smaller neighbouring root onto the smallest one (the numpy
  union-find's rule, so both give one answer), compresses the hooked roots by pointer jumping,
  relabels the node table and contracts the edges onto the new roots, dropping edges inside a
  component. A root that hooks is never the smallest node of its component, so that node is
  the last root left. Every root that is not a local minimum hooks each round: O(log n) rounds
  on chains and random graphs, however the ids are ordered. Python holds only counts; memory
  is DuckDB's `memory_limit`, whatever the number of nodes or edges.

Every DISTINCT over the edges or their nodes (repeated edges' distinct pairs, the node list,
each round's contracted edges) runs part by part over hash partitions written to local disk,
each small enough to group without spilling (`_distinct`): DuckDB's own spilling aggregate
fails now and then.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from curation.duck import (
    MIN_DUCKDB_MB,
    MemoryBudget,
    current_budget,
    hash_part,
    memory_limit_bytes,
    part_count,
    scalar,
    write_hash_parts,
)

BATCH_ROW_BYTES = 48
"""What it holds per edge of a batch (two int64 ids from DuckDB, their narrow copies, roots and
masks), per node of a chunk being compressed (the gathered parents, numpy's int64 copy of them
as indices, a flag) or per row of a chunk of roots handed back to DuckDB (two int64 columns
and a copy)."""
IN_MEMORY_SHARE = 0.5
"""Of the budget, for the in-memory path; DuckDB's limit is lowered by what it takes while it
runs (DuckDB only streams the edges out then), so the process stays within the budget."""
EDGE_BATCH = 1 << 21
ROW_BYTES = 64
"""The sizing allowance for one input row of a distinct part (a 16-character string node or a
pair of ids, with its hash and the hash table's entry): an estimate, not a measurement; the
parts it gives passed at 70 MB in benchmarks/components_low_memory.py."""
PAIR_ROW_BYTES = 2 * ROW_BYTES
"""The same allowance for a pair of string nodes (the distinct of repeated edges)."""
DISTINCT_SHARE = 0.25
DISTINCT_BATCH = 1 << 18
DISTINCT_BATCH_BYTES = 1024
"""A distinct's partitioning step reads at most `DISTINCT_BATCH` rows at a time, and one row
per `DISTINCT_BATCH_BYTES` of DuckDB's limit: the rows, their grouping and their sorted copy
live in Python, outside DuckDB's limit (batches of 2M rows raised the process's peak RSS from
357 to 774 MB at a 64 MB limit)."""


@dataclass(frozen=True)
class ComponentsRun:
    """`rounds`: hooking rounds of the SQL path (0: the in-memory path ran); `jumps`: pointer
    jumping passes over the hooked roots; `nodes`, `edges`: distinct nodes and input rows;
    `node_parts`: the hash partitions the distinct nodes were found in (see `_distinct`);
    `pairs`: the distinct edges the ids were joined onto (`edges` unless `repeated_edges`)."""

    rounds: int
    nodes: int
    edges: int
    jumps: int = 0
    node_parts: int = 1
    pairs: int = 0


def _id_type(nodes: int) -> type[np.signedinteger]:
    """The narrowest id type for `nodes` nodes: int32 up to 2**31, which halves the arrays."""
    return np.int32 if nodes <= np.iinfo(np.int32).max else np.int64


def _batch_rows(nodes: int) -> int:
    """Edges a batch of the in-memory path, and roots a chunk handed back: `EDGE_BATCH` at most,
    fewer for a small graph (its batches are small anyway), so a small budget still takes it."""
    return min(EDGE_BATCH, max(nodes, 1 << 16))


def union_find_bytes(nodes: int) -> int:
    """What the in-memory path holds for `nodes` nodes: the parent array (4 bytes a node under
    2**31 nodes) and one batch or chunk."""
    return nodes * np.dtype(_id_type(nodes)).itemsize + _batch_rows(nodes) * BATCH_ROW_BYTES


def in_memory(nodes: int, budget: MemoryBudget) -> bool:
    """Whether `nodes` are few enough for the in-memory union-find under `budget`."""
    return union_find_bytes(nodes) < IN_MEMORY_SHARE * budget.memory_bytes


# --- in memory ----------------------------------------------------------------------------------


def _compress(parent: np.ndarray) -> None:
    """Pointer jumping over every node until each points at its root: O(n log depth). In
    place, a chunk of `EDGE_BATCH` nodes at a time: a whole-array gather allocates a copy and
    numpy's int64 copy of the int32 indices, 12 bytes a node beyond the parents' 4. A chunk
    that reads parents a chunk before it updated jumps further, never past a root."""
    changed = True
    while changed:
        changed = False
        for start in range(0, parent.size, EDGE_BATCH):
            chunk = parent[start:start + EDGE_BATCH]
            grand = parent[chunk]
            changed = changed or not np.array_equal(grand, chunk)
            chunk[:] = grand


def _find(parent: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """The root of each of `nodes`, following parents from the nodes of one batch only (not a
    pass over every node, which made the union-find quadratic: a batch of 2M edges paid for
    all 30M nodes); each node is then pointed straight at its root."""
    roots = parent[nodes]
    pending = np.flatnonzero(parent[roots] != roots)
    while pending.size:
        roots[pending] = parent[roots[pending]]
        pending = pending[parent[roots[pending]] != roots[pending]]
    parent[nodes] = roots
    return roots


def _union(parent: np.ndarray, left: np.ndarray, right: np.ndarray) -> None:
    """Merge the components of each pair. Each round hooks every larger root onto the smallest
    root it meets, so a root is always the smallest node of its tree (parents only decrease:
    no cycles) and the number of roots drops every round."""
    while left.size:
        a, b = _find(parent, left), _find(parent, right)
        differ = a != b
        a, b, left, right = a[differ], b[differ], left[differ], right[differ]
        np.minimum.at(parent, np.maximum(a, b), np.minimum(a, b))


def connected_components(edges: Iterable[tuple[np.ndarray, np.ndarray]], nodes: int) -> np.ndarray:
    """Root of every node `0..nodes-1`, the smallest node of its component, from batches of
    (left, right) integer pairs. Why our own union-find: scipy's `connected_components` needs
    every edge in one sparse matrix (and scipy is no declared dependency), while this keeps
    only the parent array (int32 under 2**31 nodes) and one batch, whatever the number of
    edges. Paths stay short with a full pointer-jumping pass once per `nodes`
    edges, so the passes cost O(edges) in all."""
    parent = np.arange(nodes, dtype=_id_type(nodes))
    since = 0
    for left, right in edges:
        _union(parent, np.asarray(left, parent.dtype), np.asarray(right, parent.dtype))
        since += len(left)
        if since >= nodes:
            _compress(parent)
            since = 0
    _compress(parent)
    return parent


def _union_find(con: duckdb.DuckDBPyConnection, count: int) -> None:
    """`_cc_parent(id, parent)` from the union-find over `_cc_ids`, streamed in batches, with
    DuckDB's limit lowered by what the union-find holds (its cached blocks go to its file)."""
    limit, rows = memory_limit_bytes(con), _batch_rows(count)
    lowered = max(MIN_DUCKDB_MB << 20, limit - union_find_bytes(count))
    con.execute(f"SET memory_limit = '{lowered}B'")
    try:
        reader = con.sql("SELECT a, b FROM _cc_ids").to_arrow_reader(rows)
        roots = connected_components(
            ((batch.column(0).to_numpy(), batch.column(1).to_numpy()) for batch in reader),
            count)
        reader.close()
        # A chunk at a time: a whole (id, parent) table would take four times the roots.
        con.execute("CREATE TABLE _cc_parent (id BIGINT, parent BIGINT)")
        for start in range(0, count, rows):
            chunk = roots[start:start + rows]
            con.register("_cc_roots", pa.table({
                "id": np.arange(start, start + len(chunk), dtype=np.int64), "parent": chunk}))
            con.execute("INSERT INTO _cc_parent SELECT * FROM _cc_roots")
            con.unregister("_cc_roots")
    finally:
        con.execute(f"SET memory_limit = '{limit}B'")


# --- in DuckDB ------------------------------------------------------------------------------------


def _hook_rounds(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """`_cc_parent(id, parent)` by min-hooking rounds over `_cc_ids`; returns (rounds, jumps).
    Invariant: `_cc_parent` maps every node to a current root, `_cc_edges` holds distinct
    (larger root, smaller root) pairs of different roots."""
    con.execute("CREATE TABLE _cc_parent AS SELECT id, id AS parent FROM _cc_nodes")
    _distinct(con, "SELECT greatest(a, b) AS a, least(a, b) AS b FROM _cc_ids WHERE a <> b",
              ["a", "b"], scalar(con, "SELECT count(*) FROM _cc_ids"), "_cc_edges")
    rounds = jumps = 0
    while scalar(con, "SELECT count(*) FROM _cc_edges"):
        rounds += 1
        con.execute("CREATE OR REPLACE TABLE _cc_hook AS SELECT a AS id, min(b) AS parent"
                    " FROM _cc_edges GROUP BY a")
        # A hooked root's parent may have hooked too: jump until each points at a root. Only
        # this round's hooked roots take part, fewer every round.
        while True:
            con.execute("CREATE OR REPLACE TABLE _cc_jump AS SELECT h.id, coalesce(g.parent,"
                        " h.parent) AS parent, g.id IS NOT NULL AS moved FROM _cc_hook h"
                        " LEFT JOIN _cc_hook g ON h.parent = g.id")
            con.execute("DROP TABLE _cc_hook")
            con.execute("ALTER TABLE _cc_jump RENAME TO _cc_hook")
            jumps += 1
            if not scalar(con, "SELECT count(*) FROM _cc_hook WHERE moved"):
                break
        con.execute("CREATE OR REPLACE TABLE _cc_next AS SELECT p.id, coalesce(h.parent,"
                    " p.parent) AS parent FROM _cc_parent p LEFT JOIN _cc_hook h"
                    " ON p.parent = h.id")
        con.execute("DROP TABLE _cc_parent")
        con.execute("ALTER TABLE _cc_next RENAME TO _cc_parent")
        # Contract the edges onto the new roots, one join a statement.
        con.execute("CREATE TABLE _cc_half AS SELECT coalesce(h.parent, e.a) AS x, e.b AS y"
                    " FROM _cc_edges e LEFT JOIN _cc_hook h ON e.a = h.id")
        con.execute("DROP TABLE _cc_edges")
        _distinct(con, "SELECT greatest(x, y) AS a, least(x, y) AS b FROM (SELECT e.x,"
                  " coalesce(h.parent, e.y) AS y FROM _cc_half e LEFT JOIN _cc_hook h"
                  " ON e.y = h.id) WHERE x <> y", ["a", "b"],
                  scalar(con, "SELECT count(*) FROM _cc_half"), "_cc_next")
        con.execute("DROP TABLE _cc_half")
        con.execute("ALTER TABLE _cc_next RENAME TO _cc_edges")
    con.execute("DROP TABLE IF EXISTS _cc_hook")
    con.execute("DROP TABLE _cc_edges")
    return rounds, jumps


def _distinct(con: duckdb.DuckDBPyConnection, query: str, columns: list[str], rows: int,
              table: str, row_bytes: int = ROW_BYTES) -> int:
    """Create `table` with the distinct rows of `query` (its `columns`, `rows` at most), grouped
    part by part: the rows are first streamed out of DuckDB into hash partitions on local disk,
    each a `DISTINCT_SHARE` of the memory limit at `row_bytes` a row, so no aggregate has to
    spill. DuckDB 2.0's hash aggregate over millions of groups fails now and then at a memory
    limit it should spill under (duckdb/duckdb#14132, #22474; measured in
    benchmarks/results/scale.md). Returns the number of parts."""
    limit = memory_limit_bytes(con)
    parts = part_count(con, rows, row_bytes, DISTINCT_SHARE)
    names = ", ".join(columns)
    if parts == 1:  # the whole input fits in memory: nothing to spill
        con.execute(f"CREATE TABLE {table} AS SELECT DISTINCT {names} FROM ({query})")
        return 1
    reader = con.sql(f"SELECT {names}, hash({names}) % {parts} AS part"
                     f" FROM ({query})").to_arrow_reader(
                         max(1 << 12, min(DISTINCT_BATCH, limit // DISTINCT_BATCH_BYTES)))
    with tempfile.TemporaryDirectory(prefix="components-",
                                     dir=current_budget().spill_directory) as folder:
        try:
            files = write_hash_parts(reader, parts, Path(folder), distinct=columns)
        finally:
            reader.close()  # the stream's result is released before the next statement
        con.execute(f"CREATE TABLE {table} AS SELECT {names} FROM ({query}) LIMIT 0")
        for path in files:
            with hash_part(con, "_cc_part", path):
                con.execute(f"INSERT INTO {table} SELECT DISTINCT {names} FROM _cc_part")
    return parts


def connected_components_sql(con: duckdb.DuckDBPyConnection, edges: str, result: str, *,
                             budget: MemoryBudget | None = None,
                             repeated_edges: bool = False) -> ComponentsRun:
    """Create table `result` (`node`, `root`): every node of the relation `edges` (columns `a`,
    `b` of one type, VARCHAR or BIGINT) and the smallest node of its component. Runs in memory
    when the nodes fit `IN_MEMORY_SHARE` of `budget` (default: the current budget), else in
    DuckDB by hooking rounds (see the module); both give the same table.

    `repeated_edges`: most edges repeat (LSH star edges, once per band two documents share: 6x
    at 10^7 synthetic documents), so the distinct pairs are found first, in parts like every
    distinct, and the nodes and their ids come from those: the joins that give each edge its
    ids, the costliest statements at 10^8, then run over each pair once."""
    budget = budget or current_budget()
    count_edges = pairs = scalar(con, f"SELECT count(*) FROM {edges}")
    if repeated_edges:
        _distinct(con, f"SELECT least(a, b) AS a, greatest(a, b) AS b FROM {edges}", ["a", "b"],
                  count_edges, "_cc_pairs", PAIR_ROW_BYTES)
        edges, pairs = "_cc_pairs", scalar(con, "SELECT count(*) FROM _cc_pairs")
    # Dense ids in node order: the smallest id of a component is its smallest node. The
    # distinct nodes are grouped part by part (`_distinct`), then one operator with a large
    # state per statement: a statement holding two (the window's sort and a hash table, or two
    # joins' hash tables) does not fit a 64 MB memory_limit at a few million string nodes.
    node_parts = _distinct(con, f"SELECT a AS node FROM {edges} UNION ALL SELECT b FROM {edges}",
                           ["node"], 2 * pairs, "_cc_distinct")
    con.execute("CREATE TABLE _cc_nodes AS SELECT node,"
                " (row_number() OVER (ORDER BY node) - 1)::BIGINT AS id FROM _cc_distinct")
    con.execute("DROP TABLE _cc_distinct")
    nodes = scalar(con, "SELECT count(*) FROM _cc_nodes")
    con.execute(f"CREATE TABLE _cc_half AS SELECT x.id AS a, e.b FROM {edges} e"
                " JOIN _cc_nodes x ON e.a = x.node")
    con.execute("CREATE TABLE _cc_ids AS SELECT h.a, y.id AS b FROM _cc_half h"
                " JOIN _cc_nodes y ON h.b = y.node")
    con.execute("DROP TABLE _cc_half")
    if repeated_edges:
        con.execute("DROP TABLE _cc_pairs")
    if in_memory(nodes, budget):
        _union_find(con, nodes)
        rounds = jumps = 0
    else:
        rounds, jumps = _hook_rounds(con)
    con.execute("DROP TABLE _cc_ids")
    # One join a statement, as above.
    con.execute("CREATE TABLE _cc_named AS SELECT n.node, p.parent FROM _cc_parent p"
                " JOIN _cc_nodes n ON p.id = n.id")
    con.execute(f"CREATE TABLE {result} AS SELECT n.node, r.node AS root FROM _cc_named n"
                " JOIN _cc_nodes r ON n.parent = r.id")
    con.execute("DROP TABLE _cc_named")
    con.execute("DROP TABLE _cc_parent")
    con.execute("DROP TABLE _cc_nodes")
    return ComponentsRun(rounds, nodes, count_edges, jumps, node_parts, pairs)
