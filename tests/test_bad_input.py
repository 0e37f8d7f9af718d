"""Bad input for the `documents` stage, built from the real WARC files in ../shared/data.

Every bad input must give counted rejects with a clear message in the rejects table, the rest of
its file must be processed, nothing valid may be lost (every other record comes out exactly as
from the clean file), and the run must never die. All cases run as one partition (one task per
file) once per module; each test then checks its own file.

docs/faults.md lists these cases with what happened before and after the fixes.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curation.config import DocumentsSettings, SourceConfig
from curation.partition import PartitionLayout
from curation.stages.documents import FILE_PROBLEMS, problem_files, run_documents
from curation.storage import LocalStore
from curation.warc import WarcItem, iter_warc
from tests.conftest import require_shared_data

CC_2020 = "warc/cc-main-2020-34_resiliparse_16responses.warc.gz"
IA = "warc/non_cc/ia-heritrix-2008_archive-org-shallow_299responses.warc.gz"
WET = "warc/cc-main-2024-22_whirlwind_1record.warc.wet.gz"
BOOK = "sources/books_gutenberg/pg84.txt"
# A real article page with 213 non-ASCII characters, all in windows-1252.
PAGE = ("html_extraction/article-extraction-benchmark/html/"
        "b3c19dd5f0612d098788fa5173e491b3280da6226b492f8fe110f4ab1896cca8.html.gz")
PARTITION = "BAD"
FIFTY_MB = 50 * 1024 * 1024


# --- building inputs from real records ---------------------------------------------------------


def members(path: Path) -> list[bytes]:
    """The decompressed record of each gzip member (one record per member in these files)."""
    data = path.read_bytes()
    offsets = [item.offset for item in iter_warc(path) if isinstance(item, WarcItem)]
    return [gzip.decompress(data[a:b]) for a, b in zip(offsets, [*offsets[1:], len(data)],
                                                       strict=True)]


def gz(records: list[bytes]) -> bytes:
    return b"".join(gzip.compress(record, compresslevel=1) for record in records)


def split(record: bytes) -> tuple[bytes, bytes, bytes]:
    """WARC header (with its blank line), HTTP head (with its blank line), HTTP body."""
    end = record.index(b"\r\n\r\n") + 4
    length = int(re.search(rb"Content-Length: (\d+)", record[:end]).group(1))
    block = record[end:end + length]
    head_end = block.index(b"\r\n\r\n") + 4
    return record[:end], block[:head_end], block[head_end:]


def rebuild(record: bytes, body: bytes | None = None, content_type: bytes | None = None,
            extra_http: bytes = b"") -> bytes:
    """The response record with a new HTTP body and/or Content-Type, lengths made right and the
    (now wrong) digests dropped."""
    header, head, old_body = split(record)
    body = old_body if body is None else body
    head = re.sub(rb"(?im)^(content-length|content-encoding|transfer-encoding|"
                  rb"x-crawler-[a-z-]+):[^\r\n]*\r\n", b"", head)
    if content_type is not None:
        head = re.sub(rb"(?im)^content-type:[^\r\n]*", b"Content-Type: " + content_type, head)
    head = head[:-2] + extra_http + b"\r\n"
    block = head + body
    header = re.sub(rb"(?im)^warc-(block|payload)-digest:[^\r\n]*\r\n", b"", header)
    header = re.sub(rb"Content-Length: \d+", b"Content-Length: %d" % len(block), header)
    return header + block + b"\r\n\r\n"


def set_length(record: bytes, delta: int) -> bytes:
    found = re.search(rb"Content-Length: (\d+)", record)
    return (record[:found.start(1)] + str(int(found.group(1)) + delta).encode()
            + record[found.end(1):])


def url_of(record: bytes) -> str:
    return re.search(rb"WARC-Target-URI: ([^\r\n]+)", record).group(1).decode()


@dataclass
class Case:
    name: str
    data: bytes
    # Rejects the damage must cause (reason -> count), on top of the clean file's.
    rejects: dict[str, int]
    # URLs of the clean file whose outcome may differ (the damaged records, or all after a cut).
    damaged: set[str] = field(default_factory=set)
    # URL -> the case whose document for that URL must have the same text (the same page,
    # labelled correctly): nothing valid lost, decoded right.
    same_text_as: dict[str, str] = field(default_factory=dict)


def _page_html() -> str:
    raw = gzip.decompress((require_shared_data() / PAGE).read_bytes())
    return raw.decode("utf-8")


def deep_page(page: str, depth: int = 100_000) -> str:
    """The page with its body wrapped in `depth` nested divs."""
    return re.sub(r"(?is)<body([^>]*)>(.*)</body>",
                  lambda m: f"<body{m.group(1)}>" + "<div>" * depth + m.group(2)
                  + "</div>" * depth + "</body>", page, count=1)


def _image_payload(shared: Path, kind: str) -> bytes:
    for item in iter_warc(shared / IA):
        if isinstance(item, WarcItem) and item.content_type == kind and \
                item.record_type == "response" and item.payload and len(item.payload) > 1000:
            return item.payload
    raise AssertionError(f"no {kind} payload in {IA}")


def build_cases(shared: Path) -> tuple[list[bytes], int, list[Case]]:
    """The clean records, the index of the damaged response and every bad-input case."""
    records = members(shared / CC_2020)
    responses = [i for i, r in enumerate(records) if b"WARC-Type: response" in r[:200]]
    k = responses[3]  # the 4th response: a page that becomes a document in the clean run
    target = records[k]
    url = url_of(target)
    after_cut = {url_of(r) for r in records[k:] if b"WARC-Type: response" in r[:200]}

    def with_record(new: bytes | None) -> list[bytes]:
        return records[:k] + ([new] if new is not None else []) + records[k + 1:]

    page = _page_html()
    page_cp1252 = page.encode("cp1252")
    no_meta = re.sub(r"(?i)<meta[^>]*charset[^>]*>", "", page)
    compressed = [gzip.compress(r, compresslevel=1) for r in records]
    cut_member = compressed[k][: len(compressed[k]) // 2]
    deep = deep_page(page)
    huge = page.replace("</body>", "<!--" + "x" * FIFTY_MB + "--></body>", 1)
    cases = [
        Case("truncated-last-member", b"".join(compressed[:k]) + cut_member,
             {"truncated_record": 1}, after_cut),
        Case("truncated-member-mid-file", b"".join(compressed[:k]) + cut_member
             + b"".join(compressed[k + 1:]), {"corrupt_gzip": 1}, {url}),
        Case("garbled-version-line", gz(with_record(target.replace(b"WARC/1.0", b"WARX/1.0", 1))),
             {"corrupt_header": 1}, {url}),
        Case("unknown-warc-type", gz(with_record(
            target.replace(b"WARC-Type: response", b"WARC-Type: resp\xffnse", 1))),
            {"corrupt_header": 1}, {url}),
        Case("content-length-not-a-number", gz(with_record(
            target.replace(b"Content-Length: ", b"Content-Length: 12x", 1))),
            {"corrupt_header": 1}, {url}),
        Case("missing-target-uri", gz(with_record(
            re.sub(rb"WARC-Target-URI: [^\r\n]+\r\n", b"", target))), {"corrupt_header": 1},
            {url}),
        Case("content-length-too-small", gz(with_record(set_length(target, -2000))),
             {"bad_content_length": 1}, {url}),
        Case("content-length-too-large", gz(with_record(set_length(target, 2000))),
             {"bad_content_length": 1}, {url}),
        Case("content-length-huge", gz(with_record(set_length(target, 10**9))),
             {"bad_content_length": 1}, {url}),
        Case("plain-content-length-too-small", b"".join(with_record(set_length(target, -2000))),
             {"bad_content_length": 1}, {url}),
        Case("plain-content-length-too-large", b"".join(with_record(set_length(target, 2000))),
             {"bad_content_length": 1}, {url}),
        Case("plain-content-length-huge", b"".join(with_record(set_length(target, 10**9))),
             {"bad_content_length": 1}, {url}),
        Case("page-labelled-right", gz(with_record(rebuild(
            target, page.encode(), b"text/html; charset=utf-8"))), {}, {url}),
        Case("utf8-label-on-cp1252-page", gz(with_record(rebuild(
            target, page_cp1252, b"text/html; charset=utf-8"))), {}, {url},
            {url: "page-labelled-right"}),
        Case("latin1-label-on-utf8-page", gz(with_record(rebuild(
            target, page.encode(), b"text/html; charset=iso-8859-1"))), {}, {url},
            {url: "page-labelled-right"}),
        Case("no-meta-labelled-right", gz(with_record(rebuild(
            target, no_meta.encode(), b"text/html; charset=utf-8"))), {}, {url}),
        Case("undeclared-cp1252-page", gz(with_record(rebuild(
            target, no_meta.encode("cp1252"), b"text/html"))), {}, {url},
            {url: "no-meta-labelled-right"}),
        Case("gzip-encoded-body", gz(with_record(rebuild(
            target, gzip.compress(page.encode()), b"text/html; charset=utf-8",
            b"Content-Encoding: gzip\r\n"))), {}, {url}, {url: "page-labelled-right"}),
        Case("fifty-mb-page", gz(with_record(rebuild(target, huge.encode())))
             , {"too_large": 1}, {url}),
        Case("deeply-nested-html", gz(with_record(rebuild(target, deep.encode()))),
             {"too_deep": 1}, {url}),
        Case("gif-labelled-html", gz(with_record(rebuild(
            target, _image_payload(shared, "image/gif"), b"text/html"))),
            {"binary_payload": 1}, {url}),
        Case("random-bytes-labelled-html", gz(with_record(rebuild(
            target, zlib.compress(page.encode()) * 3, b"text/html; charset=utf-8"))),
            {"binary_payload": 1}, {url}),
        Case("junk-between-members", b"".join(compressed[:k]) + os.urandom(3000)
             + b"".join(compressed[k:]), {"corrupt_record": 1}),
        Case("junk-after-last-member", b"".join(compressed) + b"\0" * 512,
             {"corrupt_record": 1}),
        Case("zero-byte-file", b"", {"empty_file": 1}, after_cut | _all_urls(records)),
        Case("png-file", _image_payload(shared, "image/png"), {"not_warc": 1},
             _all_urls(records)),
        Case("text-file", (shared / BOOK).read_bytes(), {"not_warc": 1}, _all_urls(records)),
        Case("wet-file-as-warc", (shared / WET).read_bytes(), {"no_responses": 1},
             _all_urls(records)),
    ]
    return records, k, cases


def _all_urls(records: list[bytes]) -> set[str]:
    return {url_of(r) for r in records if b"WARC-Type: response" in r[:200]}


# --- running them ------------------------------------------------------------------------------


@dataclass
class Outcomes:
    docs: dict[str, str]  # url -> text
    rejects: list[dict[str, Any]]  # reject rows

    def by_url(self) -> dict[str, tuple[str, str]]:
        found = {url: ("doc", text) for url, text in self.docs.items()}
        for row in self.rejects:
            if row["url"] is not None:
                found.setdefault(row["url"], ("reject", row["reason"]))
        return found


@dataclass
class BadRun:
    clean: Outcomes
    cases: dict[str, Case]
    outcomes: dict[str, Outcomes]
    stats: Any
    rejects_rows: int


def _outcomes(store: LocalStore, partition: str, files: list[str]) -> dict[str, Outcomes]:
    docs = PartitionLayout(store, "documents", partition).read_table(
        ["url", "warc_file", "text"]).to_pylist()
    keys = store.list(f"rejects/{partition}")
    rejects = pa.concat_tables([pq.read_table(store.uri(key)) for key in keys]).to_pylist() \
        if keys else []
    return {file: Outcomes({row["url"]: row["text"] for row in docs if row["warc_file"] == file},
                           [row for row in rejects if row["warc_file"] == file])
            for file in files}


@pytest.fixture(scope="module")
def bad_run(tmp_path_factory) -> BadRun:
    shared = require_shared_data()
    folder = tmp_path_factory.mktemp("bad-input")
    records, _, cases = build_cases(shared)
    clean_file = folder / "clean.warc.gz"
    clean_file.write_bytes(gz(records))
    files = []
    for index, case in enumerate(cases):
        path = folder / f"{index:02d}-{case.name}.warc.gz"
        path.write_bytes(case.data)
        files.append(str(path))
    store = LocalStore(str(folder / "out"))
    run = run_documents(PARTITION, [str(clean_file), *files], store, DocumentsSettings(),
                        workers=0)
    outcomes = _outcomes(store, PARTITION, [str(clean_file), *files])
    rows = sum(pq.read_metadata(store.uri(key)).num_rows
               for key in store.list(f"rejects/{PARTITION}"))
    return BadRun(outcomes[str(clean_file)], {case.name: case for case in cases},
                  {case.name: outcomes[file] for case, file in zip(cases, files, strict=True)},
                  run.stats, rows)


NAMES = [case for case in (
    "truncated-last-member", "truncated-member-mid-file", "garbled-version-line",
    "unknown-warc-type", "content-length-not-a-number", "missing-target-uri",
    "content-length-too-small", "content-length-too-large", "content-length-huge",
    "plain-content-length-too-small", "plain-content-length-too-large",
    "plain-content-length-huge", "utf8-label-on-cp1252-page", "latin1-label-on-utf8-page",
    "undeclared-cp1252-page", "gzip-encoded-body", "fifty-mb-page", "deeply-nested-html",
    "gif-labelled-html", "random-bytes-labelled-html", "junk-between-members",
    "junk-after-last-member", "zero-byte-file", "png-file", "text-file", "wet-file-as-warc")]


@pytest.mark.parametrize("name", NAMES)
def test_bad_input_is_a_counted_reject_and_nothing_valid_is_lost(bad_run: BadRun,
                                                                  name: str) -> None:
    case, got = bad_run.cases[name], bad_run.outcomes[name]
    clean = bad_run.clean.by_url()
    # Every record the damage did not touch comes out exactly as from the clean file.
    untouched = {url: outcome for url, outcome in clean.items() if url not in case.damaged}
    mine = got.by_url()
    assert {url: mine.get(url) for url in untouched} == untouched
    # The damage is counted: its rejects, with a message, and nothing else new.
    expected_clean = Counter(outcome[1] for url, outcome in untouched.items()
                             if outcome[0] == "reject")
    new = Counter(row["reason"] for row in got.rejects) - expected_clean
    assert dict(new) == case.rejects
    for row in got.rejects:
        assert row["message"] or row["reason"] in expected_clean, row
        assert row["stage"]
    # Pages behind a lying or missing label, or a Content-Encoding, decode to the same text.
    for url, reference in case.same_text_as.items():
        assert got.docs.get(url), f"{url} was lost"
        assert got.docs[url] == bad_run.outcomes[reference].docs[url]
        assert "\ufffd" not in got.docs[url]


def test_charset_cases_keep_every_accented_character(bad_run: BadRun) -> None:
    # The page's text holds accented letters; behind a lying label they still decode right.
    url = next(iter(bad_run.cases["utf8-label-on-cp1252-page"].same_text_as))
    reference = bad_run.outcomes["page-labelled-right"].docs[url]
    accented = {ch for ch in reference if ord(ch) > 127 and ch.isalpha()}
    assert len(accented) >= 3
    for name in ("utf8-label-on-cp1252-page", "latin1-label-on-utf8-page"):
        assert bad_run.outcomes[name].docs[url] == reference


def test_the_run_survives_and_counts_every_reject(bad_run: BadRun) -> None:
    stats = bad_run.stats
    assert stats.tasks_run == len(NAMES) + 3  # every file, the clean one and two references
    assert stats.rejected == bad_run.rejects_rows
    assert stats.rejects["internal_error"] == 0 and stats.rejects["read_error"] == 0


def test_messages_say_what_is_wrong(bad_run: BadRun) -> None:
    def message(name: str, reason: str) -> str:
        return next(row["message"] for row in bad_run.outcomes[name].rejects
                    if row["reason"] == reason)

    assert "WARC/ version line" in message("garbled-version-line", "corrupt_header")
    assert "unknown WARC-Type" in message("unknown-warc-type", "corrupt_header")
    assert "not a number" in message("content-length-not-a-number", "corrupt_header")
    assert "WARC-Target-URI" in message("missing-target-uri", "corrupt_header")
    assert "Content-Length" in message("content-length-huge", "bad_content_length")
    assert "GIF image" in message("gif-labelled-html", "binary_payload")
    assert "nest" in message("deeply-nested-html", "too_deep")
    assert "WET" in message("wet-file-as-warc", "no_responses")
    assert str(FIFTY_MB) in message("fifty-mb-page", "too_large") or \
        "bytes >" in message("fifty-mb-page", "too_large")


def test_deep_nesting_cannot_stall_the_resiliparse_extractor(tmp_path) -> None:
    # resiliparse's main-content pass is quadratic in nesting depth, in C code a time limit
    # cannot interrupt: 100,000 nested divs took about 110 s a page before the depth check.
    shared = require_shared_data()
    records = members(shared / CC_2020)
    k = [i for i, r in enumerate(records) if b"WARC-Type: response" in r[:200]][3]
    deep = deep_page(_page_html())
    path = tmp_path / "deep.warc.gz"
    path.write_bytes(gz(records[:k] + [rebuild(records[k], deep.encode())] + records[k + 1:]))
    run = run_documents("DEEP", [str(path)], LocalStore(str(tmp_path / "out")),
                        DocumentsSettings(extractor="resiliparse"), workers=0)
    assert run.stats.rejects["too_deep"] == 1
    assert run.stats.docs_out >= 10
    assert run.wall_seconds < 30


def test_bad_lines_of_a_curated_source_are_rejected_one_by_one(tmp_path) -> None:
    # Before: one line that was not JSON (or not an object) ended the file's task with an
    # `unreadable_file` reject, or an AttributeError that ended the run.
    folder = tmp_path / "src"
    folder.mkdir()
    book = (require_shared_data() / BOOK).read_text(encoding="cp1252")[:20_000]
    lines = [json.dumps({"text": part}) for part in book.split("\n\n")[:40]]
    lines[5] = '{"text": "cut off'
    lines[9] = '["a", "list"]'
    (folder / "book.jsonl").write_text("\n".join(lines) + "\n")
    config = SourceConfig(path=str(folder), licence="public-domain")
    run = run_documents("source:book", [str(folder / "book.jsonl")],
                        LocalStore(str(tmp_path / "out")), DocumentsSettings(), workers=0,
                        source="book", source_config=config)
    assert run.stats.rejects["unreadable_record"] == 2
    assert run.stats.docs_out + run.stats.rejects["empty_text"] == 38


# --- file-level failures: named, and counted against the partition's gate -----------------------

FILE_LEVEL = {"truncated-last-member": "truncated_record", "zero-byte-file": "empty_file",
              "png-file": "not_warc", "text-file": "not_warc", "wet-file-as-warc": "no_responses"}


def test_problem_files_name_every_file_that_failed_as_a_whole(bad_run: BadRun, tmp_path) -> None:
    """A damaged record is the record's problem; an empty, cut, foreign or WET file is the
    file's, and only those make the file list."""
    rejects = pa.Table.from_pylist(
        [row for outcome in [bad_run.clean, *bad_run.outcomes.values()] for row in outcome.rejects])
    found = {Path(row["file"]).name.split("-", 1)[1].removesuffix(".warc.gz"): row["problem"]
             for row in problem_files(rejects)}
    assert found == FILE_LEVEL
    assert set(FILE_PROBLEMS) >= set(found.values())


