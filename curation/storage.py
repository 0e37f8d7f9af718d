"""One storage code path for a local folder and an S3 prefix.

Objects appear under their final names only when whole: locally a temporary name then a rename,
on S3 a single PUT. Stores are picklable so worker processes (or Ray tasks) write their own parts.
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

S3ClientFactory = Callable[[], Any]


class Store(Protocol):
    """Key-value access to the storage root; keys are '/'-separated relative paths."""

    root: str

    def uri(self, key: str) -> str: ...
    def exists(self, key: str) -> bool: ...
    def read_bytes(self, key: str) -> bytes: ...
    def write_bytes(self, key: str, data: bytes) -> None: ...
    def list(self, prefix: str) -> list[str]: ...
    def delete(self, key: str) -> None: ...
    def delete_prefix(self, prefix: str) -> int: ...


@dataclass
class LocalStore:
    root: str

    def __post_init__(self) -> None:
        self.root = str(Path(self.root).resolve())

    def _path(self, key: str) -> Path:
        return Path(self.root) / key

    def uri(self, key: str) -> str:
        return str(self._path(key))

    def exists(self, key: str) -> bool:
        return self._path(key).exists()

    def read_bytes(self, key: str) -> bytes:
        return self._path(key).read_bytes()

    def write_bytes(self, key: str, data: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def list(self, prefix: str) -> list[str]:
        base = self._path(prefix)
        if not base.is_dir():
            return []
        root = Path(self.root)
        return sorted(
            str(path.relative_to(root))
            for path in base.rglob("*")
            if path.is_file() and not path.name.startswith(".")
        )

    def delete_prefix(self, prefix: str) -> int:
        base = self._path(prefix)
        if not base.exists():
            return 0
        count = sum(1 for path in base.rglob("*") if path.is_file())
        shutil.rmtree(base)
        return count


@dataclass
class S3Store:
    """Objects under `s3://bucket/prefix`; the client comes from a picklable factory (for example
    dagster-aws's `S3Resource.get_client`) so each worker process makes its own."""

    root: str
    client_factory: S3ClientFactory
    _client: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.bucket, self.prefix = split_s3_uri(self.root.rstrip("/"))

    def __getstate__(self) -> dict[str, Any]:
        return {"root": self.root, "client_factory": self.client_factory}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.root, self.client_factory, self._client = state["root"], state["client_factory"], None
        self.__post_init__()

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self.client_factory()
        return self._client

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._key(key)}"

    def exists(self, key: str) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(key))
        except self.client.exceptions.ClientError as error:
            if error.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
                return False
            raise
        return True

    def read_bytes(self, key: str) -> bytes:
        return self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"].read()

    def write_bytes(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._key(key))

    def list(self, prefix: str) -> list[str]:
        start = len(self.prefix) + 1 if self.prefix else 0
        return sorted(
            entry["key"][start:]
            for entry in list_s3_objects(self.client, self.bucket, self._key(prefix) + "/")
        )

    def delete_prefix(self, prefix: str) -> int:
        keys = [self._key(key) for key in self.list(prefix)]
        for begin in range(0, len(keys), 1000):
            chunk = [{"Key": key} for key in keys[begin : begin + 1000]]
            self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": chunk})
        return len(keys)


def split_s3_uri(uri: str) -> tuple[str, str]:
    if not uri.startswith("s3://"):
        raise ValueError(f"{uri!r} is not an s3:// URI")
    bucket, _, prefix = uri[5:].partition("/")
    if not bucket:
        raise ValueError(f"{uri!r} names no bucket")
    return bucket, prefix.strip("/")


def list_s3_objects(client: Any, bucket: str, prefix: str) -> Iterator[dict[str, Any]]:
    """Every object under a prefix, with key, size and ETag."""
    paginator = client.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
        for entry in page.get("Contents", []):
            yield {"key": entry["Key"], "size": entry["Size"], "etag": entry["ETag"].strip('"')}


def open_store(root: str, s3_client_factory: S3ClientFactory | None = None) -> Store:
    """A store for a local folder or an `s3://bucket/prefix` root."""
    if root.startswith("s3://"):
        if s3_client_factory is None:
            raise ValueError(f"storage root {root} is on S3 but no S3 client was configured")
        return S3Store(root, s3_client_factory)
    return LocalStore(root)


# --- Parquet ---------------------------------------------------------------------------------


def parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd", row_group_size=16_384)
    return sink.getvalue()


def read_parquet(store: Store, key: str) -> pa.Table:
    return pq.read_table(pa.BufferReader(store.read_bytes(key)))


# --- reading inputs (WARC files, listings, source files) -------------------------------------


@dataclass(frozen=True)
class InputReader:
    """Reads input files by location: a local path, `s3://` (through the same client factory as
    the store) or `https://`. Picklable, for worker processes."""

    s3_client_factory: S3ClientFactory | None = None

    def s3_client(self) -> Any:
        if self.s3_client_factory is None:
            raise ValueError("an s3:// input was given but no S3 client is configured")
        return self.s3_client_factory()

    def read_bytes(self, location: str) -> bytes:
        if location.startswith("s3://"):
            bucket, key = split_s3_uri(location)
            return self.s3_client().get_object(Bucket=bucket, Key=key)["Body"].read()
        if location.startswith(("http://", "https://")):
            import urllib.request

            with urllib.request.urlopen(location, timeout=60) as response:  # noqa: S310
                return response.read()
        return Path(location).read_bytes()

    @contextmanager
    def local_copy(self, location: str) -> Iterator[Path]:
        """A local path for the input: itself when local, else a temporary download (a WARC
        reader needs to seek to resynchronise after a corrupt record)."""
        if "://" not in location:
            yield Path(location)
            return
        with tempfile.TemporaryDirectory(prefix="corpus-input-") as folder:
            path = Path(folder) / Path(location).name
            if location.startswith("s3://"):
                bucket, key = split_s3_uri(location)
                self.s3_client().download_file(bucket, key, str(path))
            else:
                path.write_bytes(self.read_bytes(location))
            yield path
