"""Phrase-level variation, so two pages built from the same sentence template differ.

Without it, unrelated pages of one site share whole sentences and reach a 5-gram Jaccard
similarity high enough for MinHash to call them near-duplicates, which would make the sample's
duplicate truth wrong. In each group the first phrase is the one matched (only where it is a
whole word or phrase); every occurrence is replaced by a random member of the group, itself
included. Rewriting is one-way because the alternatives are not safe everywhere ("roughly" can
become "around", but "around the plants" must not become "roughly the plants").
"""

from __future__ import annotations

import random
import re

_RAW: dict[str, tuple[tuple[str, ...], ...]] = {
    "en": (
        ("do not", "don't"), ("does not", "doesn't"), ("did not", "didn't"),
        ("is not", "isn't"), ("are not", "aren't"), ("was not", "wasn't"),
        ("will not", "won't"), ("cannot", "can't"), ("could not", "couldn't"),
        ("would not", "wouldn't"), ("it is", "it's"), ("that is", "that's"),
        ("there is", "there's"), ("you will", "you'll"), ("I am", "I'm"),
        ("we are", "we're"), ("you are", "you're"), ("I would", "I'd"),
        ("usually", "generally", "normally"), ("often", "frequently"),
        ("quickly", "rapidly"), ("almost", "nearly"), ("roughly", "about", "around"),
        ("especially", "particularly"), ("simply", "just"),
        ("far more", "much more", "a lot more"), ("far less", "much less", "a lot less"),
        ("far easier", "much easier", "a lot easier"), ("a lot of", "plenty of", "lots of"),
        ("a few weeks", "a couple of weeks", "several weeks"),
        ("a few days", "a couple of days", "several days"),
        ("straight away", "right away", "immediately"), ("at first", "initially"),
        ("each year", "every year"), ("every day", "each day"), ("the children", "the kids"),
        ("surprisingly", "remarkably"), ("make sure", "ensure"), ("huge", "big"),
        ("a great deal", "a lot"), ("begin to", "start to"), ("I think", "I believe"),
        ("afterwards", "later on"), ("because the", "since the", "as the"),
        ("because it", "since it", "as it"), ("because they", "since they", "as they"),
        ("is worth", "is well worth"), ("residents", "locals"), ("the project", "the scheme"),
        ("expected to", "likely to"), ("plenty of", "lots of"), ("a couple of", "two or three"),
        ("we found that", "we discovered that"), ("in my opinion", "to my mind"),
    ),
    "de": (
        ("etwa", "ungefähr", "rund"), ("deshalb", "daher", "darum"), ("oft", "häufig"),
        ("schnell", "rasch"), ("unbedingt", "auf jeden Fall"), ("zunächst", "anfangs"),
        ("deutlich", "merklich"), ("allerdings", "jedoch"),
        ("bequem", "einfach"),
    ),
    "fr": (
        ("très", "vraiment"), ("souvent", "fréquemment"), ("environ", "à peu près"),
        ("facilement", "sans difficulté"), ("parce que", "car"), ("quelques", "plusieurs"),
    ),
    "es": (
        ("muy", "bastante"), ("a menudo", "con frecuencia"), ("porque", "ya que"),
        ("siempre", "casi siempre"), ("mucho", "bastante"), ("alrededor de", "unos"),
        ("perfectamente", "sin problema"),
    ),
    "ru": (
        ("очень", "весьма"), ("около", "примерно"), ("потому что", "так как"),
        ("обязательно", "непременно"), ("довольно", "достаточно"),
    ),
    "ja": (
        ("とても", "すごく", "本当に"), ("おいしく", "美味しく"), ("ぜひ", "是非"),
        ("少し", "ちょっと"), ("おすすめ", "オススメ"), ("ください", "下さい"),
        ("できます", "可能です"), ("簡単", "手軽"), ("よくなり", "良くなり"),
    ),
}


def _compile(phrases: tuple[str, ...], wide: bool) -> tuple[re.Pattern[str], tuple[str, ...]]:
    matched = re.escape(phrases[0])
    # Word boundaries for spaced languages; Japanese has none to anchor on.
    pattern = matched if wide else rf"(?<!\w){matched}(?!\w)"
    return re.compile(pattern, re.IGNORECASE), phrases


_TABLES = {
    lang: [_compile(group, lang == "ja") for group in groups] for lang, groups in _RAW.items()
}


def _match_case(original: str, replacement: str) -> str:
    if original[:1].isupper():
        return replacement[:1].upper() + replacement[1:]
    return replacement


def vary(rng: random.Random, text: str, lang: str) -> str:
    """`text` with each known phrase swapped for one of its alternatives (or kept)."""
    for pattern, phrases in _TABLES.get(lang, ()):
        text = pattern.sub(lambda m, p=phrases: _match_case(m.group(0), rng.choice(p)), text)
    return text
