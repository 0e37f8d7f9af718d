"""The `documents` stage: WARC records (or curated source files) to rows of the document contract.

One task per input file: task boundaries depend only on the input, never on the worker count, and
each task writes its own part, its rejects and then its completion marker, so a killed run redoes
only unfinished tasks. Cheap rejections (record type, size, URL blocklist, language pre-check) run
before the expensive extraction.
"""

from __future__ import annotations

import heapq
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from curation.config import DocumentsSettings, SourceConfig, stable_hash
from curation.executor import map_tasks
from curation.extract import (
    Extractor,
    Rejected,
    decode_html,
    is_blocked,
    load_blocklist,
    precheck_language,
    url_host,
)
from curation.partition import Manifest, PartFile, PartitionLayout
from curation.schema import (
    DOCUMENT_SCHEMA,
    REJECT_SCHEMA,
    WEB_SOURCE,
    sample_rank,
    source_doc_id,
    web_doc_id,
)
from curation.stats import StageStats
from curation.storage import InputReader, Store, parquet_bytes, read_parquet
from curation.warc import ReadFailure, WarcItem, iter_warc

ASSET = "documents"
# Bumped whenever this module's output for the same input changes.
KERNEL_VERSION = "documents-1"
HTML_TYPES = ("text/html", "application/xhtml+xml")


@dataclass(frozen=True)
class Task:
    """One input file of one partition."""

    index: int
    partition: str
    location: str
    version: str
    source: str = WEB_SOURCE
    source_config: SourceConfig | None = None


@dataclass
class TaskResult:
    index: int
    part: PartFile
    stats: StageStats
    sample_ids: list[str]
    skipped: bool = False


@dataclass
class DocumentsRun:
    """What a partition's run produced: its manifest, merged stats, samples and wall time."""

    manifest: Manifest
    stats: StageStats
    samples: list[dict[str, Any]]
    wall_seconds: float
    results: list[TaskResult] = field(default_factory=list)

    # Shortcuts used by benchmarks and the CLI.
    @property
    def records_in(self) -> int:
        return self.stats.records_in

    @property
    def docs_out(self) -> int:
        return self.stats.docs_out

    @property
    def seconds(self) -> float:
        return self.wall_seconds

    @property
    def rejects(self) -> dict[str, int]:
        return dict(self.stats.rejects)


def reject_key(partition: str, index: int) -> str:
    return f"rejects/{partition}/{ASSET}-{index:05d}.parquet"


