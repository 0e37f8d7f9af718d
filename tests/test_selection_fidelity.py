"""Selection fidelity (issue 21): the quality cut is taken over distinct documents (one per
duplicate group), the classifier's web negatives are deduplicated, and a recipe re-thresholds
the stored heuristic signals without re-running any per-snapshot asset."""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from dagster import AssetKey

from corpus_assets.definitions import defs
from corpus_assets.main_job import main_run_config
from curation.config import ConfigError, load_pipeline, load_recipe
from curation.dedup import text_hash
from curation.graph import (
    CROSS_DEDUP,
    DECONTAMINATED,
    DOCUMENTS,
    HEURISTICS,
    LANGUAGE,
    MIX,
    PARTITION_DEDUP,
    QUALITY_CLASSIFIER,
    QUALITY_SCORES,
    SCRUBBED,
    TOKENIZER,
)
from curation.mix import (
    SELECTED,
    MixInputError,
    build_mix,
    heuristics_verdict,
    mix_candidates,
    select_documents,
)
from curation.partition import PartitionLayout
from curation.quality import sample_negatives
from curation.stages.quality import training_data
from curation.storage import LocalStore
from partitions import RECIPE_PARTITIONS_NAME
from tests.conftest import REPO
from tests.test_mix import decisions_by_id, doc, recipe, table, write, write_partition

# --- the quality cut over distinct documents -------------------------------------------------


def copies_at_the_top(groups: int, copies: int, top: int, language: str = "en") -> list[dict]:
    """`groups` distinct documents scored 1 - g/groups (group 0 best); the `top` best each
    with `copies` exact copies (same score, as a copy's text scores the same), so a pool
    counted over documents rather than groups is inflated at the top."""
    rows = []
    for g in range(groups):
        score = 1.0 - g / groups
        members = 1 + (copies if g < top else 0)
        rows += [doc(f"{language}{g:03d}-{m}", language=language, quality_score=score,
                     group_id=f"{language}{g:03d}-0") for m in range(members)]
    return rows


def test_quality_top_fraction_keeps_that_fraction_of_the_distinct_documents() -> None:
    rows = copies_at_the_top(100, copies=4, top=20) + copies_at_the_top(30, 9, 5, "fr")
    decisions = decisions_by_id(select_documents(
        table(rows), recipe(selection={"quality_top_fraction": 0.1})))
    kept = sorted(d for d, row in decisions.items() if row["kept"])
    # 10% of 100 and of 30 distinct documents, the best-scored group representatives; counted
    # over all 180 + 75 documents, the cut would keep the copies of the top 4 and 1 groups.
    assert kept == [f"en{g:03d}-0" for g in range(10)] + [f"fr{g:03d}-0" for g in range(3)]
    rules = Counter(row["rule"] for row in decisions.values())
    assert rules == {SELECTED: 13, "duplicate": 20 * 4 + 5 * 9, "quality": 90 + 27}


def test_a_copy_is_duplicate_and_a_representative_below_the_cut_is_quality() -> None:
    rows = copies_at_the_top(10, copies=2, top=10)
    rows[0]["heuristics_keep"] = False  # group 0 is represented by its next member
    decisions = decisions_by_id(select_documents(
        table(rows), recipe(selection={"quality_top_fraction": 0.2})))
    assert decisions["en000-0"]["rule"] == "heuristics"
    assert (decisions["en000-1"]["rule"], decisions["en000-2"]["kept_doc_id"]) == \
        (SELECTED, "en000-1")
    assert decisions["en001-0"]["rule"] == SELECTED
    # group 2 is below the cut: its representative says quality, its copies duplicate
    assert decisions["en002-0"]["rule"] == "quality"
    assert [(decisions[f"en002-{m}"]["rule"], decisions[f"en002-{m}"]["kept_doc_id"])
            for m in (1, 2)] == [("duplicate", "en002-0")] * 2


