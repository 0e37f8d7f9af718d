"""`line_dedup` as hash, count and edit rounds over the exchange (curation/stages/line_dedup.py):
the same edits as the one-session kernel for any bucket and worker count, outputs aligned with
the documents parts, and nothing left in the store."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest

from curation.config import DedupSettings
from curation.dedup import frequent_lines, line_hash_table
from curation.graph import DOCUMENTS, LINE_DEDUP
from curation.partition import Manifest, PartitionLayout
from curation.stages.base import DocumentsInput
from curation.stages.line_dedup import run_line_dedup
from curation.storage import LocalStore, read_parquet

BOILERPLATE = [f"Shared footer number {n} with enough characters" for n in range(30)]
SETTINGS = DedupSettings(line_max_documents=6, line_min_chars=5)


def _parts(documents: int = 1200, parts: int = 4, seed: int = 3) -> list[pa.Table]:
    rng = random.Random(seed)
    rows = []
    for i in range(documents):
        lines = [f"own line {i} {rng.getrandbits(48)}" for _ in range(rng.randrange(0, 4))]
        lines += rng.sample(BOILERPLATE, rng.randrange(0, 4))
        if rng.random() < 0.1:
            lines.append(lines[-1] if lines else "ok")  # a line repeated in one document
        lines.append("|")  # too short to count, never removed
        rng.shuffle(lines)
        rows.append({"doc_id": f"d{rng.getrandbits(64):016x}", "text": "\n".join(lines)})
    table = pa.Table.from_pylist(rows)
    size = -(-documents // parts)
    return [table.slice(start, size) for start in range(0, documents, size)]


def _write_documents(store: LocalStore, parts: list[pa.Table]) -> None:
    layout = PartitionLayout(store, DOCUMENTS, "P")
    layout.write_manifest(Manifest(DOCUMENTS, "P", "v1", [
        layout.write_part(index, part) for index, part in enumerate(parts)]))


def _digests(store: LocalStore) -> list[tuple[str, str, int, str]]:
    manifest = PartitionLayout(store, LINE_DEDUP, "P").complete_manifest()
    tables = {"part": manifest.parts, **manifest.tables}
    return [(name, part.key, part.rows, part.sha256)
            for name in sorted(tables) for part in tables[name]]


@pytest.fixture(scope="module")
def parts() -> list[pa.Table]:
    return _parts()


def test_edits_equal_the_one_session_kernel_for_any_buckets_and_workers(
    tmp_path: Path, parts: list[pa.Table]
) -> None:
    everything = pa.concat_tables(parts)
    expected = frequent_lines(line_hash_table(everything["doc_id"].to_pylist(),
                                              everything["text"].to_pylist()),
                              max_documents=SETTINGS.line_max_documents,
                              min_chars=SETTINGS.line_min_chars)
    assert expected.edits.num_rows > 500 and expected.frequent_lines >= 5
    digests = {}
    for buckets, workers in ((1, 0), (7, 0), (7, 2), (None, 2)):
        store = LocalStore(str(tmp_path / f"{buckets}-{workers}"))
        _write_documents(store, parts)
        result = run_line_dedup(DocumentsInput(store, "P"), SETTINGS, {}, workers, buckets)
        layout = PartitionLayout(store, LINE_DEDUP, "P")
        edits = layout.read_table(name="edits")
        assert sorted(zip(edits["doc_id"].to_pylist(), edits["line"].to_pylist(), strict=True)) \
            == sorted(zip(expected.edits["doc_id"].to_pylist(),
                          expected.edits["line"].to_pylist(), strict=True))
        documents = layout.read_table().sort_by("doc_id")
        assert documents.to_pylist() == expected.documents.to_pylist()
        drops = layout.read_table(name="decisions")
        assert sorted(drops["doc_id"].to_pylist()) == sorted(
            row["doc_id"] for row in expected.documents.to_pylist()
            if row["empty_after_edits"])
        assert result.stats.counts["frequent_lines"] == expected.frequent_lines
        assert result.stats.counts["lines_removed"] == expected.edits.num_rows
        for index, part in enumerate(parts):  # each documents part's edits in its own part
            own = set(part["doc_id"].to_pylist())
            assert set(layout.read_part(index, "edits")["doc_id"].to_pylist()) <= own
            assert set(layout.read_part(index)["doc_id"].to_pylist()) <= own
        assert not store.list(f"{LINE_DEDUP}/P/_work")
        digests[buckets, workers] = _digests(store)
    first, *others = digests.values()
    assert all(other == first for other in others)


def test_a_finished_partition_is_not_planned_again(tmp_path: Path,
                                                   parts: list[pa.Table]) -> None:
    store = LocalStore(str(tmp_path))
    _write_documents(store, parts)
    first = run_line_dedup(DocumentsInput(store, "P"), SETTINGS, {}, 0, 3)
    again = run_line_dedup(DocumentsInput(store, "P"), SETTINGS, {}, 0, 3)
    assert again.stats.tasks_skipped == len(parts) and again.stats.tasks_run == 0
    assert again.stats.counts == first.stats.counts
    assert again.manifest.data_version == first.manifest.data_version


def test_the_hash_round_sends_each_line_once_per_part_with_its_document_count(
    tmp_path: Path
) -> None:
    """The combiner: a line in every document of a part reaches its count task as one row, and
    the threshold is taken over documents summed across parts, not over occurrences."""
    def part(documents: dict[str, list[str]]) -> pa.Table:
        return pa.Table.from_pylist([{"doc_id": doc_id, "text": "\n".join(lines)}
                                     for doc_id, lines in documents.items()])

    everywhere, split_over = "in every document", "four here, three there"
    just_under, repeated = "three here and three there", "five times in one document"
    first = part({f"a{i}": [everywhere, f"own line {_spelled(i)}"] + [split_over] * (i < 4)
                  + [just_under] * (i < 3) + [repeated] * (5 if i == 0 else i == 1)
                  for i in range(200)})
    second = part({f"b{i}": [everywhere] + [split_over] * (i < 3) + [just_under] * (i < 3)
                   for i in range(100)})
    store = LocalStore(str(tmp_path))
    _write_documents(store, [first, second])
    result = run_line_dedup(DocumentsInput(store, "P"), SETTINGS, {}, 0, 3)

    layout = PartitionLayout(store, LINE_DEDUP, "P")
    edits = layout.read_table(name="edits")
    texts = {row["doc_id"]: row["text"].split("\n")
             for row in pa.concat_tables([first, second]).to_pylist()}
    removed = {texts[doc_id][line] for doc_id, line in zip(
        edits["doc_id"].to_pylist(), edits["line"].to_pylist(), strict=True)}
    assert removed == {everywhere, split_over}
    assert edits.num_rows == 300 + 7
    assert result.stats.counts["frequent_lines"] == 2


def test_send_lines_writes_one_exchange_row_per_distinct_line(tmp_path: Path) -> None:
    from curation.exchange import Exchange, read_slice
    from curation.stages.line_dedup import send_lines

    doc_ids = [f"d{i}" for i in range(1000)]
    lines = line_hash_table(doc_ids, [f"the same footer line\nthe same footer line\n"
                                      f"own line {_spelled(i)}" for i in range(1000)])
    store = LocalStore(str(tmp_path))
    sent = send_lines(lines, 0, Exchange(store, "x", 4), 5, "lines")
    exchanged = pa.concat_tables(read_slice(store, piece) for piece in sent.exchanged.values())
    assert exchanged.num_rows == 1001  # the footer once, each own line once
    footer = exchanged.filter(pa.compute.equal(exchanged["documents"], 1000))
    assert footer.num_rows == 1
    assert read_parquet(store, sent.lines_key).num_rows == 3000  # every occurrence kept for edits


def _spelled(number: int) -> str:
    """`number` in letters: normalising a line drops its digits."""
    return "".join(chr(ord("a") + int(digit)) for digit in str(number))
