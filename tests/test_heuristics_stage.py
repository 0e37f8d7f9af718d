"""The heuristics stage on real extracted pages: signals per document, decisions, C4 edits."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from curation.config import DocumentsSettings, LanguageSettings
from curation.graph import DOCUMENTS, HEURISTICS, LANGUAGE
from curation.heuristics import GopherQualitySettings, HeuristicsSettings, annotate
from curation.minhash import MinHashSettings
from curation.partition import Manifest, PartitionLayout
from curation.stages.base import DocumentsInput
from curation.stages.documents import run_documents
from curation.stages.heuristics import run_heuristics
from curation.stages.language import run_language
from curation.storage import LocalStore

FILES = ["warc/non_cc/dolma_wget-sample-0000_22responses.warc.gz",
         "warc/non_cc/ia-heritrix-2008_archive-org-shallow_299responses.warc.gz",
         "warc/cc-main-2020-34_resiliparse_16responses.warc.gz"]


def test_stage_matches_the_kernel_and_explains_every_drop(shared_data: Path,
                                                          tmp_path: Path) -> None:
    store = LocalStore(str(tmp_path))
    run_documents("REAL", [str(shared_data / f) for f in FILES], store, DocumentsSettings(),
                  workers=0)
    documents = DocumentsInput(store, "REAL")
    run_language(documents, LanguageSettings(), workers=0)
    result = run_heuristics(documents, HeuristicsSettings(), MinHashSettings(), workers=2)

    layout = PartitionLayout(store, "heuristics", "REAL")
    signals = layout.read_table()
    docs = PartitionLayout(store, "documents", "REAL").read_table(["doc_id", "text"])
    languages = PartitionLayout(store, "language", "REAL").read_table(["language"])
    assert signals["doc_id"].equals(docs["doc_id"])
    # The stage (two worker processes, part by part) gives what the kernel gives in one call.
    direct = annotate(list(zip(docs["text"].to_pylist(), languages["language"].to_pylist(),
                               strict=True)))
    assert signals["keep"].to_pylist() == direct.keep
    assert signals["reason"].to_pylist() == direct.reason
    kept = pc.sum(signals["keep"]).as_py()
    assert 0 < kept < signals.num_rows and result.stats.docs_out == kept

    decisions = layout.read_table(name="decisions").to_pylist()
    assert len(decisions) == signals.num_rows - kept
    by_id = dict(zip(signals["doc_id"].to_pylist(), signals["reason"].to_pylist(), strict=True))
    for row in decisions:
        assert row["verdict"] == "drop" and row["reason"] == by_id[row["doc_id"]]
    assert sum(result.stats.rejects.values()) == len(decisions)

    edits = layout.read_table(name="edits")
    assert edits.num_rows == result.stats.counts["edits"] > 0
    assert set(edits["doc_id"].to_pylist()) <= set(docs["doc_id"].to_pylist())
    assert set(edits["stage"].to_pylist()) == {"heuristics.c4"}


def _write(store: LocalStore, asset: str, table: pa.Table) -> None:
    layout = PartitionLayout(store, asset, "P")
    layout.write_manifest(Manifest(asset, "P", "v1", [layout.write_part(0, table)]))


def test_the_alpha_word_setting_switches_the_stages_decision(tmp_path: Path) -> None:
    """The same documents through the stage under each definition: the dialogue is dropped
    by datatrove's token words and kept by the paper's whitespace words; a one-line document
    is dropped by both for another rule; every run stores both ratios."""
    from tests.test_heuristics import DIALOGUE, SENTENCE

    texts = {"dialogue": DIALOGUE, "line": SENTENCE}
    tables = {}
    for definition in ("datatrove", "gopher_paper"):
        store = LocalStore(str(tmp_path / definition))
        _write(store, DOCUMENTS, pa.table({"doc_id": list(texts), "text": list(texts.values())}))
        _write(store, LANGUAGE, pa.table({"doc_id": list(texts), "language": ["en", "en"]}))
        settings = HeuristicsSettings(
            gopher_quality=GopherQualitySettings(alpha_words=definition))
        result = run_heuristics(DocumentsInput(store, "P"), settings, MinHashSettings(), 0)
        layout = PartitionLayout(store, HEURISTICS, "P")
        tables[definition] = layout.read_table()
        decisions = layout.read_table(name="decisions").to_pylist()
        assert result.stats.docs_out == pc.sum(tables[definition]["keep"]).as_py()
        tables[definition, "decisions"] = {row["doc_id"]: row["reason"] for row in decisions}
    line_rule = "gopher_repetition.top_4_gram_char_frac"
    assert tables["datatrove"]["keep"].to_pylist() == [False, False]
    assert tables["datatrove", "decisions"] == {
        "dialogue": "gopher_quality.below_alpha_threshold", "line": line_rule}
    assert tables["gopher_paper"]["keep"].to_pylist() == [True, False]
    assert tables["gopher_paper", "decisions"] == {"line": line_rule}
    for column in ("gopher_alpha_words_frac", "gopher_alpha_words_frac_whitespace"):
        assert tables["datatrove"][column].equals(tables["gopher_paper"][column])
    assert tables["datatrove"]["gopher_alpha_words_frac_whitespace"].to_pylist()[0] == 1.0
