"""Generate the built-in sample: two small Common Crawl-like snapshots, a curated reference
source, a benchmark file and a URL blocklist, plus a manifest and a per-page truth file.

    layout = generate_sample(Path("data/sample"), seed=1234)

The output is byte-for-byte deterministic for a seed and interpreter: every random choice comes
from a `random.Random` seeded from it, WARC dates come from the snapshot, record ids are hashes
and gzip members carry no timestamp. Nothing is read from outside this package but the
interpreter's standard library, the code source's real code (`curation.sample.code`).
"""

from __future__ import annotations

import hashlib
import json
import random
import struct
import zlib
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from curation.sample import code, evals, reference
from curation.sample.html import PageView, render
from curation.sample.plan import SNAPSHOTS, Page, assign_urls, build_duplicates, build_originals
from curation.sample.sites import BLOCKED_DOMAINS, BLOCKED_ELSEWHERE, SITES, is_blocked
from curation.sample.texts_en import GENERIC
from curation.sample.warc import Capture, SampleWarcWriter, WrittenFile

FILES_PER_SNAPSHOT = 2
# Crawl start per snapshot: WARC dates derive from these, never from the clock.
SNAPSHOT_START = {
    "SAMPLE-01": datetime(2024, 2, 20, 3, 0, 0, tzinfo=UTC),
    "SAMPLE-02": datetime(2024, 4, 15, 3, 0, 0, tzinfo=UTC),
}
MANIFEST = "SAMPLE_MANIFEST.json"
TRUTH = "truth/pages.jsonl"


@dataclass(frozen=True)
class SampleLayout:
    """Where the generated sample lives."""

    root: Path
    warc_dirs: dict[str, Path]
    curated_source_dir: Path
    eval_file: Path
    code_source_dir: Path
    code_eval_file: Path
    url_blocklist: Path
    page_count: int


def generate_sample(out_dir: Path, seed: int = 1234) -> SampleLayout:
    """Write the sample under `out_dir` (created if needed) and describe where things are."""
    root = Path(out_dir)
    originals = build_originals(seed)
    assign_urls(seed, originals)
    pages = originals + build_duplicates(seed, originals, len(originals) + 1)
    assign_urls(seed, pages)

    warc_dirs = {snapshot: root / "warc" / snapshot for snapshot in SNAPSHOTS}
    written = {snapshot: _write_snapshot(root, seed, snapshot, pages) for snapshot in SNAPSHOTS}
    eval_file = _write_jsonl(root / "evals" / "sample_eval.jsonl",
                             [item.as_json() for item in evals.ITEMS])
    source_dir = root / "sources" / "reference"
    source = _write_jsonl(source_dir / "reference-00000.jsonl",
                          reference.build_reference(random.Random(f"{seed}:reference")))
    code_dir = root / "sources" / "code"
    code_source = _write_jsonl(code_dir / "code-00000.jsonl", code.build_code_rows())
    code_eval = _write_jsonl(root / "evals" / "sample_code_eval.jsonl",
                             list(code.CODE_EVAL_ITEMS))
    blocklist = _write_blocklist(root / "lists" / "url_blocklist.txt")
    truth = _write_jsonl(root / TRUTH, _truth_rows(pages, written))
    outputs = [wf.path for files in written.values() for wf in files]
    outputs += [eval_file, source, code_source, code_eval, blocklist, truth]
    _write_manifest(root, seed, pages, written, outputs)
    return SampleLayout(root, warc_dirs, source_dir, eval_file, code_dir, code_eval, blocklist,
                        len(pages))


# --- WARC files ----------------------------------------------------------------------------


def _write_snapshot(root: Path, seed: int, snapshot: str, pages: list[Page]) -> list[WrittenFile]:
    rng = random.Random(f"{seed}:files:{snapshot}")
    mine = [p for p in pages if p.snapshot == snapshot]
    rng.shuffle(mine)
    related = _related_index(pages, snapshot)
    folder = root / "warc" / snapshot
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    half = (len(mine) + 1) // FILES_PER_SNAPSHOT
    for index in range(FILES_PER_SNAPSHOT):
        captures = [_page_capture(seed, page, related) for page in
                    mine[index * half : (index + 1) * half]]
        for extra in _extra_captures(snapshot, index):
            captures.insert(rng.randrange(len(captures) + 1), extra)
        path = folder / f"{snapshot}-{index:05d}.warc.gz"
        start = SNAPSHOT_START[snapshot].replace(hour=3 + 5 * index)
        files.append(SampleWarcWriter(path, snapshot, seed, start).write(captures))
    return files


