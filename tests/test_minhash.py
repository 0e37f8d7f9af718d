"""MinHash kernel: settings, shingles, exact permutation arithmetic, stable hashes, the Arrow
table, and a fast version of the correctness study of ``benchmarks/minhash.py``."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from pydantic import ValidationError

from curation import minhash
from curation.minhash import (
    EMPTY_SIGNATURE,
    SIGNATURE_COLUMN,
    MinHashSettings,
    band_hashes,
    candidate_probability,
    jaccard,
    row_agreement,
    shingle_hashes,
    signature_rows,
    signatures,
    signatures_from_shingles,
    signatures_table,
    word_hashes,
)
from curation.text import split_text

DEFAULT = MinHashSettings()
MERSENNE = MinHashSettings(permutation="mersenne61")
P61 = (1 << 61) - 1
TEXT = "The quick brown fox jumps over the lazy dog, and then it runs away into the forest."


def shingles(text: str, settings: MinHashSettings = DEFAULT) -> np.ndarray:
    return shingle_hashes(split_text(text), settings)


# --- settings --------------------------------------------------------------------------------


def test_defaults_are_finewebs_shape() -> None:
    assert (DEFAULT.ngram, DEFAULT.bands, DEFAULT.rows, DEFAULT.hash_bits) == (5, 14, 8, 64)
    assert DEFAULT.permutations == 112
    with pytest.raises(ValidationError):
        DEFAULT.bands = 20  # frozen: settings are hashed into versions


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"ngram": 0}, "ngram is the shingle size in words: 1 to 64, got 0"),
        ({"rows": 0}, "must be at least 1, got 0"),
        ({"bands": 100, "rows": 100}, "bands * rows = 100 * 100 = 10000 permutations"),
        ({"seed": -1}, "seed must be in [0, 2**63)"),
        ({"hash_bits": 32}, "Input should be 64"),
        ({"permutation": "xor"}, "'affine64' or 'mersenne61'"),
        ({"num_perm": 128}, "Extra inputs are not permitted"),
    ],
)
def test_invalid_settings_name_the_field_and_reason(fields: dict, message: str) -> None:
    with pytest.raises(ValidationError) as error:
        MinHashSettings(**fields)
    assert message in str(error.value)


# --- words and shingles ----------------------------------------------------------------------


def test_shingles_are_word_ngrams_of_the_normalised_words() -> None:
    words = split_text(TEXT).words  # 19 spaCy words, 2 of them punctuation
    assert len(words) == 19
    assert len(shingles(TEXT)) == 17 - 5 + 1
    # Case, punctuation-only words, digits and diacritics do not matter by default.
    same = "the QUICK brown fox ... jumps over the lazy dog and then it runs away into the forest"
    assert np.array_equal(shingles(same), shingles(TEXT))
    assert np.array_equal(shingles("in 1999 the café opened"), shingles("in 2024 the cafe opened"))
    # Word order does.
    assert jaccard(shingles("a b c d e f"), shingles("b a c d e f")) < 1


def test_normalisation_can_be_switched_off() -> None:
    strict = MinHashSettings(
        lowercase=False, drop_punctuation=False, normalise_numbers=False, strip_diacritics=False
    )
    for a, b in [("The cat sat on it", "the cat sat on it"), ("a , b c d e", "a b c d e")]:
        assert not np.array_equal(shingles(a, strict), shingles(b, strict))
        assert np.array_equal(shingles(a), shingles(b))
    assert len(word_hashes(split_text("a , b"), strict)) == 3


def test_short_documents_are_one_shingle_and_empty_ones_none() -> None:
    assert len(shingles("only three words")) == 1
    assert not np.array_equal(shingles("only three words"), shingles("only three"))
    assert len(shingles("")) == 0
    assert len(shingles(" ... !! ")) == 0  # punctuation only
    sigs = signatures([split_text(""), split_text("only three words")], DEFAULT)
    assert (sigs[0] == EMPTY_SIGNATURE).all() and (sigs[1] != EMPTY_SIGNATURE).all()


def test_vectorised_shingles_match_a_per_window_reference() -> None:
    words = word_hashes(split_text(TEXT * 3), DEFAULT)
    weights = [int(w) for w in minhash._WINDOW_WEIGHTS]
    mask = (1 << 64) - 1

    def mix(x: int) -> int:  # splitmix64's finaliser on Python integers
        x ^= x >> 30
        x = x * 0xBF58476D1CE4E5B9 & mask
        x ^= x >> 27
        x = x * 0x94D049BB133111EB & mask
        return x ^ x >> 31

    expected = [
        mix(sum(int(w) * weights[j] for j, w in enumerate(words[i : i + 5])) & mask)
        for i in range(len(words) - 4)
    ]
    assert minhash.shingles_from_words(words, 5).tolist() == expected


# --- permutations and signatures -------------------------------------------------------------


def test_mersenne_permutations_are_exact_modular_arithmetic() -> None:
    perms = minhash._permutations("mersenne61", 1, 112)
    edges = [0, 1, 2**32 - 1, 2**32, 2**60, P61 - 2, P61 - 1]
    rng = np.random.default_rng(0)
    x = np.array(edges + rng.integers(0, P61, 300, dtype=np.uint64).tolist(), dtype=np.uint64)
    got = perms.apply(x)
    for i in (0, 3, 6, 100, 306):
        expected = [
            (int(a) * int(x[i]) + int(b)) % P61 for a, b in zip(perms.a, perms.b, strict=True)
        ]
        assert got[:, i].tolist() == expected
    assert got.max() < P61


def test_affine_permutations_are_bijections_mod_2_64() -> None:
    perms = minhash._permutations("affine64", 1, 112)
    assert (perms.a & np.uint64(1)).all()  # odd multipliers are invertible mod 2**64
    x = np.array([3, 2**63 + 5], dtype=np.uint64)
    expected = [(int(a) * 3 + int(b)) % 2**64 for a, b in zip(perms.a, perms.b, strict=True)]
    assert perms.apply(x)[:, 0].tolist() == expected


@pytest.mark.parametrize("settings", [DEFAULT, MERSENNE], ids=["affine64", "mersenne61"])
def test_batched_signatures_equal_per_document_minima(
    settings: MinHashSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(minhash, "_BLOCK_ROWS", 7)  # documents straddle many blocks
    rng = np.random.default_rng(1)
    docs = [rng.integers(0, 2**64, n, dtype=np.uint64) for n in (0, 1, 6, 7, 8, 30, 0, 3)]
    sigs = signatures_from_shingles(docs, settings)
    perms = minhash._permutations(settings.permutation, settings.seed, settings.permutations)
    for doc, sig in zip(docs, sigs, strict=True):
        if not len(doc):
            assert (sig == EMPTY_SIGNATURE).all()
            continue
        x = minhash._mod_p(doc) if settings.permutation == "mersenne61" else doc
        assert np.array_equal(sig, perms.apply(x).min(axis=1))


def test_hashes_are_pinned_across_machines_and_processes() -> None:
    """Golden values: the same seed gives the same signatures everywhere (a change here
    re-versions every minhash_signatures partition)."""
    split = split_text(TEXT)
    assert shingle_hashes(split, DEFAULT)[0] == 0x9424004F8C94D55D
    sig = signatures([split], DEFAULT)
    assert sig[0, :2].tolist() == [0x12E9CEA58D2550DB, 0x6D018C73EAD677D]
    assert band_hashes(sig, DEFAULT)[0, 0] == 0x10CA29166D1B33AC
    assert band_hashes(signatures([split], MERSENNE), MERSENNE)[0, 0] == 0x5155E0CC4EF206D6
    code = (
        "from curation.minhash import *; from curation.text import split_text;"
        f"s = MinHashSettings(); print(band_hashes(signatures([split_text({TEXT!r})], s), s)"
        "[0].tolist())"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert other.stdout.strip() == str(band_hashes(sig, DEFAULT)[0].tolist())


def test_seed_changes_the_permutations() -> None:
    split = split_text(TEXT)
    other = MinHashSettings(seed=2)
    assert not np.array_equal(signatures([split], DEFAULT), signatures([split], other))


# --- band hashes, similarity, the curve ------------------------------------------------------


def test_band_hashes_key_each_band_and_check_the_shape() -> None:
    sigs = np.zeros((2, 112), dtype=np.uint64)
    sigs[1, :8] = 1  # the second document differs in band 0 only
    bands = band_hashes(sigs, DEFAULT)
    assert bands.shape == (2, 14) and bands.dtype == np.uint64
    assert bands[0, 0] != bands[1, 0] and np.array_equal(bands[0, 1:], bands[1, 1:])
    assert len(set(bands[0].tolist())) == 14  # equal rows, different bands: different keys
    with pytest.raises(ValueError, match=r"shape \(n_docs, 112\) for 14 bands x 8 rows"):
        band_hashes(np.zeros((2, 100), dtype=np.uint64), DEFAULT)


def test_jaccard_and_candidate_probability() -> None:
    a = np.array([1, 2, 3, 3], dtype=np.uint64)
    assert jaccard(a, np.array([2, 3, 4], dtype=np.uint64)) == 0.5
    assert jaccard(np.array([], np.uint64), np.array([], np.uint64)) == 1.0
    assert jaccard(a, np.array([], np.uint64)) == 0.0
    assert candidate_probability(0.8, 14, 8) == pytest.approx(0.924, abs=1e-3)
    assert candidate_probability(1.0, 14, 8) == 1.0 and candidate_probability(0.0, 14, 8) == 0
    curve = candidate_probability(np.array([0.5, (1 / 14) ** (1 / 8)]), 14, 8)
    assert curve[0] < 0.06 and math.isclose(curve[1], 1 - (13 / 14) ** 14)


# --- Arrow -----------------------------------------------------------------------------------


def test_signatures_table_groups_into_buckets_with_duckdb() -> None:
    import duckdb

    texts = [TEXT, TEXT.upper(), "A completely different sentence about other things here."]
    bands = band_hashes(signatures([split_text(t) for t in texts], DEFAULT), DEFAULT)
    sig_table = signatures_table(["a", "b", "c"], bands)
    assert sig_table.column_names == ["doc_id"] + [f"band_{b:02d}" for b in range(14)]
    assert str(sig_table.schema.field("band_13").type) == "uint64"
    assert sig_table.column("band_03").to_pylist() == bands[:, 3].tolist()
    rows = duckdb.sql(
        "SELECT list(doc_id ORDER BY doc_id) FROM sig_table GROUP BY band_00 HAVING count(*) > 1"
    ).fetchall()
    assert rows == [(["a", "b"],)]
    with pytest.raises(ValueError, match="must have shape"):
        signatures_table(["a"], bands)


# --- the correctness study, fast version -----------------------------------------------------


def test_candidate_rate_follows_the_lsh_curve_on_real_text(shared_data) -> None:
    """Real base texts, seeded word edits, exact Jaccard from the same shingles; a looser
    bound (4 sigma, about 80 pairs per 0.05 band) than the benchmark's 3 sigma at 2,000."""
    from benchmarks.minhash import KINDS, band_rows, base_documents, run_study

    texts = base_documents(shared_data, html_limit=12, max_books=120)
    results = run_study(texts, DEFAULT, pairs_per_bin=80, exact_pairs=60)
    for kind in KINDS:
        rows = band_rows(results, DEFAULT, kind, sigmas=4.0)
        assert all(row.pairs >= 80 for row in rows[:-1])
        bad = [(r.label, r.theory, r.observed, r.bound) for r in rows if not r.ok]
        assert not bad, f"{kind}: candidate rate off the curve in {bad}"
        exact = rows[-1]
        assert exact.pairs >= 60 and exact.observed == 1.0  # duplicates are always candidates
        # Each signature row agrees with probability Jaccard (the MinHash estimator).
        agreement = np.mean([r.agreement[kind] for r in results])
        assert agreement == pytest.approx(np.mean([r.jaccard for r in results]), abs=0.01)


