"""Heuristic quality signals: Gopher repetition and quality, C4, FineWeb, bad-word density.

`annotate` computes every signal of every enabled suite for every document from one
`split_text` (it never stops at the first failing rule: a recipe re-thresholds the signals later),
then the verdict under the settings, the first rule that drops the document and the value that
tripped it. The rules, their order and their thresholds are datatrove 0.10's
(`datatrove/pipeline/filters/`), which follow the papers: Gopher (Rae et al. 2021, arXiv
2112.11446, appendix A, table A1), C4 (Raffel et al. 2019, arXiv 1910.10683, section 2.2) and
FineWeb (Penedo et al. 2024, arXiv 2406.17557). Suites run in datatrove's FineWeb pipeline order,
Gopher repetition -> Gopher quality -> C4 -> FineWeb, then bad words.

C4's line removals are not applied: they are returned as edits (`Edit`) for the stage that
rewrites text. English-specific rules (Gopher's stop words, C4's terminal-punctuation and
sentence rules, the default bad-word list) apply to `english_only_languages`; elsewhere they are
skipped and counted.

Languages written without spaces follow FineWeb-2: a data file per language
(`curation/languages/`, `LanguageRules`) names a word segmenter (`curation.segmenters`) and
overrides thresholds, stop words and the bad-word list, so Gopher's word rules, the n-gram
repetition rules, C4's words per line, FineWeb's list ratio, the bad-word density and MinHash's
shingles all count the segmenter's words.

One setting departs from datatrove on request: `GopherQualitySettings.alpha_words` can count the
alpha-word rule's words as the Gopher paper does (whitespace-separated) instead of as spaCy tokens.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache, cached_property
from itertools import accumulate
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import pyarrow as pa
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from curation.code import CODE_SIGNALS, INT_CODE_SIGNALS, CodeSettings, code_checks, code_signals
from curation.segmenters import SEGMENTERS
from curation.text import (
    HAS_ALPHA,
    NON_SYMBOL,
    TERMINAL_PUNCTUATION,
    SplitText,
    count_sentences,
    split_text,
)

SUITES = ("gopher_repetition", "gopher_quality", "c4", "fineweb", "bad_words", "code")
PROSE_SUITES = SUITES[:-1]

Fraction = Annotated[float, Field(ge=0)]
Count = Annotated[int, Field(ge=0)]


def base_language(language: str | None) -> str:
    """ "en" for "en", "EN", "en_US" or "en-GB": rules are chosen by the base language code."""
    return (language or "").lower().replace("_", "-").split("-")[0]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- settings: every default is datatrove 0.10's, i.e. the papers' ---------------------------


class GopherRepetitionSettings(_Strict):
    """Gopher's repetition removal (table A1). A threshold of None turns its rule off."""

    enabled: bool = True
    dup_para_frac: Fraction | None = 0.3
    dup_para_char_frac: Fraction | None = 0.2
    dup_line_frac: Fraction | None = 0.3
    dup_line_char_frac: Fraction | None = 0.2
    # n -> the most frequent n-gram's share of characters.
    top_n_grams: dict[Annotated[int, Field(ge=1)], Fraction] = {2: 0.2, 3: 0.18, 4: 0.16}
    # n -> the share of characters in duplicated n-grams.
    dup_n_grams: dict[Annotated[int, Field(ge=1)], Fraction] = {
        5: 0.15,
        6: 0.14,
        7: 0.13,
        8: 0.12,
        9: 0.11,
        10: 0.10,
    }


# The alpha-word signal of each definition (`GopherQualitySettings.alpha_words`).
ALPHA_SIGNALS = {
    "datatrove": "gopher_alpha_words_frac",
    "gopher_paper": "gopher_alpha_words_frac_whitespace",
}


class GopherQualitySettings(_Strict):
    """Gopher's quality filters (appendix A). A threshold of None turns its rule off."""

    enabled: bool = True
    min_doc_words: Count | None = 50
    max_doc_words: Count | None = 100_000
    min_avg_word_length: Fraction | None = 3
    max_avg_word_length: Fraction | None = 10
    max_symbol_word_ratio: Fraction | None = 0.1
    max_bullet_lines_ratio: Fraction | None = 0.9
    max_ellipsis_lines_ratio: Fraction | None = 0.3
    min_alpha_words_ratio: Fraction | None = 0.8
    # What a "word" is for the alpha-word rule. `datatrove`: spaCy tokens, so every comma, full
    # stop and quote mark is a word without a letter (FineWeb parity); it drops dialogue-heavy
    # fiction and score tables. `gopher_paper`: whitespace-separated words, as the Gopher paper
    # counts them (Rae et al. 2021, appendix A), where "said." is one word with a letter.
    # Both ratios are stored either way, so a recipe can re-threshold on either.
    alpha_words: Literal["datatrove", "gopher_paper"] = "datatrove"
    min_stop_words: Count | None = 2
    stop_words: list[str] = ["the", "be", "to", "of", "and", "that", "have", "with"]

    @property
    def alpha_signal(self) -> str:
        """The signal column `min_alpha_words_ratio` is compared with under `alpha_words`."""
        return ALPHA_SIGNALS[self.alpha_words]


class C4Settings(_Strict):
    """C4's rules as datatrove implements them (lines are `str.splitlines()`)."""

    enabled: bool = True
    remove_citations: bool = True
    filter_no_terminal_punct: bool = True
    min_num_sentences: Count | None = 5
    min_words_per_line: Count | None = 3
    max_word_length: Count | None = 1000
    filter_lorem_ipsum: bool = True
    filter_javascript: bool = True
    filter_curly_bracket: bool = True
    filter_policy: bool = True


