"""The `scrubbed` stage: the one rewrite of the text (docs/architecture.md, "Annotate, then
select").

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

from curation.code import CODE_VERSION, find_secrets
from curation.edits import Replacement, apply_edits
from curation.graph import DOCUMENTS, HEURISTICS, LINE_DEDUP, SCRUBBED
from curation.pii import PiiSettings, find_pii
from curation.schema import EDIT_SCHEMA
from curation.stages.base import AnnotateStage, Annotation, DocumentsInput, Drop
from curation.tasks import PartitionResult, sample_candidates

ASSET = SCRUBBED
KERNEL_VERSION = "scrubbed-1"
SAMPLES_PER_TASK = 20
EMPTY_AFTER_EDITS = "empty_after_edits"
SECRET = "SECRET"
SECRET_PLACEHOLDER = "|||SECRET|||"

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
class ScrubWork(AnnotateStage):
    """In a code source (`code`), `line_dedup`'s boilerplate lines stay (`import os` in
    every file is code, not boilerplate) and credentials become `SECRET_PLACEHOLDER`
    (`curation.code.find_secrets`) besides the PII."""

    settings: PiiSettings
    code: bool = False

    asset = ASSET
    reported_reasons = (EMPTY_AFTER_EDITS,)

    def _edits(self, index: int) -> dict[str, _DocumentEdits]:
        """The part's recorded edits: `line_dedup`'s edits have one part per documents part,
        like `heuristics`', so a task reads its own part's only."""
        heuristics = self.documents.upstream(HEURISTICS).read_part(index, "edits")
        if self.code:
            return recorded_edits(heuristics)
        lines = self.documents.upstream(LINE_DEDUP).read_part(index, "edits")
        return recorded_edits(pa.concat_tables([heuristics, lines]))

    def _replacements(self, text: str) -> list[Replacement]:
        pii = [Replacement(span.start, span.end, self.settings.placeholders[span.kind],
                           span.kind) for span in find_pii(text, self.settings)]
        if not self.code:
            return pii
        secrets = [Replacement(start, end, SECRET_PLACEHOLDER, SECRET)
                   for start, end in find_secrets(text)]
        # a secret wins over PII inside it (an e-mail in a private key's comment)
        return secrets + [r for r in pii if not any(r.start < s.end and s.start < r.end
                                                    for s in secrets)]

    def annotate(self, index: int, table: pa.Table) -> Annotation:
        doc_ids, texts = table["doc_id"].to_pylist(), table["text"].to_pylist()
        recorded = self._edits(index)
        rows: list[dict[str, Any]] = []
        pii_edits: list[dict[str, Any]] = []
        empty: list[Drop] = []
        kinds: Counter[str] = Counter()
        for doc_id, text in zip(doc_ids, texts, strict=True):
            edits = recorded.get(doc_id) or _DocumentEdits(set(), [])
            edited = apply_edits(text, edits.lines, [*edits.cuts, *self._replacements(text)])
            replaced = [span for span in edited.replacements if span.kind != "citation"]
            kinds.update(span.kind for span in replaced)
            pii_edits.extend({"doc_id": doc_id, "stage": ASSET, "kind": span.kind, "line": None,
                              "start": span.start, "end": span.end} for span in replaced)
            rows.append({"doc_id": doc_id, "text": edited.text,
                         "lines_removed": edited.lines_removed,
                         "cuts": len(edited.replacements) - len(replaced),
                         "pii_replaced": len(replaced)})
            if text.strip() and not edited.text.strip():
                empty.append(Drop(doc_id, EMPTY_AFTER_EDITS, float(edited.lines_removed)))
        counts = {f"pii.{kind}": n for kind, n in kinds.items()}
        counts["documents_with_pii"] = sum(1 for row in rows if row["pii_replaced"])
        counts["documents_edited"] = sum(
            1 for row, text in zip(rows, texts, strict=True) if row["text"] != text)
        counts["lines_removed"] = sum(row["lines_removed"] for row in rows)
        counts["cuts"] = sum(row["cuts"] for row in rows)
        return Annotation(pa.Table.from_pylist(rows, SCRUBBED_SCHEMA), empty,
                          {"edits": pa.Table.from_pylist(pii_edits, EDIT_SCHEMA)}, counts,
                          sample_candidates(doc_ids, SAMPLES_PER_TASK))


def run_scrubbed(documents: DocumentsInput, settings: PiiSettings, workers: int,
                 on_task_done: Any = None, samples: tuple[int, str] | None = None,
                 code: bool = False) -> PartitionResult:
    """The stage over one partition; `code`: a code source's (see `ScrubWork`)."""
    upstream = {name: documents.upstream(name).complete_manifest().data_version
                for name in (HEURISTICS, LINE_DEDUP)}
    inputs = {"kernel": KERNEL_VERSION, "settings": settings.model_dump(mode="json"),
              DOCUMENTS: documents.data_version(), **upstream}
    if code:
        inputs["code"] = CODE_VERSION
    return ScrubWork(documents, settings, code).run(inputs, workers, on_task_done,
                                                    samples=samples)
