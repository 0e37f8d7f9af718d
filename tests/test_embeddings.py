"""The model plane's sentence encoder (`curation.embeddings`): all-MiniLM-L6-v2 from its packaged,
sha256-checked weights, run by the project's own forward pass on numpy and on torch (CPU here;
CUDA takes the same code), on real text."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from benchmarks.embeddings import articles as wiki_articles
from curation.config import ConfigError, load_pipeline
from curation.embeddings import (
    DIMENSIONS,
    WEIGHTS_SHA256,
    EmbeddingSettings,
    ModelFiles,
    SentenceEncoder,
    load_weights,
    model_folder,
    resolve_backend,
    text_head,
)


@pytest.fixture(scope="module")
def questions(shared_data: Path) -> list[str]:
    """GSM8K test questions of at least three sentences (real text, varied topics)."""
    lines = (shared_data / "evals" / "gsm8k" / "test.jsonl").read_text().splitlines()
    found = [json.loads(line)["question"] for line in lines]
    return [q for q in found if len(re.split(r"(?<=[.?!])\s+", q)) >= 3][:40]


@pytest.fixture(scope="module")
def articles(shared_data: Path) -> list[str]:
    """WikiText-2's test articles over 3,000 characters (the benchmark's split)."""
    return [article for article in wiki_articles() if len(article) > 3000]


def encoder(backend: str = "numpy", **settings: object) -> SentenceEncoder:
    return SentenceEncoder(EmbeddingSettings(backend=backend, device="cpu",  # type: ignore[arg-type]
                                             **settings))  # type: ignore[arg-type]


def test_the_weights_are_checked_by_their_sha256(tmp_path) -> None:
    config, weights = load_weights(ModelFiles.packaged())
    assert config["hidden_size"] == DIMENSIONS and len(weights) > 100
    copy = tmp_path / "model"
    shutil.copytree(model_folder(), copy)
    with open(copy / "model.safetensors", "r+b") as handle:  # one byte of one weight changed
        handle.seek(-3, 2)
        last = handle.read(1)
        handle.seek(-3, 2)
        handle.write(bytes([last[0] ^ 1]))
    with pytest.raises(ValueError, match=WEIGHTS_SHA256):
        load_weights(ModelFiles(copy))


def test_vectors_are_unit_float16_and_a_rewritten_question_finds_its_original(questions) -> None:
    """Each question with its first sentence dropped and the rest reordered is nearest to
    its own original among 40 questions on other topics."""
    rewritten = []
    for question in questions:
        sentences = re.split(r"(?<=[.?!])\s+", question)[1:]
        rewritten.append(" ".join(reversed(sentences)))
    model = encoder(max_tokens=128)
    originals, changed = model.encode(questions), model.encode(rewritten)
    assert originals.dtype == np.float16 and originals.shape == (len(questions), DIMENSIONS)
    norms = np.linalg.norm(originals.astype(np.float32), axis=1)
    assert np.all(np.abs(norms - 1) < 2e-3)
    similarity = changed.astype(np.float32) @ originals.astype(np.float32).T
    assert list(similarity.argmax(1)) == list(range(len(questions)))
    own = np.diag(similarity)
    others = np.where(np.eye(len(questions), dtype=bool), -1, similarity).max(1)
    assert float(np.median(own - others)) > 0.2


def test_numpy_and_torch_compute_the_same_vectors(questions, articles) -> None:
    pytest.importorskip("torch")
    texts = questions[:8] + articles[:4]
    on_numpy = encoder("numpy", max_tokens=96, batch_size=5).embed(texts)
    on_torch = encoder("torch", max_tokens=96, batch_size=5).embed(texts)
    assert np.abs(on_numpy - on_torch).max() < 1e-4


def test_torch_on_cpu_gives_the_same_bytes_whatever_the_threads_it_is_given(
        questions, articles) -> None:
    """A CPU model's sums could depend on its thread count (the numpy one's did), so the model
    runs on one thread: a caller's torch setting changes neither the bytes nor, after, itself."""
    torch = pytest.importorskip("torch")
    texts = questions[:16] + articles[:8]
    model = encoder("torch", max_tokens=128, batch_size=8)
    threads = torch.get_num_threads()
    try:
        by_threads = []
        for count in (1, 2):
            torch.set_num_threads(count)
            by_threads.append(model.encode(texts).tobytes())
            assert torch.get_num_threads() == count
    finally:
        torch.set_num_threads(threads)
    assert by_threads[0] == by_threads[1]


