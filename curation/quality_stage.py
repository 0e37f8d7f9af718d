"""The `quality_classifier` and `quality_scores` stages around the fastText kernel.

Positives are the curated sources the pipeline marks `classifier_positive`; negatives a seeded
sample of web documents from the pipeline's training snapshots that pass the heuristics. The
model is stored under its content hash, so every score names the exact model that made it.
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curation.annotate import DocumentsInput
from curation.config import SOURCE_PREFIX, PipelineConfig, stable_hash
from curation.partition import Manifest, PartitionLayout
from curation.quality import (
    QualityClassifierSettings,
    QualityScorer,
    TrainedClassifier,
    histogram,
    sample_negatives,
    score_thresholds,
    train_classifier,
)
from curation.stats import StageStats
from curation.storage import Store
from curation.tasks import PartitionResult, PartitionRun, TaskOutput, run_partition

CLASSIFIER = "quality_classifier"
SCORES = "quality_scores"
GLOBAL_PARTITION = "all"
KERNEL_VERSION = "quality-1"
TOP_FRACTIONS = (0.1, 0.3, 0.5)

SCORE_SCHEMA = pa.schema([
    pa.field("doc_id", pa.string(), nullable=False),
    pa.field("language", pa.string(), nullable=False),
    pa.field("quality_score", pa.float32(), nullable=False),
])


class TrainingDataError(ValueError):
    """The pipeline names no positives, or its training snapshots yield no negatives."""


def model_key(sha256: str) -> str:
    return f"models/{sha256}/model.bin"


def _source_texts(store: Store, source: str) -> list[str]:
    table = PartitionLayout(store, "documents", SOURCE_PREFIX + source).read_table(["text"])
    return table["text"].to_pylist()


def _kept_web_texts(store: Store, snapshot: str, count: int, seed: int) -> tuple[list[str],
                                                                                 list[str]]:
    """The `count` heuristics-passing documents of a snapshot with the smallest keyed hash,
    read part by part so memory stays bounded by the sample, not the snapshot."""
    documents = DocumentsInput(store, snapshot)
    heuristics = PartitionLayout(store, "heuristics", snapshot)
    chosen_ids: list[str] = []
    chosen_texts: list[str] = []
    for index in range(documents.task_count()):
        table = documents.read(index)
        keep = heuristics.read_part(index, columns=["doc_id", "keep"])
        table = table.filter(pc.is_in(table["doc_id"],
                                      keep.filter(keep["keep"])["doc_id"]))
        ids = chosen_ids + table["doc_id"].to_pylist()
        texts = chosen_texts + table["text"].to_pylist()
        picked = sample_negatives(ids, texts, count, seed)
        chosen_ids, chosen_texts = [ids[i] for i in picked], [texts[i] for i in picked]
    return chosen_ids, chosen_texts


def training_data(store: Store, pipeline: PipelineConfig) -> tuple[list[str], list[str],
                                                                   dict[str, int]]:
    """Positive texts, negative texts, and where they came from (counts per partition)."""
    settings = _settings(pipeline)
    sources = [name for name, source in sorted(pipeline.sources.items())
               if source.classifier_positive]
    if not sources:
        raise TrainingDataError("pipeline.yaml marks no source classifier_positive: true")
    origin: dict[str, int] = {}
    positives: list[str] = []
    for source in sources:
        texts = _source_texts(store, source)
        origin[SOURCE_PREFIX + source] = len(texts)
        positives += texts
    wanted = settings.negative_count(len(positives))
    ids: list[str] = []
    texts: list[str] = []
    for snapshot in settings.training_snapshots:
        snapshot_ids, snapshot_texts = _kept_web_texts(store, snapshot, wanted, settings.seed)
        ids += snapshot_ids
        texts += snapshot_texts
        origin[snapshot] = len(snapshot_ids)
    negatives = [texts[i] for i in sample_negatives(ids, texts, wanted, settings.seed)]
    if not negatives:
        raise TrainingDataError("the training snapshots have no heuristics-passing documents")
    return positives, negatives, origin


def _settings(pipeline: PipelineConfig) -> QualityClassifierSettings:
    if pipeline.quality is None:
        raise TrainingDataError("pipeline.yaml has no quality section")
    return pipeline.quality


@dataclass(frozen=True)
class ClassifierRun:
    trained: TrainedClassifier
    manifest: Manifest
    origin: dict[str, int]


def run_classifier(store: Store, pipeline: PipelineConfig,
                   input_versions: dict[str, str]) -> ClassifierRun:
    """Trains the classifier, stores it under its content hash and records a manifest."""
    settings = _settings(pipeline)
    positives, negatives, origin = training_data(store, pipeline)
    with tempfile.TemporaryDirectory(prefix="quality-") as folder:
        trained = train_classifier(positives, negatives, settings, Path(folder))
        store.write_bytes(model_key(trained.model_sha256), trained.model_path.read_bytes())
    version = stable_hash({"kernel": KERNEL_VERSION, "settings": settings.model_dump(),
                           "inputs": input_versions})
    layout = PartitionLayout(store, CLASSIFIER, GLOBAL_PARTITION)
    layout.prepare(version)
    summary = {key: value for key, value in asdict(trained).items() if key != "model_path"}
    part = layout.write_part(0, pa.Table.from_pylist([{
        "model_sha256": trained.model_sha256, "model_key": model_key(trained.model_sha256),
        "precision": trained.precision, "recall": trained.recall, "roc_auc": trained.roc_auc,
    }]))
    manifest = Manifest(CLASSIFIER, GLOBAL_PARTITION, version, [part],
                        extra={"classifier": summary, "origin": origin,
                               "max_chars_per_doc": settings.max_chars_per_doc})
    layout.write_manifest(manifest)
    return ClassifierRun(trained, manifest, origin)


def current_model(store: Store) -> tuple[str, int]:
    """The stored classifier's sha256 and the text length it was trained on."""
    manifest = PartitionLayout(store, CLASSIFIER, GLOBAL_PARTITION).complete_manifest()
    return manifest.extra["classifier"]["model_sha256"], manifest.extra["max_chars_per_doc"]


