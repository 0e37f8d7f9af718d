"""No import circle anywhere in the product code, between modules of any package.

import-linter's contracts (pyproject.toml, run by scripts/test.sh) hold the layers and the
circles among siblings of one package; a circle through modules of several root packages (a
check importing an asset whose package imports the check) is outside what they can say, so
this test builds the whole graph with grimp, import-linter's own graph library. Imports inside
functions count: a lazy import is still a dependency.
"""

from __future__ import annotations

from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("curation", "corpus_assets", "checks", "resources", "partitions", "corpus_cli")


def _graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, cache_dir=None)


def _modules_on_disk() -> set[str]:
    found = set()
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            found.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def _strongly_connected(graph: grimp.ImportGraph) -> list[list[str]]:
    """Tarjan's components of more than one module, iteratively (the graph is deep)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(
                        graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _one_cycle(graph: grimp.ImportGraph, component: list[str]) -> list[str]:
    """A shortest circle through the component's first module, each import with its line."""
    start = component[0]
    members = set(component)
    for child in sorted(graph.find_modules_directly_imported_by(start) & members):
        back = graph.find_shortest_chain(importer=child, imported=start)
        if back:
            chain = [start, *back]
            return [f"{a} -> {b} (line {_line(graph, a, b)})"
                    for a, b in zip(chain, chain[1:], strict=False)]
    return component


def _line(graph: grimp.ImportGraph, importer: str, imported: str) -> int:
    return graph.get_import_details(importer=importer, imported=imported)[0]["line_number"]


def test_every_product_module_is_in_the_graph():
    """A folder without `__init__.py` is a namespace package that grimp (and import-linter)
    skip: its modules would escape every contract."""
    assert _modules_on_disk() - set(_graph().modules) == set()


def test_no_import_circle_between_modules():
    graph = _graph()
    cycles = ["\n  ".join(_one_cycle(graph, component))
              for component in _strongly_connected(graph)]
    assert not cycles, "import circles:\n  " + "\n\n  ".join(cycles)


def test_no_kernel_imports_the_stage_floor():
    """The kernels are the layer below `curation.stages` (import-linter skips this part of its
    kernel contract: the stage floor is inside `curation`, and overlapping modules are not
    compared), so the rule is checked here: no module of `curation` outside the stage floor
    imports it."""
    graph = _graph()
    stages = {m for m in graph.modules
              if m == "curation.stages" or m.startswith("curation.stages.")}
    kernels = {m for m in graph.modules if m.startswith("curation") and m not in stages}
    found = sorted(f"{kernel} -> {stage} (line {_line(graph, kernel, stage)})"
                   for kernel in kernels
                   for stage in graph.find_modules_directly_imported_by(kernel) & stages)
    assert not found, "kernels importing the stage floor:\n  " + "\n  ".join(found)
