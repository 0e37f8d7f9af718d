"""The memory budget of the global steps, and the DuckDB sessions that keep to it (no Dagster).

Every step that needs a whole partition or dataset at once (grouping, joining, sorting,
connected components, the mix, the shard order) runs in DuckDB over Parquet files or Arrow
tables, in a session whose `memory_limit` comes from the budget and whose database file and
spill files live in a fresh work folder (docs/scale.md). DuckDB spills what does not fit; the
step's memory is then bounded by the budget, not by its input.

The budget is run configuration, like the Ray address: `resources.compute.memory_gb` (or
`CORPUS_MEMORY_GB`), the spill folder `resources.compute.spill_directory` (or
`CORPUS_SPILL_DIR`, default: the system temporary folder). `use_budget` also exports both to
the environment, so worker processes (the local pool forks from the run's environment; Ray
workers get it through their runtime environment) work under the same budget.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from curation.partition import PartFile, PartitionLayout
from curation.storage import ROW_GROUP_ROWS, LocalStore, Store, read_parquet, write_parquet_file

MEMORY_ENV = "CORPUS_MEMORY_GB"
SPILL_ENV = "CORPUS_SPILL_DIR"
DEFAULT_MEMORY_GB = 2.0
DEFAULT_THREADS = 2
PROCESS_BASE_MB = 320
SCRATCH_IPC = pa.ipc.IpcWriteOptions(compression="lz4")
"""Scratch Arrow IPC streams (hash parts, exchange slices): lz4, as the Parquet they replaced
(uncompressed, the near duplicates' hash parts took 3.2x the disk at 10^7 documents)."""
MIN_DUCKDB_MB = 64
"""The least `memory_limit` a session gets (on one thread below 128 MB)."""
MIN_TASK_MEMORY_GB = 0.5
"""The least a resource setting may give one task: below it DuckDB sits at its 64 MB floor,
where a hash join over millions of rows can abort the process instead of spilling."""

TableSource = pa.Table | str | Path | Sequence[str | Path]
"""An Arrow table, or one or more Parquet files read lazily by DuckDB."""


class BudgetTooSmallError(MemoryError):
    """A global step could not finish inside the memory budget even by spilling."""


@dataclass(frozen=True)
class DuckDBSettings:
    """How much DuckDB may hold before it spills, with how many threads, and where it spills
    (None: the system temporary folder). Each session works in a fresh subfolder, removed
    after."""

    memory_limit: str = "2GB"
    threads: int = DEFAULT_THREADS
    temp_directory: str | None = None


@dataclass(frozen=True)
class MemoryBudget:
    """What one global step may hold in memory (`memory_gb`, DuckDB's share included) and
    where it spills."""

    memory_gb: float = DEFAULT_MEMORY_GB
    threads: int = DEFAULT_THREADS
    spill_directory: str | None = None

    def __post_init__(self) -> None:
        if self.memory_gb <= 0:
            raise ValueError(f"memory_gb must be positive, got {self.memory_gb}")

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gb * (1 << 30))

    def duckdb(self, share: float = 0.75) -> DuckDBSettings:
        """DuckDB's part of the budget: `share` of it, and never more than what is left after
        `PROCESS_BASE_MB` (the interpreter and the libraries loaded, about 120 MiB measured, plus
        one stored part and the step's Arrow batches); at least 64 MiB."""
        total = self.memory_gb * 1024
        megabytes = max(MIN_DUCKDB_MB, int(min(total * share, total - PROCESS_BASE_MB)))
        # Each DuckDB thread keeps its own hash-table and sort buffers: under about 128 MB, two
        # threads' buffers alone overflow the limit where one thread spills and finishes.
        threads = 1 if megabytes < 128 else self.threads
        return DuckDBSettings(f"{megabytes}MB", threads, self.spill_directory)


def current_budget() -> MemoryBudget:
    """The budget this process works under (`use_budget`, else the environment)."""
    memory = os.environ.get(MEMORY_ENV)
    return MemoryBudget(memory_gb=float(memory) if memory else DEFAULT_MEMORY_GB,
                        spill_directory=os.environ.get(SPILL_ENV) or None)