def _related_index(pages: list[Page], snapshot: str) -> dict[str, list[tuple[str, str]]]:
    """Per domain, the (title, url) of its pages in the snapshot: the sidebar's link lists."""
    index: dict[str, list[tuple[str, str]]] = {}
    for page in pages:
        if page.snapshot == snapshot and page.kind not in ("spam", "stub"):
            index.setdefault(page.site.domain, []).append((page.content.title, page.url))
    return index


def _encode(page: Page, html: str) -> tuple[bytes, str, str]:
    """Body bytes, the Content-Type header and the charset a detector would report."""
    if page.charset == "cp1252-declared-utf-8":
        # The server claims UTF-8 but the bytes are windows-1252, as legacy CMSs often do.
        return html.encode("cp1252"), "text/html; charset=utf-8", "windows-1252"
    if page.charset == "shift_jis":
        return html.encode("shift_jis"), "text/html", "Shift_JIS"
    # Servers spell the charset differently; extractors must not care.
    charset = "utf-8" if page.site.server == "Apache" else "UTF-8"
    header = f"text/html; charset={charset}"
    return html.encode("utf-8"), header, "UTF-8"


def _page_capture(seed: int, page: Page, related: dict[str, list[tuple[str, str]]]) -> Capture:
    rng = random.Random(f"{seed}:chrome:{page.snapshot}:{page.page_id}")
    others = [r for r in related.get(page.site.domain, []) if r[1] != page.url]
    links = tuple(rng.sample(others, min(len(others), rng.randint(4, 6))))
    meta = {"utf-8": "utf-8", "shift_jis": "Shift_JIS"}.get(page.charset)
    view = PageView(page.site, page.lang, page.content.title, tuple(page.content.blocks),
                    page.url, page.canonical, page.author, page.published, links, meta)
    comments = GENERIC.get("comments") if page.lang == "en" else ()
    body, content_type, detected = _encode(page, render(view, rng, comments))
    headers = [("Server", page.site.server), ("Content-Type", content_type),
               ("Cache-Control", "max-age=600"), ("Vary", "Accept-Encoding")]
    if rng.random() < 0.5:
        # Common Crawl keeps the original encoding header under this name after decoding.
        headers.append(("X-Crawler-Content-Encoding", "gzip"))
    return Capture(page.url, "200 OK", tuple(headers), body, "text/html", page.lang, detected,
                   page.page_id)


