"""The shared word split (`curation.text`) and the heuristic rule suites (`curation.heuristics`).

Expected tokens, sentence counts and verdicts below were produced by datatrove 0.10.1 with
spaCy 3.8 (`split_into_words`, `split_into_sentences` and its four filters with default
arguments), so these tests pin our fidelity to it.
"""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import pyarrow as pa
import pytest
from pydantic import ValidationError

from curation.heuristics import (
    SUITES,
    BadWordsSettings,
    C4Settings,
    GopherQualitySettings,
    GopherRepetitionSettings,
    HeuristicsSettings,
    annotate,
    apply_c4_edits,
)
from curation.text import count_sentences, split_text, split_words

SENTENCE = "The cat sat on the mat and looked at the bird with great interest."  # 14 words


def one(text: str, language: str = "en", settings: HeuristicsSettings | None = None):
    """Annotations of a single document."""
    return annotate([(text, language)], settings)


def suite_reason(text: str, suite: str, **kwargs) -> str | None:
    return one(text, **kwargs).suite_reason[suite][0]


# --- the word split --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("don't", ["do", "n't"]),
        ("(e.g.", ["(", "e.g."]),
        ("https://example.com/a-b?c=d", ["https://example.com/a-b?c=d"]),
        ("mail me: foo.bar@example.org!", ["mail", "me", ":", "foo.bar@example.org", "!"]),
        ("well-known", ["well", "-", "known"]),
        ("$5.00", ["$", "5.00"]),
        ("10km", ["10", "km"]),
        ("5pm", ["5", "pm"]),
        ("I'm", ["I", "'m"]),
        ("cannot", ["can", "not"]),
        ("Hi ):", ["Hi", "):"]),
        ("Hello, world!", ["Hello", ",", "world", "!"]),
        ("John's", ["John", "'s"]),
        ("3-4", ["3", "-", "4"]),
        ("user id", ["user", "i", "d"]),
        ("N.Y.,", ["N.Y.", ","]),
        ("U.S.A.", ["U.S.A."]),
        ("...and", ["...", "and"]),
        ("C++", ["C++"]),
        ("“Quoted”", ["“", "Quoted", "”"]),
        ("rock'n'roll", ["rock'n'roll"]),
        ("co-operate,", ["co", "-", "operate", ","]),
        ("#hashtag 100%", ["#", "hashtag", "100", "%"]),
        ("这是一个测试。这是第二句。", ["这是一个测试。这是第二句", "。"]),
        ("(ಠ_ಠ) ©2024", ["(ಠ_ಠ)", "©", "2024"]),
        ("Mr.Smith end.Start", ["Mr.", "Smith", "end", ".", "Start"]),
        ("  \n\t ", []),
    ],
)
def test_words_match_spacy(text: str, tokens: list[str]) -> None:
    assert split_words(text) == tokens
    assert split_text(text).words == tokens


@pytest.mark.parametrize(
    ("line", "sentences"),
    [
        ("Hello world. This is it.", 2),
        ("Hi... there", 1),
        ("A. B. C.", 1),  # "A." is a tokenizer exception, not a sentence end
        ('He said "Hi." Then left.', 2),
        ("Wait!? What?", 2),
        ("这是一个测试。这是第二句。", 1),
        ("No end", 1),
        ("Gap.  Then more", 2),  # a double space is a whitespace token
    ],
)
def test_sentences_match_spacy(line: str, sentences: int) -> None:
    assert count_sentences(line) == sentences
    assert split_text(line).line_sentences(0) == sentences


def test_split_shares_one_tokenisation() -> None:
    split = split_text("Don't stop.\nDon't stop.")
    assert split.lines == ["Don't stop.", "Don't stop."]
    assert split.words == ["Do", "n't", "stop", ".", "Do", "n't", "stop", "."]
    assert split.line_word_starts.tolist() == [0, 4, 8]
    hashes = split.word_hashes.tolist()
    assert hashes[:4] == hashes[4:] and len(set(hashes[:4])) == 4
    assert split.word_lengths.tolist() == [2, 3, 4, 1] * 2
    # The hashes are stable across processes (MinHash shingles rely on it).
    digest = hashlib.blake2b(b"stop", digest_size=7).digest()
    assert hashes[2] == int.from_bytes(digest, "little")