def spill_folder() -> str | None:
    """The current budget's spill folder, made if missing (a Ray node other than the
    driver's may not have it yet); None: the system temporary folder."""
    folder = current_budget().spill_directory
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
    return folder


def use_budget(memory_gb: float | None,
               spill_directory: str | None = None) -> dict[str, str]:
    """Make `memory_gb` and `spill_directory` the budget of this process and of the workers it
    starts from now on (None leaves that one as it is); a bad value changes nothing. Returns
    the budget it replaced, for `restore_budget`."""
    if memory_gb is not None:
        MemoryBudget(memory_gb=memory_gb)  # fails now on a bad value, not in a worker
    previous = budget_environment()
    for name, value in ((MEMORY_ENV, memory_gb), (SPILL_ENV, spill_directory)):
        if value is not None:
            os.environ[name] = str(value)
    return previous


def budget_environment() -> dict[str, str]:
    """The memory budget's variables as this process has them (those set): what a Ray worker
    needs to work under the same budget (a worker on another node never sees the driver's
    environment, so each task carries them), and what `restore_budget` puts back."""
    return {name: os.environ[name] for name in (MEMORY_ENV, SPILL_ENV) if name in os.environ}


def restore_budget(previous: dict[str, str]) -> None:
    """Make `previous` (a `budget_environment()`) the budget again: a variable it lacks is
    unset."""
    for name in (MEMORY_ENV, SPILL_ENV):
        if name in previous:
            os.environ[name] = previous[name]
        else:
            os.environ.pop(name, None)


def memory_limit_bytes(con: duckdb.DuckDBPyConnection) -> int:
    """The session's `memory_limit` in bytes (DuckDB reports it as text, '190.7 MiB')."""
    text = con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
    number, unit = text.split()
    return int(float(number) * _UNITS[unit])


