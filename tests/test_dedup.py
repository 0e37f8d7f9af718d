"""Dedup kernels: canonical URLs, exact and line hashes, boilerplate lines, clusters by key and
by LSH bands (hot-bucket cap, determinism), the kept member, and the cross-partition index."""

from __future__ import annotations

import hashlib
import random
import string
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curation import components, dedup
from curation.components import connected_components
from curation.config import DedupSettings
from curation.dedup import (
    CrossIndex,
    Ranking,
    choose_kept,
    cluster_by_key,
    cluster_near_duplicates,
    frequent_lines,
    line_hash_table,
    line_hashes,
    normalise_line,
    normalise_text,
    text_hash,
    url_hash,
)
from curation.duck import MEMORY_ENV, SPILL_ENV, DuckDBSettings, duckdb_session
from curation.graph import (
    ALL,
    CROSS_DEDUP,
    DEDUP_CLUSTERS,
    DOCUMENTS,
    EXACT_DEDUP,
    LINE_DEDUP,
    MINHASH_SIGNATURES,
    URL_DEDUP,
)
from curation.minhash import SIGNATURE_COLUMN, MinHashSettings, signatures, signatures_table
from curation.partition import Manifest, PartitionLayout
from curation.stages.base import DocumentsInput
from curation.stages.dedup import run_cross_dedup, run_partition_dedup
from curation.storage import LocalStore, parquet_bytes, write_parquet_file
from curation.text import split_text
from curation.urls import canonical_url

BANDS = [f"band_{b:02d}" for b in range(14)]

# --- canonical URLs -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("HTTP://Example.COM/Path", "https://example.com/Path"),  # path case is kept
        ("http://example.com/a", "https://example.com/a"),  # http and https are one scheme
        ("https://bücher.de/", "https://xn--bcher-kva.de/"),  # IDNA
        ("http://example.com:80/", "https://example.com/"),
        ("https://example.com:443/", "https://example.com/"),
        ("https://example.com:8080/", "https://example.com:8080/"),
        ("https://example.com/a#section", "https://example.com/a"),
        ("https://example.com/a?utm_source=x&UTM_Medium=y&b=2&fbclid=1&a=1", "https://example.com/a?a=1&b=2"),
        ("https://example.com/?gclid=1&mc_cid=2&mc_eid=3&msclkid=4&yclid=5&_ga=6&ref_src=7",
         "https://example.com/"),
        ("https://example.com/?b=2&a=3&a=1", "https://example.com/?a=1&a=3&b=2"),
        ("https://example.com/?a=1&&b=", "https://example.com/?a=1&b="),
        ("https://example.com/index.html", "https://example.com/"),
        ("https://example.com/news/INDEX.PHP", "https://example.com/news"),
        ("https://example.com/default.aspx?x=1", "https://example.com/?x=1"),
        ("https://example.com/a/", "https://example.com/a"),
        ("https://example.com", "https://example.com/"),
        ("https://example.com//a///b", "https://example.com/a/b"),
        ("https://example.com/a/./b/../c", "https://example.com/a/c"),
        ("https://example.com/%7euser/%2f%3a", "https://example.com/~user/%2F%3A"),
        ("https://example.com/café?q=thé", "https://example.com/caf%C3%A9?q=th%C3%A9"),
        ("https://example.com/caf%c3%a9", "https://example.com/caf%C3%A9"),
        ("https://user:secret@Example.com./a", "https://example.com/a"),
        ("https://example.com/a;jsessionid=0AB1?PHPSESSID=9&q=1", "https://example.com/a?q=1"),
        ("//example.com/a", "https://example.com/a"),
        ("http://[2001:DB8::1]:8080/x/", "https://[2001:db8::1]:8080/x"),
    ],
)
def test_canonical_url_rules(url: str, canonical: str) -> None:
    assert canonical_url(url) == canonical
    assert canonical_url(canonical) == canonical  # idempotent


