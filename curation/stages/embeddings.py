"""The `embeddings` stage: a sentence vector per document of the scrubbed text, for the model
plane (neural scores, semantic dedup, topic domains; issue 23).

One task per `documents` part reads the scrubbed text of the part and writes `doc_id`, the
number of tokens the vector read and the vector itself, float16 in a fixed-size list. It writes
no verdict and no decisions: the stages that read the vectors decide.

A task loads the encoder once per process (`_encoder`) and keeps one batch's matrices in
memory besides its part. The backend resolves in the task, where the work runs: on a Ray cluster
whose driver has no GPU, `device: cuda` asks Ray for a GPU per task (`ray_resources`) and the
task finds it. Each task counts the documents it embedded per backend, so the stored stats say
which one made the vectors (`auto` may pick another on another machine, and the two differ in
the last float16 bit of a few components; see `curation.embeddings`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa

from curation.embeddings import (
    DIMENSIONS,
    WEIGHTS_SHA256,
    EmbeddingSettings,
    SentenceEncoder,
)
from curation.graph import EMBEDDINGS, SCRUBBED
from curation.partition import Manifest, PartitionLayout
from curation.stages.base import AnnotateStage, Annotation, DocumentsInput, write_skipped
from curation.storage import Store
from curation.tasks import PartitionResult

KERNEL_VERSION = "embeddings-1"
DISABLED = "embeddings.enabled is false in pipeline.yaml"

SCHEMA = pa.schema([
    pa.field("doc_id", pa.string(), nullable=False),
    pa.field("tokens", pa.int16(), nullable=False),
    pa.field("embedding", pa.list_(pa.float16(), DIMENSIONS), nullable=False),
])


@lru_cache(maxsize=1)
def _encoder(settings: EmbeddingSettings) -> SentenceEncoder:
    return SentenceEncoder(settings)


def vectors_array(vectors: Any) -> pa.FixedSizeListArray:
    """A (rows, DIMENSIONS) float16 matrix as the stored column."""
    return pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float16()),
                                             DIMENSIONS)


def vector_matrix(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A stored fixed-size vector column (the vectors, or a model's centroids) as a float32
    matrix of one row per entry."""
    flat = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    # the width from the type: an empty part (a task of an empty input file) has no values
    return flat.flatten().to_numpy(zero_copy_only=False) \
        .reshape(len(flat), flat.type.list_size).astype(np.float32)


@dataclass(frozen=True)
class EmbeddingsWork(AnnotateStage):
    settings: EmbeddingSettings

    asset = EMBEDDINGS
    writes_decisions = False

    def ray_resources(self) -> dict[str, float]:
        """What a task asks of a Ray cluster: a GPU when the settings name CUDA."""
        return {"num_cpus": 1, "num_gpus": 1 if self.settings.device == "cuda" else 0}

    def annotate(self, index: int, table: pa.Table) -> Annotation:
        text = self.documents.upstream(SCRUBBED).read_part(index, columns=["doc_id", "text"])
        encoder = _encoder(self.settings)
        vectors, lengths = encoder.encode_with_lengths(text["text"].to_pylist())
        signals = pa.table({"doc_id": text["doc_id"], "tokens": pa.array(lengths, pa.int16()),
                            "embedding": vectors_array(vectors)}, schema=SCHEMA)
        return Annotation(signals, counts={
            "tokens": int(lengths.sum()),
            "documents_at_window": int((lengths >= self.settings.max_tokens).sum()),
            f"backend.{encoder.backend}-{encoder.device}": text.num_rows})


def run_embeddings(documents: DocumentsInput, settings: EmbeddingSettings, workers: int,
                   on_task_done: Any = None) -> PartitionResult:
    """The stage over one partition (`settings.enabled` is the caller's to check)."""
    scrubbed = documents.upstream(SCRUBBED).complete_manifest().data_version
    return EmbeddingsWork(documents, settings).run(
        {"kernel": KERNEL_VERSION, "model": WEIGHTS_SHA256,
         "settings": settings.model_dump(mode="json", exclude={"enabled"}),
         SCRUBBED: scrubbed}, workers, on_task_done)


def skip_embeddings(store: Store, partition: str) -> Manifest:
    """An empty partition saying the stage is off: readers find no vectors, and know why."""
    return write_skipped(PartitionLayout(store, EMBEDDINGS, partition), KERNEL_VERSION,
                         DISABLED, SCHEMA.empty_table())
