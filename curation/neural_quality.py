"""The neural quality scorer: a logistic-regression head on the frozen sentence embeddings
(FineWeb-Edu's shape, a linear head over an encoder), trained on the documents the fastText
classifier trains on (`curation.quality.class_split`), and the rule that combines the two.

Deterministic: the loss is convex and L-BFGS starts from zero on the same matrix in the same
order, so the same vectors give the same head bytes. The head is 384 weights and a bias, stored
as a float64 `.npy` under its sha256 like the fastText model.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass

import numpy as np

from curation.embeddings import DIMENSIONS

KERNEL_VERSION = "neural-quality-1"
# L2 penalty on the weights, against a mean log loss: the vectors have unit length, so a
# separating head needs weights of norm 10 to 50, which this leaves room for.
HEAD_L2 = 1e-3

SCORERS = {"fasttext": "quality_score", "neural": "neural_score", "combined": "combined_score"}
"""A recipe's `selection.quality_scorer`, and the `quality_scores` column its cuts read."""


@dataclass(frozen=True)
class NeuralHead:
    """P(hq) = sigmoid(vector . weights + bias)."""

    weights: np.ndarray
    bias: float

    def score(self, vectors: np.ndarray) -> np.ndarray:
        """float32 P(hq) per row of `vectors` (float16 as stored, or float32)."""
        logits = vectors.astype(np.float64) @ self.weights + self.bias
        return (1.0 / (1.0 + np.exp(-logits))).astype(np.float32)

    def to_bytes(self) -> bytes:
        buffer = io.BytesIO()
        np.save(buffer, np.append(self.weights, self.bias).astype(np.float64),
                allow_pickle=False)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> NeuralHead:
        values = np.load(io.BytesIO(data), allow_pickle=False)
        if values.shape != (DIMENSIONS + 1,):
            raise ValueError(f"a neural head holds {DIMENSIONS + 1} values, not {values.shape}")
        return cls(values[:-1], float(values[-1]))

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.to_bytes()).hexdigest()


def train_head(positives: np.ndarray, negatives: np.ndarray, l2: float = HEAD_L2) -> NeuralHead:
    """Logistic regression of positives (hq) against negatives (lq), each class weighted to
    half the loss so an unbalanced sample does not shift P(hq)."""
    from scipy.optimize import minimize

    x = np.vstack([positives, negatives]).astype(np.float64)
    y = np.concatenate([np.ones(len(positives)), np.zeros(len(negatives))])
    weight = np.where(y == 1, 0.5 / len(positives), 0.5 / len(negatives))

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        logits = x @ theta[:-1] + theta[-1]
        # log(1 + e^z) - y z, written to stay finite for large |z|
        value = weight @ (np.logaddexp(0.0, logits) - y * logits) \
            + 0.5 * l2 * theta[:-1] @ theta[:-1]
        residual = weight * (1.0 / (1.0 + np.exp(-logits)) - y)
        gradient = np.append(x.T @ residual + l2 * theta[:-1], residual.sum())
        return float(value), gradient

    fitted = minimize(loss, np.zeros(x.shape[1] + 1), jac=True, method="L-BFGS-B",
                      options={"maxiter": 1000})
    return NeuralHead(fitted.x[:-1], float(fitted.x[-1]))


def percentile_ranks(scores: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """The share of `reference` (sorted) at or below each score: where a document's score falls
    among the held-out web documents' scores of the same model."""
    if not len(reference):
        return np.full(len(scores), np.nan, dtype=np.float32)
    # Both in float32, as scores are stored: a float64 0.2 ranks below a stored 0.2.
    ranks = np.searchsorted(reference.astype(np.float32), scores.astype(np.float32),
                            side="right")
    return (ranks / len(reference)).astype(np.float32)


def combined_scores(fasttext: np.ndarray, neural: np.ndarray, fasttext_reference: np.ndarray,
                    neural_reference: np.ndarray) -> np.ndarray:
    """The documented combination: the mean of the two models' percentile ranks among the
    held-out web documents. Each model's scale differs (fastText's P(hq) bunches near 0 and
    1), so ranks put them on one footing, and a document both models rank high ranks high."""
    return ((percentile_ranks(fasttext, fasttext_reference)
             + percentile_ranks(neural, neural_reference)) / 2).astype(np.float32)
