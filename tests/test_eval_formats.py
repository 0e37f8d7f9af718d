"""Eval sets declared by field mappings (`curation.evals.FieldMapping`): real items of
../shared/data/evals rewritten as a Hugging Face `datasets` Parquet export and as
lm-evaluation-harness `--log_samples` JSONL load as the same prompt-with-gold items as the
llm-foundry loaders give; bad mappings fail at config load naming the field; decontamination and
the proxy evaluation use such benchmarks."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from curation.config import ConfigError, load_pipeline
from curation.decontamination import normalise_words
from curation.evals import EvalBenchmark, EvalItem, load_benchmark, read_benchmark_list
from curation.proxy.evalsets import eval_sets, load_mapped_multiple_choice, load_multiple_choice
from curation.stages.base import DocumentsInput
from curation.stages.decontamination import DecontaminateWork, build_eval_suite
from curation.storage import LocalStore
from tests.test_config import GOOD_PIPELINE
from tests.test_decontamination import EVALS_EXAMPLE, filler, plant

LETTERS = "ABCDEFGH"
HF_FILE = "data/test-00000-of-00001.parquet"  # where `datasets` puts a one-shard test split


@pytest.fixture(scope="module")
def foundry(shared_data: Path) -> dict[str, EvalBenchmark]:
    """The llm-foundry export's benchmarks, as the example configuration declares them."""
    return {spec.name: spec for spec in read_benchmark_list(EVALS_EXAMPLE, shared_data / "evals")}


def records(spec: EvalBenchmark) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(spec.path).read_text(encoding="utf-8").splitlines()]


# --- the llm-foundry records rewritten as the original datasets' rows ---------------------------


def gsm8k_rows(foundry_records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"question": r["question"], "answer": r["answer"]} for r in foundry_records]


def arc_rows(foundry_records: list[dict[str, Any]], labels: str = LETTERS) -> list[dict[str, Any]]:
    """allenai/ai2_arc's columns: the choices a struct of lists, the gold a label."""
    rows = []
    for i, r in enumerate(foundry_records):
        label = list(labels[: len(r["choices"])])
        rows.append({"id": f"arc-{i}", "question": r["query"].removeprefix("Question: "),
                     "choices": {"text": r["choices"], "label": label},
                     "answerKey": label[r["gold"]]})
    return rows


_BOOLQ = re.compile(r"^Passage: (.*)\nQuestion: (.*)$", re.DOTALL)


def boolq_rows(foundry_records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """super_glue/boolq's columns: question, passage, idx and the label (0: no, 1: yes)."""
    rows = []
    for i, r in enumerate(foundry_records):
        passage, question = _BOOLQ.match(r["query"]).groups()
        rows.append({"question": question, "passage": passage, "idx": i, "label": r["gold"]})
    return rows


def write_hf_parquet(folder: Path, rows: list[dict[str, Any]], schema: pa.Schema) -> Path:
    path = folder / HF_FILE
    path.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema), path, row_group_size=500)
    return path


ARC_SCHEMA = pa.schema([
    ("id", pa.string()), ("question", pa.string()),
    ("choices", pa.struct([("text", pa.list_(pa.string())), ("label", pa.list_(pa.string()))])),
    ("answerKey", pa.string())])


def write_log_samples(path: Path, rows: list[dict[str, Any]], targets: list[Any]) -> Path:
    """lm-evaluation-harness `--log_samples` records: the dataset row under `doc`, the
    rendered target and the harness's own fields beside them."""
    def sha(value: Any) -> str:
        return hashlib.sha256(json.dumps(value).encode()).hexdigest()

    lines = [json.dumps({"doc_id": i, "doc": row, "target": target,
                         "arguments": [["prompt", " continuation"]], "resps": [[["-1.5", False]]],
                         "filtered_resps": [["-1.5", False]], "doc_hash": sha(row),
                         "prompt_hash": sha(i), "target_hash": sha(target), "acc": 1.0})
             for i, (row, target) in enumerate(zip(rows, targets, strict=True))]
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data, mtime=0) if path.name.endswith(".gz") else data)
    return path


