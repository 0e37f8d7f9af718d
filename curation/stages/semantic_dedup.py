"""The `semantic_dedup` stage: SemDeDup clusters over the stored `embeddings` of one partition,
around the kernel in `curation/semantic_dedup.py`.

Three rounds of tasks (`curation.executor.map_tasks`, local pool or Ray) and the parent:

1. sample: each `embeddings` part gives its rows at a fixed stride of the partition's row
   order (`ceil(rows / fit_sample)`), so the sample is the same for any worker count;
2. the parent fits the centroids on the sample (`fit_centroids`);
3. assign: each part's vectors join their nearest centroid and go, with their ranking facts,
   to a hash-partitioned exchange in the store keyed by the centroid (`curation.exchange`);
4. group: one task per bucket groups each of its k-means clusters (`cluster_groups`) and
   writes the members of groups of two or more with the member each group keeps;
5. the parent sorts the buckets' rows into the part and the drop decisions
   (`decided_outputs`, as the dedup stages: the same tables, so the same checks and the mix
   read them alike).

A group keeps its longest document (text characters of `documents`), then the smallest
doc_id: the dedup stages' default ranking, within one partition (one snapshot or one source).
The mix applies the groups only when a recipe sets `selection.semantic_dedup`, joining them to
the other duplicate groups, and ranks the members that pass its selection itself.

Memory: the sample (`fit_sample` vectors, float32) and the centroids in the parent; one part
in an assign task; in a group task, its bucket's vectors (float16, buckets sized to the task's
share of the budget) and one piece's similarity matrix (at most `max_cluster` squared float32).
A k-means cluster is never split across buckets, so the largest one is the floor.

Scope: within a partition. Copies across partitions are `cross_dedup`'s (URL, exact text and
MinHash links); rewrites across snapshots are not compared (docs/architecture.md, "The model
plane").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa

from curation.config import stable_hash
from curation.dedup import ClusterStats
from curation.duck import ResultFiles, duckdb_session, register_parts
from curation.embeddings import DIMENSIONS
from curation.exchange import Exchange, Slice, bucket_count, read_slice, scratch_bytes
from curation.executor import map_tasks
from curation.graph import DOCUMENTS, EMBEDDINGS, SEMANTIC_DEDUP
from curation.partition import Manifest, PartitionLayout
from curation.semantic_dedup import (
    KERNEL_VERSION,
    SemanticDedupSettings,
    cluster_groups,
    fit_centroids,
    nearest_centroids,
)
from curation.stages.base import DocumentsInput, write_skipped
from curation.stages.dedup import OUTPUT_SCHEMA, decided_outputs, read_facts, work_area
from curation.stages.embeddings import vector_matrix
from curation.storage import Store
from curation.tasks import PartitionResult, PartitionRun, TaskOutput, run_partition

DISABLED = "embeddings.enabled is false in pipeline.yaml: there are no vectors to compare"
VECTOR_ROW_BYTES = 3 * (2 * DIMENSIONS + 64)
"""About what a group task holds per row of its bucket: the exchanged row (doc_id, centroid,
text_chars, float16 vector), its sorted copy and its doc_id as a Python string."""
VECTOR_ROWS_SCHEMA = pa.schema([
    pa.field("doc_id", pa.string()), pa.field("centroid", pa.int64()),
    pa.field("text_chars", pa.int32()),
    pa.field("embedding", pa.list_(pa.float16(), DIMENSIONS)),
])


@dataclass(frozen=True)
class _SamplePart:
    """Map task: the vectors of one `embeddings` part at the partition's global row stride."""

    layout: PartitionLayout
    stride: int

    def __call__(self, task: tuple[int, int]) -> np.ndarray:
        index, first_row = task
        table = self.layout.read_part(index, columns=["embedding"])
        rows = np.arange(table.num_rows)
        picked = rows[(first_row + rows) % self.stride == 0]
        return vector_matrix(table["embedding"])[picked]


@dataclass(frozen=True)
class _AssignPart:
    """Map task: one part's vectors, each with its nearest centroid and its document's length,
    into the exchange keyed by the centroid. Returns the slices written."""

    store: Store
    partition: str
    exchange: Exchange
    centroids: np.ndarray

    def __call__(self, index: int) -> dict[int, Slice]:
        vectors = PartitionLayout(self.store, EMBEDDINGS, self.partition).read_part(
            index, columns=["doc_id", "embedding"])
        _, facts = read_facts(self.store, self.partition, index)
        if not vectors["doc_id"].equals(facts["doc_id"]):
            raise ValueError(f"{EMBEDDINGS}[{self.partition}] part {index} does not line up "
                             f"with {DOCUMENTS}: materialize {EMBEDDINGS} again")
        centroids = nearest_centroids(vector_matrix(vectors["embedding"]), self.centroids)
        rows = pa.table({"doc_id": vectors["doc_id"], "centroid": centroids,
                         "text_chars": facts["text_chars"],
                         "embedding": vectors["embedding"]}, schema=VECTOR_ROWS_SCHEMA)
        return self.exchange.write(f"{index:05d}", rows, centroids.astype(np.uint64))


