"""The eval sets of the ablation gate: multiple-choice items parsed from the llm-foundry
exports in `shared/data/evals`, or read through a benchmark's field mapping. No torch.

**Benchmarks** (`SUPPORTED_BENCHMARKS`): arc_easy, arc_challenge, openbookqa, piqa, copa, boolq
and winogrande as stored, and commonsense_qa and siqa, whose `choices` hold only letters, with
their answer texts rebuilt from the lettered "Choices:" block of the query (the block is removed
from the context). Items per benchmark are capped (`EvalSettings.max_items`) by a keyed hash of
the line number with its own seed, so every recipe and every training seed is scored on the
same items.

**Declared benchmarks** (`eval_sets`): a benchmark of pipeline.yaml's
`decontamination.benchmarks` declared with `fields` that name choices is scored by its name too
(it wins over a built-in of the same name), its prompt the context and each choice the
continuation after a space, so the sets a lab decontaminates against are the sets it scores.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from curation.evals import EvalBenchmark, MappedRecord, benchmark_files, read_mapped
from curation.loader import keyed_hash
from curation.proxy.reports import SUPPORTED_BENCHMARKS


@dataclass(frozen=True)
class MultipleChoiceItem:
    """One item: the context, the choices and the gold choice's index.

    Normally choice `i` is scored as the continuation of `context`. With `continuation` set
    (partial scoring, Winogrande), choice `i` is appended to `context` instead and the shared
    `continuation` is what gets scored after it.
    """

    context: str
    choices: tuple[str, ...]
    gold: int
    continuation: str = ""
    item_id: str = ""

    def __post_init__(self) -> None:
        if len(self.choices) < 2:
            raise ValueError(f"item {self.item_id!r}: needs at least two choices")
        if not 0 <= self.gold < len(self.choices):
            raise ValueError(f"item {self.item_id!r}: gold {self.gold} is out of range")

    def pairs(self) -> list[tuple[str, str]]:
        """(conditioning text, scored text) per choice."""
        if self.continuation:
            return [(self.context + choice, self.continuation) for choice in self.choices]
        return [(self.context, choice) for choice in self.choices]


# The file of each built-in parser's benchmark in an llm-foundry export folder (`evals_dir`).
_BENCHMARK_PATHS = {
    "arc_easy": "arc_easy/arc_easy.jsonl", "arc_challenge": "arc_challenge/arc_challenge.jsonl",
    "openbookqa": "openbookqa/openbook_qa.jsonl", "piqa": "piqa/piqa.jsonl",
    "copa": "copa/copa.jsonl", "boolq": "boolq/boolq.jsonl",
    "winogrande": "winogrande/winogrande.jsonl",
    "commonsense_qa": "commonsense_qa/commonsense_qa.jsonl", "siqa": "siqa/siqa.jsonl",
}
_CHOICE_BLOCK = re.compile(r"\nChoices:\n((?:[A-Z]\. .*\n)+)")
_CHOICE_LINE = re.compile(r"^([A-Z])\. (.*)$", re.MULTILINE)
# Context suffix per benchmark whose query is a bare question (the llm-foundry delimiter).
_ANSWER_SUFFIX = {"arc_easy": "\nAnswer:", "arc_challenge": "\nAnswer:", "piqa": "\nAnswer:",
                  "boolq": "\nAnswer:", "openbookqa": "", "copa": ""}


def _field(record: dict[str, Any], name: str, kind: type, where: str) -> Any:
    value = record.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"{where}: field {name!r} is missing or not a {kind.__name__}")
    return value


def _gold(record: dict[str, Any], count: int, where: str) -> int:
    gold = _field(record, "gold", int, where)
    if not 0 <= gold < count:
        raise ValueError(f"{where}: gold {gold} is out of range for {count} choices")
    return gold


def _strings(values: list[Any], where: str) -> list[str]:
    if not all(isinstance(value, str) for value in values):
        raise ValueError(f"{where}: choices must be strings")
    return values


def parse_item(benchmark: str, record: dict[str, Any], item_id: str = "") -> MultipleChoiceItem:
    """A `MultipleChoiceItem` from one record of a supported benchmark's JSONL file."""
    where = f"{benchmark} {item_id}".strip()
    if benchmark == "winogrande":
        options = _strings(_field(record, "context_options", list, where), where)
        continuation = _field(record, "continuation", str, where).strip()
        return MultipleChoiceItem("", tuple(o.rstrip() for o in options),
                                  _gold(record, len(options), where), " " + continuation,
                                  item_id)
    query = _field(record, "query", str, where)
    choices = _strings(_field(record, "choices", list, where), where)
    gold = _gold(record, len(choices), where)
    if benchmark in ("commonsense_qa", "siqa"):
        block = _CHOICE_BLOCK.search(query)
        if block is None:
            raise ValueError(f"{where}: no lettered 'Choices:' block in the query")
        lettered = dict(_CHOICE_LINE.findall(block.group(1)))
        missing = [letter for letter in choices if letter not in lettered]
        if missing:
            raise ValueError(f"{where}: choices {missing} are not in the 'Choices:' block")
        context = (query[: block.start()] + "\n" + query[block.end():]).rstrip()
        return MultipleChoiceItem(context, tuple(" " + lettered[c].strip() for c in choices),
                                  gold, item_id=item_id)
    if benchmark not in _ANSWER_SUFFIX:
        raise ValueError(f"benchmark {benchmark!r} has no multiple-choice parser; "
                         f"supported: {list(SUPPORTED_BENCHMARKS)}")
    context = query.rstrip() + _ANSWER_SUFFIX[benchmark]
    return MultipleChoiceItem(context, tuple(" " + c.strip() for c in choices), gold,
                              item_id=item_id)


