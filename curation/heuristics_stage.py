"""The `heuristics` and `minhash_signatures` stages in one pass: each document is split into
words once, and the rule suites and the MinHash shingles share the split (architecture.md, cost
order: datatrove re-splits words with spaCy in every filter and again for MinHash)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from curation.annotate import DocumentsInput
from curation.config import stable_hash
from curation.heuristics import HeuristicsSettings, annotate_splits
from curation.minhash import MinHashSettings, band_hashes, signatures, signatures_table
from curation.partition import PartitionLayout
from curation.schema import EDIT_SCHEMA, decisions_table
from curation.stats import StageStats
from curation.tasks import PartitionResult, PartitionRun, TaskOutput, run_partition
from curation.text import split_text

ASSET = "heuristics"
SIGNATURES = "minhash_signatures"
KERNEL_VERSION = "heuristics-2"


@dataclass(frozen=True)
class HeuristicsWork:
    documents: DocumentsInput
    settings: HeuristicsSettings
    minhash: MinHashSettings

    def __call__(self, index: int) -> TaskOutput:
        table = self.documents.read(index)
        languages = PartitionLayout(self.documents.store, "language", self.documents.partition)\
            .read_part(index, columns=["language"])["language"].to_pylist()
        doc_ids = table["doc_id"].to_pylist()
        splits = [split_text(text) for text in table["text"].to_pylist()]
        annotations = annotate_splits(splits, languages, self.settings)
        bands = band_hashes(signatures(splits, self.minhash), self.minhash)
        signals = annotations.to_arrow()
        signals = signals.add_column(0, "doc_id", pa.array(doc_ids, pa.string()))
        stats = StageStats(records_in=len(doc_ids), candidates=len(doc_ids),
                           docs_out=sum(annotations.keep), rejects=annotations.drops)
        stats.counts.update({f"skipped.{rule}": n for rule, n in annotations.skipped.items()})
        stats.counts.update({f"suite_drop.{rule}": n
                             for rule, n in annotations.suite_drops.items()})
        decisions = [
            {"doc_id": doc_id, "stage": ASSET, "verdict": "drop", "reason": reason,
             "value": value}
            for doc_id, keep, reason, value in zip(doc_ids, annotations.keep, annotations.reason,
                                                    annotations.value, strict=True)
            if not keep
        ]
        edits = [
            {"doc_id": doc_ids[edit.doc_index], "stage": f"{ASSET}.{edit.stage}",
             "kind": edit.kind, "line": edit.line, "start": edit.start, "end": edit.end}
            for edit in annotations.edits
        ]
        stats.counts["edits"] = len(edits)
        return TaskOutput({"part": signals, "decisions": decisions_table(decisions),
                           "edits": pa.Table.from_pylist(edits, EDIT_SCHEMA),
                           f"{SIGNATURES}:part": signatures_table(doc_ids, bands)}, stats)


def run_heuristics(documents: DocumentsInput, settings: HeuristicsSettings,
                   minhash: MinHashSettings, workers: int,
                   on_task_done: Any = None) -> PartitionResult:
    language_version = PartitionLayout(documents.store, "language",
                                       documents.partition).complete_manifest().data_version
    version = stable_hash({"kernel": KERNEL_VERSION, "settings": settings.model_dump(mode="json"),
                           "minhash": minhash.model_dump(mode="json"),
                           "documents": documents.data_version(), "language": language_version})
    run = PartitionRun(documents.store, ASSET, documents.partition, version, also=(SIGNATURES,))
    return run_partition(run, documents.task_count(),
                         HeuristicsWork(documents, settings, minhash), workers, on_task_done)
