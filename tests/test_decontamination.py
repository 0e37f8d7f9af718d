"""Benchmark decontamination: the eval loaders (`curation.evals`), the n-gram index and scanner
and the independent re-scan (`curation.decontamination`), on the real eval files and real
book and Wikipedia text of ../shared/data."""

from __future__ import annotations

import json
import random
import re
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from curation.decontamination import (
    DecontaminationSettings,
    EvalIndex,
    Hit,
    ResidualMatcher,
    build_index,
    hits_table,
    index_metadata,
    normalise_words,
    scan,
    suite_hash,
    token_hash,
    word_hashes,
)
from curation.evals import (
    EvalBenchmark,
    EvalItem,
    content_hash,
    load_benchmark,
    load_benchmarks,
    read_benchmark_list,
)
from curation.storage import parquet_bytes
from tests.conftest import REPO

# The example configuration of the llm-foundry export in ../shared/data/evals.
EVALS_EXAMPLE = REPO / "examples" / "llm_foundry_evals.yaml"

NGRAM = 13

# Record counts of PROVENANCE.md (MMLU: 12,508 test + 285 dev questions).
COUNTS = {
    "gsm8k": 1319,
    "humaneval": 164,
    "mmlu": 12793,
    "arc_easy": 2376,
    "arc_challenge": 1172,
    "piqa": 1838,
    "openbookqa": 500,
    "commonsense_qa": 1221,
    "siqa": 1954,
    "copa": 100,
    "boolq": 3270,
    "lambada_openai": 5153,
    "jeopardy": 2117,
    "winogrande": 1267,
    "triviaqa": 3000,
}

# (item id, text it must hold (the prompt's end and the gold answer), text it must not hold (a
# wrong choice, or the harness's template labels)), read off the files by hand.
FIRST_ITEMS = {
    "gsm8k": ("test:1", ["at the farmers' market?", "#### 18"], ["Question:"]),
    "humaneval": (
        "HumanEval:1",
        ["def has_close_elements(", "for idx, elem in enumerate(numbers):"],
        ["METADATA"],
    ),
    "mmlu": (
        "dev/abstract_algebra_dev:1",
        ["Find all c in Z_3 such that Z_3[x]/(x^2 + c) is a field.\n1"],
        ["\n0", "\n2", "\n3"],
    ),
    "arc_easy": (
        "arc_easy:1",
        ["foundation of most food webs?", "Sunlight is the source of energy"],
        ["Question:", "Most ecosystems are found on land"],
    ),
    "arc_challenge": (
        "arc_challenge:1",
        ["increase in rotation?", "Planetary days will become shorter."],
        ["Planetary density", "Question:"],
    ),
    "piqa": (
        "piqa:1",
        ["new occupants?", "ripped paper strips"],
        ["ripped jeans", "Question:"],
    ),
    "openbookqa": ("openbook_qa:1", ["save money is to", "quit eating lunch out"], ["monopoly"]),
    "commonsense_qa": (
        "commonsense_qa:1",
        ["security measure at a what?", "\nbank"],
        ["department store", "Choices:", "Answer:"],
    ),
    "siqa": (
        "siqa:1",
        ["resisted Riley's attacks.", "Find somewhere to go"],
        ["make a new plan", "Context:", "Question:"],
    ),
    "copa": ("copa:1", ["turned on the faucet", "water flowed from the spout."], ["toilet"]),
    "boolq": (
        "boolq:1",
        ["All biomass goes through", "does ethanol take more energy make that produces?\nno"],
        ["Passage:", "yes"],
    ),
    "lambada_openai": ("lambada_openai:1", ["I don't care about signs"], []),
    "jeopardy": ("jeopardy_all:1", ["South Pole & back", "Admiral Richard Byrd"], []),
    "winogrande": (
        "winogrande:1",
        ["Sarah was a much better surgeon than Maria so Maria always got the easier cases."],
        ["so Sarah"],
    ),
    "triviaqa": ("triviaqa_sm_sub:1", ["types of which vegetable?", "Onion"], ["Answer:"]),
}


