"""The `documents` stage: WARC records (or curated source files) to rows of the document contract.

One task per input file: task boundaries depend only on the input, never on the worker count, and
each task writes its own part, its rejects and then its completion marker, so a killed run redoes
only unfinished tasks. Cheap rejections (record type, size, URL blocklist, language pre-check) run
before the expensive extraction.
"""

from __future__ import annotations

import json
import logging
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from curation.config import DocumentsSettings, SourceConfig, stable_hash
from curation.extract import (
    Extractor,
    Rejected,
    decode_html,
    precheck_language,
    sniff_binary,
    unwrap_payload,
)
from curation.graph import DOCUMENTS
from curation.inputs import name_files
from curation.partition import Manifest, PartitionLayout
from curation.schema import DOCUMENT_SCHEMA, REJECT_SCHEMA, WEB_SOURCE, source_doc_id, web_doc_id
from curation.stats import StageStats
from curation.storage import InputReader, Store
from curation.tasks import (
    LockSettings,
    PartitionRun,
    TaskOutput,
    TaskResult,
    run_partition,
    sample_candidates,
)
from curation.urlfilter import UrlFilter, url_host
from curation.versions import library_versions
from curation.warc import HTTP_HEAD_BYTES, ReadFailure, WarcItem, iter_warc

ASSET = DOCUMENTS
# Bumped whenever this module's output for the same input changes.
# 2: own WARC framing (bad Content-Length, garbled headers), de-chunked payloads, binary sniffing,
#    UTF-8 behind single-byte labels, depth limit, CPU-time extraction limit.
# 3: trafilatura's form rescue (curation.form_rescue), code files
KERNEL_VERSION = "documents-3"
FILES_PER_TASK = 256  # `format: files`: a repository's files are small, a task per file too many
HTML_TYPES = ("text/html", "application/xhtml+xml")
log = logging.getLogger(__name__)
# Reject reasons that condemn a whole input file rather than one of its records: what each
# says about the file. A partition with such files is not whole, however well its pages survive.
FILE_PROBLEMS = {
    "empty_file": "the file has no bytes",
    "not_warc": "no WARC record in the file",
    "no_responses": "no response records (a WET or WAT file?)",
    "truncated_record": "the file ends inside a record: it was cut short",
    "read_error": "the reader failed part-way: the rest of the file is unread",
    "unreadable_file": "the source file could not be read",
}


@dataclass(frozen=True)
class Task:
    """One input file of one partition."""

    index: int
    partition: str
    location: str
    source: str = WEB_SOURCE
    source_config: SourceConfig | None = None
    # `format: files`: the files this task reads (`location` is the first) and the source's
    # folder, which their paths (and so their doc_ids) are relative to.
    files: tuple[str, ...] = ()
    root: str = ""


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


class _Collector:
    """Rows, rejects and stats of one task."""

    def __init__(self, task: Task, sample_size: int) -> None:
        self.task = task
        self.rows: list[dict[str, Any]] = []
        self.rejects: list[dict[str, Any]] = []
        self.stats = StageStats()
        self._sample_size = sample_size

    def reject(self, stage: str, reason: str, url: str | None, offset: int | None,
               message: str = "", file: str | None = None) -> None:
        self.stats.rejects[reason] += 1
        self.rejects.append({"stage": stage, "url": url,
                             "warc_file": file or self.task.location,
                             "warc_offset": offset, "reason": reason, "message": message[:500]})

    def keep(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        self.stats.docs_out += 1
        self.stats.text_bytes += len(row["text"].encode())

    def sample_ids(self) -> list[str]:
        return sample_candidates([row["doc_id"] for row in self.rows], self._sample_size)


# --- WARC input ------------------------------------------------------------------------------


def _is_html(item: WarcItem) -> bool:
    return item.content_type is not None and item.content_type.startswith(HTML_TYPES)


def _web_row(task: Task, item: WarcItem, text: str, charset: str,
             html_bytes: int) -> dict[str, Any]:
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
        "html_bytes": html_bytes,
        "licence": None,
        "text": text,
    }


