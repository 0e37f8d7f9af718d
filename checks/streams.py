"""Reading a partition's tables part by part for the checks, so that what a check holds is
bounded by one stored part (or a fixed-size batch), never by the partition."""

from collections.abc import Callable, Iterable, Iterator, Sequence

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from curation.duck import register_table, scalar
from curation.partition import PartitionLayout
from curation.storage import LocalStore, Store, read_parquet


def iter_parts(layout: PartitionLayout, columns: list[str] | None = None,
               name: str = "part") -> Iterator[pa.Table]:
    """The stored parts of the partition's table `name`, in order, one at a time. Raises
    FileNotFoundError at once when the table has no part (as `PartitionLayout.read_table`)."""
    parts = layout.complete_manifest().table_parts(name)
    if not parts:
        raise FileNotFoundError(f"{layout.asset}[{layout.partition}] has no {name} table")
    return (read_parquet(layout.store, part.key, columns) for part in parts)


def iter_column(layout: PartitionLayout, column: str, name: str = "part") -> Iterator[pa.Array]:
    """One column of the partition's table `name`, a part at a time."""
    return (chunk for table in iter_parts(layout, [column], name)
            for chunk in table[column].chunks)


def count_rows(layout: PartitionLayout, name: str, column: str = "doc_id") -> int:
    """The rows of the partition's table `name`, reading one small column a part at a time."""
    return sum(table.num_rows for table in iter_parts(layout, [column], name))


def parquet_metadata(store: Store, key: str) -> pq.FileMetaData:
    """The footer of the Parquet object at `key` (of a local file, only the footer is read)."""
    return pq.read_metadata(_source(store, key))


def _source(store: Store, key: str) -> str | pa.BufferReader:
    return store.uri(key) if isinstance(store, LocalStore) else \
        pa.BufferReader(store.read_bytes(key))


def parquet_batches(store: Store, key: str, columns: list[str],
                    rows: int = 1 << 16) -> Iterator[pa.Table]:
    """The Parquet object at `key`, `columns` only, in batches of at most `rows` rows read row
    group by row group (a local file is read lazily; another store's object comes in whole, as
    bytes)."""
    handle = pq.ParquetFile(_source(store, key))
    schema = handle.schema_arrow
    empty = True
    for batch in handle.iter_batches(batch_size=rows, columns=columns):
        empty = False
        yield pa.Table.from_batches([batch])
    if empty:
        yield schema.empty_table().select(columns)


class SequenceComparison:
    """Whether two streams of arrays hold the same values in the same order (as
    `pa.ChunkedArray.equals` on their concatenations), and how long each is; it holds one
    chunk of each stream at a time."""

    def __init__(self, left: Iterable[pa.Array], right: Iterable[pa.Array]) -> None:
        self.equal, self.left_rows, self.right_rows = True, 0, 0
        lefts, rights = iter(left), iter(right)
        a = b = None
        while True:
            a = a if a is not None and len(a) else self._next(lefts, "left_rows")
            b = b if b is not None and len(b) else self._next(rights, "right_rows")
            if a is None or b is None:
                break
            size = min(len(a), len(b))
            self.equal = self.equal and a.slice(0, size).equals(b.slice(0, size))
            a, b = a.slice(size), b.slice(size)
        # A longer stream is unequal; its rest is only counted.
        self.equal = self.equal and a is None and b is None
        for rest in (lefts, rights):
            for chunk in rest:
                self._count(chunk, "left_rows" if rest is lefts else "right_rows")

    def _count(self, chunk: pa.Array, side: str) -> None:
        setattr(self, side, getattr(self, side) + len(chunk))

    def _next(self, chunks: Iterator[pa.Array], side: str) -> pa.Array | None:
        for chunk in chunks:
            self._count(chunk, side)
            if len(chunk):
                return chunk
        return None


class Tally:
    """The doc_id chunks of a stream of parts, for a `SequenceComparison`, summing
    `measure` of each part as it passes (`total`, complete once the stream is read)."""

    def __init__(self, parts: Iterable[pa.Table], measure: Callable[[pa.Table], int]) -> None:
        self.parts, self.measure, self.total = parts, measure, 0

    def doc_ids(self) -> Iterator[pa.Array]:
        for table in self.parts:
            self.total += self.measure(table)
            yield from table["doc_id"].chunks


def register_stored(con: duckdb.DuckDBPyConnection, name: str, layout: PartitionLayout,
                    columns: list[str], table: str = "part") -> None:
    """The partition's table `table` (`columns` only) as the relation `name` of a DuckDB
    session, read part by part; FileNotFoundError when it has no part (as `iter_parts`)."""
    if not layout.complete_manifest().table_parts(table):
        raise FileNotFoundError(f"{layout.asset}[{layout.partition}] has no {table} table")
    register_table(con, name, layout, table, columns)


def count_absent(con: duckdb.DuckDBPyConnection, left: str, right: str,
                 column: str = "doc_id") -> int:
    """The rows of the relation `left` whose `column` (null included) no row of `right` holds:
    an anti-join, which DuckDB spills under the session's memory limit."""
    return scalar(con, f"SELECT count(*) FROM {left} l ANTI JOIN {right} r"
                       f" ON l.{column} IS NOT DISTINCT FROM r.{column}")


def rows_and_nulls(layout: PartitionLayout, column: str, name: str) -> tuple[int, int]:
    """The rows of the partition's table `name` and how many have no `column`, a part at a
    time."""
    rows = nulls = 0
    for table in iter_parts(layout, [column], name):
        rows, nulls = rows + table.num_rows, nulls + table[column].null_count
    return rows, nulls


def columns_with_nulls(store: Store, keys: Sequence[str]) -> set[str]:
    """The top-level columns with a null in any of the Parquet objects at `keys`, from their
    footers' statistics (a column chunk without statistics counts as holding none)."""
    found: set[str] = set()
    for key in keys:
        metadata = parquet_metadata(store, key)
        for group in range(metadata.num_row_groups):
            row_group = metadata.row_group(group)
            for index in range(row_group.num_columns):
                chunk = row_group.column(index)
                statistics = chunk.statistics
                if statistics is not None and statistics.has_null_count \
                        and statistics.null_count > 0:
                    found.add(chunk.path_in_schema.split(".", 1)[0])
    return found