def benchmark_path(benchmark: str, evals_dir: str | Path) -> Path:
    """The JSONL file of a supported benchmark in a folder laid out like shared/data/evals."""
    if benchmark not in SUPPORTED_BENCHMARKS:
        raise ValueError(f"benchmark {benchmark!r} has no multiple-choice parser; "
                         f"supported: {list(SUPPORTED_BENCHMARKS)}")
    return Path(evals_dir) / _BENCHMARK_PATHS[benchmark]


def load_multiple_choice(
    benchmark: str,
    evals_dir: str | Path,
    max_items: int | None = None,
    selection_seed: int = 0,
) -> list[MultipleChoiceItem]:
    """The items of one benchmark in file order; with `max_items`, the `max_items` items whose
    line numbers have the lowest keyed hash (seeded by `selection_seed`), still in file order.
    Item ids are ``benchmark:line`` (1-based physical line)."""
    path = benchmark_path(benchmark, evals_dir)
    items = []
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}: line {line_no}: not valid JSON ({error.msg})") from None
            items.append(parse_item(benchmark, record, f"{benchmark}:{line_no}"))
    numbers = [int(item.item_id.rsplit(":", 1)[1]) for item in items]
    return _capped(items, numbers, benchmark, max_items, selection_seed)


def _capped(items: list[MultipleChoiceItem], numbers: Sequence[int], benchmark: str,
            max_items: int | None, selection_seed: int) -> list[MultipleChoiceItem]:
    """The `max_items` items whose numbers have the lowest keyed hash, in their order."""
    if max_items is None or len(items) <= max_items:
        return items
    keys = keyed_hash(np.array(numbers, dtype=np.int64), "proxy-eval", benchmark, selection_seed)
    chosen = np.sort(np.argsort(keys, kind="stable")[:max_items])
    return [items[i] for i in chosen]


def _choice_item(benchmark: str, record: MappedRecord) -> MultipleChoiceItem:
    assert record.gold is not None  # a mapping with choices always gives the gold's index
    return MultipleChoiceItem(record.prompt, tuple(" " + c.strip() for c in record.choices),
                              record.gold, item_id=f"{benchmark}:{record.item_id}")


def load_mapped_multiple_choice(
    spec: EvalBenchmark, max_items: int | None = None, selection_seed: int = 0
) -> list[MultipleChoiceItem]:
    """The items of a benchmark declared with a multiple-choice field mapping, in file order:
    the prompt is the context, each choice is scored after a space. Item ids are
    ``benchmark:key:row``; capping hashes the item's position (its row in a one-file export)."""
    if spec.fields is None or not spec.fields.has_choices:
        raise ValueError(f"benchmark {spec.name!r}: its fields name no choices to score")
    items = [_choice_item(spec.name, record) for record in read_mapped(spec)]
    return _capped(items, range(1, len(items) + 1), spec.name, max_items, selection_seed)


EvalSetLoader = Callable[[int | None, int], list[MultipleChoiceItem]]


def eval_sets(names: Sequence[str], evals_dir: str | Path | None,
              declared: Sequence[EvalBenchmark] = ()) -> dict[str, EvalSetLoader]:
    """A loader (max_items, selection_seed) per benchmark, found before a proxy trains so
    that a misnamed benchmark or a missing file fails first: a declared benchmark whose fields
    name choices, else a built-in parser's file below `evals_dir`."""
    mapped = {spec.name: spec for spec in declared
              if spec.fields is not None and spec.fields.has_choices}
    loaders: dict[str, EvalSetLoader] = {}
    for name in names:
        if name in mapped:
            benchmark_files(mapped[name])  # raises when no file is there
            loaders[name] = partial(load_mapped_multiple_choice, mapped[name])
        elif name in SUPPORTED_BENCHMARKS and evals_dir is not None:
            if not benchmark_path(name, evals_dir).is_file():
                raise FileNotFoundError(f"benchmark {name!r}: no file at "
                                        f"{benchmark_path(name, evals_dir)}")
            loaders[name] = partial(load_multiple_choice, name, evals_dir)
        else:
            raise ValueError(
                f"benchmark {name!r} is neither declared in pipeline.yaml with fields that "
                f"name choices nor a built-in parser's ({list(SUPPORTED_BENCHMARKS)}) read "
                "from evals_dir")
    return loaders
