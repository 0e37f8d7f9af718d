"""Benchmark (eval) sets for decontamination: settings, loaders and the content hash.

Each benchmark file layout found in public eval suites has a loader that turns every record into
one `EvalItem`: the prompt TOGETHER WITH its gold answer (passages and contexts included; for
multiple choice only the gold choice), because that pairing is what leaks a benchmark into
training text. The prompt templates of MosaicML's llm-foundry exports ("Question: ", "Passage: ",
"\\nAnswer:", a "Choices:" block of lettered options) are stripped: they are the harness's
formatting, not the benchmark's text, and would keep a short item from matching a real copy.

Any other export is declared by a field mapping (`FieldMapping`, `fields:` in pipeline.yaml)
instead of a layout: which fields hold the prompt, the gold answer and, for multiple choice, the
choices and how the gold names one (an index, a letter, a label or the answer's text). Fields
are dotted paths, so the same mapping reads Hugging Face `datasets` Parquet exports (a struct
column: ``choices.text``) and lm-evaluation-harness ``--log_samples`` JSONL, whose records hold
the dataset's row under ``doc`` (``doc.question``) beside the harness's ``target``.

Files are JSONL (optionally gzipped), CSV (the mmlu layout) or Parquet, read with pyarrow a
batch of rows at a time. Item ids are stable: the file's path below the benchmark's root without
its extension, a colon and the record's line number (JSONL, 1-based physical line) or data row
number (CSV and Parquet, 1-based, header excluded), e.g. ``test/anatomy_test:12``.
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
from typing import Annotated, Any, Literal

import pyarrow.parquet as pq
import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

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

# How a mapped record names its gold choice: the choice's position (0-based, an integer or its
# digits), its letter (A is the first), its label among the record's `labels` (ARC's "1".."4"
# beside "A".."D") or the gold answer's text itself.
AnswerForm = Literal["index", "letter", "label", "text"]

# A field, or a dotted path into nested fields (`doc.question`, `choices.text`).
FieldPath = Annotated[str, Field(pattern=r"^[^.]+(\.[^.]+)*$")]

_EXTENSIONS = (".jsonl.gz", ".jsonl", ".csv", ".parquet")
_ROW_FILES = (".csv", ".parquet")  # numbered by data row; JSONL by physical line


class FieldMapping(BaseModel):
    """Where a record's prompt and gold answer are. The item is the prompt's fields (one path or
    a list, e.g. BoolQ's passage then question) joined by lines, then the gold answer's text.
    For multiple choice, the choices come from one list field (`choices`), one field per choice
    (`choice_fields`: PIQA's sol1, sol2) or the same texts for every record (`choice_texts`:
    BoolQ's "no", "yes", quoted in YAML, where bare no and yes are booleans), and `answer_is`
    says how `answer` names the gold one. Without choices, `answer` is the gold text (GSM8K's
    worked solution), and without `answer` the prompt alone is the item (LAMBADA's passage)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt: list[FieldPath] = Field(min_length=1)
    answer: FieldPath | None = None
    answer_is: AnswerForm = "text"
    choices: FieldPath | None = None
    choice_fields: list[FieldPath] | None = Field(default=None, min_length=2)
    choice_texts: list[str] | None = Field(default=None, min_length=2)
    labels: FieldPath | None = None

    @field_validator("prompt", mode="before")
    @classmethod
    def _one_or_more(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @property
    def has_choices(self) -> bool:
        return any(x is not None for x in (self.choices, self.choice_fields, self.choice_texts))

    @property
    def paths(self) -> list[str]:
        """Every field path the mapping reads."""
        given = [*self.prompt, self.answer, self.choices, *(self.choice_fields or []),
                 self.labels]
        return [path for path in given if path is not None]

    @model_validator(mode="after")
    def _consistent(self) -> FieldMapping:
        sources = [k for k in ("choices", "choice_fields", "choice_texts") if getattr(self, k)]
        if len(sources) > 1:
            raise ValueError(f"give one of choices, choice_fields, choice_texts, not {sources}")
        if self.has_choices and self.answer is None:
            raise ValueError("answer is required with choices: the gold choice is the item's")
        if self.answer_is != "text" and not self.has_choices:
            raise ValueError(f"answer_is {self.answer_is!r} needs choices, choice_fields or "
                             "choice_texts")
        if (self.answer_is == "label") != (self.labels is not None):
            raise ValueError("labels is required for answer_is 'label' and not allowed "
                             f"for answer_is {self.answer_is!r}")
        return self


class EvalBenchmark(BaseModel):
    """One benchmark: its name (the `benchmark` column of hits), where its files are and how
    to read them: a `layout` of the llm-foundry exports, or a field mapping (`fields`). `path`
    is a file, a folder (every file of the layout's type below it) or a glob; a relative path
    is taken from the `base_dir` given to the loader."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    path: str = Field(min_length=1)
    layout: Layout | None = None
    fields: FieldMapping | None = None
    text_field: str | None = None  # only for layout "text": the field holding the item
    # Whether its items are code, looked for in code sources' tokens too (curation.code);
    # None: the humaneval layout's are.
    code: bool | None = None

    @property
    def is_code(self) -> bool:
        return self.code if self.code is not None else self.layout == "humaneval"

    @model_validator(mode="after")
    def _one_way_to_read(self) -> EvalBenchmark:
        if (self.layout is None) == (self.fields is None):
            raise ValueError(f"benchmark {self.name!r}: give either layout (an llm-foundry "
                             "export) or fields (a field mapping), not both or neither")
        if (self.layout == "text") != (self.text_field is not None):
            raise ValueError(
                f"benchmark {self.name!r}: text_field is required for layout 'text' "
                f"and not allowed for {f'layout {self.layout!r}' if self.layout else 'fields'}"
            )
        return self


@dataclass(frozen=True)
class EvalItem:
    benchmark: str
    item_id: str
    text: str


def read_benchmark_list(path: str | Path, base_dir: str | Path) -> list[EvalBenchmark]:
    """The benchmarks of a YAML file holding `benchmarks:`, a list of `decontamination.benchmarks`
    entries (the example `examples/llm_foundry_evals.yaml`), relative paths taken from
    `base_dir`. A bad entry raises pydantic's `ValidationError` naming the field."""
    raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    listed = _BenchmarkList.model_validate(raw).benchmarks
    return [spec.model_copy(update={"path": str(Path(base_dir) / spec.path)}) for spec in listed]


class _BenchmarkList(BaseModel):
    model_config = ConfigDict(extra="forbid")

    benchmarks: list[EvalBenchmark]


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
        wanted = (".csv",) if spec.layout == "mmlu" else (".jsonl", ".jsonl.gz", ".parquet")
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


PARQUET_BATCH_ROWS = 1024  # rows in memory at a time, however large the file


def _parquet_records(
    path: Path, columns: list[str] | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Rows as dicts (struct columns as nested dicts, list columns as lists), a batch at a time;
    with `columns`, only those top-level columns are read."""
    parquet = pq.ParquetFile(path)
    missing = [c for c in columns or [] if c not in parquet.schema_arrow.names]
    if missing:
        raise ValueError(f"{path}: no column {missing[0]!r} (columns: "
                         f"{parquet.schema_arrow.names})")
    row_no = 0
    for batch in parquet.iter_batches(PARQUET_BATCH_ROWS, columns=columns):
        for record in batch.to_pylist():
            row_no += 1
            yield row_no, record


def _records(spec: EvalBenchmark, path: Path) -> Iterator[_Record]:
    if path.name.endswith(".csv"):
        records = _csv_records(path)
    elif path.name.endswith(".parquet"):
        # A mapping names its columns: a wide export's other columns are never read.
        wanted = sorted({p.split(".")[0] for p in spec.fields.paths}) if spec.fields else None
        records = _parquet_records(path, wanted)
    else:
        records = _jsonl_records(path)
    unit = "row" if path.name.endswith(_ROW_FILES) else "line"
    return (_Record(path, number, record, unit) for number, record in records)


# --- record -> text ------------------------------------------------------------------------


class _Record:
    """Typed field access that names the file, line and field when a record is malformed."""

    def __init__(self, path: Path, line: int, record: dict[str, Any], unit: str = "line"):
        self.path, self.line, self.record, self.unit = path, line, record, unit

    def fail(self, message: str) -> ValueError:
        return ValueError(f"{self.path}: {self.unit} {self.line}: {message}")

    def get(self, field: str, kind: type | tuple[type, ...] = str) -> Any:
        value = _lookup(self.record, field)
        if value is _MISSING:
            raise self.fail(f"missing field {field!r}")
        if not isinstance(value, kind) or isinstance(value, bool):
            raise self.fail(f"field {field!r} has type {type(value).__name__}")
        return value

    def position(self, field: str, count: int) -> int:
        """The integer index (or its digits) a field holds, checked against `count` options."""
        raw = self.get(field, (int, str))
        if isinstance(raw, str) and not raw.strip().isdigit():
            raise self.fail(f"field {field!r} is not an index: {raw!r}")
        i = int(raw)
        if not 0 <= i < count:
            raise self.fail(f"field {field!r} = {i} is out of range for {count} options")
        return i

    def index(self, field: str, options: list[Any]) -> Any:
        """options[record[field]] where the field holds an integer index (or its digits)."""
        return options[self.position(field, len(options))]


_MISSING = object()


def _lookup(record: dict[str, Any], path: str) -> Any:
    """The value at a dotted path; through a list of structs, the list of each one's value
    (a Parquet list<struct> column such as [{text, label}, ...])."""
    value: Any = record
    for key in path.split("."):
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and all(isinstance(v, dict) and key in v for v in value):
            value = [v[key] for v in value]
        else:
            return _MISSING
    return value


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


# --- field mappings -----------------------------------------------------------------------------


@dataclass(frozen=True)
class MappedRecord:
    """One record read through a field mapping."""

    item_id: str
    prompt: str  # the prompt's fields, joined by lines
    answer: str  # the gold answer's text; "" when the mapping has no answer
    choices: tuple[str, ...] = ()
    gold: int | None = None  # the gold choice's index, for multiple choice

    @property
    def text(self) -> str:
        """The decontamination item: the prompt with its gold answer."""
        return _join(self.prompt, self.answer)


def _choices(fields: FieldMapping, rec: _Record) -> list[str]:
    if fields.choice_texts is not None:
        return list(fields.choice_texts)
    if fields.choice_fields is not None:
        return [rec.get(field) for field in fields.choice_fields]
    if fields.choices is None:
        return []
    values = rec.get(fields.choices, list)
    if not all(isinstance(value, str) for value in values):
        raise rec.fail(f"field {fields.choices!r} holds a non-string")
    return values


def _gold(fields: FieldMapping, rec: _Record, choices: list[str]) -> int:
    answer = fields.answer
    assert answer is not None  # the model's validator: choices need an answer
    if fields.answer_is == "index":
        return rec.position(answer, len(choices))
    if fields.answer_is == "letter":
        letter = rec.get(answer).strip()
        if len(letter) != 1 or not 0 <= ord(letter) - ord("A") < len(choices):
            raise rec.fail(f"field {answer!r} = {letter!r} is not a letter of "
                           f"{len(choices)} choices")
        return ord(letter) - ord("A")
    if fields.answer_is == "label":
        assert fields.labels is not None  # the model's validator
        labels = [str(label) for label in rec.get(fields.labels, list)]
        given = str(rec.get(answer, (str, int))).strip()
        if len(labels) != len(choices) or given not in labels:
            raise rec.fail(f"field {answer!r} = {given!r} is not one of the {len(choices)} "
                           f"labels of field {fields.labels!r}: {labels}")
        return labels.index(given)
    text = rec.get(answer).strip()
    stripped = [choice.strip() for choice in choices]
    if text not in stripped:
        raise rec.fail(f"field {answer!r} = {text!r} is none of the choices")
    return stripped.index(text)


def _mapped(fields: FieldMapping, rec: _Record, item_id: str) -> MappedRecord:
    prompt = _join(*(rec.get(path) for path in fields.prompt))
    choices = _choices(fields, rec)
    if choices:
        gold = _gold(fields, rec, choices)
        return MappedRecord(item_id, prompt, choices[gold], tuple(choices), gold)
    # A free-form gold answer may be a number in a typed column (GSM8K-style final answers).
    answer = "" if fields.answer is None else str(rec.get(fields.answer, (str, int, float)))
    return MappedRecord(item_id, prompt, answer)


def read_mapped(spec: EvalBenchmark, base_dir: Path | None = None) -> Iterator[MappedRecord]:
    """Every record of a benchmark declared by `fields`, in file order (for scorers that need
    the choices apart, such as the proxy evaluation). A malformed record raises `ValueError`
    naming the file, the line or row and the field."""
    if spec.fields is None:
        raise ValueError(f"benchmark {spec.name!r} has a layout, not a field mapping")
    for key, path in benchmark_files(spec, base_dir):
        for rec in _records(spec, path):
            yield _mapped(spec.fields, rec, f"{key}:{rec.line}")


# --- loading ------------------------------------------------------------------------------------


def _item_text(spec: EvalBenchmark, rec: _Record) -> str:
    if spec.layout == "text":
        assert spec.text_field is not None  # the model's validator guarantees it
        return rec.get(spec.text_field)
    assert spec.layout is not None  # the model's validator: a layout or fields
    return _TEXT_OF[spec.layout](rec)


def load_benchmark(spec: EvalBenchmark, base_dir: Path | None = None) -> list[EvalItem]:
    """Every item of one benchmark, in file order. A malformed record raises `ValueError`
    naming the file, the line (or CSV or Parquet row) and the field."""
    if spec.fields is not None:
        return [EvalItem(spec.name, record.item_id, record.text)
                for record in read_mapped(spec, base_dir)]
    return [EvalItem(spec.name, f"{key}:{rec.line}", _item_text(spec, rec))
            for key, path in benchmark_files(spec, base_dir) for rec in _records(spec, path)]


def load_benchmarks(specs: Sequence[EvalBenchmark], base_dir: Path | None = None) -> list[EvalItem]:
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"benchmark names must be unique: {names}")
    return [item for spec in specs for item in load_benchmark(spec, base_dir)]


_HASH_CHUNK = 1 << 20


def content_hash(
    specs: Sequence[EvalBenchmark], base_dir: Path | None = None, settings_json: str = ""
) -> str:
    """sha256 (hex) over the settings (`settings_json`, e.g. the decontamination settings), each
    spec and each of its files' keys and bytes: the version that pins the eval-suite asset.
    Paths enter only relative to each spec's root, so moving the folder keeps the hash. Files
    are read in chunks: a Parquet export may be larger than memory should hold."""
    digest = hashlib.sha256(settings_json.encode())
    for spec in specs:
        described = spec.model_dump(exclude={"path"}, exclude_none=True)
        digest.update(json.dumps(described, sort_keys=True).encode())
        for key, path in benchmark_files(spec, base_dir):
            digest.update(f"\0{key}\0{path.stat().st_size}\0".encode())
            with path.open("rb") as handle:
                while chunk := handle.read(_HASH_CHUNK):
                    digest.update(chunk)
    return digest.hexdigest()
