"""Evaluation kernels: extraction quality against gold text, language-ID accuracy."""

from __future__ import annotations

import re
import zipfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class WordScores:
    precision: float
    recall: float
    f1: float


def word_scores(predicted: str, gold: str) -> WordScores:
    """Multiset overlap of lower-cased word tokens, the usual article-extraction measure."""
    predicted_words = Counter(_WORD.findall(predicted.lower()))
    gold_words = Counter(_WORD.findall(gold.lower()))
    overlap = sum((predicted_words & gold_words).values())
    if not predicted_words or not gold_words:
        exact = float(not predicted_words and not gold_words)
        return WordScores(exact, exact, exact)
    precision = overlap / sum(predicted_words.values())
    recall = overlap / sum(gold_words.values())
    f1 = 2 * precision * recall / (precision + recall) if overlap else 0.0
    return WordScores(precision, recall, f1)


# --- language identification ---------------------------------------------------------------

# Individual languages whose lid.176 label is their macrolanguage's code.
_MACROLANGUAGE = {
    "cmn": "zh", "arb": "ar", "pes": "fa", "prs": "fa", "zsm": "ms", "ekk": "et", "lvs": "lv",
    "nob": "no", "swh": "sw", "uzn": "uz", "azj": "az", "khk": "mn", "ydd": "yi", "plt": "mg",
    "quz": "qu", "quy": "qu", "gug": "gn", "kmr": "ku", "ckb": "ckb", "als": "sq", "aln": "sq",
    "npi": "ne", "ory": "or", "pbu": "ps", "lug": "lg", "yue": "yue", "wuu": "wuu", "hbs": "sh",
    "hrv": "hr", "srp": "sr", "bos": "bs", "tgl": "tl", "fil": "tl",
}


def lid_label(iso639_3: str) -> str:
    """The lid.176 label for an ISO 639-3 code: the two-letter code where one exists."""
    import pycountry

    code = iso639_3.split("_")[0].lower()
    if code in _MACROLANGUAGE:
        return _MACROLANGUAGE[code]
    language = pycountry.languages.get(alpha_3=code)
    return getattr(language, "alpha_2", None) or code


@dataclass(frozen=True)
class LabelledText:
    language: str  # the lid.176 label it should get
    text: str
    source: str


def tatoeba_samples(path: str | Path) -> list[LabelledText]:
    """Tatoeba long sentences: TSV of CLD2 code, CLD2 ISO 639-3, Tatoeba ISO 639-3, text."""
    rows = Path(path).read_text(encoding="utf-8").splitlines()[1:]
    samples = []
    for row in rows:
        fields = row.split("\t")
        if len(fields) == 4 and fields[3].strip():
            samples.append(LabelledText(lid_label(fields[2]), fields[3].strip(), "tatoeba"))
    return samples


def udhr_samples(path: str | Path, per_language: int = 10,
                 min_chars: int = 80) -> list[LabelledText]:
    """UDHR paragraphs (one file per ISO 639-3 code): the first `per_language` long lines."""
    samples = []
    with zipfile.ZipFile(path) as archive:
        for name in sorted(archive.namelist()):
            code = Path(name).stem
            if not name.endswith(".txt") or not code[0].isalpha():
                continue
            lines = archive.read(name).decode("utf-8", errors="replace").splitlines()[1:]
            long_lines = [line.strip() for line in lines if len(line.strip()) >= min_chars]
            samples += [LabelledText(lid_label(code), line, "udhr")
                        for line in long_lines[:per_language]]
    return samples


@dataclass(frozen=True)
class LanguageAccuracy:
    source: str
    samples: int
    languages: int
    accuracy: float
    confusions: list[tuple[str, str, int]]


def language_accuracy(samples: list[LabelledText], known: set[str],
                      predict: Callable[[list[str]], list[str]]) -> LanguageAccuracy:
    """Accuracy over the samples whose language the model knows, with the top confusions."""
    scored = [sample for sample in samples if sample.language in known]
    predicted = predict([sample.text for sample in scored])
    wrong = Counter((s.language, p) for s, p in zip(scored, predicted, strict=True)
                    if s.language != p)
    correct = len(scored) - sum(wrong.values())
    return LanguageAccuracy(
        samples[0].source if samples else "", len(scored),
        len({sample.language for sample in scored}),
        correct / len(scored) if scored else 0.0,
        [(gold, got, count) for (gold, got), count in wrong.most_common(10)],
    )
