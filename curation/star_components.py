"""Connected components as tasks over the exchange: alternating large-star and small-star rounds
(Kiveris et al., "Connected Components in MapReduce and Beyond", SoCC 2014), no Dagster.

`exchange_components` takes edge objects in the store (`doc_id`, `other_doc_id`: any string
nodes) and writes, per bucket, every node with the smallest node of its component (`node`,
`root`): the answer `curation.components.connected_components_sql` gives, found without any
process ever holding more than one bucket. Each round is one set of tasks (`map_tasks`: the
local pool or Ray), one per bucket of the exchange (`curation.exchange`), each reading the
directed edges `(u, v)` of the nodes `u` its bucket holds and writing its output edges, both
directions, into the next round's buckets:

- large-star: every node `u` links each strictly larger neighbour to `m(u)`, the smallest of
  `u` and its neighbours;
- small-star: every node `u` links itself and each smaller neighbour to the smallest of them.

Neither step ever adds edges (each output edge replaces one input edge), so a round's objects
are no larger than the first's. A large-star changes nothing when every node that has larger
neighbours is its own `m(u)`; a small-star, when no node has two smaller neighbours. When a
large-star and the small-star after it both change nothing, every component is a star centred
on its smallest node (the paper's fixed point), and a last task per bucket labels each node
with its smallest neighbour or itself. Rounds grow with the logarithm of the component
diameter, not with the number of nodes.

Memory: one bucket per task, grouped by DuckDB within its share of the budget
(`task_settings`), its output streamed out in batches of `OUTPUT_BATCH` rows. Buckets are
sized from the edge count (`bucket_count`); a node of very high degree keeps its edges in one
bucket, which DuckDB spills.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain

import duckdb
import pyarrow as pa

from curation.components import connected_components_sql, in_memory
from curation.duck import (
    MemoryBudget,
    current_budget,
    duckdb_session,
    ident,
    register_parts,
    scalar,
)
from curation.exchange import (
    Exchange,
    Slice,
    bucket_count,
    register_slices,
    scratch_bytes,
    task_settings,
)
from curation.executor import map_tasks, ray_address
from curation.storage import Store

DIRECTED_SCHEMA = pa.schema([("u", pa.string()), ("v", pa.string())])
LABEL_SCHEMA = pa.schema([("node", pa.string()), ("root", pa.string())])
DIRECTED_ROW_BYTES = 96
"""The sizing allowance for one directed edge of two doc_id strings in a reduce task (the row,
its hash and the grouping's entry): an estimate, as `curation.components.ROW_BYTES`."""
OUTPUT_BATCH = 1 << 20
MAX_ROUNDS = 200
"""Large-star/small-star pairs before giving up: the paper bounds them by O(log² n); a graph
of 2^64 nodes needs far fewer than this."""

# A round's SQL over `edges` (u, v; both directions, duplicates possible) -> `out` (x, y) and
# the nodes whose step changed the edges.
_NEIGHBOURS = "CREATE TABLE nb AS SELECT DISTINCT u, v FROM edges WHERE u <> v"
_LARGE = """
    CREATE TABLE m AS SELECT u, least(u, min(v)) AS m, max(v) > u AS has_larger
    FROM nb GROUP BY u;
    CREATE TABLE out AS SELECT nb.v AS x, m.m AS y FROM nb JOIN m USING (u) WHERE nb.v > nb.u"""
_LARGE_CHANGED = "SELECT count(*) FROM m WHERE has_larger AND m < u"
_SMALL = """
    CREATE TABLE m AS SELECT u, min(v) AS m, count(*) AS smaller
    FROM nb WHERE v < u GROUP BY u;
    CREATE TABLE out AS
    SELECT nb.v AS x, m.m AS y FROM nb JOIN m USING (u) WHERE nb.v < nb.u AND nb.v <> m.m
    UNION ALL SELECT u, m FROM m"""
_SMALL_CHANGED = "SELECT count(*) FROM m WHERE smaller > 1"


@dataclass(frozen=True)
class ComponentsOutput:
    """`labels`: objects of (`node`, `root`) rows, one per non-empty bucket, each sorted by
    node, every node of the edges once; `changed`: per large-star/small-star pair, the nodes
    whose steps changed the edges (the last is 0); `buckets`: the exchange's bucket count."""

    labels: list[str]
    changed: list[int]
    buckets: int

    @property
    def rounds(self) -> int:
        """Large-star/small-star pairs run."""
        return len(self.changed)


Written = list[dict[int, Slice]]  # what a task wrote: bucket -> slice, one dict a batch


def on_tasks(mode: str, rows: int, budget: MemoryBudget | None = None) -> bool:
    """Whether the components of `rows` edges run as tasks (`mode` `tasks`; or `auto` on a Ray
    cluster once their nodes, at most two an edge, outgrow the parent's in-memory union-find
    under `budget`: `curation.components.in_memory`) rather than in the parent's session
    (`parent`). On one machine the parent's session is the faster (benchmarks/results/
    scale.md, "Components as tasks"); tasks spread the work and the memory over a cluster."""
    if mode != "auto":
        return mode == "tasks"
    return ray_address() is not None and not in_memory(2 * rows, budget or current_budget())


def exchange_components(store: Store, prefix: str, edges: Sequence[str], rows: int,
                        workers: int, buckets: int | None = None,
                        columns: tuple[str, str] = ("doc_id", "other_doc_id")
                        ) -> ComponentsOutput:
    """The connected components of the edge objects `edges` (string `columns`; `rows` in
    all), as tasks over exchanges under `prefix` in `store` (removed as they are read); see
    the module. `buckets` overrides the count sized from `rows`."""
    first = _Exchanges(store, prefix, buckets or bucket_count(2 * rows, DIRECTED_ROW_BYTES,
                                                              workers=workers))
    seeded = map_tasks(_Seed(first, workers, columns), list(enumerate(edges)), workers)
    return _rounds(first, [pairs for pairs, _ in seeded], [loops for _, loops in seeded],
                   workers)


@dataclass(frozen=True)
class _Exchanges:
    """The first step's exchange and the side exchange of self-linked nodes, under `prefix`."""

    store: Store
    prefix: str
    buckets: int

    @property
    def edges(self) -> Exchange:
        return Exchange(self.store, f"{self.prefix}/step-000", self.buckets)

    @property
    def loops(self) -> Exchange:
        return Exchange(self.store, f"{self.prefix}/loops", self.buckets)

    def seed(self, con: duckdb.DuckDBPyConnection, relation: str, x: str, y: str,
             label: str) -> tuple[Written, Written]:
        """The pairs (`x`, `y`) of `relation` into the first step, both ways; a pair of a
        node with itself into `loops` instead, so a node with no other edge still gets its
        label."""
        con.execute(f"CREATE OR REPLACE TEMP VIEW _seed_out AS SELECT {x} AS x, {y} AS y"
                    f" FROM {relation} WHERE {x} <> {y}")
        con.execute(f"CREATE OR REPLACE TEMP VIEW _seed_loop AS SELECT {x} AS x, {x} AS y"
                    f" FROM {relation} WHERE {x} = {y}")
        return (_send(con, "_seed_out", self.edges, label),
                _send(con, "_seed_loop", self.loops, label, both=False))


def _rounds(first: _Exchanges, seeded: list[Written], loops: list[Written],
            workers: int) -> ComponentsOutput:
    """Large-star/small-star pairs from the seeded first step to the fixed point, then the
    labels; every exchange is removed once read."""
    store, exchange = first.store, first.edges
    current = exchange.gather(chain.from_iterable(seeded))
    changed: list[int] = []
    while not changed or changed[-1]:
        if len(changed) == MAX_ROUNDS:
            raise RuntimeError(f"connected components: no fixed point after {MAX_ROUNDS} "
                               "large-star/small-star rounds")
        changes = 0
        for large in (True, False):
            step = Exchange(store, f"{first.prefix}/step-{2 * len(changed) + 2 - large:03d}",
                            first.buckets)
            results = map_tasks(_Star(step, workers, large), _tasks(current), workers)
            store.delete_prefix(exchange.prefix)
            exchange = step
            current = step.gather(chain.from_iterable(pairs for pairs, _ in results))
            changes += sum(count for _, count in results)
        changed.append(changes)
    isolated = first.loops.gather(chain.from_iterable(loops))
    labels = map_tasks(_Label(store, f"{first.prefix}/labels", workers),
                       [(bucket, current[bucket], isolated[bucket])
                        for bucket in range(first.buckets) if current[bucket] or isolated[bucket]],
                       workers)
    store.delete_prefix(exchange.prefix)
    store.delete_prefix(first.loops.prefix)
    return ComponentsOutput(labels, changed, first.buckets)


@dataclass(frozen=True)
class TaskPlacement:
    """Where a step's connected components may run as tasks: the store and the work prefix
    of their exchange, the workers, and the `dedup.components` mode (`on_tasks`)."""

    store: Store
    prefix: str
    workers: int
    mode: str = "auto"


def components_sql(con: duckdb.DuckDBPyConnection, edges: str, result: str,
                   placement: TaskPlacement | None, budget: MemoryBudget | None = None,
                   repeated_edges: bool = False) -> int:
    """Table `result` (`node`, `root`) for the relation `edges` (string `a`, `b`; none gives
    an empty table): as tasks over the exchange when `placement` asks for them (this session
    seeds the first step's buckets itself; everything under its prefix is removed after), else
    `connected_components_sql` in this session (with `repeated_edges`, see there). Returns the
    rounds."""
    rows = scalar(con, f"SELECT count(*) FROM {edges}")
    if not rows:
        con.execute(f"CREATE TABLE {result} AS SELECT a AS node, b AS root FROM {edges} LIMIT 0")
        return 0
    if placement is None or not on_tasks(placement.mode, rows, budget):
        return connected_components_sql(con, edges, result, budget=budget,
                                        repeated_edges=repeated_edges).rounds
    first = _Exchanges(placement.store, placement.prefix,
                       bucket_count(2 * rows, DIRECTED_ROW_BYTES, workers=placement.workers))
    seeded, loops = first.seed(con, edges, "a", "b", "parent")
    output = _rounds(first, [seeded], [loops], placement.workers)
    register_parts(con, "_star_labels", placement.store, output.labels, schema=LABEL_SCHEMA)
    con.execute(f"CREATE TABLE {result} AS SELECT node, root FROM _star_labels")
    placement.store.delete_prefix(placement.prefix)
    return output.rounds


def _tasks(current: list[list[Slice]]) -> list[tuple[int, list[Slice]]]:
    return [(bucket, slices) for bucket, slices in enumerate(current) if slices]


@dataclass(frozen=True)
class _Seed:
    """Map task: one edge object's pairs into the first step (`_Exchanges.seed`). Returns the
    slices written to the step and to its side exchange of self-linked nodes."""

    exchanges: _Exchanges
    workers: int
    columns: tuple[str, str]

    def __call__(self, task: tuple[int, str]) -> tuple[Written, Written]:
        index, key = task
        with duckdb_session(task_settings(self.workers)) as con:
            register_parts(con, "pairs", self.exchanges.store, [key], list(self.columns))
            x, y = (ident(column) for column in self.columns)
            return self.exchanges.seed(con, "pairs", x, y, f"s{index:05d}")


@dataclass(frozen=True)
class _Star:
    """Reduce task: one bucket's large-star (`large`) or small-star step; its output edges go
    to `exchange`, both directions. Returns the slices written and how many nodes changed
    their edges."""

    exchange: Exchange
    workers: int
    large: bool

    def __call__(self, task: tuple[int, list[Slice]]) -> tuple[Written, int]:
        bucket, slices = task
        with duckdb_session(task_settings(self.workers)) as con:
            register_slices(con, "edges", self.exchange.store, slices, schema=DIRECTED_SCHEMA)
            con.execute(_NEIGHBOURS)
            con.execute(_LARGE if self.large else _SMALL)
            changed = scalar(con, _LARGE_CHANGED if self.large else _SMALL_CHANGED)
            return _send(con, "out", self.exchange, f"b{bucket:05d}"), changed


@dataclass(frozen=True)
class _Label:
    """Reduce task: at the fixed point, each node of the bucket with the smallest of itself
    and its neighbours (its star's centre), and each node only ever linked to itself with
    itself, as one object sorted by node."""

    store: Store
    prefix: str
    workers: int

    def __call__(self, task: tuple[int, list[Slice], list[Slice]]) -> str:
        bucket, slices, loops = task
        with duckdb_session(task_settings(self.workers)) as con:
            register_slices(con, "edges", self.store, slices, schema=DIRECTED_SCHEMA)
            register_slices(con, "loops", self.store, loops, schema=DIRECTED_SCHEMA)
            table = con.sql("""
                SELECT u AS node, min(root) AS root FROM (
                    SELECT u, least(u, v) AS root FROM edges UNION ALL SELECT u, u FROM loops)
                GROUP BY u ORDER BY u""").to_arrow_table()
        key = f"{self.prefix}/labels-{bucket:05d}.parquet"
        self.store.write_bytes(key, scratch_bytes(table.cast(LABEL_SCHEMA)))
        return key


def _send(con: duckdb.DuckDBPyConnection, relation: str, exchange: Exchange, label: str, *,
          both: bool = True) -> Written:
    """The rows (x, y) of `relation` into `exchange` as directed edges (u, v) keyed by `u`,
    both ways unless `both` is false, in batches of `OUTPUT_BATCH` rows."""
    directed = f"SELECT x AS u, y AS v FROM {relation}"
    if both:
        directed += f" UNION ALL SELECT y, x FROM {relation}"
    reader = con.sql(f"SELECT u, v, hash(u) AS key FROM ({directed})").to_arrow_reader(
        OUTPUT_BATCH)
    written: Written = []
    try:
        for number, batch in enumerate(reader):
            table = pa.Table.from_batches([batch])
            written.append(exchange.write(f"{label}-{number:05d}",
                                          table.select(["u", "v"]).cast(DIRECTED_SCHEMA),
                                          table["key"].to_numpy()))
    finally:
        reader.close()
    return written
