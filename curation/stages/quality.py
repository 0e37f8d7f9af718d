"""The `quality_classifier` and `quality_scores` stages around the fastText kernel.

Positives are the curated sources the pipeline marks `classifier_positive`; negatives a seeded
sample of web documents from the pipeline's training snapshots that pass the heuristics. The
model is stored under its content hash, so every score names the exact model that made it.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curation.config import SOURCE_PREFIX, PipelineConfig, stable_hash
from curation.graph import ALL, DOCUMENTS, HEURISTICS, LANGUAGE, QUALITY_CLASSIFIER, QUALITY_SCORES
from curation.partition import Manifest, PartitionLayout
from curation.quality import (
    QualityClassifierSettings,
    QualityScorer,
    TrainedClassifier,
    TrainingDataError,
    histogram,
    sample_negatives,
    score_thresholds,
    too_few_positives,
    train_classifier,
)
from curation.stages.base import AnnotateStage, Annotation, DocumentsInput, write_skipped
from curation.storage import Store
from curation.tasks import PartitionResult

CLASSIFIER = QUALITY_CLASSIFIER
SCORES = QUALITY_SCORES
GLOBAL_PARTITION = ALL
KERNEL_VERSION = "quality-1"
TOP_FRACTIONS = (0.1, 0.3, 0.5)

SCORE_SCHEMA = pa.schema([
    pa.field("doc_id", pa.string(), nullable=False),
    pa.field("language", pa.string(), nullable=False),
    pa.field("quality_score", pa.float32(), nullable=False),
])


def model_key(sha256: str) -> str:
    return f"models/{sha256}/model.bin"


def _source_texts(store: Store, source: str) -> list[str]:
    table = PartitionLayout(store, DOCUMENTS, SOURCE_PREFIX + source).read_table(["text"])
    return table["text"].to_pylist()


def _kept_web_texts(store: Store, snapshot: str, count: int, seed: int) -> tuple[list[str],
                                                                                 list[str]]:
    """The `count` heuristics-passing documents of a snapshot with the smallest keyed hash,
    read part by part so memory stays bounded by the sample, not the snapshot."""
    documents = DocumentsInput(store, snapshot)
    heuristics = documents.upstream(HEURISTICS)
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
    too_few = too_few_positives(settings, {name.removeprefix(SOURCE_PREFIX): count
                                           for name, count in origin.items()})
    if too_few:
        raise TrainingDataError(f"{too_few}: add texts or another classifier_positive source, "
                                "or remove the quality: section to skip the classifier")
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


def skip_classifier(store: Store, reason: str) -> Manifest:
    """Records that no classifier is made (`reason`), replacing any earlier one: the scores
    and the recipes then see none."""
    return write_skipped(PartitionLayout(store, CLASSIFIER, GLOBAL_PARTITION), KERNEL_VERSION,
                         reason)


def skip_scores(store: Store, partition: str, reason: str) -> Manifest:
    """An empty `quality_scores` partition saying why: the mix reads every score as missing."""
    return write_skipped(PartitionLayout(store, SCORES, partition), KERNEL_VERSION, reason,
                         SCORE_SCHEMA.empty_table())


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
        try:
            trained = train_classifier(positives, negatives, settings, Path(folder))
        except ValueError as error:  # e.g. a class whose split left no held-out text
            raise TrainingDataError(
                f"{error} (hq: the classifier_positive sources; lq: quality.training_snapshots "
                f"{', '.join(settings.training_snapshots)}; texts from {origin})") from error
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


# Models this process has checked against their hash: every scoring task asks for the model,
# and reading and hashing it once per worker is enough.
_VERIFIED_MODELS: set[Path] = set()


def _local_model(store: Store, sha256: str) -> Path:
    """The model in a local file named by its hash, fetched once per machine (fastText loads
    from a local path). A cached file that does not hash to its name (cut short by a writer
    that died, as the old shared temporary name allowed) is fetched again; each process checks
    a model once."""
    path = Path(tempfile.gettempdir()) / "corpus-models" / sha256 / "model.bin"
    if path in _VERIFIED_MODELS:
        return path
    if not path.exists() or hashlib.sha256(path.read_bytes()).hexdigest() != sha256:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Every worker of a run (and every run on the machine) may fetch at once: each writes
        # its own temporary file, so the rename only ever publishes a whole model.
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".model.", suffix=".tmp",
                                         delete=False) as handle:
            temporary = Path(handle.name)
            try:
                handle.write(store.read_bytes(model_key(sha256)))
            except BaseException:
                temporary.unlink()
                raise
        temporary.replace(path)
    _VERIFIED_MODELS.add(path)
    return path


@dataclass(frozen=True)
class ScoreWork(AnnotateStage):
    model_sha256: str
    max_chars: int

    asset = SCORES
    writes_decisions = False

    def annotate(self, index: int, table: pa.Table) -> Annotation:
        languages = self.documents.upstream(LANGUAGE).read_part(index, columns=["language"])
        scorer = QualityScorer(_local_model(self.documents.store, self.model_sha256),
                               self.max_chars)
        scores = scorer.score(table["text"].to_pylist())
        return Annotation(pa.table({"doc_id": table["doc_id"], "language": languages["language"],
                                    "quality_score": pa.array(scores, pa.float32())},
                                   schema=SCORE_SCHEMA))


def run_scores(documents: DocumentsInput, workers: int,
               on_task_done: Any = None) -> PartitionResult:
    sha256, max_chars = current_model(documents.store)
    return ScoreWork(documents, sha256, max_chars).run(
        {"kernel": KERNEL_VERSION, "model": sha256, "max_chars": max_chars,
         DOCUMENTS: documents.data_version(),
         LANGUAGE: documents.upstream(LANGUAGE).complete_manifest().data_version},
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
