"""The scale benchmark: every global step over a synthetic partition set of N documents, each in
its own subprocess under a memory budget, with its wall time, CPU time, peak memory and disk.

    python -m benchmarks.scale --documents 1000000 --memory-gb 1 \\
        --json benchmarks/results/scale-1m.json

The data (`benchmarks.synthetic`: MinHash bands, url/text hashes, line hashes, the mix's
annotations and, with `--text`, the shards' text) is generated first, then each step runs as
`python -m benchmarks.scale --step NAME` with `CORPUS_MEMORY_GB` and `CORPUS_SPILL_DIR` set
(`curation.duck`: every DuckDB session of the step keeps to the budget and works under that
folder). Measured per step:

- wall seconds; CPU seconds of the step's process tree (`resource.getrusage(RUSAGE_CHILDREN)`
  around the step, the steps running one at a time, or the CPU `TreeSampler` saw in the tree
  when more: rusage misses a pool's workers, which the step never waits for);
- peak RSS of the process tree (`benchmarks.measure.TreeSampler`: the summed RSS of the child
  and its descendants every 50 ms), and its peak PSS (pages shared by forked workers counted
  once: the memory the tree really holds);
- peak disk: the size of the step's work folder (`CORPUS_SPILL_DIR`) sampled every 50 ms:
  DuckDB's database files (the session's tables) and temporary files; and of the temporary
  (spill) files alone, what DuckDB wrote because an operator did not fit `memory_limit`;
- core-hours per 1B documents (CPU seconds scaled linearly).

Steps: the out-of-core kernels (the `*_sql` functions, which leave their results in the
DuckDB session), each result streamed to Parquet by DuckDB, never fetched into Python; not the
Dagster stages (no store, manifests or locks):

    exact_keys   `key_clusters_sql` on text_hash, then url_hash, all documents at once
    near_dup     LSH bucket grouping over 14 bands as `dedup_clusters` runs it (band rows into
                 the exchange, star edges per bucket), then the connected components in the
                 parent's session (`curation.components`), or as large-star/small-star tasks
                 over the exchange (`curation.star_components`) with SCALE_COMPONENTS=tasks
    cross_index  `CrossIndex.index_partition` per partition, then `clusters_sql`
    line_counts  `frequent_lines_sql` over every document's lines at once
    mix          `group_ids` (components over near_dup's and exact_keys' clusters),
                 `join_groups`, `select_sql`, `mix_sql`; occurrences written to Parquet
    planted_clusters  (not run unless named) the clusters exact_keys and near_dup find, as the
                 generator planted them (`synthetic.write_planted_clusters`), in their place:
                 the mix's input at 10^8 without near_dup's hour
    shards       `plan_shards` (DuckDB orders the occurrences by phase and shuffle key and
                 buckets them with their text), then `build_planned_shards` (ranges of
                 shards in `WORKERS` parallel tasks); only with text (`--text`), when the
                 mix also counts exact tokens with a BPE trained on the synthetic text
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.measure import TreeSampler
from benchmarks.synthetic import (
    BAND_COLUMNS,
    CANDIDATES,
    EXACT_CLUSTERS,
    LINES,
    NEAR_CLUSTERS,
    SIGNATURES,
    Generated,
    Spec,
    generate,
    texts,
    write_planted_clusters,
)
from curation.duck import MEMORY_ENV, SPILL_ENV, spilled_bytes

STEPS = ("exact_keys", "near_dup", "cross_index", "line_counts", "mix", "shards")
NAMED_STEPS = ("planted_clusters",)  # run only when --steps names them
RESULT = "RESULT "
TOKENIZER = "tokenizer.json"
SAMPLE_INTERVAL = 0.05
WORKERS = 2  # the shard build's range tasks (the local pool; Ray under `use_ray`)
COMPONENTS_ENV = "SCALE_COMPONENTS"  # near_dup's `dedup.components` (auto, tasks, parent)


def _spec_of(data: Path) -> Spec:
    return Spec(**json.loads((data / "spec.json").read_text()))


def recipe(spec: Spec) -> Any:
    """A two-phase web recipe over the synthetic partitions."""
    from curation.config import RecipeConfig

    return RecipeConfig.model_validate({
        "name": "scale", "snapshots": spec.partition_names(),
        "selection": {"languages": ["en"], "drop_contaminated": True,
                      "quality_top_fraction": 0.7},
        "cluster_policy": "quality",
        "phases": [{"name": "main", "fraction": 0.9, "weights": {"web": 1.0}},
                   {"name": "anneal", "fraction": 0.1, "weights": {"web": 1.0}}],
        "max_epochs": 2, "tokenizer": {"train_vocab_size": 4096}, "seq_len": 2048,
        "tokens_per_shard": 1 << 24, "seed": 7})


def _copy_clusters(con: Any, result: str, path: Path) -> dict[str, int]:
    """Stream the session's cluster table `result` to Parquet (never fetched into Python)."""
    from curation.duck import copy_to_parquet, scalar

    rows = copy_to_parquet(con, f"SELECT * FROM {result} ORDER BY doc_id", path)
    return {"clustered_documents": rows,
            "clusters": scalar(con, f"SELECT count(DISTINCT cluster_id) FROM {result}")}