# --- empty, tiny and odd documents -----------------------------------------------------------


def test_empty_text_is_dropped_by_every_suite_with_null_signals() -> None:
    ann = one("")
    assert ann.suite_reason == {
        "gopher_repetition": ["gopher_repetition.empty"],
        "gopher_quality": ["gopher_quality.short_doc"],
        "c4": ["c4.too_few_sentences"],
        "fineweb": ["fineweb.empty"],
        "bad_words": [None],
        "code": [None],  # prose: the code suite does not judge it
    }
    assert ann.reason == ["gopher_repetition.empty"] and ann.keep == [False]
    row = ann.to_arrow().to_pylist()[0]
    assert row["gopher_mean_word_length"] is None and row["fineweb_line_punct_ratio"] is None
    assert row["gopher_words"] == 0 and row["bad_word_density"] == 0.0


def test_one_line_document() -> None:
    ann = one(SENTENCE)
    assert ann.suite_reason["gopher_quality"] == ["gopher_quality.short_doc"]
    # In one short line the first n-grams are the "most frequent" ones: "The cat sat on" is
    # 14 of 66 characters, above the 4-gram limit of 0.16 (2- and 3-grams stay below theirs).
    assert ann.suite_reason["gopher_repetition"] == ["gopher_repetition.top_4_gram_char_frac"]
    assert ann.value == [pytest.approx(14 / 66)] and ann.keep == [False]
    assert ann.suite_reason["c4"] == ["c4.too_few_sentences"]
    assert ann.signals["c4_sentences"] == [1]
    assert ann.suite_reason["fineweb"] == [None]


def test_only_symbols() -> None:
    ann = one("!!! ### ... --- ??? ***\n" * 30)
    assert ann.signals["gopher_words"] == [0]
    assert ann.suite_reason["gopher_quality"] == ["gopher_quality.short_doc"]
    # 29 of the 31 pieces of re.split("\n+") repeat (the last piece is the empty string).
    assert ann.suite_reason["gopher_repetition"] == ["gopher_repetition.dup_line_frac"]
    assert ann.value == [pytest.approx(29 / 31)]
    assert ann.suite_reason["fineweb"] == ["fineweb.line_punct_ratio"]


def test_cjk_without_its_language_rules_is_one_long_word_per_chunk() -> None:
    text = "这是一个没有空格的中文句子，用来测试分词。" * 10
    ann = one(text, language="zh", settings=HeuristicsSettings(languages={"zh": None}))
    assert ann.signals["gopher_words"] == [1]
    assert ann.suite_reason["gopher_quality"] == ["gopher_quality.short_doc"]
    # English-only rules are skipped, and counted, for Chinese.
    assert ann.skipped["gopher_quality.few_stop_words"] == 1
    assert ann.skipped["c4.too_few_sentences"] == 1
    assert ann.skipped["c4.no_terminal_punct"] == 1
    assert ann.skipped["bad_words.density"] == 1
    assert ann.suite_reason["c4"] == [None]


def test_very_long_lines_and_words() -> None:
    word = "x" * 1001
    text = "\n".join([f"{SENTENCE} {word}."] + [SENTENCE] * 5)
    ann = one(text)
    assert [(e.kind, e.line) for e in ann.edits] == [("too_long_word", 0)]
    assert ann.signals["c4_sentences"] == [5]
    at_limit = "\n".join([f"{'x' * 1000} {SENTENCE}"] + [SENTENCE] * 5)  # split() words
    assert one(at_limit).edits == []


# --- thresholds: datatrove's comparisons are strict ------------------------------------------


def _words_doc(n_words: int, stop_words: tuple[str, ...] = ("the", "and")) -> str:
    """`n_words` distinct words: the stop words, then four-letter words such as "bbbo"."""
    letters = "bcdfghjklmnpqrstvwxz"
    words = [a + b + c + "o" for a in letters for b in letters for c in letters]
    return " ".join([*stop_words, *words[: n_words - len(stop_words)]])


def test_gopher_short_doc_at_threshold() -> None:
    assert suite_reason(_words_doc(50), "gopher_quality") is None
    assert suite_reason(_words_doc(49), "gopher_quality") == "gopher_quality.short_doc"
    ann = one(_words_doc(49))
    assert ann.signals["gopher_words"] == [49]


