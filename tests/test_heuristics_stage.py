"""The heuristics stage on real extracted pages: signals per document, decisions, C4 edits."""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc

from curation.config import DocumentsSettings, LanguageSettings
from curation.heuristics import HeuristicsSettings, annotate
from curation.minhash import MinHashSettings
from curation.partition import PartitionLayout
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
