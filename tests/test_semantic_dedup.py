"""Semantic dedup (`curation.semantic_dedup`): labelled pairs built from real text, and the
kernel's grouping rules."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
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


# --- the `semantic_dedup` asset on the built-in sample ------------------------------------------


def _decided(output) -> pa.Table:
    """A task's part: its local Parquet file (or table), sorted by doc_id."""
    part = output.tables["part"]
    table = pq.read_table(part) if isinstance(part, Path) else part
    return table.sort_by("doc_id")


def test_the_stage_finds_the_kernels_groups_on_any_worker_or_bucket_count(sample_run) -> None:
    from curation.config import load_pipeline
    from curation.graph import DOCUMENTS, EMBEDDINGS, EXACT_DEDUP, SEMANTIC_DEDUP
    from curation.partition import PartitionLayout
    from curation.stages.base import DocumentsInput
    from curation.stages.semantic_dedup import SemanticWork
    from curation.storage import LocalStore

    store, partition = LocalStore(str(sample_run.root)), "SAMPLE-01"
    result = sample_run.results[("per_snapshot", partition)]
    checks = {evaluation.check_name: evaluation.passed
              for evaluation in result.get_asset_check_evaluations()
              if evaluation.asset_key.path == [SEMANTIC_DEDUP]}
    assert checks == {"semantic_dedup_kept_members_valid": True,
                      "semantic_dedup_contract": True}
    stored = PartitionLayout(store, SEMANTIC_DEDUP, partition).read_table()
    assert stored.num_rows > 0, "the sample plants copies, which are semantic duplicates too"

    # The tasks' groups are the kernel's in one process, on the same vectors and ranking.
    settings = load_pipeline(sample_run.pipeline_path).semantic_dedup
    vectors = PartitionLayout(store, EMBEDDINGS, partition).read_table()
    texts = PartitionLayout(store, DOCUMENTS, partition).read_table(["doc_id", "text"])
    doc_ids = vectors["doc_id"].to_pylist()
    assert doc_ids == texts["doc_id"].to_pylist()
    lengths = [len(text) for text in texts["text"].to_pylist()]
    rank = np.lexsort((np.array(doc_ids), -np.array(lengths)))
    ranks = np.empty(len(rank), dtype=np.int64)
    ranks[rank] = np.arange(len(rank))  # longest first, then the smallest doc_id
    column = vectors["embedding"].combine_chunks()
    groups = semantic_groups(column.flatten().to_numpy(zero_copy_only=False).reshape(
        len(column), -1), ranks, settings)
    sizes = np.bincount(groups.kept, minlength=len(doc_ids))[groups.kept]
    expected = {doc_ids[row]: doc_ids[groups.kept[row]] for row in np.flatnonzero(sizes > 1)}
    assert dict(zip(stored["doc_id"].to_pylist(), stored["kept_doc_id"].to_pylist(),
                    strict=True)) == expected

    # Every exact copy (same text, so the same vector) is in its original's group.
    exact = PartitionLayout(store, EXACT_DEDUP, partition).read_table()
    kept = dict(zip(stored["doc_id"].to_pylist(), stored["kept_doc_id"].to_pylist(),
                    strict=True))
    pairs = [(a, b) for a, b in zip(exact["doc_id"].to_pylist(),
                                    exact["kept_doc_id"].to_pylist(), strict=True) if a != b]
    assert pairs and all(kept[a] == kept[b] for a, b in pairs)

    documents = DocumentsInput(store, partition)
    one = _decided(SemanticWork(documents, settings, workers=0, buckets=1)(0))
    many = _decided(SemanticWork(documents, settings, workers=2, buckets=5)(0))
    assert one.equals(many) and one.equals(stored.sort_by("doc_id"))