# --- fixtures: the real evals and real clean text ---------------------------------------------


@pytest.fixture(scope="session")
def evals_dir(shared_data: Path) -> Path:
    return shared_data / "evals"


@pytest.fixture(scope="session")
def specs(evals_dir: Path) -> dict[str, EvalBenchmark]:
    return {spec.name: spec for spec in read_benchmark_list(EVALS_EXAMPLE, evals_dir)}


@pytest.fixture(scope="session")
def items(specs: dict[str, EvalBenchmark]) -> list[EvalItem]:
    return load_benchmarks(list(specs.values()))


@pytest.fixture(scope="session")
def index(items: list[EvalItem]) -> EvalIndex:
    return build_index(items, NGRAM)


@pytest.fixture(scope="session")
def clean_docs(shared_data: Path) -> list[str]:
    """The Gutenberg books cut into ~1,000-word documents, and the WikiText articles."""
    return book_documents(shared_data) + wiki_articles(shared_data)


_GUTENBERG_BODY = re.compile(r"\*\*\* START OF .*?\*\*\*(.*?)\*\*\* END OF ", re.DOTALL)
_WIKI_TITLE = re.compile(r"^ = [^=].* = $", re.MULTILINE)


def book_documents(shared_data: Path, words: int = 1000) -> list[str]:
    docs = []
    for path in sorted((shared_data / "sources/books_gutenberg").glob("pg*.txt")):
        text = path.read_bytes().decode("cp1252").replace("\r\n", "\n")  # PROVENANCE: cp1252
        match = _GUTENBERG_BODY.search(text)
        current: list[str] = []
        for paragraph in (match.group(1) if match else text).split("\n\n"):
            current.append(paragraph)
            if sum(len(p.split()) for p in current) >= words:
                docs.append("\n\n".join(current).strip())
                current = []
    return docs


def wiki_articles(shared_data: Path) -> list[str]:
    raw = (shared_data / "sources/wikipedia/wikitext-2-raw_wiki.test.raw").read_bytes()
    text = raw.decode("utf-8").replace("\r\n", "\n")
    return [a.strip() for a in _WIKI_TITLE.split(text) if len(a.split()) >= 50]


def plant(base: str, insert: str, where: float = 0.5) -> tuple[str, int]:
    """`insert` put between two paragraphs (or words) of `base`; the document and the
    insert's offset."""
    cut = base.find("\n\n", int(len(base) * where))
    cut = base.find(" ", int(len(base) * where)) if cut < 0 else cut
    cut = len(base) if cut < 0 else cut
    prefix = base[:cut] + "\n\n"
    return prefix + insert + "\n\n" + base[cut:], len(prefix)


def by_benchmark(items: list[EvalItem]) -> dict[str, list[EvalItem]]:
    grouped: dict[str, list[EvalItem]] = {}
    for item in items:
        grouped.setdefault(item.benchmark, []).append(item)
    return grouped


def hits_of(hits: list[Hit], doc: int, item: EvalItem) -> list[Hit]:
    return [
        h for h in hits if (h.doc, h.benchmark, h.item_id) == (doc, item.benchmark, item.item_id)
    ]


# --- settings ---------------------------------------------------------------------------------


def test_settings_defaults_and_validation() -> None:
    settings = DecontaminationSettings()
    assert (settings.ngram, settings.min_hits, settings.benchmarks) == (13, 1, [])
    with pytest.raises(ValidationError):
        settings.ngram = 8  # frozen: settings are hashed into versions
    for bad in ({"ngram": 0}, {"min_hits": 0}, {"ngram": 65}, {"n": 13}):
        with pytest.raises(ValidationError):
            DecontaminationSettings(**bad)


def test_text_field_is_required_exactly_for_the_text_layout() -> None:
    EvalBenchmark(name="x", path="x.jsonl", layout="text", text_field="body")
    with pytest.raises(ValidationError, match="text_field is required for layout 'text'"):
        EvalBenchmark(name="x", path="x.jsonl", layout="text")
    with pytest.raises(ValidationError, match="not allowed for layout 'gsm8k'"):
        EvalBenchmark(name="x", path="x.jsonl", layout="gsm8k", text_field="question")
    with pytest.raises(ValidationError):
        EvalBenchmark(name="x", path="x.jsonl", layout="csv")