def test_gopher_hash_ratio_at_threshold() -> None:
    base = _words_doc(90)  # 90 words; 10 "#" words make 100 words with a ratio of exactly 0.1
    assert one(base + " #" * 10).signals["gopher_hash_ratio"] == [0.1]
    assert suite_reason(base + " #" * 10, "gopher_quality") is None
    assert suite_reason(base + " #" * 11, "gopher_quality") == "gopher_quality.too_many_hashes"


def test_gopher_stop_words_and_mean_length_at_threshold() -> None:
    text = _words_doc(60)
    assert one(text).signals["gopher_stop_words"] == [2]
    assert suite_reason(text, "gopher_quality") is None
    one_stop = text.replace("the ", "zzz ", 1)
    assert suite_reason(one_stop, "gopher_quality") == "gopher_quality.few_stop_words"
    # Stop words are matched case-sensitively, as datatrove does.
    assert suite_reason(text.replace("the ", "The ", 1), "gopher_quality") == (
        "gopher_quality.few_stop_words"
    )
    short = " ".join(["the", "and"] + ["abc"] * 58)  # mean length exactly 3
    assert one(short).signals["gopher_mean_word_length"][0] == pytest.approx(3.0)
    assert suite_reason(short, "gopher_quality") is None
    shorter = " ".join(["the", "and"] + ["ab"] * 58)
    assert suite_reason(shorter, "gopher_quality") == "gopher_quality.below_avg_word_length"


def test_dup_line_frac_at_threshold() -> None:
    unique = [f"{SENTENCE[:-1]} number {'abcdefghij'[i]}." for i in range(7)]
    at = "\n".join(unique + [unique[0]] * 3)  # 3 duplicates of 10 lines: exactly 0.3
    ann = one(
        at,
        settings=HeuristicsSettings(
            gopher_repetition=GopherRepetitionSettings(
                dup_line_char_frac=None, dup_para_char_frac=None, top_n_grams={}, dup_n_grams={}
            )
        ),
    )
    assert ann.signals["dup_line_frac"] == [0.3]
    assert ann.suite_reason["gopher_repetition"] == [None]
    above = at + "\n" + unique[0]
    ann = one(
        above,
        settings=HeuristicsSettings(
            gopher_repetition=GopherRepetitionSettings(
                dup_line_char_frac=None, dup_para_char_frac=None, top_n_grams={}, dup_n_grams={}
            )
        ),
    )
    assert ann.suite_reason["gopher_repetition"] == ["gopher_repetition.dup_line_frac"]
    assert ann.value[0] == pytest.approx(4 / 11)


@pytest.mark.parametrize(
    ("text", "dup_chars", "top_chars"),
    [  # datatrove's find_all_duplicate (n = 5, 6, 7) and find_top_duplicate (n = 2, 3, 4)
        ("a b c d e a b c d e a b c d e", [10, 6, 7], [9, 15, 21]),
        (
            "one two three four five six one two three four five six seven one two three four five",
            [38, 22, 0],
            [21, 39, 54],
        ),
        ("x y x y x y x y x y x y", [10, 6, 7], [18, 25, 35]),
    ],
)
def test_ngram_repetition_matches_datatrove(
    text: str, dup_chars: list[int], top_chars: list[int]
) -> None:
    signals = one(text).signals
    for n, chars in zip((5, 6, 7), dup_chars, strict=True):
        assert signals[f"dup_{n}_gram_char_frac"] == [chars / len(text)]
    for n, chars in zip((2, 3, 4), top_chars, strict=True):
        assert signals[f"top_{n}_gram_char_frac"] == [chars / len(text)]


def test_fineweb_line_punct_ratio_at_threshold() -> None:
    lines = [f"{SENTENCE}"] * 3 + [f"heading number {i} without a stop" for i in range(22)]
    text = "\n".join(lines)  # 3 of 25 lines end with a stop: exactly 0.12
    ann = one(text)
    assert ann.signals["fineweb_line_punct_ratio"] == [0.12]
    assert ann.suite_reason["fineweb"][0] != "fineweb.line_punct_ratio"
    fewer = "\n".join(lines[1:] + ["one more line without a stop"])
    assert suite_reason(fewer, "fineweb") == "fineweb.line_punct_ratio"


# --- C4 --------------------------------------------------------------------------------------


