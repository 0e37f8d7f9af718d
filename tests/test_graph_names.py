"""Every asset name is typed once, in `curation/graph.py`: the product code names assets through
its constants and lists, never as a string literal.

The scan reads the syntax tree of every product module and flags each string literal equal to an
asset name, except where the same word is a column, a JSON key or a selection rule: a dict key,
a subscript (`row["language"]`), a schema field (`pa.field("language", ...)`,
`("language", pa.string())`), a list of words that are not all asset names (columns, a table's
header), a selection rule, or a docstring.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from curation import graph
from tests.conftest import REPO

PRODUCT = ("curation", "corpus_assets", "checks", "resources", "partitions", "corpus_cli")
ASSET_NAMES = frozenset(graph.PIPELINE_ORDER)
# Calls whose string arguments name columns, fields or rules, not assets.
COLUMN_CALLS = frozenset({"field", "_schema", "schema", "column", "rename_columns", "select",
                          "group_by", "sort_by", "drop_columns", "append_column",
                          "set_column", "get_field_index", "fail", "get", "pop",
                          "setdefault", "col"})
# The selection rules share their names with the stages that compute them (`curation.mix`'s
# `RULES` and the report's funnel, which names rules and stages alike): words, not assets.
RULE_TUPLES = {("curation/mix.py", "RULES"), ("curation/report.py", "BEFORE_QUALITY"),
               ("curation/report.py", "PIPELINE_STAGES")}


def _call_name(node: ast.Call) -> str:
    return node.func.attr if isinstance(node.func, ast.Attribute) else getattr(
        node.func, "id", "")


def _is_docstring(node: ast.Constant, parent: ast.AST) -> bool:
    return isinstance(parent, ast.Expr)


def _is_word_list(parent: ast.AST) -> bool:
    """A list of words, or a call's words, with one that is no asset name
    (`["doc_id", "language"]`, `not_null("doc_id", "language")`, a table's header): columns or
    labels. A list of assets holds asset names only."""
    elements = parent.elts if isinstance(parent, (ast.List, ast.Tuple, ast.Set)) else \
        parent.args if isinstance(parent, ast.Call) else []
    return any(isinstance(element, ast.Constant) and isinstance(element.value, str)
               and element.value not in ASSET_NAMES for element in elements)


def _is_schema_entry(parent: ast.AST) -> bool:
    """`("language", pa.string())`: a (name, type) pair of a schema."""
    return isinstance(parent, ast.Tuple) and len(parent.elts) == 2 and isinstance(
        parent.elts[1], ast.Call) and isinstance(parent.elts[1].func, ast.Attribute) and \
        isinstance(parent.elts[1].func.value, ast.Name) and parent.elts[1].func.value.id == "pa"


def _is_label_pair(node: ast.Constant, parent: ast.AST) -> bool:
    """`("documents", summary["documents"])`: a label beside the value it names."""
    return isinstance(parent, ast.Tuple) and len(parent.elts) == 2 and \
        parent.elts[0] is node and isinstance(parent.elts[1], ast.Subscript)


def _compares_a_column(parent: ast.AST) -> bool:
    """`pl.col("rule") == "language"`, `row["rule"] == "language"`: a value of a column."""
    return isinstance(parent, ast.Compare) and any(
        isinstance(side, ast.Subscript) or (isinstance(side, ast.Call)
                                            and _call_name(side) == "col")
        for side in (parent.left, *parent.comparators))


def _assigned_name(parents: list[ast.AST]) -> str | None:
    for node in reversed(parents):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            return names[0] if names else None
    return None


def _allowed(node: ast.Constant, parents: list[ast.AST], path: str) -> bool:
    parent = parents[-1]
    if isinstance(parent, ast.Dict) and any(key is node for key in parent.keys):
        return True
    if isinstance(parent, ast.Subscript) and parent.slice is node:
        return True
    if _is_docstring(node, parent) or _is_word_list(parent) or _is_schema_entry(parent) or \
            _is_label_pair(node, parent) or _compares_a_column(parent):
        return True
    if isinstance(parent, ast.Call) and _call_name(parent) in COLUMN_CALLS:
        return True
    if any(isinstance(node, ast.keyword) and node.arg in {"columns", "column", "keys"}
           for node in parents[-2:]):
        return True
    return (path, _assigned_name(parents)) in RULE_TUPLES


def asset_name_literals(root: Path) -> list[str]:
    """`path:line: 'name'` for each asset name typed as a string in the product code."""
    found = []
    for package in PRODUCT:
        for file in sorted((root / package).rglob("*.py")):
            path = file.relative_to(root).as_posix()
            if path == "curation/graph.py" or path.startswith("curation/sample/"):
                continue
            found += _scan(ast.parse(file.read_text(), path), path)
    return found


def _scan(tree: ast.AST, path: str) -> list[str]:
    found = []
    stack: list[tuple[ast.AST, list[ast.AST]]] = [(tree, [])]
    while stack:
        node, parents = stack.pop()
        if isinstance(node, ast.Constant) and node.value in ASSET_NAMES and \
                not _allowed(node, parents, path):
            found.append(f"{path}:{node.lineno}: {node.value!r}")
        stack += [(child, [*parents, node]) for child in ast.iter_child_nodes(node)]
    return sorted(found)


def test_no_asset_name_is_typed_outside_the_graph_module() -> None:
    found = asset_name_literals(REPO)
    assert not found, "asset names typed as strings (use curation.graph):\n" + "\n".join(found)


def test_the_scan_finds_a_typed_asset_name(tmp_path) -> None:
    """The scan is not blind: the ways an asset name is typed by hand are each found, the
    column and rule uses of the same words are not."""
    code = '''
LAYOUT = PartitionLayout(store, "documents", partition)
DEPS = ["language", "heuristics"]
spec = AssetSpec("scrubbed", deps=[DOCUMENTS])
key = AssetKey("mix")
if asset == "tokenizer":
    pass
columns = ["doc_id", "language"]
part = layout.read_part(0, columns=["language"])
row = {"documents": 3}
value = row["shards"]
schema = pa.schema([pa.field("language", pa.string()), ("heuristics", pa.bool_())])
'''
    assert _scan(ast.parse(code), "x.py") == sorted(
        ["x.py:2: 'documents'", "x.py:3: 'language'", "x.py:3: 'heuristics'",
         "x.py:4: 'scrubbed'", "x.py:5: 'mix'", "x.py:6: 'tokenizer'"])


def test_every_asset_of_the_definitions_is_named_in_the_graph_module() -> None:
    from corpus_assets.definitions import defs

    keys = {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()}
    assert keys == ASSET_NAMES
    assert len(graph.PIPELINE_ORDER) == len(ASSET_NAMES)


def test_the_pipeline_order_is_a_dependency_order_of_the_definitions() -> None:
    from dagster import AssetKey

    from corpus_assets.definitions import defs

    asset_graph = defs.resolve_asset_graph()
    position = {name: index for index, name in enumerate(graph.PIPELINE_ORDER)}
    for name in graph.PIPELINE_ORDER:
        for parent in asset_graph.get(AssetKey(name)).parent_keys:
            assert position[parent.to_user_string()] < position[name], (parent, name)


def test_every_asset_module_is_loaded_by_the_definitions() -> None:
    """A module of `corpus_assets/` that defines an asset (calls Dagster's `asset` or
    `multi_asset`) is one of `ASSET_MODULES`, so no stage is left out of the code location."""
    defining = {file.stem for file in (REPO / "corpus_assets").glob("*.py")
                if re.search(r"(?<![.\w])(multi_)?asset\(", file.read_text())}
    assert defining == set(graph.ASSET_MODULES)
