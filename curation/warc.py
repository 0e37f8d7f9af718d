"""Resilient WARC reading: our own record framing, FastWARC for parsing each record.

FastWARC reading a whole file trusts every `Content-Length`: one that is too large swallows the
records after it (a huge one, the rest of the file), one that is too small passes half a page on
as whole, a garbled version line or a non-numeric length makes it skip the record without a word,
and it silently yields a partial page for a truncated last member. So this module frames records
itself, over gzip members (each inflated on its own, so one bad member never spoils the next) or
an uncompressed file, and checks each record's frame: a WARC/ version line, a numeric
`Content-Length`, a block that ends where the next record (or member, or the file) begins. Every
record that fails becomes a `ReadFailure` with its offset, reason and a message, and reading
resynchronises at the next record boundary (the next gzip member that inflates to a WARC header,
or the next `WARC/` line), so one bad record never loses the rest of the file. FastWARC then
parses each well-framed record from its bytes (WARC and HTTP headers, charset, dates, quirks of
pre-1.0 WARCs).

Blocks larger than a limit are streamed past rather than held in memory: the item says
`oversized` and carries its headers but no payload.
"""

from __future__ import annotations

import io
import re
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
_READ_CHUNK = 1 << 16
# Largest decompressed piece inflated at once (a highly compressible member stays bounded).
_INFLATE_PIECE = 1 << 22
# A WARC header block longer than this is not a header.
MAX_HEADER_BYTES = 1 << 20
# Bytes kept from the start of an oversized block, to read its HTTP headers.
HTTP_HEAD_BYTES = 1 << 16
_KNOWN_TYPES = {"warcinfo", "response", "resource", "request", "metadata", "revisit",
                "conversion", "continuation"}


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
    # The block's declared length (WARC Content-Length).
    content_length: int = 0
    # The block was larger than the reader's limit: headers only, `payload` is None.
    oversized: bool = False
    # HTTP Transfer-Encoding: chunked framing found in the stored payload and removed.
    dechunked: bool = False


@dataclass(frozen=True)
class ReadFailure:
    offset: int
    reason: str
    message: str
    url: str | None = None


# --- byte sources: an uncompressed file, or gzip members inflated one by one ----------------


class _SourceError(Exception):
    """Reading failed at `offset` (a file offset: the member's for gzip input)."""

    reason = "corrupt_record"

    def __init__(self, offset: int, message: str) -> None:
        super().__init__(message)
        self.offset = offset


class _CorruptGzip(_SourceError):
    reason = "corrupt_gzip"


class _TruncatedInput(_SourceError):
    reason = "truncated_record"


class _NotAMember(_SourceError):
    reason = "corrupt_record"


