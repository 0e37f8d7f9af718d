"""datasketch as an independent referee of our MinHash (`curation.minhash`): on real text
(WikiText-2 articles) and edited copies with a controlled fraction of words replaced, our
Jaccard estimate and datasketch's `MinHash` estimate over the same shingles must both agree with
the exact Jaccard within binomial error, and our LSH candidate decision must agree with
datasketch's `MinHashLSH` at the same bands x rows.

datasketch hashes each shingle again (SHA-1, then its own affine64 permutations), so the two
estimators share only the shingle sets: a bias or a correlation between permutations on our
side shows up against it and against the exact value, not against itself."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from datasketch import MinHash, MinHashLSH

from curation.minhash import (
    MinHashSettings,
    band_hashes,
    candidate_probability,
    jaccard,
    shingle_hashes,
    signatures_from_shingles,
)
from curation.text import split_text
from tests.conftest import require_shared_data

SETTINGS = MinHashSettings()  # FineWeb's shape, as the dedup stages use it
K = SETTINGS.permutations
WIKITEXT = Path("sources/wikipedia/wikitext-2-raw_wiki.test.raw")
ARTICLES = 24
ARTICLE_WORDS = 600
# Fractions of words replaced in the edited copy: exact Jaccard from 1 down to about 0.
EDIT_FRACTIONS = (0.0, 0.002, 0.005, 0.01, 0.02, 0.04, 0.07, 0.1, 0.15, 0.25, 0.4, 0.7)
SIGMAS = 4.0
# Clearly on one side of the LSH curve (`1 - (1 - s**8)**14`): above, a pair is a candidate
# with probability > 0.9995; below, < 0.004 (0.5 near s = 0.72).
CLEARLY_ABOVE, CLEARLY_BELOW = 0.92, 0.35
_TITLE = re.compile(r"^ = [^=].* = $")


def _articles(root: Path) -> list[str]:
    """The first `ARTICLE_WORDS` words of each WikiText-2 article (lines ` = Title = `)."""
    lines = (root / WIKITEXT).read_text(encoding="utf-8").splitlines()
    articles: list[list[str]] = []
    for line in lines:
        if _TITLE.match(line):
            articles.append([])
        elif articles:
            articles[-1].extend(line.split())
    return [" ".join(words[:ARTICLE_WORDS]) for words in articles
            if len(words) >= ARTICLE_WORDS][:ARTICLES]


def _edit(text: str, fraction: float, vocabulary: list[str],
          rng: np.random.Generator) -> str:
    """`text` with `fraction` of its (whitespace) words replaced by random vocabulary words."""
    words = text.split()
    count = round(fraction * len(words))
    for i in rng.choice(len(words), size=count, replace=False):
        words[i] = f"{vocabulary[rng.integers(len(vocabulary))]}{rng.integers(10**6)}x"
    return " ".join(words)


def _datasketch(shingles: np.ndarray) -> MinHash:
    """datasketch's MinHash of the same shingle set (each shingle given as its 8 bytes)."""
    sketch = MinHash(num_perm=K, seed=7, scheme="affine64")
    sketch.update_batch([value.tobytes() for value in np.unique(shingles)])
    return sketch


@dataclass
class Pairs:
    exact: np.ndarray  # exact Jaccard of the shingle sets
    ours: np.ndarray  # fraction of equal values in our signatures
    theirs: np.ndarray  # datasketch's MinHash.jaccard
    ours_candidate: np.ndarray  # some band hash equal
    theirs_candidate: np.ndarray  # MinHashLSH query finds the other document
    signatures: np.ndarray  # (pairs, 2, K): ours


@pytest.fixture(scope="module")
def pairs() -> Pairs:
    texts = _articles(require_shared_data())
    assert len(texts) == ARTICLES, "WikiText-2 test split has fewer long articles than expected"
    vocabulary = sorted({w for t in texts for w in t.split() if w.isalpha()})
    rng = np.random.default_rng(19)
    left, right = [], []
    for i, text in enumerate(texts):
        fraction = EDIT_FRACTIONS[i % len(EDIT_FRACTIONS)]
        left.append(text)
        right.append(_edit(text, fraction, vocabulary, rng))
    for i in range(0, ARTICLES, 2):  # unrelated pairs: exact Jaccard about 0
        left.append(texts[i])
        right.append(texts[i + 1])
    shingles = [shingle_hashes(split_text(t), SETTINGS) for t in left + right]
    sigs = signatures_from_shingles(shingles, SETTINGS)
    bands = band_hashes(sigs, SETTINGS)
    n = len(left)
    lsh = MinHashLSH(num_perm=K, params=(SETTINGS.bands, SETTINGS.rows))
    theirs, theirs_candidate = [], []
    for i in range(n):
        a, b = _datasketch(shingles[i]), _datasketch(shingles[n + i])
        theirs.append(a.jaccard(b))
        lsh.insert(f"left-{i}", a)
        theirs_candidate.append(f"left-{i}" in lsh.query(b))
        lsh.remove(f"left-{i}")
    return Pairs(
        exact=np.array([jaccard(shingles[i], shingles[n + i]) for i in range(n)]),
        ours=(sigs[:n] == sigs[n:]).mean(axis=1),
        theirs=np.array(theirs),
        ours_candidate=(bands[:n] == bands[n:]).any(axis=1),
        theirs_candidate=np.array(theirs_candidate),
        signatures=np.stack([sigs[:n], sigs[n:]], axis=1),
    )


