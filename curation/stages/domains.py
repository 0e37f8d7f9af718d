"""The topic domains: `topic_model` (pipeline-wide: centroids and their top terms, fitted on
the training snapshots' vectors) and `domains[snapshot]` (each document's nearest centroid),
around the kernel in `curation/domains.py`.

`topic_model` reads the training snapshots' `embeddings` at a fixed stride of their rows
(`ceil(rows / fit_sample)`), a part at a time, fits the centroids, assigns the sample and
describes each domain by the top terms of its sampled documents' scrubbed text. Its one part
holds a row per domain: `domain`, the sample's `documents` and `share`, `terms`, and the
`centroid`. Memory: the sample (`fit_sample` vectors and their texts' heads).

`domains` runs one task per part: the part's vectors against the centroids (read once per
process), `domain` and `similarity` per document. No verdict: recipes weight or cap domains.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curation.config import PipelineConfig, stable_hash
from curation.domains import (
    KERNEL_VERSION,
    TERM_CHARS,
    assign_domains,
    fit_domains,
    top_terms,
)
from curation.embeddings import DIMENSIONS
from curation.graph import ALL, DOMAINS, EMBEDDINGS, SCRUBBED, TOPIC_MODEL
from curation.partition import Manifest, PartitionLayout
from curation.stages.base import AnnotateStage, Annotation, DocumentsInput, write_skipped
from curation.stages.embeddings import vector_matrix
from curation.storage import Store
from curation.tasks import PartitionResult

DISABLED = "embeddings.enabled is false in pipeline.yaml: there are no vectors to cluster"
MODEL_SCHEMA = pa.schema([
    pa.field("domain", pa.int16(), nullable=False),
    pa.field("documents", pa.int64(), nullable=False),
    pa.field("share", pa.float64(), nullable=False),
    pa.field("terms", pa.list_(pa.string()), nullable=False),
    pa.field("centroid", pa.list_(pa.float32(), DIMENSIONS), nullable=False),
])
SCHEMA = pa.schema([
    pa.field("doc_id", pa.string(), nullable=False),
    pa.field("domain", pa.int16(), nullable=False),
    pa.field("similarity", pa.float32(), nullable=False),
])


def training_snapshots(pipeline: PipelineConfig) -> list[str]:
    """What the centroids are fitted on: `domains.training_snapshots`, else the classifier's,
    else every snapshot."""
    if pipeline.domains.training_snapshots:
        return list(pipeline.domains.training_snapshots)
    if pipeline.quality is not None:
        return list(pipeline.quality.training_snapshots)
    return sorted(pipeline.snapshots)


def _sample(store: Store, snapshots: list[str], fit_sample: int
            ) -> tuple[np.ndarray, list[str]]:
    """The vectors and scrubbed texts (their heads) of every `ceil(rows / fit_sample)`-th
    document of `snapshots`, in order, a part at a time."""
    layouts = [PartitionLayout(store, EMBEDDINGS, snapshot) for snapshot in snapshots]
    rows = sum(layout.complete_manifest().rows for layout in layouts)
    stride = max(1, math.ceil(rows / fit_sample))
    vectors, texts, seen = [], [], 0
    for snapshot, layout in zip(snapshots, layouts, strict=True):
        scrubbed = PartitionLayout(store, SCRUBBED, snapshot)
        for index, part in enumerate(layout.complete_manifest().parts):
            picked = pa.array(np.flatnonzero((seen + np.arange(part.rows)) % stride == 0))
            seen += part.rows
            table = layout.read_part(index, columns=["doc_id", "embedding"]).take(picked)
            text = scrubbed.read_part(index, columns=["doc_id", "text"]).take(picked)
            if not text["doc_id"].equals(table["doc_id"]):
                raise ValueError(f"{EMBEDDINGS}[{snapshot}] part {index} does not line up "
                                 f"with {SCRUBBED}: materialize {EMBEDDINGS} again")
            vectors.append(vector_matrix(table["embedding"]))
            texts += [value[:TERM_CHARS] for value in text["text"].to_pylist()]
    return (np.concatenate(vectors) if vectors else np.zeros((0, DIMENSIONS), np.float32),
            texts)


def topic_model_version(store: Store, pipeline: PipelineConfig) -> str:
    return stable_hash({"kernel": KERNEL_VERSION,
                        "settings": pipeline.domains.model_dump(mode="json"),
                        EMBEDDINGS: {snapshot: PartitionLayout(store, EMBEDDINGS, snapshot)
                                     .complete_manifest().data_version
                                     for snapshot in training_snapshots(pipeline)}})


def run_topic_model(store: Store, pipeline: PipelineConfig) -> Manifest:
    """Fits and stores the topic model (the caller checks that embeddings are on)."""
    settings = pipeline.domains
    snapshots = training_snapshots(pipeline)
    sample, texts = _sample(store, snapshots, settings.fit_sample)
    if not len(sample):
        raise ValueError(f"{TOPIC_MODEL}: the training snapshots {', '.join(snapshots)} hold "
                         "no documents")
    centroids = fit_domains(sample, settings)
    domains, _ = assign_domains(sample, centroids)
    sizes = np.bincount(domains.astype(np.int64), minlength=len(centroids))
    terms = top_terms(texts, domains, len(centroids), settings.top_terms)
    version = topic_model_version(store, pipeline)
    layout = PartitionLayout(store, TOPIC_MODEL, ALL)
    layout.prepare(version)
    part = layout.write_part(0, pa.table({
        "domain": pa.array(range(len(centroids)), pa.int16()), "documents": sizes,
        "share": sizes / sizes.sum(), "terms": terms,
        "centroid": pa.FixedSizeListArray.from_arrays(pa.array(centroids.reshape(-1)),
                                                      DIMENSIONS)}, schema=MODEL_SCHEMA))
    manifest = Manifest(TOPIC_MODEL, ALL, version, [part], extra={
        "training_snapshots": snapshots, "fit_sample": len(sample)})
    layout.write_manifest(manifest)
    return manifest


_CENTROIDS: dict[str, np.ndarray] = {}  # by the topic model's version: a refit reads anew


def _centroids(store: Store, version: str) -> np.ndarray:
    """The stored topic model's centroids, read once per process."""
    if version not in _CENTROIDS:
        table = PartitionLayout(store, TOPIC_MODEL, ALL).read_part(0, columns=["centroid"])
        _CENTROIDS[version] = vector_matrix(table["centroid"])
    return _CENTROIDS[version]