class _Source:
    """Decompressed bytes from a start offset, read through a buffer that drops what was read."""

    def __init__(self, handle: BinaryIO, start: int) -> None:
        self.handle = handle
        self.buffer = bytearray()
        self.base = start  # stream position of buffer[0]
        self.pos = start  # stream position of the next byte to hand out
        self.ended = False

    # Subclasses: append more bytes to the buffer; False at the clean end of the input.
    def _more(self) -> bool:
        raise NotImplementedError

    def record_offset(self) -> int:
        """The file offset reported for a record starting at the current position."""
        raise NotImplementedError

    def member_starts_in(self, low: int, high: int) -> list[int]:
        """Stream positions in (low, high) where a gzip member starts (none for plain files)."""
        return []

    def _fill(self, count: int) -> bool:
        """At least `count` bytes buffered from `pos`; False when the input ends first."""
        while self.base + len(self.buffer) - self.pos < count:
            if self.ended or not self._more():
                self.ended = True
                return False
        return True

    def peek(self, count: int) -> bytes:
        self._fill(count)
        start = self.pos - self.base
        return bytes(self.buffer[start:start + count])

    def read(self, count: int) -> bytes:
        data = self.peek(count)
        self.pos += len(data)
        self._compact()
        return data

    def take(self, count: int, keep: int, record_start: int) -> tuple[bytes, int]:
        """Reads a block of `count` bytes, holding only its first `keep`; returns those and how
        many bytes were read. Stops early at the input's end or at a gzip member that begins a
        new WARC record (the block's declared length runs into it)."""
        kept = bytearray()
        taken = 0
        while taken < count:
            available = self.base + len(self.buffer) - self.pos
            if available <= 0:
                self._fill(min(count - taken, _READ_CHUNK))
                available = self.base + len(self.buffer) - self.pos
                if available <= 0:
                    break
            step = min(available, count - taken)
            if self.member_starts_in(record_start, self.pos + step):
                try:  # the first bytes of the member(s) the step crosses into
                    self._fill(step + len(WARC_LINE))
                except _SourceError:
                    pass  # a later member's failure: raised again when reading reaches it
                if self.warc_member_within(record_start, self.pos + step):
                    break
            if len(kept) < keep:
                begin = self.pos - self.base
                kept += self.buffer[begin:begin + min(step, keep - len(kept))]
            self.pos += step
            taken += step
            self._compact()
        return bytes(kept), taken

    def find_header_end(self) -> int | None:
        """Stream position just after the header block's blank line, or None (see `ended`)."""
        scanned = 0
        while True:
            start = self.pos - self.base
            found = self.buffer.find(b"\r\n\r\n", start + max(scanned - 3, 0),
                                     start + MAX_HEADER_BYTES)
            if found >= 0:
                return self.base + found + 4
            scanned = self.base + len(self.buffer) - self.pos
            if scanned >= MAX_HEADER_BYTES or not self._fill(scanned + 1):
                return None

    def warc_member_within(self, low: int, high: int) -> bool:
        """Whether a gzip member starting strictly inside (low, high) begins with `WARC/`."""
        for position in self.member_starts_in(low, high):
            begin = position - self.base
            if begin >= 0 and self.buffer[begin:begin + len(WARC_LINE)] == WARC_LINE:
                return True
        return False

    def skip_blank(self) -> None:
        while True:
            head = self.peek(1)
            if head not in (b"\r", b"\n"):
                return
            self.pos += 1

    def _compact(self) -> None:
        drop = self.pos - self.base
        if drop > (1 << 20):
            del self.buffer[:drop]
            self.base = self.pos


class _PlainSource(_Source):
    def __init__(self, handle: BinaryIO, start: int, size: int) -> None:
        super().__init__(handle, start)
        self.size = size
        handle.seek(start)

    def _more(self) -> bool:
        chunk = self.handle.read(_READ_CHUNK)
        if not chunk:
            return False
        self.buffer += chunk
        return True

    def record_offset(self) -> int:
        return self.pos

    def remaining(self) -> int | None:
        return self.size - self.pos


