"""The learned quality classifier: a fastText model of curated text (hq) against web text (lq).

DCLM's recipe (arXiv 2406.11794): a bigram fastText classifier, positives from reference text,
negatives sampled from the web, documents kept by score. Everything here is a pure function of
its inputs and the seed: samples and splits are chosen by keyed hashes of content, never by
position, so partitioning or ordering the input changes nothing; and with one training thread
and its uninitialised memory zeroed (`_zero_filled_malloc`), fastText is deterministic too: the
same inputs give the same model bytes.
"""

from __future__ import annotations

import ctypes
import hashlib
import heapq
import math
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

import fasttext
import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from curation.dedup import text_hash

HQ = "hq"
LQ = "lq"
_LABEL_PREFIX = "__label__"
DEFAULT_MAX_CHARS = 10_000
FEATURES_LISTED = 20

# Words are runs of word characters; every other visible character is a token of its own. This
# gives "word," and "word" one feature (web text glues punctuation on, wikitext spaces it off),
# and makes the markup-like characters of menus, link lists and price lists ("|", "/", "$",
# "©") features in their own right. Control characters and lone surrogates are dropped: fastText
# splits lines on some of them and UTF-8 cannot encode the others.
_TOKEN = re.compile(r"\w+|[^\w\s\x00-\x1f\x7f-\x9f\ud800-\udfff]")

_Model = fasttext.FastText._FastText
_M_PERTURB = -6  # glibc <malloc.h>
# M_PERTURB is process-wide: one training must not switch it off under another.
_MALLOC_LOCK = threading.Lock()


