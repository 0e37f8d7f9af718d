"""Benchmark (eval) sets for decontamination: settings, loaders and the content hash.

Each benchmark file layout found in public eval suites has a loader that turns every record into
one `EvalItem`: the prompt TOGETHER WITH its gold answer (passages and contexts included; for
multiple choice only the gold choice), because that pairing is what leaks a benchmark into
training text. The prompt templates of MosaicML's llm-foundry exports ("Question: ", "Passage: ",
"\\nAnswer:", a "Choices:" block of lettered options) are stripped: they are the harness's
formatting, not the benchmark's text, and would keep a short item from matching a real copy.

Item ids are stable: the file's path below the benchmark's root without its extension, a colon
and the record's line number (JSONL, 1-based physical line) or data row number (CSV, 1-based,
header excluded), e.g. ``test/anatomy_test:12``.
"""

from __future__ import annotations

import csv
import glob
import gzip
import hashlib
import io
import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Layout = Literal[
    "gsm8k",
    "humaneval",
    "mmlu",
    "query_choices_gold",
    "context_continuation",
    "winogrande",
    "triviaqa",
    "text",
]

# Extensions a folder spec collects, per layout (MMLU ships CSVs, everything else JSONL).
_EXTENSIONS = (".jsonl.gz", ".jsonl", ".csv")


class EvalBenchmark(BaseModel):
    """One benchmark: its name (the `benchmark` column of hits), where its files are and how
    they are laid out. `path` is a file, a folder (every file of the layout's type below it) or
    a glob; a relative path is taken from the `base_dir` given to the loader."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    path: str = Field(min_length=1)
    layout: Layout
    text_field: str | None = None  # only for layout "text": the field holding the item
    # Whether its items are code, looked for in code sources' tokens too (curation.code);
    # None: the humaneval layout's are.
    code: bool | None = None

    @property
    def is_code(self) -> bool:
        return self.code if self.code is not None else self.layout == "humaneval"

    @model_validator(mode="after")
    def _text_field_only_for_text(self) -> EvalBenchmark:
        if (self.layout == "text") != (self.text_field is not None):
            raise ValueError(
                f"benchmark {self.name!r}: text_field is required for layout 'text' "
                f"and not allowed for layout {self.layout!r}"
            )
        return self


@dataclass(frozen=True)
class EvalItem:
    benchmark: str
    item_id: str
    text: str


# --- the benchmarks of shared/data/evals --------------------------------------------------------

# (name, path below the evals folder, layout). `langid` is a language-ID set, not a benchmark.
STANDARD_BENCHMARKS: tuple[tuple[str, str, Layout], ...] = (
    ("gsm8k", "gsm8k/test.jsonl", "gsm8k"),
    ("humaneval", "humaneval/HumanEval.jsonl.gz", "humaneval"),
    ("mmlu", "mmlu", "mmlu"),
    ("arc_easy", "arc_easy/arc_easy.jsonl", "query_choices_gold"),
    ("arc_challenge", "arc_challenge/arc_challenge.jsonl", "query_choices_gold"),
    ("piqa", "piqa/piqa.jsonl", "query_choices_gold"),
    ("openbookqa", "openbookqa/openbook_qa.jsonl", "query_choices_gold"),
    ("commonsense_qa", "commonsense_qa/commonsense_qa.jsonl", "query_choices_gold"),
    ("siqa", "siqa/siqa.jsonl", "query_choices_gold"),
    ("copa", "copa/copa.jsonl", "query_choices_gold"),
    ("boolq", "boolq/boolq.jsonl", "query_choices_gold"),
    ("lambada_openai", "lambada_openai/lambada_openai.jsonl", "context_continuation"),
    ("jeopardy", "jeopardy/jeopardy_all.jsonl", "context_continuation"),
    ("winogrande", "winogrande/winogrande.jsonl", "winogrande"),
    ("triviaqa", "triviaqa/triviaqa_sm_sub.jsonl", "triviaqa"),
)


def standard_benchmarks(evals_dir: str | Path) -> list[EvalBenchmark]:
    """Specs for every benchmark of an evals folder laid out like ``shared/data/evals``."""
    root = Path(evals_dir)
    return [
        EvalBenchmark(name=name, path=str(root / rel), layout=layout)
        for name, rel, layout in STANDARD_BENCHMARKS
    ]


# --- files ------------------------------------------------------------------------------------


def _strip_extension(name: str) -> str:
    for ext in _EXTENSIONS:
        if name.endswith(ext):
            return name[: -len(ext)]
    return Path(name).stem


def benchmark_files(spec: EvalBenchmark, base_dir: Path | None = None) -> list[tuple[str, Path]]:
    """(key, path) of every file of a benchmark, sorted by key. The key (the path below the
    spec's root, without extension) prefixes item ids, so it must not depend on `base_dir`."""
    path = Path(spec.path)
    if not path.is_absolute() and base_dir is not None:
        path = Path(base_dir) / path
    if glob.has_magic(str(path)):
        root = Path(*_fixed_prefix(path.parts))
        files = [Path(p) for p in glob.glob(str(path), recursive=True) if Path(p).is_file()]
    elif path.is_dir():
        root = path
        wanted = (".csv",) if spec.layout == "mmlu" else (".jsonl", ".jsonl.gz")
        files = [p for p in path.rglob("*") if p.is_file() and p.name.endswith(wanted)]
    else:
        root, files = path.parent, [path] if path.is_file() else []
    if not files:
        raise FileNotFoundError(f"benchmark {spec.name!r}: no files at {path}")
    keyed = sorted((_strip_extension(str(f.relative_to(root))), f) for f in files)
    keys = [key for key, _ in keyed]
    if len(set(keys)) != len(keys):  # "x.jsonl" beside "x.jsonl.gz": item ids would clash
        raise ValueError(f"benchmark {spec.name!r}: files with the same name at {path}: {keys}")
    return keyed


def _fixed_prefix(parts: Sequence[str]) -> Iterator[str]:
    for part in parts:
        if glob.has_magic(part):
            return
        yield part


def _open_text(path: Path) -> io.TextIOBase:
    if path.name.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return path.open(encoding="utf-8", newline="")


def _jsonl_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with _open_text(path) as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}: line {line_no}: not valid JSON ({err.msg})") from None
            if not isinstance(record, dict):
                raise ValueError(f"{path}: line {line_no}: not a JSON object")
            yield line_no, record


