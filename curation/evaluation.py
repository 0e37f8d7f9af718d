"""Extraction quality against gold main text: bag-of-words precision, recall and F1."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

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