def test_a_phase_quality_fraction_is_of_the_distinct_selected_documents() -> None:
    rows = copies_at_the_top(40, copies=5, top=10) + [doc("ref", source="ref")]
    r = recipe(phases=[{"name": "anneal", "fraction": 1.0, "weights": {"web": 1.0, "ref": 0.0},
                        "quality_top_fraction": 0.25}], max_epochs=100)
    result = mix_candidates(table(rows), r)
    web = [row for row in result.shares.to_pylist() if row["source"] == "web"][0]
    assert web["documents"] == 10
    assert set(result.occurrences["doc_id"].to_pylist()) == {f"en{g:03d}-0" for g in range(10)}


# --- the classifier's negatives --------------------------------------------------------------


def test_negatives_are_one_per_exact_duplicate_whatever_the_partitioning() -> None:
    texts = [f"page {i} about things" for i in range(50)]
    # copies differ only in case, punctuation and spacing: exact duplicates to exact_dedup
    copies = [f"  PAGE {i} about, things!" for i in range(10) for _ in range(20)]
    all_texts = texts + copies
    doc_ids = [f"S/{i:05d}" for i in range(len(all_texts))]
    picked = sample_negatives(doc_ids, all_texts, 1000, seed=3)
    assert len(picked) == 50
    assert len({text_hash(all_texts[i]) for i in picked}) == 50
    some = sample_negatives(doc_ids, all_texts, 20, seed=3)
    assert len({text_hash(all_texts[i]) for i in some}) == 20
    survivors: list[int] = []
    for part in (range(0, 120), range(120, len(all_texts))):
        chosen = sample_negatives([doc_ids[i] for i in part], [all_texts[i] for i in part], 20, 3)
        survivors += [part[i] for i in chosen]
    merged = sample_negatives([doc_ids[i] for i in survivors],
                              [all_texts[i] for i in survivors], 20, 3)
    assert sorted(survivors[i] for i in merged) == some


def test_the_sample_classifier_trains_on_distinct_negatives(sample_run) -> None:
    store = LocalStore(str(sample_run.root))
    pipeline = load_pipeline(sample_run.pipeline_path)
    data = training_data(store, pipeline)
    assert data.positives and len(data.negatives) > 20
    assert len({text_hash(text) for text in data.negatives}) == len(data.negatives)
    assert len(set(data.negative_ids)) == len(data.negatives)
    assert len(data.positive_ids) == len(data.positives)


# --- heuristic thresholds per recipe ---------------------------------------------------------


def write_signals(store: LocalStore, partition: str, rows: list[dict],
                  signals: dict[str, list]) -> None:
    """`write_partition`, then a `heuristics` table with signal columns and suite verdicts."""
    write_partition(store, partition, rows)
    write(store, HEURISTICS, partition, pa.table({
        "doc_id": [row["doc_id"] for row in rows], **signals,
        "keep": [row["heuristics_keep"] for row in rows]}))


