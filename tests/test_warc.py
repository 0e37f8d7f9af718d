"""WARC reading: the real files in ../shared/data, and bad input that must lose nothing."""

from __future__ import annotations

import gzip
import os
from collections import Counter
from pathlib import Path

import pytest

from curation.stages.documents import HTML_TYPES
from curation.warc import ReadFailure, WarcItem, iter_warc

# Record counts as PROVENANCE.md states them (checked there with warcio).
EXPECTED = {
    "warc/cc-main-2024-22_whirlwind_1record.warc.gz":
        ({"warcinfo": 1, "request": 1, "response": 1, "metadata": 1}, 1),
    "warc/cc-main-2020-34_resiliparse_16responses.warc.gz":
        ({"warcinfo": 1, "request": 17, "response": 16, "metadata": 16}, 16),
    "warc/cc-2019-12_jwarc-cc_1response.warc.gz": ({"response": 1}, 1),
    "warc/cc-main-2024-22_whirlwind_1record.warc.wet.gz": ({"warcinfo": 1, "conversion": 1}, 0),
    "warc/non_cc/ia-heritrix-2008_archive-org-shallow_299responses.warc.gz":
        ({"warcinfo": 1, "response": 299, "request": 261, "metadata": 261}, 140),
    "warc/non_cc/dolma_wget-sample-0000_22responses.warc.gz":
        ({"warcinfo": 1, "request": 22, "response": 22, "metadata": 1, "resource": 2}, 22),
    "warc/non_cc/dolma_wget-sample-0001_15responses.warc.gz":
        ({"warcinfo": 1, "request": 15, "response": 15, "metadata": 1, "resource": 2}, 15),
    "warc/non_cc/clueweb09-ja_resiliparse-quirk_29responses.warc.gz":
        ({"warcinfo": 1, "response": 29}, 29),
}
CC_2020 = "warc/cc-main-2020-34_resiliparse_16responses.warc.gz"


def _read(path: Path) -> tuple[Counter, int, list[ReadFailure]]:
    types: Counter = Counter()
    html = 0
    failures = []
    for item in iter_warc(path):
        if isinstance(item, ReadFailure):
            failures.append(item)
            continue
        types[item.record_type] += 1
        html += item.record_type == "response" and (item.content_type or "").startswith(HTML_TYPES)
    return types, html, failures


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_warc_files_parse_with_their_record_counts(shared_data: Path, name: str) -> None:
    types, html, failures = _read(shared_data / name)
    expected_types, expected_html = EXPECTED[name]
    assert dict(types) == expected_types
    assert html == expected_html
    assert failures == []


def test_truncated_real_sample_accounts_for_every_html_record(shared_data: Path) -> None:
    # The 2014 sample ends 5,249 bytes into its 4th response (PROVENANCE.md): 3 whole pages and
    # one counted truncation, nothing silently dropped or passed on half-read.
    types, html, failures = _read(shared_data / "warc/cc-main-2014-35_wdps-sample_4responses.warc")
    assert types["response"] == 3 and html == 3
    assert [f.reason for f in failures] == ["truncated_record"]
    assert types["warcinfo"] + types["request"] + types["metadata"] == 8


def test_japanese_legacy_charset_pages_keep_their_charset(shared_data: Path) -> None:
    from curation.extract import decode_html

    items = [i for i in iter_warc(shared_data / EXPECTED_JA) if isinstance(i, WarcItem)
             and i.payload]
    texts = [decode_html(item.payload, item.charset) for item in items]
    assert {charset for _, charset in texts} == {"euc-jp"}
    assert all("\ufffd" not in text for text, _ in texts)
    assert any("財布" in text for text, _ in texts)


EXPECTED_JA = "warc/non_cc/clueweb09-ja_resiliparse-quirk_29responses.warc.gz"


# --- bad input ---------------------------------------------------------------------------------


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_truncated_gzip_member_is_counted_and_earlier_records_kept(shared_data, tmp_path):
    data = (shared_data / CC_2020).read_bytes()
    types, html, failures = _read(_write(tmp_path, "t.warc.gz", data[: len(data) // 2]))
    assert [f.reason for f in failures] == ["truncated_record"]
    assert html == 6 and types["warcinfo"] == 1


def test_corrupt_member_in_the_middle_loses_only_that_record(shared_data, tmp_path):
    data = bytearray((shared_data / CC_2020).read_bytes())
    data[40_000:40_100] = b"\0" * 100  # inside the 5th response's gzip member
    types, html, failures = _read(_write(tmp_path, "c.warc.gz", bytes(data)))
    assert [f.reason for f in failures] == ["corrupt_gzip"]
    assert html == 15  # 16 minus the corrupted one
    assert types["request"] == 17 and types["metadata"] == 16


def test_garbage_before_a_valid_warc_is_skipped(shared_data, tmp_path):
    data = os.urandom(3000) + (shared_data / CC_2020).read_bytes()
    types, html, failures = _read(_write(tmp_path, "g.warc.gz", data))
    assert html == 16
    assert failures and failures[0].offset == 0


@pytest.mark.parametrize(
    ("payload", "reason"),
    [(b"", "empty_file"), (b"this is a plain text file, not a WARC\n" * 20, "not_warc"),
     (os.urandom(4096), "not_warc"), (gzip.compress(b"<html>not a warc</html>"), "not_warc")],
    ids=["empty", "text", "garbage", "gzipped-html"],
)
def test_files_that_are_not_warc_give_one_clear_failure(tmp_path, payload, reason):
    types, html, failures = _read(_write(tmp_path, "bad.warc.gz", payload))
    assert not types and html == 0
    assert [f.reason for f in failures] == [reason]
    assert failures[0].message
