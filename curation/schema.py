"""The typed contracts every stage shares (docs/architecture.md, "Data contracts")."""

from __future__ import annotations

import hashlib

import pyarrow as pa

DOCUMENT_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("url", pa.string()),
        pa.field("domain", pa.string()),
        pa.field("snapshot", pa.string()),
        pa.field("warc_file", pa.string()),
        pa.field("warc_offset", pa.int64()),
        pa.field("fetched_at", pa.timestamp("us", tz="UTC")),
        pa.field("charset", pa.string()),
        pa.field("html_bytes", pa.int64()),
        pa.field("licence", pa.string()),
        pa.field("text", pa.string(), nullable=False),
    ]
)

REJECT_SCHEMA = pa.schema(
    [
        pa.field("stage", pa.string(), nullable=False),
        pa.field("url", pa.string()),
        pa.field("warc_file", pa.string()),
        pa.field("warc_offset", pa.int64()),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("message", pa.string()),
    ]
)

WARC_FILES_SCHEMA = pa.schema(
    [
        pa.field("location", pa.string(), nullable=False),
        pa.field("size", pa.int64(), nullable=False),
        pa.field("sha256", pa.string(), nullable=False),
        pa.field("etag", pa.string()),
    ]
)

WEB_SOURCE = "web"


def _short_hash(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def web_doc_id(snapshot: str, record_id: str, warc_file: str, offset: int) -> str:
    """Stable across runs, machines and worker counts: the snapshot and the WARC record id (or,
    for a record without one, its file and offset)."""
    return _short_hash(f"{snapshot}|{record_id or f'{warc_file}@{offset}'}")


def source_doc_id(source: str, path: str, line: int) -> str:
    return _short_hash(f"source:{source}|{path}|{line}")


def sample_rank(doc_id: str) -> str:
    """Order for picking spot-check samples: independent of task order and worker count."""
    return hashlib.blake2b(doc_id.encode(), digest_size=8, person=b"sample").hexdigest()

DECISION_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("stage", pa.string(), nullable=False),
        pa.field("verdict", pa.string(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("value", pa.float64()),
        pa.field("detail", pa.string()),
        pa.field("kept_doc_id", pa.string()),
    ]
)

EDIT_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("stage", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("line", pa.int32()),
        pa.field("start", pa.int64()),
        pa.field("end", pa.int64()),
    ]
)


def decisions_table(rows: list[dict]) -> pa.Table:
    """Decision rows (keep or drop under the pipeline defaults, the rule, what tripped it)."""
    full = [{"value": None, "detail": None, "kept_doc_id": None, **row} for row in rows]
    return pa.Table.from_pylist(full, DECISION_SCHEMA)
