"""Code-aware decontamination: HumanEval planted in code with renamed identifiers and reformatted
layout, and false flags on real code that does not hold it (the interpreter's standard library).

    .venv/bin/python -m benchmarks.code_decontamination [--ngrams 10,15,20,25,30] [--files N]

For each HumanEval item the plant is its prompt and canonical solution with every identifier
that is not a builtin renamed (functions, parameters, locals) and the layout rewritten by
`ast.unparse` (quotes, spacing, line breaks, blank lines, comments gone); a second plant is the
solution body alone, renamed, under a renamed signature and no docstring. Each plant sits in
the middle of a real standard-library module. The table gives, per code n-gram size, the
share of plants caught by the code index and by the word index the web uses, the standard
library files flagged (false flags: CPython's own code holds no HumanEval solution), and the
scan speed.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import gzip
import json
import random
import statistics
import sysconfig
import time
from pathlib import Path

from curation.decontamination import EvalIndex
from curation.evals import EvalItem

HUMANEVAL = Path("../shared/data/evals/humaneval/HumanEval.jsonl.gz")
_BUILTINS = frozenset(dir(builtins))


def humaneval_records(path: Path = HUMANEVAL) -> list[dict[str, str]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def humaneval_items(records: list[dict[str, str]]) -> list[EvalItem]:
    """The items as `curation.evals` loads the `humaneval` layout: prompt and solution."""
    return [EvalItem("humaneval", f"HumanEval.jsonl.gz:{n}", r["prompt"] + r["canonical_solution"])
            for n, r in enumerate(records)]


class _Renamer(ast.NodeTransformer):
    """Every name bound in the code (functions, parameters, variables, imports' aliases aside)
    renamed consistently; builtins and attributes stay, as a working program needs."""

    def __init__(self, seed: int) -> None:
        self.names: dict[str, str] = {}
        self.rng = random.Random(seed)

    def new(self, name: str) -> str:
        if name in _BUILTINS:
            return name
        if name not in self.names:
            self.names[name] = f"v{self.rng.randrange(10**6)}_{len(self.names)}"
        return self.names[name]

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self.new(node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = self.new(node.arg)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        node.name = self.new(node.name)
        self.generic_visit(node)
        return node


def _imported(tree: ast.Module) -> set[str]:
    return {alias.asname or alias.name.split(".")[0] for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom) for alias in node.names}


def renamed(source: str, seed: int, keep_docstrings: bool = True) -> str:
    """`source` with its own names renamed and its layout rewritten by `ast.unparse` (imported
    modules keep their names: `math.sqrt` must still mean it)."""
    tree = ast.parse(source)
    renamer = _Renamer(seed)
    for name in _imported(tree):
        renamer.names[name] = name
    if not keep_docstrings:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and ast.get_docstring(node) is not None:
                node.body = node.body[1:] or [ast.Pass()]
    return ast.unparse(renamer.visit(tree))


STDLIB = Path(sysconfig.get_paths()["stdlib"])


def stdlib_files(limit: int | None = None) -> list[Path]:
    """The interpreter's own Python modules (tests and site-packages left out), sorted."""
    root = STDLIB
    files = sorted(p for p in root.rglob("*.py")
                   if not {"site-packages", "test", "tests", "idlelib"} & set(p.parts))
    return files[:limit] if limit else files


def _plant(host: str, plant: str) -> str:
    """`plant` before the host's top-level statement nearest its middle (not inside a string)."""
    lines = host.splitlines()
    try:
        starts = [node.lineno - 1 for node in ast.parse(host).body]
    except SyntaxError:
        starts = [0]
    middle = min(starts or [0], key=lambda line: abs(line - len(lines) // 2))
    return "\n".join([*lines[:middle], "", plant, "", *lines[middle:]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ngrams", default="10,15,20,25,30")
    parser.add_argument("--files", type=int, default=None, help="standard-library files")
    args = parser.parse_args()
    records = humaneval_records()
    items = humaneval_items(records)
    files = stdlib_files(args.files)
    hosts = [p.read_text(encoding="utf-8", errors="replace") for p in files]
    false_flags: dict[tuple[str, int], list] = {}
    whole = [_plant(hosts[n % len(hosts)], renamed(r["prompt"] + r["canonical_solution"], n))
             for n, r in enumerate(records)]
    bodies = [_plant(hosts[n % len(hosts)],
                     renamed(r["prompt"] + r["canonical_solution"], n, keep_docstrings=False))
              for n, r in enumerate(records)]
    words = EvalIndex.build(items, 13)
    print(f"{len(items)} HumanEval items, {len(hosts)} standard-library files "
          f"({sum(map(len, hosts)) / 1e6:.1f} M characters)")
    print(f"{'index':<10}{'n':>4}{'whole caught':>14}{'body caught':>13}{'stdlib flagged':>16}"
          f"{'MB/s':>8}")
    rows = [("words", 13, words)] + [("code", n, EvalIndex.build(items, n, "code"))
                                     for n in map(int, args.ngrams.split(","))]
    for name, ngram, index in rows:
        caught = [sum(bool(index.document_hits(0, text)) for text in plants) / len(plants)
                  for plants in (whole, bodies)]
        speeds, flags = [], []
        for _ in range(3):
            start = time.perf_counter()
            flags = [index.document_hits(n, text) for n, text in enumerate(hosts)]
            speeds.append(sum(map(len, hosts)) / 1e6 / (time.perf_counter() - start))
        flagged = [hits for hits in flags if hits]
        print(f"{name:<10}{ngram:>4}{caught[0]:>14.1%}{caught[1]:>13.1%}"
              f"{len(flagged):>10} of {len(hosts):<4}{statistics.median(speeds):>8.1f}")
        false_flags[(name, ngram)] = flagged
    for (name, ngram), flagged in false_flags.items():
        for hits in flagged[:3]:
            print(f"  {name} n={ngram}: {files[hits[0].doc].name} holds "
                  f"{hits[0].item_id} at {hits[0].text[:80]!r}")


if __name__ == "__main__":
    main()
