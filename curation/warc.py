"""Resilient WARC reading on top of FastWARC.

FastWARC stops at the first corrupt gzip member or header and silently yields a partial page for a
truncated last member. This reader turns each of those into a `ReadFailure` with its offset, then
resynchronises at the next record boundary (the next gzip member that starts a WARC record, or the
next `WARC/1.x` line in an uncompressed file) so one bad record never loses the rest of the file.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

from fastwarc.warc import ArchiveIterator, WarcRecord, WarcRecordType

GZIP_MAGIC = b"\x1f\x8b\x08"
WARC_LINE = b"WARC/"
_RESYNC_CHUNK = 1 << 20


@dataclass(frozen=True)
class WarcItem:
    """One WARC record with its HTTP payload read (responses) or skipped (everything else)."""

    offset: int
    record_type: str
    record_id: str
    url: str | None
    date: datetime | None
    http_status: int | None
    content_type: str | None
    charset: str | None
    payload: bytes | None
    truncated: bool


@dataclass(frozen=True)
class ReadFailure:
    offset: int
    reason: str
    message: str


def _record_type_name(record: WarcRecord) -> str:
    return str(record.record_type).lower()


def _to_item(record: WarcRecord, base: int) -> WarcItem:
    is_response = record.record_type == WarcRecordType.response
    payload = record.reader.read() if is_response else None
    if not is_response:
        record.reader.consume()
    headers = record.headers
    content_type = record.http_content_type if record.is_http else None
    try:
        date = record.record_date
    except (ValueError, OSError):
        date = None
    return WarcItem(
        offset=base + record.stream_pos,
        record_type=_record_type_name(record),
        record_id=(record.record_id or "").strip("<>"),
        # wget writes the URI in angle brackets, as a WARC 1.1 draft did.
        url=(headers.get("WARC-Target-URI") or "").strip().strip("<>") or None,
        date=date,
        http_status=record.http_headers.status_code if record.is_http else None,
        content_type=content_type.lower() if content_type else None,
        charset=record.http_charset if record.is_http else None,
        payload=payload,
        truncated=payload is not None and len(payload) < record.content_length,
    )


def _starts_warc_member(handle: BinaryIO, offset: int) -> bool:
    handle.seek(offset)
    head = handle.read(4096)
    try:
        return zlib.decompressobj(31).decompress(head, 16).startswith(WARC_LINE)
    except zlib.error:
        return False


def _next_boundary(handle: BinaryIO, start: int) -> int | None:
    """The offset of the next plausible record start at or after `start`: a gzip member that
    inflates to a WARC header, or a `WARC/` line (a file may mix both after corruption)."""
    position = start
    while True:
        handle.seek(position)
        chunk = handle.read(_RESYNC_CHUNK + 8)
        if len(chunk) < len(GZIP_MAGIC):
            return None
        candidates = sorted(_find_all(chunk, GZIP_MAGIC) + _find_all(chunk, WARC_LINE))
        for found in candidates:
            candidate = position + found
            if chunk.startswith(GZIP_MAGIC, found):
                if _starts_warc_member(handle, candidate):
                    return candidate
            elif candidate == 0 or _preceded_by_newline(handle, candidate):
                return candidate
        position += _RESYNC_CHUNK


def _find_all(chunk: bytes, marker: bytes) -> list[int]:
    hits, found = [], chunk.find(marker)
    while found != -1:
        hits.append(found)
        found = chunk.find(marker, found + 1)
    return hits


def _preceded_by_newline(handle: BinaryIO, offset: int) -> bool:
    handle.seek(offset - 1)
    return handle.read(1) == b"\n"


def _is_gzip(handle: BinaryIO) -> bool:
    handle.seek(0)
    return handle.read(3) == GZIP_MAGIC


def _gzip_tail_complete(handle: BinaryIO, offset: int) -> bool:
    """Whether the gzip member starting at `offset` (the last one) ends with its trailer."""
    handle.seek(offset)
    inflater = zlib.decompressobj(31)
    try:
        while not inflater.eof:
            chunk = handle.read(_RESYNC_CHUNK)
            if not chunk:
                return False
            inflater.decompress(chunk)
    except zlib.error:
        return False
    return True


def iter_warc(path: str | Path) -> Iterator[WarcItem | ReadFailure]:
    """Every record of a WARC file (gzip members or uncompressed), and every read failure."""
    # Two handles: FastWARC reads ahead on `stream`; resync scans and tail checks use `probe`.
    with open(path, "rb") as stream, open(path, "rb") as probe:
        size = probe.seek(0, 2)
        if size == 0:
            yield ReadFailure(0, "empty_file", "the file has no bytes")
            return
        yield from _iter_from(stream, probe, size, _is_gzip(probe))


def _iter_from(
    stream: BinaryIO, probe: BinaryIO, size: int, gzipped: bool
) -> Iterator[WarcItem | ReadFailure]:
    base = 0
    while True:
        stream.seek(base)
        records = 0
        last_good: int | None = None
        reading: int | None = None
        try:
            # quirks_mode reads pre-1.0 WARCs such as ClueWeb09's WARC/0.18.
            iterator = ArchiveIterator(stream, parse_http=True, quirks_mode=True, strict_mode=False)
            for record in iterator:
                reading = base + record.stream_pos
                item = _to_item(record, base)
                records += 1
                if item.truncated and _file_ends_inside(probe, item, size, gzipped):
                    yield ReadFailure(item.offset, "truncated_record",
                                      "the file ends inside this record")
                    return
                yield item
                last_good = reading
            if records > 0:
                return
            # FastWARC skips bytes it cannot parse without raising; look for a later record.
            broken = base
            yield ReadFailure(base, "not_warc" if base == 0 else "corrupt_record",
                              "no WARC record found at this offset")
        except (OSError, ValueError, RuntimeError) as error:
            if reading is not None and reading != last_good:
                broken = reading
            else:
                after = last_good + 1 if last_good is not None else base
                broken = _next_boundary(probe, after) if last_good is not None else base
                broken = base if broken is None else broken
            yield ReadFailure(broken, _failure_reason(error, broken, records), str(error))
        resume = _next_boundary(probe, broken + 1)
        if resume is None or resume >= size:
            return
        base = resume


def _file_ends_inside(probe: BinaryIO, item: WarcItem, size: int, gzipped: bool) -> bool:
    if gzipped:
        return not _gzip_tail_complete(probe, item.offset)
    return _next_boundary(probe, item.offset + 1) is None


def _failure_reason(error: Exception, offset: int, records: int) -> str:
    message = str(error).lower()
    if "gzip" in message or "decompress" in message:
        return "corrupt_gzip"
    if offset == 0 and records == 0:
        return "not_warc"
    return "corrupt_record"