def test_c4_line_edits_and_citations() -> None:
    text = "\n".join(
        [
            "Menu",  # 0: no terminal punctuation
            "Please enable JavaScript to view the comments.",  # 1: javascript
            "By using this site you accept our privacy policy.",  # 2: policy
            "Two words.",  # 3: too few words
            f"  {SENTENCE[:-1]}[1] and more.[citation needed]",  # 4: kept, two citations cut
            *[SENTENCE] * 4,
        ]
    )
    ann = one(text)
    kinds = [(e.kind, e.line) for e in ann.edits]
    assert kinds == [
        ("no_terminal_punct", 0),
        ("javascript", 1),
        ("policy", 2),
        ("too_few_words", 3),
        ("citation", 4),
        ("citation", 4),
    ]
    assert all(e.stage == "c4" and e.doc_index == 0 for e in ann.edits)
    cite = ann.edits[4]
    assert text[cite.start : cite.end] == "[1]"
    assert ann.suite_reason["c4"] == [None] and ann.signals["c4_sentences"] == [5]
    assert apply_c4_edits(text, ann.edits) == "\n".join(
        [f"{SENTENCE[:-1]} and more."] + [SENTENCE] * 4
    )
    table = ann.edits_to_arrow()
    assert table.column_names == ["doc_index", "stage", "kind", "line", "start", "end"]
    assert table.num_rows == 6


def test_c4_citation_cut_then_terminal_punctuation() -> None:
    # datatrove strips the line, then cuts citations: "... end. [2]" ends with a space.
    text = "\n".join([f"{SENTENCE} [2]"] + [SENTENCE] * 5)
    ann = one(text)
    assert [(e.kind, e.line) for e in ann.edits] == [("no_terminal_punct", 0)]


def test_c4_document_rules_in_line_order() -> None:
    body = [SENTENCE] * 5
    lorem_then_curly = "\n".join(body + ["Lorem ipsum dolor sit amet.", "A {brace} here too."])
    ann = one(lorem_then_curly)
    assert ann.suite_reason["c4"] == ["c4.lorem_ipsum"] and ann.suite_drops["c4.lorem_ipsum"] == 1
    assert ann.signals["c4_lorem_ipsum_line"] == [5] and ann.signals["c4_curly_bracket_line"] == [6]
    curly_first = "\n".join(body + ["A {brace} here too.", "Lorem ipsum dolor sit amet."])
    assert suite_reason(curly_first, "c4") == "c4.curly_bracket"
    # A javascript line is removed before the curly bracket is looked for.
    js_curly = "\n".join(body + ["Enable javascript {now} please."])
    assert suite_reason(js_curly, "c4") is None
    # A brace on a line that is removed anyway does not count.
    assert suite_reason("\n".join(body + ["{ code"]), "c4") is None


def test_c4_settings_switch_rules_off() -> None:
    text = "\n".join(["Heading"] + [SENTENCE] * 5 + ["A {brace} here."])
    settings = HeuristicsSettings(
        c4=C4Settings(filter_curly_bracket=False, filter_no_terminal_punct=False)
    )
    ann = one(text, settings=settings)
    assert ann.suite_reason["c4"] == [None]
    assert [(e.kind, e.line) for e in ann.edits] == [("too_few_words", 0)]


# --- bad words, languages, settings, tables --------------------------------------------------


def test_bad_word_density_and_custom_list(tmp_path: Path) -> None:
    text = " ".join(["casino"] * 3 + ["word"] * 17)
    ann = one(text)
    assert ann.signals["bad_word_density"] == [0.15]
    assert ann.suite_reason["bad_words"] == ["bad_words.density"]
    words = tmp_path / "words.txt"
    words.write_text("# my list\nWord\nfree money\n", encoding="utf-8")
    only_bad_words = {suite: {"enabled": False} for suite in SUITES if suite != "bad_words"}
    custom = HeuristicsSettings(
        bad_words=BadWordsSettings(word_list=str(words), max_density=0.5), **only_bad_words
    )
    ann = one("word word free  money other", settings=custom)
    assert ann.signals["bad_word_density"] == [pytest.approx(4 / 5)]
    assert ann.suite_reason["bad_words"] == ["bad_words.density"]
    assert ann.value == [pytest.approx(0.8)]


