"""The `scrubbed` stage: the one rewrite of the text (architecture.md, "Annotate, then select").

Per `documents` part: the C4 line removals and citation cuts `heuristics` recorded, the
boilerplate lines `line_dedup` recorded and the PII found here are applied together by
`curation.edits.apply_edits`, so every document is rewritten once. PII spans become typed
placeholders and are recorded as edits too (which type, where in the original text); a document
the edits leave empty gets an `empty_after_edits` drop.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from curation.annotate import DocumentsInput
from curation.config import stable_hash
from curation.edits import Replacement, apply_edits
from curation.partition import PartitionLayout
from curation.pii import PiiSettings, find_pii
from curation.schema import EDIT_SCHEMA, decisions_table
from curation.stats import StageStats
from curation.tasks import (
    PartitionResult,
    PartitionRun,
    TaskOutput,
    run_partition,
    sample_candidates,
)

ASSET = "scrubbed"
KERNEL_VERSION = "scrubbed-1"
HEURISTICS = "heuristics"
LINE_DEDUP = "line_dedup"
SAMPLES_PER_TASK = 20

SCRUBBED_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("lines_removed", pa.int32(), nullable=False),
        pa.field("cuts", pa.int32(), nullable=False),
        pa.field("pii_replaced", pa.int32(), nullable=False),
    ]
)


@dataclass
class _DocumentEdits:
    lines: set[int]
    cuts: list[Replacement]


def recorded_edits(edits: pa.Table) -> dict[str, _DocumentEdits]:
    """Edit rows (`EDIT_SCHEMA`) per document: removed lines, and cuts for the span kinds."""
    found: dict[str, _DocumentEdits] = defaultdict(lambda: _DocumentEdits(set(), []))
    for row in edits.select(["doc_id", "kind", "line", "start", "end"]).to_pylist():
        target = found[row["doc_id"]]
        if row["kind"] == "citation":
            target.cuts.append(Replacement(row["start"], row["end"], "", "citation"))
        else:
            target.lines.add(row["line"])
    return found


@dataclass(frozen=True)
class ScrubWork:
    documents: DocumentsInput
    settings: PiiSettings

    def _edits(self, index: int, doc_ids: list[str]) -> dict[str, _DocumentEdits]:
        store, partition = self.documents.store, self.documents.partition
        heuristics = PartitionLayout(store, HEURISTICS, partition).read_part(index, "edits")
        lines = PartitionLayout(store, LINE_DEDUP, partition).read_table(name="edits")
        lines = lines.filter(pc.is_in(lines["doc_id"], pa.array(doc_ids, pa.string())))
        return recorded_edits(pa.concat_tables([heuristics, lines]))

    def __call__(self, index: int) -> TaskOutput:
        table = self.documents.read(index)
        doc_ids, texts = table["doc_id"].to_pylist(), table["text"].to_pylist()
        recorded = self._edits(index, doc_ids)
        rows: list[dict[str, Any]] = []
        pii_edits: list[dict[str, Any]] = []
        empty: list[dict[str, Any]] = []
        kinds: Counter[str] = Counter()
        for doc_id, text in zip(doc_ids, texts, strict=True):
            edits = recorded.get(doc_id) or _DocumentEdits(set(), [])
            pii = [Replacement(span.start, span.end, self.settings.placeholders[span.kind],
                               span.kind) for span in find_pii(text, self.settings)]
            edited = apply_edits(text, edits.lines, [*edits.cuts, *pii])
            replaced = [span for span in edited.replacements if span.kind != "citation"]
            kinds.update(span.kind for span in replaced)
            pii_edits.extend({"doc_id": doc_id, "stage": ASSET, "kind": span.kind, "line": None,
                              "start": span.start, "end": span.end} for span in replaced)
            rows.append({"doc_id": doc_id, "text": edited.text,
                         "lines_removed": edited.lines_removed,
                         "cuts": len(edited.replacements) - len(replaced),
                         "pii_replaced": len(replaced)})
            if text.strip() and not edited.text.strip():
                empty.append({"doc_id": doc_id, "stage": ASSET, "verdict": "drop",
                              "reason": "empty_after_edits",
                              "value": float(edited.lines_removed)})
        stats = StageStats(records_in=len(rows), candidates=len(rows),
                           docs_out=len(rows) - len(empty))
        stats.rejects["empty_after_edits"] = len(empty)
        stats.counts.update({f"pii.{kind}": n for kind, n in kinds.items()})
        stats.counts["documents_with_pii"] = sum(1 for row in rows if row["pii_replaced"])
        stats.counts["documents_edited"] = sum(
            1 for row, text in zip(rows, texts, strict=True) if row["text"] != text)
        stats.counts["lines_removed"] = sum(row["lines_removed"] for row in rows)
        stats.counts["cuts"] = sum(row["cuts"] for row in rows)
        return TaskOutput(
            {"part": pa.Table.from_pylist(rows, SCRUBBED_SCHEMA),
             "edits": pa.Table.from_pylist(pii_edits, EDIT_SCHEMA),
             "decisions": decisions_table(empty)},
            stats, sample_candidates(doc_ids, SAMPLES_PER_TASK))


def run_scrubbed(documents: DocumentsInput, settings: PiiSettings, workers: int,
                 on_task_done: Any = None, samples: tuple[int, str] | None = None
                 ) -> PartitionResult:
    store, partition = documents.store, documents.partition
    upstream = {name: PartitionLayout(store, name, partition).complete_manifest().data_version
                for name in (HEURISTICS, LINE_DEDUP)}
    version = stable_hash({"kernel": KERNEL_VERSION, "settings": settings.model_dump(mode="json"),
                           "documents": documents.data_version(), **upstream})
    run = PartitionRun(store, ASSET, partition, version)
    return run_partition(run, documents.task_count(), ScrubWork(documents, settings), workers,
                         on_task_done, samples=samples)
