"""The `language` stage: fastText lid.176 over each `documents` part, a verdict per document."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from curation.config import LanguageSettings
from curation.graph import LANGUAGE
from curation.language import KERNEL_VERSION, LANGUAGE_SCHEMA, identify, model_sha256
from curation.stages.base import AnnotateStage, Annotation, DocumentsInput, Drop
from curation.tasks import PartitionResult


@dataclass(frozen=True)
class LanguageWork(AnnotateStage):
    settings: LanguageSettings

    asset = LANGUAGE

    def annotate(self, index: int, table: pa.Table) -> Annotation:
        doc_ids = table["doc_id"].to_pylist()
        languages, scores = identify(table["text"].to_pylist())
        keep, drops = [], []
        counts: Counter[str] = Counter()
        for doc_id, language, score in zip(doc_ids, languages, scores, strict=True):
            counts[f"language.{language}"] += 1
            reason = self._drop_reason(language, score)
            keep.append(reason is None)
            if reason is not None:
                drops.append(Drop(doc_id, reason, score, language))
        signals = pa.table({"doc_id": doc_ids, "language": languages,
                            "language_score": pa.array(scores, pa.float32()), "keep": keep},
                           schema=LANGUAGE_SCHEMA)
        return Annotation(signals, drops, counts=counts)

    def _drop_reason(self, language: str, score: float) -> str | None:
        if language not in self.settings.languages:
            return "not_target_language"
        if score < self.settings.threshold_for(language):
            return "low_language_score"
        return None


def run_language(documents: DocumentsInput, settings: LanguageSettings, workers: int,
                 on_task_done: Any = None) -> PartitionResult:
    return LanguageWork(documents, settings).run(
        {"kernel": KERNEL_VERSION, "model": model_sha256(),
         "settings": settings.model_dump(mode="json", exclude={"max_drift"}),
         "input": documents.data_version()}, workers, on_task_done)
