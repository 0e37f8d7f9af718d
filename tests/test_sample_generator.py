"""The built-in sample generator: deterministic bytes, readable WARCs, and a truth that holds."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from fastwarc.warc import ArchiveIterator, WarcRecordType
from warcio.archiveiterator import ArchiveIterator as WarcioIterator

from curation.sample.generate import SampleLayout, generate_sample
from curation.sample.values import luhn_ok

SNAPSHOTS = ("SAMPLE-01", "SAMPLE-02")
# WarcRecordType members are not hashable, so a list of pairs rather than a dict.
FASTWARC_TYPES = (
    (WarcRecordType.warcinfo, "warcinfo"),
    (WarcRecordType.request, "request"),
    (WarcRecordType.response, "response"),
    (WarcRecordType.metadata, "metadata"),
)


def _type_name(record_type: WarcRecordType) -> str:
    return next(name for kind, name in FASTWARC_TYPES if kind == record_type)


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> SampleLayout:
    return generate_sample(tmp_path_factory.mktemp("sample") / "out", seed=1234)


@pytest.fixture(scope="module")
def manifest(sample: SampleLayout) -> dict:
    return json.loads((sample.root / "SAMPLE_MANIFEST.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def truth(sample: SampleLayout) -> list[dict]:
    lines = (sample.root / "truth" / "pages.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def _digests(root: Path) -> dict[str, str]:
    return {
        path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def _warc_files(sample: SampleLayout) -> list[Path]:
    return sorted(path for folder in sample.warc_dirs.values() for path in folder.glob("*.warc.gz"))


def _html_bodies(sample: SampleLayout) -> list[tuple[str, bytes, str]]:
    """(url, body, Content-Type) of every 200 text/html response, read with fastwarc."""
    pages = []
    for path in _warc_files(sample):
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream, record_types=WarcRecordType.response):
                status = record.http_headers.status_code
                content_type = record.http_headers.get("Content-Type", "")
                if status == 200 and content_type.startswith("text/html"):
                    url = record.headers.get("WARC-Target-URI")
                    pages.append((url, record.reader.read(), content_type))
    return pages


def _shingles(text: str) -> set[tuple[str, ...]]:
    words = text.lower().split()
    return {tuple(words[i : i + 5]) for i in range(len(words) - 4)}


def _jaccard(a: str, b: str) -> float:
    left, right = _shingles(a), _shingles(b)
    return len(left & right) / max(1, len(left | right))


# --- layout and determinism ------------------------------------------------------------------


def test_layout_points_at_the_written_files(sample: SampleLayout) -> None:
    assert set(sample.warc_dirs) == set(SNAPSHOTS)
    for snapshot, folder in sample.warc_dirs.items():
        names = sorted(path.name for path in folder.iterdir())
        assert names == [f"{snapshot}-00000.warc.gz", f"{snapshot}-00001.warc.gz"]
    assert sample.eval_file.is_file()
    assert sample.url_blocklist.is_file()
    assert list(sample.curated_source_dir.glob("*.jsonl"))
    assert 450 <= sample.page_count <= 550


def test_same_seed_gives_identical_bytes(tmp_path: Path, sample: SampleLayout) -> None:
    again = generate_sample(tmp_path / "again", seed=1234)
    first, second = _digests(sample.root), _digests(again.root)
    assert first == second
    assert len(first) >= 9


def test_identical_bytes_in_a_process_with_another_hash_seed(
    tmp_path: Path, sample: SampleLayout
) -> None:
    # str hashing is salted per process; nothing in the output may depend on it.
    code = (
        "import sys; from pathlib import Path; from curation.sample import generate_sample; "
        "generate_sample(Path(sys.argv[1]), seed=1234)"
    )
    env = {**os.environ, "PYTHONHASHSEED": "4321"}
    repo = Path(__file__).resolve().parents[1]
    subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "fresh")], check=True, env=env, cwd=repo
    )
    assert _digests(tmp_path / "fresh") == _digests(sample.root)


def test_another_seed_gives_other_bytes(tmp_path: Path, sample: SampleLayout) -> None:
    other = generate_sample(tmp_path / "other", seed=99)
    first, second = _digests(sample.root), _digests(other.root)
    assert first.keys() == second.keys()
    assert first["warc/SAMPLE-01/SAMPLE-01-00000.warc.gz"] != (
        second["warc/SAMPLE-01/SAMPLE-01-00000.warc.gz"]
    )


def test_manifest_lists_every_file_with_its_hash(sample: SampleLayout, manifest: dict) -> None:
    listed = {entry["path"]: entry["sha256"] for entry in manifest["files"]}
    on_disk = _digests(sample.root)
    on_disk.pop("SAMPLE_MANIFEST.json")
    assert listed == on_disk
    assert manifest["page_count"] == sample.page_count


def test_gzip_members_carry_no_timestamp(sample: SampleLayout) -> None:
    # Per-record gzip members, each with mtime 0 (bytes 4-7 of the member header).
    data = _warc_files(sample)[0].read_bytes()
    assert data[:4] == b"\x1f\x8b\x08\x00" and data[4:8] == b"\x00\x00\x00\x00"
    assert data.count(b"\x1f\x8b\x08\x00\x00\x00\x00\x00") > 100
    assert gzip.decompress(data).startswith(b"WARC/1.0\r\nWARC-Type: warcinfo")


# --- WARC structure ------------------------------------------------------------------------


def test_record_counts_match_the_manifest_with_fastwarc(
    sample: SampleLayout, manifest: dict
) -> None:
    for path in _warc_files(sample):
        counts: Counter[str] = Counter()
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream, parse_http=False):
                counts[_type_name(record.record_type)] += 1
        expected = manifest["snapshots"][path.parent.name]["files"][path.name]["records"]
        assert dict(counts) == expected
        assert counts["request"] == counts["response"] == counts["metadata"] >= 120


def test_record_counts_match_the_manifest_with_warcio(
    sample: SampleLayout, manifest: dict
) -> None:
    for path in _warc_files(sample):
        with path.open("rb") as stream:
            counts = Counter(record.rec_type for record in WarcioIterator(stream))
        expected = manifest["snapshots"][path.parent.name]["files"][path.name]["records"]
        assert dict(counts) == expected


def test_files_look_like_common_crawl(sample: SampleLayout) -> None:
    for path in _warc_files(sample):
        with path.open("rb") as stream:
            records = []
            for record in WarcioIterator(stream):
                if record.rec_type == "warcinfo":
                    info = record.content_stream().read().decode()
                    assert f"isPartOf: {path.parent.name}" in info
                records.append(record)
        assert records[0].rec_type == "warcinfo"
        types = [record.rec_type for record in records[1:]]
        # request, response, metadata for every capture, in that order
        assert types == ["request", "response", "metadata"] * (len(types) // 3)
        for request, response, metadata in zip(
            records[1::3], records[2::3], records[3::3], strict=True
        ):
            url = response.rec_headers.get_header("WARC-Target-URI")
            assert request.rec_headers.get_header("WARC-Target-URI") == url
            assert metadata.rec_headers.get_header("WARC-Target-URI") == url
            response_id = response.rec_headers.get_header("WARC-Record-ID")
            assert metadata.rec_headers.get_header("WARC-Concurrent-To") == response_id
            date = response.rec_headers.get_header("WARC-Date")
            assert date.startswith("2024-02" if "SAMPLE-01" in path.name else "2024-04")


def test_offsets_in_the_truth_point_at_responses(sample: SampleLayout, truth: list[dict]) -> None:
    by_file: dict[str, dict[int, str]] = {}
    for row in truth:
        by_file.setdefault(row["warc_file"], {})[row["offset"]] = row["record_id"]
    for path in _warc_files(sample):
        with path.open("rb") as stream:
            found = {
                record.stream_pos: record.record_id
                for record in ArchiveIterator(stream, record_types=WarcRecordType.response)
            }
        for offset, record_id in by_file[path.name].items():
            assert found[offset] == record_id


def test_non_html_redirects_and_errors_are_present(sample: SampleLayout) -> None:
    statuses: Counter[int] = Counter()
    types: set[str] = set()
    for path in _warc_files(sample):
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream, record_types=WarcRecordType.response):
                statuses[record.http_headers.status_code] += 1
                types.add(record.http_headers.get("Content-Type", "").split(";")[0])
    assert statuses[301] >= 2 and statuses[404] >= 1
    assert {"image/png", "application/pdf", "text/css", "application/json"} <= types


# --- pages ---------------------------------------------------------------------------------


def _decode(body: bytes, content_type: str) -> str:
    """Decode like a careful extractor: trust a charset only when the bytes agree with it."""
    declared = re.search(r"charset=([\w-]+)", content_type)
    meta = re.search(rb'<meta charset="([\w-]+)"', body[:2048])
    for charset in (declared and declared[1], meta and meta[1].decode(), "utf-8", "cp1252"):
        if charset:
            try:
                return body.decode(charset)
            except UnicodeDecodeError:
                continue
    raise AssertionError("undecodable page")


def test_every_html_page_decodes(sample: SampleLayout) -> None:
    pages = _html_bodies(sample)
    assert len(pages) == sample.page_count
    texts = [_decode(body, content_type) for _, body, content_type in pages]
    assert all("<html" in text and "</html>" in text for text in texts)


def test_charset_traps(sample: SampleLayout, truth: list[dict]) -> None:
    bodies = {url: (body, content_type) for url, body, content_type in _html_bodies(sample)}
    lying = next(row for row in truth if row["charset"] == "cp1252-declared-utf-8")
    body, content_type = bodies[lying["url"]]
    assert "charset=utf-8" in content_type.lower()
    with pytest.raises(UnicodeDecodeError):
        body.decode("utf-8")
    assert lying["title"] in body.decode("cp1252")
    japanese = next(row for row in truth if row["charset"] == "shift_jis")
    body, content_type = bodies[japanese["url"]]
    assert "charset" not in content_type and b'<meta charset="Shift_JIS">' in body
    assert japanese["title"] in body.decode("shift_jis")


def test_counts_per_kind_and_language(manifest: dict, truth: list[dict]) -> None:
    for snapshot in SNAPSHOTS:
        rows = [row for row in truth if row["snapshot"] == snapshot]
        summary = manifest["snapshots"][snapshot]
        assert summary["kinds"] == dict(sorted(Counter(r["kind"] for r in rows).items()))
        assert summary["languages"] == dict(sorted(Counter(r["lang"] for r in rows).items()))
    total = len(truth)
    kinds = Counter(row["kind"] for row in truth)
    languages = Counter(row["lang"] for row in truth)
    assert 0.06 <= kinds["duplicate"] / total <= 0.10
    assert 0.06 <= kinds["near_duplicate"] / total <= 0.10
    assert 0.08 <= (kinds["spam"] + kinds["stub"]) / total <= 0.12
    assert 0.08 <= kinds["pii"] / total <= 0.12
    assert 0.02 <= kinds["eval_quote"] / total <= 0.05
    assert 0.65 <= languages["en"] / total <= 0.75
    for lang in ("de", "fr", "es"):
        assert 0.05 <= languages[lang] / total <= 0.10
    for lang in ("ja", "ru"):
        assert 0.02 <= languages[lang] / total <= 0.05


def test_languages_are_present_in_the_pages(sample: SampleLayout, truth: list[dict]) -> None:
    markers = {"de": "ü", "fr": "é", "es": "ó", "ja": "の", "ru": "и"}
    for lang, marker in markers.items():
        texts = [row["text"] for row in truth if row["lang"] == lang]
        assert sum(marker in text for text in texts) >= len(texts) // 2
    html = [_decode(body, ct) for _, body, ct in _html_bodies(sample)]
    for lang in markers:
        assert any(f'<html lang="{lang}">' in page for page in html)


def test_ordinary_pages_are_long_prose(truth: list[dict]) -> None:
    articles = [row for row in truth if row["kind"] == "article" and row["lang"] != "ja"]
    words = sorted(row["words"] for row in articles)
    assert words[len(words) // 10] >= 150 and words[-1] <= 1200
    english = [row["text"] for row in articles if row["lang"] == "en"]
    assert all(re.search(r"\b(the|and|of)\b", text) for text in english)


def test_boilerplate_lines_recur_across_a_site(truth: list[dict]) -> None:
    site_pages = [row for row in truth if row["domain"] == "greenthumb-journal.net"]
    line = site_pages[0]["boilerplate"][0]
    assert sum(line in row["text"] for row in site_pages) >= 10


def test_exact_duplicates_within_and_across_snapshots(truth: list[dict]) -> None:
    by_id = {row["page_id"]: row for row in truth}
    duplicates = [row for row in truth if row["kind"] == "duplicate"]
    assert all(by_id[row["source"]]["text"] == row["text"] for row in duplicates)
    same = [row for row in duplicates if by_id[row["source"]]["snapshot"] == row["snapshot"]]
    across = [row for row in duplicates if by_id[row["source"]]["snapshot"] != row["snapshot"]]
    assert same and across
    recrawls = {row["subkind"] for row in across}
    assert {"recrawl_same_url", "recrawl_tracking", "recrawl_slash"} <= recrawls
    same_url = [r for r in across if r["subkind"] == "recrawl_same_url"]
    assert all(by_id[r["source"]]["url"] == r["url"] for r in same_url)
    tracked = [r for r in across if r["subkind"] == "recrawl_tracking"]
    assert all(r["url"].startswith(by_id[r["source"]]["url"]) and "=" in r["url"] for r in tracked)
    assert any(by_id[r["source"]]["domain"] != r["domain"] for r in duplicates)


def test_near_duplicates_are_close_but_not_equal(truth: list[dict]) -> None:
    by_id = {row["page_id"]: row for row in truth}
    near = [row for row in truth if row["kind"] == "near_duplicate" and row["lang"] != "ja"]
    assert {by_id[r["source"]]["snapshot"] != r["snapshot"] for r in near} == {True, False}
    for row in near:
        source = by_id[row["source"]]["text"]
        assert row["text"] != source
        assert _jaccard(row["text"], source) >= 0.8


def test_unrelated_pages_are_not_near_duplicates(truth: list[dict]) -> None:
    # Pages built from one sentence bank must stay well apart, or the duplicate truth is wrong.
    roots = {row["page_id"]: row["source"] or row["page_id"] for row in truth}
    pages = [row for row in truth if row["kind"] == "article" and row["lang"] == "en"]
    by_site: dict[str, list[dict]] = {}
    for row in pages:
        by_site.setdefault(row["domain"], []).append(row)
    for rows in by_site.values():
        for i, left in enumerate(rows):
            for right in rows[i + 1 :]:
                if roots[left["page_id"]] != roots[right["page_id"]]:
                    assert _jaccard(left["text"], right["text"]) < 0.6


def test_spam_and_stubs(truth: list[dict], sample: SampleLayout) -> None:
    spam = [row for row in truth if row["kind"] in ("spam", "stub")]
    subkinds = {row["subkind"] for row in spam}
    assert {"seo_casino", "link_farm", "product_list", "javascript", "lorem_ipsum",
            "coming_soon", "under_construction", "ellipsis_bullets", "short"} <= subkinds
    assert any(row["words"] < 50 for row in spam)
    assert any("{" in row["text"] for row in spam if row["subkind"] == "javascript")
    blocked = [line for line in sample.url_blocklist.read_text().splitlines()
               if line and not line.startswith("#")]
    hosts = {row["url"].split("/")[2] for row in spam}
    assert any(host == d or host.endswith("." + d) for host in hosts for d in blocked)
    assert all(row["blocklisted"] for row in spam if row["domain"] in blocked)


def test_pii_and_lookalikes(truth: list[dict]) -> None:
    pii_pages = [row for row in truth if row["pii"]]
    assert {row["kind"] for row in pii_pages} == {"pii"}
    types = {item["type"] for row in pii_pages for item in row["pii"]}
    assert {"email", "phone", "ipv4", "ipv6", "card"} <= types
    for row in truth:
        for item in row["pii"] + row["lookalikes"]:
            assert item["value"] in row["text"]
    phones = [item["value"] for row in pii_pages for item in row["pii"] if item["type"] == "phone"]
    assert any(p.startswith("(555)") for p in phones)
    assert any(p.startswith(prefix) for p in phones for prefix in ("+1 ", "+44 20", "+49 "))
    cards = [item["value"] for row in truth for item in row["pii"] if item["type"] == "card"]
    assert cards and all(luhn_ok(re.sub(r"\D", "", card)) for card in cards)
    lookalikes = {item["type"] for row in truth for item in row["lookalikes"]}
    assert {"version", "date", "time", "price", "isbn", "order", "private_ip"} <= lookalikes
    non_cards = [i["value"] for r in truth for i in r["lookalikes"] if i["type"] == "non_luhn"]
    assert all(not luhn_ok(re.sub(r"\D", "", number)) for number in non_cards)


def test_eval_file_parses_and_pages_quote_it(sample: SampleLayout, truth: list[dict]) -> None:
    items = [json.loads(line) for line in sample.eval_file.read_text().splitlines()]
    assert 30 <= len(items) <= 50
    for item in items:
        assert set(item) == {"query", "choices", "gold"}
        assert item["query"].startswith("Question: ") and item["query"].endswith("\nAnswer:")
        assert 0 <= item["gold"] < len(item["choices"])
    quoted = set()
    for index, item in enumerate(items):
        question = item["query"].removeprefix("Question: ").removesuffix("\nAnswer:")
        answer = item["choices"][item["gold"]]
        for row in truth:
            if question in row["text"] and answer in row["text"]:
                quoted.add(index)
                assert row["kind"] == "eval_quote" or row["source"] is not None
    assert len(quoted) >= 5
    assert quoted == {i for row in truth for i in row["eval_items"]}


def test_reference_source(sample: SampleLayout) -> None:
    rows = []
    for path in sorted(sample.curated_source_dir.glob("*.jsonl")):
        rows += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert 50 <= len(rows) <= 80
    assert len({row["id"] for row in rows}) == len(rows)
    for row in rows:
        assert set(row) == {"id", "title", "text"}
        assert 200 <= len(row["text"].split()) <= 800
        assert row["text"].rstrip().endswith(".")


def test_generation_is_fast(tmp_path: Path) -> None:
    import time

    start = time.perf_counter()
    generate_sample(tmp_path / "timed")
    assert time.perf_counter() - start < 5.0