def test_the_same_texts_give_the_same_bytes_and_batches_move_only_rounding(questions) -> None:
    texts = questions[:12] + ["", "x", "Short."]
    once = encoder(max_tokens=64, batch_size=4).encode(texts)
    assert once.tobytes() == encoder(max_tokens=64, batch_size=4).encode(texts).tobytes()
    other = encoder(max_tokens=64, batch_size=15).encode(texts)
    assert np.abs(once.astype(np.float32) - other.astype(np.float32)).max() < 2e-3


def test_the_window_counts_tokens_and_a_long_tail_is_not_read(articles) -> None:
    model = encoder(max_tokens=32)
    head = articles[0]
    changed_tail = head[:5000] + " completely different ending " * 50
    vectors = model.encode([head, changed_tail])
    assert vectors[0].tobytes() == vectors[1].tobytes()  # past the first 32 tokens
    assert vectors[0].tobytes() != encoder(max_tokens=64).encode([head])[0].tobytes()


@pytest.mark.parametrize("max_tokens", [32, 256, 512])
def test_the_text_head_holds_the_first_tokens(articles, max_tokens) -> None:
    """Tokenizing the head gives the whole text's window, for real articles and texts where
    characters per token run high or low (CJK, combining accents, words past WordPiece's
    100 characters, control characters, tabs, runs of spaces)."""
    from curation.embeddings import _tokenizer

    tokenizer = _tokenizer(model_folder(), max_tokens)
    hard = ["日本語の文章です。" * 400, "e\u0301x " * 4000, ("a" * 150 + " ") * 200,
            "ab\x1fcd " * 3000, "word\t" * 5000, "  ".join(["x"] * 5000)]
    cut = 0
    for text in articles[:20] + hard:
        head = text_head(text, max_tokens)
        cut += len(head) < len(text)
        window = tokenizer.encode(head).ids
        if len(head) < len(text) and len(window) < max_tokens:
            continue  # the encoder tokenizes the whole text then
        assert window == tokenizer.encode(text).ids
    assert cut >= 20


def test_a_bad_embeddings_section_fails_at_load_naming_the_field(tmp_path) -> None:
    for bad, field in [({"max_tokens": 4}, "max_tokens"), ({"batch_size": 0}, "batch_size"),
                       ({"backend": "onnx"}, "backend"), ({"device": "tpu"}, "device"),
                       ({"max_token": 64}, "max_token")]:
        path = tmp_path / "pipeline.yaml"
        path.write_text(yaml.safe_dump({"version": 1, "snapshots": {}, "embeddings": bad}))
        with pytest.raises(ConfigError, match=f"embeddings.{field}"):
            load_pipeline(path)
    assert EmbeddingSettings(max_tokens=64).max_tokens == 64
    assert not EmbeddingSettings().enabled


def test_the_backend_follows_the_device() -> None:
    assert resolve_backend("numpy", "auto") == ("numpy", "cpu")
    assert resolve_backend("auto", "cpu") == ("numpy", "cpu")
    torch = pytest.importorskip("torch")
    assert resolve_backend("torch", "cpu") == ("torch", "cpu")
    if not torch.cuda.is_available():
        assert resolve_backend("auto", "auto") == ("numpy", "cpu")
        with pytest.raises(RuntimeError, match="no GPU"):
            resolve_backend("torch", "cuda")