class FineWebSettings(_Strict):
    """FineWeb's custom filters (Penedo et al. 2024) as datatrove's FineWebQualityFilter has
    them: lines are `text.split("\\n")` without blank ones."""

    enabled: bool = True
    line_punct_thr: Fraction | None = 0.12
    line_punct_exclude_zero: bool = False
    stop_chars: list[str] | None = None  # None: datatrove's TERMINAL_PUNCTUATION
    short_line_thr: Fraction | None = 0.67
    short_line_length: Count = 30
    char_duplicates_ratio: Fraction | None = 0.01
    new_line_ratio: Fraction | None = 0.3


class BadWordsSettings(_Strict):
    """Share of words on a list. The built-in list is the project's own short English list of
    adult and spam words; `word_list` names a UTF-8 file with one word or phrase per line
    instead. No paper fixes a density: 0.05 drops spam pages without touching an article that
    mentions a word now and then."""

    enabled: bool = True
    word_list: str | None = None
    max_density: Fraction | None = 0.05
    # Languages the list is for; None: the pipeline's `english_only_languages`.
    languages: list[str] | None = None


LANGUAGES_DIR = Path(__file__).parent / "languages"
# The suites a language file may override, with their settings models.
_LANGUAGE_SUITES: dict[str, type[_Strict]] = {
    "gopher_repetition": GopherRepetitionSettings,
    "gopher_quality": GopherQualitySettings,
    "c4": C4Settings,
    "fineweb": FineWebSettings,
}


class LanguageRules(_Strict):
    """One language's departures from the pipeline's heuristics, FineWeb-2 style: its word
    segmenter, per-suite settings that override the pipeline's for documents in the language,
    and its bad-word list (`curation/languages/README.md`)."""

    enabled: bool = True  # false: the language is judged like any other
    source: str | None = None  # where the values come from
    segmenter: str | None = None  # a `curation.segmenters` name; None: the English split
    gopher_repetition: dict[str, Any] = {}
    gopher_quality: dict[str, Any] = {}
    c4: dict[str, Any] = {}
    fineweb: dict[str, Any] = {}
    bad_words_file: str | None = None  # a list in curation/languages/

    @field_validator("segmenter")
    @classmethod
    def _known_segmenter(cls, value: str | None) -> str | None:
        if value is not None and value not in SEGMENTERS:
            raise ValueError(f"unknown segmenter {value!r}; known: {sorted(SEGMENTERS)}")
        return value

    @field_validator("bad_words_file")
    @classmethod
    def _shipped_list(cls, value: str | None) -> str | None:
        if value is not None and (Path(value).name != value
                                  or not (LANGUAGES_DIR / value).is_file()):
            raise ValueError(f"{value!r} is not a word list in {LANGUAGES_DIR}")
        return value

    @model_validator(mode="after")
    def _valid_overrides(self) -> LanguageRules:
        for suite, model in _LANGUAGE_SUITES.items():
            try:
                model.model_validate(getattr(self, suite))
            except ValidationError as error:
                raise ValueError(f"{suite}: {error}") from None
        return self

    @property
    def stop_words_given(self) -> bool:
        return "stop_words" in self.gopher_quality


def builtin_language_rules() -> dict[str, LanguageRules]:
    """The rules shipped in `curation/languages/*.yaml`, by base language code."""
    return dict(_read_language_files())


@cache
def _read_language_files() -> dict[str, LanguageRules]:
    return {path.stem: LanguageRules.model_validate(yaml.safe_load(path.read_text("utf-8")))
            for path in sorted(LANGUAGES_DIR.glob("*.yaml"))}