def _csv_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with _open_text(path) as fh:
        for row_no, row in enumerate(csv.DictReader(fh), 1):
            # DictReader puts cells beyond the header under None and missing ones as None.
            yield row_no, {k: v for k, v in row.items() if k is not None and v is not None}


# --- record -> text ------------------------------------------------------------------------


class _Record:
    """Typed field access that names the file, line and field when a record is malformed."""

    def __init__(self, path: Path, line: int, record: dict[str, Any], unit: str = "line"):
        self.path, self.line, self.record, self.unit = path, line, record, unit

    def fail(self, message: str) -> ValueError:
        return ValueError(f"{self.path}: {self.unit} {self.line}: {message}")

    def get(self, field: str, kind: type | tuple[type, ...] = str) -> Any:
        if field not in self.record:
            raise self.fail(f"missing field {field!r}")
        value = self.record[field]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise self.fail(f"field {field!r} has type {type(value).__name__}")
        return value

    def index(self, field: str, options: list[Any]) -> Any:
        """options[record[field]] where the field holds an integer index (or its digits)."""
        raw = self.get(field, (int, str))
        if isinstance(raw, str) and not raw.strip().isdigit():
            raise self.fail(f"field {field!r} is not an index: {raw!r}")
        i = int(raw)
        if not 0 <= i < len(options):
            raise self.fail(f"field {field!r} = {i} is out of range for {len(options)} options")
        return options[i]


_LABEL = re.compile(r"^(?:Question|Passage|Context|Answer):[ \t]*", re.MULTILINE)
_CHOICE_LINE = re.compile(r"^([A-Z])\. (.*)$", re.MULTILINE)
_CHOICE_BLOCK = re.compile(r"^Choices:\n(?:[A-Z]\. .*(?:\n|$))+", re.MULTILINE)


def _strip_template(query: str) -> str:
    """The benchmark's own words of an llm-foundry prompt (labels and choice block removed)."""
    return _LABEL.sub("", _CHOICE_BLOCK.sub("", query)).strip()


