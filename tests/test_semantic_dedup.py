"""Semantic dedup (`curation.semantic_dedup`): labelled pairs built from real text, and the
kernel's grouping rules."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from curation.semantic_dedup import SemanticDedupSettings, semantic_groups


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def near_copies() -> np.ndarray:
    """40 random directions, then noisy copies of the first 10 (cosine about 0.98)."""
    rng = np.random.default_rng(0)
    base = _unit(rng.normal(size=(40, 384)))
    return _unit(np.vstack([base, base[:10] + rng.normal(scale=0.008, size=(10, 384))]))


def test_real_rewrites_merge_and_their_siblings_do_not(shared_data: Path) -> None:
    """A shuffled, a shortened and a truncated copy of a real passage join it; the next
    passage of the same article or book does not."""
    from benchmarks.semantic_dedup import labelled_pool, passages, score
    from curation.embeddings import EmbeddingSettings, SentenceEncoder

    texts, labels = labelled_pool(passages(shared_data, bases=36))
    vectors = SentenceEncoder(EmbeddingSettings(max_tokens=128)).encode(texts)
    groups = semantic_groups(vectors, None, SemanticDedupSettings(threshold=0.8,
                                                                  cluster_size=40))
    result = score(groups.kept, labels)
    print(f"\n{result}")
    assert result["recall_truncated"] == 1.0 and result["recall_dropped"] >= 0.8
    assert result["recall"] >= 0.7 and result["precision"] >= 0.9
    assert result["siblings_merged"] <= 0.1


def test_each_group_keeps_its_best_ranked_member(near_copies: np.ndarray) -> None:
    settings = SemanticDedupSettings(threshold=0.9, cluster_size=10)
    first = semantic_groups(near_copies, None, settings)
    assert first.duplicates == 10
    assert first.kept[40:].tolist() == list(range(10))  # the earlier row of each pair
    rank = np.zeros(len(near_copies))
    rank[:10] = 1  # the copies rank first now
    second = semantic_groups(near_copies, rank, settings)
    assert second.kept[:10].tolist() == list(range(40, 50))
    assert np.array_equal(semantic_groups(near_copies, None, settings).kept, first.kept)


def test_no_cluster_exceeds_its_bound_even_for_identical_vectors(
        near_copies: np.ndarray) -> None:
    settings = SemanticDedupSettings(threshold=0.9, cluster_size=5, max_cluster=8)
    groups = semantic_groups(near_copies, None, settings)
    assert np.bincount(groups.cluster).max() <= 8
    same = np.repeat(near_copies[:1], 30, axis=0)  # k-means cannot split these
    groups = semantic_groups(same, None, settings)
    assert np.bincount(groups.cluster).max() <= 8
    assert all(groups.kept[groups.cluster == c].min() == groups.kept[groups.cluster == c].max()
               for c in np.unique(groups.cluster))  # one group per piece, never across


def test_settings_refuse_a_cluster_bound_below_the_cluster_size() -> None:
    with pytest.raises(ValidationError, match="max_cluster"):
        SemanticDedupSettings(cluster_size=100, max_cluster=50)
