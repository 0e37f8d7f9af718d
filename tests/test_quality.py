"""The quality classifier kernel: curated text (Wikipedia, Gutenberg) against generated spam."""

from __future__ import annotations

import itertools
import pickle
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from benchmarks.quality_models import gutenberg_chunks, wikipedia_articles
from curation.quality import (
    HQ,
    LQ,
    MIN_EXPECTED_HELD_OUT,
    QualityClassifierSettings,
    QualityScorer,
    TrainedClassifier,
    histogram,
    minimum_positives,
    prepare_text,
    roc_auc,
    sample_negatives,
    score_thresholds,
    too_few_positives,
    train_classifier,
)

# Small buckets and dimension keep the test fast; the model is still a bigram model.
SETTINGS = QualityClassifierSettings(dim=32, bucket=100_000, max_positives=1500, seed=7,
                                     training_snapshots=["CC-MAIN-2024-10"])


PRODUCTS = ["shoes", "watch", "laptop", "phone case", "headphones", "sofa", "vitamins", "jacket",
            "casino bonus", "loans", "hosting", "backpack", "coffee maker", "sunglasses"]
PLACES = ["london", "new york", "texas", "dubai", "sydney", "near me", "online", "uk", "usa"]
HYPE = ["best", "cheap", "top rated", "discount", "free shipping", "lowest price", "2024", "sale",
        "official", "buy now", "deal", "limited offer", "guaranteed", "reviews"]
MENU = ["Home", "About Us", "Shop", "Blog", "Contact", "FAQ", "Login", "Register", "Cart (0)",
        "Wishlist", "Privacy Policy", "Terms of Service", "Sitemap", "Careers", "Support"]
BOILERPLATE = ["We use cookies to improve your experience. Accept all cookies",
               "Subscribe to our newsletter and get 10% off your first order",
               "Copyright © 2024 All rights reserved.", "Skip to main content",
               "Follow us on Facebook Twitter Instagram Pinterest", "Powered by WordPress"]


def seo_paragraph(rng: random.Random) -> str:
    product = rng.choice(PRODUCTS)
    return " ".join(f"{rng.choice(HYPE)} {product} {rng.choice(PLACES)}"
                    for _ in range(rng.randint(8, 25)))


def link_list(rng: random.Random) -> str:
    site = f"{rng.choice(['shop', 'deals', 'best', 'top'])}{rng.randint(1, 999)}.com"
    return "\n".join(f"https://www.{site}/{rng.choice(HYPE).replace(' ', '-')}-"
                     f"{rng.choice(PRODUCTS).replace(' ', '-')}" for _ in range(rng.randint(5, 15)))


def menu(rng: random.Random) -> str:
    return " | ".join(rng.sample(MENU, rng.randint(5, 10))) + "\n" + rng.choice(BOILERPLATE)


def product_list(rng: random.Random) -> str:
    return "\n".join(
        f"{rng.choice(HYPE).title()} {rng.choice(PRODUCTS).title()} - ${rng.randint(5, 499)}.99"
        f" - {rng.choice(['In stock', 'Add to cart', 'Only 3 left'])} ({rng.randint(1, 900)} "
        "reviews)" for _ in range(rng.randint(4, 12)))


def spam_documents(count: int, seed: int = 1234) -> list[str]:
    """Keyword-stuffed SEO text, link lists, menus and product lists, mixed per page."""
    rng = random.Random(seed)
    parts = [seo_paragraph, link_list, menu, product_list]
    return ["\n\n".join(rng.choice(parts)(rng) for _ in range(rng.randint(2, 5)))
            for _ in range(count)]


@dataclass
class Trained:
    result: TrainedClassifier
    positives: list[str]
    negatives: list[str]


