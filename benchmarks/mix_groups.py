"""The mix's duplicate groups (`curation.mix.group_ids`) at 10⁷ and 10⁸ documents: components
over the clusters' names against components over the documents (the graph before).

    .venv/bin/python benchmarks/mix_groups.py [--documents 10000000 100000000]
        [--memory-gb 1] [--work DIR]

For each size, writes the synthetic partition's documents (`benchmarks/synthetic.py`, the
scale benchmark's) and the clusters `exact_keys` and `near_dup` find in it, as planted
(`synthetic.write_planted_clusters`: every family of two or more a near-duplicate cluster,
its exact copies an exact cluster inside it). Then, in a fresh process per (size, graph) under the
budget, one DuckDB session loads them as the mix does and groups them:

- `clusters`: `group_ids`, components over the cluster names;
- `documents`: the graph before, every member linked to its cluster's smallest member and
  `connected_components_sql` over the documents.

Prints wall and CPU seconds of the grouping alone, the process's peak RSS, the groups and
whether the clusters' graph gives the first graph's groups (a checksum over every (doc_id,
group_id)); a run that fails (DuckDB out of memory) is a row saying so.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from benchmarks.measure import RESULT_PREFIX, Measured, run_measured  # noqa: E402
from benchmarks.synthetic import (  # noqa: E402
    EXACT_CLUSTERS,
    NEAR_CLUSTERS,
    Spec,
    chunks,
    doc_ids,
    write_planted_clusters,
)

GRAPHS = ("documents", "clusters")


def generate(folder: Path, documents: int) -> int:
    """`documents.parquet` (doc_id) and the planted clusters (`write_planted_clusters`) under
    `folder`; returns the memberships."""
    spec = Spec(documents=documents)
    folder.mkdir(parents=True, exist_ok=True)
    with pq.ParquetWriter(folder / "documents.parquet", pa.schema([("doc_id", pa.string())])) \
            as writer:
        for chunk in chunks(spec):
            writer.write_table(pa.table({"doc_id": doc_ids(chunk)}))
    return sum(write_planted_clusters(folder, spec).values())


def _previous_graph(con, documents: str, members: str, result: str) -> None:
    """The groups as `group_ids` found them before: components over the documents."""
    from curation.components import connected_components_sql

    con.execute(f"""
        CREATE TABLE _edges AS SELECT a, b FROM (
            SELECT m.doc_id AS a, min(m.doc_id) OVER (PARTITION BY m.scope, m.cluster_id) AS b
            FROM {members} m SEMI JOIN {documents} d ON d.doc_id = m.doc_id)
        WHERE a <> b""")
    connected_components_sql(con, "_edges", "_components")
    con.execute(f"CREATE TABLE {result} AS SELECT d.doc_id, coalesce(c.root, d.doc_id) "
                f"AS group_id FROM {documents} d LEFT JOIN _components c ON c.node = d.doc_id")


def child(folder: Path, graph: str) -> None:
    from curation.duck import duckdb_session
    from curation.mix import group_ids

    with duckdb_session() as con:
        con.execute(f"CREATE TABLE gathered AS SELECT doc_id FROM '{folder}/documents.parquet'")
        con.execute("CREATE TABLE members (scope VARCHAR, cluster_id VARCHAR, doc_id VARCHAR)")
        for scope in (NEAR_CLUSTERS, EXACT_CLUSTERS):
            con.execute(f"INSERT INTO members SELECT '{scope}', cluster_id, doc_id"
                        f" FROM '{folder / scope}'")
        wall, cpu = time.perf_counter(), time.process_time()
        if graph == "clusters":
            group_ids(con, "gathered", "members", "groups")
        else:
            _previous_graph(con, "gathered", "members", "groups")
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        # `group_ids` leaves out the documents in no cluster (each its own group); a group's
        # id is one of its documents (no DISTINCT: DuckDB does not spill those)
        groups, checksum = con.execute(
            "SELECT count(*) FILTER (doc_id = group_id),"
            " sum(hash(doc_id, group_id)::HUGEINT) % 1000000007"
            " FROM (SELECT doc_id, coalesce(group_id, doc_id) AS group_id"
            " FROM gathered LEFT JOIN groups USING (doc_id))").fetchone()
    print(RESULT_PREFIX + json.dumps({"wall_s": wall, "cpu_s": cpu, "groups": groups,
                                      "checksum": int(checksum)}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, nargs="+", default=[10**7, 10**8])
    parser.add_argument("--memory-gb", type=float, default=1.0)
    parser.add_argument("--work", type=Path, help="where the data goes (default: a temporary "
                        "folder, removed after)")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(Path(args.child[0]), args.child[1])
        return 0
    with tempfile.TemporaryDirectory(prefix="mix-groups-", dir=args.work) as work:
        env = {**os.environ, "CORPUS_MEMORY_GB": str(args.memory_gb), "CORPUS_SPILL_DIR": work}
        print(f"budget {args.memory_gb} GB\n")
        print("| documents | memberships | graph | wall s | CPU s | peak RSS MB | groups |"
              " same groups |")
        print("| ---: | ---: | --- | ---: | ---: | ---: | ---: | --- |")
        for documents in args.documents:
            folder = Path(work) / str(documents)
            memberships = generate(folder, documents)
            checksums = set()
            for graph in GRAPHS:
                measured = run_measured([sys.executable, __file__, "--child", str(folder), graph],
                                        Path(work) / f"{documents}-{graph}", env=env)
                print(f"| {documents:,} | {memberships:,} | {graph} | "
                      + _cells(measured, checksums), flush=True)
    return 0


def _cells(measured: Measured, checksums: set[int]) -> str:
    """A run's cells; a failed run (DuckDB out of memory) says so and how it ended."""
    if not measured.ok:
        errors = [line for line in measured.log_path.read_text().splitlines() if "Error" in line]
        return f"failed: {(errors or ['no error line'])[-1][-160:]} | | | | |"
    result = measured.result
    same = "yes" if checksums == {result["checksum"]} else "NO" if checksums else "(first)"
    checksums.add(result["checksum"])
    return (f"{result['wall_s']:.1f} | {result['cpu_s']:.1f} |"
            f" {measured.peak_rss_bytes / 2**20:,.0f} | {result['groups']:,} | {same} |")


if __name__ == "__main__":
    raise SystemExit(main())