def _process_record(item: WarcItem, task: Task, settings: DocumentsSettings,
                    extractor: Extractor, url_filter: UrlFilter, out: _Collector) -> None:
    out.stats.record_types[item.record_type] += 1
    if item.record_type != "response":
        return
    if not _is_html(item):
        out.stats.non_html[item.content_type or "unknown"] += 1
        return
    out.stats.candidates += 1
    payload = item.payload or b""
    out.stats.html_bytes += len(payload)
    if item.dechunked:
        out.stats.counts["dechunked_payloads"] += 1
    try:
        if item.url is None:
            raise Rejected("corrupt_header", "response record without a WARC-Target-URI")
        if item.http_status is not None and not 200 <= item.http_status < 300:
            raise Rejected("http_status", f"HTTP {item.http_status}")
        if filtered := url_filter.check(item.url):
            raise Rejected(*filtered)
        if item.oversized or len(payload) > settings.max_html_bytes:
            size = item.content_length if item.oversized else len(payload)
            raise Rejected("too_large", f"{size} bytes > {settings.max_html_bytes}")
        payload = unwrap_payload(payload, settings.max_html_bytes)
        if len(payload) < settings.min_html_bytes:
            raise Rejected("too_small", f"{len(payload)} bytes < {settings.min_html_bytes}")
        if kind := sniff_binary(payload):
            raise Rejected("binary_payload", f"{kind} labelled {item.content_type}")
        html, charset = decode_html(payload, item.charset)
        parsed = extractor.parse(html)
        precheck_language(parsed, settings.language_precheck, settings.languages)
        text = extractor.extract(html, item.url, parsed)
    except Rejected as rejected:
        out.reject(_STAGE_OF_REASON.get(rejected.reason, "extract"), rejected.reason, item.url,
                   item.offset, str(rejected))
        return
    out.keep(_web_row(task, item, text, charset, len(payload)))


_STAGE_OF_REASON = {
    "corrupt_header": "warc_read",
    "http_status": "pre_extract",
    "url_blocklist": "url_filter",
    "url_banned_substring": "url_filter",
    "too_large": "size_limit",
    "too_small": "size_limit",
    "too_deep": "size_limit",
    "binary_payload": "pre_extract",
    "bad_charset": "charset",
    "language_precheck": "language_precheck",
}


def _failure_message(error: BaseException) -> str:
    where = traceback.extract_tb(error.__traceback__)[-1:]
    place = f" at {where[0].filename.rsplit('/', 1)[-1]}:{where[0].lineno}" if where else ""
    return f"{type(error).__name__}: {error}{place}"


def _read_warc(task: Task, path: Path, settings: DocumentsSettings, out: _Collector) -> None:
    extractor = Extractor(settings)
    options = settings.url_filter
    url_filter = UrlFilter.load(options.domain_blocklist, options.banned_substrings,
                                options.use_default_substrings)
    records = 0
    failures = 0
    offset: int | None = None
    try:
        # Blocks past the size limit (plus room for HTTP headers) are never held in memory.
        for item in iter_warc(path, settings.max_html_bytes + HTTP_HEAD_BYTES):
            out.stats.records_in += 1
            if isinstance(item, ReadFailure):
                failures += 1
                out.reject("warc_read", item.reason, item.url, item.offset, item.message)
                continue
            records += 1
            offset = item.offset
            if item.truncated:
                out.reject("warc_read", "truncated_record", item.url, item.offset)
                continue
            try:
                _process_record(item, task, settings, extractor, url_filter, out)
            except Exception as error:  # noqa: BLE001 - one record never ends the run
                log.exception("documents: record at %s:%s failed", task.location, item.offset)
                out.reject(ASSET, "internal_error", item.url, item.offset,
                           _failure_message(error))
    except Exception as error:  # noqa: BLE001 - nor does a reader bug: keep what was read
        log.exception("documents: reading %s failed after offset %s", task.location, offset)
        out.reject("warc_read", "read_error", None, offset, _failure_message(error))
        return
    if records and not failures and not out.stats.record_types["response"]:
        kinds = ", ".join(f"{count} {kind}" for kind, count in
                          sorted(out.stats.record_types.items()))
        hint = " (a WET or WAT file?)" if out.stats.record_types["conversion"] or \
            out.stats.record_types["metadata"] else ""
        out.reject("warc_read", "no_responses", None, None,
                   f"the file holds no response records, only {kinds}{hint}")


# --- curated sources -------------------------------------------------------------------------


