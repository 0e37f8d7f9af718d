"""Rehydration (FineWeb-2): a recipe weighs each kept web document's occurrences by its
duplicate group's size bucket; the mix stays deterministic and bounded and reports the token
shares each bucket achieved."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pyarrow.compute as pc
import pytest

from curation.config import ConfigError, RecipeConfig, load_pipeline, load_recipe
from curation.mix import build_mix, gather_candidates, mix_candidates
from curation.storage import LocalStore
from tests.conftest import REPO
from tests.test_mix import doc, recipe, table

TABLE = {1: 1, 2: 2, "3-4": 3, "5+": 5}
WEIGHTS = {1: 1.0, 2: 2.0, 3: 3.0, 4: 3.0, 10: 5.0}  # by group size, for the groups below
LABELS = {1: "1", 2: "2", 3: "3-4", 4: "3-4", 10: "5+"}


def web_groups() -> list[dict]:
    """Web groups of 1, 2, 3, 4 and 10 members (12 groups each), varied sizes; every copy
    passes the filters, so each group keeps its first member."""
    rows = []
    for size in WEIGHTS:
        for g in range(12):
            group = f"s{size:02d}g{g:02d}"
            rows += [doc(f"{group}m{m:02d}", group_id=f"{group}m00",
                         text_bytes=300 + 97 * ((g * 7 + size) % 11)) for m in range(size)]
    return rows


def mixed(rehydration, **overrides):
    rows = web_groups() + [doc(f"ref{i}", source="ref", text_bytes=800) for i in range(40)]
    r = recipe(rehydration=rehydration, **overrides)
    return mix_candidates(table(rows), r)


def test_the_table_and_list_forms_validate_and_errors_name_the_field(tmp_path: Path) -> None:
    listed = [{"min_size": 1, "max_size": 1, "weight": 1}, {"min_size": 2, "max_size": 2,
                                                            "weight": 2},
              {"min_size": 3, "max_size": 4, "weight": 3}, {"min_size": 5, "weight": 5}]
    assert recipe(rehydration=TABLE).rehydration == recipe(rehydration=listed).rehydration
    base = (REPO / "recipes" / "sample.yaml").read_text()
    for bad, says in (("{1: 1, 3+: 2}", "sizes 2-2 are in no bucket"),
                      ("{1: 1, 1-4: 2, 5+: 1}", "overlaps"),
                      ("{1: 1, 2: 2}", "open bucket"),
                      ("{1: 1, 2+: -1}", "greater than or equal to 0"),
                      ("{1: 1, two: 1}", "write a size")):
        path = tmp_path / "bad.yaml"
        path.write_text(f"{base}rehydration: {bad}\n")
        with pytest.raises(ConfigError, match="rehydration") as error:
            load_recipe(path)
        assert says in str(error.value)


def test_occurrences_follow_the_bucket_weights_within_one() -> None:
    result = mixed(TABLE, total_tokens=400_000, max_epochs=50)
    web = [row for row in result.shares.to_pylist() if row["source"] == "web"][0]
    assert not web["ran_out"]
    epochs = web["needed_epochs"]  # per unit of weight
    occurrences = Counter(result.occurrences["doc_id"].to_pylist())
    kept = [d for d in result.decisions.to_pylist() if d["kept"] and d["doc_id"].startswith("s")]
    assert len(kept) == 60  # one per group
    for decision in kept:
        due = epochs * WEIGHTS[int(decision["doc_id"][1:3])]
        assert math.floor(due) <= occurrences[decision["doc_id"]] <= math.ceil(due)
    # the reported shares are the occurrences' tokens per bucket over the phase's web tokens
    tokens = Counter()
    for row in result.occurrences.filter(pc.equal(result.occurrences["source"], "web")
                                         ).to_pylist():
        tokens[LABELS[int(row["doc_id"][1:3])]] += row["est_tokens"]
    reported = {row["bucket"]: row for row in result.rehydration.to_pylist()}
    assert list(reported) == ["1", "2", "3-4", "5+"]
    for label, row in reported.items():
        assert row["achieved_tokens"] == tokens[label]
        assert row["achieved_share"] == pytest.approx(tokens[label] / sum(tokens.values()))
        assert row["documents"] == (12 if label != "3-4" else 24)
    assert reported["5+"]["copies"] == 120
    # a bucket's tokens are its weighted share of the web tokens, give or take the one
    # fractional occurrence of each of its documents
    low, high = Counter(), Counter()
    for decision in kept:
        size = int(decision["doc_id"][1:3])
        due = epochs * WEIGHTS[size]
        low[LABELS[size]] += math.floor(due) * decision["tokens"]
        high[LABELS[size]] += math.ceil(due) * decision["tokens"]
    for label, row in reported.items():
        assert low[label] <= row["achieved_tokens"] <= high[label]
    assert high["5+"] / sum(high.values()) > 0.3 > high["1"] / sum(high.values())


def test_weights_of_one_change_nothing_and_the_mix_is_deterministic() -> None:
    plain = mixed(None, total_tokens=150_000)
    ones = mixed({"1+": 1}, total_tokens=150_000)
    assert ones.occurrences.equals(plain.occurrences)
    assert plain.rehydration.num_rows == 0 and ones.rehydration.num_rows == 1
    assert mixed(TABLE, total_tokens=150_000).occurrences.equals(
        mixed(TABLE, total_tokens=150_000).occurrences)


def test_rehydration_stays_within_max_epochs_of_the_rehydrated_pool() -> None:
    result = mixed(TABLE, total_tokens=10_000_000, max_epochs=2)
    web = [row for row in result.shares.to_pylist() if row["source"] == "web"][0]
    assert web["ran_out"] and web["epochs"] <= 2 + 1e-9
    occurrences = Counter(result.occurrences["doc_id"].to_pylist())
    assert max(occurrences[d] for d in occurrences if d.startswith("s10")) <= 2 * 5
    assert max(occurrences[d] for d in occurrences if d.startswith("s01")) <= 2
    zero = mixed({1: 1, "2+": 0}, total_tokens=150_000)
    assert not [d for d in zero.occurrences["doc_id"].to_pylist() if not d.startswith(
        ("s01", "ref"))]


def test_rehydration_on_the_built_in_sample(sample_run) -> None:
    pipeline = load_pipeline(sample_run.pipeline_path)
    sample = load_recipe(REPO / "recipes" / "sample.yaml", pipeline)
    store = LocalStore(str(sample_run.root))
    raw = sample.model_dump(mode="json")

    def run(rehydration: dict) -> dict[str, float]:
        result = build_mix(store, RecipeConfig.model_validate({**raw,
                                                               "rehydration": rehydration}))
        rows = [row for row in result.rehydration.to_pylist() if row["phase"] == "main"]
        return {row["bucket"]: row["achieved_share"] for row in rows}

    candidates = gather_candidates(store, sample.partition_keys(), ["reference"])
    sizes = Counter(Counter(candidates["group_id"].to_pylist()).values())
    assert sizes[1] and sizes[2]  # the sample has singletons and pairs
    flat, heavy = run({1: 1, "2+": 1}), run({1: 1, "2+": 4})
    assert set(flat) == set(heavy) == {"1", "2+"}
    assert heavy["2+"] > flat["2+"] > 0
    assert sum(heavy.values()) == pytest.approx(1.0)
