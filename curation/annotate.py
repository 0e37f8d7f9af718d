"""Per-document annotation stages: one task per `documents` part, signals plus decisions.

Stages annotate (architecture.md, "Annotate, then select"): they write `doc_id` with their
signals and a verdict under the pipeline defaults, and a decision row for each drop, never
another copy of the text.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from curation.partition import PartitionLayout
from curation.storage import Store

DOCUMENTS = "documents"


@dataclass(frozen=True)
class DocumentsInput:
    """The columns a stage reads from one `documents` partition, part by part."""

    store: Store
    partition: str
    columns: tuple[str, ...] = ("doc_id", "text")

    @property
    def layout(self) -> PartitionLayout:
        return PartitionLayout(self.store, DOCUMENTS, self.partition)

    def task_count(self) -> int:
        return len(self.layout.complete_manifest().parts)

    def data_version(self) -> str:
        return self.layout.complete_manifest().data_version

    def read(self, index: int) -> pa.Table:
        return self.layout.read_part(index, columns=list(self.columns))