def as_compared(items: list[EvalItem]) -> list[tuple[str, list[str]]]:
    """(record number, words) per item: ids differ by file name, texts by templates only."""
    return [(item.item_id.rsplit(":", 1)[1], normalise_words(item.text)) for item in items]


# --- the same items from every format -----------------------------------------------------------


def test_hf_parquet_gsm8k_arc_and_boolq_give_the_llm_foundry_items(
    foundry: dict[str, EvalBenchmark], tmp_path: Path
) -> None:
    gsm8k = write_hf_parquet(tmp_path / "gsm8k", gsm8k_rows(records(foundry["gsm8k"])),
                             pa.schema([("question", pa.string()), ("answer", pa.string())]))
    arc = write_hf_parquet(tmp_path / "arc_easy", arc_rows(records(foundry["arc_easy"])),
                           ARC_SCHEMA)
    # ARC-Challenge's labels as some of ai2_arc's rows give them ("1".."4"), the choices a
    # list of structs, looked up by label.
    challenge = arc_rows(records(foundry["arc_challenge"]), labels="1234")
    for row in challenge:
        pairs = zip(row["choices"]["text"], row["choices"]["label"], strict=True)
        row["choices"] = [{"text": text, "label": label} for text, label in pairs]
    challenge_schema = pa.schema([
        ("id", pa.string()), ("question", pa.string()),
        ("choices", pa.list_(pa.struct([("text", pa.string()), ("label", pa.string())]))),
        ("answerKey", pa.string())])
    write_hf_parquet(tmp_path / "arc_challenge", challenge, challenge_schema)
    boolq_records = records(foundry["boolq"])
    # One passage holds a line starting "Question:", which the llm-foundry loader strips as
    # a template label; the original passage keeps it.
    kept = [i for i, r in enumerate(boolq_records) if r["query"].count("\nQuestion: ") == 1]
    assert len(boolq_records) - len(kept) == 1
    boolq = write_hf_parquet(tmp_path / "boolq", boolq_rows([boolq_records[i] for i in kept]),
                             pa.schema([("question", pa.string()), ("passage", pa.string()),
                                        ("idx", pa.int32()), ("label", pa.int64())]))
    mapped = {
        "gsm8k": {"path": str(gsm8k), "fields": {"prompt": "question", "answer": "answer"}},
        "arc_easy": {"path": str(arc.parent.parent), "fields": {
            "prompt": "question", "choices": "choices.text", "answer": "answerKey",
            "answer_is": "letter"}},
        "arc_challenge": {"path": str(tmp_path / "arc_challenge/data/test-*.parquet"), "fields": {
            "prompt": "question", "choices": "choices.text", "answer": "answerKey",
            "answer_is": "label", "labels": "choices.label"}},
        "boolq": {"path": str(boolq), "fields": {
            "prompt": ["passage", "question"], "choice_texts": ["no", "yes"], "answer": "label",
            "answer_is": "index"}},
    }
    # The id is the path below the benchmark's root: the folder's for arc_easy.
    first_ids = {"gsm8k": "test-00000-of-00001:1", "arc_easy": "data/test-00000-of-00001:1",
                 "arc_challenge": "test-00000-of-00001:1", "boolq": "test-00000-of-00001:1"}
    for name, declared in mapped.items():
        loaded = load_benchmark(EvalBenchmark(name=name, **declared))
        reference = load_benchmark(foundry[name])
        if name == "boolq":  # renumbered over the records kept
            reference = [EvalItem(name, f"boolq:{row}", reference[i].text)
                         for row, i in enumerate(kept, 1)]
        assert as_compared(loaded) == as_compared(reference), name
        assert loaded[0].item_id == first_ids[name]
        assert len(loaded) > 99 and all(item.benchmark == name for item in loaded)


