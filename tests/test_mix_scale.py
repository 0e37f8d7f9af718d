"""The mix out of core (issue 20): a randomized synthetic store of a few tens of thousands of
documents (several snapshots and curated sources, duplicate groups within and across
partitions, several languages, an added verdict, two phases) gives the same decisions,
occurrences and shares under the smallest budget (DuckDB at its 64 MB floor, the duplicate
groups by DuckDB's hooking rounds instead of the in-memory union-find) as under a large one,
and on S3 (parts fed as Arrow tables) as on a local store; the quality cut, the groups and
the shares are checked against the rules directly."""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict

import duckdb
import pyarrow as pa
import pytest

from curation.components import in_memory
from curation.config import RecipeConfig
from curation.duck import MemoryBudget
from curation.mix import SELECTED, _exact, build_mix, gather_candidates, share_failures
from curation.partition import Manifest, PartitionLayout
from curation.storage import LocalStore

SNAPSHOTS = ("CC-MAIN-2024-10", "CC-MAIN-2024-18", "CC-MAIN-2024-22")
CURATED = ("ref", "books")
LANGUAGES = ("en", "fr", "de", None)
VERDICT = "toxicity"
CLUSTER_SCHEMA = pa.schema([("doc_id", pa.string()), ("cluster_id", pa.string())])


def _write(store: LocalStore, asset: str, partition: str, table: pa.Table, parts: int,
           **side: pa.Table) -> None:
    """`table` in `parts` parts (the mix reads part by part)."""
    layout = PartitionLayout(store, asset, partition)
    size = max(1, math.ceil(table.num_rows / parts))
    files = [layout.write_part(i, table.slice(i * size, size)) for i in range(parts)]
    tables = {name: [layout.write_table(name, 0, t)] for name, t in side.items()}
    layout.write_manifest(Manifest(asset, partition, "v1", files, tables))


def _clusters(rng: random.Random, ids: list[str], count: int, prefix: str) -> pa.Table:
    """`count` clusters of 2..5 random members of `ids` (a document may be in several)."""
    rows = []
    for index in range(count):
        for doc_id in rng.sample(ids, rng.randint(2, 5)):
            rows.append((doc_id, f"{prefix}{index}"))
    return pa.table({"doc_id": [d for d, _ in rows], "cluster_id": [c for _, c in rows]},
                    schema=CLUSTER_SCHEMA)