def test_the_mix_drops_semantic_duplicates_only_when_the_recipe_asks(sample_run) -> None:
    from curation.config import load_pipeline, load_recipe
    from curation.graph import SEMANTIC_DEDUP
    from curation.mix import build_mix
    from curation.partition import PartitionLayout
    from curation.stages.dataset import code_sources, curated_sources
    from curation.storage import LocalStore

    store = LocalStore(str(sample_run.root))
    pipeline = load_pipeline(sample_run.pipeline_path)
    recipe = load_recipe(sample_run.root.parent / "recipes" / "sample.yaml", pipeline)
    asked = recipe.model_copy(update={"selection": recipe.selection.model_copy(
        update={"semantic_dedup": True})})
    decisions = {}
    for name, chosen in (("default", recipe), ("asked", asked)):
        mix = build_mix(store, chosen, curated_sources=curated_sources(pipeline, chosen),
                        code_sources=code_sources(pipeline, chosen))
        decisions[name] = dict(zip(mix.decisions["doc_id"].to_pylist(),
                                   mix.decisions["rule"].to_pylist(), strict=True))
    groups: dict[str, list[str]] = {}
    for partition in recipe.snapshots:
        table = PartitionLayout(store, SEMANTIC_DEDUP, partition).read_table()
        for doc, group in zip(table["doc_id"].to_pylist(), table["cluster_id"].to_pylist(),
                              strict=True):
            groups.setdefault(f"{partition}/{group}", []).append(doc)

    def most_selected(name: str) -> int:
        return max(sum(decisions[name][doc] == "selected" for doc in members)
                   for members in groups.values())

    # asked, a semantic group keeps at most one member; by default several pass
    assert most_selected("default") > 1 and most_selected("asked") == 1
    # the new duplicates are semantic group members; fewer documents change the quality cut's
    # percentiles, and nothing else moves
    changed = {doc for doc, rule in decisions["asked"].items()
               if rule != decisions["default"][doc]}
    duplicates = {doc for doc in changed if decisions["asked"][doc] == "duplicate"}
    members = {doc for group in groups.values() for doc in group}
    assert duplicates and duplicates <= members
    assert {decisions[name][doc] for doc in changed for name in decisions} <= {
        "selected", "quality", "duplicate"}


def test_a_recipe_asking_for_semantic_dedup_without_embeddings_fails_naming_the_field(
        tmp_path: Path) -> None:
    import yaml

    from curation.config import ConfigError, load_pipeline, load_recipe
    from curation.embeddings import EmbeddingSettings

    (tmp_path / "pipeline.yaml").write_text("snapshots: {CC: {warc: {path: warc}}}\n")
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump({
        "name": "recipe", "snapshots": ["CC"], "selection": {"semantic_dedup": True},
        "phases": [{"name": "main", "fraction": 1.0, "weights": {"web": 1.0}}],
        "tokenizer": {"train_vocab_size": 4096}, "seq_len": 2048}))
    pipeline = load_pipeline(tmp_path / "pipeline.yaml")
    with pytest.raises(ConfigError, match="selection.semantic_dedup"):
        load_recipe(tmp_path / "recipe.yaml", pipeline)
    enabled = pipeline.model_copy(update={"embeddings": EmbeddingSettings(enabled=True)})
    assert load_recipe(tmp_path / "recipe.yaml", enabled).selection.semantic_dedup


def test_without_embeddings_the_stage_leaves_an_empty_partition_its_checks_pass(
        tmp_path: Path) -> None:
    from dagster import instance_for_test, materialize

    from checks.semantic_dedup import semantic_dedup_contract, semantic_dedup_kept_members_valid
    from corpus_assets.semantic_dedup import semantic_dedup
    from curation.graph import SEMANTIC_DEDUP
    from curation.partition import PartitionLayout
    from curation.stages.semantic_dedup import DISABLED
    from curation.storage import LocalStore
    from partitions import SNAPSHOT_PARTITIONS_NAME
    from tests.conftest import one_snapshot_resources

    resources = one_snapshot_resources(tmp_path)
    with instance_for_test(temp_dir=str(tmp_path)) as instance:
        instance.add_dynamic_partitions(SNAPSHOT_PARTITIONS_NAME, ["CC"])
        result = materialize([semantic_dedup, semantic_dedup_contract,
                              semantic_dedup_kept_members_valid],
                             partition_key="CC", instance=instance, resources=resources)
    assert result.success
    [event] = result.get_asset_materialization_events()
    assert event.materialization.metadata["skipped"].value == DISABLED
    assert [check.passed for check in result.get_asset_check_evaluations()] == [True, True]
    manifest = PartitionLayout(LocalStore(str(tmp_path / "data")), SEMANTIC_DEDUP, "CC") \
        .complete_manifest()
    assert (manifest.rows, manifest.extra) == (0, {"skipped": DISABLED})
