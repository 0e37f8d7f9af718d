"""The short cuts inside the shared word split (`curation.text`) give what the plain spaCy
port gives: each is checked against the unabridged rule on many strings."""

from __future__ import annotations

import random

import pytest
import regex

from curation import text
from curation.text import split_text, tokenize_chunk

# Characters the affix rules care about, with letters, digits and multi-character pieces.
_PIECES = list("aAzZ09.,;:!?'\"()[]{}%$€£+-–—°FCK²³…’s/kmgMBT#*&@_~^<>=|©") + [
    "км", "US$", "'s", "cm", "°C", "..", "e.g", "http://", "www.", ".com",
]


def _strings(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choices(_PIECES, k=rng.randint(1, 8))) for _ in range(count)]


def _suffix_length_unabridged(string: str) -> int:
    if string.endswith(".."):
        return len(string) - len(string.rstrip("."))
    match = text._SUFFIX_SEARCH(string, max(0, len(string) - text._SUFFIX_WINDOW))
    return match.end() - match.start() if match else 0


def test_suffix_rules_per_last_character_match_the_whole_rule_set() -> None:
    strings = _strings(60_000, seed=1)
    assert any(_suffix_length_unabridged(s) > 1 for s in strings)  # the set exercises rules
    assert [text._suffix_length(s) for s in strings] == list(
        map(_suffix_length_unabridged, strings)
    )


def test_infixes_tried_only_at_their_start_characters_match_finditer() -> None:
    finditer = regex.compile("|".join(p for p in text._INFIXES if p.strip())).finditer
    strings = _strings(60_000, seed=2) + ["well-known", "a.B", "3+4", "x/y", "a…b", "Ü-bahn"]
    found = [[m.span() for m in text._infixes(s)] for s in strings]
    assert sum(map(bool, found)) > 1_000
    assert found == [[m.span() for m in finditer(s)] for s in strings]


@pytest.mark.parametrize(
    ("chunk", "tokens"),
    [("word,", ("word", ",")), ("USA.", ("USA", ".")), ("A.", ("A.",)), ("US$", ("US$",)),
     ("ca.", ("ca", ".")), ("Mr.", ("Mr.",)), ("cannot!", ("can", "not", "!"))],
)
def test_word_and_mark_short_cut(chunk: str, tokens: tuple[str, ...]) -> None:
    assert tokenize_chunk(chunk) == tokens
    assert text._tokenize_affixes(chunk, text._SPECIALS) == tokens


def test_a_split_outlives_a_vocabulary_restart(monkeypatch: pytest.MonkeyPatch) -> None:
    vocabulary = text._Vocabulary(5, text.tokenize_chunk)
    monkeypatch.setattr(text, "_VOCABULARY", vocabulary)
    early = split_text("Don't stop me now, said the cat.")
    generation = vocabulary.generation
    later = split_text("An entirely different sentence with many other words in it.")
    assert vocabulary.generation != generation  # the first split's token ids are stale now
    assert early.words == ["Do", "n't", "stop", "me", "now", ",", "said", "the", "cat", "."]
    lengths = early.per_token("length", len)
    assert lengths.tolist() == [2, 3, 4, 2, 3, 1, 4, 3, 3, 1]
    assert later.per_token("length", len).tolist() == list(map(len, later.words))
