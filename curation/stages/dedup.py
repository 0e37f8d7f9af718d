"""The dedup stages of one partition (URL, exact text, MinHash near duplicates, boilerplate
lines) and the cross-partition links, around the kernels in `curation/dedup.py`.

Clusters never depend on a recipe. Each non-kept member gets a decision row whose `kept_doc_id`
names the member the default ranking keeps (curated first, earliest snapshot, longest text); the
mix applies the same ranking to the members that pass its selection.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from curation.config import DedupSettings, stable_hash
from curation.dedup import (
    CLUSTER_SCHEMA,
    Clusters,
    CrossIndex,
    Ranking,
    choose_kept,
    cluster_by_key,
    cluster_near_duplicates,
    frequent_lines,
    line_hash_table,
    text_hash,
    url_hash,
)
from curation.executor import map_tasks
from curation.graph import (
    ALL,
    CROSS_DEDUP,
    DEDUP_CLUSTERS,
    DOCUMENTS,
    EXACT_DEDUP,
    LINE_DEDUP,
    MINHASH_SIGNATURES,
    URL_DEDUP,
)
from curation.partition import Manifest, PartitionLayout
from curation.schema import EDIT_SCHEMA, decisions_table
from curation.stages.base import DocumentsInput
from curation.stats import StageStats
from curation.storage import LocalStore, Store, read_parquet
from curation.tasks import PartitionResult, PartitionRun, TaskOutput, hold_locks, run_partition

KERNEL_VERSION = "dedup-1"
URL, EXACT, NEAR, LINES, CROSS = URL_DEDUP, EXACT_DEDUP, DEDUP_CLUSTERS, LINE_DEDUP, CROSS_DEDUP
REASONS = {URL: "duplicate_url", EXACT: "duplicate_text", NEAR: "near_duplicate",
           CROSS: "cross_partition_duplicate"}
OUTPUT_SCHEMA = pa.schema([*CLUSTER_SCHEMA, pa.field("kept_doc_id", pa.string()),
                           pa.field("keep", pa.bool_())])


_KEY_COLUMNS = {URL: "url_hash", EXACT: "text_hash"}


def _members(documents: DocumentsInput, keys: tuple[str, ...] = ()) -> pa.Table:
    """doc_id, source, snapshot and text_chars (what the default ranking needs) plus the exact
    keys asked for (`url_hash`, `text_hash`), reading each documents part once."""
    tables = []
    for index in range(documents.task_count()):
        part = documents.layout.read_part(
            index, columns=["doc_id", "source", "snapshot", "url", "text"])
        table = part.select(["doc_id", "source", "snapshot"]).append_column(
            "text_chars", pc.utf8_length(part["text"]))
        if "url_hash" in keys:
            table = table.append_column("url_hash", pa.array(
                [url_hash(url) if url else None for url in part["url"].to_pylist()], pa.uint64()))
        if "text_hash" in keys:
            table = table.append_column("text_hash", pa.array(
                [text_hash(text) for text in part["text"].to_pylist()], pa.uint64()))
        tables.append(table)
    return pa.concat_tables(tables)


def decide(clusters: Clusters, facts: pa.Table, stage: str,
           policy: str = "longest") -> tuple[pa.Table, pa.Table, StageStats]:
    """Cluster rows with `kept_doc_id` and `keep`, drop decisions, and statistics."""
    members = clusters.table.join(facts, "doc_id")
    kept = choose_kept(members, Ranking(policy=policy)) if members.num_rows else None
    rows = clusters.table
    if kept is not None:
        rows = rows.join(kept.select(["doc_id", "kept_doc_id"]), "doc_id").sort_by("doc_id")
    else:
        rows = rows.append_column("kept_doc_id", pa.array([], pa.string()))
    keep = pc.equal(rows["doc_id"], rows["kept_doc_id"])
    rows = rows.append_column("keep", keep).cast(OUTPUT_SCHEMA)
    dropped = rows.filter(pc.invert(keep))
    decisions = decisions_table([
        {"doc_id": row["doc_id"], "stage": stage, "verdict": "drop", "reason": REASONS[stage],
         "value": float(row["cluster_size"]), "detail": row["cluster_id"],
         "kept_doc_id": row["kept_doc_id"]}
        for row in dropped.to_pylist()])
    stats = StageStats(records_in=facts.num_rows, candidates=facts.num_rows,
                       docs_out=facts.num_rows - dropped.num_rows)
    stats.rejects[REASONS[stage]] = dropped.num_rows
    stats.counts.update({f"cluster_size.{size}": count for size, count in Counter(
        rows["cluster_size"].to_pylist()).items()})
    stats.counts["clusters"] = clusters.stats.clusters
    stats.counts["hot_buckets"] = clusters.stats.hot_buckets
    stats.counts["capped_members"] = clusters.stats.capped_members
    return rows, decisions, stats


@dataclass(frozen=True)
class ClusterWork:
    """One task for the whole partition: grouping needs every document's key."""

    documents: DocumentsInput
    stage: str
    settings: DedupSettings

    def __call__(self, index: int) -> TaskOutput:
        key = _KEY_COLUMNS.get(self.stage)
        members = _members(self.documents, (key,) if key else ())
        if key is None:
            clusters = cluster_near_duplicates(
                _signatures(self.documents.store, self.documents.partition),
                max_bucket_size=self.settings.max_bucket_size)
        else:
            clusters = cluster_by_key(members.select(["doc_id", key]), key)
            members = members.drop_columns([key])
        rows, decisions, stats = decide(clusters, members, self.stage)
        return TaskOutput({"part": rows, "decisions": decisions}, stats)