# --- loaders ----------------------------------------------------------------------------------


def test_the_example_configuration_lists_every_benchmark_of_the_folder(
    specs: dict[str, EvalBenchmark]
) -> None:
    assert list(specs) == list(COUNTS)


@pytest.mark.parametrize("name", list(COUNTS))
def test_every_benchmark_loads_with_its_gold_answer(
    specs: dict[str, EvalBenchmark], name: str
) -> None:
    loaded = load_benchmark(specs[name])
    assert len(loaded) == COUNTS[name]
    assert len({i.item_id for i in loaded}) == len(loaded)
    assert all(i.benchmark == name and len(normalise_words(i.text)) >= 3 for i in loaded)
    item_id, present, absent = FIRST_ITEMS[name]
    first = next(i for i in loaded if i.item_id == item_id)
    for text in present:
        assert text in first.text, (text, first.text)
    for text in absent:
        assert text not in first.text, (text, first.text)


def test_mmlu_ids_name_split_and_subject(items: list[EvalItem]) -> None:
    ids = {i.item_id for i in items if i.benchmark == "mmlu"}
    assert "test/anatomy_test:1" in ids and "dev/anatomy_dev:5" in ids
    assert "dev/anatomy_dev:6" not in ids  # five few-shot questions per subject
    anatomy = next(i for i in items if i.item_id == "test/anatomy_test:1")
    assert anatomy.text.endswith("ipsilateral\nparalysis of the facial muscles.")  # answer 0


def test_folder_glob_and_text_layouts(evals_dir: Path, tmp_path: Path) -> None:
    dev = load_benchmark(
        EvalBenchmark(name="mmlu", path="mmlu/dev/*.csv", layout="mmlu"), evals_dir
    )
    assert len(dev) == 285 and dev[0].item_id == "abstract_algebra_dev:1"
    lines = [json.dumps({"body": f"text number {i}", "other": i}) for i in range(3)]
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "part.jsonl").write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    spec = EvalBenchmark(name="plain", path="plain", layout="text", text_field="body")
    assert load_benchmark(spec, tmp_path) == [
        EvalItem("plain", f"part:{i + 1}", f"text number {i}") for i in range(3)
    ]
    with pytest.raises(FileNotFoundError, match="no files at"):
        load_benchmark(EvalBenchmark(name="x", path="nowhere/*.jsonl", layout="gsm8k"), tmp_path)


@pytest.mark.parametrize(
    ("name", "edit", "message"),
    [
        ("arc_easy", lambda r: r.pop("gold"), r"arc_easy\.jsonl: line 2: missing field 'gold'"),
        ("arc_easy", lambda r: r.update(gold=7), r"line 2: field 'gold' = 7 is out of range"),
        ("gsm8k", lambda r: r.update(answer=18), r"line 2: field 'answer' has type int"),
        ("winogrande", lambda r: r.pop("continuation"), r"line 2: missing field 'continuation'"),
        ("triviaqa", lambda r: r.pop("context"), r"line 2: missing field 'context'"),
        ("lambada_openai", None, r"line 2: not valid JSON"),
    ],
)
def test_a_malformed_record_names_file_line_and_field(
    specs: dict[str, EvalBenchmark], tmp_path: Path, name: str, edit, message: str
) -> None:
    spec = specs[name]
    lines = Path(spec.path).read_text(encoding="utf-8").splitlines()[:3]
    if edit is None:
        lines[1] = lines[1][:-5]
    else:
        record = json.loads(lines[1])
        edit(record)
        lines[1] = json.dumps(record)
    bad = tmp_path / Path(spec.path).name
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        load_benchmark(spec.model_copy(update={"path": str(bad)}))


