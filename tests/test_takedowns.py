"""Takedowns (`curation.takedowns`): the versioned list, its expansion through the cluster
tables, tombstones, the audit log and purge, on the hand-built store of `test_catalog.py`, on S3
(moto's server) and on the built-in sample."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from test_catalog import (  # the same hand-built store (moto's server: conftest)
    A1,
    A2,
    A3,
    A4,
    A5,
    B1,
    B2,
    B3,
    C1,
    _Client,
    build_store,
    copy_outputs,
    upload,
)

from curation.catalog import Catalog, refresh_catalog
from curation.partition import Manifest, PartitionLayout
from curation.storage import LocalStore, S3Store, Store, read_parquet
from curation.takedowns import (
    EMPTY_VERSION,
    TakedownRequest,
    add_takedowns,
    audit_log,
    cluster_members,
    current_takedowns,
    direct_matches,
    expand_takedowns,
    list_versions,
    load_tombstones,
    purge,
    record_audit,
    save_tombstones,
    timestamp,
    versions_holding,
)

WHEN = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    return build_store(tmp_path / "data")


def takedown(store: Store, *requests) -> object:
    return add_takedowns(store, [TakedownRequest(value, "test", kind) for kind, value in requests],
                         "legal@example", WHEN).takedowns


def test_the_list_is_versioned_by_content(tmp_path):
    store = LocalStore(str(tmp_path))
    empty = current_takedowns(store)
    assert (empty.number, empty.version, empty.entries) == (0, EMPTY_VERSION, ())
    first = add_takedowns(store, [
        TakedownRequest("http://WWW.Example.com/a/?utm_source=x#top", "copyright"),
        {"kind": "domain", "value": "WWW.Mirror.org.", "reason": "spam"}],
        "legal@example", WHEN)
    assert first.number == 1 and len(first.added) == 2
    url, domain = first.takedowns.entries
    assert (url.kind, url.canonical, url.value) == (
        "url", "https://www.example.com/a", "http://WWW.Example.com/a/?utm_source=x#top")
    assert (domain.kind, domain.canonical) == ("domain", "mirror.org")
    assert url.requested_by == "legal@example" and url.requested_at == "2024-05-01T12:00:00.000000Z"
    assert store.exists("takedowns/v000001.json")
    assert json.loads(store.read_bytes("takedowns/latest.json"))["version"] == first.version
    v1_bytes = store.read_bytes("takedowns/v000001.json")
    # The same things spelled differently: nothing new, no new version.
    again = add_takedowns(store, ["https://www.example.com/a", "mirror.org"], "someone",
                          WHEN + timedelta(days=1))
    assert again.added == () and again.number == 1 and again.audit_key is None
    second = add_takedowns(store, [TakedownRequest("bücher.de", "privacy", "domain")],
                           "dpo@example", WHEN + timedelta(days=2))
    assert second.number == 2 and second.takedowns.parent == first.version
    assert second.takedowns.entries[-1].canonical == "xn--bcher-kva.de"
    assert store.read_bytes("takedowns/v000001.json") == v1_bytes  # immutable
    assert [v.number for v in list_versions(store)] == [1, 2]
    assert current_takedowns(store) == second.takedowns
    # The id is a hash of what is taken down: order, reasons, people and times do not count.
    other = LocalStore(str(tmp_path / "other"))
    add_takedowns(other, [TakedownRequest("bücher.de", "x", "domain"), "mirror.org"], "a", WHEN)
    same = add_takedowns(other, ["https://www.example.com/a?utm_campaign=y"], "b",
                         "2030-01-01T00:00:00+02:00")
    assert same.version == second.version
    assert same.takedowns.entries[-1].requested_at == "2029-12-31T22:00:00.000000Z"
    log = audit_log(store)
    assert [(r["action"], r["who"]) for r in log] == [("add", "legal@example"),
                                                      ("add", "dpo@example")]
    assert log[0]["details"]["takedown_version"] == first.version
    with pytest.raises(ValueError):
        add_takedowns(store, [TakedownRequest("x", "r", "regex")], "a", WHEN)
    with pytest.raises(ValueError):
        add_takedowns(store, [TakedownRequest("   ", "r", "domain")], "a", WHEN)


def test_audit_records_are_one_object_each_and_deterministic(tmp_path):
    store = LocalStore(str(tmp_path))
    key = record_audit(store, "publish", "ops", WHEN, {"takedown_version": "abc"},
                       dataset_versions={"recipe-a": ["old", "new"]})
    assert key == record_audit(store, "publish", "ops", WHEN, {"takedown_version": "abc"},
                               dataset_versions={"recipe-a": ["old", "new"]})
    assert key.startswith("takedowns/audit/20240501T120000000000Z-publish-")
    [record] = audit_log(store)
    assert record["dataset_versions"] == {"recipe-a": ["old", "new"]}
    assert timestamp("2024-05-01T14:00:00+02:00") == "2024-05-01T12:00:00.000000Z"


@pytest.mark.parametrize(("requests", "expected"), [
    # A URL: its exact and canonical spellings, and the URL-duplicate cluster.
    ([("url", "https://www.example.com/a")], {A1, A2}),
    ([("url", "http://www.example.com/a?utm_source=z#frag")], {A1, A2}),
    # A domain and its subdomains; blog.example.com's exact copy at mirror.org and that copy's
    # near duplicate in the other partition come along.
    ([("domain", "example.com")], {A1, A2, A3, A4, B1, B3}),
    ([("domain", "mirror.org")], {A3, A4, B1}),
    ([("domain", "news.site")], {A3, A4, B1, B2}),
    ([("domain", "ample.com")], set()),  # a suffix is not a subdomain
    ([("url", "source://books/books-0.jsonl#0")], {C1}),
])
def test_expand_takedowns_adds_exact_and_near_copies(store, requests, expected):
    assert expand_takedowns(store, takedown(store, *requests)) == expected


def test_expansion_is_limited_to_the_partitions_given(store):
    takedowns = takedown(store, ("domain", "example.com"))
    assert direct_matches(store, takedowns, ["CC-B"]) == {B3}
    assert expand_takedowns(store, takedowns, ["CC-B"]) == {B3}
    assert expand_takedowns(store, takedowns, ["CC-A"]) == {A1, A2, A3, A4, B1}
    members = cluster_members(store, ["CC-A"])
    assert set(members["scope"].to_pylist()) == {"url_dedup/CC-A", "exact_dedup/CC-A",
                                                 "cross_dedup/all"}


def test_tombstones_filter_readers_and_show_in_the_catalog(store, tmp_path):
    takedowns = takedown(store, ("domain", "mirror.org"))
    expanded = expand_takedowns(store, takedowns)
    save_tombstones(store, takedowns, expanded)
    tombstones = load_tombstones(store)
    assert tombstones.version == takedowns.version and set(tombstones.doc_ids) == expanded
    assert tombstones.is_taken_down(A3) and not tombstones.is_taken_down(A1) and B1 in tombstones
    table = pa.table({"doc_id": [A1, A3, B2, B1, C1], "n": [1, 2, 3, 4, 5]})
    assert tombstones.filter(table).to_pydict() == {"doc_id": [A1, B2, C1], "n": [1, 3, 5]}
    refresh_catalog(store, tmp_path / "catalog.duckdb")
    with Catalog(tmp_path / "catalog.duckdb") as catalog:
        assert catalog.info["takedown_version"] == takedowns.version
        [location] = catalog.find_url("https://blog.example.com/post")
        assert location.taken_down and "taken down" in location.explain()
        assert not catalog.find_url("https://news.site/c")[0].taken_down
        assert catalog.query("SELECT kind, canonical FROM takedown_entries") == [
            {"kind": "domain", "canonical": "mirror.org"}]


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_purge_removes_exactly_those_rows(store):
    root = Path(store.root)
    before = _files(root)
    ids = {A3, A4, B1}
    report = purge(store, ids, who="ops", when=WHEN, dataset_versions=["v1"])
    after = _files(root)
    assert report.rows_removed == {
        "documents/CC-A/part-00000.parquet": 1, "documents/CC-A/part-00001.parquet": 1,
        "documents/CC-B/part-00000.parquet": 1,
        "scrubbed/CC-A/part-00000.parquet": 1, "scrubbed/CC-A/part-00001.parquet": 1,
        "scrubbed/CC-B/part-00000.parquet": 1,
        "samples/documents/CC-A.jsonl": 2, "samples/documents/CC-B.jsonl": 1}
    for key, removed in report.rows_removed.items():
        if key.endswith(".parquet"):  # every other row identical, in order
            old = pq.read_table(pa.BufferReader(before[key]))
            new = pq.read_table(pa.BufferReader(after[key]))
            keep = pc.invert(pc.is_in(old["doc_id"], pa.array(sorted(ids))))
            assert new.equals(old.filter(keep)) and old.num_rows - new.num_rows == removed
        else:
            old_lines = before[key].splitlines(keepends=True)
            assert after[key] == b"".join(line for line in old_lines
                                          if json.loads(line)["doc_id"] not in ids)
    rewritten = set(report.rows_removed) | set(report.manifests_updated) | set(
        report.markers_updated) | {report.audit_key}
    for key in before:  # nothing else changed
        if key not in rewritten:
            assert after[key] == before[key], key
    # Manifests and task markers describe the files as they are now.
    for asset, partition in [("documents", "CC-A"), ("documents", "CC-B"), ("scrubbed", "CC-B")]:
        layout = PartitionLayout(store, asset, partition)
        manifest = layout.complete_manifest()
        for index, part in enumerate(manifest.parts):
            data = store.read_bytes(part.key)
            assert (part.sha256, part.bytes) == (_sha(data), len(data))
            assert part.rows == read_parquet(store, part.key).num_rows
            assert layout.read_marker(index)["parts"]["part"]["sha256"] == part.sha256
        assert manifest.extra["purged"][-1]["data_version_before"] == \
            report.data_versions[f"{asset}/{partition}"][0]
    assert set(report.data_versions) == {"documents/CC-A", "documents/CC-B", "scrubbed/CC-A",
                                         "scrubbed/CC-B"}
    assert all(old != new for old, new in report.data_versions.values())
    rows = PartitionLayout(store, "documents", "CC-A").read_table(["doc_id"])["doc_id"]
    assert rows.to_pylist() == [A1, A2, A5]
    [record] = [r for r in audit_log(store) if r["action"] == "purge"]
    assert record["details"]["rows_removed"] == 9 and record["dataset_versions"] == ["v1"]
    # Nothing left to purge: a second run changes nothing.
    settled = _files(root)
    again = purge(store, ids)
    assert again.rows_removed == {} and _files(root) == settled
    assert Manifest.from_json(store.read_bytes("documents/CC-A/_manifest.json").decode()).rows == 3


def test_purge_deletes_old_dataset_versions_when_asked(store):
    assert versions_holding(store, {A5}) == ["v0"]
    assert versions_holding(store, {A1}) == ["v0", "v1"]
    kept = purge(store, {A1}, delete_old_versions=True, keep_versions={"v1"})
    assert kept.deleted_versions == ["v0"] and kept.kept_versions == ["v1"]
    assert not store.exists("shards/v0/manifest.json") and store.list("shards/v0") == []
    assert store.exists("shards/v1/manifest.json")
    untouched = purge(store, {B2})
    assert untouched.deleted_versions == [] and store.exists("shards/v1/spans.parquet")


def test_takedown_and_purge_on_s3(s3_endpoint, store):  # noqa: F811
    factory = _Client(s3_endpoint)
    factory().create_bucket(Bucket="takedowns")
    s3 = S3Store("s3://takedowns/root", factory)
    upload(store, s3)
    version = add_takedowns(s3, [TakedownRequest("mirror.org", "spam")], "ops", WHEN)
    expanded = expand_takedowns(s3, version.takedowns)
    assert expanded == {A3, A4, B1}
    report = purge(s3, expanded, delete_old_versions=True)
    assert report.total_rows_removed == 9 and report.deleted_versions == ["v1"]
    layout = PartitionLayout(s3, "documents", "CC-A")
    assert layout.read_table(["doc_id"])["doc_id"].to_pylist() == [A1, A2, A5]
    part = layout.complete_manifest().parts[0]
    assert part.sha256 == _sha(s3.read_bytes(part.key))
    assert not s3.exists("shards/v1/manifest.json") and s3.exists("shards/v0/manifest.json")


def test_sample_domain_takedown_expands_to_duplicates_and_purge(sample_run, tmp_path):
    root = tmp_path / "data"
    copy_outputs(sample_run.root, root)
    store = LocalStore(str(root))
    documents = {}
    for partition in ("SAMPLE-01", "SAMPLE-02", "source:code", "source:reference"):
        table = PartitionLayout(store, "documents", partition).read_table(
            ["doc_id", "url", "domain"])
        documents.update({row["doc_id"]: row | {"partition": partition}
                          for row in table.to_pylist()})
    members = cluster_members(store, ["SAMPLE-01", "SAMPLE-02", "source:code", "source:reference"])
    # A cluster whose members live on different domains: one domain's takedown must reach the
    # copies on the others.
    clusters: dict[tuple[str, str], set[str]] = {}
    for row in members.to_pylist():
        clusters.setdefault((row["scope"], row["cluster_id"]), set()).add(row["doc_id"])
    domain, copy = None, None
    for ids in sorted(clusters.values(), key=sorted):
        domains = {documents[d]["domain"] for d in ids}
        if len(domains) > 1 and None not in domains:
            first = min(ids)
            domain = documents[first]["domain"]
            copy = next(d for d in sorted(ids) if documents[d]["domain"] != domain)
            break
    assert domain is not None, "the sample has duplicates across domains"
    version = add_takedowns(store, [TakedownRequest(domain, "test", "domain")], "ops", WHEN)
    direct = direct_matches(store, version.takedowns)
    expanded = expand_takedowns(store, version.takedowns)
    assert direct == {d for d, row in documents.items() if row["domain"] == domain}
    assert direct < expanded and copy in expanded
    assert documents[copy]["domain"] != domain
    samples_before = {key: store.read_bytes(key) for key in store.list("samples")}
    report = purge(store, expanded)
    for partition in ("SAMPLE-01", "SAMPLE-02", "source:code", "source:reference"):
        expected = sum(1 for d in expanded if documents[d]["partition"] == partition)
        for asset in ("documents", "scrubbed"):
            layout = PartitionLayout(store, asset, partition)
            ids = layout.read_table(["doc_id"])["doc_id"].to_pylist()
            assert not set(ids) & expanded
            removed = sum(n for key, n in report.rows_removed.items()
                          if key.startswith(f"{asset}/{partition}/"))
            assert removed == expected
            assert len(ids) == sum(1 for row in documents.values()
                                   if row["partition"] == partition) - expected
    for key, data in samples_before.items():
        lines = [json.loads(line) for line in store.read_bytes(key).splitlines() if line.strip()]
        assert not {line["doc_id"] for line in lines} & expanded
        old = [json.loads(line) for line in data.splitlines() if line.strip()]
        assert len(old) - len(lines) == report.rows_removed.get(key, 0)