def _png(size: int = 16) -> bytes:
    """A small, valid RGB gradient PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + bytes(v for x in range(size) for v in (x * 15, y * 15, 120))
                    for y in range(size))
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 9))
            + chunk(b"IEND", b""))


_PDF = (
    b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n"
    b"2 0 obj << /Type /Pages /Kids [3 0 R] /Count 1 >> endobj\n"
    b"3 0 obj << /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >> endobj\n"
    b"4 0 obj << /Length 58 >> stream\nBT /F1 18 Tf 72 720 Td (Monthly budget planner) Tj ET\n"
    b"endstream endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
)
_CSS = (
    b"body { font-family: Georgia, serif; color: #222; }\n"
    b".site-header { display: flex; justify-content: space-between; }\n"
    b".cookie-banner { position: fixed; bottom: 0; width: 100%; background: #fffbe6; }\n"
)
_JSON = json.dumps({"posts": [{"id": 101, "title": "Hello", "comments": 3},
                              {"id": 102, "title": "Backups", "comments": 0}], "next": None},
                   separators=(",", ":")).encode()
_MOVED = ('<html><head><title>301 Moved Permanently</title></head><body><h1>Moved Permanently'
          '</h1><p>The document has moved <a href="{0}">here</a>.</p></body></html>')
_NOT_FOUND = (b"<html><head><title>404 Not Found</title></head><body><h1>Not Found</h1>"
              b"<p>The requested URL was not found on this server.</p></body></html>")


def _asset(url: str, content_type: str, body: bytes) -> Capture:
    headers = (("Server", "nginx"), ("Content-Type", content_type),
               ("Cache-Control", "max-age=86400"))
    return Capture(url, "200 OK", headers, body, content_type)


def _redirect(url: str, location: str) -> Capture:
    body = _MOVED.format(location).encode()
    headers = (("Server", "nginx"), ("Location", location),
               ("Content-Type", "text/html; charset=iso-8859-1"))
    return Capture(url, "301 Moved Permanently", headers, body, "text/html")


def _extra_captures(snapshot: str, file_index: int) -> list[Capture]:
    """Non-HTML answers, redirects and a 404 that the documents stage must skip."""
    n = SNAPSHOTS.index(snapshot) + 1
    if file_index == 0:
        return [
            _asset(f"https://www.greenthumb-journal.net/wp-content/uploads/2024/0{n}/"
                   "seedlings-150x150.png", "image/png", _png()),
            _asset(f"https://www.weeknight-kitchen.com/assets/css/main.css?v={n}", "text/css",
                   _CSS),
            _redirect(f"http://www.trailnotes-outdoors.com/?p={n}",
                      f"https://www.trailnotes-outdoors.com/?p={n}"),
        ]
    return [
        _asset(f"https://www.plainmoney-guide.com/downloads/budget-planner-{n}.pdf",
               "application/pdf", _PDF),
        _asset(f"https://devnotes-daily.io/api/v1/posts?limit=5&page={n}", "application/json",
               _JSON),
        _redirect(f"https://www.riverton-gazette.com/news/story.php?id={n}",
                  f"https://www.riverton-gazette.com/news/archive/{n}"),
        Capture(f"https://www.curious-cosmos.org/space/missing-page-{n}", "404 Not Found",
                (("Server", "nginx"), ("Content-Type", "text/html")), _NOT_FOUND, "text/html"),
    ]


# --- the other files -----------------------------------------------------------------------


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(row, ensure_ascii=False) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _write_blocklist(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# URL blocklist for the built-in sample: one domain per line.",
             "# A domain blocks its subdomains too (the link farm is crawled on www.).",
             *BLOCKED_DOMAINS, "", "# Listed but never crawled in the sample.",
             *BLOCKED_ELSEWHERE]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _truth_rows(pages: list[Page], written: dict[str, list[WrittenFile]]) -> list[dict[str, Any]]:
    where = {page_id: (wf.path.name, rid, offset)
             for files in written.values() for wf in files
             for page_id, (rid, offset) in wf.offsets.items()}
    rows = []
    for page in pages:
        warc_file, rid, offset = where[page.page_id]
        rows.append({
            "page_id": page.page_id, "snapshot": page.snapshot, "warc_file": warc_file,
            "record_id": rid, "offset": offset, "url": page.url, "domain": page.site.domain,
            "lang": page.lang, "kind": page.kind, "subkind": page.subkind,
            "title": page.content.title, "charset": page.charset,
            "blocklisted": is_blocked(page.site.domain), "source": page.source,
            "eval_items": page.eval_items, "pii": page.content.pii,
            "lookalikes": page.content.lookalikes, "boilerplate": list(page.site.boilerplate),
            "words": page.words, "text": page.text,
        })
    return sorted(rows, key=lambda r: (r["snapshot"], r["warc_file"], r["offset"]))


def _snapshot_summary(pages: list[Page], files: list[WrittenFile]) -> dict[str, Any]:
    mine = [p for p in pages if p.snapshot == files[0].path.parent.name]
    per_file = {}
    for wf in files:
        per_file[wf.path.name] = {"records": dict(sorted(wf.counts.items())),
                                  "responses": dict(sorted(wf.responses.items()))}
    return {
        "html_pages": len(mine),
        "kinds": dict(sorted(Counter(p.kind for p in mine).items())),
        "subkinds": dict(sorted(Counter(f"{p.kind}:{p.subkind}" for p in mine).items())),
        "languages": dict(sorted(Counter(p.lang for p in mine).items())),
        "charsets": dict(sorted(Counter(p.charset for p in mine).items())),
        "blocklisted": sum(is_blocked(p.site.domain) for p in mine),
        "files": per_file,
    }


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write_manifest(root: Path, seed: int, pages: list[Page],
                    written: dict[str, list[WrittenFile]], outputs: list[Path]) -> None:
    files = sorted(outputs)
    manifest = {
        "generator": "curation.sample", "format_version": 1, "seed": seed,
        "page_count": len(pages),
        "files": [{"path": p.relative_to(root).as_posix(), "bytes": p.stat().st_size,
                   "sha256": _sha256(p)} for p in files],
        "snapshots": {s: _snapshot_summary(pages, written[s]) for s in SNAPSHOTS},
        "totals": {
            "kinds": dict(sorted(Counter(p.kind for p in pages).items())),
            "languages": dict(sorted(Counter(p.lang for p in pages).items())),
        },
        "eval": {"items": len(evals.ITEMS),
                 "quoted_items": sorted({i for p in pages for i in p.eval_items})},
        "blocklist": {"domains": list(BLOCKED_DOMAINS), "never_crawled": list(BLOCKED_ELSEWHERE)},
        "sites": [{"domain": s.domain, "lang": s.lang, "boilerplate": list(s.boilerplate)}
                  for s in SITES],
        "truth": TRUTH,
    }
    (root / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n",
                                 encoding="utf-8")