_UNITS = {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def part_count(con: duckdb.DuckDBPyConnection, rows: int, row_bytes: float, share: float) -> int:
    """Hash parts (at least one) for `rows` rows of about `row_bytes` each, so that one part
    takes about `share` of the session's memory limit."""
    return max(1, math.ceil(rows * row_bytes / (share * memory_limit_bytes(con))))


def write_hash_parts(reader: Iterable[pa.RecordBatch], parts: int, folder: Path,
                     distinct: Sequence[str] | None = None) -> list[Path]:
    """Stream the batches of `reader` (a `part` column in 0..parts-1 among its columns) into
    one Arrow IPC stream per part under `folder` (loaded with `hash_part`); with `distinct`,
    each batch's distinct rows of those columns and `part` only (a star's centre, in many
    edges, is written once per batch). Python holds one batch, so a statement reading one part
    groups a share of the rows.

    Why IPC streams, not Parquet: a Parquet writer keeps every row group's metadata until it
    closes, and each batch adds a row group to every part, so the writers held parts x batches
    of it, which grows with the square of the input (peak RSS 1,101 MiB, against 528 as
    streams, at 207 parts x 1,136 batches: benchmarks/hash_parts.py). A stream keeps nothing
    of what it wrote."""
    writers: dict[int, pa.ipc.RecordBatchStreamWriter] = {}
    try:
        for batch in reader:
            rows = pa.Table.from_batches([batch])
            if distinct is not None:
                rows = rows.group_by([*distinct, "part"]).aggregate([])
            rows = rows.sort_by("part")
            bounds = np.searchsorted(rows.column("part").to_numpy(), np.arange(parts + 1))
            for index in np.flatnonzero(np.diff(bounds)):
                if index not in writers:
                    writers[index] = pa.ipc.new_stream(str(folder / f"part-{index}.arrows"),
                                                       rows.schema, options=SCRATCH_IPC)
                writers[index].write_table(rows.slice(bounds[index],
                                                      bounds[index + 1] - bounds[index]))
    finally:
        for writer in writers.values():
            writer.close()
    return [folder / f"part-{index}.arrows" for index in sorted(writers)]


def register_stream(con: duckdb.DuckDBPyConnection, name: str,
                    stream: pa.RecordBatchReader) -> None:
    """Temporary table `name` of the batches of `stream`, read by one statement: Python holds
    a batch, DuckDB the table within its limit (it spills a temporary table beyond it). A
    table of the session's database file cost 0.6 CPU s to write for 3M band rows, a temporary
    one 0.14; a view over memory-mapped Arrow was cheaper still, but its pages counted in the
    process's memory beside DuckDB's limit."""
    con.register("_incoming_stream", stream)
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM _incoming_stream")
    finally:
        con.unregister("_incoming_stream")


@contextmanager
def hash_part(con: duckdb.DuckDBPyConnection, name: str, path: Path) -> Iterator[str]:
    """The part at `path` (`write_hash_parts`) as temporary table `name` for the block
    (`register_stream`); dropped after."""
    with pa.OSFile(str(path)) as source:
        register_stream(con, name, pa.ipc.open_stream(source))
    try:
        yield name
    finally:
        con.execute(f"DROP TABLE IF EXISTS {name}")


def default_settings() -> DuckDBSettings:
    """DuckDB settings from the current budget."""
    return current_budget().duckdb()


def literal(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def ident(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


@contextmanager
def duckdb_session(settings: DuckDBSettings | None = None,
                   prefix: str = "duck-") -> Iterator[duckdb.DuckDBPyConnection]:
    """A DuckDB connection whose database file and spill files live in a temporary folder
    (removed after), under `settings` (default: the current budget's)."""
    settings = settings or default_settings()
    if settings.temp_directory:  # a Ray node other than the driver's may not have it yet
        Path(settings.temp_directory).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=prefix, dir=settings.temp_directory) as folder:
        con = duckdb.connect(str(Path(folder) / "work.duckdb"))
        try:
            con.execute(f"SET memory_limit = {literal(settings.memory_limit)}")
            con.execute(f"SET temp_directory = {literal(str(Path(folder) / 'spill'))}")
            con.execute(f"SET threads = {int(settings.threads)}")
            # Results are sorted explicitly where order matters; without this DuckDB may have to
            # buffer rows to keep scan order.
            con.execute("SET preserve_insertion_order = false")
            yield con
        except duckdb.OutOfMemoryException as error:
            raise BudgetTooSmallError(
                f"DuckDB needed more than its {settings.memory_limit} in one operator (a hash"
                f" table or sort run that cannot spill further): raise"
                f" resources.compute.memory_gb (or ${MEMORY_ENV}); at least 1 GB is advised"
                f" for partitions of millions of documents. {error}") from error
        finally:
            con.close()


class ResultFiles:
    """Local Parquet files a task writes from a session's results (in the spill folder),
    streamed: the caller hands them on (a task's `TaskOutput` deletes them once stored); on an
    error they are deleted here."""

    def __init__(self) -> None:
        self.paths: list[Path] = []

    def __enter__(self) -> ResultFiles:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is not None:
            self.remove()

    def remove(self) -> None:
        for path in self.paths:
            path.unlink(missing_ok=True)

    def write(self, con: duckdb.DuckDBPyConnection, query: str,
              schema: pa.Schema | None = None) -> Path:
        """`query`'s rows as a Parquet file with `parquet_bytes`' layout (`schema`, default the
        query's own)."""
        handle, name = tempfile.mkstemp(prefix="result-", suffix=".parquet",
                                        dir=current_budget().spill_directory)
        os.close(handle)
        path = Path(name)
        self.paths.append(path)
        reader = con.sql(query).to_arrow_reader(ROW_GROUP_ROWS)
        write_parquet_file(path, schema or reader.schema, reader)
        return path


def register(con: duckdb.DuckDBPyConnection, name: str, source: TableSource) -> list[str]:
    """Make `source` queryable as `name`; returns its column names."""
    if isinstance(source, pa.Table):
        con.register(name, source)
    else:
        paths = [source] if isinstance(source, str | Path) else list(source)
        files = ", ".join(literal(str(path)) for path in paths)
        con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_parquet([{files}])")
    return con.sql(f"SELECT * FROM {name} LIMIT 0").columns


def register_parts(con: duckdb.DuckDBPyConnection, name: str, store: Store, keys: Sequence[str],
                   columns: Sequence[str] | None = None,
                   schema: pa.Schema | None = None) -> list[str]:
    """Make the Parquet objects at `keys` queryable as `name` (only `columns`, when given).
    A local store's files are read lazily by a view; any other store's are copied part by part
    into a table of the session's database, which lives on disk: at most one part is in
    memory. Without keys, `schema` gives the empty relation its columns."""
    wanted = list(columns) if columns else None
    if not keys:
        if schema is None:
            raise ValueError(f"no parts for {name!r} and no schema to make it empty")
        empty = schema.empty_table()
        con.register(f"{name}_empty", empty.select(wanted) if wanted else empty)
        con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM {name}_empty")
    elif isinstance(store, LocalStore):
        select = ", ".join(ident(c) for c in wanted) if wanted else "*"
        files = ", ".join(literal(store.uri(key)) for key in keys)
        con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT {select}"
                    f" FROM read_parquet([{files}])")
    else:
        for position, key in enumerate(keys):
            con.register("incoming_part", read_parquet(store, key, wanted))
            verb = f"CREATE OR REPLACE TABLE {name} AS" if position == 0 else \
                f"INSERT INTO {name}"
            con.execute(f"{verb} SELECT * FROM incoming_part")
            con.unregister("incoming_part")
    return con.sql(f"SELECT * FROM {name} LIMIT 0").columns


def insert_parts(con: duckdb.DuckDBPyConnection, store: Store, target: str, label: str,
                  parts: Sequence[PartFile], first: int, read: Sequence[str],
                  select: str) -> int:
    """Appends (`label`, the part's number, `select`) of each stored Parquet part to `target`,
    one part at a time, numbering the parts from `first`; returns the next number. DuckDB
    reads a local part itself; another store's part comes in as one Arrow table of the `read`
    columns."""
    for number, part in enumerate(parts, first):
        if isinstance(store, LocalStore):
            source = f"read_parquet({literal(store.uri(part.key))})"
        else:
            con.register("_part", read_parquet(store, part.key, list(read)))
            source = "_part"
        con.execute(f"INSERT INTO {target} SELECT ?, ?, {select} FROM {source}",
                    [label, number])
        if source == "_part":
            con.unregister("_part")
    return first + len(parts)


def register_table(con: duckdb.DuckDBPyConnection, name: str, layout: PartitionLayout,
                   table: str = "part", columns: Sequence[str] | None = None,
                   schema: pa.Schema | None = None) -> list[str]:
    """`register_parts` over every part of a complete partition's `table`."""
    keys = [part.key for part in layout.complete_manifest().table_parts(table)]
    return register_parts(con, name, layout.store, keys, columns, schema)


def scalar(con: duckdb.DuckDBPyConnection, query: str, params: Sequence | None = None) -> int:
    """The first column of the first row of `query` as an int (0 for NULL)."""
    return int(con.execute(query, params or []).fetchall()[0][0] or 0)


def copy_to_parquet(con: duckdb.DuckDBPyConnection, query: str, path: str | Path,
                    row_group_size: int = 1 << 17) -> int:
    """COPY `query` to one zstd Parquet file under a temporary name, then rename (a file
    exists under its final name only when whole). Returns the number of rows."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    con.execute(f"COPY ({query}) TO {literal(str(temporary))}"
                f" (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {int(row_group_size)})")
    os.replace(temporary, path)
    return scalar(con, f"SELECT count(*) FROM read_parquet({literal(str(path))})")


def spilled_bytes(folder: str | Path) -> int:
    """Bytes under `folder` now (a session's spill and database files, for benchmarks)."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())