def _signatures(store: Store, partition: str) -> pa.Table | list[str]:
    """The partition's band hashes: Parquet paths for DuckDB to stream locally, else Arrow
    (signatures only, 14 integers a document)."""
    layout = PartitionLayout(store, MINHASH_SIGNATURES, partition)
    parts = layout.complete_manifest().parts
    if isinstance(store, LocalStore):
        return [store.uri(part.key) for part in parts]
    return pa.concat_tables([read_parquet(store, part.key) for part in parts])


@dataclass(frozen=True)
class _PartLineHashes:
    documents: DocumentsInput

    def __call__(self, part: int) -> pa.Table:
        table = self.documents.read(part)
        return line_hash_table(table["doc_id"].to_pylist(), table["text"].to_pylist())


@dataclass(frozen=True)
class LineWork:
    """One task for the whole partition (a line is frequent across all of it); the lines of
    each document part are hashed on the workers, most of the stage's time."""

    documents: DocumentsInput
    settings: DedupSettings
    workers: int = 0

    def __call__(self, index: int) -> TaskOutput:
        tables = map_tasks(_PartLineHashes(self.documents), range(self.documents.task_count()),
                           self.workers)
        found = frequent_lines(pa.concat_tables(tables),
                               max_documents=self.settings.line_max_documents,
                               min_chars=self.settings.line_min_chars)
        edits = found.edits
        edit_rows = pa.table({
            "doc_id": edits["doc_id"], "stage": pa.array([LINES] * edits.num_rows),
            "kind": pa.array(["boilerplate_line"] * edits.num_rows),
            "line": edits["line"].cast(pa.int32()),
            "start": pa.nulls(edits.num_rows, pa.int64()),
            "end": pa.nulls(edits.num_rows, pa.int64())}, schema=EDIT_SCHEMA)
        empty = found.documents.filter(found.documents["empty_after_edits"])
        decisions = decisions_table([
            {"doc_id": doc_id, "stage": LINES, "verdict": "drop", "reason": "empty_after_edits",
             "value": float(lines)}
            for doc_id, lines in zip(empty["doc_id"].to_pylist(),
                                     empty["lines_removed"].to_pylist(), strict=True)])
        total = sum(table.num_rows for table in tables)
        documents = pc.count_distinct(pa.concat_tables(tables)["doc_id"]).as_py()
        stats = StageStats(records_in=documents, candidates=documents,
                           docs_out=documents - empty.num_rows)
        stats.rejects["empty_after_edits"] = empty.num_rows
        stats.counts.update({"lines": total, "lines_removed": edits.num_rows,
                             "frequent_lines": found.frequent_lines,
                             "documents_edited": found.documents.num_rows})
        return TaskOutput({"part": found.documents, "edits": edit_rows,
                           "decisions": decisions}, stats)