@pytest.fixture(scope="module")
def trained(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Trained:
    positives = wikipedia_articles(shared_data) + gutenberg_chunks(shared_data)
    negatives = spam_documents(2000)
    result = train_classifier(positives, negatives, SETTINGS, tmp_path_factory.mktemp("model"))
    return Trained(result, positives, negatives)


def test_prepare_text_makes_one_line_of_word_and_punctuation_tokens() -> None:
    text = "Hello,\tWORLD!\r\nBuy\x00now:  $9.99 | Home\u2028End"
    assert prepare_text(text, 1000) == "hello , world ! buy now : $ 9 . 99 | home end"
    assert prepare_text(text, 5) == "hello"
    assert prepare_text(" \n\t", 100) == ""


def test_settings_validate_and_default_to_balanced_classes() -> None:
    settings = QualityClassifierSettings(training_snapshots=["b", "a"], max_positives=100)
    assert settings.training_snapshots == ["a", "b"]
    assert settings.negative_count(40) == 40 and settings.negative_count(1000) == 100
    assert settings.model_copy(update={"max_negatives": 30}).negative_count(40) == 30
    with pytest.raises(ValidationError):
        QualityClassifierSettings(training_snapshots=["a"], epochs=3)
    with pytest.raises(ValidationError):
        QualityClassifierSettings(training_snapshots=[])
    with pytest.raises(ValidationError):
        settings.seed = 3


def test_negative_sample_ignores_order_and_partitioning() -> None:
    doc_ids = [f"CC-MAIN-2024-10/{i:05d}" for i in range(1000)]
    texts = ["" if i % 10 == 0 else f"text {i}" for i in range(1000)]
    chosen = {doc_ids[i] for i in sample_negatives(doc_ids, texts, 100, seed=3)}
    assert len(chosen) == 100 and all(int(d[-5:]) % 10 for d in chosen)  # blank texts skipped

    order = random.Random(0).sample(range(1000), 1000)
    shuffled = sample_negatives([doc_ids[i] for i in order], [texts[i] for i in order], 100, 3)
    assert {doc_ids[order[i]] for i in shuffled} == chosen
    survivors: list[int] = []
    for part in (range(0, 400), range(400, 1000)):
        picked = sample_negatives([doc_ids[i] for i in part], [texts[i] for i in part], 100, 3)
        survivors += [part[i] for i in picked]
    again = sample_negatives([doc_ids[i] for i in survivors], [texts[i] for i in survivors], 100, 3)
    assert {doc_ids[survivors[i]] for i in again} == chosen
    assert {doc_ids[i] for i in sample_negatives(doc_ids, texts, 100, seed=4)} != chosen
    assert len(sample_negatives(doc_ids, texts, 5000, seed=3)) == 900


def test_roc_auc_counts_every_pair_and_halves_ties() -> None:
    rng = np.random.default_rng(0)
    positives, negatives = rng.integers(0, 20, 60) / 20, rng.integers(0, 15, 80) / 20
    pairs = [(p > n) + 0.5 * (p == n) for p, n in itertools.product(positives, negatives)]
    assert roc_auc(positives, negatives) == pytest.approx(np.mean(pairs))
    assert roc_auc(np.array([0.9]), np.array([0.1])) == 1.0


def test_classifier_separates_curated_text_from_spam(trained: Trained) -> None:
    result = trained.result
    print(f"\nheld out {result.holdout_counts}, trained on {result.train_counts}: "
          f"precision {result.precision:.4f} recall {result.recall:.4f} "
          f"AUC {result.roc_auc:.4f} in {result.train_seconds:.2f} s")
    print("hq features:", result.hq_features[:10])
    print("lq features:", result.lq_features[:10])
    assert result.roc_auc >= 0.9 and result.precision >= 0.9 and result.recall >= 0.9
    used = {label: result.train_counts[label] + result.holdout_counts[label] for label in (HQ, LQ)}
    assert used == {HQ: SETTINGS.max_positives, LQ: SETTINGS.max_positives}  # capped, balanced
    assert 0.15 < result.holdout_counts[HQ] / used[HQ] < 0.25
    assert result.model_path.stat().st_size > 0
    assert not (result.model_path.parent / "train.txt").exists()
    assert all(weight > 0 for _, weight in result.hq_features)
    assert all(weight < 0 for _, weight in result.lq_features)


def test_ranks_unseen_real_pages_in_the_right_order(trained: Trained, shared_data: Path) -> None:
    """Generated spam teaches template spam, not all low quality: real forum boilerplate still
    scores high in absolute terms, so only the order is asserted."""
    fixtures = shared_data / "sources/misc_fixtures_cs336"
    texts = [(fixtures / name).read_text("utf-8")
             for name in ("high_quality_wiki_reference.txt", "low_quality_cc.txt")]
    good, bad = trained.result.scorer(SETTINGS).score(texts)
    print(f"\nreference article {good:.4f}, forum boilerplate {bad:.4f}")
    assert good > bad


def test_same_inputs_in_any_order_give_the_same_model(trained: Trained, tmp_path: Path) -> None:
    rng = random.Random(5)
    again = train_classifier(rng.sample(trained.positives, len(trained.positives)),
                             rng.sample(trained.negatives, len(trained.negatives)),
                             SETTINGS, tmp_path / "again")
    assert again.model_sha256 == trained.result.model_sha256
    assert again.model_path.read_bytes() == trained.result.model_path.read_bytes()
    assert (again.precision, again.recall, again.roc_auc) == (
        trained.result.precision, trained.result.recall, trained.result.roc_auc)


def test_scorer_is_picklable_and_reloads_its_model(trained: Trained) -> None:
    scorer = trained.result.scorer(SETTINGS)
    texts = [trained.positives[0], trained.negatives[0], ""]
    scores = scorer.score(texts)
    assert scores.dtype == np.float32 and scores.shape == (3,)
    assert scores[0] > 0.5 > scores[1] and np.all((0 <= scores) & (scores <= 1))
    copy = pickle.loads(pickle.dumps(scorer))
    assert copy._model is None
    np.testing.assert_array_equal(copy.score(texts), scores)
    assert QualityScorer(trained.result.model_path).score([]).shape == (0,)


def test_thresholds_keep_the_top_fraction_per_language() -> None:
    rng = np.random.default_rng(1)
    scores = rng.random(1500).astype(np.float32)
    languages = ["en"] * 1000 + ["de"] * 490 + ["fr"] * 10
    thresholds = score_thresholds(scores, languages)
    assert sorted(thresholds) == ["de", "en", "fr"]
    codes = np.array(languages)
    for language, by_fraction in thresholds.items():
        group = scores[codes == language]
        for fraction, threshold in by_fraction.items():
            assert (group >= threshold).sum() == max(1, np.ceil(round(fraction * len(group), 9)))
    assert (scores[codes == "fr"] >= thresholds["fr"][0.3]).sum() == 3  # not 4: 0.3 * 10 > 3


def test_thresholds_keep_every_document_tied_at_the_threshold() -> None:
    scores = np.array([0.9, 0.5, 0.5, 0.5, 0.1])
    assert score_thresholds(scores, ["en"] * 5, top_fractions=(0.2, 0.4)) == {
        "en": {0.2: 0.9, 0.4: 0.5}}  # 0.4 keeps all three tied documents
    with pytest.raises(ValueError):
        score_thresholds(scores, ["en"] * 4)


def test_histogram_counts_every_score_in_unit_bins() -> None:
    counts = histogram(np.array([0.0, 0.04, 0.05, 0.5, 0.99, 1.0]), bins=20)
    assert len(counts) == 20 and sum(counts) == 6
    assert counts[0] == 2 and counts[1] == 1 and counts[10] == 1 and counts[19] == 2


def test_training_refuses_a_class_without_held_out_texts(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="^hq: .*both must be non-empty"):
        train_classifier(["one curated text", "  "], spam_documents(50), SETTINGS, tmp_path)


# --- issue 18: a pipeline without a classifier, and positives too few to split --------------


def test_too_few_positives_names_each_source_and_the_minimum() -> None:
    needed = minimum_positives(SETTINGS)
    # About MIN_EXPECTED_HELD_OUT texts land on the smaller side of the split.
    assert needed * SETTINGS.holdout_fraction >= MIN_EXPECTED_HELD_OUT
    reason = too_few_positives(SETTINGS, {"hq": 7})
    assert reason == (f"the classifier_positive sources hold 7 texts (hq: 7); holding out 20% "
                      f"of them needs at least {needed}")
    assert too_few_positives(SETTINGS, {"a": needed - 1, "b": 1}) is None
    capped = SETTINGS.model_copy(update={"max_positives": needed - 1})
    assert "capped at quality.max_positives" in too_few_positives(capped, {"hq": needed})


@pytest.mark.parametrize("pipeline_text", [
    "snapshots: {CC: {warc: {path: warc}}}\n",
    "snapshots: {CC: {warc: {path: warc}}}\nquality: {training_snapshots: [CC]}\n",
], ids=["no-quality-section", "no-positive-source"])
def test_without_a_classifier_the_models_and_scores_are_skipped_cleanly(
        tmp_path: Path, pipeline_text: str) -> None:
    from dagster import instance_for_test, materialize
    from dagster_aws.s3 import S3Resource

    from checks.quality import quality_classifier_separates, quality_scores_cover_documents
    from corpus_assets.quality import quality_classifier, quality_scores
    from curation.config import load_pipeline
    from curation.partition import PartitionLayout
    from curation.stages.quality import CLASSIFIER, GLOBAL_PARTITION, SCORES
    from curation.storage import LocalStore
    from partitions import SNAPSHOT_PARTITIONS_NAME
    from resources import ComputeResource, PipelineResource, StorageResource

    (tmp_path / "pipeline.yaml").write_text(pipeline_text)
    reason = load_pipeline(tmp_path / "pipeline.yaml").classifier_skipped()
    resources = {"pipeline": PipelineResource(path=str(tmp_path / "pipeline.yaml")),
                 "storage": StorageResource(root=str(tmp_path / "data"), s3=S3Resource()),
                 "compute": ComputeResource(workers=0)}
    with instance_for_test(temp_dir=str(tmp_path)) as instance:
        instance.add_dynamic_partitions(SNAPSHOT_PARTITIONS_NAME, ["CC"])
        models = materialize([quality_classifier, quality_classifier_separates],
                             instance=instance, resources=resources)
        scores = materialize([quality_scores, quality_scores_cover_documents],
                             partition_key="CC", instance=instance, resources=resources)
    for result in (models, scores):
        assert result.success
        [event] = result.get_asset_materialization_events()
        metadata = event.materialization.metadata
        assert metadata["skipped"].value == f"no quality classifier configured: {reason}"
        assert "selection.quality_top_fraction" in metadata["not_available"].value
        [check] = result.get_asset_check_evaluations()
        assert check.passed and check.metadata["skipped"].value == reason
    store = LocalStore(str(tmp_path / "data"))
    for asset, partition in ((CLASSIFIER, GLOBAL_PARTITION), (SCORES, "CC")):
        manifest = PartitionLayout(store, asset, partition).complete_manifest()
        assert (manifest.rows, manifest.extra) == (0, {"skipped": reason})
    # The mix reads the empty scores as missing: no document has a score.
    assert PartitionLayout(store, SCORES, "CC").read_table(["doc_id", "quality_score"]) \
        .num_rows == 0
