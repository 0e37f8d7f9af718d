"""The `heuristics` and `minhash_signatures` stages in one pass: each document is split into
words once, and the rule suites and the MinHash shingles share the split (docs/architecture.md, cost
order: datatrove re-splits words with spaCy in every filter and again for MinHash)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from curation.graph import DOCUMENTS, HEURISTICS, LANGUAGE, MINHASH_SIGNATURES
from curation.heuristics import HeuristicsSettings, annotate_splits
from curation.minhash import MinHashSettings, band_hashes, signatures, signatures_table
from curation.schema import EDIT_SCHEMA
from curation.stages.base import AnnotateStage, Annotation, DocumentsInput, Drop
from curation.tasks import PartitionResult
from curation.text import split_text

# 3: the whitespace alpha-word signal, and the compact MinHash signature that near-duplicate
# verification reads
KERNEL_VERSION = "heuristics-3"


@dataclass(frozen=True)
class HeuristicsWork(AnnotateStage):
    settings: HeuristicsSettings
    minhash: MinHashSettings

    asset = HEURISTICS
    also = (MINHASH_SIGNATURES,)

    def annotate(self, index: int, table: pa.Table) -> Annotation:
        languages = self.documents.upstream(LANGUAGE).read_part(
            index, columns=["language"])["language"].to_pylist()
        doc_ids = table["doc_id"].to_pylist()
        splits = [split_text(text) for text in table["text"].to_pylist()]
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
                   on_task_done: Any = None) -> PartitionResult:
    return HeuristicsWork(documents, settings, minhash).run(
        {"kernel": KERNEL_VERSION, "settings": settings.model_dump(mode="json"),
         "minhash": minhash.model_dump(mode="json"), DOCUMENTS: documents.data_version(),
         LANGUAGE: documents.upstream(LANGUAGE).complete_manifest().data_version},
        workers, on_task_done)