@dataclass(frozen=True)
class _GroupBucket:
    """Reduce task: the k-means clusters of one bucket grouped (`cluster_groups`); the members
    of groups of two or more (`OUTPUT_SCHEMA`, `cluster_id` the kept member's doc_id) written
    as one object. Returns its key (None when no group formed) and the pairs found."""

    store: Store
    prefix: str
    settings: SemanticDedupSettings

    def __call__(self, task: tuple[int, list[Slice]]) -> tuple[str | None, int]:
        bucket, slices = task
        table = pa.concat_tables([read_slice(self.store, piece) for piece in slices])
        table = table.sort_by([("centroid", "ascending"), ("doc_id", "ascending")])
        doc_ids = np.asarray(table["doc_id"].to_pylist(), dtype=object)
        centroid = table["centroid"].to_numpy()
        # longest first, then the smallest doc_id (rows are in doc_id order within a cluster)
        rank = -table["text_chars"].to_numpy().astype(np.int64)
        vectors = table["embedding"].combine_chunks()
        kept = np.arange(table.num_rows)
        pairs = 0
        bounds = np.flatnonzero(np.diff(centroid)) + 1
        for start, end in zip([0, *bounds], [*bounds, table.num_rows], strict=True):
            groups = cluster_groups(vector_matrix(vectors.slice(start, end - start)),
                                    rank[start:end], self.settings)
            kept[start:end] = start + groups.kept
            pairs += groups.pairs
        sizes = np.bincount(kept, minlength=len(kept))[kept]
        members = np.flatnonzero(sizes > 1)
        if not len(members):
            return None, pairs
        kept_ids = pa.array(doc_ids[kept[members]].tolist(), pa.string())
        rows = pa.table({"doc_id": pa.array(doc_ids[members].tolist(), pa.string()),
                         "cluster_id": kept_ids, "cluster_size": sizes[members],
                         "kept_doc_id": kept_ids,
                         "keep": pa.array(kept[members] == members)}, schema=OUTPUT_SCHEMA)
        key = f"{self.prefix}/b{bucket:05d}.parquet"
        self.store.write_bytes(key, scratch_bytes(rows))
        return key, pairs


@dataclass(frozen=True)
class SemanticWork:
    """One task for the whole partition, which runs the rounds of the module's docstring on
    the workers. `buckets` overrides the bucket count `bucket_count` picks."""

    documents: DocumentsInput
    settings: SemanticDedupSettings
    workers: int = 0
    buckets: int | None = None

    def __call__(self, index: int) -> TaskOutput:
        store, partition = self.documents.store, self.documents.partition
        embeddings = PartitionLayout(store, EMBEDDINGS, partition)
        parts = embeddings.complete_manifest().parts
        rows = sum(part.rows for part in parts)
        with work_area(store, PartitionLayout(store, SEMANTIC_DEDUP, partition)) as work:
            stride = max(1, math.ceil(rows / self.settings.fit_sample))
            firsts = np.cumsum([0, *(part.rows for part in parts)])[:-1].tolist()
            sample = map_tasks(_SamplePart(embeddings, stride),
                               list(enumerate(firsts)), self.workers)
            centroids = fit_centroids(
                np.concatenate(sample) if sample else np.zeros((0, DIMENSIONS), np.float32),
                rows, self.settings)
            exchange = Exchange(store, f"{work}/vectors", self.buckets or bucket_count(
                rows, VECTOR_ROW_BYTES, workers=self.workers))
            written = map_tasks(_AssignPart(store, partition, exchange, centroids),
                                range(len(parts)), self.workers)
            tasks = [(bucket, slices) for bucket, slices in
                     enumerate(exchange.gather(written)) if slices]
            grouped = map_tasks(_GroupBucket(store, f"{work}/decided", self.settings), tasks,
                                self.workers)
            store.delete_prefix(exchange.prefix)
            with duckdb_session() as con, ResultFiles() as local:
                register_parts(con, "decided", store, [key for key, _ in grouped if key],
                               schema=OUTPUT_SCHEMA)
                output = decided_outputs(con, self._cluster_stats(con, grouped),
                                         SEMANTIC_DEDUP, local, rows)
        output.stats.counts["kmeans_clusters"] = len(centroids)
        output.stats.counts["fit_sample"] = sum(len(chunk) for chunk in sample)
        return output

    @staticmethod
    def _cluster_stats(con: duckdb.DuckDBPyConnection,
                       grouped: list[tuple[str | None, int]]) -> ClusterStats:
        clusters, documents = con.execute(
            "SELECT count(DISTINCT cluster_id), count(*) FROM decided").fetchall()[0]
        return ClusterStats(clusters=clusters, documents=documents,
                            candidates=sum(pairs for _, pairs in grouped))


def semantic_dedup_version(documents: DocumentsInput, settings: SemanticDedupSettings) -> str:
    """The stage's version: the kernel, the settings, the vectors and the documents."""
    store, partition = documents.store, documents.partition
    return stable_hash({
        "kernel": KERNEL_VERSION, "settings": settings.model_dump(mode="json"),
        EMBEDDINGS: PartitionLayout(store, EMBEDDINGS, partition).complete_manifest()
        .data_version, DOCUMENTS: documents.data_version()})


def run_semantic_dedup(documents: DocumentsInput, settings: SemanticDedupSettings,
                       workers: int = 0) -> PartitionResult:
    """The stage over one partition (the caller checks that `embeddings` were made)."""
    run = PartitionRun(documents.store, SEMANTIC_DEDUP, documents.partition,
                       semantic_dedup_version(documents, settings))
    return run_partition(run, 1, SemanticWork(documents, settings, workers), workers=0)


def skip_semantic_dedup(store: Store, partition: str) -> Manifest:
    """An empty partition saying the stage had no vectors: the mix finds no groups."""
    return write_skipped(PartitionLayout(store, SEMANTIC_DEDUP, partition), KERNEL_VERSION,
                         DISABLED, OUTPUT_SCHEMA.empty_table())

