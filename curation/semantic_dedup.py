"""Semantic deduplication (SemDeDup, Abbas et al. 2023, arXiv 2303.09540) over sentence vectors:
k-means splits the vectors into clusters of about `cluster_size`, pairs inside a cluster whose
cosine similarity is at least `threshold` are linked, and the connected components of the links
are the duplicate groups; each group keeps its best-ranked member.

k-means is fitted on at most `fit_sample` vectors, then every vector joins its nearest
centroid, so the fit's memory is fixed by a setting. The k-means is written here (k-means++
seeding, Lloyd steps on BLAS): scipy's `kmeans2` seeds in time quadratic in k and assigns
without BLAS (237 s for 100,000 documents at k = 100 in the stage's benchmark). Grouping
needs one cluster at a time: its similarity matrix is at most `max_cluster` squared float32
(a larger cluster is split again). Pairs in different clusters are never compared (the
paper's trade: near-identical vectors almost always share a cluster). Deterministic: k-means++
from a seeded generator, then a fixed number of Lloyd iterations, on the same vectors in the
same order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

KERNEL_VERSION = "semantic_dedup-2"  # 2: centroids fitted on a sample, then assigned


class SemanticDedupSettings(BaseModel):
    """How documents are grouped as semantic duplicates."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Cosine similarity of a duplicate pair. On labelled real pairs at 128 tokens
    # (benchmarks/results/semantic_dedup.md) 0.85 merged 0.7% of same-topic siblings and found
    # 74% of rewrites (every truncation, 90% of passages missing a fifth of their sentences).
    threshold: float = Field(0.85, gt=0, le=1)
    cluster_size: int = Field(1000, ge=2)  # k = ceil(documents / cluster_size)
    max_cluster: int = Field(20_000, ge=2)  # a larger cluster is split again by k-means
    # k-means is fitted on at most this many vectors (a fixed stride of the partition), then
    # every vector joins its nearest centroid: the fit's memory does not grow with the input.
    fit_sample: int = Field(100_000, ge=2)
    iterations: int = Field(20, ge=1)
    seed: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _room_for_a_cluster(self) -> SemanticDedupSettings:
        if self.max_cluster < self.cluster_size:
            raise ValueError(f"max_cluster ({self.max_cluster}) must be at least cluster_size "
                             f"({self.cluster_size})")
        return self


@dataclass(frozen=True)
class SemanticGroups:
    """Per input row: the row its group keeps (itself when not a duplicate), and the k-means
    cluster it fell in."""

    kept: np.ndarray  # int64 row of the kept member
    cluster: np.ndarray  # int64 k-means cluster

    @property
    def duplicates(self) -> int:
        return int((self.kept != np.arange(len(self.kept))).sum())


