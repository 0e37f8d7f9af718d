"""Write Common Crawl-shaped WARC files, byte for byte reproducibly.

Each file opens with a `warcinfo` record; each capture is a `request`, its `response` and a
`metadata` record, as Common Crawl writes them, one gzip member per record (warcio's gzip
wrapper writes a zero mtime). Record ids are hashes of the seed and the record's position and
dates come from the snapshot, so nothing depends on the clock or on process state.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from email.utils import format_datetime
from io import BytesIO
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

_CLD2_NAMES = {"en": ("eng", "ENGLISH"), "de": ("deu", "GERMAN"), "fr": ("fra", "FRENCH"),
               "es": ("spa", "SPANISH"), "ja": ("jpn", "Japanese"), "ru": ("rus", "RUSSIAN"),
               "la": ("lat", "LATIN")}
USER_AGENT = "SampleBot/1.0 (synthetic sample generator; +https://example.org/samplebot)"


@dataclass(frozen=True)
class Capture:
    """One fetched URL: the HTTP answer and what the metadata record says about it."""

    url: str
    status: str  # "200 OK"
    headers: tuple[tuple[str, str], ...]
    body: bytes
    payload_type: str  # what the crawler's content sniffing would say, e.g. text/html
    lang: str | None = None
    charset_detected: str | None = None
    page_id: str | None = None


@dataclass
class WrittenFile:
    """What was written: per page id the response record id and offset, and record counts."""

    path: Path
    offsets: dict[str, tuple[str, int]] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)  # records per WARC-Type
    responses: Counter[str] = field(default_factory=Counter)  # html_pages, non_html, ...


def record_id(seed: int, *parts: object) -> str:
    digest = hashlib.sha256("|".join(map(str, (seed, *parts))).encode()).digest()
    return f"<urn:uuid:{uuid.UUID(bytes=digest[:16], version=4)}>"


def warc_date(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def http_date(moment: datetime) -> str:
    return format_datetime(moment, usegmt=True)


def _ip(host: str) -> str:
    digest = hashlib.sha256(host.encode()).digest()
    return f"{digest[0] % 200 + 20}.{digest[1]}.{digest[2]}.{digest[3] % 250 + 2}"


def _request_headers(url: str) -> StatusAndHeaders:
    parts = urlsplit(url)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    headers = [
        ("User-Agent", USER_AGENT),
        ("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
        ("Accept-Language", "en-US,en;q=0.5"),
        ("Accept-Encoding", "br,gzip"),
        ("Host", parts.netloc),
        ("Connection", "Keep-Alive"),
    ]
    return StatusAndHeaders(f"GET {target} HTTP/1.1", headers, is_http_request=True)


def _metadata_payload(capture: Capture, fetch_ms: int) -> bytes:
    lines = [f"fetchTimeMs: {fetch_ms}"]
    if capture.charset_detected:
        lines.append(f"charset-detected: {capture.charset_detected}")
    if capture.lang:
        code3, name = _CLD2_NAMES[capture.lang]
        cld2 = {"reliable": True, "text-bytes": len(capture.body),
                "languages": [{"code": capture.lang, "code-iso-639-3": code3,
                               "text-covered": 0.97, "score": 900.0, "name": name}]}
        lines.append("languages-cld2: " + json.dumps(cld2, separators=(",", ":")))
    return ("\r\n".join(lines) + "\r\n").encode()


class SampleWarcWriter:
    """Writes one WARC file of a snapshot."""

    def __init__(self, path: Path, snapshot: str, seed: int, start: datetime) -> None:
        self.path, self.snapshot, self.seed, self.start = path, snapshot, seed, start
        self.written = WrittenFile(path)
        self._warcinfo_id = record_id(seed, snapshot, path.name, "warcinfo")

    def write(self, captures: Sequence[Capture]) -> WrittenFile:
        with open(self.path, "wb") as stream:
            writer = WARCWriter(stream, gzip=True, warc_version="1.0")
            self._warcinfo(writer, stream)
            for index, capture in enumerate(captures):
                # Captures a few seconds apart, in file order, from the snapshot's start time.
                moment = self.start + timedelta(seconds=7 * index + index % 5)
                self._capture(writer, stream, index, capture, moment)
        return self.written

    def _put(self, writer: WARCWriter, record: object, rec_type: str) -> None:
        writer.write_record(record)
        self.written.counts[rec_type] += 1

    def _warcinfo(self, writer: WARCWriter, stream: BinaryIO) -> None:
        fields = {
            "isPartOf": self.snapshot,
            "publisher": "curation.sample (synthetic data, no real crawl)",
            "description": f"Synthetic Common Crawl-like sample, snapshot {self.snapshot}, "
            f"seed {self.seed}",
            "operator": "corpus-platform test fixtures",
            "hostname": "sample-generator",
            "software": "curation.sample/1 warcio",
            "robots": "checked via synthetic rules",
            "format": "WARC File Format 1.0",
            "conformsTo": "https://iipc.github.io/warc-specifications/specifications/"
            "warc-format/warc-1.0/",
        }
        payload = "".join(f"{k}: {v}\r\n" for k, v in fields.items()).encode()
        headers = {
            "WARC-Type": "warcinfo",
            "WARC-Date": warc_date(self.start),
            "WARC-Filename": self.path.name,
            "WARC-Record-ID": self._warcinfo_id,
        }
        record = writer.create_warc_record("", "warcinfo", payload=BytesIO(payload),
                                           length=len(payload), warc_headers_dict=headers,
                                           warc_content_type="application/warc-fields")
        self._put(writer, record, "warcinfo")

    def _common(self, rec_type: str, index: int, moment: datetime) -> dict[str, str]:
        return {
            "WARC-Type": rec_type,
            "WARC-Date": warc_date(moment),
            "WARC-Record-ID": record_id(self.seed, self.snapshot, self.path.name, index, rec_type),
            "WARC-Warcinfo-ID": self._warcinfo_id,
        }

    def _capture(
        self, writer: WARCWriter, stream: BinaryIO, index: int, capture: Capture, moment: datetime
    ) -> None:
        host = urlsplit(capture.url).netloc
        request = self._common("request", index, moment)
        request.update({"WARC-IP-Address": _ip(host), "WARC-Target-URI": capture.url})
        record = writer.create_warc_record(capture.url, "request", payload=BytesIO(b""),
                                           length=0, warc_headers_dict=request,
                                           http_headers=_request_headers(capture.url))
        self._put(writer, record, "request")

        response = self._common("response", index, moment)
        response.update({
            "WARC-Concurrent-To": request["WARC-Record-ID"],
            "WARC-IP-Address": _ip(host),
            "WARC-Target-URI": capture.url,
            "WARC-Identified-Payload-Type": capture.payload_type,
        })
        headers = [("Date", http_date(moment)), *capture.headers,
                   ("Content-Length", str(len(capture.body)))]
        http = StatusAndHeaders(capture.status, headers, protocol="HTTP/1.1")
        record = writer.create_warc_record(capture.url, "response", payload=BytesIO(capture.body),
                                           length=len(capture.body), warc_headers_dict=response,
                                           http_headers=http)
        offset = stream.tell()
        self._put(writer, record, "response")
        if capture.page_id:
            self.written.offsets[capture.page_id] = (response["WARC-Record-ID"], offset)
        self.written.responses[_response_kind(capture)] += 1

        metadata = self._common("metadata", index, moment)
        metadata.update({"WARC-Concurrent-To": response["WARC-Record-ID"],
                         "WARC-Target-URI": capture.url})
        payload = _metadata_payload(capture, 40 + (index * 37) % 900)
        record = writer.create_warc_record(capture.url, "metadata", payload=BytesIO(payload),
                                           length=len(payload), warc_headers_dict=metadata,
                                           warc_content_type="application/warc-fields")
        self._put(writer, record, "metadata")


def _response_kind(capture: Capture) -> str:
    if capture.page_id:
        return "html_pages"
    if capture.status.startswith("3"):
        return "redirects"
    if capture.status.startswith("4"):
        return "not_found"
    return "non_html"