@dataclass(frozen=True)
class DomainsWork(AnnotateStage):
    model_version: str

    asset = DOMAINS
    writes_decisions = False

    def annotate(self, index: int, table: pa.Table) -> Annotation:
        stored = self.documents.upstream(EMBEDDINGS).read_part(
            index, columns=["doc_id", "embedding"])
        if not stored["doc_id"].equals(table["doc_id"]):
            raise ValueError(f"{EMBEDDINGS}[{self.documents.partition}] part {index} does not "
                             "hold the part's documents in order")
        domains, similarity = assign_domains(vector_matrix(stored["embedding"]),
                                             _centroids(self.documents.store,
                                                        self.model_version))
        counts = pc.value_counts(pa.array(domains)).to_pylist()
        return Annotation(pa.table({"doc_id": table["doc_id"], "domain": domains,
                                    "similarity": similarity}, schema=SCHEMA),
                          counts={f"domain.{row['values']}": row["counts"] for row in counts})


def run_domains(documents: DocumentsInput, workers: int,
                on_task_done: object = None) -> PartitionResult:
    model = PartitionLayout(documents.store, TOPIC_MODEL, ALL).complete_manifest()
    return DomainsWork(documents, model.version).run(
        {"kernel": KERNEL_VERSION, TOPIC_MODEL: model.data_version,
         EMBEDDINGS: documents.upstream(EMBEDDINGS).complete_manifest().data_version},
        workers, on_task_done)


def skip_topic_model(store: Store) -> Manifest:
    return write_skipped(PartitionLayout(store, TOPIC_MODEL, ALL), KERNEL_VERSION, DISABLED,
                         MODEL_SCHEMA.empty_table())


def skip_domains(store: Store, partition: str) -> Manifest:
    return write_skipped(PartitionLayout(store, DOMAINS, partition), KERNEL_VERSION, DISABLED,
                         SCHEMA.empty_table())

