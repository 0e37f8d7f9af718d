"""The quality gates read a partition a part (or a fixed-size batch) at a time: the batched
contract equals the one-batch one, uniqueness holds across batches, each reworked check still
fails on a fault split across parts, and a contract never decodes a column it does not judge."""

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from checks import expectations, rescan
from checks.decontamination import decontaminated_coverage
from checks.dedup import edits_valid, kept_members_valid
from checks.expectations import (
    Expectation,
    TableSuite,
    between,
    in_set,
    not_null,
    unique,
    validate_tables,
)
from checks.scrubbed import scrubbed_coverage, scrubbed_sample
from checks.streams import SequenceComparison
from curation.graph import DECONTAMINATED, DOCUMENTS, LINE_DEDUP, SCRUBBED, URL_DEDUP
from curation.partition import Manifest, PartitionLayout
from curation.storage import LocalStore
from curation.tasks import sample_candidates

REPO = Path(__file__).resolve().parents[1]
PARTITION = "P"


def write_partition(store: LocalStore, asset: str, parts: list[pa.Table],
                    **tables: list[pa.Table]) -> PartitionLayout:
    """A complete partition of `asset` whose main table comes in `parts` (side tables too)."""
    layout = PartitionLayout(store, asset, PARTITION)
    layout.prepare("v1")
    written = [layout.write_part(index, part) for index, part in enumerate(parts)]
    side = {name: [layout.write_table(name, index, table) for index, table in enumerate(split)]
            for name, split in tables.items()}
    layout.write_manifest(Manifest(asset, PARTITION, "v1", written, tables=side))
    return layout


def ids(start: int, stop: int) -> list[str]:
    return [f"d{number:04d}" for number in range(start, stop)]


def test_the_streaming_comparator_ignores_how_the_streams_are_cut() -> None:
    left = [pa.array(ids(0, 3)), pa.array([], pa.string()), pa.array(ids(3, 10))]
    right = [pa.array(ids(0, 5)), pa.array(ids(5, 10))]
    same = SequenceComparison(left, right)
    assert (same.equal, same.left_rows, same.right_rows) == (True, 10, 10)
    swapped = SequenceComparison(left, [pa.array(ids(0, 5)), pa.array(ids(5, 10)[::-1])])
    assert not swapped.equal
    longer = SequenceComparison(left, [pa.array(ids(0, 10)), pa.array(ids(10, 12))])
    assert (longer.equal, longer.left_rows, longer.right_rows) == (False, 10, 12)


SUITE = TableSuite("part", (*not_null("doc_id", "n"), unique("doc_id"), between("n", 0, 10),
                            in_set("kind", ["a", "b"]),
                            Expectation("ExpectCompoundColumnsToBeUnique",
                                        {"column_list": ["doc_id", "kind"]})))


def contract_parts(doc_ids: list[str]) -> list[pa.Table]:
    """Three parts of a table with faults in each: nulls, values out of range, values out of
    the set, examples to keep in order."""
    count = len(doc_ids)
    table = pa.table({
        "doc_id": doc_ids,
        "n": [None if i % 11 == 3 else i % 13 for i in range(count)],
        "kind": ["c" if i % 7 == 5 else "a" for i in range(count)],
        "text": ["x" * 50] * count,
    })
    return [table.slice(0, 10), table.slice(10, 15), table.slice(25)]


