"""The `embeddings` asset: a vector per scrubbed document through the README's main job, the
stage switched off, and the pool's and Ray's share of the machine for it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from curation.embeddings import DIMENSIONS, EmbeddingSettings, SentenceEncoder
from curation.graph import DOCUMENTS, EMBEDDINGS, EXACT_DEDUP, SCRUBBED
from curation.partition import PartitionLayout
from curation.storage import LocalStore


def _vectors(table) -> np.ndarray:
    column = table["embedding"].combine_chunks()
    return column.flatten().to_numpy(zero_copy_only=False).reshape(len(column), DIMENSIONS)


def test_every_scrubbed_document_has_its_vector_through_the_main_job(sample_run) -> None:
    from curation.config import load_pipeline

    settings = load_pipeline(sample_run.pipeline_path).embeddings
    assert settings.enabled, "the sample pipeline shows the model plane"
    store = LocalStore(str(sample_run.root))
    partition = "SAMPLE-01"
    result = sample_run.results[("per_snapshot", partition)]
    checks = {evaluation.check_name: evaluation.passed
              for evaluation in result.get_asset_check_evaluations()
              if evaluation.asset_key.path == [EMBEDDINGS]}
    assert checks == {"embeddings_cover_documents": True, "embeddings_norms": True,
                      "embeddings_contract": True}
    [event] = [e for e in result.get_asset_materialization_events()
               if e.materialization.asset_key.path == [EMBEDDINGS]]
    assert event.materialization.metadata["backends"].value.startswith("numpy-cpu")

    layout = PartitionLayout(store, EMBEDDINGS, partition)
    documents = PartitionLayout(store, DOCUMENTS, partition)
    assert len(layout.complete_manifest().parts) == len(documents.complete_manifest().parts)
    stored = layout.read_table()
    assert stored["doc_id"].equals(documents.read_table(["doc_id"])["doc_id"])
    assert stored.schema.field("embedding").type == pa.list_(pa.float16(), DIMENSIONS)
    vectors = _vectors(stored).astype(np.float32)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=2e-3)
    tokens = stored["tokens"].to_numpy()
    assert tokens.min() >= 2 and tokens.max() == settings.max_tokens

    # The stored vectors are the encoder's on the scrubbed text of the part, byte for byte.
    text = PartitionLayout(store, SCRUBBED, partition).read_part(0, columns=["text"])
    again, lengths = SentenceEncoder(settings).encode_with_lengths(text["text"].to_pylist())
    part = PartitionLayout(store, EMBEDDINGS, partition).read_part(0)
    assert _vectors(part).tobytes() == again.tobytes()
    assert part["tokens"].to_numpy().tolist() == lengths.tolist()

    # Meaning survives: the two documents nearest each other are the most similar pair of a
    # partition only if they share text; an exact duplicate's vector sits on its kept copy.
    clusters = PartitionLayout(store, EXACT_DEDUP, partition).read_table()
    position = {doc_id: row for row, doc_id in enumerate(stored["doc_id"].to_pylist())}
    pairs = [(position[a], position[b]) for a, b in zip(
        clusters["doc_id"].to_pylist(), clusters["kept_doc_id"].to_pylist(), strict=True)
        if a != b]
    assert pairs, "the sample plants exact duplicates"
    duplicate = min(float(vectors[a] @ vectors[b]) for a, b in pairs)
    similarity = vectors @ vectors.T
    np.fill_diagonal(similarity, np.nan)
    assert duplicate > 0.999 and float(np.nanmedian(similarity)) < 0.6


def test_switched_off_the_stage_leaves_an_empty_partition_saying_why(tmp_path: Path) -> None:
    from dagster import instance_for_test, materialize

    from checks.embeddings import embeddings_cover_documents, embeddings_norms
    from corpus_assets.embeddings import embeddings
    from curation.stages.embeddings import DISABLED
    from partitions import SNAPSHOT_PARTITIONS_NAME
    from tests.conftest import one_snapshot_resources

    resources = one_snapshot_resources(tmp_path)
    with instance_for_test(temp_dir=str(tmp_path)) as instance:
        instance.add_dynamic_partitions(SNAPSHOT_PARTITIONS_NAME, ["CC"])
        result = materialize([embeddings, embeddings_cover_documents, embeddings_norms],
                             partition_key="CC", instance=instance, resources=resources)
    assert result.success
    [event] = result.get_asset_materialization_events()
    assert event.materialization.metadata["skipped"].value == DISABLED
    assert all(check.passed and check.metadata["skipped"].value == DISABLED
               for check in result.get_asset_check_evaluations())
    manifest = PartitionLayout(LocalStore(str(tmp_path / "data")), EMBEDDINGS, "CC") \
        .complete_manifest()
    assert (manifest.rows, manifest.extra) == (0, {"skipped": DISABLED})


def _blas_threads(_: int) -> int:
    from threadpoolctl import threadpool_info

    return max(pool["num_threads"] for pool in threadpool_info())


def test_pool_workers_share_the_cores_among_their_numeric_threads() -> None:
    """Two workers on a 2-core machine each get one BLAS thread (each took all the cores, and
    the embeddings stage ran four times slower)."""
    import os

    from curation.executor import map_tasks, worker_threads

    cores = len(os.sched_getaffinity(0))
    assert worker_threads(1) == cores and worker_threads(cores * 2) == 1
    assert map_tasks(_blas_threads, [0, 1], workers=2) == [worker_threads(2)] * 2


def test_a_cuda_stage_asks_ray_for_a_gpu_per_task(tmp_path: Path) -> None:
    from curation.executor import ray_resources
    from curation.stages.base import DocumentsInput
    from curation.stages.embeddings import EmbeddingsWork

    documents = DocumentsInput(LocalStore(str(tmp_path)), "CC")
    on_gpu = EmbeddingsWork(documents, EmbeddingSettings(enabled=True, device="cuda"))
    on_cpu = EmbeddingsWork(documents, EmbeddingSettings(enabled=True))
    assert ray_resources(on_gpu) == {"num_cpus": 1, "num_gpus": 1}
    assert ray_resources(on_cpu) == {"num_cpus": 1, "num_gpus": 0}
    assert ray_resources(_blas_threads) == {"num_cpus": 1}


def test_an_empty_text_still_gets_a_unit_vector() -> None:
    """A document the edits left empty ([CLS] [SEP] only) has a vector of unit length too."""
    vectors, lengths = SentenceEncoder(EmbeddingSettings(max_tokens=32)).encode_with_lengths(
        ["", "Some text."])
    assert lengths.tolist() == [2, 5]
    assert np.allclose(np.linalg.norm(vectors.astype(np.float32), axis=1), 1.0, atol=2e-3)


def test_a_stored_vector_column_reads_back_as_a_matrix_even_when_empty() -> None:
    from curation.stages.embeddings import vector_matrix, vectors_array

    vectors = np.random.default_rng(0).standard_normal((3, DIMENSIONS)).astype(np.float16)
    column = pa.chunked_array([vectors_array(vectors[:2]), vectors_array(vectors[2:])])
    assert np.array_equal(vector_matrix(column), vectors.astype(np.float32))
    # a part of an empty input file: no rows, the width still known
    empty = vector_matrix(vectors_array(np.zeros((0, DIMENSIONS), np.float16)))
    assert empty.shape == (0, DIMENSIONS) and empty.dtype == np.float32