def test_languages_gate_english_rules_only() -> None:
    text = _words_doc(60).replace("the ", "zzz ").replace("and ", "yyy ")
    assert suite_reason(text, "gopher_quality") == "gopher_quality.few_stop_words"
    ann = annotate([(text, "de"), (text, "en_US"), (text, "EN")])
    # "en_US" and "EN" are English; German is not, so its stop-word rule is skipped.
    few = "gopher_quality.few_stop_words"
    assert ann.suite_reason["gopher_quality"] == [None, few, few]
    assert ann.skipped["gopher_quality.few_stop_words"] == 1
    german = HeuristicsSettings(english_only_languages=["en", "de"])
    assert suite_reason(text, "gopher_quality", language="de", settings=german) == (
        "gopher_quality.few_stop_words"
    )


def test_settings_are_strict_frozen_and_switchable() -> None:
    with pytest.raises(ValidationError):
        GopherQualitySettings(min_doc_word=50)
    with pytest.raises(ValidationError):
        GopherQualitySettings(min_doc_words=-1)
    settings = HeuristicsSettings()
    with pytest.raises(ValidationError):
        settings.english_only_languages = ["de"]  # type: ignore[misc]
    assert settings.gopher_repetition.dup_n_grams[10] == 0.10
    off = HeuristicsSettings(
        gopher_quality=GopherQualitySettings(min_doc_words=None), fineweb={"enabled": False}
    )
    ann = one(SENTENCE, settings=off)
    assert "fineweb" not in ann.suite_keep and "fineweb_line_punct_ratio" not in ann.signals
    assert ann.suite_reason["gopher_quality"] == [None]


# --- Gopher's alpha-word rule: datatrove's token words or the paper's whitespace words -------

# Dialogue: every quote mark, comma and full stop is a letterless spaCy token, while each
# whitespace word ("Lizzy.", '"No,"') holds a letter.
DIALOGUE = "\n".join([
    "Jane came down to breakfast late, and found her sister already at the window.",
    '"Are you going to the ball tonight?" asked Jane.',
    '"No," said Lizzy. "I have letters to write."',
    '"Letters? To whom?"',
    '"To my aunt, and to the Collinses."',
    '"You are too good to them, Lizzy."',
    '"Perhaps. But I promised, and a promise is a promise."',
    "Jane laughed and took her seat by the fire with the rest of the family.",
    '"Then I shall go alone," said Jane, "and tell you all about it."',
    '"Do," said Lizzy, smiling. "I want to hear everything."',
    '"Even about Mr. Darcy?"',
    '"Especially about him, if he dances with anyone at all."',
])


def _alpha(text: str) -> tuple[float | None, float | None]:
    """(datatrove's ratio, the paper's ratio) of one document."""
    signals = one(text).signals
    return (signals["gopher_alpha_words_frac"][0],
            signals["gopher_alpha_words_frac_whitespace"][0])


def _has_letter(word: str) -> bool:
    return any(ch.isalpha() for ch in word)


@pytest.mark.parametrize(
    ("text", "datatrove", "paper"),
    [
        # " Yes , " said she . : 3 of 7 tokens have a letter; every whitespace word has one.
        ('"Yes," said she.', 3 / 7, 1.0),
        # Score : 3 - 1 ( 2 - 0 ) . : one token of 11; "Score:" of three whitespace words.
        ("Score: 3-1 (2-0).", 1 / 11, 1 / 3),
        ("don't stop -- 42", 3 / 5, 2 / 4),
        ("", None, None),
        ("   \n ", None, None),
    ],
)
def test_alpha_word_counts_on_small_strings(text: str, datatrove: float | None,
                                            paper: float | None) -> None:
    assert _alpha(text) == (pytest.approx(datatrove), pytest.approx(paper))
    # Each definition spelled out directly, on the words it counts.
    tokens, words = split_words(text), text.split()
    if tokens:
        assert _alpha(text)[0] == pytest.approx(sum(map(_has_letter, tokens)) / len(tokens))
    if words:
        assert _alpha(text)[1] == pytest.approx(sum(map(_has_letter, words)) / len(words))


@pytest.mark.parametrize("text", [
    DIALOGUE,
    "Visit https://example.com/a-b?c=d now!!! 10km, 5pm; $5.00 (e.g. this).",
    "这是中文。 日本語の文 123 ４５６ émigré naïve — «citation» 🙂 ★★★",
    "ROMEO:\nBut, soft! what light through yonder window breaks?\nJULIET:\nAy me!",
])
def test_whitespace_ratio_is_the_share_of_whitespace_words_with_a_letter(text: str) -> None:
    words = text.split()
    assert _alpha(text)[1] == pytest.approx(sum(map(_has_letter, words)) / len(words))