def test_harness_log_samples_give_the_llm_foundry_items(
    foundry: dict[str, EvalBenchmark], tmp_path: Path
) -> None:
    arc_records = records(foundry["arc_easy"])
    arc = write_log_samples(tmp_path / "samples_arc_easy_2024-06-01T00-00-00.jsonl",
                            arc_rows(arc_records), [r["gold"] for r in arc_records])
    gsm8k_records = records(foundry["gsm8k"])
    gsm8k = write_log_samples(tmp_path / "samples_gsm8k.jsonl.gz", gsm8k_rows(gsm8k_records),
                              [r["answer"] for r in gsm8k_records])
    arc_spec = EvalBenchmark(name="arc_easy", path=str(arc), fields={
        "prompt": "doc.question", "choices": "doc.choices.text", "answer": "target",
        "answer_is": "index"})
    gsm8k_spec = EvalBenchmark(name="gsm8k", path=str(gsm8k),
                               fields={"prompt": "doc.question", "answer": "target"})
    for spec in (arc_spec, gsm8k_spec):
        assert as_compared(load_benchmark(spec)) == as_compared(load_benchmark(foundry[spec.name]))
    assert load_benchmark(gsm8k_spec)[0].item_id == "samples_gsm8k:1"
    # The same file through the dataset's own gold (a letter) instead of the harness's target.
    by_letter = arc_spec.model_copy(update={"fields": arc_spec.fields.model_copy(
        update={"answer": "doc.answerKey", "answer_is": "letter"})})
    assert load_benchmark(by_letter) == load_benchmark(arc_spec)


def test_a_malformed_mapped_record_names_file_row_and_field(
    foundry: dict[str, EvalBenchmark], tmp_path: Path
) -> None:
    rows = arc_rows(records(foundry["arc_easy"])[:3])
    rows[1]["answerKey"] = "E"  # four choices
    path = write_hf_parquet(tmp_path, rows, ARC_SCHEMA)
    fields = {"prompt": "question", "choices": "choices.text", "answer": "answerKey",
              "answer_is": "letter"}
    with pytest.raises(ValueError, match=r"test-00000-of-00001\.parquet: row 2: field "
                                         r"'answerKey' = 'E' is not a letter of 4 choices"):
        load_benchmark(EvalBenchmark(name="arc", path=str(path), fields=fields))
    with pytest.raises(ValueError, match=r"\.parquet: no column 'query'"):
        load_benchmark(EvalBenchmark(name="arc", path=str(path), fields=fields | {
            "prompt": "query"}))
    with pytest.raises(ValueError, match=r"row 1: missing field 'choices.texts'"):
        load_benchmark(EvalBenchmark(name="arc", path=str(path), fields=fields | {
            "choices": "choices.texts"}))
    with pytest.raises(ValueError, match=r"row 1: field 'answerKey' = 'A' is none of the choices"):
        load_benchmark(EvalBenchmark(name="arc", path=str(path), fields=fields | {
            "answer_is": "text"}))