def test_a_recipe_rethresholds_the_stored_signals(tmp_path: Path) -> None:
    store = LocalStore(str(tmp_path))
    # FineWeb's stored verdict at its 0.12 line-punctuation threshold; d5 has no lines to
    # judge (null signal, FineWeb keeps it) and fails Gopher
    punct = [0.05, 0.1, 0.2, 0.5, 0.9, None]
    fineweb = [p is None or p >= 0.12 for p in punct]
    gopher = [True] * 5 + [False]
    rows = [doc(f"d{i}", heuristics_keep=f and g) for i, (f, g) in
            enumerate(zip(fineweb, gopher, strict=True))]
    write_signals(store, "CC-MAIN-2024-10", rows, {
        "fineweb_line_punct_ratio": pa.array(punct, pa.float64()),
        "keep_fineweb": fineweb, "keep_gopher_quality": gopher})

    def heuristics_drops(**heuristics) -> set[str]:
        r = recipe(sources=[], phases=[{"name": "main", "fraction": 1.0,
                                        "weights": {"web": 1.0}}],
                   selection={"heuristics": heuristics})
        decisions = build_mix(store, r).decisions.to_pylist()
        return {row["doc_id"] for row in decisions if row["rule"] == "heuristics"}

    assert heuristics_drops() == {"d0", "d1", "d5"}  # the stored verdict
    # stricter: the stored verdict and a higher line-punctuation bound
    assert heuristics_drops(signals={"fineweb_line_punct_ratio": {"min": 0.3}}) == \
        {"d0", "d1", "d2", "d5"}
    # looser: FineWeb's stored verdict left out and its rule restated with a lower threshold;
    # a null signal passes the bound, its gopher verdict still drops it
    assert heuristics_drops(suites=["gopher_quality"],
                            signals={"fineweb_line_punct_ratio": {"min": 0.08}}) == {"d0", "d5"}
    with pytest.raises(MixInputError, match="selection.heuristics.*no_such_signal"):
        heuristics_drops(signals={"no_such_signal": {"max": 1}})
    with pytest.raises(MixInputError, match="selection.heuristics.*keep_c4"):
        heuristics_drops(suites=["c4"])


def test_bad_heuristic_selections_fail_naming_the_field(tmp_path: Path) -> None:
    base = (REPO / "recipes" / "sample.yaml").read_text()
    for text, field in (("heuristics: {suites: [gopher]}", "selection.heuristics.suites"),
                        ("heuristics: {signals: {x: {}}}", "selection.heuristics.signals"),
                        ("heuristics: {signals: {x: {min: 2, max: 1}}}", "signals.x")):
        path = tmp_path / "bad.yaml"
        path.write_text(base.replace("  quality_top_fraction: 0.5\n",
                                     f"  quality_top_fraction: 0.5\n  {text}\n"))
        with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
            load_recipe(path)
    default = load_recipe(REPO / "recipes" / "sample.yaml").selection.heuristics
    assert heuristics_verdict(default) == (["keep"], "keep")
    # against the pipeline: only the signals and enabled suites heuristics stores
    pipeline = load_pipeline(REPO / "pipeline.yaml")
    path = tmp_path / "sample.yaml"  # a recipe's name is its file's
    for text, says in (("heuristics: {signals: {fineweb_line_punct: {min: 0.2}}}",
                        "selection.heuristics.signals.fineweb_line_punct: not a signal"),
                       ("heuristics: {suites: [c4]}", "selection.heuristics.suites: 'c4'")):
        path.write_text(base.replace("  quality_top_fraction: 0.5\n",
                                     f"  quality_top_fraction: 0.5\n  {text}\n"))
        disabled = pipeline.model_copy(update={"heuristics": pipeline.heuristics.model_copy(
            update={"c4": pipeline.heuristics.c4.model_copy(update={"enabled": False})})})
        with pytest.raises(ConfigError, match=re.escape(says)):
            load_recipe(path, disabled)
    path.write_text(base.replace("  quality_top_fraction: 0.5\n", "  quality_top_fraction: 0.5\n"
                                 "  heuristics: {signals: {fineweb_line_punct_ratio: {min: 0.2}}}"
                                 "\n"))
    assert load_recipe(path, pipeline).selection.heuristics.signals[
        "fineweb_line_punct_ratio"].min == 0.2


UPSTREAM = [DOCUMENTS, LANGUAGE, HEURISTICS, *PARTITION_DEDUP, SCRUBBED, QUALITY_SCORES,
            DECONTAMINATED, CROSS_DEDUP, QUALITY_CLASSIFIER]
STRICT = {"fineweb_line_punct_ratio": {"min": 0.6}, "gopher_alpha_words_frac": {"min": 0.87}}
# Gopher quality's and C4's stored verdicts left out: on the sample, every page they drop but
# one fails Gopher's repetition rules as well
LOOSE_SUITES = ["gopher_repetition", "fineweb", "bad_words"]