class _Collector:
    """Rows, rejects and stats of one task."""

    def __init__(self, task: Task, sample_size: int) -> None:
        self.task = task
        self.rows: list[dict[str, Any]] = []
        self.rejects: list[dict[str, Any]] = []
        self.stats = StageStats(tasks_run=1)
        self._sample_size = sample_size

    def reject(self, stage: str, reason: str, url: str | None, offset: int | None,
               message: str = "") -> None:
        self.stats.rejects[reason] += 1
        self.rejects.append({"stage": stage, "url": url, "warc_file": self.task.location,
                             "warc_offset": offset, "reason": reason, "message": message[:500]})

    def keep(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        self.stats.docs_out += 1
        self.stats.text_bytes += len(row["text"].encode())

    def sample_ids(self) -> list[str]:
        ids = (row["doc_id"] for row in self.rows)
        return heapq.nsmallest(self._sample_size, ids, key=sample_rank)


# --- WARC input ------------------------------------------------------------------------------


def _is_html(item: WarcItem) -> bool:
    return item.content_type is not None and item.content_type.startswith(HTML_TYPES)


def _web_row(task: Task, item: WarcItem, text: str, charset: str) -> dict[str, Any]:
    return {
        "doc_id": web_doc_id(task.partition, item.record_id, task.location, item.offset),
        "source": WEB_SOURCE,
        "url": item.url,
        "domain": url_host(item.url) or None,
        "snapshot": task.partition,
        "warc_file": task.location,
        "warc_offset": item.offset,
        "fetched_at": item.date,
        "charset": charset,
        "html_bytes": len(item.payload or b""),
        "licence": None,
        "text": text,
    }


def _process_record(item: WarcItem, task: Task, settings: DocumentsSettings,
                    extractor: Extractor, blocklist: frozenset[str], out: _Collector) -> None:
    out.stats.record_types[item.record_type] += 1
    if item.record_type != "response":
        return
    if not _is_html(item):
        out.stats.non_html[item.content_type or "unknown"] += 1
        return
    out.stats.candidates += 1
    payload = item.payload or b""
    out.stats.html_bytes += len(payload)
    try:
        if item.http_status is not None and not 200 <= item.http_status < 300:
            raise Rejected("http_status", f"HTTP {item.http_status}")
        if blocklist and is_blocked(url_host(item.url), blocklist):
            raise Rejected("url_blocklist", url_host(item.url))
        if len(payload) > settings.max_html_bytes:
            raise Rejected("too_large", f"{len(payload)} bytes > {settings.max_html_bytes}")
        if len(payload) < settings.min_html_bytes:
            raise Rejected("too_small", f"{len(payload)} bytes < {settings.min_html_bytes}")
        html, charset = decode_html(payload, item.charset)
        precheck_language(html, settings.language_precheck, settings.languages)
        text = extractor.extract(html, item.url)
    except Rejected as rejected:
        out.reject(_STAGE_OF_REASON.get(rejected.reason, "extract"), rejected.reason, item.url,
                   item.offset, str(rejected))
        return
    out.keep(_web_row(task, item, text, charset))


_STAGE_OF_REASON = {
    "http_status": "pre_extract",
    "url_blocklist": "url_filter",
    "too_large": "size_limit",
    "too_small": "size_limit",
    "bad_charset": "charset",
    "language_precheck": "language_precheck",
}


def _read_warc(task: Task, path: Path, settings: DocumentsSettings, out: _Collector) -> None:
    extractor = Extractor(settings)
    blocklist = load_blocklist(settings.url_blocklist)
    for item in iter_warc(path):
        if isinstance(item, ReadFailure):
            out.stats.records_in += 1
            out.reject("warc_read", item.reason, None, item.offset, item.message)
            continue
        out.stats.records_in += 1
        if item.truncated:
            out.reject("warc_read", "truncated_record", item.url, item.offset)
            continue
        _process_record(item, task, settings, extractor, blocklist, out)


# --- curated sources -------------------------------------------------------------------------


def _source_records(path: Path, config: SourceConfig) -> Iterator[tuple[int, dict[str, Any]]]:
    if config.format == "text":
        yield 0, {config.text_field: path.read_text(encoding="utf-8", errors="replace")}
    elif config.format == "parquet":
        for line, row in enumerate(pq.read_table(path).to_pylist()):
            yield line, row
    else:
        with open(path, encoding="utf-8") as handle:
            for line, raw in enumerate(handle):
                if raw.strip():
                    yield line, json.loads(raw)


def _read_source(task: Task, path: Path, settings: DocumentsSettings, out: _Collector) -> None:
    config = task.source_config
    assert config is not None
    name = Path(task.location).name
    try:
        for line, record in _source_records(path, config):
            out.stats.records_in += 1
            out.stats.candidates += 1
            text = str(record.get(config.text_field) or "").strip()
            url = record.get(config.url_field) if config.url_field else None
            url = url or f"source://{task.source}/{name}#{line}"
            if len(text) < settings.min_text_chars:
                out.reject("source_read", "empty_text", url, line)
                continue
            out.keep({
                "doc_id": source_doc_id(task.source, name, line), "source": task.source,
                "url": url, "domain": None, "snapshot": None, "warc_file": None,
                "warc_offset": None, "fetched_at": None, "charset": "utf-8", "html_bytes": None,
                "licence": config.licence, "text": text,
            })
    except (ValueError, OSError, UnicodeDecodeError) as error:
        out.reject("source_read", "unreadable_file", None, None, f"{type(error).__name__}: {error}")


# --- tasks -----------------------------------------------------------------------------------


def run_task(task: Task, settings: DocumentsSettings, store: Store,
             reader: InputReader) -> TaskResult:
    """Process one input file unless its completion marker says it is done under this version."""
    layout = PartitionLayout(store, ASSET, task.partition)
    marker = layout.read_marker(task.index)
    if marker is not None and marker["version"] == task.version:
        stats = StageStats.from_dict(marker["stats"])
        stats.tasks_run, stats.tasks_skipped = 0, 1
        return TaskResult(task.index, PartFile(**marker["part"]), stats, marker["sample_ids"],
                          skipped=True)
    started = time.perf_counter()
    out = _Collector(task, settings.sample_size)
    with reader.local_copy(task.location) as path:
        out.stats.input_bytes = path.stat().st_size
        if task.source_config is None:
            _read_warc(task, path, settings, out)
        else:
            _read_source(task, path, settings, out)
    part = layout.write_part(task.index, pa.Table.from_pylist(out.rows, DOCUMENT_SCHEMA))
    store.write_bytes(reject_key(task.partition, task.index),
                      parquet_bytes(pa.Table.from_pylist(out.rejects, REJECT_SCHEMA)))
    out.stats.task_seconds = time.perf_counter() - started
    sample_ids = out.sample_ids()
    layout.write_marker(task.index, {"version": task.version, "part": part.__dict__,
                                     "stats": out.stats.to_dict(), "sample_ids": sample_ids})
    return TaskResult(task.index, part, out.stats, sample_ids)


@dataclass(frozen=True)
class _TaskRunner:
    """Picklable callable for worker processes."""

    settings: DocumentsSettings
    store: Store
    reader: InputReader

    def __call__(self, task: Task) -> TaskResult:
        return run_task(task, self.settings, self.store, self.reader)


def run_version(settings: DocumentsSettings, inputs: list[str], partition_entry: Any = None,
                input_versions: list[str] | None = None) -> str:
    """The partition's version: kernel, library versions, settings, its entry and inputs."""
    from curation.versions import library_versions

    return stable_hash({
        "kernel": KERNEL_VERSION, "libraries": library_versions(),
        "settings": settings.model_dump(mode="json"),
        "entry": partition_entry.model_dump(mode="json") if partition_entry is not None else None,
        "inputs": inputs, "input_versions": input_versions,
    })


def run_documents(
    snapshot: str,
    warc_files: list[str],
    store: Store,
    settings: DocumentsSettings,
    workers: int = 1,
    *,
    reader: InputReader | None = None,
    source: str = WEB_SOURCE,
    source_config: SourceConfig | None = None,
    version: str | None = None,
    on_task_done: Callable[[TaskResult, int, int], None] | None = None,
) -> DocumentsRun:
    """Runs the documents stage for one partition and writes its manifest last."""
    started = time.perf_counter()
    reader = reader or InputReader()
    version = version or run_version(settings, warc_files, source_config)
    layout = PartitionLayout(store, ASSET, snapshot)
    layout.prepare(version)
    tasks = [Task(index, snapshot, location, version, source, source_config)
             for index, location in enumerate(warc_files)]
    results = map_tasks(_TaskRunner(settings, store, reader), tasks, workers, on_task_done)
    stats = sum((result.stats for result in results), StageStats())
    samples = _write_samples(store, snapshot, results, settings.sample_size)
    manifest = Manifest(ASSET, snapshot, version, [result.part for result in results],
                        extra={"stats": stats.to_dict()})
    layout.write_manifest(manifest)
    return DocumentsRun(manifest, stats, samples, time.perf_counter() - started, results)


def _write_samples(store: Store, partition: str, results: list[TaskResult],
                   size: int) -> list[dict[str, Any]]:
    """Spot-check samples in `samples/documents/{partition}.jsonl`, chosen by a hash of the
    doc_id so they do not depend on task order."""
    candidates = [doc_id for result in results for doc_id in result.sample_ids]
    chosen = set(heapq.nsmallest(size, candidates, key=sample_rank))
    rows: list[dict[str, Any]] = []
    for result in results:
        if chosen.intersection(result.sample_ids):
            table = read_parquet(store, result.part.key)
            mask = pc.is_in(table["doc_id"], pa.array(sorted(chosen)))
            rows.extend(table.filter(mask).to_pylist())
    rows.sort(key=lambda row: sample_rank(row["doc_id"]))
    lines = [json.dumps(row, default=str, ensure_ascii=False) for row in rows]
    store.write_bytes(f"samples/{ASSET}/{partition}.jsonl", ("\n".join(lines) + "\n").encode())
    return rows