def test_dialogue_is_dropped_by_datatrove_words_and_kept_by_the_papers() -> None:
    datatrove, paper = _alpha(DIALOGUE)
    assert datatrove < 0.8 <= paper
    default = one(DIALOGUE)
    assert default.reason == ["gopher_quality.below_alpha_threshold"]
    assert default.value == [pytest.approx(datatrove)] and default.keep == [False]
    settings = HeuristicsSettings(gopher_quality=GopherQualitySettings(alpha_words="gopher_paper"))
    assert settings.gopher_quality.alpha_signal == "gopher_alpha_words_frac_whitespace"
    papers = one(DIALOGUE, settings=settings)
    assert papers.keep == [True] and papers.suite_reason["gopher_quality"] == [None]
    # Both ratios are stored under either setting (a recipe re-thresholds either).
    assert papers.signals == default.signals
    # The paper's threshold still drops text whose whitespace words lack letters.
    scores = "\n".join(["Manchester 3-1 Tottenham, Liverpool 2-0 Everton, Newcastle 1-1 "
                        "Brighton."] * 8)
    assert one(scores, settings=settings).suite_reason["gopher_quality"] == [
        "gopher_quality.below_alpha_threshold"]


def test_the_alpha_word_setting_is_validated() -> None:
    with pytest.raises(ValidationError, match="gopher_quality.alpha_words"):
        HeuristicsSettings.model_validate({"gopher_quality": {"alpha_words": "whitespace"}})


def test_dialogue_heavy_fiction_from_the_books(shared_data: Path) -> None:
    """A chapter of dialogue from A Room with a View: datatrove's words drop it, the paper's
    keep it."""
    raw = (shared_data / "sources/books_gutenberg/pg2641.txt").read_bytes().decode("cp1252")
    text = raw.replace("\r\n", "\n")
    start = text.index("\nChapter I\n")  # the chapter, not the table of contents
    chapter = text[start:text.index("\nChapter II\n", start)]
    assert chapter.count("“") > 100  # dialogue-heavy
    datatrove, paper = _alpha(chapter)
    assert datatrove < 0.8 <= paper
    settings = HeuristicsSettings(gopher_quality=GopherQualitySettings(alpha_words="gopher_paper"))
    assert one(chapter).suite_reason["gopher_quality"] == ["gopher_quality.below_alpha_threshold"]
    assert one(chapter, settings=settings).suite_reason["gopher_quality"] == [None]


def test_annotations_to_arrow_and_counts() -> None:
    docs = [("", "en"), ("\n".join([SENTENCE] * 6), "en"), (_words_doc(80) + ".", "en")]
    ann = annotate(docs)
    table = ann.to_arrow()
    assert table.num_rows == 3 and len(ann) == 3
    for name in (
        "keep",
        "reason",
        "value",
        "keep_c4",
        "gopher_words",
        "top_2_gram_char_frac",
        "dup_10_gram_char_frac",
        "c4_sentences",
        "fineweb_list_ratio",
        "bad_word_density",
    ):
        assert name in table.column_names
    assert table.schema.field("gopher_words").type == pa.int64()
    assert table.schema.field("dup_line_frac").type == pa.float64()
    # Every batch has the same columns, an empty one and one of undefined signals included.
    assert annotate([]).to_arrow().schema == table.schema
    assert annotate([("", "en")]).to_arrow().schema == table.schema
    assert table.column("reason").to_pylist() == [
        "gopher_repetition.empty",
        "gopher_repetition.dup_line_frac",
        "c4.too_few_sentences",
    ]
    assert table.column("keep").to_pylist() == [False, False, False]
    assert ann.drops == {
        "gopher_repetition.empty": 1,
        "gopher_repetition.dup_line_frac": 1,
        "c4.too_few_sentences": 1,
    }
    assert ann.edits_to_arrow().num_rows == len(ann.edits) == 0


# --- real extracted text ---------------------------------------------------------------------