@pytest.mark.parametrize(
    "garbage",
    ["", "not a url", "example.com/a", "mailto:someone@example.com", "ftp://Example.com/A",
     "http://[::1", "http://example.com:99999/", "http://example.com:port/", "http://",
     "https://" + "ü" * 70 + ".com/"],
)
def test_garbage_canonicalises_to_itself_stripped(garbage: str) -> None:
    assert canonical_url(f"  {garbage}\n") == garbage


def test_canonical_url_never_raises() -> None:
    rng = random.Random(7)
    alphabet = string.printable + "üé中%[]:@/?#&=."
    for _ in range(3000):
        body = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        result = canonical_url(rng.choice(["http://", "https://", "//", ""]) + body)
        assert isinstance(result, str)


# --- normalisation and exact duplicates ---------------------------------------------------------


def test_normalise_text_folds_case_width_punctuation_and_spaces() -> None:
    assert normalise_text("  Ｈｅｌｌｏ,\tWORLD!!  «Done»… ") == "hello world done"
    assert normalise_text("Price: $5 + 3") == "price $5 + 3"  # symbols and digits stay
    assert normalise_line("© 2019 Acme, Inc.") == normalise_line("© 2023 ACME Inc")
    assert normalise_line("© 2019 Acme, Inc.") == "© 0000 acme inc"


def test_text_hash_is_stable_unsigned_64_bit() -> None:
    digest = hashlib.blake2b(b"hello world", digest_size=8).digest()
    assert text_hash("Hello,   World!") == int.from_bytes(digest, "little")
    assert 0 <= text_hash("x") < 2**64


def test_exact_duplicate_clusters() -> None:
    texts = {
        "d4": "The same text.", "d2": "the SAME   text", "d9": "THE same text!!",
        "d1": "Another one", "d3": "another one.", "d5": "unique",
    }
    table = pa.table({
        "doc_id": list(texts),
        "text_hash": pa.array([text_hash(t) for t in texts.values()], pa.uint64()),
    })
    result = cluster_by_key(table, "text_hash")
    assert result.table.to_pylist() == [
        {"doc_id": "d1", "cluster_id": "d1", "cluster_size": 2},
        {"doc_id": "d2", "cluster_id": "d2", "cluster_size": 3},
        {"doc_id": "d3", "cluster_id": "d1", "cluster_size": 2},
        {"doc_id": "d4", "cluster_id": "d2", "cluster_size": 3},
        {"doc_id": "d9", "cluster_id": "d2", "cluster_size": 3},
    ]
    assert (result.stats.documents, result.stats.clusters, result.stats.buckets) == (5, 2, 2)
    reversed_rows = table.take(pa.array(range(table.num_rows - 1, -1, -1)))
    assert cluster_by_key(reversed_rows, "text_hash").table.equals(result.table)


def test_url_clusters_with_null_keys_ignored() -> None:
    urls = ["http://A.com/x/?utm_source=1", "https://a.com/x", None, None, "https://a.com/y"]
    table = pa.table({
        "doc_id": ["u1", "u2", "u3", "u4", "u5"],
        "url_hash": pa.array([url_hash(u) if u else None for u in urls], pa.uint64()),
    })
    rows = cluster_by_key(table, "url_hash").table.to_pylist()
    assert [(r["doc_id"], r["cluster_id"]) for r in rows] == [("u1", "u1"), ("u2", "u1")]


# --- boilerplate lines --------------------------------------------------------------------------


def test_line_hashes_skip_blank_lines_and_number_lines_like_splitlines() -> None:
    text = "First line\n\n  ...  \nCopyright 2021"
    assert line_hashes(text) == [
        (0, dedup.string_hash("first line")), (3, dedup.string_hash("copyright 0000"))
    ]


