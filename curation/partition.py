"""The per-asset, per-partition output layout and its completion rules (docs/architecture.md).

`{root}/{asset}/{partition}/part-NNNNN.parquet`, task markers under `_tasks/`, and `_manifest.json`
written last: a partition is complete only when its manifest exists. Task markers make a killed
run resumable: a task whose marker carries the current version is not redone. A partition written
under another version is cleared before new work starts.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from curation.storage import Store, file_sha256, parquet_bytes, read_parquet

# A run's lock on the partition it writes (`curation.tasks.PartitionLock`): clearing the
# partition for a new version keeps it.
LOCK_NAME = "_lock"


def _quote(partition: str) -> str:
    # `source:NAME` keys stay readable; ':' is legal in S3 keys and POSIX file names.
    return partition.replace("/", "_")


@dataclass(frozen=True)
class PartFile:
    key: str
    rows: int
    bytes: int
    sha256: str


@dataclass
class Manifest:
    asset: str
    partition: str
    version: str
    parts: list[PartFile]
    tables: dict[str, list[PartFile]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return sum(part.rows for part in self.parts)

    def table_parts(self, name: str) -> list[PartFile]:
        return self.parts if name == "part" else self.tables.get(name, [])

    @property
    def data_version(self) -> str:
        """Content hash of the partition: the hashes of all its parts, in order."""
        digest = hashlib.sha256()
        for part in self.parts:
            digest.update(part.sha256.encode())
        for name in sorted(self.tables):
            digest.update(name.encode())
            for part in self.tables[name]:
                digest.update(part.sha256.encode())
        return digest.hexdigest()[:16]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        raw = json.loads(text)
        raw["parts"] = [PartFile(**part) for part in raw["parts"]]
        raw["tables"] = {name: [PartFile(**part) for part in parts]
                         for name, parts in raw.get("tables", {}).items()}
        return cls(**raw)


@dataclass(frozen=True)
class PartitionLayout:
    """Keys of one asset partition in a store."""

    store: Store
    asset: str
    partition: str

    @property
    def prefix(self) -> str:
        return f"{self.asset}/{_quote(self.partition)}"

    @property
    def manifest_key(self) -> str:
        return f"{self.prefix}/_manifest.json"

    @property
    def scratch_prefix(self) -> str:
        """Where a run leaves objects its tasks hand each other (an exchange, per-part facts),
        removed when the run ends; never part of the output."""
        return f"{self.prefix}/_work"

    def part_key(self, index: int) -> str:
        return self.table_key("part", index)

    def table_key(self, name: str, index: int) -> str:
        """`part` and side tables live in the partition; `rejects` under `rejects/{partition}/`
        (docs/architecture.md), named by the asset that rejected."""
        if name == "rejects":
            return f"rejects/{_quote(self.partition)}/{self.asset}-{index:05d}.parquet"
        return f"{self.prefix}/{name}-{index:05d}.parquet"

    def marker_key(self, index: int) -> str:
        return f"{self.prefix}/_tasks/task-{index:05d}.json"

    def write_part(self, index: int, table: pa.Table | Path) -> PartFile:
        return self.write_table("part", index, table)

    def write_table(self, name: str, index: int, table: pa.Table | Path) -> PartFile:
        """`table`, or a local Parquet file (`write_parquet_file`, for tables larger than
        memory: uploaded by streaming, hashed a chunk at a time)."""
        key = self.table_key(name, index)
        if isinstance(table, Path):
            rows = pq.read_metadata(table).num_rows
            self.store.write_file(key, table)
            return PartFile(key, rows, table.stat().st_size, file_sha256(table))
        data = parquet_bytes(table)
        self.store.write_bytes(key, data)
        return PartFile(key, table.num_rows, len(data), hashlib.sha256(data).hexdigest())

    def write_marker(self, index: int, payload: dict[str, Any]) -> None:
        self.store.write_bytes(self.marker_key(index), json.dumps(payload, sort_keys=True).encode())

    def read_marker(self, index: int) -> dict[str, Any] | None:
        key = self.marker_key(index)
        if not self.store.exists(key):
            return None
        return json.loads(self.store.read_bytes(key))

    def prepare(self, version: str) -> None:
        """Clears the partition when anything in it was written under another version."""
        keys = self.store.list(self.prefix)
        markers = [key for key in keys if "/_tasks/" in key]
        stale = any(json.loads(self.store.read_bytes(key)).get("version") != version
                    for key in markers)
        manifest = self.read_manifest()
        if stale or (manifest is not None and manifest.version != version):
            for key in keys:  # the lock of the run clearing it stays
                if key.rsplit("/", 1)[-1] != LOCK_NAME:
                    self.store.delete(key)
            for key in self.store.list(f"rejects/{_quote(self.partition)}"):
                if key.rsplit("/", 1)[-1].startswith(f"{self.asset}-"):
                    self.store.delete(key)
        elif manifest is not None:
            # Complete under this version: drop the manifest so the partition reads as
            # incomplete until this run writes a new one last.
            self.store.delete(self.manifest_key)

    def write_manifest(self, manifest: Manifest) -> None:
        self.store.write_bytes(self.manifest_key, manifest.to_json().encode())

    def read_manifest(self) -> Manifest | None:
        if not self.store.exists(self.manifest_key):
            return None
        return Manifest.from_json(self.store.read_bytes(self.manifest_key).decode())

    def is_complete(self) -> bool:
        return self.store.exists(self.manifest_key)

    def complete_manifest(self) -> Manifest:
        manifest = self.read_manifest()
        if manifest is None:
            raise FileNotFoundError(
                f"{self.asset}[{self.partition}] is not complete: no {self.manifest_key}"
            )
        return manifest

    def read_part(self, index: int, name: str = "part",
                  columns: list[str] | None = None) -> pa.Table:
        part = self.complete_manifest().table_parts(name)[index]
        return read_parquet(self.store, part.key, columns)

    def read_table(self, columns: list[str] | None = None, name: str = "part") -> pa.Table:
        parts = self.complete_manifest().table_parts(name)
        tables = [read_parquet(self.store, part.key, columns) for part in parts]
        if not tables:
            raise FileNotFoundError(f"{self.asset}[{self.partition}] has no {name} table")
        return pa.concat_tables(tables)
