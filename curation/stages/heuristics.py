"""The `heuristics` and `minhash_signatures` stages in one pass: each document is split into
words once, and the rule suites and the MinHash shingles share the split (docs/architecture.md, cost
order: datatrove re-splits words with spaCy in every filter and again for MinHash)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from curation.code import CODE_VERSION
from curation.graph import DOCUMENTS, HEURISTICS, LANGUAGE, MINHASH_SIGNATURES
from curation.heuristics import (
    HeuristicsSettings,
    annotate_code,
    annotate_splits,
    split_documents,
)
from curation.minhash import (
    MinHashSettings,
    band_hashes,
    code_shingle_hashes,
    signatures,
    signatures_from_shingles,
    signatures_table,
)
from curation.schema import EDIT_SCHEMA
from curation.stages.base import AnnotateStage, Annotation, DocumentsInput, Drop
from curation.tasks import PartitionResult

# 3: the whitespace alpha-word signal, and the compact MinHash signature that near-duplicate
# verification reads; 4: the code suite's columns; 5: segmented words and per-language rules
KERNEL_VERSION = "heuristics-5"


@dataclass(frozen=True)
class HeuristicsWork(AnnotateStage):
    """The prose suites and word shingles; in a code source (`code`), the code suite and
    code shingles (`curation.code`)."""

    settings: HeuristicsSettings
    minhash: MinHashSettings
    code: bool = False

    asset = HEURISTICS
    also = (MINHASH_SIGNATURES,)

    def annotate(self, index: int, table: pa.Table) -> Annotation:
        doc_ids = table["doc_id"].to_pylist()
        texts = table["text"].to_pylist()
        if self.code:
            annotations = annotate_code(texts, table["url"].to_pylist(), self.settings)
            sigs = signatures_from_shingles(
                [code_shingle_hashes(text, self.minhash) for text in texts], self.minhash)
        else:
            languages = self.documents.upstream(LANGUAGE).read_part(
                index, columns=["language"])["language"].to_pylist()
            splits = split_documents(texts, languages, self.settings)
            annotations = annotate_splits(splits, languages, self.settings)
            sigs = signatures(splits, self.minhash)
        bands = band_hashes(sigs, self.minhash)
        signals = annotations.to_arrow()
        signals = signals.add_column(0, "doc_id", pa.array(doc_ids, pa.string()))
        drops = [Drop(doc_id, reason, value)
                 for doc_id, keep, reason, value in zip(doc_ids, annotations.keep,
                                                        annotations.reason, annotations.value,
                                                        strict=True)
                 if not keep]
        edits = [
            {"doc_id": doc_ids[edit.doc_index], "stage": f"{HEURISTICS}.{edit.stage}",
             "kind": edit.kind, "line": edit.line, "start": edit.start, "end": edit.end}
            for edit in annotations.edits
        ]
        counts = {f"skipped.{rule}": n for rule, n in annotations.skipped.items()}
        counts |= {f"suite_drop.{rule}": n for rule, n in annotations.suite_drops.items()}
        counts["edits"] = len(edits)
        return Annotation(signals, drops,
                          {"edits": pa.Table.from_pylist(edits, EDIT_SCHEMA),
                           f"{MINHASH_SIGNATURES}:part": signatures_table(doc_ids, bands, sigs)},
                          counts)


def run_heuristics(documents: DocumentsInput, settings: HeuristicsSettings,
                   minhash: MinHashSettings, workers: int,
                   on_task_done: Any = None, code: bool = False) -> PartitionResult:
    """The stage over one partition; `code`: a code source's (see `HeuristicsWork`)."""
    inputs = {"kernel": KERNEL_VERSION, "settings": settings.model_dump(mode="json"),
              "word_lists": settings.word_list_digests(),
              "minhash": minhash.model_dump(mode="json"), DOCUMENTS: documents.data_version(),
              LANGUAGE: documents.upstream(LANGUAGE).complete_manifest().data_version}
    if code:
        documents = replace(documents, columns=("doc_id", "url", "text"))
        inputs["code"] = CODE_VERSION
    return HeuristicsWork(documents, settings, minhash, code).run(inputs, workers, on_task_done)