# --- config errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("benchmark", "field", "message"),
    [
        ("{name: a, path: a.parquet, fields: {prompt: q, answer: k, answer_is: letter}}",
         "decontamination.benchmarks.0.fields", "answer_is 'letter' needs choices"),
        ("{name: a, path: a.parquet, fields: {prompt: q, choices: c}}",
         "decontamination.benchmarks.0.fields", "answer is required with choices"),
        ("{name: a, path: a.parquet, fields: {prompt: q, choices: c, answer: k, "
         "answer_is: label}}", "decontamination.benchmarks.0.fields", "labels is required"),
        ("{name: a, path: a.parquet, fields: {prompt: q, choices: c, choice_texts: [x, y], "
         "answer: k}}", "decontamination.benchmarks.0.fields", "give one of choices"),
        ("{name: a, path: a.parquet, fields: {prompt: 'doc..question'}}",
         "decontamination.benchmarks.0.fields.prompt.0", "should match pattern"),
        ("{name: a, path: a.parquet, fields: {prompt: q, answer: k, answer_is: number}}",
         "decontamination.benchmarks.0.fields.answer_is", "'index', 'letter', 'label' or 'text'"),
        ("{name: a, path: a.parquet, fields: {prompt: q, answr: k}}",
         "decontamination.benchmarks.0.fields.answr", "did you mean 'answer'?"),
        ("{name: a, path: a.parquet, fields: {answer: k}}",
         "decontamination.benchmarks.0.fields.prompt", "Field required"),
        ("{name: a, path: a.parquet, layout: gsm8k, fields: {prompt: q}}",
         "decontamination.benchmarks.0", "give either layout"),
        ("{name: a, path: a.parquet}", "decontamination.benchmarks.0", "give either layout"),
    ],
)
def test_a_bad_mapping_fails_at_config_load_naming_the_field(
    tmp_path: Path, benchmark: str, field: str, message: str
) -> None:
    text = GOOD_PIPELINE + f"decontamination:\n  benchmarks:\n    - {benchmark}\n"
    (tmp_path / "pipeline.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        load_pipeline(tmp_path / "pipeline.yaml")
    assert f": {field}: " in str(error.value) and message in str(error.value), str(error.value)


def test_the_example_configuration_validates() -> None:
    listed = read_benchmark_list(EVALS_EXAMPLE, "evals")
    assert all(spec.path.startswith("evals/") and spec.layout for spec in listed)
    with pytest.raises(ValidationError, match="fields"):
        EvalBenchmark(name="x", path="x.parquet", fields={"prompt": []})


# --- decontamination and the proxy use them -----------------------------------------------------


def test_decontamination_finds_an_item_of_a_parquet_benchmark(
    foundry: dict[str, EvalBenchmark], tmp_path: Path
) -> None:
    write_hf_parquet(tmp_path / "arc", arc_rows(records(foundry["arc_challenge"])), ARC_SCHEMA)
    (tmp_path / "pipeline.yaml").write_text(GOOD_PIPELINE + """decontamination:
  benchmarks:
    - name: arc_challenge
      path: arc/data/test-*.parquet
      fields: {prompt: question, choices: choices.text, answer: answerKey, answer_is: letter}
""", encoding="utf-8")
    settings = load_pipeline(tmp_path / "pipeline.yaml").decontamination
    store = LocalStore(str(tmp_path / "root"))
    suite = build_eval_suite(store, settings)
    assert suite.metadata["per_benchmark"]["arc_challenge"]["items"] == 1172
    item = load_benchmark(settings.benchmarks[0])[40]
    assert item.item_id == "test-00000-of-00001:41"
    doc, _ = plant(filler(300), item.text)
    docs = pa.table({"doc_id": ["clean", "planted"], "text": [filler(300), doc]})
    annotation = DecontaminateWork(DocumentsInput(store, "X"), min_hits=1).annotate(0, docs)
    assert [(d.doc_id, json.loads(d.detail)["benchmark"], json.loads(d.detail)["item_id"])
            for d in annotation.drops] == [("planted", "arc_challenge", item.item_id)]


def test_the_proxy_scores_a_declared_parquet_benchmark(
    foundry: dict[str, EvalBenchmark], shared_data: Path, tmp_path: Path
) -> None:
    path = write_hf_parquet(tmp_path, arc_rows(records(foundry["arc_easy"])), ARC_SCHEMA)
    spec = EvalBenchmark(name="arc_easy", path=str(path), fields={
        "prompt": "question", "choices": "choices.text", "answer": "answerKey",
        "answer_is": "letter"})
    mapped = load_mapped_multiple_choice(spec)
    builtin = load_multiple_choice("arc_easy", shared_data / "evals")
    assert [(m.choices, m.gold) for m in mapped] == [(b.choices, b.gold) for b in builtin]
    # The llm-foundry context is the template around the same question.
    assert [f"Question: {m.context}\nAnswer:" for m in mapped] == [b.context for b in builtin]
    assert mapped[0].item_id == "arc_easy:test-00000-of-00001:1"
    capped = load_mapped_multiple_choice(spec, max_items=50)
    assert len(capped) == 50 and capped == load_mapped_multiple_choice(spec, max_items=50)
    # A declared benchmark wins over the built-in parser of the same name; one without choices
    # cannot be scored.
    loaders = eval_sets(("arc_easy", "copa"), shared_data / "evals", [spec])
    assert loaders["arc_easy"](20, 0) == load_mapped_multiple_choice(spec, 20)
    assert loaders["copa"](None, 0) == load_multiple_choice("copa", shared_data / "evals")
    text_only = EvalBenchmark(name="gsm", path=str(path), fields={"prompt": "question"})
    with pytest.raises(ValueError, match="'gsm' is neither declared in pipeline.yaml"):
        eval_sets(("gsm",), None, [text_only])