# (page, spaCy word count, datatrove's verdict per suite, sha256[:16] of datatrove's C4 text)
REAL_PAGES = [
    (
        "042bb7b5fedab6eac7db576522b89b93904c237d344bcbe14a6a5ab7f7335856",
        83,
        {"gopher_quality": "gopher_quality.too_many_end_ellipsis"},
        "88517e709a86c023",
    ),
    (
        "04a6711caa7c687592777718866e781e976e0fe684faebe8b3cedcef8cd0ea34",
        1112,
        {},
        "49e842507e729d73",
    ),
    (
        "0d46122928b6f468cc4bbc694051d0dbae5702bc75a16dab82a99b58daf150a0",
        1061,
        {"gopher_quality": "gopher_quality.below_alpha_threshold"},
        "9ba2bc208dd81605",
    ),
    (
        "0dd1357045727799a447563fd8851f4ebe79f042073ea16991a9b67aa595f81a",
        211,
        {"fineweb": "fineweb.char_dup_ratio"},
        "0fdce26ad5b8600b",
    ),
    (
        "0ec95c7261d122f304728e90c983450ef1ce1e0b423546835c397d50aaf0d0f2",
        685,
        {"gopher_quality": "gopher_quality.few_stop_words", "fineweb": "fineweb.line_punct_ratio"},
        "b68711ba12130057",
    ),
    (
        "11ea381ad92b5448cf66eae62f52ac565361a244c8881615fc6a7bb523cc0c32",
        755,
        {
            "gopher_quality": "gopher_quality.below_alpha_threshold",
            "c4": "c4.too_few_sentences",
            "fineweb": "fineweb.line_punct_ratio",
        },
        None,
    ),
    (
        "23aaecd14171f96cfd201a8a46666097e286ad71f74f29347a78c5ecba50da1e",
        368,
        {"gopher_quality": "gopher_quality.few_stop_words"},
        "82f23ba2cac8653a",
    ),
    (
        "34a7328535ad4e60b059f81d37eec5d25c2bc8de759ce9a7b5e47ac7dc6fd1b0",
        110,
        {"c4": "c4.too_few_sentences"},
        None,
    ),
    (
        "3c6d3381ef52ca26be2fbde19c1b0fe17d85682b726dfecf5e300c1ca34546b1",
        9854,
        {
            "gopher_quality": "gopher_quality.below_alpha_threshold",
            "fineweb": "fineweb.char_dup_ratio",
        },
        "fe1cff1e14e837dc",
    ),
]
REAL_SOURCES = [
    ("high_quality_wiki_reference.txt", 12558, {}, "5ef04959d982c12f"),
    ("moby_extracted.txt", 129, {"c4": "c4.too_few_sentences"}, None),
]


def _check_against_datatrove(text: str, words: int, reasons: dict, c4_sha: str | None) -> None:
    ann = one(text)
    assert len(split_text(text).words) == words
    for suite in ("gopher_repetition", "gopher_quality", "c4", "fineweb"):
        assert ann.suite_reason[suite] == [reasons.get(suite)], suite
    if c4_sha is not None:
        c4_text = apply_c4_edits(text, ann.edits)
        assert hashlib.sha256(c4_text.encode()).hexdigest()[:16] == c4_sha


@pytest.mark.parametrize(
    ("page", "words", "reasons", "c4_sha"), REAL_PAGES, ids=[p[0][:8] for p in REAL_PAGES]
)
def test_real_pages_match_datatrove(
    shared_data: Path, page: str, words: int, reasons: dict, c4_sha: str | None
) -> None:
    import trafilatura

    path = shared_data / "html_extraction/article-extraction-benchmark/html" / f"{page}.html.gz"
    html = gzip.decompress(path.read_bytes()).decode("utf-8", "replace")
    text = trafilatura.extract(html, favor_precision=True, include_comments=False)
    _check_against_datatrove(text, words, reasons, c4_sha)


@pytest.mark.parametrize(
    ("name", "words", "reasons", "c4_sha"), REAL_SOURCES, ids=[s[0] for s in REAL_SOURCES]
)
def test_real_sources_match_datatrove(
    shared_data: Path, name: str, words: int, reasons: dict, c4_sha: str | None
) -> None:
    text = (shared_data / "sources/misc_fixtures_cs336" / name).read_text(encoding="utf-8")
    _check_against_datatrove(text, words, reasons, c4_sha)