# --- the steps (run in the child) -------------------------------------------------------------


MAP_TASK_ROWS = 1 << 18
"""Documents per map task of the grouping steps, like a `documents` part; near duplicates send
one row per band, so their tasks take a quarter of it (about 65k documents, 0.9M band rows)."""


def _map_tasks(files: list[Path], rows_per_task: int) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Consecutive row groups of each file, about `rows_per_task` rows a task."""
    tasks = []
    for path in files:
        metadata = pq.ParquetFile(path).metadata
        groups: list[int] = []
        rows = 0
        for group in range(metadata.num_row_groups):
            groups.append(group)
            rows += metadata.row_group(group).num_rows
            if rows >= rows_per_task:
                tasks.append((str(path), tuple(groups)))
                groups, rows = [], 0
        if groups:
            tasks.append((str(path), tuple(groups)))
    return tuple(tasks)


@dataclass(frozen=True)
class _SendSignatures:
    """A map task of the grouping steps: one task's signature rows into the exchange, as exact
    keys (`key`: `url_hash` or `text_hash`, with placeholder ranking facts: source `web`, the
    partition as snapshot, no text length) or as band rows (`key` None)."""

    tasks: tuple[tuple[str, tuple[int, ...]], ...]
    exchange: Any
    key: str | None

    def __call__(self, index: int) -> dict[int, str]:
        import pyarrow.compute as pc

        from curation.stages.dedup import KEY_ROWS_SCHEMA, send_bands

        path, groups = self.tasks[index]
        table = pq.ParquetFile(path).read_row_groups(list(groups))
        if self.key is None:
            return send_bands(table.drop_columns(["url_hash", "text_hash"]), f"{index:05d}",
                              self.exchange)
        rows = pa.table({"doc_id": table["doc_id"],
                         "source": pa.array(["web"] * len(table), pa.string()),
                         "snapshot": pa.array([Path(path).stem] * len(table), pa.string()),
                         "text_chars": pa.array(np.zeros(len(table), np.int32)),
                         "key": table[self.key]}).filter(pc.is_valid(table[self.key]))
        return self.exchange.write(f"{index:05d}", rows.cast(KEY_ROWS_SCHEMA), "key")


def _grouped(data: Generated, out: Path, name: str, key: str | None,
             row_bytes: int, reduce: Callable[..., Any]) -> tuple[Any, list[Any]]:
    """Map and reduce rounds of a grouping step over the exchange (`WORKERS` local workers):
    the store, and each non-empty bucket's reduce result."""
    from curation.exchange import Exchange, bucket_count
    from curation.executor import map_tasks
    from curation.storage import LocalStore

    store = LocalStore(str(out / name))
    tasks = _map_tasks(data.files(SIGNATURES),
                       MAP_TASK_ROWS if key else MAP_TASK_ROWS // 4)
    rows = data.spec.documents * (1 if key else len(BAND_COLUMNS))
    exchange = Exchange(store, "work/exchange", bucket_count(rows, row_bytes, workers=WORKERS))
    written = map_tasks(_SendSignatures(tasks, exchange, key), range(len(tasks)), WORKERS)
    filled = [(bucket, keys) for bucket, keys in enumerate(exchange.gather(written)) if keys]
    reduced = map_tasks(reduce(store, "work/reduced", WORKERS), filled, WORKERS)
    store.delete_prefix(exchange.prefix)
    return store, reduced


def step_exact_keys(data: Generated, out: Path) -> dict[str, Any]:
    """URL and text keys grouped as the dedup stages group them: map tasks into the exchange,
    a reduce task per bucket (clusters and kept members), then one sorted output."""
    from curation.duck import duckdb_session, register_parts
    from curation.stages.dedup import KEY_ROW_BYTES, KeyBucket

    found = {}
    for key in ("text", "url"):
        store, reduced = _grouped(data, out, f"exact_{key}", f"{key}_hash", KEY_ROW_BYTES,
                                  KeyBucket)
        with duckdb_session() as con:
            register_parts(con, "decided", store, [object_key for object_key, _ in reduced])
            found[key] = {**_copy_clusters(con, "decided", out / f"exact_{key}.parquet"),
                          "buckets": len(reduced)}
        store.delete_prefix("work")
    return found


def step_near_dup(data: Generated, out: Path) -> dict[str, Any]:
    """LSH grouping as `dedup_clusters` runs it: band rows into the exchange, star edges per
    bucket, then the connected components over every bucket's edges."""
    from curation.duck import duckdb_session

    store, reduced = _near_dup_edges(data, out)
    # This process's CPU (the session's threads); tasks (SCALE_COMPONENTS=tasks) are not in it.
    wall, cpu = time.perf_counter(), time.process_time()
    with duckdb_session() as con:
        result = _near_dup_components(store, reduced, out, con)
    store.delete_prefix("work")
    return {**result, "components_wall_s": round(time.perf_counter() - wall, 1),
            "components_cpu_s": round(time.process_time() - cpu, 1)}


def _near_dup_edges(data: Generated, out: Path) -> tuple[Any, list[Any]]:
    """near_dup's map and reduce rounds: the store and each bucket's star edges."""
    from curation.stages.dedup import BAND_ROW_BYTES, BandBucket

    return _grouped(data, out, "near_dup", None, BAND_ROW_BYTES, BandBucket)


def _near_dup_components(store: Any, reduced: list[Any], out: Path, con: Any) -> dict[str, Any]:
    """near_dup's connected components over the reduced buckets' edges in `con`, the clusters
    written to `out`; the step's result."""
    from curation.dedup import stored_edge_clusters_sql
    from curation.stages.dedup import reduce_stats
    from curation.star_components import TaskPlacement

    placement = TaskPlacement(store, "work/components", WORKERS,
                              os.environ.get(COMPONENTS_ENV, "auto"))
    stats = stored_edge_clusters_sql(con, [key for key, _ in reduced], "clusters",
                                     reduce_stats([c for _, c in reduced]), placement)
    return {**_copy_clusters(con, "clusters", out / NEAR_CLUSTERS),
            "edges": stats.edges, "hot_buckets": stats.hot_buckets,
            "capped_members": stats.capped_members, "rounds": stats.rounds,
            "buckets": len(reduced)}


def step_cross_index(data: Generated, out: Path) -> dict[str, Any]:
    from curation.dedup import CrossIndex
    from curation.duck import duckdb_session

    shutil.rmtree(out / "cross", ignore_errors=True)  # an earlier run's index skips every partition
    index = CrossIndex(out / "cross")
    links = sum(index.index_partition(name, path) for name, path in
                zip(data.spec.partition_names(), data.files(SIGNATURES), strict=True))
    with duckdb_session() as con:
        stats = index.clusters_sql(con, "clusters")
        return {**_copy_clusters(con, "clusters", out / "cross.parquet"),
                "cross_links": links, "rounds": stats.rounds}


@dataclass(frozen=True)
class _LineRowGroups:
    """The line_counts step's map input: one row group of a generated line table per part
    (each holds whole documents, see `benchmarks.synthetic.generate`)."""

    groups: tuple[tuple[str, int], ...]

    def __call__(self, part: int) -> Any:
        path, group = self.groups[part]
        return pq.ParquetFile(path).read_row_group(group)


def step_line_counts(data: Generated, out: Path) -> dict[str, Any]:
    """`line_dedup`'s three rounds (curation/stages/line_dedup.py) on `WORKERS` local workers,
    each map task one row group of the line tables."""
    from curation.config import DedupSettings
    from curation.executor import map_tasks
    from curation.stages.line_dedup import plan_line_edits
    from curation.storage import LocalStore

    groups = tuple((str(path), group) for path in data.files(LINES)
                   for group in range(pq.ParquetFile(path).num_row_groups))
    store = LocalStore(str(out / "line_counts"))
    edits = plan_line_edits(_LineRowGroups(groups), len(groups), data.spec.documents, "work",
                            store, DedupSettings(), WORKERS)
    outputs = map_tasks(edits, range(len(groups)), WORKERS)
    totals = {"frequent_lines": edits.frequent_lines, "buckets": edits.buckets,
              "map_tasks": len(groups)}
    for name in ("lines_removed", "documents_edited"):
        totals[name] = sum(output.stats.counts[name] for output in outputs)
    for name, folder in (("edits", "line_edits"), ("part", "line_documents")):
        (out / folder).mkdir(exist_ok=True)
        for index, output in enumerate(outputs):  # each part's output, as the stage stores it
            shutil.move(output.tables[name], out / folder / f"{index:05d}.parquet")
    for output in outputs:
        output.tables["decisions"].unlink()
    store.delete_prefix("work")
    return totals


def _count_tokens(con: Any, data: Generated) -> None:
    """Table `token_counts` (`doc_id`, `tokens`): the chosen documents' exact tokens, EOS
    included, from their text a DuckDB batch at a time (what `count_tokens_sql` does with the
    scrubbed parts), so the mix plans on the tokens the shards will hold."""
    from curation.duck import literal
    from curation.shards import occurrence_lengths
    from curation.tokenizer import tokenizer_from_bytes

    tokenizer = tokenizer_from_bytes((data.folder / TOKENIZER).read_bytes())
    files = ", ".join(literal(str(p)) for p in data.files("text"))
    con.execute("CREATE TABLE token_counts (doc_id VARCHAR, tokens BIGINT)")
    reader = con.cursor().sql(
        f"SELECT t.doc_id, t.text FROM read_parquet([{files}]) t"
        " SEMI JOIN chosen c ON c.doc_id = t.doc_id").to_arrow_reader(SHARD_BATCH)
    for batch in reader:
        counts = pa.table({"doc_id": batch["doc_id"], "tokens": pa.array(
            occurrence_lengths(batch["text"].to_pylist(), tokenizer), pa.int64())})
        con.register("_counts", counts)
        con.execute("INSERT INTO token_counts SELECT * FROM _counts")
        con.unregister("_counts")


MIX_CLUSTERS = (NEAR_CLUSTERS, EXACT_CLUSTERS)


def _mix_session(data: Generated, out: Path, con: Any) -> tuple[Any, int]:
    """The mix of the synthetic candidates in `con`, grouped by the clusters of the earlier
    steps, on exact token counts when there is text; returns its `MixRun` and the number of
    cluster memberships it grouped by."""
    from curation.duck import literal
    from curation.mix import group_ids, join_groups, mix_sql, select_sql

    clusters = [out / name for name in MIX_CLUSTERS]
    missing = [path.name for path in clusters if not path.exists()]
    if missing:
        raise SystemExit(f"the mix groups by the clusters of exact_keys and near_dup; {missing} "
                         f"not in {out}: run those steps first (with --reuse, an earlier run's "
                         "outputs serve)")
    files = ", ".join(literal(str(p)) for p in data.files(CANDIDATES))
    con.execute(f"CREATE TABLE gathered AS SELECT * FROM read_parquet([{files}])")
    con.execute("CREATE TABLE members (scope VARCHAR, cluster_id VARCHAR, doc_id VARCHAR)")
    for path in clusters:
        con.execute(f"INSERT INTO members SELECT {literal(path.stem)}, cluster_id, doc_id"
                    f" FROM read_parquet({literal(str(path))})")
    memberships = con.execute("SELECT count(*) FROM members").fetchone()[0]
    group_ids(con, "gathered", "members", "groups")
    join_groups(con, "gathered", "groups", "g.verdict_drop", "NULL::INTEGER")
    for table in ("gathered", "members", "groups"):
        con.execute(f"DROP TABLE {table}")
    select_sql(con, recipe(data.spec))
    exact = bool(data.files("text"))
    if exact:
        _count_tokens(con, data)
    return mix_sql(con, recipe(data.spec), exact=exact), memberships


def step_mix(data: Generated, out: Path) -> dict[str, Any]:
    from curation.duck import copy_to_parquet, duckdb_session
    from curation.mix import occurrence_rows

    with duckdb_session() as con:
        run, memberships = _mix_session(data, out, con)
        occurrences = copy_to_parquet(
            con, occurrence_rows(),
            out / "occurrences.parquet")
    return {"candidates": run.candidates, "selected": run.selected, "occurrences": occurrences,
            "achieved_tokens": run.achieved_tokens, "token_counts": run.token_counts,
            "memberships": memberships}


SHARD_BATCH = 4096


def step_shards(data: Generated, out: Path) -> dict[str, Any]:
    """The shard build of `curation.stages.dataset`: `plan_shards` (DuckDB orders the
    occurrences and buckets them with their text), then `build_planned_shards` (ranges of
    shards in parallel tasks through `map_tasks`)."""
    from curation.duck import duckdb_session, literal
    from curation.shards import BuildInfo, ShardSettings, build_planned_shards, plan_shards
    from curation.tokenizer import tokenizer_from_bytes

    if not data.files("text"):
        return {"skipped": "no text (generate with --text)"}
    tokenizer = tokenizer_from_bytes((data.folder / TOKENIZER).read_bytes())
    settings = ShardSettings.from_recipe(recipe(data.spec), threads=1)
    files = ", ".join(literal(str(p)) for p in data.files("text"))
    with duckdb_session() as con:
        con.execute("CREATE VIEW occurrences AS SELECT * FROM"
                    f" read_parquet({literal(str(out / 'occurrences.parquet'))})")
        con.execute(f"CREATE VIEW texts AS SELECT doc_id, text FROM read_parquet([{files}])")
        plan = plan_shards(con, "occurrences", "texts", ("doc_id",), settings, out / "plan")
    build = build_planned_shards(plan, tokenizer, out / "shards", settings,
                                 BuildInfo("scale", "scale", "scale"), WORKERS, overwrite=True)
    totals = build.manifest["totals"]
    manifest = hashlib.sha256((out / "shards" / "manifest.json").read_bytes()).hexdigest()
    shutil.rmtree(out / "shards")
    shutil.rmtree(out / "plan")
    return {"tokens": totals["tokens"], "occurrences": totals["occurrences"],
            "manifest_sha256": manifest, "workers": WORKERS,
            "timings": {k: round(v, 2) for k, v in build.timings.items()}}


def step_planted_clusters(data: Generated, out: Path) -> dict[str, Any]:
    return write_planted_clusters(out, data.spec)


STEP_FUNCTIONS: dict[str, Callable[[Generated, Path], dict[str, Any]]] = {
    "exact_keys": step_exact_keys, "near_dup": step_near_dup, "cross_index": step_cross_index,
    "line_counts": step_line_counts, "mix": step_mix, "shards": step_shards,
    "planted_clusters": step_planted_clusters}


# --- the parent: generate, then measure each step ----------------------------------------------


def prepare(data: Path, spec: Spec) -> Generated:
    """Generate `spec` under `data` (with the shards' tokenizer when there is text)."""
    from curation.tokenizer import train_bpe

    if data.exists():
        shutil.rmtree(data)
    generated = generate(data, spec)
    (data / "spec.json").write_text(json.dumps(spec.__dict__))
    if spec.text:
        import numpy as np

        sample = texts(np.arange(min(spec.documents, 2000), dtype=np.int64), spec)
        (data / TOKENIZER).write_bytes(train_bpe(sample, 4096).json_bytes)
    return generated


def _sizes(folder: Path) -> tuple[int, int]:
    """Bytes under `folder`: all of them, and those of DuckDB's temporary (spill) files, which
    each session keeps in its `spill` subfolder (`curation.duck.duckdb_session`)."""
    total = spilled = 0
    # os.walk skips folders that vanish while it lists them (a session's spill folder)
    for parent, _, names in os.walk(folder):
        in_spill = "spill" in Path(parent).relative_to(folder).parts
        for name in names:
            try:
                size = os.stat(os.path.join(parent, name)).st_size
            except FileNotFoundError:  # a session's file removed while listed
                continue
            total += size
            spilled += size if in_spill else 0
    return total, spilled


class _DiskSampler:
    """The peak size of a step's work folder (DuckDB databases and spill files) and of its
    spill files alone, sampled in a thread."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.peak, self.peak_spilled = folder, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            total, spilled = _sizes(self.folder)
            self.peak, self.peak_spilled = max(self.peak, total), max(self.peak_spilled, spilled)
            self._stop.wait(SAMPLE_INTERVAL)

    def __enter__(self) -> _DiskSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def measure_step(step: str, data: Path, out: Path, memory_gb: float,
                 documents: int) -> dict[str, Any]:
    """Run `step` in a subprocess under the budget; its measured row."""
    spill = out / "spill" / step
    spill.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, MEMORY_ENV: str(memory_gb), SPILL_ENV: str(spill)}
    command = [sys.executable, "-m", "benchmarks.scale", "--step", step, "--data", str(data),
               "--out", str(out)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with _DiskSampler(spill) as disk:
        child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        sampler = TreeSampler(child.pid, SAMPLE_INTERVAL).start()
        stdout, stderr = child.communicate()
        sampler.stop()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # A pool's workers are the fork server's children, which the step never waits for, so
    # rusage misses them: the sampled CPU of every process seen in the tree covers them.
    cpu = max((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
              sampler.cpu_seconds)
    if child.returncode != 0:
        raise RuntimeError(f"step {step} failed ({child.returncode}):\n{stderr[-4000:]}")
    result = json.loads([line for line in stdout.splitlines()
                         if line.startswith(RESULT)][-1].removeprefix(RESULT))
    return {"step": step, "documents": documents, "memory_gb": memory_gb,
            "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "peak_rss_mb": round(sampler.peak_rss / 2**20, 1),
            "peak_pss_mb": round(sampler.peak_pss / 2**20, 1),
            "peak_disk_mb": round(disk.peak / 2**20, 1),
            "peak_spilled_mb": round(disk.peak_spilled / 2**20, 1),
            "core_hours_per_1b_docs": round(cpu / 3600 * 1e9 / documents, 1),
            "result": result}


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"  # results files from before PSS was kept


def table(rows: list[dict[str, Any]]) -> str:
    header = (f"{'step':<12} {'documents':>11} {'wall s':>8} {'CPU s':>8} {'peak RSS MB':>12}"
              f" {'PSS MB':>7} {'peak disk MB':>13} {'spilled MB':>11} {'core-h/1B docs':>15}")
    lines = [header, "-" * len(header)]
    for row in rows:
        if "skipped" in row["result"]:
            lines.append(f"{row['step']:<12} {row['documents']:>11,}  skipped:"
                         f" {row['result']['skipped']}")
            continue
        lines.append(f"{row['step']:<12} {row['documents']:>11,} {row['wall_s']:>8.1f}"
                     f" {row['cpu_s']:>8.1f} {row['peak_rss_mb']:>12.1f}"
                     f" {_cell(row.get('peak_pss_mb')):>7}"
                     f" {row['peak_disk_mb']:>13.1f} {row['peak_spilled_mb']:>11.1f}"
                     f" {row['core_hours_per_1b_docs']:>15.1f}")
    return "\n".join(lines)


def run(documents: int, memory_gb: float, steps: list[str], work: Path, partitions: int,
        text: bool, seed: int = 0, reuse: bool = False) -> dict[str, Any]:
    """Generate (unless `reuse` and `work` holds data of the same spec), then measure every
    step in order; the report as a dict."""
    spec = Spec(documents=documents, partitions=partitions, seed=seed, text=text,
                lines="line_counts" in steps)
    start = time.perf_counter()
    folder = work / "data"
    found = _spec_of(folder) if reuse and (folder / "spec.json").exists() else None
    # Data with line tables serves steps that do not read them.
    reused = found is not None and found in (spec, dataclasses.replace(spec, lines=True))
    data = Generated(folder, found) if reused else prepare(folder, spec)
    spec = data.spec
    generated_s = time.perf_counter() - start
    out = work / "out"
    if out.exists() and not reused:  # reused data keeps its steps' outputs (the mix reads them)
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    print(table(rows), flush=True)
    for step in steps:
        rows.append(measure_step(step, data.folder, out, memory_gb, documents))
        print(table(rows).splitlines()[-1], flush=True)
    return {"spec": spec.__dict__, "generate_s": round(generated_s, 1),
            "input_mb": round(spilled_bytes(data.folder) / 2**20, 1),
            "cpu_count": os.cpu_count(), "rows": rows}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--memory-gb", type=float, default=1.0)
    parser.add_argument("--steps", default=",".join(STEPS),
                        help=f"comma-separated, of {', '.join(STEPS + NAMED_STEPS)}")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--text", choices=("auto", "yes", "no"), default="auto",
                        help="write the shards' text (auto: up to 200,000 documents)")
    parser.add_argument("--work", type=Path, default=None,
                        help="folder for the data and outputs (default: a temporary one)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--reuse", action="store_true",
                        help="keep the data in --work when it was generated with the same spec")
    parser.add_argument("--step", help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.step:  # the child
        data = Generated(args.data, _spec_of(args.data))
        print(RESULT + json.dumps(STEP_FUNCTIONS[args.step](data, args.out)), flush=True)
        return
    steps = [s for s in args.steps.split(",") if s]  # none: only generate (with --reuse)
    unknown = set(steps) - set(STEPS) - set(NAMED_STEPS)
    if unknown:
        parser.error(f"unknown steps {sorted(unknown)}; use {', '.join(STEPS + NAMED_STEPS)}")
    text = args.text == "yes" or (args.text == "auto" and args.documents <= 200_000)
    work = args.work or Path(os.environ.get("TMPDIR", "/tmp")) / f"scale-{args.documents}"
    report = run(args.documents, args.memory_gb, steps, work, args.partitions, text,
                 reuse=args.reuse)
    print(f"\ngenerated {report['input_mb']} MB in {report['generate_s']} s")
    print(table(report["rows"]))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
