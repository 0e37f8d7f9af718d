"""Reading what the stages left in a store without its text: Parquet columns of store keys, the
keys of complete partitions and the dataset versions' manifests. The lineage catalog
(`curation.catalog`) and the takedown expansion (`curation.takedowns`) both read this way; no
Dagster here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from curation.graph import SHARDS
from curation.storage import LocalStore, S3Store, Store, read_parquet


def s3_filesystem(store: S3Store) -> Any:
    """A `pyarrow.fs.S3FileSystem` with the credentials, region and endpoint of the store's
    boto3 client (so Parquet column projection fetches metadata columns only)."""
    from pyarrow import fs as pafs

    client = store.client
    credentials = client._request_signer._credentials.get_frozen_credentials()
    endpoint = client.meta.endpoint_url or ""
    options: dict[str, Any] = {
        "access_key": credentials.access_key, "secret_key": credentials.secret_key,
        "session_token": credentials.token, "region": client.meta.region_name or "us-east-1"}
    if endpoint and "amazonaws.com" not in endpoint:
        scheme, _, rest = endpoint.partition("://")
        options |= {"endpoint_override": rest or scheme,
                    "scheme": scheme if rest else "https"}
    return pafs.S3FileSystem(**options)


class ColumnReader:
    """Parquet columns of store keys: local paths, a pyarrow filesystem (only those columns
    travel), or whole objects through the store when no filesystem can be made."""

    def __init__(self, store: Store, filesystem: Any = None) -> None:
        self.store = store
        self.filesystem = filesystem
        if filesystem is None and isinstance(store, S3Store):
            try:
                self.filesystem = s3_filesystem(store)
            except Exception:  # noqa: BLE001 - no usable credentials: read through the store
                self.filesystem = None

    @property
    def local(self) -> bool:
        return isinstance(self.store, LocalStore)

    def path(self, key: str) -> str:
        """The key as a local path, or as `bucket/key` for the pyarrow filesystem."""
        if self.local:
            return self.store.uri(key)
        assert isinstance(self.store, S3Store)
        return f"{self.store.bucket}/{self.store._key(key)}"

    def names(self, key: str) -> list[str]:
        if self.local:
            return pq.read_schema(self.path(key)).names
        if self.filesystem is not None:
            return pq.read_schema(self.path(key), filesystem=self.filesystem).names
        return read_parquet(self.store, key).column_names

    def read(self, key: str, columns: Iterable[str]) -> pa.Table:
        """The columns of `columns` that the file has (others are left out)."""
        wanted = list(columns)
        if self.local or self.filesystem is not None:
            names = self.names(key)
            present = [c for c in wanted if c in names]
            return pq.read_table(self.path(key), columns=present,
                                 filesystem=None if self.local else self.filesystem)
        table = read_parquet(self.store, key)
        return table.select([c for c in wanted if c in table.column_names])


def child_keys(store: Store, folder: str, name: str) -> list[str]:
    """`{folder}/{child}/{name}` of every direct child folder of `folder` that holds `name`
    (`name` may be a glob pattern: its `*` is matched in the key's last part)."""
    if isinstance(store, LocalStore):
        return sorted(str(path.relative_to(store.root))
                      for path in Path(store.root).glob(f"{folder}/*/{name}"))
    head, star, tail = name.partition("*")
    return [key for key in store.list(folder)
            if key.count("/") == 2 and _matches(key.rsplit("/", 1)[-1], head, star, tail)]


def _matches(last: str, head: str, star: str, tail: str) -> bool:
    if not star:
        return last == head
    return last.startswith(head) and last.endswith(tail) and len(last) >= len(head + tail)


def manifest_keys(store: Store, asset: str) -> list[str]:
    """The `_manifest.json` key of every complete partition of `asset`."""
    return child_keys(store, asset, "_manifest.json")


def dataset_manifests(store: Store) -> list[tuple[str, dict[str, Any]]]:
    """`(version, manifest)` of every complete dataset version (`shards/{version}/manifest.json`
    with its spans and shards listed)."""
    out = []
    for key in child_keys(store, SHARDS, "manifest.json"):
        manifest = json.loads(store.read_bytes(key))
        if {"spans", "shards"} <= manifest.keys():
            out.append((key.split("/")[1], manifest))
    return out