def test_the_batched_contract_equals_the_one_batch_contract(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    layout = write_partition(LocalStore(str(tmp_path)), "asset", contract_parts(ids(0, 40)))
    whole = validate_tables(layout, [SUITE])
    monkeypatch.setattr(expectations, "VALIDATION_BATCH_ROWS", 7)
    batched = validate_tables(layout, [SUITE])
    assert batched == whole
    passed, rows, count = whole
    assert not passed and count == 40
    assert {row["expectation"]: row["success"] for row in rows}[
        "expect_column_values_to_be_unique"]
    assert sum(not row["success"] for row in rows) == 3


@pytest.mark.parametrize("batch_rows", [7, 1_000])
def test_a_duplicate_across_batches_fails_uniqueness(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch_rows: int) -> None:
    """The same doc_id in the first and the last part: one batch or six, two unexpected rows;
    the same for the repeated (doc_id, kind)."""
    doc_ids = ids(0, 40)
    doc_ids[38] = doc_ids[1]
    layout = write_partition(LocalStore(str(tmp_path)), "asset", contract_parts(doc_ids))
    monkeypatch.setattr(expectations, "VALIDATION_BATCH_ROWS", batch_rows)
    passed, rows, _ = validate_tables(layout, [SUITE])
    found = {row["expectation"]: row for row in rows}
    assert not passed
    assert not found["expect_column_values_to_be_unique"]["success"]
    assert found["expect_column_values_to_be_unique"]["unexpected"] == 2
    # Both rows are of kind "a": the (doc_id, kind) pair repeats too.
    assert found["expect_compound_columns_to_be_unique"]["unexpected"] == 2


def documents(store: LocalStore, count: int = 30) -> None:
    everything = pa.table({"doc_id": ids(0, count)})
    write_partition(store, DOCUMENTS, [everything.slice(0, 12), everything.slice(12)])


def test_an_edit_of_an_unknown_document_in_a_later_part_fails(tmp_path: Path) -> None:
    store = LocalStore(str(tmp_path))
    documents(store)
    summary = pa.table({"doc_id": ids(0, 30)})
    drops = [pa.table({"doc_id": ["d0001"]}), pa.table({"doc_id": ["d0025"]})]

    def edits(named: list[str]) -> list[pa.Table]:
        return [pa.table({"doc_id": ["d0001", "d0002"]}), pa.table({"doc_id": named})]

    write_partition(store, LINE_DEDUP, [summary], edits=edits(["d0025"]), decisions=drops)
    good = edits_valid(store, PARTITION)
    assert good.passed and good.metadata["edits"].value == 3
    write_partition(store, LINE_DEDUP, [summary], edits=edits(["d0025", "unknown"]),
                    decisions=drops)
    assert not edits_valid(store, PARTITION).passed
    write_partition(store, LINE_DEDUP, [summary], edits=edits(["d0026"]), decisions=drops)
    assert not edits_valid(store, PARTITION).passed  # d0025 dropped but not edited


def test_a_duplicate_naming_a_member_of_another_cluster_in_a_later_part_fails(
        tmp_path: Path) -> None:
    store = LocalStore(str(tmp_path))
    members = pa.table({"doc_id": ["a", "b", "c", "d"], "kept_doc_id": ["a", "a", "c", "c"],
                        "keep": [True, False, True, False]})

    def decisions(kept: str) -> list[pa.Table]:
        return [pa.table({"doc_id": ["b"], "kept_doc_id": ["a"]}),
                pa.table({"doc_id": ["d"], "kept_doc_id": [kept]})]

    write_partition(store, URL_DEDUP, [members.slice(0, 2), members.slice(2)],
                    decisions=decisions("c"))
    good = kept_members_valid(store, URL_DEDUP, PARTITION)
    assert good.passed and good.metadata["kept_members"].value == 2
    write_partition(store, URL_DEDUP, [members.slice(0, 2), members.slice(2)],
                    decisions=decisions("z"))
    missing = kept_members_valid(store, URL_DEDUP, PARTITION)
    assert not missing.passed and missing.metadata["kept_not_in_cluster"].value == 1
    write_partition(store, URL_DEDUP, [members.slice(0, 2), members.slice(2)],
                    decisions=decisions("b"))
    assert kept_members_valid(store, URL_DEDUP, PARTITION).metadata[
        "kept_is_a_duplicate"].value == 1


def test_coverage_checks_compare_doc_ids_part_by_part(tmp_path: Path) -> None:
    """Output cut into other parts than the documents passes; a swap in the last part, or a
    missing row, fails."""
    store = LocalStore(str(tmp_path))
    documents(store)
    text = ["some text"] * 30
    text[20] = "  "

    def scrubbed(doc_ids: list[str]) -> None:
        table = pa.table({"doc_id": doc_ids, "text": text[:len(doc_ids)]})
        write_partition(store, SCRUBBED, [table.slice(0, 5), table.slice(5, 15), table.slice(20)],
                        decisions=[pa.table({"doc_id": ["d0020"]})])

    scrubbed(ids(0, 30))
    good = scrubbed_coverage(store, PARTITION)
    assert good.passed, good.description
    assert good.description == f"{SCRUBBED}[{PARTITION}]: 30 rows for 30 documents, 1 left " \
        "empty and 1 empty_after_edits decisions"
    swapped = ids(0, 30)
    swapped[27], swapped[28] = swapped[28], swapped[27]
    scrubbed(swapped)
    assert not scrubbed_coverage(store, PARTITION).passed
    scrubbed(ids(0, 29))
    short = scrubbed_coverage(store, PARTITION)
    assert not short.passed and short.metadata["rows"].value == 29

    def decontaminated(doc_ids: list[str]) -> None:
        table = pa.table({"doc_id": doc_ids, "items": [1 if i == 25 else 0 for i in range(30)]})
        hit = pa.table({"doc_id": ["d0025"], "benchmark": ["b"], "item_id": ["1"]})
        write_partition(store, DECONTAMINATED, [table.slice(0, 20), table.slice(20)],
                        hits=[hit.slice(0, 0), hit],
                        decisions=[pa.table({"doc_id": ["d0025"], "detail": ["b/1"]})])

    decontaminated(ids(0, 30))
    assert decontaminated_coverage(store, PARTITION).passed
    decontaminated(swapped)
    assert not decontaminated_coverage(store, PARTITION).passed


def test_the_streamed_rescan_sample_is_the_one_of_the_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The k smallest hash ranks kept while streaming are `sample_candidates` of all the rows,
    the texts in row order."""
    monkeypatch.setattr(rescan, "RESCAN_DOCUMENTS", 25)
    store = LocalStore(str(tmp_path))
    doc_ids = ids(0, 300)
    table = pa.table({"doc_id": doc_ids, "text": [f"text of {d}" for d in doc_ids]})
    write_partition(store, SCRUBBED, [table.slice(0, 100), table.slice(100, 30),
                                      table.slice(130)])
    chosen = set(sample_candidates(doc_ids, 25))
    assert scrubbed_sample(store, PARTITION) == [(d, f"text of {d}") for d in doc_ids
                                                 if d in chosen]


PEAK = """
import json, resource, sys
from checks.expectations import TableSuite, not_null, unique, validate_tables
from curation.partition import PartitionLayout
from curation.storage import LocalStore
suite = TableSuite("part", (*not_null("doc_id"), unique("doc_id")))
small = validate_tables(PartitionLayout(LocalStore(sys.argv[1]), "small", "P"), [suite])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
passed, _, rows = validate_tables(PartitionLayout(LocalStore(sys.argv[1]), "big", "P"), [suite])
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"passed": passed, "rows": rows, "grown_kib": after - before}))
"""


def test_a_contract_never_decodes_the_text_column(tmp_path: Path) -> None:
    """Four parts whose text is 256 MB decoded (a few KB stored): validating the doc_id suite
    grows the process by far less than one part's text."""
    store = LocalStore(str(tmp_path))
    write_partition(store, "small", [pa.table({"doc_id": ["a"], "text": ["x"]})])
    value = "x" * (16 << 20)
    write_partition(store, "big", [pa.table({"doc_id": ids(4 * p, 4 * p + 4), "text": [value] * 4})
                                   for p in range(4)])
    del value
    ran = subprocess.run([sys.executable, "-c", PEAK, str(tmp_path)], cwd=REPO, check=True,
                         capture_output=True, text=True)
    found = json.loads(ran.stdout.strip().splitlines()[-1])
    assert found["passed"] and found["rows"] == 16
    assert found["grown_kib"] < 32 << 10, found