class QualityClassifierSettings(BaseModel):
    """The `quality_classifier` section of pipeline.yaml (hashed into the asset's version)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # fastText hyper-parameters, named as fastText names them. wordNgrams=2 as in DCLM.
    epoch: int = Field(5, ge=1)
    lr: float = Field(0.1, gt=0)
    wordNgrams: int = Field(2, ge=1)
    dim: int = Field(64, ge=1)
    minCount: int = Field(1, ge=1)
    # Hash buckets for word n-grams. The model file holds (words + bucket) x dim float32: about
    # 800 MB at fastText's defaults (2M x 100), about 55 MB at these; raise them for large data.
    bucket: int = Field(200_000, ge=1)
    # Only losses with one output row per label: the feature report and P(hq) rely on it.
    loss: Literal["softmax", "ova"] = "softmax"
    max_positives: int = Field(200_000, ge=1)
    # None keeps the classes balanced: negatives_per_positive x the positives used.
    max_negatives: int | None = Field(None, ge=1)
    negatives_per_positive: float = Field(1.0, gt=0)
    holdout_fraction: float = Field(0.2, gt=0, lt=1)
    max_chars_per_doc: int = Field(DEFAULT_MAX_CHARS, ge=1)
    seed: int = Field(0, ge=0, lt=2**31)  # fastText takes a C int
    # More than one thread trains Hogwild-style (lock-free, racy) and is not reproducible.
    threads: int = Field(1, ge=1)
    # Negatives come only from these snapshots, so adding a snapshot leaves the model, and every
    # score made with it, unchanged.
    training_snapshots: list[str] = Field(min_length=1)

    @field_validator("training_snapshots")
    @classmethod
    def _canonical_snapshots(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("training_snapshots lists a snapshot twice")
        # The order says nothing, so it must not change the settings' hash.
        return sorted(value)

    def negative_count(self, positives: int) -> int:
        """How many web documents to sample as negatives against `positives` positives."""
        wanted = math.ceil(min(positives, self.max_positives) * self.negatives_per_positive)
        return wanted if self.max_negatives is None else min(wanted, self.max_negatives)


@dataclass(frozen=True)
class HeldOutSplit:
    """Positions of each class's training and held-out texts in the lists the classifier was
    given (`class_split`), and the model's P(hq) of the held-out ones: what a model trained
    beside it (the neural head) is trained and judged on."""

    hq_train: list[int]
    hq_held: list[int]
    lq_train: list[int]
    lq_held: list[int]
    hq_scores: np.ndarray
    lq_scores: np.ndarray


@dataclass(frozen=True)
class TrainedClassifier:
    """A trained model and how it did on the held-out texts (hq is the positive class)."""

    model_path: Path
    model_sha256: str
    train_counts: dict[str, int]
    holdout_counts: dict[str, int]
    precision: float  # of hq at P(hq) >= 0.5
    recall: float
    roc_auc: float
    hq_features: tuple[tuple[str, float], ...]  # (word, weight), strongest first
    lq_features: tuple[tuple[str, float], ...]
    train_seconds: float
    split: HeldOutSplit

    def summary(self) -> dict[str, Any]:
        """The figures a manifest records (not the model's path or the split)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in ("model_path", "split")}

    def scorer(self, settings: QualityClassifierSettings) -> QualityScorer:
        return QualityScorer(self.model_path, settings.max_chars_per_doc)


def prepare_text(text: str, max_chars: int) -> str:
    """One line of space-separated lower-case tokens from the first `max_chars` characters."""
    return " ".join(_TOKEN.findall(text[:max_chars].lower()))


def _keyed_hash(value: str, seed: int, purpose: bytes) -> int:
    # A distinct `person` per purpose keeps the choices independent: with one hash, the texts a
    # cap keeps (the smallest hashes) would all land in the held-out set too.
    digest = hashlib.blake2b(value.encode("utf-8", "surrogatepass"), digest_size=8,
                             key=seed.to_bytes(8, "little"), person=purpose)
    return int.from_bytes(digest.digest(), "little")


def sample_negatives(doc_ids: list[str], texts: list[str], count: int, seed: int) -> list[int]:
    """Indices of `count` distinct non-blank documents: one per exact duplicate (the text
    `exact_dedup` compares, `normalise_text`), the copy with the smallest keyed hash of
    `doc_id`, then the `count` of those with the smallest hash. Negatives are deduplicated as
    the mix is before its quality cut: a page the crawl holds a hundred times is one negative,
    not a hundred votes for its boilerplate.

    The choice depends only on the (doc_id, text) pairs and the seed, not on their order or
    partitioning; and the sample of a union is the sample of the per-partition samples (a
    text's representative in the union is the best of its per-partition ones), so it can be
    taken partition by partition and merged. Indices are returned in ascending order.
    """
    if len(doc_ids) != len(texts):
        raise ValueError(f"{len(doc_ids)} doc_ids but {len(texts)} texts")

    def rank(i: int) -> tuple[int, str]:
        return _keyed_hash(doc_ids[i], seed, b"negatives"), doc_ids[i]

    best: dict[int, int] = {}
    for i, text in enumerate(texts):
        if text.strip():
            key = text_hash(text)
            if key not in best or rank(i) < rank(best[key]):
                best[key] = i
    return sorted(heapq.nsmallest(count, best.values(), key=rank))


def class_split(texts: Sequence[str], limit: int, settings: QualityClassifierSettings,
                label: str) -> tuple[list[int], list[int]]:
    """Positions in `texts` of a class's training and held-out documents: those not blank once
    prepared, capped to `limit` by the keyed hash of the prepared text and split by another.
    A threshold on each text's own hash, rather than an exact count, keeps a text on the same
    side when the set grows, so retraining never leaks held-out texts. Every model of the
    plane trains and is judged on these same documents."""
    return _split_prepared(_prepared(texts, settings), limit, settings, label)


def _prepared(texts: Sequence[str], settings: QualityClassifierSettings) -> list[str]:
    return [prepare_text(text, settings.max_chars_per_doc) for text in texts]


def _split_prepared(prepared: Sequence[str], limit: int, settings: QualityClassifierSettings,
                    label: str) -> tuple[list[int], list[int]]:
    kept = heapq.nsmallest(limit, (i for i, text in enumerate(prepared) if text),
                           key=lambda i: (_keyed_hash(prepared[i], settings.seed, b"cap"),
                                          prepared[i], i))
    cut = settings.holdout_fraction * 2**64
    train: list[int] = []
    held_out: list[int] = []
    for i in kept:
        (held_out if _keyed_hash(prepared[i], settings.seed, b"holdout") < cut
         else train).append(i)
    if not train or not held_out:
        raise ValueError(f"{label}: {len(train)} training and {len(held_out)} held-out texts; "
                         "both must be non-empty")
    return train, held_out


def _write_training_file(path: Path, hq: list[str], lq: list[str], seed: int) -> None:
    lines = [f"{_LABEL_PREFIX}{HQ} {text}\n" for text in hq]
    lines += [f"{_LABEL_PREFIX}{LQ} {text}\n" for text in lq]
    # SGD sees lines in file order: a keyed-hash order mixes the classes and makes the model
    # independent of the order the texts came in.
    lines.sort(key=lambda line: (_keyed_hash(line, seed, b"order"), line))
    path.write_text("".join(lines), encoding="utf-8")


@contextmanager
def _zero_filled_malloc() -> Iterator[None]:
    """Make glibc's malloc hand out zeroed memory for the duration.

    fastText (fasttext-numpy2 0.10.4, measured) initialises its input matrix in ten blocks, one
    per training thread, so with fewer than ten threads most rows keep whatever malloc
    returns: zeros from a fresh mapping, or a previous allocation's bytes, which makes training
    irreproducible and sometimes ends in "Encountered NaN". glibc's M_PERTURB fills each
    allocation with the complement of its byte, so 0xFF gives zeros. The rows fastText leaves
    alone then start at zero, which a linear model trains from like any other start.
    (glibc skips the fill for tcache hits, chunks of about 1 KB at most, far below any matrix.)
    """
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    with _MALLOC_LOCK:
        if mallopt is None or not mallopt(_M_PERTURB, 0xFF):
            raise RuntimeError("reproducible fastText training needs glibc's mallopt(M_PERTURB)")
        try:
            yield
        finally:
            mallopt(_M_PERTURB, 0)


def _fit(path: Path, settings: QualityClassifierSettings) -> _Model:
    with _zero_filled_malloc():
        return fasttext.train_supervised(
            input=str(path), epoch=settings.epoch, lr=settings.lr, wordNgrams=settings.wordNgrams,
            dim=settings.dim, minCount=settings.minCount, bucket=settings.bucket,
            loss=settings.loss, seed=settings.seed, thread=settings.threads, verbose=0)


def _hq_probabilities(model: _Model, lines: list[str]) -> np.ndarray:
    if not lines:
        return np.empty(0, dtype=np.float32)
    labels, probs = model.predict(lines, k=2)
    hq = _LABEL_PREFIX + HQ
    pairs = zip(labels, probs, strict=True)
    scores = np.fromiter((p[0] if ls[0] == hq else p[1] for ls, p in pairs),
                         dtype=np.float32, count=len(lines))
    # fastText reports exp(log(p + 1e-5)), which can exceed 1.
    return np.clip(scores, 0.0, 1.0)


def roc_auc(positive_scores: np.ndarray, negative_scores: np.ndarray) -> float:
    """Area under the ROC curve as the Mann-Whitney U statistic; ties count one half."""
    scores = np.concatenate([positive_scores, negative_scores])
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    # A tied group shares the mean of the ranks it spans.
    mean_ranks = np.cumsum(counts) - (counts - 1) / 2
    positive_rank_sum = mean_ranks[inverse[: len(positive_scores)]].sum()
    n_pos, n_neg = len(positive_scores), len(negative_scores)
    return float((positive_rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _top_features(model: _Model) -> tuple[list[tuple[str, float]], ...]:
    """The words that push P(hq) up most and down most.

    The output matrix has one row per label, not per word. A document's hidden vector h is the
    mean of the input rows of its words and word-n-gram buckets, and for a two-label softmax
    log(P(hq) / P(lq)) = (o_hq - o_lq) . h. So word w adds (o_hq - o_lq) . input_w / length to
    the log-odds: that dot product is its exact linear weight (for "ova" it is the difference
    of the two logits it moves). Bucketed n-grams have no names, so only words are listed.
    Rows are read one word at a time because the full input matrix includes every bucket.
    """
    labels = model.get_labels()
    output = model.get_output_matrix()
    direction = output[labels.index(_LABEL_PREFIX + HQ)] - output[labels.index(_LABEL_PREFIX + LQ)]
    words = model.get_words()
    weights = np.fromiter((model.get_input_vector(i) @ direction for i in range(len(words))),
                          dtype=np.float64, count=len(words))
    ranked = sorted((-weight, word) for word, weight in zip(words, weights, strict=True)
                    if word != "</s>")  # the end-of-line token is in every document
    hq = [(word, -float(negated)) for negated, word in ranked[:FEATURES_LISTED]]
    lq = [(word, -float(negated)) for negated, word in reversed(ranked[-FEATURES_LISTED:])]
    return hq, lq


def _precision_recall(hq_scores: np.ndarray, lq_scores: np.ndarray) -> tuple[float, float]:
    true_pos = int((hq_scores >= 0.5).sum())
    predicted = true_pos + int((lq_scores >= 0.5).sum())
    # No predicted positive: precision is undefined; 0 keeps metadata JSON-clean.
    return (true_pos / predicted if predicted else 0.0), true_pos / len(hq_scores)


def train_classifier(positives: list[str], negatives: list[str],
                     settings: QualityClassifierSettings, workdir: Path) -> TrainedClassifier:
    """Train hq (positives) against lq (negatives) into `workdir/model.bin` and evaluate it.

    Each class is capped (max_positives; negative_count of the positives kept) and split into
    train and held-out sets by keyed hashes of its prepared text. Blank texts are dropped.
    `train_seconds` covers the whole call: preparation, training and evaluation.
    """
    started = time.perf_counter()
    hq_prepared = _prepared(positives, settings)
    hq_train, hq_held = _split_prepared(hq_prepared, settings.max_positives, settings, HQ)
    lq_prepared = _prepared(negatives, settings)
    lq_train, lq_held = _split_prepared(
        lq_prepared, settings.negative_count(len(hq_train) + len(hq_held)), settings, LQ)
    workdir.mkdir(parents=True, exist_ok=True)
    train_path, model_path = workdir / "train.txt", workdir / "model.bin"
    _write_training_file(train_path, [hq_prepared[i] for i in hq_train],
                         [lq_prepared[i] for i in lq_train], settings.seed)
    model = _fit(train_path, settings)
    # The file is a copy of document text: keep none, so takedown purges need not find it.
    train_path.unlink()
    model.save_model(str(model_path))
    hq_scores = _hq_probabilities(model, [hq_prepared[i] for i in hq_held])
    lq_scores = _hq_probabilities(model, [lq_prepared[i] for i in lq_held])
    precision, recall = _precision_recall(hq_scores, lq_scores)
    hq_features, lq_features = _top_features(model)
    return TrainedClassifier(
        model_path=model_path, model_sha256=_file_sha256(model_path),
        train_counts={HQ: len(hq_train), LQ: len(lq_train)},
        holdout_counts={HQ: len(hq_held), LQ: len(lq_held)},
        precision=precision, recall=recall, roc_auc=roc_auc(hq_scores, lq_scores),
        hq_features=tuple(hq_features), lq_features=tuple(lq_features),
        train_seconds=time.perf_counter() - started,
        split=HeldOutSplit(hq_train, hq_held, lq_train, lq_held, hq_scores, lq_scores))


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class QualityScorer:
    """P(hq) per document from a saved model; the model loads on first use and is not pickled,
    so a scorer sent to worker processes reloads it there."""

    def __init__(self, model_path: Path | str, max_chars: int = DEFAULT_MAX_CHARS) -> None:
        self.model_path = Path(model_path)
        self.max_chars = max_chars
        self._model: _Model | None = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_model": None}

    def score(self, texts: list[str]) -> np.ndarray:
        """float32 scores in [0, 1], prepared exactly as for training."""
        if self._model is None:
            self._model = fasttext.load_model(str(self.model_path))
        return _hq_probabilities(self._model, [prepare_text(t, self.max_chars) for t in texts])


def score_thresholds(scores: np.ndarray, languages: list[str],
                     top_fractions: Sequence[float] = (0.1, 0.3, 0.5)
                     ) -> dict[str, dict[float, float]]:
    """Per language and fraction f, the threshold t such that keeping `score >= t` keeps the top
    f of that language's documents: t is the k-th highest score with k = ceil(f * n), at least
    one. Documents tied with the k-th are all kept, so ties can only make the kept share larger.
    """
    scores = np.asarray(scores)
    if len(scores) != len(languages):
        raise ValueError(f"{len(scores)} scores but {len(languages)} languages")
    if not all(0 < fraction <= 1 for fraction in top_fractions):
        raise ValueError(f"top fractions must be in (0, 1]: {list(top_fractions)}")
    codes = np.asarray(languages, dtype=object)
    return {str(language): _thresholds(scores[codes == language], top_fractions)
            for language in sorted(set(languages))}


def _thresholds(scores: np.ndarray, top_fractions: Sequence[float]) -> dict[float, float]:
    descending = np.sort(scores)[::-1]
    # Rounding first stops float noise from adding a document: 0.3 * 10 is 3.0000000000000004.
    ranks = {f: max(1, math.ceil(round(f * len(descending), 9))) for f in top_fractions}
    return {f: float(descending[k - 1]) for f, k in ranks.items()}


def histogram(scores: np.ndarray, bins: int = 20) -> list[int]:
    """Counts of scores in `bins` equal-width bins over [0, 1]; 1.0 falls in the last bin."""
    counts, _ = np.histogram(np.clip(scores, 0.0, 1.0), bins=bins, range=(0.0, 1.0))
    return counts.tolist()


# What a pipeline without a classifier (no quality: section or no positive source) leaves out.
WITHOUT_CLASSIFIER = ("no quality scores; recipes cannot use selection.quality_top_fraction, "
                      "phases.*.quality_top_fraction or cluster_policy: quality")
# Held-out texts the positives must yield on average: the ROC AUC gate means little on fewer.
MIN_EXPECTED_HELD_OUT = 10


class TrainingDataError(ValueError):
    """The pipeline names no positives, too few to split, or its training snapshots yield no
    negatives."""


def minimum_positives(settings: QualityClassifierSettings) -> int:
    """Positive texts needed for about `MIN_EXPECTED_HELD_OUT` on each side of the split
    (the split is by each text's hash, so the sides are only proportional on average)."""
    smaller_side = min(settings.holdout_fraction, 1 - settings.holdout_fraction)
    return math.ceil(MIN_EXPECTED_HELD_OUT / smaller_side)


def too_few_positives(settings: QualityClassifierSettings, counts: dict[str, int]) -> str | None:
    """Why the positive sources (`counts` of records per source) cannot be split; else None."""
    usable = min(sum(counts.values()), settings.max_positives)
    needed = minimum_positives(settings)
    if usable >= needed:
        return None
    held = ", ".join(f"{name}: {count}" for name, count in sorted(counts.items()))
    capped = f" (capped at quality.max_positives {settings.max_positives})" \
        if settings.max_positives < sum(counts.values()) else ""
    return (f"the classifier_positive sources hold {usable} texts{capped} ({held}); holding "
            f"out {settings.holdout_fraction:.0%} of them needs at least {needed}")
