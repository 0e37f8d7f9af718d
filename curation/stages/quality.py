"""The `quality_classifier` and `quality_scores` stages around the fastText kernel.

Positives are the curated sources the pipeline marks `classifier_positive`; negatives a seeded
sample of web documents from the pipeline's training snapshots that pass the heuristics. The
model is stored under its content hash, so every score names the exact model that made it.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curation.config import SOURCE_PREFIX, PipelineConfig, stable_hash
from curation.embeddings import DIMENSIONS
from curation.graph import (
    ALL,
    DOCUMENTS,
    EMBEDDINGS,
    HEURISTICS,
    LANGUAGE,
    QUALITY_CLASSIFIER,
    QUALITY_SCORES,
)
from curation.neural_quality import HEAD_L2, SCORERS, NeuralHead, combined_scores, train_head
from curation.neural_quality import KERNEL_VERSION as NEURAL_KERNEL
from curation.partition import Manifest, PartitionLayout
from curation.quality import (
    HQ,
    LQ,
    QualityClassifierSettings,
    QualityScorer,
    TrainedClassifier,
    TrainingDataError,
    histogram,
    roc_auc,
    sample_negatives,
    score_thresholds,
    too_few_positives,
    train_classifier,
)
from curation.stages.base import (
    AnnotateStage,
    Annotation,
    DocumentsInput,
    write_skipped,
)
from curation.storage import Store
from curation.tasks import PartitionResult

CLASSIFIER = QUALITY_CLASSIFIER
SCORES = QUALITY_SCORES
GLOBAL_PARTITION = ALL
KERNEL_VERSION = "quality-2"
TOP_FRACTIONS = (0.1, 0.3, 0.5)

REFERENCE = "reference"  # the classifier's table of held-out web scores, per model

SCORE_SCHEMA = pa.schema([
    pa.field("doc_id", pa.string(), nullable=False),
    pa.field("language", pa.string(), nullable=False),
    pa.field("quality_score", pa.float32(), nullable=False),  # fastText's P(hq)
    # With embeddings on: the neural head's P(hq), and the mean of both models' percentile
    # ranks among the held-out web documents (`curation.neural_quality.combined_scores`).
    pa.field("neural_score", pa.float32()),
    pa.field("combined_score", pa.float32()),
])



def model_key(sha256: str) -> str:
    return f"models/{sha256}/model.bin"


def _source_documents(store: Store, source: str) -> tuple[list[str], list[str]]:
    table = PartitionLayout(store, DOCUMENTS, SOURCE_PREFIX + source).read_table(
        ["doc_id", "text"])
    return table["doc_id"].to_pylist(), table["text"].to_pylist()


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


@dataclass(frozen=True)
class TrainingData:
    """The classifiers' documents: positives and negatives with their ids, and where they came
    from (counts per partition)."""

    positive_ids: list[str]
    positives: list[str]
    negative_ids: list[str]
    negatives: list[str]
    origin: dict[str, int]


def training_data(store: Store, pipeline: PipelineConfig) -> TrainingData:
    """Positive texts (the `classifier_positive` sources), negative texts (a seeded sample of
    each training snapshot's heuristics-passing documents), with their ids and origin."""
    settings = _settings(pipeline)
    sources = [name for name, source in sorted(pipeline.sources.items())
               if source.classifier_positive]
    if not sources:
        raise TrainingDataError("pipeline.yaml marks no source classifier_positive: true")
    origin: dict[str, int] = {}
    positive_ids: list[str] = []
    positives: list[str] = []
    for source in sources:
        ids, texts = _source_documents(store, source)
        origin[SOURCE_PREFIX + source] = len(texts)
        positive_ids += ids
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
    chosen = sample_negatives(ids, texts, wanted, settings.seed)
    if not chosen:
        raise TrainingDataError("the training snapshots have no heuristics-passing documents")
    return TrainingData(positive_ids, positives, [ids[i] for i in chosen],
                        [texts[i] for i in chosen], origin)


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
    neural: NeuralTrained | None


def run_classifier(store: Store, pipeline: PipelineConfig,
                   input_versions: dict[str, str]) -> ClassifierRun:
    """Trains the classifier (and, with `embeddings.enabled`, the neural head on the same
    documents), stores each under its content hash and records a manifest."""
    settings = _settings(pipeline)
    data = training_data(store, pipeline)
    neural = None
    with tempfile.TemporaryDirectory(prefix="quality-") as folder:
        try:
            trained = train_classifier(data.positives, data.negatives, settings, Path(folder))
            if pipeline.embeddings.enabled:
                neural = train_neural(store, data, trained)
        except ValueError as error:  # e.g. a class whose split left no held-out text
            raise TrainingDataError(
                f"{error} (hq: the classifier_positive sources; lq: quality.training_snapshots "
                f"{', '.join(settings.training_snapshots)}; texts from {data.origin})") from error
        store.write_bytes(model_key(trained.model_sha256), trained.model_path.read_bytes())
    inputs: dict[str, Any] = {"kernel": KERNEL_VERSION, "settings": settings.model_dump(),
                              "inputs": input_versions}
    if neural is not None:
        inputs["neural"] = {"kernel": NEURAL_KERNEL, "embeddings": {
            partition: PartitionLayout(store, EMBEDDINGS, partition).complete_manifest()
            .data_version for partition in sorted(data.origin)}}
    layout = PartitionLayout(store, CLASSIFIER, GLOBAL_PARTITION)
    layout.prepare(stable_hash(inputs))
    summary = trained.summary()
    part = layout.write_part(0, pa.Table.from_pylist([{
        "model_sha256": trained.model_sha256, "model_key": model_key(trained.model_sha256),
        "precision": trained.precision, "recall": trained.recall, "roc_auc": trained.roc_auc,
    }]))
    tables = {}
    extra: dict[str, Any] = {"classifier": summary, "origin": data.origin,
                             "max_chars_per_doc": settings.max_chars_per_doc}
    if neural is not None:
        store.write_bytes(neural_key(neural.head.sha256), neural.head.to_bytes())
        tables[REFERENCE] = [layout.write_table(REFERENCE, 0, pa.table({
            "fasttext": neural.fasttext_reference, "neural": neural.neural_reference}))]
        extra["neural"] = neural.summary()
    manifest = Manifest(CLASSIFIER, GLOBAL_PARTITION, stable_hash(inputs), [part], tables,
                        extra)
    layout.write_manifest(manifest)
    return ClassifierRun(trained, manifest, data.origin, neural)


def neural_key(sha256: str) -> str:
    return f"models/{sha256}/neural.npy"


@dataclass(frozen=True)
class NeuralTrained:
    """The neural head and how the three scores did on the fastText classifier's held-out
    documents; the references are the two models' sorted scores of the held-out web
    documents, against which a document's percentile ranks are taken."""

    head: NeuralHead
    roc_auc: float
    fasttext_roc_auc: float
    combined_roc_auc: float
    train_counts: dict[str, int]
    holdout_counts: dict[str, int]
    fasttext_reference: np.ndarray
    neural_reference: np.ndarray

    def summary(self) -> dict[str, Any]:
        return {"model_sha256": self.head.sha256, "model_key": neural_key(self.head.sha256),
                "roc_auc": self.roc_auc, "fasttext_roc_auc": self.fasttext_roc_auc,
                "combined_roc_auc": self.combined_roc_auc, "train_counts": self.train_counts,
                "holdout_counts": self.holdout_counts, "l2": HEAD_L2}


def train_neural(store: Store, data: TrainingData, trained: TrainedClassifier
                 ) -> NeuralTrained:
    """The neural head on the stored `embeddings` of the fastText classifier's training
    documents (its `split`, so both models see the same ones), judged on its held-out ones
    beside fastText's scores of them. Memory: the vectors of the sampled documents (384
    float16 each), read a part at a time."""
    split = trained.split
    wanted = [data.positive_ids[i] for i in split.hq_train + split.hq_held] \
        + [data.negative_ids[i] for i in split.lq_train + split.lq_held]
    vectors = _stored_vectors(store, sorted(data.origin), set(wanted))

    def matrix(ids: list[str], rows: list[int]) -> np.ndarray:
        return np.stack([vectors[ids[row]] for row in rows])

    head = train_head(matrix(data.positive_ids, split.hq_train),
                      matrix(data.negative_ids, split.lq_train))
    neural_hq = head.score(matrix(data.positive_ids, split.hq_held))
    neural_lq = head.score(matrix(data.negative_ids, split.lq_held))
    fasttext_hq, fasttext_lq = split.hq_scores, split.lq_scores
    fasttext_reference, neural_reference = np.sort(fasttext_lq), np.sort(neural_lq)
    combined_hq = combined_scores(fasttext_hq, neural_hq, fasttext_reference, neural_reference)
    combined_lq = combined_scores(fasttext_lq, neural_lq, fasttext_reference, neural_reference)
    return NeuralTrained(
        head, roc_auc(neural_hq, neural_lq), roc_auc(fasttext_hq, fasttext_lq),
        roc_auc(combined_hq, combined_lq), {HQ: len(split.hq_train), LQ: len(split.lq_train)},
        {HQ: len(split.hq_held), LQ: len(split.lq_held)}, fasttext_reference, neural_reference)


def _stored_vectors(store: Store, partitions: list[str], doc_ids: set[str]
                    ) -> dict[str, np.ndarray]:
    """The stored vector of each of `doc_ids`, found in the `embeddings` of `partitions`."""
    wanted = pa.array(sorted(doc_ids), pa.string())
    found: dict[str, np.ndarray] = {}
    for partition in partitions:
        layout = PartitionLayout(store, EMBEDDINGS, partition)
        for index in range(len(layout.complete_manifest().parts)):  # none when skipped
            table = layout.read_part(index, columns=["doc_id", "embedding"])
            table = table.filter(pc.is_in(table["doc_id"], wanted))
            if table.num_rows:
                flat = table["embedding"].combine_chunks().flatten().to_numpy(
                    zero_copy_only=False)
                found.update(zip(table["doc_id"].to_pylist(),
                                 flat.reshape(table.num_rows, DIMENSIONS), strict=True))
    missing = doc_ids - found.keys()
    if missing:
        raise TrainingDataError(f"{len(missing)} training documents have no stored vector "
                                f"(e.g. {sorted(missing)[0]}): materialize {EMBEDDINGS} for "
                                f"{', '.join(partitions)}")
    return found


def current_model(store: Store) -> tuple[str, int]:
    """The stored classifier's sha256 and the text length it was trained on."""
    manifest = PartitionLayout(store, CLASSIFIER, GLOBAL_PARTITION).complete_manifest()
    return manifest.extra["classifier"]["model_sha256"], manifest.extra["max_chars_per_doc"]


def current_neural(store: Store) -> str | None:
    """The stored neural head's sha256; None when it was not trained (embeddings off)."""
    manifest = PartitionLayout(store, CLASSIFIER, GLOBAL_PARTITION).complete_manifest()
    return manifest.extra.get("neural", {}).get("model_sha256")


# The neural heads this process has loaded with their reference scores, by (fastText sha256,
# head sha256): the references hold both models' scores, so a long-lived (Ray) worker must not
# reuse them after the fastText model alone changed.
_NEURAL_SCORERS: dict[tuple[str, str], tuple[NeuralHead, np.ndarray, np.ndarray]] = {}


def _neural_scorer(store: Store, fasttext_sha256: str, sha256: str
                   ) -> tuple[NeuralHead, np.ndarray, np.ndarray]:
    """The head (checked against its hash) and the two models' reference scores."""
    key = (fasttext_sha256, sha256)
    if key not in _NEURAL_SCORERS:
        head = NeuralHead.from_bytes(store.read_bytes(neural_key(sha256)))
        if head.sha256 != sha256:
            raise ValueError(f"{neural_key(sha256)} does not hash to its name")
        reference = PartitionLayout(store, CLASSIFIER, GLOBAL_PARTITION).read_table(
            name=REFERENCE)
        _NEURAL_SCORERS[key] = (head, reference["fasttext"].to_numpy().astype(np.float32),
                                reference["neural"].to_numpy().astype(np.float32))
    return _NEURAL_SCORERS[key]


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
    neural_sha256: str | None = None

    asset = SCORES
    writes_decisions = False

    def annotate(self, index: int, table: pa.Table) -> Annotation:
        languages = self.documents.upstream(LANGUAGE).read_part(index, columns=["language"])
        scorer = QualityScorer(_local_model(self.documents.store, self.model_sha256),
                               self.max_chars)
        scores = scorer.score(table["text"].to_pylist())
        neural = combined = pa.nulls(table.num_rows, pa.float32())
        if self.neural_sha256 is not None:
            head, fasttext_reference, neural_reference = _neural_scorer(
                self.documents.store, self.model_sha256, self.neural_sha256)
            stored = self.documents.upstream(EMBEDDINGS).read_part(
                index, columns=["doc_id", "embedding"])
            if not stored["doc_id"].equals(table["doc_id"]):
                raise ValueError(f"{EMBEDDINGS}[{self.documents.partition}] part {index} does "
                                 "not hold the part's documents in order")
            vectors = stored["embedding"].combine_chunks().flatten().to_numpy(
                zero_copy_only=False).reshape(table.num_rows, DIMENSIONS)
            neural_scores = head.score(vectors)
            neural = pa.array(neural_scores, pa.float32())
            combined = pa.array(combined_scores(scores, neural_scores, fasttext_reference,
                                                neural_reference), pa.float32())
        return Annotation(pa.table({"doc_id": table["doc_id"], "language": languages["language"],
                                    "quality_score": pa.array(scores, pa.float32()),
                                    "neural_score": neural, "combined_score": combined},
                                   schema=SCORE_SCHEMA))


def run_scores(documents: DocumentsInput, workers: int,
               on_task_done: Any = None) -> PartitionResult:
    sha256, max_chars = current_model(documents.store)
    neural = current_neural(documents.store)
    inputs = {"kernel": KERNEL_VERSION, "model": sha256, "max_chars": max_chars,
              DOCUMENTS: documents.data_version(),
              LANGUAGE: documents.upstream(LANGUAGE).complete_manifest().data_version}
    if neural is not None:
        inputs |= {"neural": neural,
                   EMBEDDINGS: documents.upstream(EMBEDDINGS).complete_manifest().data_version}
    return ScoreWork(documents, sha256, max_chars, neural).run(inputs, workers, on_task_done)


@dataclass(frozen=True)
class ScoreSummary:
    thresholds: dict[str, dict[float, float]]
    documents: int
    histograms: dict[str, list[int]]  # per scorer the partition has scores of (SCORERS)


def summarize_scores(store: Store, partition: str) -> ScoreSummary:
    table = PartitionLayout(store, SCORES, partition).read_table(SCORE_SCHEMA.names[1:])
    scores = table["quality_score"].to_numpy().astype(np.float64)
    histograms = {scorer: histogram(table[column].drop_null().to_numpy())
                  for scorer, column in SCORERS.items() if table[column].null_count == 0}
    return ScoreSummary(score_thresholds(
        scores, table["language"].to_pylist(), TOP_FRACTIONS), table.num_rows, histograms)