class _GzipSource(_Source):
    """Gzip members inflated one by one; stream positions count decompressed bytes."""

    def __init__(self, handle: BinaryIO, start: int) -> None:
        super().__init__(handle, 0)
        handle.seek(start)
        self.file_pos = start  # file offset of pending[0]
        self.pending = b""
        self.inflater: zlib._Decompress | None = None
        self.member = start  # file offset of the member being inflated
        self.starts: list[tuple[int, int]] = []  # (stream position, file offset) of members
        self.failed: _SourceError | None = None

    def remaining(self) -> int | None:
        return None

    def _more(self) -> bool:
        if self.failed is not None:
            raise self.failed
        try:
            return self._inflate()
        except _SourceError as error:
            self.failed = error
            raise

    def _inflate(self) -> bool:
        end = self.base + len(self.buffer)
        if self.inflater is None:
            if len(self.pending) < len(GZIP_MAGIC):
                self.pending += self.handle.read(_READ_CHUNK)
            if not self.pending:
                return False
            if not self.pending.startswith(GZIP_MAGIC):
                raise _NotAMember(self.file_pos, "bytes after a gzip member are not a gzip "
                                                 "member")
            self.inflater = zlib.decompressobj(31)
            self.member = self.file_pos
            self.starts.append((end, self.file_pos))
        if not self.pending:
            self.pending = self.handle.read(_READ_CHUNK)
            if not self.pending:
                raise _TruncatedInput(self.member, "the file ends inside this gzip member")
        try:
            out = self.inflater.decompress(self.pending, _INFLATE_PIECE)
        except zlib.error as error:
            raise _CorruptGzip(self.member, f"gzip member does not inflate: {error}") from None
        if self.inflater.eof:
            rest = self.inflater.unused_data
            self.file_pos += len(self.pending) - len(rest)
            self.pending = rest
            self.inflater = None
        else:
            tail = self.inflater.unconsumed_tail
            self.file_pos += len(self.pending) - len(tail)
            self.pending = tail
        self.buffer += out
        return True

    def record_offset(self) -> int:
        self.peek(1)  # opens the next member when the position is at a member's end
        offset = self.starts[0][1] if self.starts else self.file_pos
        for position, file_offset in self.starts:
            if position > self.pos:
                break
            offset = file_offset
        return offset

    def member_starts_in(self, low: int, high: int) -> list[int]:
        return [position for position, _ in self.starts if low < position < high]

    def _compact(self) -> None:
        super()._compact()
        keep = [start for start in self.starts if start[0] >= self.base]
        earlier = [start for start in self.starts if start[0] < self.base]
        self.starts = earlier[-1:] + keep


# --- headers ---------------------------------------------------------------------------------

_CONTENT_LENGTH = re.compile(rb"(?im)^content-length[ \t]*:[ \t]*([^\r\n]*)")
_TARGET_URI = re.compile(rb"(?im)^warc-target-uri[ \t]*:[ \t]*([^\r\n]*)")
_WARC_TYPE = re.compile(rb"(?im)^warc-type[ \t]*:[ \t]*([^\r\n]*)")


def _header_value(pattern: re.Pattern[bytes], header: bytes) -> str | None:
    found = pattern.search(header)
    return found.group(1).strip().decode("utf-8", "replace") if found else None


def _target_uri(header: bytes) -> str | None:
    return (_header_value(_TARGET_URI, header) or "").strip("<>") or None


def _record_type_name(record: WarcRecord) -> str:
    return str(record.record_type).lower()


def _dechunk(payload: bytes) -> bytes | None:
    """The body of an HTTP/1.1 chunked payload, or None when it is not well-formed chunks."""
    out = bytearray()
    position = 0
    while True:
        line_end = payload.find(b"\r\n", position)
        if line_end < 0 or line_end - position > 64:
            return None
        size_text = payload[position:line_end].split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            return None
        position = line_end + 2
        if size == 0:
            return bytes(out)
        if position + size > len(payload):
            return None
        out += payload[position:position + size]
        position += size
        if payload[position:position + 2] != b"\r\n":
            return None
        position += 2


