"""The partition dedup stages' grouping as map and reduce tasks over the exchange: for any
bucket count and worker count, the outputs are the bytes the single-session grouping gives
(exact keys, URLs with nulls, band buckets with hot-bucket capping, near-duplicate candidates
verified by signature or not, an empty partition)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curation.config import DedupSettings
from curation.dedup import key_clusters_sql, near_duplicate_clusters_sql
from curation.duck import (
    MEMORY_ENV,
    SPILL_ENV,
    ResultFiles,
    duckdb_session,
    register_parts,
    register_table,
)
from curation.graph import DEDUP_CLUSTERS, DOCUMENTS, EXACT_DEDUP, MINHASH_SIGNATURES, URL_DEDUP
from curation.minhash import SIGNATURE_COLUMN, signatures_table
from curation.partition import PartitionLayout
from curation.stages.base import DocumentsInput
from curation.stages.dedup import (
    _KEY_COLUMNS,
    FACTS_SCHEMA,
    KEYS_SCHEMA,
    OUTPUT_SCHEMA,
    ClusterWork,
    _decide,
    _part_facts,
    work_area,
)
from curation.storage import LocalStore
from curation.tasks import TaskOutput
from tests.test_dedup import BANDS, _write_partition

SETTINGS = DedupSettings(max_bucket_size=40)
PARITY = DedupSettings(max_bucket_size=40, near_dup_verification="none")
HOT = 7  # band_03's value for a fifth of the documents: a bucket over the cap
PERMUTATIONS = 112


def _signatures(ids: list[str], seed: int) -> np.ndarray:
    """Compact-signature material for verification: families whose members keep each row of
    their family's signature with a drawn probability (0.3 to 1: some pass the threshold, some
    not), a fifth of the documents sharing their first rows (a hot bucket in the first
    re-banded band), the rest random."""
    rng = np.random.default_rng(seed)
    sigs = rng.integers(0, 2**63, size=(len(ids), PERMUTATIONS), dtype=np.uint64)
    bases = rng.integers(0, 2**63, size=(max(1, len(ids) // 6), PERMUTATIONS), dtype=np.uint64)
    for i in range(len(ids)):
        if rng.random() < 0.5:
            keep = rng.random(PERMUTATIONS) < rng.uniform(0.3, 1.0)
            sigs[i, keep] = bases[rng.integers(len(bases)), keep]
        if rng.random() < 0.2:
            sigs[i, :SETTINGS.near_dup_rows] = HOT
    return sigs


def _partition(store: LocalStore, partition: str, documents: int, seed: int) -> None:
    """`documents` documents in four parts, doc_ids shuffled across them (so a cluster's
    smallest doc_id is in any part): shared URLs (a tenth without one), shared texts, sources
    and snapshots that make the ranking matter; and their band hashes: families sharing some
    bands, one hot value, some nulls."""
    rng = random.Random(seed)
    ids = [f"{partition}-{i:05d}" for i in range(documents)]
    rng.shuffle(ids)
    texts = [f"shared text {t} " + "word " * rng.randrange(30) for t in range(documents // 10)]
    rows = [{"doc_id": doc_id,
             "source": "web" if rng.random() < 0.9 else "books",
             "snapshot": rng.choice(["CC-MAIN-2023-06", "CC-MAIN-2024-10", None]),
             "url": None if rng.random() < 0.1 else
             f"https://Example.com/{rng.randrange(documents // 8) if rng.random() < 0.4 else i}",
             "text": rng.choice(texts) if rng.random() < 0.3 else f"own {i} {rng.random()}"}
            for i, doc_id in enumerate(ids)]
    table = pa.Table.from_pylist(rows)
    size = -(-documents // 4) if documents else 0
    parts = [table.slice(start, size) for start in range(0, documents, size)] if size else []
    _write_partition(store, DOCUMENTS, partition, parts)
    np_rng = np.random.default_rng(seed)
    bands: dict[str, list[int | None]] = {}
    family = [rng.randrange(documents // 5) if rng.random() < 0.4 else None for _ in ids]
    for number, band in enumerate(BANDS):
        unique = np_rng.integers(1 << 40, 2**63, size=documents)
        values: list[int | None] = [
            f if f is not None and rng.random() < 0.5 else int(u)
            for f, u in zip(family, unique, strict=True)]
        if number == 3:
            values = [HOT if rng.random() < 0.2 else v for v in values]
        if number == 5:
            values = [None if rng.random() < 0.05 else v for v in values]
        bands[band] = values
    signatures = pa.table({"doc_id": ids, **{b: pa.array(v, pa.uint64())
                                             for b, v in bands.items()}})
    compact = signatures_table(ids, np.zeros((len(ids), 0), np.uint64), _signatures(ids, seed))
    signatures = signatures.append_column(compact.schema.field(SIGNATURE_COLUMN),
                                          compact[SIGNATURE_COLUMN])
    half = documents // 2
    _write_partition(store, MINHASH_SIGNATURES, partition,
                     [signatures.slice(0, half), signatures.slice(half)] if documents else [])


def _single_session(store: LocalStore, stage: str, partition: str,
                    settings: DedupSettings) -> TaskOutput:
    """The stage as one DuckDB session grouping the whole partition (the oracle)."""
    key = _KEY_COLUMNS.get(stage)
    with work_area(store, PartitionLayout(store, stage, partition)) as work:
        files = _part_facts(store, work, [partition], [partition] if key else [], 0)
        with duckdb_session() as con, ResultFiles() as local:
            register_parts(con, "facts", store, files.facts, schema=FACTS_SCHEMA)
            if key is None:
                register_table(con, "signatures",
                               PartitionLayout(store, MINHASH_SIGNATURES, partition))
                clusters = near_duplicate_clusters_sql(
                    con, "signatures", "clusters", max_bucket_size=settings.max_bucket_size,
                    verification=settings.verification())
            else:
                register_parts(con, "keys", store, files.keys[partition], schema=KEYS_SCHEMA)
                clusters = key_clusters_sql(con, "keys", key, "clusters")
            return _decide(con, clusters, stage, local)


def _result(output: TaskOutput) -> tuple[bytes, bytes, dict]:
    tables = {name: Path(path).read_bytes() for name, path in output.tables.items()}
    for path in output.tables.values():
        Path(path).unlink()
    stats = output.stats.to_dict()
    stats["counts"].pop("exchange_buckets", None)  # the single session has no exchange
    return tables["part"], tables["decisions"], stats


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LocalStore:
    monkeypatch.setenv(MEMORY_ENV, "0.1")  # DuckDB at its 64 MB floor
    monkeypatch.setenv(SPILL_ENV, str(tmp_path / "spill"))
    (tmp_path / "spill").mkdir()
    store = LocalStore(str(tmp_path / "store"))
    _partition(store, "P", 3000, seed=1)
    _partition(store, "E", 0, seed=2)
    return store


@pytest.mark.parametrize(("stage", "settings"), [
    (URL_DEDUP, SETTINGS), (EXACT_DEDUP, SETTINGS), (DEDUP_CLUSTERS, SETTINGS),
    (DEDUP_CLUSTERS, PARITY)])
def test_any_bucket_and_worker_count_gives_the_single_sessions_bytes(
        store: LocalStore, stage: str, settings: DedupSettings) -> None:
    expected = _result(_single_session(store, stage, "P", settings))
    part, _, stats = expected
    assert len(part) > 0 and stats["rejects"], stage  # a real test: duplicates found
    if stage == DEDUP_CLUSTERS:
        assert stats["counts"]["hot_buckets"] >= 1 and stats["counts"]["capped_members"] > 0
        # Verification compares candidates and drops some; parity has none to compare.
        verified = settings.verification() is not None
        assert (stats["counts"]["candidate_pairs"] > stats["counts"]["clusters"]) == verified
    for buckets, workers in ((1, 0), (7, 0), (7, 2), (None, 0)):
        output = ClusterWork(DocumentsInput(store, "P"), stage, settings, workers, buckets)(0)
        if buckets:  # the grouping did run per bucket, every bucket holding some keys
            assert output.stats.counts["exchange_buckets"] == buckets
        assert _result(output) == expected, (buckets, workers)
        assert not store.list(f"{stage}/P/_work")


@pytest.mark.parametrize("stage", [URL_DEDUP, EXACT_DEDUP, DEDUP_CLUSTERS])
def test_an_empty_partition_gives_empty_outputs(store: LocalStore, stage: str) -> None:
    """(The single session could not group an empty signatures partition: no parts, no
    columns; the exchange has no bucket to reduce.)"""
    part, decisions, stats = _result(
        ClusterWork(DocumentsInput(store, "E"), stage, SETTINGS, 0, 3)(0))
    assert pq.read_table(pa.BufferReader(part)).schema == OUTPUT_SCHEMA
    assert pq.read_table(pa.BufferReader(part)).num_rows == 0
    assert pq.read_table(pa.BufferReader(decisions)).num_rows == 0
    assert stats["records_in"] == 0 and stats["counts"]["clusters"] == 0
    if stage != DEDUP_CLUSTERS:
        assert (part, decisions, stats) == _result(_single_session(store, stage, "E",
                                                                   SETTINGS))