GOOD_WARC = "warc/non_cc/dolma_wget-sample-0001_15responses.warc.gz"


def _mixed_crawl(shared: Path, folder: Path) -> dict[str, str]:
    """A real WARC file beside an empty one, one cut half-way into its last record and a WET
    file: what each bad one should be reported as."""
    folder.mkdir()
    (folder / "00-good.warc.gz").write_bytes((shared / GOOD_WARC).read_bytes())
    (folder / "01-empty.warc.gz").write_bytes(b"")
    whole = (shared / CC_2020).read_bytes()
    last = [item.offset for item in iter_warc(shared / CC_2020)][-1]
    (folder / "02-cut.warc.gz").write_bytes(whole[:last + (len(whole) - last) // 2])
    (folder / "03-wet.warc.gz").write_bytes((shared / WET).read_bytes())
    return {"01-empty.warc.gz": "empty_file", "02-cut.warc.gz": "truncated_record",
            "03-wet.warc.gz": "no_responses"}


def _materialize_documents(base: Path, gates: str, instance) -> Any:
    from dagster import materialize
    from dagster_aws.s3 import S3Resource

    import checks.documents
    from corpus_assets.documents import documents
    from corpus_assets.warc_files import warc_files
    from resources import ComputeResource, PipelineResource, StorageResource

    pipeline = base / "pipeline.yaml"
    pipeline.write_text("version: 1\nsnapshots:\n  MIXED: {warc: {path: crawl}}\n"
                        f"documents: {{extractor: resiliparse}}\ngates: {gates}\n")
    return materialize(
        [warc_files, documents, checks.documents.documents_survival,
         checks.documents.documents_files_readable],
        partition_key="MIXED", instance=instance, raise_on_error=False,
        resources={"pipeline": PipelineResource(path=str(pipeline)),
                   "storage": StorageResource(root=str(base / "data"),
                                              s3=S3Resource(max_attempts=1)),
                   "compute": ComputeResource(workers=0)})


def _check(result, name: str):
    [evaluation] = [e for e in result.get_asset_check_evaluations() if e.check_name == name]
    return evaluation


def test_unreadable_files_fail_the_partition_gate_and_are_named(shared_data, tmp_path) -> None:
    from dagster import AssetCheckSeverity, instance_for_test

    from partitions import SNAPSHOT_PARTITIONS_NAME

    expected = _mixed_crawl(shared_data, tmp_path / "crawl")
    (tmp_path / "home").mkdir()
    with instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        instance.add_dynamic_partitions(SNAPSHOT_PARTITIONS_NAME, ["MIXED"])
        result = _materialize_documents(tmp_path, "{}", instance)
        # Survival alone stays green: every HTML response read was extracted.
        assert _check(result, "documents_survival").passed
        gate = _check(result, "documents_files_readable")
        assert not gate.passed and gate.severity == AssetCheckSeverity.ERROR
        assert "3 of 4 input files" in gate.description
        for name, problem in expected.items():
            assert f"{name} ({problem})" in gate.description
        # The same list, as a table, on the materialization (the CLI and the UI show it).
        [materialization] = result.asset_materializations_for_node("documents")
        table = materialization.metadata["problem_files"]
        assert {Path(r.data["file"]).name: r.data["problem"] for r in table.records} == expected
        assert all(r.data["message"] for r in table.records)
        assert materialization.metadata["problem_file_count"].value == 3

        # A deployment that tolerates them says so, or makes the gate a warning.
        assert _check(_materialize_documents(tmp_path, "{max_problem_files: 3}", instance),
                      "documents_files_readable").passed
        warned = _check(_materialize_documents(
            tmp_path, "{severity: {documents_files_readable: warn}}", instance),
            "documents_files_readable")
        assert not warned.passed and warned.severity == AssetCheckSeverity.WARN