def test_frequent_lines_edits_and_empty_after_edits() -> None:
    footer, menu = "All rights reserved, Acme 2024.", "Home"
    texts = {
        "a": f"A real article about owls.\n{footer}\n{menu}",
        "b": f"{footer.upper()}\nAnother article about bats.\n{footer}",  # repeated in one doc
        "c": f"{menu}\nall rights reserved acme 2019",  # only boilerplate and a short line left
        "d": "Unrelated text here.",
        "e": f"{menu}\nYet another piece.",
    }
    table = line_hash_table(texts.keys(), texts.values())
    result = frequent_lines(table, max_documents=2, min_chars=5)
    assert result.frequent_lines == 1
    assert [(r["doc_id"], r["line"]) for r in result.edits.to_pylist()] == [
        ("a", 1), ("b", 0), ("b", 2), ("c", 1)
    ]
    assert result.documents.to_pylist() == [
        {"doc_id": "a", "lines_removed": 1, "empty_after_edits": False},
        {"doc_id": "b", "lines_removed": 2, "empty_after_edits": False},
        {"doc_id": "c", "lines_removed": 1, "empty_after_edits": True},
    ]
    # "Home" is in 3 documents but shorter than min_chars; with min_chars=1 it goes too.
    loose = frequent_lines(table, max_documents=2, min_chars=1)
    assert loose.frequent_lines == 2
    assert ("e", 0) in [(r["doc_id"], r["line"]) for r in loose.edits.to_pylist()]
    # Only more than max_documents distinct documents count.
    assert frequent_lines(table, max_documents=3, min_chars=5).edits.num_rows == 0


def test_frequent_lines_reads_parquet(tmp_path: Path) -> None:
    texts = [f"document {string.ascii_letters[i] * 3}\nshared footer line" for i in range(10)]
    table = line_hash_table([f"d{i}" for i in range(10)], texts)
    pq.write_table(table.slice(0, 7), tmp_path / "a.parquet")
    pq.write_table(table.slice(7), tmp_path / "b.parquet")
    files = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    assert frequent_lines(files, max_documents=6).edits.num_rows == 10


# --- near-duplicate clusters --------------------------------------------------------------------


def band_table(rows: dict[str, dict[str, int]], seed: int = 0) -> pa.Table:
    """`doc_id` and 14 bands: the given values, the rest unique random."""
    rng = np.random.default_rng(seed)
    columns = {"doc_id": list(rows)}
    for band in BANDS:
        unique = rng.integers(1 << 40, 2**63, size=len(rows))
        columns[band] = [r.get(band, int(u)) for r, u in zip(rows.values(), unique, strict=True)]
    schema = pa.schema([("doc_id", pa.string())] + [(b, pa.uint64()) for b in BANDS])
    return pa.table(columns, schema=schema)


