"""The `language` stage: a language-ID model (`language.model`: lid.176 or py3langid) over each
`documents` part, a verdict per document."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from curation.code import CODE_VERSION, code_language
from curation.config import LanguageSettings
from curation.graph import LANGUAGE
from curation.language import KERNEL_VERSION, LANGUAGE_SCHEMA
from curation.language_models import identify, model_sha256
from curation.stages.base import AnnotateStage, Annotation, DocumentsInput, Drop
from curation.tasks import PartitionResult


@dataclass(frozen=True)
class LanguageWork(AnnotateStage):
    """lid.176 per document; in a code source (`code`), the language of each file's extension
    (`curation.code.code_language`), score 1 and kept: lid.176 reads code as some language
    it was not trained for."""

    settings: LanguageSettings
    code: bool = False

    asset = LANGUAGE

    def annotate(self, index: int, table: pa.Table) -> Annotation:
        if self.code:
            return self._code_languages(table)
        doc_ids = table["doc_id"].to_pylist()
        languages, scores = identify(table["text"].to_pylist(), self.settings.model)
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

    def _code_languages(self, table: pa.Table) -> Annotation:
        languages = [code_language(url) for url in table["url"].to_pylist()]
        signals = pa.table({"doc_id": table["doc_id"], "language": languages,
                            "language_score": pa.array([1.0] * len(languages), pa.float32()),
                            "keep": [True] * len(languages)}, schema=LANGUAGE_SCHEMA)
        return Annotation(signals, counts=Counter(f"language.{lang}" for lang in languages))

    def _drop_reason(self, language: str, score: float) -> str | None:
        if language not in self.settings.languages:
            return "not_target_language"
        if score < self.settings.threshold_for(language):
            return "low_language_score"
        return None


def run_language(documents: DocumentsInput, settings: LanguageSettings, workers: int,
                 on_task_done: Any = None, code: bool = False) -> PartitionResult:
    """The stage over one partition; `code`: a code source's (see `LanguageWork`)."""
    if code:  # the extension decides: neither the model nor its settings version the output
        documents = replace(documents, columns=("doc_id", "url"))
        inputs = {"kernel": KERNEL_VERSION, "code": CODE_VERSION,
                  "input": documents.data_version()}
    else:
        inputs = {"kernel": KERNEL_VERSION, "model": model_sha256(settings.model),
                  "settings": settings.model_dump(mode="json", exclude={"max_drift"}),
                  "input": documents.data_version()}
    return LanguageWork(documents, settings, code).run(inputs, workers, on_task_done)