def _gold_choice(rec: _Record, query: str) -> str:
    """The gold choice's text; lettered choices (CommonsenseQA, SIQA) are looked up in the
    query's "Choices:" block, since their `choices` field holds only the letters."""
    choices = rec.get("choices", list)
    gold = rec.index("gold", choices)
    if not isinstance(gold, str):
        raise rec.fail(f"field 'choices' holds a {type(gold).__name__}")
    block = _CHOICE_BLOCK.search(query)
    if block and len(gold) == 1:
        lettered = dict(_CHOICE_LINE.findall(block.group(0)))
        return lettered.get(gold, gold)
    return gold


def _join(*parts: str) -> str:
    return "\n".join(p.strip() for p in parts if p.strip())


def _gsm8k(rec: _Record) -> str:
    return _join(rec.get("question"), rec.get("answer"))


def _humaneval(rec: _Record) -> str:
    # The canonical solution continues the prompt's last line (the function body).
    return rec.get("prompt") + rec.get("canonical_solution")


def _mmlu(rec: _Record) -> str:
    choices = [rec.get(f"choice{i}") for i in range(4)]
    return _join(rec.get("question"), rec.index("answer", choices))


def _query_choices_gold(rec: _Record) -> str:
    query = rec.get("query")
    return _join(_strip_template(query), _gold_choice(rec, query))


def _context_continuation(rec: _Record) -> str:
    # LAMBADA's continuation is the passage's last word: a space, not a line, joins them.
    return rec.get("context").rstrip() + " " + rec.get("continuation").strip()


def _winogrande(rec: _Record) -> str:
    option = rec.index("gold", rec.get("context_options", list))
    if not isinstance(option, str):
        raise rec.fail("field 'context_options' holds a non-string")
    return option.rstrip() + " " + rec.get("continuation").strip()


def _triviaqa(rec: _Record) -> str:
    return _join(_strip_template(rec.get("context")), rec.get("answer"))


_TEXT_OF: dict[str, Callable[[_Record], str]] = {
    "gsm8k": _gsm8k,
    "humaneval": _humaneval,
    "mmlu": _mmlu,
    "query_choices_gold": _query_choices_gold,
    "context_continuation": _context_continuation,
    "winogrande": _winogrande,
    "triviaqa": _triviaqa,
}


def _item_text(spec: EvalBenchmark, rec: _Record) -> str:
    if spec.layout == "text":
        assert spec.text_field is not None  # the model's validator guarantees it
        return rec.get(spec.text_field)
    return _TEXT_OF[spec.layout](rec)


def load_benchmark(spec: EvalBenchmark, base_dir: Path | None = None) -> list[EvalItem]:
    """Every item of one benchmark, in file order. A malformed record raises `ValueError`
    naming the file, the line (or CSV row) and the field."""
    items = []
    for key, path in benchmark_files(spec, base_dir):
        is_csv = path.name.endswith(".csv")
        records = _csv_records(path) if is_csv else _jsonl_records(path)
        for number, record in records:
            rec = _Record(path, number, record, "row" if is_csv else "line")
            items.append(EvalItem(spec.name, f"{key}:{number}", _item_text(spec, rec)))
    return items


def load_benchmarks(specs: Sequence[EvalBenchmark], base_dir: Path | None = None) -> list[EvalItem]:
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"benchmark names must be unique: {names}")
    return [item for spec in specs for item in load_benchmark(spec, base_dir)]


def content_hash(
    specs: Sequence[EvalBenchmark], base_dir: Path | None = None, settings_json: str = ""
) -> str:
    """sha256 (hex) over the settings (`settings_json`, e.g. the decontamination settings), each
    spec and each of its files' keys and bytes: the version that pins the eval-suite asset.
    Paths enter only relative to each spec's root, so moving the folder keeps the hash."""
    digest = hashlib.sha256(settings_json.encode())
    for spec in specs:
        described = spec.model_dump(exclude={"path"})
        digest.update(json.dumps(described, sort_keys=True).encode())
        for key, path in benchmark_files(spec, base_dir):
            data = path.read_bytes()
            digest.update(f"\0{key}\0{len(data)}\0".encode())
            digest.update(data)
    return digest.hexdigest()