def expected_heuristics_drops(store: LocalStore, partitions: list[str], decisions: pa.Table,
                              suites: list[str] | None, bounds: dict[str, dict]) -> set[str]:
    """The web and code documents the licence and language rules let through that the
    recipe's heuristic filter drops, computed from the stored heuristics tables with Arrow (not
    the mix's SQL)."""
    earlier = pc.is_in(decisions["rule"], pa.array(["licence", "language"]))
    past_language = set(decisions.filter(pc.invert(earlier))["doc_id"].to_pylist())
    dropped = set()
    for partition in partitions:
        for row in PartitionLayout(store, HEURISTICS, partition).read_table().to_pylist():
            keep = row["keep"] if suites is None else all(row[f"keep_{s}"] for s in suites)
            for name, bound in bounds.items():
                value = row[name]
                if value is not None and not (bound.get("min", -math.inf) <= value
                                              <= bound.get("max", math.inf)):
                    keep = False
            if not keep and row["doc_id"] in past_language:
                dropped.add(row["doc_id"])
    return dropped


def test_two_recipes_with_different_thresholds_rerun_nothing_upstream(sample_run) -> None:
    instance, store = sample_run.instance, LocalStore(str(sample_run.root))
    recipes = sample_run.base / "recipes"
    base = (recipes / "sample.yaml").read_text()
    variants = {"sample-strict": f"  heuristics: {{signals: {STRICT}}}\n",
                "sample-loose": f"  heuristics: {{suites: {LOOSE_SUITES}}}\n"}
    for name, heuristics in variants.items():
        (recipes / f"{name}.yaml").write_text(base.replace("name: sample\n", f"name: {name}\n")
                                              .replace("  quality_top_fraction: 0.5\n",
                                                       "  quality_top_fraction: 0.5\n"
                                                       + heuristics.replace("'", "")))
    instance.add_dynamic_partitions(RECIPE_PARTITIONS_NAME, list(variants))

    def materializations() -> Counter:
        return Counter((asset, record.partition_key) for asset in UPSTREAM for record in
                       instance.fetch_materializations(AssetKey(asset), limit=10_000).records)

    before = materializations()
    assert before  # the sample materialized every upstream asset
    try:
        for name in variants:
            result = defs.resolve_job_def("dataset").execute_in_process(
                partition_key=name, instance=instance, raise_on_error=False,
                asset_selection=[AssetKey(TOKENIZER), AssetKey(MIX)],
                run_config=main_run_config(str(sample_run.pipeline_path),
                                           str(sample_run.root), 2))
            assert result.success, name
        assert materializations() == before  # no per-snapshot asset ran again
        decisions = {name: PartitionLayout(store, MIX, name).read_table(name="decisions")
                     for name in ("sample", *variants)}
        partitions = [*load_recipe(recipes / "sample.yaml").snapshots, "source:code"]
        dropped = {name: {row["doc_id"] for row in table.to_pylist()
                          if row["rule"] == "heuristics"} for name, table in decisions.items()}
        assert dropped["sample"] == expected_heuristics_drops(
            store, partitions, decisions["sample"], None, {})
        assert dropped["sample-strict"] == expected_heuristics_drops(
            store, partitions, decisions["sample-strict"], None, STRICT)
        assert dropped["sample-loose"] == expected_heuristics_drops(
            store, partitions, decisions["sample-loose"], LOOSE_SUITES, {})
        assert dropped["sample-loose"] < dropped["sample"] < dropped["sample-strict"]
        kept = {name: set(table.filter(table["kept"])["doc_id"].to_pylist())
                for name, table in decisions.items()}
        assert kept["sample-strict"] != kept["sample"]
        for name in variants:  # both recipes stay materialized side by side
            assert PartitionLayout(store, MIX, name).read_manifest() is not None
    finally:  # the session's instance and recipes go on to other tests
        for name in variants:
            instance.delete_dynamic_partition(RECIPE_PARTITIONS_NAME, name)
            (recipes / f"{name}.yaml").unlink()