def _source_records(path: Path, config: SourceConfig) -> Iterator[tuple[int, Any]]:
    if config.format == "text":
        yield 0, {config.text_field: path.read_text(encoding="utf-8", errors="replace")}
    elif config.format == "parquet":
        for line, row in enumerate(pq.read_table(path).to_pylist()):
            yield line, row
    else:
        with open(path, encoding="utf-8") as handle:
            for line, raw in enumerate(handle):
                if raw.strip():
                    try:
                        yield line, json.loads(raw)
                    except ValueError as error:  # one bad line, not the whole file
                        yield line, error


def _record_url(task: Task, config: SourceConfig, record: dict[str, Any], name: str,
                line: int) -> str:
    """The record's URL field, else its file's path in its repository for a code row, else
    `source://SOURCE/FILE#LINE`."""
    url = record.get(config.url_field) if config.url_field else None
    if url:
        return str(url)
    path = record.get(config.path_field) if config.path_field else None
    if path:
        repository = record.get(config.repository_field) if config.repository_field else None
        return f"source://{task.source}/" + "/".join(str(p) for p in (repository, path) if p)
    return f"source://{task.source}/{name}#{line}"


def _source_row(task: Task, doc_id: str, url: str, licence: str, text: str) -> dict[str, Any]:
    return {"doc_id": doc_id, "source": task.source, "url": url, "domain": None,
            "snapshot": None, "warc_file": None, "warc_offset": None, "fetched_at": None,
            "charset": "utf-8", "html_bytes": None, "licence": licence, "text": text}


def _read_source(task: Task, path: Path, settings: DocumentsSettings, out: _Collector) -> None:
    config = task.source_config
    assert config is not None
    name = Path(task.location).name
    try:
        for line, record in _source_records(path, config):
            out.stats.records_in += 1
            if not isinstance(record, dict):
                what = f"{type(record).__name__}: {record}" if isinstance(record, Exception) \
                    else f"a JSON {type(record).__name__}, not an object"
                out.reject("source_read", "unreadable_record",
                           f"source://{task.source}/{name}#{line}", line, what)
                continue
            out.stats.candidates += 1
            text = str(record.get(config.text_field) or "").strip()
            url = _record_url(task, config, record, name, line)
            if len(text) < settings.min_text_chars:
                out.reject("source_read", "empty_text", url, line)
                continue
            licence = record.get(config.licence_field) if config.licence_field else None
            out.keep(_source_row(task, source_doc_id(task.source, name, line), url,
                                 str(licence or config.licence), text))
    except (ValueError, OSError, UnicodeDecodeError) as error:
        out.reject("source_read", "unreadable_file", None, None, f"{type(error).__name__}: {error}")


_BINARY_SNIFF = 8192


def _read_file(task: Task, location: str, path: Path, settings: DocumentsSettings,
               out: _Collector) -> None:
    """One file of a `format: files` source as one document, its path relative to the
    source's folder; a file too large, binary or not UTF-8 is rejected with its reason."""
    config = task.source_config
    assert config is not None
    folder = task.root.rstrip("/") + "/"
    relative = location.removeprefix(folder) if location.startswith(folder) \
        else Path(location).name
    url = f"source://{task.source}/{relative}"
    out.stats.records_in += 1
    try:
        size = path.stat().st_size
        raw = path.read_bytes() if size <= config.max_file_bytes else b""
    except OSError as error:  # one unreadable file, not the task
        out.reject("source_read", "unreadable_file", url, None,
                   f"{type(error).__name__}: {error}", location)
        return
    out.stats.input_bytes += size
    if size > config.max_file_bytes:
        out.reject("source_read", "file_too_large", url, None,
                   f"{size} bytes, over max_file_bytes {config.max_file_bytes}", location)
        return
    if b"\0" in raw[:_BINARY_SNIFF]:
        out.reject("source_read", "binary_file", url, None, "a NUL byte in its head", location)
        return
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError as error:
        out.reject("source_read", "not_utf8", url, None, str(error), location)
        return
    out.stats.candidates += 1
    if len(text) < settings.min_text_chars:
        out.reject("source_read", "empty_text", url, None, "", location)
        return
    out.keep(_source_row(task, source_doc_id(task.source, relative, 0), url, config.licence,
                         text))


# --- file-level problems ---------------------------------------------------------------------