def _merge_rules(base: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """`given` over `base`, a suite's settings merged one by one."""
    return {**base, **{key: {**base.get(key, {}), **value}
                       if key in _LANGUAGE_SUITES and isinstance(value, dict) else value
                       for key, value in given.items()}}


class HeuristicsSettings(_Strict):
    """Every suite's settings, the languages the English-specific rules apply to, and the
    per-language rules (`LanguageRules`)."""

    gopher_repetition: GopherRepetitionSettings = GopherRepetitionSettings()
    gopher_quality: GopherQualitySettings = GopherQualitySettings()
    c4: C4Settings = C4Settings()
    fineweb: FineWebSettings = FineWebSettings()
    bad_words: BadWordsSettings = BadWordsSettings()
    # Code sources' suite; the prose suites never judge a code file, nor this one prose.
    code: CodeSettings = CodeSettings()
    english_only_languages: list[str] = ["en"]
    # Base language code -> its rules: the built-in files (curation/languages/), with what is
    # given here merged over them key by key (a suite's settings one by one); null instead of a
    # language's rules switches them off (enabled: false).
    languages: dict[str, LanguageRules] = Field(default_factory=builtin_language_rules)

    @field_validator("english_only_languages")
    @classmethod
    def _base_codes(cls, value: list[str]) -> list[str]:
        return [base_language(language) for language in value]

    @field_validator("languages", mode="before")
    @classmethod
    def _over_builtin(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        merged: dict[str, Any] = {language: rules.model_dump()
                                  for language, rules in builtin_language_rules().items()}
        for language, given in value.items():
            code = base_language(language)
            if given is None:
                given = {"enabled": False}
            if isinstance(given, dict):
                merged[code] = _merge_rules(merged.get(code, {}), given)
            else:
                merged[code] = given
        return merged

    def rules(self, language: str) -> LanguageRules | None:
        """The rules of `language` (a base code), if it has rules switched on."""
        rules = self.languages.get(language)
        return rules if rules is not None and rules.enabled else None

    def for_language(self, language: str) -> HeuristicsSettings:
        """These settings with the rules of `language` (a base code) applied."""
        rules = self.rules(language)
        if rules is None:
            return self
        update = {suite: model.model_validate({**getattr(self, suite).model_dump(),
                                               **getattr(rules, suite)})
                  for suite, model in _LANGUAGE_SUITES.items() if getattr(rules, suite)}
        if "gopher_repetition" in update:  # the pipeline's n-gram sizes: the same columns
            mine, theirs = self.gopher_repetition, update["gopher_repetition"]
            update["gopher_repetition"] = theirs.model_copy(update={
                sizes: {n: getattr(theirs, sizes).get(n, limit)
                        for n, limit in getattr(mine, sizes).items()}
                for sizes in ("top_n_grams", "dup_n_grams")})
        return self.model_copy(update=update)

    def segmenter(self, language: str | None) -> str | None:
        """The word segmenter for documents in `language` (None: the English split)."""
        rules = self.rules(base_language(language))
        return rules.segmenter if rules else None

    def word_list_digests(self) -> dict[str, str]:
        """sha256 of each shipped word list the language rules use: the settings name a list,
        so a stage's version needs its content."""
        files = sorted({rules.bad_words_file for language in self.languages
                        if (rules := self.rules(language)) and rules.bad_words_file})
        return {name: hashlib.sha256((LANGUAGES_DIR / name).read_bytes()).hexdigest()
                for name in files}


# The built-in bad-word list: adult and spam vocabulary, lower case, matched on whole words.
DEFAULT_BAD_WORDS = frozenset(
    """
    porn porno porns pornographic pornography xxx nsfw sex sexy sexcam sexting nude nudes nudity
    naked erotic erotica escort escorts hooker hookers stripper strippers striptease camgirl
    camgirls webcams onlyfans hentai milf milfs fetish fetishes bdsm orgy orgies gangbang
    threesome horny slut sluts whore whores boobs tits titties pussy dick dicks cock cocks cum
    blowjob blowjobs handjob anal dildo dildos vibrator masturbation masturbate fuck fucking
    fucked shit bitch bitches viagra cialis levitra casino casinos jackpot betting gambling
    """.split()
)


def load_bad_words(path: str | Path | None) -> frozenset[str]:
    """The words and phrases of a list file (one per line, '#' starts a comment), lower case;
    the built-in list without a path."""
    if path is None:
        return DEFAULT_BAD_WORDS
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    words = (" ".join(line.split("#", 1)[0].lower().split()) for line in lines)
    return frozenset(word for word in words if word)


# --- results ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Edit:
    """A text edit recorded, not applied: a removed line, or a character span cut from a line.
    `line` indexes `text.splitlines()`; `start`/`end` are character offsets in the text (the
    whole line for a removal)."""

    doc_index: int
    stage: str
    kind: str
    line: int
    start: int
    end: int


@dataclass
class SuiteResult:
    """One suite on one document: its signals, and the first rule that drops it, if any."""

    signals: dict[str, float | int | None]
    reason: str | None = None
    value: float | None = None
    skipped: list[str] = field(default_factory=list)
    edits: list[tuple[str, int, int, int]] = field(default_factory=list)  # kind, line, start, end


def _above(value: float | None, limit: float | None) -> bool:
    return limit is not None and value is not None and value > limit


def _below(value: float | None, limit: float | None) -> bool:
    return limit is not None and value is not None and value < limit


def _first(result: SuiteResult, suite: str, checks: Iterable[tuple[str, str, bool]]) -> None:
    """Record the first check that trips as `suite.rule`, with its signal's value."""
    for rule, signal, tripped in checks:
        if tripped:
            result.reason = f"{suite}.{rule}"
            value = result.signals[signal]
            result.value = None if value is None else float(value)
            return


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


def _duplicates(items: list[str]) -> tuple[int, int]:
    """How many items repeat an earlier one, and their characters (datatrove's
    find_duplicates)."""
    seen: set[str] = set()
    repeated = [item for item in items if item in seen or seen.add(item)]
    return len(repeated), sum(map(len, repeated))


# --- Gopher repetition -----------------------------------------------------------------------

_PARAGRAPHS = re.compile(r"\n{2,}")
_LINES = re.compile(r"\n+")
# n-gram keys: a polynomial over the words' 56-bit hashes (wrapping uint64 arithmetic).
_NGRAM_BASE = np.uint64(0x9E3779B97F4A7C15)


def _ngram_keys(hashes: np.ndarray, n_max: int) -> dict[int, np.ndarray]:
    """n -> one key per n-gram, equal keys for equal word sequences."""
    keys = {1: hashes}
    current = hashes
    with np.errstate(over="ignore"):
        for n in range(2, n_max + 1):
            current = current[:-1] * _NGRAM_BASE + hashes[n - 1 :]
            keys[n] = current
    return keys


def _top_ngram_chars(keys: np.ndarray, starts: np.ndarray, n: int) -> int:
    """Characters of the most frequent n-gram (joined by spaces) times its count; among ties,
    the first seen, as Counter.most_common(1) picks it."""
    _, first, counts = np.unique(keys, return_index=True, return_counts=True)
    top = counts.max()
    i = int(first[counts == top].min())
    return int(top) * (int(starts[i + n] - starts[i]) + n - 1)


def _dup_ngram_chars(keys: np.ndarray, starts: list[int], n: int) -> int:
    """datatrove's find_all_duplicate: scan left to right; an n-gram seen before counts its
    characters (words joined without spaces) and the scan jumps past it. Only n-grams that occur
    more than once can change the scan, so only their positions are visited."""
    _, ids, counts = np.unique(keys, return_inverse=True, return_counts=True)
    positions = np.flatnonzero(counts[ids] > 1)
    seen: set[int] = set()
    total = idx = 0
    for pos, key in zip(positions.tolist(), ids[positions].tolist(), strict=True):
        if pos < idx:
            continue
        if key in seen:
            total += starts[pos + n] - starts[pos]
            idx = pos + n
        else:
            seen.add(key)
            idx = pos + 1
    return total


def _ngram_signals(split: SplitText, settings: GopherRepetitionSettings) -> dict[str, float]:
    sizes = sorted({*settings.top_n_grams, *settings.dup_n_grams})
    signals: dict[str, float] = {}
    if not sizes:
        return signals
    length = len(split.text)
    starts = np.concatenate(([0], np.cumsum(split.word_lengths)))
    keys = _ngram_keys(split.word_hashes, max(sizes))
    repeats = True  # once no n-gram repeats, no longer one does either
    for n in sorted(settings.top_n_grams):
        top = _top_ngram_chars(keys[n], starts, n) if len(keys[n]) else 0
        signals[f"top_{n}_gram_char_frac"] = top / length
    start_list = starts.tolist()
    for n in sorted(settings.dup_n_grams):
        dup = _dup_ngram_chars(keys[n], start_list, n) if repeats else 0
        repeats = dup > 0
        signals[f"dup_{n}_gram_char_frac"] = dup / length
    return signals


def gopher_repetition(split: SplitText, settings: GopherRepetitionSettings) -> SuiteResult:
    text = split.text
    if not text:
        names = ["dup_para_frac", "dup_para_char_frac", "dup_line_frac", "dup_line_char_frac"]
        names += [f"top_{n}_gram_char_frac" for n in sorted(settings.top_n_grams)]
        names += [f"dup_{n}_gram_char_frac" for n in sorted(settings.dup_n_grams)]
        return SuiteResult(dict.fromkeys(names), "gopher_repetition.empty", None)
    paragraphs = _PARAGRAPHS.split(text.strip())
    para_dups, para_chars = _duplicates(paragraphs)
    lines = _LINES.split(text)
    line_dups, line_chars = _duplicates(lines)
    signals: dict[str, float | int | None] = {
        "dup_para_frac": para_dups / len(paragraphs),
        "dup_para_char_frac": para_chars / len(text),
        "dup_line_frac": line_dups / len(lines),
        "dup_line_char_frac": line_chars / len(text),
        **_ngram_signals(split, settings),
    }
    result = SuiteResult(signals)
    checks = [
        (name, name, _above(signals[name], getattr(settings, name)))
        for name in ("dup_para_frac", "dup_para_char_frac", "dup_line_frac", "dup_line_char_frac")
    ]
    for group, limits in (("top", settings.top_n_grams), ("dup", settings.dup_n_grams)):
        for n in sorted(limits):
            name = f"{group}_{n}_gram_char_frac"
            checks.append((name, name, _above(signals[name], limits[n])))
    _first(result, "gopher_repetition", checks)
    return result


# --- Gopher quality --------------------------------------------------------------------------


def _line_fractions(lines: list[str]) -> tuple[float | None, float | None]:
    """Lines starting with a bullet, lines ending with an ellipsis (datatrove's tests)."""
    bullets = sum(1 for line in lines if line.lstrip().startswith(("•", "-")))
    ellipses = sum(1 for line in lines if line.rstrip().endswith(("...", "…")))
    return _ratio(bullets, len(lines)), _ratio(ellipses, len(lines))


def _whitespace_alpha_frac(split: SplitText, has_alpha: np.ndarray) -> float | None:
    """The share of whitespace-separated words with a letter (the Gopher paper's words). The
    spaCy tokens of a chunk spell the chunk, so a chunk has a letter iff one of its tokens
    does."""
    sizes = split.chunk_sizes
    if not len(sizes):
        return None
    alpha_before = np.concatenate(([0], np.cumsum(has_alpha)))  # lettered tokens before i
    ends = np.cumsum(sizes)
    return int(np.count_nonzero(alpha_before[ends] - alpha_before[ends - sizes])) / len(sizes)


def gopher_quality(
    split: SplitText, settings: GopherQualitySettings, stop_words: frozenset[str],
    stop_words_apply: bool,
) -> SuiteResult:
    text, n_words, flags = split.text, len(split.words), split.word_flags
    words = (flags & np.uint64(NON_SYMBOL)) != 0  # Gopher counts words that are not only symbols
    n_real = int(words.sum())
    has_alpha = (flags & np.uint64(HAS_ALPHA)) != 0
    bullets, end_ellipses = _line_fractions(split.lines)
    signals: dict[str, float | int | None] = {
        "gopher_words": n_real,
        "gopher_mean_word_length": float(split.word_lengths[words].mean()) if n_real else None,
        "gopher_hash_ratio": _ratio(text.count("#"), n_words),
        "gopher_ellipsis_ratio": _ratio(text.count("...") + text.count("…"), n_words),
        "gopher_bullet_lines_frac": bullets,
        "gopher_ellipsis_lines_frac": end_ellipses,
        "gopher_alpha_words_frac": _ratio(int(np.count_nonzero(has_alpha)), n_words),
        "gopher_alpha_words_frac_whitespace": _whitespace_alpha_frac(split, has_alpha),
        "gopher_stop_words": len(stop_words.intersection(split.words)),
    }
    s, g = settings, signals
    result = SuiteResult(signals)
    if s.min_stop_words is not None and not stop_words_apply:
        result.skipped.append("gopher_quality.few_stop_words")
    _first(
        result,
        "gopher_quality",
        [
            ("short_doc", "gopher_words", _below(n_real, s.min_doc_words)),
            ("long_doc", "gopher_words", _above(n_real, s.max_doc_words)),
            (
                "below_avg_word_length",
                "gopher_mean_word_length",
                _below(g["gopher_mean_word_length"], s.min_avg_word_length),
            ),
            (
                "above_avg_word_length",
                "gopher_mean_word_length",
                _above(g["gopher_mean_word_length"], s.max_avg_word_length),
            ),
            (
                "too_many_hashes",
                "gopher_hash_ratio",
                _above(g["gopher_hash_ratio"], s.max_symbol_word_ratio),
            ),
            (
                "too_many_ellipsis",
                "gopher_ellipsis_ratio",
                _above(g["gopher_ellipsis_ratio"], s.max_symbol_word_ratio),
            ),
            (
                "too_many_bullets",
                "gopher_bullet_lines_frac",
                _above(bullets, s.max_bullet_lines_ratio),
            ),
            (
                "too_many_end_ellipsis",
                "gopher_ellipsis_lines_frac",
                _above(end_ellipses, s.max_ellipsis_lines_ratio),
            ),
            (
                "below_alpha_threshold",
                s.alpha_signal,
                _below(g[s.alpha_signal], s.min_alpha_words_ratio),
            ),
            (
                "few_stop_words",
                "gopher_stop_words",
                stop_words_apply and _below(g["gopher_stop_words"], s.min_stop_words),
            ),
        ],
    )
    return result


# --- C4 --------------------------------------------------------------------------------------

CITATION = re.compile(r"\[\d*]|\[edit]|\[citation needed]")
END_PUNCTUATION = (".", "?", "!", '"', "'")
POLICY_SUBSTRINGS = (
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "use of cookies",
    "use cookies",
)
_POLICY = re.compile("|".join(map(re.escape, POLICY_SUBSTRINGS)))


@dataclass
class _C4Scan:
    """The state of one pass over a document's lines."""

    split: SplitText
    settings: C4Settings
    english: bool
    line_starts: list[int]
    segmented: bool = False  # words per line from the split (a segmenter's), not str.split
    sentences: int = 0
    lorem_line: int | None = None
    curly_line: int | None = None
    edits: list[tuple[str, int, int, int]] = field(default_factory=list)

    def words(self, index: int, line: str) -> tuple[int, Callable[[], int]]:
        """The words of a line (segmented: those not only symbols) and the longest one's
        length, computed only when asked."""
        if not self.segmented:
            words = line.split()
            return len(words), lambda: max(map(len, words))
        starts = self.split.line_word_starts
        first, end = int(starts[index]), int(starts[index + 1])
        real = (self.split.word_flags[first:end] & np.uint64(NON_SYMBOL)) != 0
        return int(real.sum()), lambda: int(self.split.word_lengths[first:end].max())

    def remove(self, kind: str, index: int, line: str) -> None:
        start = self.line_starts[index]
        self.edits.append((kind, index, start, start + len(line)))

    def cut_citations(self, index: int, raw: str, line: str) -> str:
        offset = self.line_starts[index] + len(raw) - len(raw.lstrip())
        for match in CITATION.finditer(line):
            self.edits.append(("citation", index, offset + match.start(), offset + match.end()))
        return CITATION.sub("", line)

    def scan(self, index: int, raw: str) -> None:
        """datatrove's C4QualityFilter on one line, in its order; a rule that would drop the
        whole document (lorem ipsum, curly bracket) is noted and the scan goes on."""
        s = self.settings
        line = raw.strip()
        n_words, longest = self.words(index, line)
        limit = s.max_word_length
        if limit is not None and len(line) > limit and longest() > limit:
            return self.remove("too_long_word", index, raw)
        edits_before = len(self.edits)
        cut = s.remove_citations and "[" in line and CITATION.search(line) is not None
        if cut:
            line = self.cut_citations(index, raw, line)
        if (
            self.english
            and s.filter_no_terminal_punct
            and (not line.endswith(END_PUNCTUATION) or line.endswith("..."))
        ):
            del self.edits[edits_before:]
            return self.remove("no_terminal_punct", index, raw)
        if s.min_words_per_line is not None and n_words < s.min_words_per_line:
            del self.edits[edits_before:]
            return self.remove("too_few_words", index, raw)
        lower = line.lower()
        if s.filter_lorem_ipsum and self.lorem_line is None and "lorem ipsum" in lower:
            self.lorem_line = index
        if s.filter_javascript and "javascript" in lower:
            del self.edits[edits_before:]
            return self.remove("javascript", index, raw)
        if s.filter_curly_bracket and self.curly_line is None and "{" in line:
            self.curly_line = index
        if s.filter_policy and _POLICY.search(lower):
            del self.edits[edits_before:]
            return self.remove("policy", index, raw)
        # (Stripped: a trailing whitespace token would be a sentence of its own that datatrove
        # strips away.)
        self.sentences += count_sentences(line.strip()) if cut else self.split.line_sentences(index)


def c4(split: SplitText, settings: C4Settings, english: bool) -> SuiteResult:
    lines = split.lines
    starts = [0, *accumulate(map(len, split.text.splitlines(keepends=True)))]
    scan = _C4Scan(split, settings, english, starts, split.segmenter is not None)
    for index, raw in enumerate(lines):
        scan.scan(index, raw)
    removed = len({edit[1] for edit in scan.edits if edit[0] != "citation"})
    signals: dict[str, float | int | None] = {
        "c4_sentences": scan.sentences,
        "c4_lines": len(lines),
        "c4_lines_removed": removed,
        "c4_lorem_ipsum_line": scan.lorem_line,
        "c4_curly_bracket_line": scan.curly_line,
    }
    result = SuiteResult(signals, edits=scan.edits)
    if not english:
        result.skipped += [
            f"c4.{rule}"
            for rule, on in (
                ("no_terminal_punct", settings.filter_no_terminal_punct),
                ("too_few_sentences", settings.min_num_sentences is not None),
            )
            if on
        ]
    lorem, curly = scan.lorem_line, scan.curly_line
    lorem_first = lorem is not None and (curly is None or lorem <= curly)
    _first(
        result,
        "c4",
        [
            ("lorem_ipsum", "c4_lorem_ipsum_line", lorem_first),
            ("curly_bracket", "c4_curly_bracket_line", curly is not None),
            (
                "too_few_sentences",
                "c4_sentences",
                english and _below(scan.sentences, settings.min_num_sentences),
            ),
        ],
    )
    return result


def apply_c4_edits(text: str, edits: Iterable[Edit | tuple[str, int, int, int]]) -> str:
    """The text datatrove's C4 filter leaves: kept lines stripped, citations cut, joined by
    newlines, the whole stripped."""
    removed: set[int] = set()
    cuts: dict[int, list[tuple[int, int]]] = {}
    for edit in edits:
        kind, line, start, end = (
            (edit.kind, edit.line, edit.start, edit.end) if isinstance(edit, Edit) else edit
        )
        if kind == "citation":
            cuts.setdefault(line, []).append((start, end))
        else:
            removed.add(line)
    starts = [0, *accumulate(map(len, text.splitlines(keepends=True)))]
    kept = []
    for index, raw in enumerate(text.splitlines()):
        if index in removed:
            continue
        line = raw.strip()
        offset = starts[index] + len(raw) - len(raw.lstrip())
        for start, end in sorted(cuts.get(index, []), reverse=True):
            line = line[: start - offset] + line[end - offset :]
        kept.append(line)
    return "\n".join(kept).strip()


# --- FineWeb ---------------------------------------------------------------------------------


def fineweb(
    split: SplitText, settings: FineWebSettings, stop_chars: tuple[str, ...]
) -> SuiteResult:
    text = split.text
    lines = [line for line in text.split("\n") if line.strip()]
    names = (
        "fineweb_line_punct_ratio",
        "fineweb_short_line_ratio",
        "fineweb_char_dup_ratio",
        "fineweb_list_ratio",
    )
    if not lines:
        return SuiteResult(dict.fromkeys(names), "fineweb.empty", None)
    n = len(lines)
    short = sum(1 for line in lines if len(line) <= settings.short_line_length)
    signals: dict[str, float | int | None] = dict(
        zip(
            names,
            (
                sum(1 for line in lines if line.endswith(stop_chars)) / n,
                short / n,
                _duplicates(lines)[1] / (len(text) - text.count("\n")),
                _ratio(text.count("\n"), len(split.words)),
            ),
            strict=True,
        )
    )
    punct = signals["fineweb_line_punct_ratio"]
    result = SuiteResult(signals)
    _first(
        result,
        "fineweb",
        [
            (
                "line_punct_ratio",
                names[0],
                _below(punct, settings.line_punct_thr)
                and not (punct == 0 and settings.line_punct_exclude_zero),
            ),
            ("short_line_ratio", names[1], _above(signals[names[1]], settings.short_line_thr)),
            ("char_dup_ratio", names[2], _above(signals[names[2]], settings.char_duplicates_ratio)),
            ("list_ratio", names[3], _above(signals[names[3]], settings.new_line_ratio)),
        ],
    )
    return result


# --- bad words -------------------------------------------------------------------------------


@dataclass(frozen=True)
class BadWords:
    """A compiled list: single words are looked up per word, phrases are searched for. With a
    segmenter, an entry is the words the segmenter makes of it, and a phrase matches those words
    in sequence: a Chinese entry of one character never matches inside a longer word."""

    words: frozenset[str]
    phrases: re.Pattern[str] | None
    segmenter: str | None = None

    @classmethod
    def from_list(cls, entries: frozenset[str], segmenter: str | None = None) -> BadWords:
        if segmenter is not None:
            return cls._segmented(entries, segmenter)
        phrases = sorted((e for e in entries if " " in e), key=len, reverse=True)
        alternatives = "|".join(r"\s+".join(map(re.escape, p.split())) for p in phrases)
        pattern = rf"(?<!\w)(?:{alternatives})(?!\w)"
        return cls(
            frozenset(e for e in entries if " " not in e), re.compile(pattern) if phrases else None
        )

    @classmethod
    def _segmented(cls, entries: frozenset[str], segmenter: str) -> BadWords:
        split = {entry: [w.lower() for w in split_text(entry, segmenter).words]
                 for entry in entries}
        phrases = sorted((_SEPARATOR.join(words) for words in split.values() if len(words) > 1),
                         key=len, reverse=True)
        pattern = "|".join(re.escape(_SEPARATOR + p + _SEPARATOR) for p in phrases)
        return cls(frozenset(words[0] for words in split.values() if len(words) == 1),
                   re.compile(f"(?=({pattern}))") if phrases else None, segmenter)

    def count(self, split: SplitText) -> int:
        # Words hold no whitespace, so one lower() of the joined words is a per-word lower().
        hits = sum(map(self.words.__contains__, " ".join(split.words).lower().split(" ")))
        if self.phrases is None:
            return hits
        if self.segmenter is None:
            return hits + sum(len(m.group().split())
                              for m in self.phrases.finditer(split.text.lower()))
        joined = _SEPARATOR + _SEPARATOR.join(split.words).lower() + _SEPARATOR
        return hits + sum(m.group(1).count(_SEPARATOR) - 1
                          for m in self.phrases.finditer(joined))


_SEPARATOR = "\x00"  # between segmented words: no word holds it


def bad_words(
    split: SplitText, settings: BadWordsSettings, words: BadWords, applies: bool
) -> SuiteResult:
    density = _ratio(words.count(split), len(split.words)) or 0.0
    result = SuiteResult({"bad_word_density": density})
    if settings.max_density is not None and not applies:
        result.skipped.append("bad_words.density")
    _first(
        result,
        "bad_words",
        [
            ("density", "bad_word_density", applies and _above(density, settings.max_density)),
        ],
    )
    return result


# --- annotate --------------------------------------------------------------------------------


# Signals that count things (or name a line); every other signal is a ratio.
INT_SIGNALS = frozenset(
    {
        "gopher_words",
        "gopher_stop_words",
        "c4_sentences",
        "c4_lines",
        "c4_lines_removed",
        "c4_lorem_ipsum_line",
        "c4_curly_bracket_line",
    }
) | INT_CODE_SIGNALS
EDIT_SCHEMA = pa.schema(
    [
        ("doc_index", pa.int64()),
        ("stage", pa.string()),
        ("kind", pa.string()),
        ("line", pa.int64()),
        ("start", pa.int64()),
        ("end", pa.int64()),
    ]
)


def signals_schema(signal_names: Iterable[str], suites: Iterable[str]) -> pa.Schema:
    """The signals table's columns: the signals, `keep`, `reason`, `value`, `keep_<suite>`."""
    fields = [(n, pa.int64() if n in INT_SIGNALS else pa.float64()) for n in signal_names]
    fields += [("keep", pa.bool_()), ("reason", pa.string()), ("value", pa.float64())]
    fields += [(f"keep_{suite}", pa.bool_()) for suite in suites]
    return pa.schema(fields)


@dataclass
class Annotations:
    """Per document, in input order: signals, the verdict and its first reason, per-suite
    verdicts; plus C4's edits and counts of drops and of rules skipped for language.
    Undefined signals (a ratio over zero words) are None."""

    signals: dict[str, list[Any]]
    keep: list[bool]
    reason: list[str | None]
    value: list[float | None]
    suite_keep: dict[str, list[bool]]
    suite_reason: dict[str, list[str | None]]
    edits: list[Edit]
    skipped: Counter[str]

    def __len__(self) -> int:
        return len(self.keep)

    @cached_property
    def drops(self) -> Counter[str]:
        """Documents per first dropping rule (overall)."""
        return Counter(r for r in self.reason if r is not None)

    @cached_property
    def suite_drops(self) -> Counter[str]:
        """Documents per rule that drops them within its suite (each suite on its own)."""
        return Counter(r for reasons in self.suite_reason.values() for r in reasons if r)

    def to_arrow(self) -> pa.Table:
        """One row per document (`signals_schema`); the same columns for every batch."""
        columns: dict[str, list[Any]] = {**self.signals, "keep": self.keep}
        columns |= {"reason": self.reason, "value": self.value}
        columns |= {f"keep_{suite}": verdicts for suite, verdicts in self.suite_keep.items()}
        schema = signals_schema(self.signals, self.suite_keep)
        return pa.table(columns, schema=schema)

    def edits_to_arrow(self) -> pa.Table:
        """One row per edit (`EDIT_SCHEMA`): `doc_index`, `stage`, `kind`, `line`, `start`,
        `end`."""
        columns = {name: [getattr(e, name) for e in self.edits] for name in EDIT_SCHEMA.names}
        return pa.table(columns, schema=EDIT_SCHEMA)


@dataclass(frozen=True)
class _LanguageSuites:
    """The settings for documents in one language, compiled once."""

    settings: HeuristicsSettings
    english: bool  # C4's English-only rules apply
    stop_words: frozenset[str]
    stop_words_apply: bool
    stop_chars: tuple[str, ...]
    bad_words: BadWords
    bad_words_apply: bool


class Annotator:
    """The settings compiled once; `annotate_one` runs every enabled suite on one document."""

    def __init__(self, settings: HeuristicsSettings) -> None:
        self.settings = settings
        self.english = frozenset(settings.english_only_languages)
        bw = settings.bad_words
        self._default_bad_words = BadWords.from_list(load_bad_words(bw.word_list))
        self.bad_word_languages = (
            self.english if bw.languages is None else frozenset(map(base_language, bw.languages))
        )
        self._languages: dict[str, _LanguageSuites] = {}
        self.suites = [name for name in SUITES if getattr(settings, name).enabled]
        # The signal columns, in order: those an empty document gets.
        self.suite_signals = {suite: list(result.signals)
                              for suite, result in self.annotate_one("", None).items()}
        self.signal_names = [n for names in self.suite_signals.values() for n in names]

    def language(self, lang: str) -> _LanguageSuites:
        """The compiled settings for a base language code such as "en"."""
        compiled = self._languages.get(lang)
        if compiled is None:
            compiled = self._languages[lang] = self._compile(lang)
        return compiled

    def _compile(self, lang: str) -> _LanguageSuites:
        settings = self.settings.for_language(lang)
        rules = self.settings.rules(lang)
        stop_chars = settings.fineweb.stop_chars
        english = lang in self.english
        bad_words, bad_words_apply = self._default_bad_words, lang in self.bad_word_languages
        if rules is not None and rules.bad_words_file is not None:
            entries = load_bad_words(LANGUAGES_DIR / rules.bad_words_file)
            bad_words, bad_words_apply = BadWords.from_list(entries, rules.segmenter), True
        return _LanguageSuites(
            settings=settings,
            english=english,
            stop_words=frozenset(settings.gopher_quality.stop_words),
            stop_words_apply=english or (rules is not None and rules.stop_words_given),
            stop_chars=tuple(sorted(TERMINAL_PUNCTUATION) if stop_chars is None else stop_chars),
            bad_words=bad_words,
            bad_words_apply=bad_words_apply,
        )

    def annotate_one(self, text: str, language: str | None) -> dict[str, SuiteResult]:
        return self.annotate_split(split_text(text, self.settings.segmenter(language)), language)

    def annotate_split(self, split: SplitText, language: str | None) -> dict[str, SuiteResult]:
        """Every enabled suite on a document already split (the split MinHash reuses) with
        `HeuristicsSettings.segmenter(language)`."""
        compiled = self.language(base_language(language))
        return {name: self.run_suite(name, split, compiled) for name in self.suites}

    @staticmethod
    def run_suite(suite: str, split: SplitText, compiled: _LanguageSuites) -> SuiteResult:
        """One suite on a split document under its language's settings."""
        s, c = compiled.settings, compiled
        if suite == "gopher_repetition":
            return gopher_repetition(split, s.gopher_repetition)
        if suite == "gopher_quality":
            return gopher_quality(split, s.gopher_quality, c.stop_words, c.stop_words_apply)
        if suite == "c4":
            return c4(split, s.c4, c.english)
        if suite == "fineweb":
            return fineweb(split, s.fineweb, c.stop_chars)
        if suite == "code":  # prose: the code suite does not apply
            return SuiteResult(dict.fromkeys(CODE_SIGNALS))
        return bad_words(split, s.bad_words, c.bad_words, c.bad_words_apply)

    def annotate_code(self, text: str, path: str) -> dict[str, SuiteResult]:
        """A code file: the code suite's signals and verdict; the prose suites' signals null
        and their verdicts true (they do not judge code)."""
        results = {suite: SuiteResult(dict.fromkeys(self.suite_signals[suite]))
                   for suite in self.suites}
        if "code" in results:
            results["code"] = code_suite(text, path, self.settings.code)
        return results


def annotate(
    docs: list[tuple[str, str]], settings: HeuristicsSettings | None = None
) -> Annotations:
    """Signals, verdicts and C4 edits for `(text, language)` documents, in order."""
    settings = settings or HeuristicsSettings()
    texts, languages = [text for text, _ in docs], [language for _, language in docs]
    return annotate_splits(split_documents(texts, languages, settings), languages, settings)


def split_documents(texts: list[str], languages: list[str | None],
                    settings: HeuristicsSettings) -> list[SplitText]:
    """Each text split with its language's segmenter (`HeuristicsSettings.segmenter`): the
    splits the suites and MinHash share."""
    return [split_text(text, settings.segmenter(language))
            for text, language in zip(texts, languages, strict=True)]


def annotate_splits(
    splits: list[SplitText], languages: list[str | None],
    settings: HeuristicsSettings | None = None,
) -> Annotations:
    """`annotate` for documents split once by the caller, who reuses the splits (MinHash)."""
    annotator = Annotator(settings or HeuristicsSettings())
    out = _empty(annotator)
    for index, (split, language) in enumerate(zip(splits, languages, strict=True)):
        _collect(out, index, annotator.annotate_split(split, language))
    return out


def _empty(annotator: Annotator) -> Annotations:
    return Annotations(
        signals={name: [] for name in annotator.signal_names},
        keep=[],
        reason=[],
        value=[],
        suite_keep={suite: [] for suite in annotator.suites},
        suite_reason={suite: [] for suite in annotator.suites},
        edits=[],
        skipped=Counter(),
    )


def annotate_code(texts: list[str], paths: list[str],
                  settings: HeuristicsSettings | None = None) -> Annotations:
    """`annotate` for code files (`Annotator.annotate_code`), `paths` naming their languages."""
    annotator = Annotator(settings or HeuristicsSettings())
    out = _empty(annotator)
    for index, (text, path) in enumerate(zip(texts, paths, strict=True)):
        _collect(out, index, annotator.annotate_code(text, path))
    return out


def code_suite(text: str, path: str, settings: CodeSettings) -> SuiteResult:
    """The code suite on one file (`curation.code`): StarCoder's and The Stack v2's rules."""
    result = SuiteResult(code_signals(text, path))
    _first(result, "code", code_checks(result.signals, settings))
    return result


def _collect(out: Annotations, index: int, results: dict[str, SuiteResult]) -> None:
    first: SuiteResult | None = None
    for suite, result in results.items():
        for name, value in result.signals.items():
            out.signals[name].append(value)
        out.suite_keep[suite].append(result.reason is None)
        out.suite_reason[suite].append(result.reason)
        out.skipped.update(result.skipped)
        out.edits.extend(Edit(index, suite, *edit) for edit in result.edits)
        if first is None and result.reason is not None:
            first = result
    out.keep.append(first is None)
    out.reason.append(first.reason if first else None)
    out.value.append(first.value if first else None)
