"""Topic domains over sentence vectors (in the spirit of WebOrganizer's topic domains, with
k-means in place of a trained classifier): centroids fitted on a sample of the training
snapshots' vectors, each document's domain its nearest centroid, each domain described by the
terms that set its documents apart.

A domain is a signal, not a verdict: recipes weight or cap domains in the mix. Deterministic:
the same sample in the same order, k-means++ from a seeded generator and a fixed number of
Lloyd steps (`curation.semantic_dedup.kmeans_centroids`); terms ranked with ties by the term.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from curation.semantic_dedup import kmeans_centroids, nearest_centroids

KERNEL_VERSION = "domains-1"
WORD = re.compile(r"[^\W\d_]{3,}")
"""A term: three or more letters (a run of CJK characters counts as one)."""
TERM_CHARS = 20_000  # the head of a text its terms are read from
MIN_DOCUMENTS = 2  # a term must occur in this many of a domain's documents


class DomainSettings(BaseModel):
    """The `domains` section of pipeline.yaml (hashed into the topic model's version)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    count: int = Field(24, ge=2, le=1000)
    # The snapshots the centroids are fitted on; None: quality.training_snapshots when the
    # classifier is configured, else every snapshot.
    training_snapshots: list[str] | None = None
    fit_sample: int = Field(50_000, ge=2)  # vectors the fit reads, at most
    iterations: int = Field(20, ge=1)
    # k-means++ runs from consecutive seeds, the least distortion kept: one run can merge two
    # topics and split a third (a local optimum), as on four planted topics in the tests.
    restarts: int = Field(4, ge=1)
    seed: int = Field(0, ge=0)
    top_terms: int = Field(8, ge=1, le=50)


def fit_domains(sample: np.ndarray, settings: DomainSettings) -> np.ndarray:
    """The domains' centroids (float32, at most `count` rows: fewer when the sample has fewer
    distinct vectors)."""
    return kmeans_centroids(sample.astype(np.float32), settings.count, settings.iterations,
                            settings.seed, settings.restarts)


def assign_domains(vectors: np.ndarray, centroids: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Each vector's domain (its nearest centroid) and its cosine similarity to that
    centroid's direction."""
    domains = nearest_centroids(vectors, centroids)
    directions = centroids / np.maximum(np.linalg.norm(centroids, axis=1, keepdims=True), 1e-12)
    similarity = np.einsum("ij,ij->i", vectors.astype(np.float32), directions[domains])
    return domains.astype(np.int16), similarity.astype(np.float32)


def top_terms(texts: Sequence[str], domains: np.ndarray, count: int, top: int
              ) -> list[list[str]]:
    """Per domain, its `top` terms: ranked by the share of its documents holding the term
    times the term's inverse document frequency over all `texts` (a term in fewer than
    `MIN_DOCUMENTS` of the domain's documents, or in every text, is left out)."""
    holding = Counter()
    per_domain = [Counter() for _ in range(count)]
    for text, domain in zip(texts, domains, strict=True):
        terms = {word.lower() for word in WORD.findall(text[:TERM_CHARS])}
        holding.update(terms)
        per_domain[domain].update(terms)
    sizes = np.bincount(np.asarray(domains, dtype=np.int64), minlength=count)
    described = []
    for domain, terms in enumerate(per_domain):
        scored = sorted((-(n / sizes[domain]) * math.log(len(texts) / holding[term]), term)
                        for term, n in terms.items()
                        if n >= MIN_DOCUMENTS and holding[term] < len(texts))
        described.append([term for _, term in scored[:top]])
    return described
