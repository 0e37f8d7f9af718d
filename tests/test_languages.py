"""Languages written without spaces: segmenters (`curation.segmenters`), per-language rules
(`curation/languages/`), and what they change in the heuristics and MinHash."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from pydantic import ValidationError

from curation import segmenters
from curation.heuristics import HeuristicsSettings, annotate
from curation.minhash import MinHashSettings, jaccard, shingle_hashes
from curation.text import split_text
from tests.conftest import require_shared_data

RULES_OFF = HeuristicsSettings(languages={"zh": None, "ja": None, "th": None})
UDHR = "evals/langid/nltk_udhr2.zip"
UDHR_FILES = {"en": "eng", "zh": "cmn_hans", "ja": "jpn", "th": "tha"}


@pytest.mark.parametrize(
    ("segmenter", "chunk", "words"),
    [
        ("jieba", "联合国大会通过了《世界人权宣言》。", ["通过", "世界人权宣言", "。"]),
        ("sudachi_a", "人権に関する宣言は、価格32,800円です。", ["人権", "宣言", "32,800", "円"]),
        ("thai_newmm", "ได้รับการรับรองจากสมัชชา", ["ได้รับ", "การ", "รับรอง"]),
    ],
)
def test_each_segmenter_splits_its_script(segmenter: str, chunk: str, words: list[str]) -> None:
    split = split_text(chunk, segmenter)
    assert "".join(split.words) == chunk  # the words spell the chunk
    assert set(words) <= set(split.words)
    assert split_text(chunk).words != split.words  # the English split does not see them


def test_latin_chunks_keep_the_english_split() -> None:
    split = split_text("日本語の文です。 Don't panic.", "sudachi_a")
    assert split.words[-4:] == ["Do", "n't", "panic", "."]
    assert split.chunk_sizes.tolist()[1:] == [2, 2]  # no word spans whitespace


def test_a_japanese_chunk_beyond_sudachis_limit_is_cut_first() -> None:
    sentence = "吾輩は猫である。"
    chunk = sentence * 3000  # 72,000 bytes: Sudachi alone refuses 49,149 or more
    words = split_text(chunk, "sudachi_a").words
    assert words == split_text(sentence, "sudachi_a").words * 3000
    no_stop = "猫" * 20_000  # no sentence end to cut after: cut at characters
    pieces = segmenters._byte_bounded(no_stop, 40_000)
    assert "".join(pieces) == no_stop
    assert all(len(piece.encode()) < 40_000 for piece in pieces) and len(pieces) == 2


def _udhr(shared: Path) -> dict[str, str]:
    with zipfile.ZipFile(shared / UDHR) as archive:
        return {lang: archive.read(f"udhr2/{name}.txt").decode("utf-8")
                for lang, name in UDHR_FILES.items()}


def test_real_text_keeps_like_english_with_its_rules_and_not_without() -> None:
    """The Universal Declaration of Human Rights in four languages, eight pages each of about
    four articles: the same text, so the same verdicts are right."""
    pages = []
    for lang, text in _udhr(require_shared_data()).items():
        paragraphs = [p for p in text.split("\n") if p.strip()][5:]  # past the preamble title
        size = -(-len(paragraphs) // 8)
        pages += [("\n".join(paragraphs[i:i + size]), lang)
                  for i in range(0, len(paragraphs), size)]
    langs = [lang for _, lang in pages]

    def kept(settings: HeuristicsSettings) -> dict[str, int]:
        keep = annotate(pages, settings).keep
        return {lang: sum(k for k, x in zip(keep, langs, strict=True) if x == lang)
                for lang in UDHR_FILES}

    with_rules, without = kept(HeuristicsSettings()), kept(RULES_OFF)
    assert with_rules["en"] >= 6
    for lang in ("zh", "ja", "th"):
        assert abs(with_rules[lang] - with_rules["en"]) <= 1, with_rules
        assert without[lang] == 0, without  # short_doc or word length: one "word" a line
    words = annotate(pages[8:24], HeuristicsSettings()).signals["gopher_mean_word_length"]
    assert all(1.0 <= length <= 6.0 for length in words)  # zh and ja: FineWeb-2's bounds


def test_the_stop_word_rule_applies_where_a_language_file_names_stop_words() -> None:
    nouns = " ".join(["東京", "大阪", "京都", "名古屋", "札幌", "福岡"] * 12)  # no particle
    with_particles = " ".join(["東京の", "大阪に", "京都を", "名古屋は", "札幌で", "福岡と"] * 12)
    ann = annotate([(nouns, "ja"), (with_particles, "ja")])
    assert ann.suite_reason["gopher_quality"] == ["gopher_quality.few_stop_words", None]
    assert ann.signals["gopher_stop_words"][1] >= 2
    off = annotate([(nouns, "ja")], RULES_OFF)
    assert off.skipped["gopher_quality.few_stop_words"] == 1


def test_c4_counts_segmented_words_per_line() -> None:
    line = "今日はとても良い天気なので公園まで歩いて行きました。"
    text = "\n".join([line] * 3 + ["ホーム"])
    with_rules = annotate([(text, "ja")]).edits
    assert [(e.kind, e.line) for e in with_rules] == [("too_few_words", 3)]
    without = annotate([(text, "ja")], RULES_OFF).edits  # one whitespace "word" a line
    assert [e.line for e in without if e.kind == "too_few_words"] == [0, 1, 2, 3]


def test_bad_words_match_whole_segmented_words_and_sequences() -> None:
    spam = "我喜欢看三级片。" * 40
    character = "他的性格很好，大家都喜欢他。" * 40  # 性 alone is not on the list
    ann = annotate([(spam, "zh"), (character, "zh")])
    density = ann.signals["bad_word_density"]
    assert density[0] == pytest.approx(1 / 5) and density[1] == 0.0
    assert ann.suite_reason["bad_words"] == ["bad_words.density", None]
    settings = HeuristicsSettings()
    phrase = "g スポット"  # on the Japanese list: two words once segmented
    japanese = annotate([(f"その{phrase.replace(' ', '')}について。" * 30, "ja")], settings)
    assert japanese.signals["bad_word_density"][0] > 0


def test_minhash_shingles_see_segmented_words() -> None:
    """A Chinese page with one sentence changed: with the English split every paragraph is one
    word and the two pages share almost no shingle."""
    sentences = ["今天的天气很好，我们一起去公园散步。", "公园里有很多人在跑步和打太极拳。",
                 "湖边的柳树已经发芽了，春天真的来了。", "我们在长椅上坐了一会儿，看孩子们放风筝。",
                 "中午我们在附近的小饭馆吃了面条。", "下午回家以后，我写了一篇关于春天的日记。"]
    changed = [*sentences[:3], "我们在草地上坐了一会儿，看老人们下象棋。", *sentences[4:]]
    a, b = "".join(sentences), "".join(changed)
    settings = MinHashSettings()
    segmented = jaccard(shingle_hashes(split_text(a, "jieba"), settings),
                        shingle_hashes(split_text(b, "jieba"), settings))
    english = jaccard(shingle_hashes(split_text(a), settings),
                      shingle_hashes(split_text(b), settings))
    assert segmented > 0.5 and english < 0.1


def test_language_rules_merge_over_the_files_and_are_validated() -> None:
    settings = HeuristicsSettings(
        languages={"ja": {"gopher_quality": {"max_avg_word_length": 5}}, "zh": None})
    ja = settings.for_language("ja").gopher_quality
    assert (ja.min_avg_word_length, ja.max_avg_word_length) == (1, 5)  # the file's, then mine
    assert settings.segmenter("ja") == "sudachi_a" and settings.segmenter("zh") is None
    assert settings.segmenter("zh_Hant") is None and HeuristicsSettings().segmenter("zh-TW")
    assert HeuristicsSettings.model_validate(settings.model_dump()) == settings
    # The stage's version holds the content of the word lists in use (zh's is switched off).
    assert set(settings.word_list_digests()) == {"bad_words_ja.txt", "bad_words_th.txt"}
    # A language's n-gram thresholds apply to the sizes the pipeline computes: same columns.
    fewer = HeuristicsSettings(gopher_repetition={"top_n_grams": {2: 0.3}, "dup_n_grams": {}})
    repetition = fewer.for_language("ja").gopher_repetition
    assert (repetition.top_n_grams, repetition.dup_n_grams) == ({2: 0.239}, {})
    assert fewer.for_language("ja").gopher_repetition.dup_line_frac == 0.328
    with pytest.raises(ValidationError, match="not a word list"):
        HeuristicsSettings(languages={"th": {"bad_words_file": "../pyproject.toml"}})