def _squared_rows(rows: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", rows, rows)


def _squared_distances(vectors: np.ndarray, centre: np.ndarray) -> np.ndarray:
    return _squared_rows(vectors - centre)


def _kmeans_plus_plus(vectors: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++ seeding (Arthur and Vassilvitskii 2007): each next centre drawn in proportion
    to the squared distance to the nearest chosen one, that distance kept up to date with each
    new centre (k passes over the vectors, where scipy's `kmeans2` recomputes every distance
    to every chosen centre: quadratic in k, minutes at k = 100 on 100,000 vectors)."""
    centres = np.empty((k, vectors.shape[1]), dtype=np.float32)
    centres[0] = vectors[rng.integers(len(vectors))]
    nearest = _squared_distances(vectors, centres[0])
    for index in range(1, k):
        total = float(nearest.sum())
        if total == 0:  # every vector sits on a centre: fewer distinct vectors than k
            return centres[:index]
        pick = int(np.searchsorted(np.cumsum(nearest), rng.random() * total, side="right"))
        centres[index] = vectors[min(pick, len(vectors) - 1)]
        np.minimum(nearest, _squared_distances(vectors, centres[index]), out=nearest)
    return centres


def _lloyd(vectors: np.ndarray, centres: np.ndarray, iterations: int
           ) -> tuple[np.ndarray, float]:
    """`iterations` Lloyd steps (assignments by BLAS, `nearest_centroids`); a centre left
    without vectors stays where it was. Returns the centres and their distortion."""
    from scipy.sparse import csr_matrix

    rows = np.arange(len(vectors))
    for _ in range(iterations):
        labels = nearest_centroids(vectors, centres)
        counts = np.bincount(labels, minlength=len(centres))
        members = csr_matrix((np.ones(len(vectors), np.float32), (labels, rows)),
                             shape=(len(centres), len(vectors)))
        sums = np.asarray(members @ vectors)
        filled = counts > 0
        centres[filled] = sums[filled] / counts[filled, None]
    labels = nearest_centroids(vectors, centres)
    step = 1 << 16  # the distortion a slice at a time, not a copy of the vectors
    return centres, sum(float(_squared_rows(vectors[start:start + step]
                                            - centres[labels[start:start + step]]).sum())
                        for start in range(0, len(vectors), step))


def kmeans_centroids(vectors: np.ndarray, k: int, iterations: int, seed: int,
                     restarts: int = 1) -> np.ndarray:
    """k-means centroids (at most `k`, float32) of `vectors` (float32): k-means++ seeding
    from a generator seeded with `seed` (`seed + 1`... for each of `restarts` runs, the one
    of least distortion kept), then `iterations` Lloyd steps; one row when they cannot be
    split. Memory: the vectors, the centres and one slice of distances."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if k <= 1 or len(vectors) < 2:
        return vectors.mean(axis=0, keepdims=True, dtype=np.float32)
    best, least = None, np.inf
    for run in range(restarts):
        seeds = _kmeans_plus_plus(vectors, min(k, len(vectors)),
                                  np.random.default_rng(seed + run))
        if len(seeds) == 1:  # identical vectors: nothing to split
            return seeds
        centres, distortion = _lloyd(vectors, seeds, iterations)
        if distortion < least:
            best, least = centres, distortion
    return best


def _kmeans(vectors: np.ndarray, k: int, settings: SemanticDedupSettings) -> np.ndarray:
    return kmeans_centroids(vectors, k, settings.iterations, settings.seed)


def fit_centroids(sample: np.ndarray, documents: int,
                  settings: SemanticDedupSettings) -> np.ndarray:
    """The centroids that split `documents` documents into clusters of about `cluster_size`,
    fitted on `sample` (at most `fit_sample` of their vectors, float32)."""
    if not len(sample):
        return np.zeros((1, sample.shape[1]), dtype=np.float32)
    return _kmeans(sample, math.ceil(documents / settings.cluster_size), settings)


def nearest_centroids(vectors: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """The nearest centroid of each vector (Euclidean), a slice of rows at a time so the
    distance matrix stays near 64 MB whatever the number of centroids."""
    offsets = 0.5 * (centroids * centroids).sum(axis=1)
    step = max(1, (1 << 24) // len(centroids))
    labels = [np.argmax(vectors[start:start + step].astype(np.float32) @ centroids.T - offsets,
                        axis=1) for start in range(0, len(vectors), step)]
    return np.concatenate(labels).astype(np.int64) if labels else np.zeros(0, np.int64)


def split_oversized(vectors: np.ndarray, settings: SemanticDedupSettings) -> np.ndarray:
    """A piece per row of one k-means cluster, none larger than `max_cluster`: an oversized
    piece is split again by k-means, or cut by position when its vectors are identical."""
    labels = np.zeros(len(vectors), dtype=np.int64)
    while True:
        big = np.flatnonzero(np.bincount(labels) > settings.max_cluster)
        if not len(big):
            return labels
        for piece in big:
            rows = np.flatnonzero(labels == piece)
            parts = nearest_centroids(vectors[rows], _kmeans(
                vectors[rows], max(2, math.ceil(len(rows) / settings.cluster_size)), settings))
            if parts.max() == 0:
                parts = np.arange(len(rows)) // settings.max_cluster
            labels[rows] = np.where(parts == 0, piece, labels.max() + parts)


def _linked_groups(vectors: np.ndarray, rank: np.ndarray, threshold: float
                   ) -> tuple[np.ndarray, int]:
    """Per row of one piece: the row its group keeps; and the pairs at or above
    `threshold`."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    count = len(vectors)
    kept = np.arange(count, dtype=np.int64)
    if count < 2:
        return kept, 0
    left, right = np.nonzero(np.triu(vectors @ vectors.T >= threshold, k=1))
    if not len(left):
        return kept, 0
    graph = coo_matrix((np.ones(len(left)), (left, right)), shape=(count, count))
    _, component = connected_components(graph, directed=False)
    rows = np.arange(count)
    order = np.lexsort((rows, rank, component))  # by component, then rank, then row
    first = np.ones(count, dtype=bool)
    first[1:] = component[order][1:] != component[order][:-1]
    leader = np.maximum.accumulate(np.where(first, rows, 0))
    kept[order] = order[leader]
    return kept, len(left)


@dataclass(frozen=True)
class ClusterGroups:
    """One k-means cluster's result, per row: the row its group keeps, and the piece it was
    compared in (`split_oversized`); with the pairs found."""

    kept: np.ndarray
    piece: np.ndarray
    pairs: int


def cluster_groups(vectors: np.ndarray, rank: np.ndarray,
                   settings: SemanticDedupSettings) -> ClusterGroups:
    """The duplicate groups of one k-means cluster's vectors: pairs at or above `threshold`
    within each piece of at most `max_cluster` rows, their connected components, and each
    group's member of smallest `rank` (ties by row). Memory: one piece's similarity matrix."""
    matrix = vectors.astype(np.float32)
    pieces = split_oversized(matrix, settings)
    kept = np.arange(len(matrix), dtype=np.int64)
    pairs = 0
    for piece in np.unique(pieces):
        rows = np.flatnonzero(pieces == piece)
        local, found = _linked_groups(matrix[rows], np.asarray(rank)[rows], settings.threshold)
        kept[rows] = rows[local]
        pairs += found
    return ClusterGroups(kept, pieces, pairs)


def semantic_groups(vectors: np.ndarray, rank: np.ndarray | None,
                    settings: SemanticDedupSettings) -> SemanticGroups:
    """Duplicate groups of `vectors` (unit length, float16 or float32, one row per document)
    in one process: centroids fitted on every `ceil(rows / fit_sample)`-th row, each vector in
    its nearest centroid's cluster, `cluster_groups` per cluster; a group keeps its row with the
    smallest `rank` (None: the first row), ties by row. The `semantic_dedup` stage runs the
    same steps as tasks (`curation.stages.semantic_dedup`)."""
    count = len(vectors)
    rank = np.arange(count) if rank is None else np.asarray(rank)
    matrix = vectors.astype(np.float32)
    sample = matrix[::max(1, math.ceil(count / settings.fit_sample))]
    labels = nearest_centroids(matrix, fit_centroids(sample, count, settings))
    kept = np.arange(count, dtype=np.int64)
    cluster = np.zeros(count, dtype=np.int64)
    next_label = 0
    for label in np.unique(labels):
        rows = np.flatnonzero(labels == label)
        groups = cluster_groups(matrix[rows], rank[rows], settings)
        kept[rows] = rows[groups.kept]
        cluster[rows] = next_label + groups.piece
        next_label += int(groups.piece.max()) + 1
    return SemanticGroups(kept, cluster)
