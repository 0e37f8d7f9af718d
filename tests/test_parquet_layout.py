"""The stored Parquet layout (`curation.storage`): row groups end at `ROW_GROUP_ROWS` rows or
before `ROW_GROUP_BYTES` bytes, so a reader that decodes a row group at a time holds a bounded
amount of text however long the documents are; a file streamed batch by batch has the bytes of
the whole table written at once."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curation import storage
from curation.storage import ROW_GROUP_BYTES, ROW_GROUP_ROWS, parquet_bytes, write_parquet_file


def documents(lengths: list[int]) -> pa.Table:
    rng = np.random.default_rng(len(lengths))
    letters = np.frombuffer(b"abcdefghij ", dtype=np.uint8)
    return pa.table({
        "doc_id": [f"doc-{i:06d}" for i in range(len(lengths))],
        "position": pa.array(range(len(lengths)), pa.int64()),
        "text": [bytes(letters[rng.integers(0, len(letters), n)]).decode() for n in lengths]})


def group_rows(data: bytes) -> list[int]:
    metadata = pq.ParquetFile(io.BytesIO(data)).metadata
    return [metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)]


def row_bytes(table: pa.Table) -> list[int]:
    """What a row weighs: its text and doc_id, and 8 bytes of position."""
    return [len(d.encode()) + len(t.encode()) + 8 for d, t in zip(
        table["doc_id"].to_pylist(), table["text"].to_pylist(), strict=True)]


def test_long_documents_cut_row_groups_by_bytes() -> None:
    table = documents([3 << 20] * 50)  # 150 MB: 16,384 rows of these would be 48 GB
    data = parquet_bytes(table)
    rows = group_rows(data)
    assert sum(rows) == 50 and len(rows) == 3
    sizes, start = row_bytes(table), 0
    for count in rows:
        assert sum(sizes[start:start + count]) <= ROW_GROUP_BYTES
        if start + count < len(sizes):  # the group took every row that fit
            assert sum(sizes[start:start + count + 1]) > ROW_GROUP_BYTES
        start += count
    assert pq.read_table(io.BytesIO(data)).equals(table)


def test_short_documents_keep_groups_of_row_group_rows() -> None:
    rows = group_rows(parquet_bytes(documents([20] * (ROW_GROUP_ROWS + 5))))
    assert rows == [ROW_GROUP_ROWS, 5]


@pytest.fixture
def small_groups(monkeypatch: pytest.MonkeyPatch) -> int:
    limit = 40_000
    monkeypatch.setattr(storage, "ROW_GROUP_BYTES", limit)
    return limit


def test_a_row_above_the_limit_is_a_group_alone(small_groups: int) -> None:
    table = documents([100, small_groups * 3, 100, 100])
    assert group_rows(parquet_bytes(table)) == [1, 1, 2]


@pytest.mark.parametrize("batch_rows", [1, 7, 64, 1000])
def test_a_streamed_file_has_the_bytes_of_the_whole_table(small_groups: int, batch_rows: int,
                                                         tmp_path) -> None:
    lengths = np.random.default_rng(batch_rows).integers(0, 9_000, 700).tolist()
    table = documents(lengths)
    whole = parquet_bytes(table)
    assert len(group_rows(whole)) > 50  # cut by bytes, not by rows
    batches = [*table.to_batches(max_chunksize=batch_rows),
               pa.RecordBatch.from_pylist([], table.schema)]
    path = tmp_path / "streamed.parquet"
    assert write_parquet_file(path, table.schema, batches) == table.num_rows
    assert path.read_bytes() == whole


def test_an_empty_table_streams_to_the_same_bytes(tmp_path) -> None:
    table = documents([])
    path = tmp_path / "empty.parquet"
    assert write_parquet_file(path, table.schema, []) == 0
    assert path.read_bytes() == parquet_bytes(table)
    assert pq.read_table(path).num_rows == 0