def test_a_short_mmlu_row_names_its_row(evals_dir: Path, tmp_path: Path) -> None:
    rows = (evals_dir / "mmlu/dev/anatomy_dev.csv").read_text(encoding="utf-8").splitlines()
    rows[2] = rows[2].rsplit(",", 2)[0]  # drop choice3 and answer of the second question
    (tmp_path / "anatomy_dev.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    spec = EvalBenchmark(name="mmlu", path=str(tmp_path), layout="mmlu")
    with pytest.raises(ValueError, match=r"anatomy_dev\.csv: row 2: missing field 'choice3'"):
        load_benchmark(spec)


def test_content_hash_covers_bytes_and_settings_not_location(
    evals_dir: Path, tmp_path: Path
) -> None:
    for copy in ("a", "b"):
        shutil.copytree(evals_dir / "copa", tmp_path / copy / "copa")
    spec = [EvalBenchmark(name="copa", path="copa/copa.jsonl", layout="query_choices_gold")]
    settings = DecontaminationSettings(benchmarks=spec)
    first = suite_hash(settings, tmp_path / "a")
    assert first == suite_hash(settings, tmp_path / "b")  # moved folder, same version
    assert first != suite_hash(settings.model_copy(update={"ngram": 8}), tmp_path / "a")
    assert first == suite_hash(settings.model_copy(update={"min_hits": 3}), tmp_path / "a")
    path = tmp_path / "b" / "copa" / "copa.jsonl"
    path.write_bytes(path.read_bytes().replace(b"faucet", b"faucets", 1))
    assert first != suite_hash(settings, tmp_path / "b")
    assert len(content_hash(spec, tmp_path / "a")) == 64


# --- normalisation and hashing ----------------------------------------------------------------


def test_words_fold_case_accents_compatibility_and_punctuation() -> None:
    assert normalise_words("Ｃafé—NAÏVE “quoted”  don’t\tß ½ x_y") == [
        "cafe", "naive", "quoted", "don", "t", "ss", "1", "2", "x", "y"
    ]  # fmt: skip
    assert normalise_words("ﬁ\u0301ne İstanbul") == ["fine", "istanbul"]


def test_vectorised_hashes_equal_the_reference_on_real_and_edge_text(
    shared_data: Path, clean_docs: list[str]
) -> None:
    with zipfile.ZipFile(shared_data / "evals/langid/nltk_udhr2.zip") as archive:
        udhr = [
            archive.read(n).decode("utf-8", "replace")
            for n in archive.namelist()
            if n.endswith(".txt")
        ][:150]  # 150 languages, many scripts
    edge = [
        "",
        "   ",
        "x" * 70_000 + " a “b” " + "y" * 65_536 + " " + "é" * 66_000 + " c",  # monster tokens
        "Straße ½ ﬁne e\u0301 \u0651\u0628 \U0001f600 \U00020000 \ud800 \x00",
        "word " * 70_000,  # beyond one word window
    ]
    for text in clean_docs[::5] + udhr + edge:
        expected = [token_hash(w) for w in normalise_words(text)]
        assert word_hashes(text).tolist() == expected


# --- the index ------------------------------------------------------------------------------


def test_index_metadata_counts_items_and_ngrams(index: EvalIndex) -> None:
    meta = index_metadata(index)
    per = meta["per_benchmark"]
    assert {name: v["items"] for name, v in per.items()} == COUNTS
    assert meta["items"] == sum(COUNTS.values()) and meta["ngram"] == NGRAM
    assert sum(v["ngrams"] for v in per.values()) == meta["keys"] > 1_000_000
    assert per["lambada_openai"]["short_items"] == per["boolq"]["short_items"] == 0
    assert per["triviaqa"]["short_items"] > 500  # short questions with their answers
    assert all(v["empty_items"] == 0 for v in per.values())
    assert meta["index_bytes"] == index.nbytes() < 100_000_000


def test_index_round_trips_through_parquet(index: EvalIndex, tmp_path: Path) -> None:
    index.write(tmp_path / "index")
    back = EvalIndex.read(tmp_path / "index")
    assert back.ngram == index.ngram and back.items == index.items
    for name in ("keys", "key_items", "key_lengths", "unique_keys"):
        assert np.array_equal(getattr(back, name), getattr(index, name)), name
    tables = index.to_tables()
    assert str(tables["ngrams"].schema.field("ngram_hash").type) == "uint64"
    row = tables["ngrams"].slice(0, 1).to_pylist()[0]
    owner = index.items[row["item"]]
    assert (row["benchmark"], row["item_id"]) == (owner.benchmark, owner.item_id)
    doc = plant(filler(400), index.items[5].text)[0]
    assert scan(back, [doc]) == scan(index, [doc])
    stale = tables["ngrams"].replace_schema_metadata({b"decontamination.ngram": b"13"})
    with pytest.raises(ValueError, match="normaliser"):
        EvalIndex.from_tables(stale, tables["items"])


def filler(words: int) -> str:
    """Text that matches no eval item: distinct made-up words."""
    return " ".join(f"filler{i}" for i in range(words))


# --- scanning -------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def planted(items: list[EvalItem], clean_docs: list[str]) -> list[tuple[str, int, EvalItem]]:
    """From every benchmark its shortest and longest item and four seeded ones, each put
    verbatim in the middle of a real book or Wikipedia document."""
    rng = random.Random(7)
    cases = []
    for group in by_benchmark(items).values():
        chosen = [min(group, key=lambda i: len(i.text)), max(group, key=lambda i: len(i.text))]
        for item in chosen + rng.sample(group, 4):
            doc, offset = plant(rng.choice(clean_docs), item.text, rng.uniform(0.2, 0.8))
            cases.append((doc, offset, item))
    return cases


def test_an_item_from_every_benchmark_is_caught_with_its_span(
    index: EvalIndex, planted: list[tuple[str, int, EvalItem]]
) -> None:
    hits = scan(index, [doc for doc, _, _ in planted])
    assert len({item.benchmark for _, _, item in planted}) == len(COUNTS)
    for doc_no, (doc, offset, item) in enumerate(planted):
        found = hits_of(hits, doc_no, item)
        assert len(found) == 1, (item, found)
        hit = found[0]
        words = normalise_words(item.text)
        assert hit.ngrams == hit.item_ngrams == max(len(words) - NGRAM + 1, 1) - _repeats(words)
        assert offset <= hit.start < hit.end <= offset + len(item.text)
        assert hit.text == doc[hit.start : hit.end]
        # The span quotes the item's first n-gram (or all of a short item), whole chunks.
        assert normalise_words(hit.text)[: min(NGRAM, len(words))] == words[:NGRAM]


def _repeats(words: list[str]) -> int:
    """N-grams an item holds more than once (keys are distinct)."""
    grams = [tuple(words[i : i + NGRAM]) for i in range(len(words) - NGRAM + 1)]
    return len(grams) - len(set(grams))


def test_the_independent_rescan_agrees_on_planted_documents(
    items: list[EvalItem], index: EvalIndex, planted: list[tuple[str, int, EvalItem]]
) -> None:
    docs = [doc for doc, _, _ in planted]
    ours = {(h.doc, h.benchmark, h.item_id, h.ngrams) for h in scan(index, docs)}
    theirs = {(r.doc, r.benchmark, r.item_id, r.ngrams) for r in ResidualMatcher(items).scan(docs)}
    assert ours == theirs
    assert len(ours) > len(planted)  # items sharing text (MMLU stems, BoolQ passages) too


def test_short_items_match_only_whole(index: EvalIndex, items: list[EvalItem]) -> None:
    item = next(i for i in items if i.text == "Which reflects light?\nmirror")
    base = filler(200)
    docs = [
        plant(base, "Which reflects light? mirror")[0],
        plant(base, "so which reflects light? Mirror, says the book")[0],
        plant(base, "Which reflects light?")[0],
        plant(base, "Which reflects light? mirrors")[0],
        plant(base, "Which reflects sound? mirror")[0],
    ]
    hits = scan(index, docs)
    assert [bool(hits_of(hits, d, item)) for d in range(len(docs))] == [1, 1, 0, 0, 0]
    hit = hits_of(hits, 1, item)[0]
    assert (hit.text, hit.ngrams, hit.item_ngrams) == ("which reflects light? Mirror", 1, 1)


def test_case_punctuation_whitespace_and_unicode_variants_still_match(
    index: EvalIndex, items: list[EvalItem], clean_docs: list[str]
) -> None:
    item = next(i for i in items if i.item_id == "test:1" and i.benchmark == "gsm8k")
    variants = [
        item.text.upper(),
        re.sub(r"\s+", lambda m: "\n\t  " if len(m.group()) == 1 else " ", item.text),
        re.sub(r"[^\w\s]+", " ", item.text),  # punctuation to spaces
        re.sub(r"[.,?']", " — ", item.text).replace("$", "“$”"),
        item.text.replace("e", "é").replace("a", "ａ"),  # accents, fullwidth (NFKC)
    ]
    docs = [plant(clean_docs[3], v)[0] for v in variants]
    hits = scan(index, docs)
    total = len(normalise_words(item.text)) - NGRAM + 1
    for doc in range(len(docs)):
        found = hits_of(hits, doc, item)
        assert [(h.ngrams, h.item_ngrams) for h in found] == [(total, total)], variants[doc]


def test_min_hits_and_spans_across_long_documents(index: EvalIndex, items: list[EvalItem]) -> None:
    short = next(i for i in items if i.text == "Which reflects light?\nmirror")
    long_item = next(i for i in items if i.benchmark == "boolq")
    words = " ".join(f"w{i}" for i in range(70_000))  # > 65,536 words and characters
    cut = words.find(" w65530 ")
    doc = words[:cut] + " " + long_item.text + " " + words[cut:] + " " + short.text
    hits = scan(index, [doc, short.text], min_hits=2)
    assert {(h.doc, h.item_id) for h in hits} >= {(0, long_item.item_id), (0, short.item_id)}
    assert all(h.doc == 0 for h in hits)  # one key alone is below min_hits=2
    for hit in hits:
        assert hit.text == doc[hit.start : hit.end] and normalise_words(hit.text)
    start = next(h.start for h in hits if h.item_id == long_item.item_id)
    assert start == cut + 1


def test_clean_books_and_wikipedia_give_few_false_hits(
    index: EvalIndex, clean_docs: list[str]
) -> None:
    # Measured: none of these 735 documents hit at n=13 (nor the 869 book, 61 Wikipedia and
    # 4,965 web documents of benchmarks/results/decontamination.md).
    hits = scan(index, clean_docs)
    assert len(clean_docs) > 500
    assert len({h.doc for h in hits}) <= max(2, len(clean_docs) // 100)


def test_an_empty_index_and_empty_documents() -> None:
    empty = build_index([EvalItem("x", "x:1", "?!")])  # an item without words has no key
    assert len(empty.keys) == 0 and index_metadata(empty)["per_benchmark"]["x"]["empty_items"]
    assert scan(empty, ["", "some words here", "a " * 100]) == []


def test_hits_table(index: EvalIndex, items: list[EvalItem]) -> None:
    doc = plant(filler(100), items[0].text)[0]
    hits = scan(index, ["nothing here", doc])
    table = hits_table(hits, doc_ids=["a", "b"])
    assert table.column_names[:3] == ["doc_id", "benchmark", "item_id"]
    assert table["doc_id"].to_pylist() == ["b"] * len(hits)
    assert hits_table(hits).column("doc").to_pylist() == [1] * len(hits)


def test_the_stored_index_has_the_same_bytes_on_every_write() -> None:
    """A version is rebuilt byte for byte: the first write of a process (where pyarrow once
    encoded an Arrow dictionary column differently) equals every later one."""
    rng = random.Random(5)
    words = [f"w{n}" for n in range(300)]
    items = [EvalItem(f"bench{i % 3}", f"bench{i % 3}:{i}",
                      " ".join(rng.choices(words, k=rng.randrange(5, 40)))) for i in range(60)]
    written = [parquet_bytes(build_index(items).to_tables()["ngrams"]) for _ in range(3)]
    assert written[0] == written[1] == written[2]
    assert written == [parquet_bytes(build_index(items).to_tables()["ngrams"])
                       for _ in range(3)]