def oracle(table: pa.Table, key_columns: list[str]) -> dict[str, str]:
    """doc_id -> smallest doc_id of its component (documents in components of size >= 2), by a
    plain union-find over shared (column, value) pairs."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    first: dict[tuple[str, int], str] = {}
    for row in table.to_pylist():
        for column in key_columns:
            if row.get(column) is None:
                continue
            other = first.setdefault((column, row[column]), row["doc_id"])
            a, b = sorted((find(other), find(row["doc_id"])))
            parent[b] = a
    groups: dict[str, list[str]] = defaultdict(list)
    for doc in parent:
        groups[find(doc)].append(doc)
    return {d: min(g) for g in groups.values() if len(g) > 1 for d in g}


def as_mapping(table: pa.Table) -> dict[str, str]:
    return dict(zip(table["doc_id"].to_pylist(), table["cluster_id"].to_pylist(), strict=True))


def test_clusters_known_components_and_hot_bucket() -> None:
    rows = {
        "a": {"band_00": 1}, "b": {"band_00": 1, "band_03": 7}, "c": {"band_03": 7},  # chain
        "d": {"band_13": 5}, "e": {"band_13": 5},
        "f": {"band_01": 9},  # alone
    }
    rows |= {f"h{i:02d}": {"band_05": 42} for i in range(30)}  # a hot bucket of 30
    rows["h29"]["band_06"] = 99
    rows["z"] = {"band_06": 99}  # linked to h29 whatever the cap keeps
    result = cluster_near_duplicates(band_table(rows), max_bucket_size=10)
    clusters = as_mapping(result.table)
    assert {d: clusters[d] for d in "abcde"} == {"a": "a", "b": "a", "c": "a", "d": "d", "e": "d"}
    assert "f" not in clusters
    assert clusters["z"] == clusters["h29"]  # through band_06, kept by the cap or not
    hot = [d for d in clusters if d.startswith("h") and d != "h29"]
    assert len({clusters[d] for d in hot}) == 1 and len(hot) in (9, 10)  # 10 kept, h29 maybe
    stats = result.stats
    assert (stats.hot_buckets, stats.capped_members) == (1, 20)
    sizes = {r["doc_id"]: r["cluster_size"] for r in result.table.to_pylist()}
    assert sizes["a"] == 3 and sizes["d"] == 2
    # Without the cap every hot member is in one cluster, as the oracle says.
    uncapped = cluster_near_duplicates(band_table(rows), max_bucket_size=10_000)
    assert as_mapping(uncapped.table) == oracle(band_table(rows), BANDS)
    assert uncapped.stats.hot_buckets == 0


def random_bands(documents: int, seed: int) -> pa.Table:
    """Bands drawn from small pools now and then, so documents chain into components."""
    rng = random.Random(seed)
    rows = {}
    for i in range(documents):
        rows[f"doc{i:05d}"] = {b: rng.randrange(60) for b in BANDS if rng.random() < 0.01}
    return band_table(rows, seed)


def test_clusters_match_oracle_and_ignore_input_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = random_bands(3000, seed=1)
    expected = cluster_near_duplicates(table).table
    assert as_mapping(expected) == oracle(table, BANDS)
    shuffled = table.take(pa.array(np.random.default_rng(3).permutation(table.num_rows)))
    pq.write_table(shuffled.slice(0, 1000), tmp_path / "a.parquet")
    pq.write_table(shuffled.slice(1000), tmp_path / "b.parquet")
    monkeypatch.setattr(components, "EDGE_BATCH", 17)  # many small union-find batches
    settings = dedup.DuckDBSettings(memory_limit="200MB", threads=1, temp_directory=str(tmp_path))
    again = cluster_near_duplicates([tmp_path / "b.parquet", tmp_path / "a.parquet"],
                                    settings=settings).table
    assert again.equals(expected)
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == []  # work folder cleaned


def test_hot_bucket_cap_is_deterministic() -> None:
    rows = {f"h{i:03d}": {"band_02": 3, "band_04": 8} for i in range(100)}
    table = band_table(rows)
    first = cluster_near_duplicates(table, max_bucket_size=20).table
    reversed_rows = table.take(pa.array(range(table.num_rows - 1, -1, -1)))
    assert cluster_near_duplicates(reversed_rows, max_bucket_size=20).table.equals(first)
    # Two bands sample different members, so more than one cap's worth stays clustered.
    assert 20 < first.num_rows < 100


def test_connected_components_in_batches_match_oracle() -> None:
    rng = np.random.default_rng(5)
    left, right = rng.integers(0, 2000, 1500), rng.integers(0, 2000, 1500)
    roots = connected_components(
        [(left[i : i + 100], right[i : i + 100]) for i in range(0, 1500, 100)], 2000
    )
    parent = list(range(2000))

    def find(x: int) -> int:
        while parent[x] != x:
            x = parent[x]
        return x

    for a, b in zip(left, right, strict=True):
        ra, rb = sorted((find(int(a)), find(int(b))))
        parent[rb] = ra
    assert roots.tolist() == [find(i) for i in range(2000)]


# --- the kept member ----------------------------------------------------------------------------


def members() -> pa.Table:
    return pa.table({
        "cluster_id": ["c1"] * 4 + ["c2"] * 3 + ["c3"] * 2,
        "doc_id": ["c1", "x1", "y1", "z1", "c2", "x2", "y2", "c3", "x3"],
        "source": ["web", "web", "books", "web", "web", "web", "web", "web", "web"],
        "snapshot": ["CC-MAIN-2024-10", "CC-MAIN-2023-50", None, "CC-MAIN-2023-50",
                     "CC-MAIN-2024-10", "CC-MAIN-2024-10", "CC-MAIN-2024-10",
                     "CC-MAIN-2023-06", "CC-MAIN-2023-06"],
        "text_chars": [900, 100, 10, 200, 100, 500, 300, 50, 50],
        "quality_score": [0.9, 0.1, 0.1, 0.2, 0.1, 0.2, 0.8, None, 0.3],
    })


def kept(table: pa.Table) -> dict[str, str]:
    return {r["cluster_id"]: r["kept_doc_id"] for r in table.to_pylist()}


def test_choose_kept_default_ranking() -> None:
    result = choose_kept(members())
    # c1: the curated copy beats longer web copies; c2: longest; c3: a tie, smallest doc_id.
    assert kept(result) == {"c1": "y1", "c2": "x2", "c3": "c3"}
    c1 = [r["doc_id"] for r in result.to_pylist() if r["cluster_id"] == "c1"]
    assert c1 == ["y1", "z1", "x1", "c1"]  # then the earliest snapshot, longest first
    assert result["rank"].to_pylist()[:4] == [1, 2, 3, 4]


def test_choose_kept_policies_and_snapshot_order() -> None:
    web_only = members().filter(pa.compute.not_equal(members()["source"], "books"))
    assert kept(choose_kept(web_only, Ranking("quality"))) == {"c1": "z1", "c2": "y2", "c3": "x3"}
    assert kept(choose_kept(web_only, Ranking("earliest"))) == {"c1": "x1", "c2": "c2", "c3": "c3"}
    ordered = Ranking("earliest", snapshot_order=("CC-MAIN-2024-10",))
    assert kept(choose_kept(web_only, ordered))["c1"] == "c1"
    shuffled = web_only.take(pa.array(np.random.default_rng(1).permutation(web_only.num_rows)))
    assert choose_kept(shuffled).equals(choose_kept(web_only))


# --- the cross-partition index ------------------------------------------------------------------


def partition_keys(seed: int, partitions: int = 3, documents: int = 900) -> dict[str, pa.Table]:
    """Keys of documents spread over partitions, with URL, text and band duplicates within
    and across them."""
    rng = random.Random(seed)
    rows = []
    for i in range(documents):
        row = {"doc_id": f"p{i % partitions}-{i:05d}"}
        row["url_hash"] = rng.randrange(150) if rng.random() < 0.2 else rng.getrandbits(63)
        row["text_hash"] = rng.randrange(100) if rng.random() < 0.1 else rng.getrandbits(63)
        if rng.random() < 0.05:
            row["url_hash"] = None  # a curated document has no URL
        for band in BANDS:
            row[band] = rng.randrange(80) if rng.random() < 0.01 else rng.getrandbits(63)
        rows.append(row)
    schema = pa.schema(
        [("doc_id", pa.string())] + [(c, pa.uint64()) for c in ["url_hash", "text_hash", *BANDS]]
    )
    table = pa.Table.from_pylist(rows, schema)
    return {
        f"p{p}": table.filter(pa.compute.starts_with(table["doc_id"], f"p{p}-"))
        for p in range(partitions)
    }


def file_digests(folder: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under `folder`: (mtime, sha256)."""
    files = [p for p in folder.rglob("*") if p.is_file()]
    return {
        str(p.relative_to(folder)): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).digest())
        for p in files
    }


