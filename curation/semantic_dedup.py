"""Semantic deduplication (SemDeDup, Abbas et al. 2023, arXiv 2303.09540) over sentence vectors:
k-means splits the vectors into clusters of about `cluster_size`, pairs inside a cluster whose
cosine similarity is at least `threshold` are linked, and the connected components of the links
are the duplicate groups; each group keeps its best-ranked member.

Memory is bounded by the clusters, not the input: one cluster's similarity matrix (at most
`max_cluster` squared float32) at a time, besides the vectors and the centroids. Pairs in
different clusters are never compared (the paper's trade: near-identical vectors almost always
share a cluster). Deterministic: k-means++ from a seeded generator, then a fixed number of
Lloyd iterations (scipy's `kmeans2`), on the same vectors in the same order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

KERNEL_VERSION = "semantic_dedup-1"


class SemanticDedupSettings(BaseModel):
    """How documents are grouped as semantic duplicates."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Cosine similarity of a duplicate pair. On labelled real pairs at 128 tokens
    # (benchmarks/results/semantic_dedup.md) 0.85 merged 0.7% of same-topic siblings and found
    # 74% of rewrites (every truncation, 90% of passages missing a fifth of their sentences).
    threshold: float = Field(0.85, gt=0, le=1)
    cluster_size: int = Field(1000, ge=2)  # k = ceil(documents / cluster_size)
    max_cluster: int = Field(20_000, ge=2)  # a larger cluster is split again by k-means
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


def _kmeans(vectors: np.ndarray, k: int, settings: SemanticDedupSettings) -> np.ndarray:
    from scipy.cluster.vq import kmeans2

    # k-means++ draws each next centre in proportion to the squared distance to the chosen
    # ones: with fewer distinct vectors than k those are all zero and the draw never ends.
    k = min(k, len(np.unique(vectors, axis=0)))
    if k <= 1:
        return np.zeros(len(vectors), dtype=np.int64)
    _, labels = kmeans2(vectors, k, iter=settings.iterations, minit="++",
                        seed=np.random.default_rng(settings.seed))
    return labels.astype(np.int64)


def _clusters(vectors: np.ndarray, settings: SemanticDedupSettings) -> np.ndarray:
    """A cluster per row, none larger than `max_cluster` (an oversized one is split again)."""
    labels = _kmeans(vectors, math.ceil(len(vectors) / settings.cluster_size), settings)
    while True:
        sizes = np.bincount(labels)
        big = np.flatnonzero(sizes > settings.max_cluster)
        if not len(big):
            return labels
        for cluster in big:
            rows = np.flatnonzero(labels == cluster)
            parts = _kmeans(vectors[rows], max(2, math.ceil(len(rows) / settings.cluster_size)),
                            settings)
            if parts.max() == 0:  # k-means cannot split identical vectors: cut by position
                parts = np.arange(len(rows)) // settings.max_cluster
            labels[rows] = np.where(parts == 0, cluster, labels.max() + parts)


def semantic_groups(vectors: np.ndarray, rank: np.ndarray | None,
                    settings: SemanticDedupSettings) -> SemanticGroups:
    """Duplicate groups of `vectors` (unit length, float16 or float32, one row per document);
    a group keeps its row with the smallest `rank` (None: the first row), ties by row."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    count = len(vectors)
    rank = np.arange(count) if rank is None else np.asarray(rank)
    matrix = vectors.astype(np.float32)
    labels = _clusters(matrix, settings)
    kept = np.arange(count, dtype=np.int64)
    for cluster in np.unique(labels):
        rows = np.flatnonzero(labels == cluster)
        if len(rows) < 2:
            continue
        similar = np.triu(matrix[rows] @ matrix[rows].T >= settings.threshold, k=1)
        left, right = np.nonzero(similar)
        if not len(left):
            continue
        graph = coo_matrix((np.ones(len(left)), (left, right)), shape=(len(rows), len(rows)))
        _, component = connected_components(graph, directed=False)
        order = np.lexsort((rows, rank[rows], component))  # by component, then rank, then row
        first = np.ones(len(order), dtype=bool)
        first[1:] = component[order][1:] != component[order][:-1]
        leader = np.maximum.accumulate(np.where(first, np.arange(len(order)), 0))
        kept[rows[order]] = rows[order][leader]
    return SemanticGroups(kept, labels)