def problem_files(rejects: pa.Table) -> list[dict[str, str]]:
    """One row per input file with a file-level problem (`FILE_PROBLEMS`), in file order:
    `file`, `problem` (the reasons, comma-separated) and `message` (the first one's detail)."""
    found: dict[str, dict[str, str]] = {}
    for row in rejects.select(["warc_file", "reason", "message"]).to_pylist():
        if row["reason"] not in FILE_PROBLEMS or row["warc_file"] is None:
            continue
        entry = found.setdefault(row["warc_file"], {
            "file": row["warc_file"], "problem": row["reason"],
            "message": row["message"] or FILE_PROBLEMS[row["reason"]]})
        if row["reason"] not in entry["problem"].split(", "):
            entry["problem"] += f", {row['reason']}"
    return [found[name] for name in sorted(found)]


def partition_problem_files(store: Store, partition: str) -> list[dict[str, str]]:
    """`problem_files` of a complete partition's rejects."""
    layout = PartitionLayout(store, ASSET, partition)
    if not layout.complete_manifest().table_parts("rejects"):
        return []
    return problem_files(layout.read_table(["warc_file", "reason", "message"], name="rejects"))


def describe_problem_files(problems: list[dict[str, str]], limit: int = 5) -> str:
    """`a.warc.gz (empty_file), b.wet.gz (no_responses)` and how many more, for one line."""
    return name_files([f"{row['file']} ({row['problem']})" for row in problems], limit)


# --- tasks -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class DocumentsWork:
    """Picklable work for worker processes: task `index` reads input file `index`."""

    tasks: tuple[Task, ...]
    settings: DocumentsSettings
    reader: InputReader

    def __call__(self, index: int) -> TaskOutput:
        task = self.tasks[index]
        out = _Collector(task, self.settings.sample_size)
        if task.files:
            for location in task.files:
                with self.reader.local_copy(location) as path:
                    _read_file(task, location, path, self.settings, out)
            return self._output(out)
        with self.reader.local_copy(task.location) as path:
            out.stats.input_bytes = path.stat().st_size
            if task.source_config is None:
                _read_warc(task, path, self.settings, out)
            else:
                _read_source(task, path, self.settings, out)
        return self._output(out)

    @staticmethod
    def _output(out: _Collector) -> TaskOutput:
        tables = {"part": pa.Table.from_pylist(out.rows, DOCUMENT_SCHEMA),
                  "rejects": pa.Table.from_pylist(out.rejects, REJECT_SCHEMA)}
        return TaskOutput(tables, out.stats, out.sample_ids())


def run_version(settings: DocumentsSettings, inputs: list[str], partition_entry: Any = None,
                input_versions: list[str] | None = None) -> str:
    """The partition's version: kernel, library versions, settings, its entry and inputs."""
    return stable_hash({
        "kernel": KERNEL_VERSION, "libraries": library_versions(),
        # The survival bounds only judge the output (a check), so they do not version it.
        "settings": settings.model_dump(mode="json", exclude={"survival"}),
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
    source_root: str | None = None,
    version: str | None = None,
    on_task_done: Callable[[TaskResult, int, int], None] | None = None,
    lock: LockSettings | None = None,
    run_id: str | None = None,
) -> DocumentsRun:
    """Runs (or resumes) the documents stage for one partition; the manifest is written last.
    The partition is locked for the run (see `curation.tasks.PartitionLock`). A `format:
    files` source reads `FILES_PER_TASK` files a task, their paths relative to `source_root`
    (the source's folder)."""
    version = version or run_version(settings, warc_files, source_config)
    if source_config is not None and source_config.format == "files":
        groups = [tuple(warc_files[at:at + FILES_PER_TASK])
                  for at in range(0, len(warc_files), FILES_PER_TASK)]
        tasks = tuple(Task(index, snapshot, group[0], source, source_config, group,
                           source_root or "")
                      for index, group in enumerate(groups))
    else:
        tasks = tuple(Task(index, snapshot, location, source, source_config)
                      for index, location in enumerate(warc_files))
    work = DocumentsWork(tasks, settings, reader or InputReader())
    result = run_partition(PartitionRun(store, ASSET, snapshot, version), len(tasks), work,
                           workers, on_task_done, lock=lock, run_id=run_id,
                           samples=(settings.sample_size, f"samples/{ASSET}/{snapshot}.jsonl"))
    return DocumentsRun(result.manifest, result.stats, result.samples, result.wall_seconds,
                        result.results)