def test_cross_index_incremental_equals_all_at_once(tmp_path: Path) -> None:
    parts = partition_keys(seed=11)
    everything = pa.concat_tables(parts.values())
    columns = ["url_hash", "text_hash", *BANDS]
    expected = oracle(everything, columns)
    assert len(set(expected.values())) > 10  # a real test: many clusters, across partitions

    index = CrossIndex(tmp_path / "one-by-one")
    before: dict[str, tuple[int, bytes]] = {}
    for name in ["p1", "p0", "p2"]:
        links = index.add_partition(name, parts[name])
        after = file_digests(tmp_path / "one-by-one")
        assert all(after[path] == digest for path, digest in before.items())  # nothing rewritten
        before = after
        assert set(links.column_names) == {"doc_id", "other_doc_id", "key_type"}
        assert all(d.startswith(name) for d in links["doc_id"].to_pylist())
        assert not any(d.startswith(name) for d in links["other_doc_id"].to_pylist())
        assert set(links["key_type"].to_pylist()) <= {"url", "text", "minhash"}
        if name == "p1":
            assert links.num_rows == 0  # nothing earlier to link to
    assert index.partitions() == ["p0", "p1", "p2"]
    incremental = index.clusters().table
    assert as_mapping(incremental) == expected

    at_once = CrossIndex(tmp_path / "at-once")
    at_once.add_partition("all", everything)
    assert at_once.clusters().table.equals(incremental)

    other_order = CrossIndex(tmp_path / "other-order")
    for name in ["p2", "p1", "p0"]:
        other_order.add_partition(name, parts[name])
    assert other_order.clusters().table.equals(incremental)


