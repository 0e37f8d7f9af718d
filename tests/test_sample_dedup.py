"""Dedup on the built-in sample, against the generator's truth file."""

from __future__ import annotations

import json

import pytest

from curation.partition import PartitionLayout
from curation.storage import LocalStore

WEB = ["SAMPLE-01", "SAMPLE-02"]


@pytest.fixture(scope="module")
def truth(sample_run) -> dict:
    lines = (sample_run.root / "sample/truth/pages.jsonl").read_text().splitlines()
    pages = [json.loads(line) for line in lines]
    by_id = {page["page_id"]: page for page in pages}
    store = LocalStore(str(sample_run.root))
    doc_of = {}
    for partition in WEB:
        table = PartitionLayout(store, "documents", partition).read_table(["doc_id", "url"])
        for doc_id, url in zip(table["doc_id"].to_pylist(), table["url"].to_pylist(),
                               strict=True):
            doc_of[(partition, url)] = doc_id
    return {"pages": pages, "by_id": by_id, "doc_of": doc_of, "store": store}


def _clusters(store, asset: str, partition: str) -> dict[str, str]:
    table = PartitionLayout(store, asset, partition).read_table(["doc_id", "cluster_id"])
    return dict(zip(table["doc_id"].to_pylist(), table["cluster_id"].to_pylist(), strict=True))


def _pairs(truth: dict, kind: str, same_snapshot: bool,
           skip: tuple[str, ...] = ()) -> list[tuple[str, str, str, str]]:
    """(copy doc, source doc, copy snapshot, source snapshot) for pages that reached documents."""
    found = []
    for page in truth["pages"]:
        if page["kind"] != kind or not page["source"] or page["subkind"] in skip:
            continue
        source = truth["by_id"][page["source"]]
        if (page["snapshot"] == source["snapshot"]) != same_snapshot:
            continue
        copy = truth["doc_of"].get((page["snapshot"], page["url"]))
        original = truth["doc_of"].get((source["snapshot"], source["url"]))
        if copy and original and copy != original:
            found.append((copy, original, page["snapshot"], source["snapshot"]))
    return found


def _same_cluster(clusters: dict[str, str], copy: str, original: str) -> bool:
    return clusters.get(copy) is not None and clusters.get(copy) == clusters.get(original)


def test_exact_copies_share_a_cluster_in_exact_and_near_dedup(truth) -> None:
    # A syndicated copy sits in another site's template, and the extractor keeps a line or two
    # of it: a near duplicate, not an exact one.
    exact = _pairs(truth, "duplicate", same_snapshot=True, skip=("syndicated",))
    assert len(exact) >= 3
    for copy, original, snapshot, _ in exact:
        assert _same_cluster(_clusters(truth["store"], "exact_dedup", snapshot), copy, original)
    for copy, original, snapshot, _ in _pairs(truth, "duplicate", same_snapshot=True):
        assert _same_cluster(_clusters(truth["store"], "dedup_clusters", snapshot), copy,
                             original)


def test_near_duplicates_are_clustered(truth) -> None:
    pairs = _pairs(truth, "near_duplicate", same_snapshot=True)
    assert len(pairs) >= 10
    found = sum(_same_cluster(_clusters(truth["store"], "dedup_clusters", snapshot), copy,
                              original) for copy, original, snapshot, _ in pairs)
    # Jaccard >= 0.8 gives a candidate with probability >= 0.92 at 14 x 8.
    assert found / len(pairs) >= 0.75


def test_cross_snapshot_copies_keep_the_earliest_snapshot(truth) -> None:
    pairs = _pairs(truth, "duplicate", same_snapshot=False)
    assert len(pairs) >= 10
    cross = PartitionLayout(truth["store"], "cross_dedup", "all").read_table(
        ["doc_id", "cluster_id", "kept_doc_id"])
    cluster = dict(zip(cross["doc_id"].to_pylist(), cross["cluster_id"].to_pylist(),
                       strict=True))
    kept = dict(zip(cross["doc_id"].to_pylist(), cross["kept_doc_id"].to_pylist(), strict=True))
    sample_01 = {doc for (partition, _), doc in truth["doc_of"].items()
                 if partition == "SAMPLE-01"}
    for copy, original, copy_snapshot, source_snapshot in pairs:
        assert cluster.get(copy) is not None and cluster[copy] == cluster.get(original)
        if {copy_snapshot, source_snapshot} == {"SAMPLE-01", "SAMPLE-02"}:
            assert kept[copy] in sample_01


def test_boilerplate_lines_become_edits_not_drops(truth) -> None:
    store = truth["store"]
    for partition in WEB:
        layout = PartitionLayout(store, "line_dedup", partition)
        edits = layout.read_table(name="edits")
        assert edits.num_rows > 100
        assert set(edits["kind"].to_pylist()) == {"boilerplate_line"}
        texts = PartitionLayout(store, "documents", partition).read_table(["doc_id", "text"])
        lines = {doc: text.splitlines() for doc, text in zip(
            texts["doc_id"].to_pylist(), texts["text"].to_pylist(), strict=True)}
        for row in edits.slice(0, 200).to_pylist():
            assert 0 <= row["line"] < len(lines[row["doc_id"]])
        decisions = layout.read_table(name="decisions")
        assert set(decisions["reason"].to_pylist()) <= {"empty_after_edits"}
