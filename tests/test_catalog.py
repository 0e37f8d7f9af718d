"""The lineage catalog (`curation.catalog`) on hand-built stores in the project's layout (real
Parquet and DuckDB files), on S3 (moto's server), and on the built-in sample."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import boto3
import duckdb
import pyarrow as pa
import pytest

import curation.columns as columns_module
from curation.catalog import Catalog, refresh_catalog
from curation.partition import Manifest, PartitionLayout
from curation.schema import DECISION_SCHEMA, DOCUMENT_SCHEMA, REJECT_SCHEMA, decisions_table
from curation.shards import SPAN_SCHEMA
from curation.storage import LocalStore, S3Store, Store, parquet_bytes
from tests.conftest import MOTO_CREDENTIALS

SEQ_LEN = 8
T0 = datetime(2024, 3, 1, tzinfo=UTC)


def write_partition(store: Store, asset: str, partition: str, tables: dict[str, list[pa.Table]],
                    version: str = "v1", markers: bool = True) -> Manifest:
    """Parts and side tables in the project's layout, task markers, then the manifest."""
    layout = PartitionLayout(store, asset, partition)
    written: dict[str, list] = {name: [layout.write_table(name, index, table)
                                       for index, table in enumerate(tables_)]
                                for name, tables_ in tables.items()}
    if markers:
        for index in range(max(len(t) for t in written.values())):
            layout.write_marker(index, {
                "version": version, "stats": {}, "sample_ids": [],
                "parts": {name: parts[index].__dict__ for name, parts in written.items()
                          if index < len(parts)}})
    parts = written.pop("part", [])
    manifest = Manifest(asset, partition, version, parts, written)
    layout.write_manifest(manifest)
    return manifest


def doc(doc_id: str, url: str, partition: str, text: str = "some text") -> dict:
    curated = partition.startswith("source:")
    return {"doc_id": doc_id, "source": partition.removeprefix("source:") if curated else "web",
            "url": url, "domain": None if curated else url.split("/")[2].removeprefix("www."),
            "snapshot": None if curated else partition,
            "warc_file": None if curated else f"/warcs/{partition}-0.warc.gz",
            "warc_offset": None if curated else 1000 + int(doc_id[-2:], 16),
            "fetched_at": None if curated else T0, "charset": "utf-8", "html_bytes": 100,
            "licence": "cc-by" if curated else None, "text": text}


def cluster_table(rows: list[tuple[str, str, str]]) -> pa.Table:
    """(doc_id, cluster_id, kept_doc_id) rows -> a cluster part."""
    sizes = {}
    for _, cluster, _ in rows:
        sizes[cluster] = sizes.get(cluster, 0) + 1
    return pa.table({"doc_id": [r[0] for r in rows], "cluster_id": [r[1] for r in rows],
                     "cluster_size": pa.array([sizes[r[1]] for r in rows], pa.int64()),
                     "kept_doc_id": [r[2] for r in rows],
                     "keep": [r[0] == r[2] for r in rows]})


def drops(stage: str, rows: list[tuple[str, str, float | None, str | None]]) -> pa.Table:
    return decisions_table([{"doc_id": d, "stage": stage, "verdict": "drop", "reason": reason,
                             "value": value, "kept_doc_id": kept}
                            for d, reason, value, kept in rows])


def spans_table(rows: list[tuple[int, int, int, int, str, int, str]]) -> pa.Table:
    columns = list(zip(*rows, strict=True))
    return pa.table({name: list(values) for name, values in zip(SPAN_SCHEMA.names, columns,
                                                                strict=True)},
                    schema=SPAN_SCHEMA)


def write_dataset(store: Store, version: str, spans: pa.Table, sequences: list[int]) -> None:
    """`shards/{version}/`: spans.parquet and a manifest with the fields the catalog reads."""
    store.write_bytes(f"shards/{version}/spans.parquet", parquet_bytes(spans))
    shards, first = [], 0
    for index, count in enumerate(sequences):
        shards.append({"name": f"shard-{index:05d}", "files": {}, "first_sequence": first,
                       "sequences": count, "tokens": count * SEQ_LEN, "padding_tokens": 0})
        first += count
    manifest = {"format": "corpus-shards/1", "version": version, "recipe_hash": "r",
                "pipeline_hash": "p", "inputs": {}, "seq_len": SEQ_LEN, "dtype": "uint16",
                "shards": shards, "spans": {"name": "spans.parquet", "rows": spans.num_rows},
                "totals": {"sequences": first, "tokens": first * SEQ_LEN}}
    store.write_bytes(f"shards/{version}/manifest.json", json.dumps(manifest).encode())


