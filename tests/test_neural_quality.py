"""The neural quality scorer: a head on the sentence vectors, trained on the fastText
classifier's documents, on real text; through the main job; and the recipe's choice of score."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from curation.embeddings import DIMENSIONS, EmbeddingSettings, SentenceEncoder
from curation.neural_quality import (
    NeuralHead,
    combined_scores,
    percentile_ranks,
    train_head,
)
from curation.quality import HQ, LQ, QualityClassifierSettings, class_split, roc_auc


@pytest.fixture(scope="module")
def real_text(shared_data: Path) -> dict:
    """News and article pages (gold text) against the real WARC pages' main text, with their
    vectors at 128 tokens."""
    from benchmarks.quality_models import article_bodies, web_pages

    positives, negatives = article_bodies(shared_data)[:120], web_pages(shared_data)
    encoder = SentenceEncoder(EmbeddingSettings(max_tokens=128))
    return {"positives": positives, "negatives": negatives,
            "hq": encoder.encode(positives), "lq": encoder.encode(negatives)}


def test_the_head_ranks_real_articles_above_real_web_pages_on_the_classifier_split(
        real_text: dict, tmp_path: Path) -> None:
    from curation.quality import train_classifier

    settings = QualityClassifierSettings(dim=32, bucket=100_000, epoch=25, lr=0.5, seed=3,
                                         training_snapshots=["web"])
    positives, negatives = real_text["positives"], real_text["negatives"]
    hq_train, hq_held = class_split(positives, settings.max_positives, settings, HQ)
    lq_train, lq_held = class_split(
        negatives, settings.negative_count(len(hq_train) + len(hq_held)), settings, LQ)
    assert len(lq_held) >= 20 and len(hq_held) >= 15
    head = train_head(real_text["hq"][hq_train], real_text["lq"][lq_train])
    neural_hq = head.score(real_text["hq"][hq_held])
    neural_lq = head.score(real_text["lq"][lq_held])
    neural_auc = roc_auc(neural_hq, neural_lq)
    # fastText on the same documents: its recorded held-out AUC is the one on this split.
    trained = train_classifier(positives, negatives, settings, tmp_path)
    scorer = trained.scorer(settings)
    fasttext_hq = scorer.score([positives[i] for i in hq_held])
    fasttext_lq = scorer.score([negatives[i] for i in lq_held])
    assert roc_auc(fasttext_hq, fasttext_lq) == trained.roc_auc
    reference = np.sort(fasttext_lq), np.sort(neural_lq)
    combined = roc_auc(combined_scores(fasttext_hq, neural_hq, *reference),
                       combined_scores(fasttext_lq, neural_lq, *reference))
    print(f"\nheld-out AUC: fastText {trained.roc_auc:.4f}, neural {neural_auc:.4f}, "
          f"combined {combined:.4f}")
    assert neural_auc >= 0.9 and combined >= 0.9


def test_the_head_is_deterministic_and_round_trips(real_text: dict) -> None:
    hq, lq = real_text["hq"][:60], real_text["lq"][:60]
    head = train_head(hq, lq)
    assert train_head(hq, lq).sha256 == head.sha256
    again = NeuralHead.from_bytes(head.to_bytes())
    assert again.sha256 == head.sha256 and again.score(lq).tobytes() == head.score(lq).tobytes()
    assert train_head(hq[:-1], lq).sha256 != head.sha256
    with pytest.raises(ValueError, match=str(DIMENSIONS + 1)):
        NeuralHead.from_bytes(NeuralHead(np.zeros(3), 0.0).to_bytes())


def test_the_combined_score_is_the_mean_of_percentile_ranks() -> None:
    reference = np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float32)
    assert percentile_ranks(np.array([0.05, 0.2, 0.35, 0.9]), reference).tolist() == \
        [0.0, 0.5, 0.75, 1.0]
    # fastText's scale bunches near 0 and 1, the head's does not: ranks put them together.
    fasttext = np.array([0.999, 0.0001, 0.9], dtype=np.float32)
    neural = np.array([0.6, 0.2, 0.1], dtype=np.float32)
    combined = combined_scores(fasttext, neural, np.array([0.001, 0.5, 0.99]),
                               np.array([0.15, 0.3, 0.5]))
    assert combined.tolist() == pytest.approx([(1.0 + 1.0) / 2, (0.0 + 1 / 3) / 2,
                                               (2 / 3 + 0.0) / 2])


def test_the_main_job_trains_and_gates_the_head_and_scores_every_document(sample_run) -> None:
    from curation.graph import ALL, QUALITY_CLASSIFIER, QUALITY_SCORES
    from curation.partition import PartitionLayout
    from curation.storage import LocalStore

    store = LocalStore(str(sample_run.root))
    manifest = PartitionLayout(store, QUALITY_CLASSIFIER, ALL).complete_manifest()
    neural = manifest.extra["neural"]
    assert neural["fasttext_roc_auc"] == manifest.extra["classifier"]["roc_auc"]
    assert neural["holdout_counts"] == manifest.extra["classifier"]["holdout_counts"]
    head = NeuralHead.from_bytes(store.read_bytes(neural["model_key"]))
    assert head.sha256 == neural["model_sha256"]
    checks = {evaluation.check_name: evaluation.passed for evaluation in
              sample_run.results[("models", None)].get_asset_check_evaluations()}
    assert checks["quality_classifier_neural_separates"]
    for partition in ("SAMPLE-01", "source:reference"):
        scores = PartitionLayout(store, QUALITY_SCORES, partition).read_table()
        for column in ("neural_score", "combined_score"):
            values = scores[column].to_numpy()
            assert scores[column].null_count == 0 and ((values >= 0) & (values <= 1)).all()
    # The curated positives outrank the web on the head's score, as on fastText's.
    web = PartitionLayout(store, QUALITY_SCORES, "SAMPLE-02").read_table()["neural_score"]
    curated = PartitionLayout(store, QUALITY_SCORES, "source:reference").read_table()[
        "neural_score"]
    assert np.median(curated.to_numpy()) > np.median(web.to_numpy())
    # The funnel report shows every scorer's web scores side by side, and names the one cut on.
    quality = json.loads(store.read_bytes("reports/sample/report.json"))["quality"]
    assert quality["scorer"] == "fasttext"
    assert {scorer: sum(counts) for scorer, counts in quality["scorers"].items()} == \
        dict.fromkeys(("fasttext", "neural", "combined"), quality["documents"])
    assert quality["documents"] > 400


@pytest.mark.parametrize("scorer", ["neural", "combined"])
def test_the_mix_cuts_on_the_score_the_recipe_names(sample_run, scorer: str) -> None:
    import duckdb

    from curation.graph import QUALITY_SCORES
    from curation.mix import load_candidates
    from curation.neural_quality import SCORERS
    from curation.partition import PartitionLayout
    from curation.storage import LocalStore

    store = LocalStore(str(sample_run.root))
    partitions = ["SAMPLE-01", "SAMPLE-02"]
    with duckdb.connect() as con:
        load_candidates(con, store, partitions, quality_scorer=scorer)
        read = dict(con.sql("SELECT doc_id, quality_score FROM candidates").fetchall())
    stored = {}
    for partition in partitions:
        table = PartitionLayout(store, QUALITY_SCORES, partition).read_table(
            ["doc_id", SCORERS[scorer]])
        stored |= dict(zip(table["doc_id"].to_pylist(), table[SCORERS[scorer]].to_pylist(),
                           strict=True))
    assert read == pytest.approx(stored)


def test_a_recipe_asking_for_the_head_without_embeddings_fails_naming_the_field(
        tmp_path: Path) -> None:
    from curation.config import ConfigError, load_pipeline, load_recipe

    (tmp_path / "pipeline.yaml").write_text(yaml.safe_dump({
        "snapshots": {"CC": {"warc": {"path": "warc"}}},
        "sources": {"wiki": {"path": "wiki", "licence": "CC0-1.0", "classifier_positive": True}},
        "quality": {"training_snapshots": ["CC"]}}))
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump({
        "name": "recipe", "snapshots": ["CC"], "selection": {"quality_scorer": "neural"},
        "phases": [{"name": "main", "fraction": 1.0, "weights": {"web": 1.0}}],
        "tokenizer": {"train_vocab_size": 4096}, "seq_len": 2048}))
    pipeline = load_pipeline(tmp_path / "pipeline.yaml")
    with pytest.raises(ConfigError, match="selection.quality_scorer"):
        load_recipe(tmp_path / "recipe.yaml", pipeline)
    enabled = pipeline.model_copy(update={"embeddings": EmbeddingSettings(enabled=True)})
    assert load_recipe(tmp_path / "recipe.yaml", enabled).selection.quality_scorer == "neural"