def test_links_across_partitions_are_the_same_joined_a_key_range_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 10^8 documents the join of a partition's keys with the earlier partitions' runs a
    range of keys at a time (`_key_ranges`); any number of ranges gives the same links."""
    parts = partition_keys(seed=17)
    whole = CrossIndex(tmp_path / "one-range")
    for name in ["p0", "p1", "p2"]:
        whole.add_partition(name, parts[name])
    monkeypatch.setattr(dedup, "KEY_RANGE_SHARE", 1e-6)  # a few hundred keys a range
    ranged = CrossIndex(tmp_path / "ranges")
    for name in ["p0", "p1", "p2"]:
        ranged.add_partition(name, parts[name])
    with duckdb_session() as con:
        rows = parts["p2"].num_rows
        assert len(dedup._key_ranges(con, rows)) > 5
    for one, many in zip(whole.links(), ranged.links(), strict=True):
        assert pq.read_table(one).equals(pq.read_table(many))
    assert pq.read_table(whole.links()[-1], filters=[("cross_partition", "=", True)]).num_rows
    assert ranged.clusters().table.equals(whole.clusters().table)


def test_components_in_duckdb_give_the_same_clusters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = random_bands(3000, seed=4)
    in_memory = cluster_near_duplicates(table)
    index = CrossIndex(tmp_path / "index")
    for name, part in partition_keys(seed=13).items():
        index.add_partition(name, part)
    cross = index.clusters()
    assert in_memory.stats.rounds == cross.stats.rounds == 0
    # A budget no node fits: components run as hooking rounds in DuckDB, under 64 MB.
    monkeypatch.setenv(MEMORY_ENV, "0.000001")
    settings = DuckDBSettings(memory_limit="64MB", threads=1, temp_directory=str(tmp_path))
    in_duckdb = cluster_near_duplicates(table, settings=settings)
    assert in_duckdb.table.equals(in_memory.table)
    assert in_duckdb.stats.rounds > 0
    assert {**vars(in_duckdb.stats), "rounds": 0} == vars(in_memory.stats)
    index.settings = settings
    assert index.clusters().table.equals(cross.table)
    assert index.clusters().stats.rounds > 0


def test_cross_index_add_is_idempotent_and_reads_parquet(tmp_path: Path) -> None:
    parts = partition_keys(seed=12, partitions=2, documents=300)
    pq.write_table(parts["p1"], tmp_path / "p1.parquet")
    index = CrossIndex(tmp_path / "index")
    index.add_partition("source:books", parts["p0"])
    links = index.add_partition("CC-MAIN-2024-10", tmp_path / "p1.parquet")
    digests = file_digests(tmp_path / "index")
    assert index.add_partition("CC-MAIN-2024-10", parts["p1"]).equals(links)
    assert file_digests(tmp_path / "index") == digests
    assert index.partitions() == ["CC-MAIN-2024-10", "source:books"]
    assert (tmp_path / "index" / "keys" / "text_hash" / "source%3Abooks.parquet").exists()


def test_cross_index_caps_hot_buckets_per_partition(tmp_path: Path) -> None:
    rows = {f"a{i:02d}": {"band_00": 5} for i in range(30)}
    index = CrossIndex(tmp_path, max_bucket_size=10)
    index.add_partition("a", band_table(rows, seed=1))
    assert pq.read_table(tmp_path / "keys" / "band_00" / "a.parquet").num_rows == 10
    alone = cluster_near_duplicates(band_table(rows, seed=1), max_bucket_size=10).table
    kept = alone["doc_id"].to_pylist()  # the 10 members the cap kept
    # A later member of the same bucket links once, to the smallest kept member.
    later = index.add_partition("b", band_table({"b0": {"band_00": 5}}, seed=2))
    assert later.to_pylist() == [{"doc_id": "b0", "other_doc_id": min(kept), "key_type": "minhash"}]
    assert index.clusters().table["doc_id"].to_pylist() == [*kept, "b0"]


# --- the stages: outputs streamed, the same bytes under any budget -----------------------------


def test_streamed_parquet_file_has_parquet_bytes_layout(tmp_path: Path) -> None:
    rows = 40_000  # three row groups
    table = pa.table({"doc_id": [f"d{i:06d}" for i in range(rows)],
                      "n": pa.array(np.arange(rows) % 7, pa.int64())})
    layout = PartitionLayout(LocalStore(str(tmp_path / "store")), "x", "p")
    for name, source in (("whole", table), ("empty", table.slice(0, 0))):
        path = tmp_path / f"{name}.parquet"
        batches = [*source.to_batches(max_chunksize=999), pa.RecordBatch.from_pylist(
            [], source.schema)]  # a trailing empty batch adds no row group
        assert write_parquet_file(path, source.schema, batches) == source.num_rows
        assert path.read_bytes() == parquet_bytes(source)
        streamed, direct = layout.write_table(name, 0, path), layout.write_table(name, 1, source)
        assert (streamed.rows, streamed.bytes, streamed.sha256) == \
            (direct.rows, direct.bytes, direct.sha256)
        assert layout.store.read_bytes(streamed.key) == parquet_bytes(source)


def _documents(partition: str, documents: int, seed: int) -> tuple[list[pa.Table], pa.Table]:
    """Three documents parts (URL, exact-text and boilerplate-line duplicates, some copied
    from partition `A`) and the partition's band hashes (a few shared values) with the texts'
    compact signatures (for the verified near-duplicate default)."""
    rng = random.Random(seed)
    pool = random.Random(0)
    texts = ["\n".join(f"line {pool.getrandbits(40)} of text {t}" for _ in range(4))
             for t in range(documents)]
    rows = []
    for i in range(documents):
        text = texts[rng.randrange(documents // 4)] if rng.random() < 0.2 else \
            f"own text {partition} {i} {rng.getrandbits(60)}"
        if rng.random() < 0.4:
            text += "\nCopyright Example Corporation, all rights reserved."
        if rng.random() < 0.03:
            text = "Copyright Example Corporation, all rights reserved."  # empty after edits
        url = f"https://example.com/{rng.randrange(300) if rng.random() < 0.2 else i}"
        rows.append({"doc_id": f"{partition}-{i:05d}", "source": "web", "snapshot": partition,
                     "url": url, "text": text})
    table = pa.Table.from_pylist(rows)
    parts = [table.slice(start, documents // 3 + 1) for start in
             range(0, documents, documents // 3 + 1)]
    bands = {row["doc_id"]: {b: rng.randrange(40) for b in BANDS if rng.random() < 0.02}
             for row in rows}
    sigs = signatures([split_text(row["text"]) for row in rows], MinHashSettings())
    compact = signatures_table(list(bands), np.zeros((len(rows), 0), np.uint64), sigs)
    return parts, band_table(bands, seed).append_column(
        compact.schema.field(SIGNATURE_COLUMN), compact[SIGNATURE_COLUMN])


def _write_partition(store: LocalStore, asset: str, partition: str,
                     parts: list[pa.Table]) -> None:
    layout = PartitionLayout(store, asset, partition)
    layout.write_manifest(Manifest(asset, partition, "v1", [
        layout.write_part(index, part) for index, part in enumerate(parts)]))


def _outputs(store: LocalStore, asset: str, partition: str) -> list[tuple[str, int, str]]:
    manifest = PartitionLayout(store, asset, partition).complete_manifest()
    parts = [*manifest.parts, *(p for name in sorted(manifest.tables)
                                for p in manifest.tables[name])]
    return [(part.key, part.rows, part.sha256) for part in parts]


def test_dedup_stages_write_the_same_bytes_under_a_tiny_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = DedupSettings(cross_near_duplicates=True, line_max_documents=20)
    stores, stats = {}, {}
    for budget, workers in (("2", 0), ("0.000001", 2)):
        monkeypatch.setenv(MEMORY_ENV, budget)  # tiny: components as rounds, DuckDB at 64 MB
        monkeypatch.setenv(SPILL_ENV, str(tmp_path / f"spill-{budget}"))
        (tmp_path / f"spill-{budget}").mkdir()
        store = stores[budget] = LocalStore(str(tmp_path / budget))
        for seed, partition in enumerate(["A", "B"]):
            parts, bands = _documents(partition, 600, seed)
            _write_partition(store, DOCUMENTS, partition, parts)
            _write_partition(store, MINHASH_SIGNATURES, partition, [bands])
            for stage in (URL_DEDUP, EXACT_DEDUP, DEDUP_CLUSTERS, LINE_DEDUP):
                result = run_partition_dedup(DocumentsInput(store, partition), stage, settings,
                                             {})
                stats[budget, stage, partition] = result.stats
                assert not store.list(f"{stage}/{partition}/_work")
        # Worker processes write the per-part facts (a pool start is slow: once here).
        stats[budget, CROSS_DEDUP] = run_cross_dedup(store, ["A", "B"], settings,
                                                     workers=workers).stats
        assert not store.list(f"{CROSS_DEDUP}/all/_work")
        assert list((tmp_path / f"spill-{budget}").iterdir()) == []  # local outputs removed
    small, tiny = stores.values()
    for stage in (URL_DEDUP, EXACT_DEDUP, DEDUP_CLUSTERS, LINE_DEDUP):
        for partition in ("A", "B"):
            assert _outputs(small, stage, partition) == _outputs(tiny, stage, partition)
            rows = PartitionLayout(small, stage, partition).complete_manifest().rows
            assert rows > 20, (stage, partition)  # a real test: duplicates found
    assert _outputs(small, CROSS_DEDUP, ALL) == _outputs(tiny, CROSS_DEDUP, ALL)
    cross = PartitionLayout(small, CROSS_DEDUP, ALL).read_table()
    assert {d[0] for d in cross["doc_id"].to_pylist()} == {"A", "B"}
    near, tiny_near = stats["2", DEDUP_CLUSTERS, "A"], stats["0.000001", DEDUP_CLUSTERS, "A"]
    assert near.counts["component_rounds"] == 0 < tiny_near.counts["component_rounds"]
    assert stats["0.000001", CROSS_DEDUP].counts["component_rounds"] > 0
    assert near.rejects == tiny_near.rejects and near.rejects["near_duplicate"] > 0
    edited = stats["2", LINE_DEDUP, "A"]
    assert edited.counts["lines_removed"] > 100 and edited.rejects["empty_after_edits"] > 0