def _to_item(record: WarcRecord, offset: int, oversized: bool = False,
             content_length: int | None = None) -> WarcItem:
    is_response = record.record_type == WarcRecordType.response
    payload = record.reader.read() if is_response and not oversized else None
    if payload is None:
        record.reader.consume()
    headers = record.headers
    content_type = record.http_content_type if record.is_http else None
    try:
        date = record.record_date
    except (ValueError, OSError):
        date = None
    dechunked = False
    if payload and record.is_http:
        transfer = (record.http_headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in transfer and (body := _dechunk(payload)) is not None:
            payload, dechunked = body, True
    return WarcItem(
        offset=offset,
        record_type=_record_type_name(record),
        record_id=(record.record_id or "").strip("<>"),
        # wget writes the URI in angle brackets, as a WARC 1.1 draft did.
        url=(headers.get("WARC-Target-URI") or "").strip().strip("<>") or None,
        date=date,
        http_status=record.http_headers.status_code if record.is_http else None,
        content_type=content_type.lower() if content_type else None,
        charset=record.http_charset if record.is_http else None,
        payload=payload,
        # Framing guarantees the whole block: a record the file ends inside is a ReadFailure.
        truncated=False,
        content_length=record.content_length if content_length is None else content_length,
        oversized=oversized,
        dechunked=dechunked,
    )


def _parse(data: bytes) -> WarcRecord | None:
    # quirks_mode reads pre-1.0 WARCs such as ClueWeb09's WARC/0.18.
    for record in ArchiveIterator(io.BytesIO(data), parse_http=True, quirks_mode=True):
        return record
    return None


# --- records ---------------------------------------------------------------------------------


@dataclass
class _Fatal:
    """A failure that ends reading at this position: resynchronise after `failure.offset`."""

    failure: ReadFailure


def _records(source: _Source, max_block: int | None) -> Iterator[WarcItem | ReadFailure | _Fatal]:
    """Records from `source` until it ends cleanly or a `_Fatal` failure."""
    while True:
        try:
            source.skip_blank()
            if not source.peek(1):
                return
            offset = source.record_offset()
        except _SourceError as error:
            yield _Fatal(ReadFailure(error.offset, error.reason, str(error)))
            return
        try:
            outcome = _one_record(source, offset, max_block)
        except _SourceError as error:
            yield _Fatal(ReadFailure(offset, error.reason, str(error)))
            return
        if isinstance(outcome, _Fatal):
            yield outcome
            return
        yield from outcome


def _one_record(source: _Source, offset: int,
                max_block: int | None) -> list[WarcItem | ReadFailure | _Fatal] | _Fatal:
    start = source.pos
    if source.peek(len(WARC_LINE)) != WARC_LINE:
        found = source.peek(16)
        return _Fatal(ReadFailure(offset, "corrupt_header",
                                  f"no WARC/ version line where a record should start "
                                  f"(found {found!r})"))
    header_end = source.find_header_end()
    if header_end is None:
        if not source.ended:
            return _Fatal(ReadFailure(offset, "corrupt_header",
                                      f"no end of the WARC header within {MAX_HEADER_BYTES} "
                                      f"bytes"))
        return _Fatal(ReadFailure(offset, "truncated_record",
                                  "the file ends inside this record's WARC header"))
    header = source.read(header_end - start)
    url = _target_uri(header)
    length_text = _header_value(_CONTENT_LENGTH, header)
    if length_text is None or not length_text.isdigit():
        reason = "no Content-Length" if length_text is None else \
            f"Content-Length {length_text[:40]!r} is not a number"
        return _Fatal(ReadFailure(offset, "corrupt_header", f"{reason} in the WARC header", url))
    length = int(length_text)
    remaining = source.remaining() if isinstance(source, _PlainSource) else None
    if remaining is not None and length > remaining:
        return _Fatal(ReadFailure(offset, "truncated_record",
                                  f"Content-Length {length} runs past the end of the file "
                                  f"({remaining} bytes left)", url))
    oversized = max_block is not None and length > max_block
    block, got = source.take(length, HTTP_HEAD_BYTES if oversized else length, start)
    if got < length:
        if source.ended:
            return _Fatal(ReadFailure(offset, "truncated_record",
                                      f"the file ends {length - got} bytes before the end of "
                                      f"this record's {length}-byte block", url))
        return _Fatal(ReadFailure(offset, "bad_content_length",
                                  f"Content-Length {length} runs into the next record", url))
    outcome: list[WarcItem | ReadFailure | _Fatal] = []
    end_ok, junk = _check_end(source, offset)
    if not end_ok:
        return _Fatal(ReadFailure(offset, "bad_content_length",
                                  f"the block does not end where Content-Length {length} says "
                                  f"(no record boundary after it)", url))
    record_type = (_header_value(_WARC_TYPE, header) or "").lower()
    if record_type not in _KNOWN_TYPES:
        outcome.append(ReadFailure(offset, "corrupt_header",
                                   f"unknown WARC-Type {record_type[:40]!r}", url))
    else:
        item = _item(header, block, offset, length, oversized)
        outcome.append(item if item is not None else ReadFailure(
            offset, "corrupt_header", "FastWARC could not parse this record's headers", url))
    if junk is not None:
        outcome.append(_Fatal(junk))
    return outcome


def _check_end(source: _Source, offset: int) -> tuple[bool, ReadFailure | None]:
    """Whether the block ended at a record boundary, and a failure for bytes after a properly
    terminated record that are not the next record (the record itself is whole)."""
    try:
        terminated = source.peek(4) == b"\r\n\r\n"
        source.skip_blank()
        following = source.peek(len(WARC_LINE))
    except _SourceError as error:
        if error.offset == offset:
            raise  # this record's own member is bad (for example its CRC)
        # The next gzip member is bad; that is the next record's failure, not this one's.
        return True, None
    if not following or following == WARC_LINE:
        return True, None
    if not terminated:
        return False, None
    return True, ReadFailure(source.record_offset(), "corrupt_header",
                             f"a record should start here but there is no WARC/ version line "
                             f"(found {source.peek(16)!r})")


def _item(header: bytes, block: bytes, offset: int, length: int,
          oversized: bool) -> WarcItem | None:
    if oversized:
        # Parse the headers over the block's head only: the payload is not held in memory.
        header = _CONTENT_LENGTH.sub(b"Content-Length: " + str(len(block)).encode(), header, 1)
    try:
        record = _parse(header + block + b"\r\n\r\n")
        if record is None:
            return None
        return _to_item(record, offset, oversized, length)
    except (OSError, ValueError, RuntimeError):
        return None


# --- files -----------------------------------------------------------------------------------


def iter_warc(path: str | Path,
              max_block_bytes: int | None = None) -> Iterator[WarcItem | ReadFailure]:
    """Every record of a WARC file (gzip members or uncompressed), and every read failure.

    Records whose block is larger than `max_block_bytes` come back `oversized`, without payload.
    """
    # Two handles: the record reader streams `stream`; resync scans use `probe`.
    with open(path, "rb") as stream, open(path, "rb") as probe:
        size = probe.seek(0, 2)
        if size == 0:
            yield ReadFailure(0, "empty_file", "the file has no bytes")
            return
        yield from _iter_file(stream, probe, size, max_block_bytes)


def _iter_file(stream: BinaryIO, probe: BinaryIO, size: int,
               max_block: int | None) -> Iterator[WarcItem | ReadFailure]:
    position: int | None = 0
    found_record = False
    held: ReadFailure | None = None  # a failure at offset 0: `not_warc` if nothing else is found
    while position is not None and position < size:
        probe.seek(position)
        head = probe.read(len(WARC_LINE))
        failure: ReadFailure | None = None
        if head.startswith(GZIP_MAGIC) or head == WARC_LINE:
            source: _Source = (_GzipSource(stream, position) if head.startswith(GZIP_MAGIC)
                               else _PlainSource(stream, position, size))
            for event in _records(source, max_block):
                if isinstance(event, _Fatal):
                    failure = event.failure
                    break
                if isinstance(event, WarcItem):
                    if held is not None:
                        yield held
                        held = None
                    found_record = True
                yield event
            if failure is None:
                break
        else:
            failure = ReadFailure(position, "corrupt_record",
                                  "no WARC record starts here (neither a gzip member nor a "
                                  "WARC/ line)")
        resume = _next_boundary(probe, failure.offset + 1)
        if failure.reason == "truncated_record" and resume is not None:
            failure = ReadFailure(failure.offset, "bad_content_length",
                                  f"{failure.message}, but more records follow: its "
                                  f"Content-Length is wrong", failure.url)
        if failure.offset == 0 and not found_record:
            held = failure
        else:
            yield failure
        position = resume
    if held is not None:
        if found_record:
            yield held
        else:
            yield ReadFailure(0, "not_warc", f"no WARC record found in the file "
                                             f"({held.message})")


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