def _local_model(store: Store, sha256: str) -> Path:
    """The model in a local file named by its hash, fetched once per machine (fastText loads
    from a local path)."""
    path = Path(tempfile.gettempdir()) / "corpus-models" / sha256 / "model.bin"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_bytes(store.read_bytes(model_key(sha256)))
        temporary.replace(path)
    return path


@dataclass(frozen=True)
class ScoreWork:
    documents: DocumentsInput
    model_sha256: str
    max_chars: int

    def __call__(self, index: int) -> TaskOutput:
        table = self.documents.read(index)
        languages = PartitionLayout(self.documents.store, "language",
                                    self.documents.partition).read_part(index, columns=["language"])
        scorer = QualityScorer(_local_model(self.documents.store, self.model_sha256),
                               self.max_chars)
        scores = scorer.score(table["text"].to_pylist())
        out = pa.table({"doc_id": table["doc_id"], "language": languages["language"],
                        "quality_score": pa.array(scores, pa.float32())}, schema=SCORE_SCHEMA)
        stats = StageStats(records_in=table.num_rows, candidates=table.num_rows,
                           docs_out=table.num_rows)
        return TaskOutput({"part": out}, stats)


def run_scores(documents: DocumentsInput, workers: int,
               on_task_done: Any = None) -> PartitionResult:
    sha256, max_chars = current_model(documents.store)
    language_version = PartitionLayout(documents.store, "language",
                                       documents.partition).complete_manifest().data_version
    version = stable_hash({"kernel": KERNEL_VERSION, "model": sha256, "max_chars": max_chars,
                           "documents": documents.data_version(), "language": language_version})
    run = PartitionRun(documents.store, SCORES, documents.partition, version)
    return run_partition(run, documents.task_count(), ScoreWork(documents, sha256, max_chars),
                         workers, on_task_done)


@dataclass(frozen=True)
class ScoreSummary:
    histogram: list[int]
    thresholds: dict[str, dict[float, float]]
    documents: int


def summarize_scores(store: Store, partition: str) -> ScoreSummary:
    table = PartitionLayout(store, SCORES, partition).read_table(["language", "quality_score"])
    scores = table["quality_score"].to_numpy().astype(np.float64)
    return ScoreSummary(histogram(scores), score_thresholds(
        scores, table["language"].to_pylist(), TOP_FRACTIONS), table.num_rows)