DOCS = {
    "CC-A": [("a1000000000000a1", "https://www.example.com/a"),
             ("a2000000000000a2", "https://www.example.com/a/?utm_source=news"),
             ("a3000000000000a3", "https://blog.example.com/post"),
             ("a4000000000000a4", "https://mirror.org/copy"),
             ("a5000000000000a5", "https://other.net/x")],
    "CC-B": [("b1000000000000b1", "https://news.site/b"),
             ("b2000000000000b2", "https://news.site/c"),
             ("b3000000000000b3", "https://example.com/zzz")],
    "source:books": [("c1000000000000c1", "source://books/books-0.jsonl#0")],
}
A1, A2, A3, A4, A5 = (d for d, _ in DOCS["CC-A"])
B1, B2, B3 = (d for d, _ in DOCS["CC-B"])
C1 = DOCS["source:books"][0][0]


def build_store(root: Path, *, mix: bool = True, shards: bool = True) -> LocalStore:
    """Three partitions; drops by heuristics, URL and exact duplicates within a partition, a
    cross-partition near duplicate, a reject, a mix with a selection drop, and two dataset
    versions (v0 old, v1 current) with spans."""
    store = LocalStore(str(root))
    for partition, rows in DOCS.items():
        docs = [doc(d, url, partition, text=f"text of {d}") for d, url in rows]
        halves = [docs[: (len(docs) + 1) // 2], docs[(len(docs) + 1) // 2:]]
        tables = {"part": [pa.Table.from_pylist(h, DOCUMENT_SCHEMA) for h in halves if h]}
        if partition == "CC-A":
            tables["rejects"] = [pa.Table.from_pylist([
                {"stage": "url_filter", "url": "https://spam.biz/x", "warc_file": "/w.gz",
                 "warc_offset": 5, "reason": "url_blocklist", "message": "spam.biz"}],
                REJECT_SCHEMA)]
        write_partition(store, "documents", partition, tables)
        texts = {"part": [pa.table({"doc_id": [d["doc_id"] for d in h],
                                    "text": [d["text"].upper() for d in h]}) for h in halves if h]}
        write_partition(store, "scrubbed", partition, texts)
        store.write_bytes(f"samples/documents/{partition}.jsonl", (
            "\n".join(json.dumps({"doc_id": d["doc_id"], "text": d["text"]}) for d in docs)
            + "\n").encode())
    write_partition(store, "heuristics", "CC-A", {
        "part": [pa.table({"doc_id": [A5], "keep": [False]})],
        "decisions": [drops("heuristics", [(A5, "gopher_quality.short_doc", 12.0, None)])]})
    write_partition(store, "heuristics", "CC-B", {
        "part": [pa.table({"doc_id": [B1], "keep": [True]})],
        "decisions": [DECISION_SCHEMA.empty_table()]})
    write_partition(store, "url_dedup", "CC-A", {
        "part": [cluster_table([(A1, A1, A1), (A2, A1, A1)])],
        "decisions": [drops("url_dedup", [(A2, "duplicate_url", 2.0, A1)])]})
    write_partition(store, "exact_dedup", "CC-A", {
        "part": [cluster_table([(A3, A3, A3), (A4, A3, A3)])],
        "decisions": [drops("exact_dedup", [(A4, "duplicate_text", 2.0, A3)])]})
    write_partition(store, "cross_dedup", "all", {
        "part": [cluster_table([(A3, A3, A3), (B1, A3, A3)])],
        "decisions": [drops("cross_dedup", [(B1, "cross_partition_duplicate", 2.0, A3)])]})
    # An incomplete partition (no manifest): never in the catalog.
    PartitionLayout(store, "heuristics", "CC-C").write_table(
        "decisions", 0, drops("heuristics", [("ffff000000000000", "x", 1.0, None)]))
    if mix:
        occurrences = pa.table({
            "doc_id": [A1, A3, B2, B2, C1], "partition": ["CC-A", "CC-A", "CC-B", "CC-B",
                                                          "source:books"],
            "source": ["web", "web", "web", "web", "books"],
            "licence": [None, None, None, None, "cc-by"], "phase": ["main"] * 5,
            "occurrence": pa.array([0, 0, 0, 1, 0], pa.int64()),
            "est_tokens": pa.array([10, 9, 5, 5, 9], pa.int64())})
        selection = pa.table({
            "doc_id": [A1, A2, A3, A4, A5, B1, B2, B3, C1],
            "recipe": ["r1"] * 9,
            "kept": [True, False, True, False, False, False, True, False, True],
            "rule": ["selected", "duplicate", "selected", "duplicate", "heuristics",
                     "duplicate", "selected", "quality_threshold", "selected"],
            "kept_doc_id": [None, A1, None, A3, None, A3, None, None, None]})
        write_partition(store, "mix", "r1", {"part": [occurrences], "decisions": [selection]})
    if shards:
        # v1: shard 0 = 3 sequences, shard 1 = 2 (the last ends with 2 padding tokens).
        write_dataset(store, "v1", spans_table([
            (0, 0, 0, 8, A1, 0, "main"), (0, 1, 0, 2, A1, 0, "main"),
            (0, 1, 2, 8, A3, 0, "main"), (0, 2, 0, 3, A3, 0, "main"),
            (0, 2, 3, 8, B2, 0, "main"),
            (1, 0, 0, 5, B2, 1, "main"), (1, 0, 5, 8, C1, 0, "main"),
            (1, 1, 0, 6, C1, 0, "main")]), [3, 2])
        write_dataset(store, "v0", spans_table([
            (0, 0, 0, 8, A1, 0, "main"), (0, 1, 0, 2, A1, 0, "main"),
            (0, 1, 2, 8, A5, 0, "main")]), [2])
        pointer = PartitionLayout(store, "shards", "r1")
        part = pointer.write_part(0, pa.table({"dataset_version": ["v1"],
                                               "prefix": ["shards/v1"]}))
        pointer.write_manifest(Manifest("shards", "r1", "v1", [part]))
    return store


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    return build_store(tmp_path / "data")


def refreshed(store: Store, tmp_path: Path, **kwargs) -> Catalog:
    refresh_catalog(store, tmp_path / "catalog.duckdb", **kwargs)
    return Catalog(tmp_path / "catalog.duckdb")


def test_refresh_creates_views_over_parquet_and_lookup_tables(store, tmp_path):
    summary = refresh_catalog(store, tmp_path / "catalog.duckdb")
    assert summary.mode == "views" and summary.lookups
    assert summary.rows["documents"] == 9
    assert summary.rows["decisions"] == 4  # the incomplete CC-C partition is not read
    assert summary.rows["selections"] == 9 and summary.rows["occurrences"] == 5
    assert summary.rows["spans"] == 11 and summary.dataset_versions == ["v0", "v1"]
    assert summary.rows["rejects"] == 1 and summary.rows["clusters"] == 6
    assert summary.empty == []
    con = duckdb.connect(str(tmp_path / "catalog.duckdb"), read_only=True)
    views = {row[0] for row in con.execute("SELECT view_name FROM duckdb_views() "
                                           "WHERE NOT internal").fetchall()}
    assert {"documents", "decisions", "selections", "spans", "clusters", "rejects",
            "occurrences"} <= views
    tables = {row[0] for row in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert {"lookup_documents", "lookup_spans", "lookup_decisions"} <= tables
    columns = [row[0] for row in con.execute("DESCRIBE documents").fetchall()]
    assert "text" not in columns and "canonical_url" in columns
    for name in tables:  # no text copied anywhere
        assert "text" not in [r[0] for r in con.execute(f"DESCRIBE {name}").fetchall()]
    assert con.execute("SELECT canonical_url FROM documents WHERE doc_id = ?",
                       [A2]).fetchall() == [("https://www.example.com/a",)]
    assert con.execute("SELECT dataset_version, recipe, current FROM dataset_versions "
                       "ORDER BY 1").fetchall() == [("v0", None, False), ("v1", "r1", True)]
    assert con.execute("SELECT DISTINCT dataset_version FROM selections").fetchall() == [("v1",)]
    con.close()


def test_find_url_exact_canonical_and_domain(store, tmp_path):
    with refreshed(store, tmp_path) as catalog:
        location, copy = catalog.find_url("https://www.example.com/a")
        assert (location.doc_id, location.match) == (A1, "url")
        assert (copy.doc_id, copy.match) == (A2, "canonical_url")  # the same canonical URL
        assert location.status == "in_dataset"
        assert location.dataset_versions == ["v0", "v1"]
        v1 = [s for s in location.spans if s.dataset_version == "v1"]
        assert [(s.shard, s.sequence, s.start, s.end, s.shard_token_start, s.shard_token_end)
                for s in v1] == [(0, 0, 0, 8, 0, 8), (0, 1, 0, 2, 8, 10)]
        assert v1[0].recipe == "r1"
        # Another spelling of the same page finds both copies (canonical URL).
        found = {loc.doc_id for loc in catalog.find_url("http://WWW.example.com/a?utm_medium=x")}
        assert found == {A1, A2}
        # A domain matches itself and its subdomains, not other domains.
        domain = {loc.doc_id for loc in catalog.find_url("example.com")}
        assert domain == {A1, A2, A3, B3}
        assert {loc.doc_id for loc in catalog.find_url("blog.example.com")} == {A3}
        assert catalog.find_url("https://nowhere.example/") == []
        [curated] = catalog.find_url("source://books/books-0.jsonl#0")
        assert curated.doc_id == C1 and curated.source == "books" and curated.licence == "cc-by"


def test_find_url_says_why_a_document_was_left_out(store, tmp_path):
    with refreshed(store, tmp_path) as catalog:
        [dup] = [loc for loc in catalog.find_url("https://www.example.com/a/?utm_source=news")
                 if loc.doc_id == A2]
        assert dup.doc_id == A2 and dup.status == "excluded" and not dup.spans
        [decision] = dup.decisions
        assert (decision.stage, decision.reason, decision.kept_doc_id) == (
            "url_dedup", "duplicate_url", A1)
        [selection] = dup.selections
        assert (selection.recipe, selection.dataset_version, selection.kept) == ("r1", "v1",
                                                                                 False)
        [bad] = catalog.find_url("https://other.net/x")
        assert bad.status == "excluded" and bad.dataset_versions == ["v0"]  # in the old version
        assert [d.reason for d in bad.decisions] == ["gopher_quality.short_doc"]
        assert catalog.why_not(A5, "v1") == ["heuristics: gopher_quality.short_doc",
                                             "mix[r1]: heuristics"]
        [selected_out] = catalog.find_url("https://example.com/zzz")
        assert selected_out.decisions == () and selected_out.selections[0].rule == \
            "quality_threshold"
        assert "not selected by quality_threshold" in selected_out.explain()
        [copy] = catalog.find_url("https://news.site/b")
        assert copy.decisions[0].stage == "cross_dedup" and copy.decisions[0].partition == "all"
        [reject] = catalog.find_url("http://spam.biz/x")
        assert reject.status == "rejected" and reject.doc_id is None
        assert reject.decisions[0].reason == "url_blocklist" and reject.partition == "CC-A"


def test_at_token_by_offset_or_sequence_and_position(store, tmp_path):
    with refreshed(store, tmp_path) as catalog:
        token = catalog.at_token("v1", 0, 9)  # sequence 1, position 1: A1's 10th token
        assert (token.sequence, token.position, token.padding) == (1, 1, False)
        assert token.document.doc_id == A1 and token.token_in_occurrence == 9
        assert token.document.warc_file == "/warcs/CC-A-0.warc.gz"
        assert token.document.snapshot == "CC-A" and token.document.url.endswith("/a")
        assert set(token.passed) == {"cross_dedup", "exact_dedup", "heuristics", "url_dedup"}
        assert token.flagged == ()
        same = catalog.at_token("v1", "shard-00000", sequence=1, position=1)
        assert same.document.doc_id == A1 and same.shard_offset == 9
        b2 = catalog.at_token("v1", 1, 2)
        assert b2.document.doc_id == B2 and b2.span.occurrence == 1 and b2.token_in_occurrence == 2
        c1 = catalog.at_token("v1", 1, 8 + 3)  # C1's second piece: 3 tokens before + 3
        assert c1.document.doc_id == C1 and c1.token_in_occurrence == 6
        assert c1.passed == ("cross_dedup",)  # the only stage with decisions for its partition
        pad = catalog.at_token("v1", 1, 15)
        assert pad.padding and pad.document is None
        old = catalog.at_token("v0", 0, 12)
        assert old.document.doc_id == A5 and [d.stage for d in old.flagged] == ["heuristics"]
        with pytest.raises(ValueError):
            catalog.at_token("v1", 1, 16)  # shard 1 has 2 sequences of 8
        with pytest.raises(KeyError):
            catalog.at_token("v9", 0, 0)


def test_missing_mix_and_shards_give_empty_relations(tmp_path):
    store = build_store(tmp_path / "data", mix=False, shards=False)
    summary = refresh_catalog(store, tmp_path / "catalog.duckdb")
    assert set(summary.empty) == {"occurrences", "selections", "spans"}
    with Catalog(tmp_path / "catalog.duckdb") as catalog:
        columns = [r["column_name"] for r in catalog.query("DESCRIBE selections")]
        assert columns == ["recipe", "dataset_version", "mix_version", "doc_id", "partition",
                           "recipe_id", "kept", "rule", "kept_doc_id"]
        columns = [r["column_name"] for r in catalog.query("DESCRIBE spans")]
        assert columns[:4] == ["dataset_version", "recipe", "current", "seq_len"]
        assert "shard_token_start" in columns
        location = catalog.find_url("https://www.example.com/a")[0]
        assert location.status == "not_in_dataset" and location.spans == ()


def test_refresh_reuses_canonical_urls_and_sees_new_partitions(store, tmp_path):
    first = refresh_catalog(store, tmp_path / "catalog.duckdb")
    assert sorted(first.canonical_computed) == ["CC-A", "CC-B", "source:books"]
    write_partition(store, "documents", "CC-D", {"part": [pa.Table.from_pylist(
        [doc("d1000000000000d1", "https://new.example.com/d", "CC-D")], DOCUMENT_SCHEMA)]})
    reader = Catalog(tmp_path / "catalog.duckdb")  # open across the refresh
    second = refresh_catalog(store, tmp_path / "catalog.duckdb")
    assert sorted(second.canonical_reused) == ["CC-A", "CC-B", "source:books"]
    assert second.canonical_computed == ["CC-D"]
    with Catalog(tmp_path / "catalog.duckdb") as catalog:
        assert [loc.doc_id for loc in catalog.find_url("https://new.example.com/d/")] == [
            "d1000000000000d1"]
        assert len(catalog.find_url("https://www.example.com/a")) == 2
    # The reader opened before keeps answering from the catalog it opened (a replaced file).
    assert reader.find_url("https://new.example.com/d/") == []
    assert len(reader.find_url("https://www.example.com/a")) == 2
    reader.close()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".building")]


def test_without_lookup_tables_the_answers_are_the_same(store, tmp_path):
    with refreshed(store, tmp_path) as catalog:
        fast = [loc.explain() for loc in catalog.find_url("example.com")]
        token = catalog.at_token("v1", 0, 20)
    (tmp_path / "slow").mkdir()
    with refreshed(store, tmp_path / "slow", lookups=False) as catalog:
        assert catalog.info["lookups"] == "false"
        assert sorted(loc.explain() for loc in catalog.find_url("example.com")) == sorted(fast)
        assert catalog.at_token("v1", 0, 20) == token


# --- S3 ----------------------------------------------------------------------------------------

CREDENTIALS = MOTO_CREDENTIALS




class _Client:
    """A picklable boto3 client factory for moto's server."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint

    def __call__(self):
        return boto3.client("s3", endpoint_url=self.endpoint, **CREDENTIALS)


def upload(local: LocalStore, s3: S3Store) -> None:
    for path in sorted(Path(local.root).rglob("*")):
        if path.is_file():
            s3.write_bytes(str(path.relative_to(local.root)), path.read_bytes())


@pytest.mark.parametrize("through", ["pyarrow.fs", "store"])
def test_s3_root_materialises_metadata_tables(s3_endpoint, store, tmp_path, through,
                                              monkeypatch):
    factory = _Client(s3_endpoint)
    bucket = f"catalog-{through.replace('.', '-')}"
    factory().create_bucket(Bucket=bucket)
    s3 = S3Store(f"s3://{bucket}/root", factory)
    upload(store, s3)
    with refreshed(store, tmp_path) as catalog:
        expected = sorted(loc.explain() for loc in catalog.find_url("example.com"))
        token = catalog.at_token("v1", 1, 11)
    if through == "store":  # no pyarrow filesystem: whole objects through the Store

        def no_filesystem(store):
            raise RuntimeError("no pyarrow filesystem")

        monkeypatch.setattr(columns_module, "s3_filesystem", no_filesystem)
    else:  # the filesystem made from the boto3 client reads the bucket
        filesystem = columns_module.s3_filesystem(s3)
        assert filesystem.get_file_info(f"{bucket}/root/documents/CC-A/_manifest.json").size
    summary = refresh_catalog(s3, tmp_path / "s3.duckdb")
    assert summary.mode == "tables" and summary.rows["documents"] == 9
    assert summary.rows["spans"] == 11 and summary.dataset_versions == ["v0", "v1"]
    with Catalog(tmp_path / "s3.duckdb") as catalog:
        assert catalog.info["mode"] == "tables"
        assert sorted(loc.explain() for loc in catalog.find_url("example.com")) == expected
        assert catalog.at_token("v1", 1, 11) == token
        views = {r["view_name"] for r in catalog.query(
            "SELECT view_name FROM duckdb_views() WHERE NOT internal")}
        assert "documents" not in views  # a table: DuckDB reads no s3:// path
        assert "text" not in [r["column_name"] for r in catalog.query("DESCRIBE documents")]


# --- the built-in sample ------------------------------------------------------------------------


def copy_outputs(source: Path, target: Path) -> None:
    """The sample run's outputs (not its generated inputs under `sample/`), so a test may change
    them without touching the session's run."""
    shutil.copytree(source, target, ignore=lambda folder, names: (
        ["sample"] if Path(folder) == Path(source) else []))


def test_sample_catalog_finds_urls_and_why_documents_were_dropped(sample_run, tmp_path):
    root = tmp_path / "data"
    copy_outputs(sample_run.root, root)
    store = LocalStore(str(root))
    summary = refresh_catalog(store, tmp_path / "catalog.duckdb")
    assert summary.rows["documents"] > 100 and summary.rows["decisions"] > 0
    assert summary.partitions["documents"] == 4  # 2 snapshots, 2 sources
    with Catalog(tmp_path / "catalog.duckdb") as catalog:
        kept = catalog.query("SELECT d.doc_id, d.url FROM documents d WHERE d.source = 'web' AND "
                             "d.doc_id NOT IN (SELECT doc_id FROM decisions) ORDER BY d.doc_id "
                             "LIMIT 1")[0]
        [location] = [loc for loc in catalog.find_url(kept["url"])
                      if loc.doc_id == kept["doc_id"]]
        assert location.snapshot in ("SAMPLE-01", "SAMPLE-02") and location.warc_offset >= 0
        assert location.decisions == ()
        if summary.dataset_versions:  # the mix and shards assets ran: trace tokens both ways
            selected = catalog.query("SELECT s.doc_id, d.url FROM selections s JOIN documents d "
                                     "USING (doc_id) WHERE s.kept ORDER BY s.doc_id LIMIT 1")[0]
            [held] = [loc for loc in catalog.find_url(selected["url"])
                      if loc.doc_id == selected["doc_id"]]
            assert held.status == "in_dataset" and held.selections[0].kept
            span = held.spans[0]
            token = catalog.at_token(span.dataset_version, span.shard, span.shard_token_start)
            assert token.document.doc_id == held.doc_id and not token.padding
            assert token.document.url == selected["url"]
            left_out = catalog.query(
                "SELECT s.doc_id, s.rule, d.url FROM selections s JOIN documents d "
                "USING (doc_id) WHERE NOT s.kept ORDER BY s.doc_id LIMIT 1")[0]
            [out] = [loc for loc in catalog.find_url(left_out["url"])
                     if loc.doc_id == left_out["doc_id"]]
            assert out.status == "excluded" and not out.spans
            assert out.selections[0].rule == left_out["rule"]
        dropped = catalog.query("SELECT d.doc_id, d.url, x.stage, x.reason FROM decisions x "
                                "JOIN documents d USING (doc_id) WHERE x.stage = 'heuristics' "
                                "ORDER BY d.doc_id LIMIT 1")[0]
        [why] = [loc for loc in catalog.find_url(dropped["url"])
                 if loc.doc_id == dropped["doc_id"]]
        assert why.status == "excluded" and not why.spans
        assert (dropped["stage"], dropped["reason"]) in {(d.stage, d.reason)
                                                          for d in why.decisions}
        reject = catalog.query("SELECT url, reason FROM rejects WHERE url LIKE 'http%' "
                               "ORDER BY url LIMIT 1")[0]
        found = catalog.find_url(reject["url"])
        assert any(loc.status == "rejected" and loc.decisions[0].reason == reject["reason"]
                   for loc in found)
