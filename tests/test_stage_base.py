"""`AnnotateStage`: a stage writes only `annotate`; the base reads the part, writes the tables
and builds the statistics and decision rows."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

from curation.config import stable_hash
from curation.graph import DOCUMENTS
from curation.partition import Manifest, PartitionLayout
from curation.stages.base import AnnotateStage, Annotation, DocumentsInput, Drop
from curation.storage import LocalStore

PARTITION = "TINY"
PARTS = [
    [("a", "one two three four"), ("b", "tiny"), ("c", "spam and spam and more spam")],
    [("d", "spam"), ("e", "five words are right here")],
]


@dataclass(frozen=True)
class WordStage(AnnotateStage):
    """Drops a document under `min_words` words, and once per `spam` it contains (as
    decontamination records one row per eval item found)."""

    min_words: int

    asset = "word_counts"
    reported_reasons = ("never_tripped",)

    def annotate(self, index: int, table: pa.Table) -> Annotation:
        doc_ids, texts = table["doc_id"].to_pylist(), table["text"].to_pylist()
        words = [len(text.split()) for text in texts]
        drops = []
        for doc_id, text, count in zip(doc_ids, texts, words, strict=True):
            if count < self.min_words:
                drops.append(Drop(doc_id, "too_short", float(count)))
            drops += [Drop(doc_id, "spam", None, f"word {n}")
                      for n, word in enumerate(text.split()) if word == "spam"]
        signals = pa.table({"doc_id": doc_ids, "words": words})
        side = pa.table({"part": [index]})
        return Annotation(signals, drops, {"side": side}, {"words": sum(words)}, doc_ids[:1])


@dataclass(frozen=True)
class ScoreOnly(WordStage):
    asset = "word_scores"
    writes_decisions = False


@pytest.fixture
def documents(tmp_path: Path) -> DocumentsInput:
    store = LocalStore(str(tmp_path))
    layout = PartitionLayout(store, DOCUMENTS, PARTITION)
    layout.prepare("v1")
    parts = [layout.write_part(index, pa.table({"doc_id": [d for d, _ in rows],
                                                 "text": [t for _, t in rows]}))
             for index, rows in enumerate(PARTS)]
    layout.write_manifest(Manifest(DOCUMENTS, PARTITION, "v1", parts))
    return DocumentsInput(store, PARTITION)


def test_the_base_builds_stats_decisions_and_side_tables(documents: DocumentsInput) -> None:
    stage = WordStage(documents, min_words=2)
    output = stage(0)
    # Documents a, b, c: b is too short, c holds spam three times; each counts once.
    assert output.stats.records_in == output.stats.candidates == 3
    assert output.stats.docs_out == 1
    assert dict(output.stats.rejects) == {"too_short": 1, "spam": 1, "never_tripped": 0}
    assert output.stats.counts == {"words": 4 + 1 + 6}
    assert output.sample_ids == ["a"]
    assert set(output.tables) == {"part", "side", "decisions"}
    decisions = output.tables["decisions"].to_pylist()
    assert [(row["doc_id"], row["reason"], row["value"], row["detail"]) for row in decisions] == [
        ("b", "too_short", 1.0, None),
        ("c", "spam", None, "word 0"), ("c", "spam", None, "word 2"), ("c", "spam", None, "word 5"),
    ]
    assert {(row["stage"], row["verdict"], row["kept_doc_id"]) for row in decisions} == \
        {("word_counts", "drop", None)}


def test_run_writes_every_part_under_the_hashed_version(documents: DocumentsInput) -> None:
    inputs = {"kernel": "words-1", DOCUMENTS: documents.data_version()}
    # Two worker processes: the stage is pickled to them.
    result = WordStage(documents, min_words=2).run(inputs, workers=2)
    assert result.manifest.version == stable_hash(inputs)
    stats = result.stats
    # d is both too short and spam: one document, counted under each reason.
    assert (stats.records_in, stats.docs_out, stats.rejected) == (5, 2, 4)
    layout = documents.upstream("word_counts")
    assert layout.read_table()["words"].to_pylist() == [4, 1, 6, 1, 5]
    assert layout.read_table(name="side")["part"].to_pylist() == [0, 1]
    assert layout.read_table(name="decisions")["doc_id"].to_pylist() == ["b", "c", "c", "c", "d",
                                                                          "d"]


def test_a_stage_without_verdicts_writes_no_decisions(documents: DocumentsInput) -> None:
    stage = ScoreOnly(documents, min_words=2)
    assert set(stage(1).tables) == {"part", "side"}
    manifest = stage.run({"kernel": "scores-1"}, workers=0).manifest
    assert set(manifest.tables) == {"side"}
