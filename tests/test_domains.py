"""Topic domains (`curation.domains`, `topic_model`, `domains`): the kernel's terms and
assignment, the assets through the README's main job, and the plane switched off."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from curation.domains import DomainSettings, assign_domains, fit_domains, top_terms


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_a_domain_is_described_by_the_terms_that_set_it_apart() -> None:
    texts = ["the river delta floods the farmland", "a river barge on the delta",
             "the compiler inlines the function", "a function the compiler rejects",
             "the river and the compiler"]
    terms = top_terms(texts, np.array([0, 0, 1, 1, 1]), 2, 3)
    assert terms[0][:2] == ["delta", "river"]  # in every document of domain 0
    assert terms[1][:2] == ["function", "compiler"]  # "compiler" is in the mixed text too
    assert all("the" not in described for described in terms)  # in every text: no weight
    # a term in only one document of its domain is left out
    assert "farmland" not in terms[0] and "barge" not in terms[0]


def test_domains_are_the_nearest_centroids_and_the_fit_is_deterministic() -> None:
    rng = np.random.default_rng(0)
    topics = _unit(rng.normal(size=(4, 384)))
    truth = rng.integers(4, size=400)
    vectors = _unit(topics[truth] + rng.normal(scale=0.04, size=(400, 384)))
    settings = DomainSettings(count=4)
    centroids = fit_domains(vectors, settings)
    assert np.array_equal(centroids, fit_domains(vectors, settings))
    domains, similarity = assign_domains(vectors, centroids)
    # each found domain is one planted topic
    assert all(len(set(truth[domains == d])) == 1 for d in np.unique(domains))
    assert len(np.unique(domains)) == 4 and similarity.min() > 0.5
    distances = ((vectors[:, None, :] - centroids[None]) ** 2).sum(axis=2)
    assert np.array_equal(domains, distances.argmin(axis=1))


def test_every_document_gets_a_domain_through_the_main_job(sample_run) -> None:
    from curation.config import load_pipeline
    from curation.graph import ALL, DOCUMENTS, DOMAINS, EMBEDDINGS, TOPIC_MODEL
    from curation.partition import PartitionLayout
    from curation.storage import LocalStore

    store = LocalStore(str(sample_run.root))
    pipeline = load_pipeline(sample_run.pipeline_path)
    model = PartitionLayout(store, TOPIC_MODEL, ALL)
    table = model.read_table()
    assert table.num_rows == pipeline.domains.count
    assert all(terms for terms in table["terms"].to_pylist())
    assert model.complete_manifest().extra["training_snapshots"] == \
        pipeline.quality.training_snapshots
    column = table["centroid"].combine_chunks()
    centroids = column.flatten().to_numpy().reshape(len(column), -1)
    [models] = [result for (job, _), result in sample_run.results.items() if job == "models"]
    checks = {e.check_name: e.passed for e in models.get_asset_check_evaluations()
              if e.asset_key.path == [TOPIC_MODEL]}
    assert checks == {"topic_model_describes_domains": True}

    for partition in ("SAMPLE-01", "SAMPLE-02"):
        stored = PartitionLayout(store, DOMAINS, partition).read_table()
        documents = PartitionLayout(store, DOCUMENTS, partition).read_table(["doc_id"])
        assert stored["doc_id"].equals(documents["doc_id"])
        vectors = PartitionLayout(store, EMBEDDINGS, partition).read_table(["embedding"])
        column = vectors["embedding"].combine_chunks()
        expected, similarity = assign_domains(
            column.flatten().to_numpy(zero_copy_only=False).reshape(len(column), -1)
            .astype(np.float32), centroids)
        assert stored["domain"].to_numpy().tolist() == expected.tolist()
        assert np.allclose(stored["similarity"].to_numpy(), similarity)
        assert len(np.unique(expected)) > 1, "a sample of several sites spans several domains"


def test_without_embeddings_both_assets_are_empty_and_their_checks_pass(tmp_path: Path) -> None:
    from dagster import instance_for_test, materialize

    from checks.domains import (
        domains_contract,
        domains_cover_documents,
        topic_model_describes_domains,
    )
    from corpus_assets.domains import domains, topic_model
    from curation.graph import DOMAINS
    from curation.partition import PartitionLayout
    from curation.stages.domains import DISABLED
    from curation.storage import LocalStore
    from partitions import SNAPSHOT_PARTITIONS_NAME
    from tests.conftest import one_snapshot_resources

    resources = one_snapshot_resources(tmp_path)
    with instance_for_test(temp_dir=str(tmp_path)) as instance:
        instance.add_dynamic_partitions(SNAPSHOT_PARTITIONS_NAME, ["CC"])
        model = materialize([topic_model, topic_model_describes_domains], instance=instance,
                            resources=resources)
        assigned = materialize([domains, domains_cover_documents, domains_contract],
                               partition_key="CC", instance=instance, resources=resources)
    for result in (model, assigned):
        assert result.success
        [event] = result.get_asset_materialization_events()
        assert event.materialization.metadata["skipped"].value == DISABLED
        assert all(check.passed for check in result.get_asset_check_evaluations())
    manifest = PartitionLayout(LocalStore(str(tmp_path / "data")), DOMAINS, "CC") \
        .complete_manifest()
    assert (manifest.rows, manifest.extra) == (0, {"skipped": DISABLED})


def _sample_mixes(sample_run) -> tuple[Callable[..., Any], dict[str, int]]:
    """A function mixing the sample's recipe with some fields changed (the mix kernel over the
    main job's assets), and every document's domain."""
    from curation.config import load_pipeline, load_recipe
    from curation.graph import DOMAINS
    from curation.mix import build_mix
    from curation.partition import PartitionLayout
    from curation.stages.dataset import code_sources, curated_sources
    from curation.storage import LocalStore

    store = LocalStore(str(sample_run.root))
    pipeline = load_pipeline(sample_run.pipeline_path)
    recipe = load_recipe(sample_run.root.parent / "recipes" / "sample.yaml", pipeline)
    domain_of: dict[str, int] = {}
    for partition in recipe.partition_keys():
        table = PartitionLayout(store, DOMAINS, partition).read_table(["doc_id", "domain"])
        domain_of |= dict(zip(table["doc_id"].to_pylist(), table["domain"].to_pylist(),
                              strict=True))

    def mixed(**update: Any) -> Any:
        chosen = recipe.model_copy(update=update)
        return build_mix(store, chosen, curated_sources=curated_sources(pipeline, chosen),
                         code_sources=code_sources(pipeline, chosen))

    return mixed, domain_of


def _occurrence_tokens(mix, domain_of: dict[str, int]) -> dict[int, int]:
    tokens: dict[int, int] = {}
    for doc_id, source, est in zip(mix.occurrences["doc_id"].to_pylist(),
                                   mix.occurrences["source"].to_pylist(),
                                   mix.occurrences["est_tokens"].to_pylist(), strict=True):
        if source == "web":
            tokens[domain_of[doc_id]] = tokens.get(domain_of[doc_id], 0) + est
    return tokens


def test_a_recipe_weighs_domains_inside_the_web_budget_and_the_report_shows_them(
        sample_run) -> None:
    import json

    from curation.storage import LocalStore

    store = LocalStore(str(sample_run.root))
    mixed, domain_of = _sample_mixes(sample_run)
    plain = mixed()
    tokens = _occurrence_tokens(plain, domain_of)
    first, second = sorted(tokens, key=lambda d: (-tokens[d], d))[:2]
    weighted = mixed(domain_weights={first: 0.0, second: 3.0})
    moved = _occurrence_tokens(weighted, domain_of)
    assert first not in moved  # weight 0: selected, but no occurrence
    assert moved[second] / sum(moved.values()) > tokens[second] / sum(tokens.values())
    # the selection itself does not change, only the occurrences
    assert weighted.decisions["rule"].equals(plain.decisions["rule"])

    report = json.loads(store.read_bytes("reports/sample/report.json"))
    rows = report["domains"]
    assert sum(row["documents"] for row in rows) == report["summary"]["documents"]
    assert sum(row["selected"] for row in rows) == report["summary"]["documents_selected"]
    assert all(row["terms"] for row in rows if row["documents"] >= 10)
    assert abs(sum(row["token_share"] for row in rows) - 1) < 1e-9
    # a domain's share of all tokens averages its shares of each source's: the largest bounds it
    assert all(row["token_share"] <= row["largest_source_share"] + 1e-9 for row in rows)
    assert all(row["weight"] == 1.0 and row["cap"] is None for row in rows)


def test_cap_factors_fill_the_other_domains_like_water() -> None:
    from curation.mix import domain_cap_factors

    # one domain over its cap: set to it, the rest keep their tokens
    factors, held = domain_cap_factors({0: 60.0, 1: 30.0, None: 10.0}, {0: 0.2})
    assert held and set(factors) == {0}
    capped = 60.0 * factors[0]
    assert capped / (capped + 40.0) == pytest.approx(0.2)
    # capping the first pushes the second over its own cap: both end at their caps
    tokens = {0: 50.0, 1: 30.0, 2: 20.0}
    factors, held = domain_cap_factors(tokens, {0: 0.2, 1: 0.3})
    after = {d: m * factors.get(d, 1.0) for d, m in tokens.items()}
    total = sum(after.values())
    assert held and set(factors) == {0, 1}
    assert after[0] / total == pytest.approx(0.2) and after[1] / total == pytest.approx(0.3)
    assert after[2] == 20.0
    # under their caps: nothing changes; caps that cannot all hold share the pool by cap
    assert domain_cap_factors({0: 10.0, 1: 90.0}, {0: 0.5}) == ({}, True)
    factors, held = domain_cap_factors({0: 30.0, 1: 70.0}, {0: 0.2, 1: 0.2})
    assert not held
    assert 30.0 * factors[0] == pytest.approx(70.0 * factors[1])


def test_a_recipe_caps_a_domain_share_of_the_web_tokens(sample_run) -> None:
    mixed, domain_of = _sample_mixes(sample_run)
    plain = _occurrence_tokens(mixed(), domain_of)
    largest = max(plain, key=lambda d: (plain[d], -d))
    before = plain[largest] / sum(plain.values())
    cap = round(before / 3, 3)
    capped = mixed(domain_caps={largest: cap})
    tokens = _occurrence_tokens(capped, domain_of)
    # the cap holds up to the fill's sampling (a few of the sample's documents)
    assert tokens[largest] / sum(tokens.values()) <= cap + 0.01
    assert tokens[largest] / sum(tokens.values()) > cap - 0.03
    notes = [row["note"] or "" for row in capped.shares.to_pylist() if row["source"] == "web"]
    assert any(f"{largest} at {cap:.3g}" in note for note in notes)
    # the other domains keep their tokens (web was at max_epochs: the dataset shrinks)
    others = [d for d in plain if d != largest]
    assert sum(tokens.get(d, 0) for d in others) == pytest.approx(
        sum(plain[d] for d in others), rel=0.03)
    # a cap the domain is already under changes nothing
    same = mixed(domain_caps={largest: min(1.0, before + 0.1)})
    assert same.occurrences.equals(mixed().occurrences)


def test_a_recipe_naming_a_domain_that_is_not_there_fails_naming_the_field(
        tmp_path: Path) -> None:
    import yaml

    from curation.config import ConfigError, load_pipeline, load_recipe

    (tmp_path / "pipeline.yaml").write_text(
        "snapshots: {CC: {warc: {path: warc}}}\nembeddings: {enabled: true}\n"
        "domains: {count: 4}\n")
    recipe = {"name": "recipe", "snapshots": ["CC"], "domain_weights": {2: 0.5, 7: 2.0},
              "domain_caps": {1: 0.1, 9: 0.2},
              "phases": [{"name": "main", "fraction": 1.0, "weights": {"web": 1.0}}],
              "tokenizer": {"train_vocab_size": 4096}, "seq_len": 2048}
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    with pytest.raises(ConfigError, match="domain_weights.7") as failed:
        load_recipe(tmp_path / "recipe.yaml", load_pipeline(tmp_path / "pipeline.yaml"))
    assert "domain_caps.9" in str(failed.value) and "domain_caps.1" not in str(failed.value)
    (tmp_path / "off.yaml").write_text("snapshots: {CC: {warc: {path: warc}}}\n")
    with pytest.raises(ConfigError, match="domain_weights"):
        load_recipe(tmp_path / "recipe.yaml", load_pipeline(tmp_path / "off.yaml"))
    # a cap is a share of a pool
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe | {
        "domain_weights": {}, "domain_caps": {1: 1.5}}))
    with pytest.raises(ConfigError, match="domain_caps.1"):
        load_recipe(tmp_path / "recipe.yaml", load_pipeline(tmp_path / "pipeline.yaml"))