def _sigma(j: np.ndarray) -> np.ndarray:
    """Binomial standard error of a k-permutation estimate, floored at one count out of k so
    that pairs at J = 0 or 1 still allow a single chance collision / difference."""
    return np.maximum(np.sqrt(j * (1 - j) / K), 1 / K)


def test_pairs_cover_the_similarity_range(pairs: Pairs) -> None:
    assert pairs.exact.max() == 1.0
    assert ((pairs.exact > 0.3) & (pairs.exact < 0.8)).sum() >= 3
    assert (pairs.exact > CLEARLY_ABOVE).sum() >= 6
    assert (pairs.exact < CLEARLY_BELOW).sum() >= 12


def test_estimates_within_binomial_error_of_exact_jaccard(pairs: Pairs) -> None:
    tolerance = SIGMAS * _sigma(pairs.exact)
    assert np.all(np.abs(pairs.ours - pairs.exact) <= tolerance), np.c_[pairs.exact, pairs.ours]
    assert np.all(np.abs(pairs.theirs - pairs.exact) <= tolerance), \
        np.c_[pairs.exact, pairs.theirs]
    # Independent estimators: the difference has variance 2 J (1 - J) / k.
    assert np.all(np.abs(pairs.ours - pairs.theirs) <= math.sqrt(2) * tolerance)


def _calibration(estimate: np.ndarray, exact: np.ndarray) -> tuple[float, float]:
    """Over the pairs with 0 < J < 1 (a binomial spread): the summed error in standard
    errors of the sum (about N(0, 1) for an unbiased estimator) and the mean squared z-score
    (about 1, with sd sqrt(2 / n), for k independent permutations)."""
    inner = (exact > 0) & (exact < 1)
    error, sigma = estimate[inner] - exact[inner], _sigma(exact[inner])
    return float(error.sum() / np.sqrt((sigma**2).sum())), float(((error / sigma) ** 2).mean())


def test_estimates_unbiased_and_permutations_independent(pairs: Pairs) -> None:
    for estimate in (pairs.ours, pairs.theirs):
        bias, spread = _calibration(estimate, pairs.exact)
        assert abs(bias) < SIGMAS
        assert spread < 2.5  # chi-square / n: mean 1; correlated rows multiply it (see below)


def test_calibration_detects_correlated_permutations(pairs: Pairs) -> None:
    """The check above has power: signatures whose rows come in 8 copies (as if permutations
    were correlated in groups) keep the mean but fail the spread bound."""
    copied = np.repeat(pairs.signatures[:, :, : K // 8], 8, axis=2)
    degenerate = (copied[:, 0] == copied[:, 1]).mean(axis=1)
    assert _calibration(degenerate, pairs.exact)[1] >= 2.5


def test_lsh_candidates_agree_with_datasketch(pairs: Pairs) -> None:
    clear = (pairs.exact > CLEARLY_ABOVE) | (pairs.exact < CLEARLY_BELOW)
    expected = pairs.exact[clear] > CLEARLY_ABOVE
    assert np.array_equal(pairs.ours_candidate[clear], expected)
    assert np.array_equal(pairs.theirs_candidate[clear], expected)
    assert np.array_equal(pairs.ours_candidate[clear], pairs.theirs_candidate[clear])
    # Our band hashes decide like comparing the bands' raw rows (no band-hash collisions).
    rows = pairs.signatures.reshape(len(clear), 2, SETTINGS.bands, SETTINGS.rows)
    assert np.array_equal(pairs.ours_candidate, (rows[:, 0] == rows[:, 1]).all(axis=2).any(axis=1))
    assert candidate_probability(CLEARLY_ABOVE, SETTINGS.bands, SETTINGS.rows) > 0.9995
    assert candidate_probability(CLEARLY_BELOW, SETTINGS.bands, SETTINGS.rows) < 0.004