def synthetic_store(root: str, documents: int, seed: int = 0) -> LocalStore:
    """Every asset the mix reads, for `documents` random documents: three snapshots and two
    curated sources, each table in several parts, duplicate clusters in every cluster table
    (about a quarter of the documents in one), scores with ties, a few empty and contaminated
    documents, an added verdict (`toxicity`)."""
    rng = random.Random(seed)
    store = LocalStore(root)
    partitions = [*SNAPSHOTS, *(f"source:{name}" for name in CURATED)]
    every_id: list[str] = []
    for number, partition in enumerate(partitions):
        web = partition in SNAPSHOTS
        count = documents // len(partitions)
        ids = [f"{rng.getrandbits(40):010x}-{number}{i:06d}" for i in range(count)]
        rng.shuffle(ids)
        every_id += ids
        source = "web" if web else partition.removeprefix("source:")
        languages = [rng.choice(LANGUAGES) for _ in ids]
        sizes = [0 if rng.random() < 0.02 else rng.randint(20, 700) for _ in ids]
        parts = rng.randint(2, 4)
        _write(store, "documents", partition, pa.table({
            "doc_id": ids, "source": [source] * count,
            "url": [f"https://site{rng.randint(0, 50)}.org/{d}" for d in ids],
            "snapshot": pa.array([partition if web else None] * count, pa.string()),
            "licence": pa.array([None if web else "CC0-1.0"] * count, pa.string())}), parts)
        _write(store, "language", partition, pa.table({
            "doc_id": ids, "language": pa.array(languages, pa.string()),
            "keep": [rng.random() < 0.9 for _ in ids]}), parts)
        _write(store, "heuristics", partition, pa.table({
            "doc_id": ids, "keep": [rng.random() < 0.85 for _ in ids]}), parts)
        _write(store, "quality_scores", partition, pa.table({
            "doc_id": ids, "quality_score": [round(rng.random(), 2) for _ in ids]}), parts)
        _write(store, "decontaminated", partition, pa.table({
            "doc_id": ids, "contaminated": [rng.random() < 0.02 for _ in ids]}), parts)
        _write(store, VERDICT, partition, pa.table({
            "doc_id": ids, "keep": [rng.random() < 0.95 for _ in ids]}), parts)
        empty = [d for d, size in zip(ids, sizes, strict=True) if size == 0]
        _write(store, "scrubbed", partition, pa.table({
            "doc_id": ids, "text": ["é" * (size // 2) + "x" * (size % 2) for size in sizes]}),
            parts, decisions=pa.table({
                "doc_id": pa.array(empty, pa.string()),
                "reason": pa.array(["empty_after_edits"] * len(empty), pa.string())}))
        for index, asset in enumerate(("url_dedup", "exact_dedup", "dedup_clusters")):
            _write(store, asset, partition,
                   _clusters(rng, ids, count // 40, f"c{index}-"), 2)
    _write(store, "cross_dedup", "all", _clusters(rng, every_id, documents // 40, "x-"), 3)
    return store


def synthetic_recipe(seed: int = 3, cluster_policy: str = "earliest") -> RecipeConfig:
    return RecipeConfig.model_validate({
        "name": "synthetic", "snapshots": list(SNAPSHOTS), "sources": list(CURATED),
        "selection": {"languages": ["en", "fr", "de"], "drop_contaminated": True,
                      "quality_top_fraction": 0.7},
        "cluster_policy": cluster_policy,
        "phases": [
            {"name": "main", "fraction": 0.75,
             "weights": {"web": 0.6, "ref": 0.25, "books": 0.15}},
            {"name": "anneal", "fraction": 0.25, "weights": {"web": 0.5, "ref": 0.3,
                                                             "books": 0.2},
             "quality_top_fraction": 0.3}],
        "max_epochs": 3, "tokenizer": {"train_vocab_size": 256}, "seed": seed})


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> LocalStore:
    return synthetic_store(str(tmp_path_factory.mktemp("synthetic")), 30_000)


# DuckDB's floor (64 MB) and the duplicate groups by DuckDB's hooking rounds, not in memory
TINY = MemoryBudget(memory_gb=0.001)
LARGE = MemoryBudget(memory_gb=4)


@pytest.mark.parametrize("policy", ["earliest", "longest", "quality"])
def test_a_tiny_budget_gives_the_same_mix_as_a_large_one(store, policy) -> None:
    recipe = synthetic_recipe(cluster_policy=policy)
    results = []
    for budget in (TINY, LARGE):
        results.append(build_mix(store, recipe, curated_sources=CURATED, verdicts=(VERDICT,),
                                 budget=budget))
    tiny, large = results
    for name in ("occurrences", "decisions", "shares"):
        assert getattr(tiny, name).equals(getattr(large, name)), name
    assert tiny.funnel == large.funnel and tiny.total_tokens == large.total_tokens
    assert all(tiny.funnel[rule] > 0 for rule in ("language", "heuristics", "contaminated",
                                                  "empty_after_edits", VERDICT, "quality",
                                                  "duplicate"))
    assert share_failures(tiny.shares) == []


def test_the_quality_cut_groups_and_shares_follow_the_rules(store) -> None:
    recipe = synthetic_recipe()
    result = build_mix(store, recipe, curated_sources=CURATED, verdicts=(VERDICT,),
                       budget=TINY)
    candidates = gather_candidates(store, recipe.partition_keys(), CURATED,
                                   verdicts=(VERDICT,))
    facts = {row["doc_id"]: row for row in candidates.to_pylist()}
    sizes = Counter(row["group_id"] for row in facts.values())
    linked = sum(size for size in sizes.values() if size > 1)  # the components' nodes
    assert not in_memory(linked, TINY) and in_memory(linked, LARGE)
    decisions = {row["doc_id"]: row for row in result.decisions.to_pylist()}
    # quality: per language, the web representatives that reached the rule (one per duplicate
    # group: duplicate precedes quality), best scores first
    reached: dict[str | None, list[tuple[float, str]]] = defaultdict(list)
    for doc_id, row in decisions.items():
        if facts[doc_id]["source"] == "web" and row["rule"] in ("quality", SELECTED):
            reached[facts[doc_id]["language"]].append((-facts[doc_id]["quality_score"], doc_id))
    for language, ranked in reached.items():
        ranked.sort()
        quota = math.ceil(0.7 * len(ranked) - 1e-9)
        passed = {d for d, _ in ((d, s) for s, d in ranked[:quota])}
        assert {d for _, d in ranked if decisions[d]["rule"] != "quality"} == passed, language
    # one document per group; a duplicate names its group's representative, which is kept
    # unless the quality cut dropped it (and with it the group)
    kept_groups = [facts[d]["group_id"] for d, row in decisions.items() if row["kept"]]
    assert len(kept_groups) == len(set(kept_groups))
    for doc_id, row in decisions.items():
        if row["rule"] == "duplicate":
            representative = decisions[row["kept_doc_id"]]
            assert representative["kept"] or representative["rule"] == "quality"
            assert representative["rule"] in (SELECTED, "quality")
            assert facts[row["kept_doc_id"]]["group_id"] == facts[doc_id]["group_id"]
    # shares: what the occurrences hold, per phase and source
    tokens: dict[tuple[str, str], int] = defaultdict(int)
    for row in result.occurrences.to_pylist():
        assert decisions[row["doc_id"]]["tokens"] == row["est_tokens"]
        tokens[(row["phase"], row["source"])] += row["est_tokens"]
    for row in result.shares.to_pylist():
        assert row["achieved_tokens"] == tokens[(row["phase"], row["source"])]
        assert row["ran_out"] or abs(row["achieved_share"] - row["target_share"]) <= 0.01


def test_a_store_other_than_local_gives_the_same_mix(s3_endpoint, tmp_path) -> None:
    """On S3 the parts come in as Arrow tables, one at a time, instead of DuckDB reading the
    files: the same mix."""
    from test_catalog import _Client, upload

    from curation.storage import S3Store

    local = synthetic_store(str(tmp_path / "local"), 3_000, seed=5)
    factory = _Client(s3_endpoint)
    factory().create_bucket(Bucket="mix")
    s3 = S3Store("s3://mix/root", factory)
    upload(local, s3)
    recipe = synthetic_recipe(seed=11, cluster_policy="longest")
    there, here = (build_mix(store, recipe, curated_sources=CURATED, verdicts=(VERDICT,),
                             budget=TINY) for store in (s3, local))
    for name in ("occurrences", "decisions", "shares"):
        assert getattr(there, name).equals(getattr(here, name)), name
    assert here.occurrences.num_rows > 0


def test_a_fill_budget_sums_to_the_same_value_in_any_order_on_any_threads() -> None:
    """The repeats' fill budgets are sums of `tokens x fraction` doubles; summed as doubles over
    DuckDB's threads, their last bits depend on how the threads split the rows, which once gave
    one build an occurrence more than another of the same inputs."""
    rng = random.Random(11)
    rows = [(rng.randint(1, 5000), rng.random()) for _ in range(400_000)]
    sums = set()
    for threads, order in ((1, rows), (4, rows), (4, rows[::-1])):
        with duckdb.connect() as con:
            con.execute(f"SET threads = {threads}")
            con.register("due", pa.table({"tokens": [t for t, _ in order],
                                          "fraction": [f for _, f in order]}))
            sums.add(con.execute(f"SELECT sum({_exact('tokens * fraction')}) FROM due"
                                 ).fetchall()[0][0])
    assert len(sums) == 1
    assert math.isclose(float(sums.pop()), sum(t * f for t, f in rows), rel_tol=1e-9)