def run_partition_dedup(documents: DocumentsInput, stage: str, settings: DedupSettings,
                        upstream_versions: dict[str, str], workers: int = 0) -> PartitionResult:
    work = LineWork(documents, settings, workers) if stage == LINES else ClusterWork(
        documents, stage, settings)
    version = stable_hash({"kernel": KERNEL_VERSION, "stage": stage,
                           "settings": settings.model_dump(mode="json"),
                           "documents": documents.data_version(), **upstream_versions})
    run = PartitionRun(documents.store, stage, documents.partition, version)
    return run_partition(run, 1, work, workers=0)


# --- across partitions ------------------------------------------------------------------------


def _cross_keys(store: Store, partition: str, near: bool) -> tuple[pa.Table, pa.Table]:
    """The partition's keys for the index, and its members' ranking facts."""
    members = _members(DocumentsInput(store, partition), ("url_hash", "text_hash"))
    keys = members.select(["doc_id", "url_hash", "text_hash"])
    if near:
        keys = keys.join(PartitionLayout(store, MINHASH_SIGNATURES, partition).read_table(),
                         "doc_id")
    return keys, members.drop_columns(["url_hash", "text_hash"])


@dataclass(frozen=True)
class CrossRun:
    added: list[str]
    reused: list[str]
    links: int
    stats: StageStats
    manifest: Manifest


def cross_dedup_version(store: Store, partitions: list[str], settings: DedupSettings) -> str:
    """The links' version: the kernel, the settings and every partition's documents."""
    return stable_hash({"kernel": KERNEL_VERSION, "settings": settings.model_dump(),
                        DOCUMENTS: {p: DocumentsInput(store, p).data_version()
                                    for p in partitions}})


def run_cross_dedup(store: Store, partitions: list[str], settings: DedupSettings,
                    run_id: str | None = None) -> CrossRun:
    """Adds the partitions not yet in the index (only those are read), then clusters the links
    of all of them, names per cluster the member the default ranking keeps, and writes
    `cross_dedup[all]` under the partitions' versions, holding its lock throughout."""
    layout = PartitionLayout(store, CROSS, ALL)
    version = cross_dedup_version(store, partitions, settings)
    with hold_locks(store, [CROSS], ALL, run_id=run_id):
        index_folder = local_index_folder(store)
        _drop_stale_index(store, partitions, settings, index_folder)
        index = CrossIndex(index_folder, max_bucket_size=settings.max_bucket_size)
        known = set(index.partitions())
        added = [p for p in partitions if p not in known]
        links = 0
        facts = []
        for partition in partitions:
            if partition not in added:  # indexed already: only its members' ranking facts
                facts.append(_members(DocumentsInput(store, partition)))
                continue
            keys, members = _cross_keys(store, partition, settings.cross_near_duplicates)
            facts.append(members)
            links += index.add_partition(partition, keys).num_rows
        rows, decisions, stats = decide(index.clusters(), pa.concat_tables(facts), CROSS)
        layout.prepare(version)
        manifest = Manifest(CROSS, ALL, version, [layout.write_part(0, rows)],
                            tables={"decisions": [layout.write_table("decisions", 0,
                                                                     decisions)]},
                            extra={"stats": stats.to_dict()})
        layout.write_manifest(manifest)
    return CrossRun(added, sorted(known), links, stats, manifest)


def _drop_stale_index(store: Store, partitions: list[str], settings: DedupSettings,
                      folder: Path) -> None:
    """The index is append-only: when an indexed partition's documents changed (or it is gone),
    or the settings changed, it is rebuilt from scratch rather than patched."""
    state = {"settings": settings.model_dump(mode="json"),
             "documents": {p: DocumentsInput(store, p).data_version() for p in partitions}}
    path = folder / "state.json"
    if path.exists():
        previous = json.loads(path.read_text())
        stale = previous["settings"] != state["settings"] or any(
            state["documents"].get(p) != v for p, v in previous["documents"].items())
        if stale:
            shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state, sort_keys=True))


def local_index_folder(store: Store) -> Path:
    """Where the cross index lives: under the root for a local store; on S3, a local working
    copy (the index's files would go through the Store, see `CrossIndex`)."""
    if isinstance(store, LocalStore):
        return Path(store.uri(f"{CROSS}/index"))
    return Path(tempfile.gettempdir()) / "corpus-cross-index" / stable_hash(store.uri(""))

