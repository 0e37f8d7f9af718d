"""PII scrubbing and decontamination on the built-in sample, against the generator's truth."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from curation.edits import apply_edits
from curation.partition import PartitionLayout
from curation.pii import DEFAULT_PLACEHOLDERS
from curation.stages.scrubbed import recorded_edits
from curation.storage import LocalStore

WEB = ["SAMPLE-01", "SAMPLE-02"]
PLACEHOLDER = {"email": "EMAIL_ADDRESS", "phone": "PHONE_NUMBER", "ipv4": "IP_ADDRESS",
               "ipv6": "IP_ADDRESS", "card": "CREDIT_CARD"}


@pytest.fixture(scope="module")
def sample(sample_run) -> dict:
    store = LocalStore(str(sample_run.root))
    pages = {}
    for line in (sample_run.root / "sample/truth/pages.jsonl").read_text().splitlines():
        page = json.loads(line)
        pages[(page["snapshot"], page["url"])] = page
    docs = {}
    for partition in WEB:
        documents = PartitionLayout(store, "documents", partition).read_table(
            ["doc_id", "url", "text"]).to_pylist()
        scrubbed = PartitionLayout(store, "scrubbed", partition).read_table().to_pylist()
        flags = PartitionLayout(store, "decontaminated", partition).read_table().to_pylist()
        line_edits = recorded_edits(pa.concat_tables([
            PartitionLayout(store, asset, partition).read_table(name="edits")
            for asset in ("heuristics", "line_dedup")]))
        for document, scrub, flag in zip(documents, scrubbed, flags, strict=True):
            assert document["doc_id"] == scrub["doc_id"] == flag["doc_id"]
            edits = line_edits.get(document["doc_id"])
            # What the line edits alone leave: PII and look-alikes there must be handled.
            kept = apply_edits(document["text"], edits.lines, edits.cuts).text if edits \
                else document["text"]
            docs[document["doc_id"]] = {"page": pages[(partition, document["url"])],
                                        "text": document["text"], "kept": kept,
                                        "scrubbed": scrub, "flag": flag,
                                        "partition": partition}
    return {"store": store, "docs": docs}


def test_every_planted_pii_value_is_replaced_by_its_placeholder(sample) -> None:
    checked = 0
    for doc in sample["docs"].values():
        for pii in doc["page"]["pii"]:
            if pii["value"] not in doc["text"]:
                continue  # on a part of the page the extractor left out
            assert pii["value"] not in doc["scrubbed"]["text"], pii
            if pii["value"] in doc["kept"]:  # not on a line the other edits removed
                checked += 1
                placeholder = DEFAULT_PLACEHOLDERS[PLACEHOLDER[pii["type"]]]
                assert placeholder in doc["scrubbed"]["text"], pii
    assert checked >= 60


def test_lookalikes_and_untouched_documents_stay_byte_for_byte(sample) -> None:
    lookalikes = untouched = 0
    for doc in sample["docs"].values():
        scrubbed = doc["scrubbed"]
        for lookalike in doc["page"]["lookalikes"]:  # prices, versions, dates, ISBNs...
            if lookalike["value"] in doc["kept"]:
                lookalikes += 1
                assert lookalike["value"] in scrubbed["text"], lookalike
        if not (scrubbed["lines_removed"] or scrubbed["cuts"] or scrubbed["pii_replaced"]):
            untouched += 1
            assert scrubbed["text"] == doc["text"]
    assert lookalikes >= 100 and untouched >= 5  # C4 line edits touch most web pages


def test_pii_edits_name_the_type_and_the_span_in_the_original_text(sample) -> None:
    for partition in WEB:
        edits = PartitionLayout(sample["store"], "scrubbed", partition).read_table(
            name="edits").to_pylist()
        assert edits
        per_doc = {}
        for edit in edits:
            per_doc[edit["doc_id"]] = per_doc.get(edit["doc_id"], 0) + 1
            text = sample["docs"][edit["doc_id"]]["text"]
            assert edit["stage"] == "scrubbed" and edit["kind"] in DEFAULT_PLACEHOLDERS
            assert 0 <= edit["start"] < edit["end"] <= len(text)
        for doc_id, count in per_doc.items():
            assert sample["docs"][doc_id]["scrubbed"]["pii_replaced"] == count


def test_boilerplate_lines_recorded_by_line_dedup_are_gone_from_the_text(sample) -> None:
    removed = 0
    for partition in WEB:
        edits = PartitionLayout(sample["store"], "line_dedup", partition).read_table(
            name="edits").to_pylist()
        for edit in edits:
            doc = sample["docs"][edit["doc_id"]]
            lines = doc["text"].splitlines()
            line = lines[edit["line"]]
            if lines.count(line) == 1 and line.strip():
                removed += 1
                assert line not in doc["scrubbed"]["text"].splitlines()
    assert removed >= 20


def test_pages_quoting_the_sample_benchmark_are_flagged_with_their_items(sample) -> None:
    quoting = flagged = 0
    for doc_id, doc in sample["docs"].items():
        items = doc["page"]["eval_items"]
        assert doc["flag"]["contaminated"] == bool(items), doc["page"]["url"]
        if not items:
            continue
        quoting += 1
        decisions = PartitionLayout(sample["store"], "decontaminated", doc["partition"])\
            .read_table(name="decisions").to_pylist()
        found = {json.loads(d["detail"])["item_id"] for d in decisions if d["doc_id"] == doc_id}
        assert found == {f"sample_eval:{index + 1}" for index in items}
        flagged += 1
    assert quoting == flagged >= 10