def test_stored_compact_signature_round_trips_and_estimates_jaccard() -> None:
    """The `signature` column keeps the low 16 bits of every row; the share of agreeing rows
    estimates the Jaccard of the shingle sets (within 4 standard errors at 112 rows)."""
    words = TEXT.split() * 3
    edited = list(words)
    edited[5:9] = ["changed", "words", "in", "place"]
    texts = [" ".join(words), " ".join(edited)]
    splits = [split_text(t) for t in texts]
    sigs = signatures(splits, DEFAULT)
    table = signatures_table(["a", "b"], band_hashes(sigs, DEFAULT), sigs)
    assert table.schema.field(SIGNATURE_COLUMN).type == pa.binary(224)
    rows = signature_rows(table[SIGNATURE_COLUMN], DEFAULT.permutations)
    assert (rows == (sigs & np.uint64(0xFFFF)).astype(np.uint16)).all()
    sliced = signature_rows(table.slice(1)[SIGNATURE_COLUMN], DEFAULT.permutations)
    assert (sliced == rows[1:]).all()
    j = jaccard(*(shingle_hashes(s, DEFAULT) for s in splits))
    estimate = row_agreement(rows[:1], rows[1:])[0]
    assert 0 < j < 1 and abs(estimate - j) <= 4 * np.sqrt(j * (1 - j) / DEFAULT.permutations)
    with pytest.raises(ValueError, match="fixed_size_binary"):
        signature_rows(table["doc_id"], DEFAULT.permutations)
