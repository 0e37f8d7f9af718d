"""Exact, faster stand-ins for trafilatura's tree-pruning XPath expressions.

trafilatura 2.3.1 prunes boilerplate with XPath expressions whose `re:test(...)` predicates are
EXSLT regular expressions, which lxml answers by calling back into Python once per element and
test. On 500 pages of the English-only benchmark corpus those nine expressions took 48% of
`trafilatura.extract`'s time (4.1 s of 8.5 s); the stand-ins answer them 4.2x faster
(`benchmarks/trafilatura_xpath.py`). They walk the same elements with lxml's C iterator and
test the same attributes with the same regular expressions (taken from the expressions' own
text), returning the same elements in the same document order.

They replace an expression only when its text is the one they were written for (by sha256),
so a trafilatura upgrade that changes an expression keeps the original. `install()` is
idempotent; `uninstalled()` restores the originals for a comparison.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from lxml.etree import Element, XPath, _Element

log = logging.getLogger(__name__)

Matcher = Callable[[_Element], list[_Element]]

# The elements most of the expressions test: `.//*[self::div or self::item or ...]`.
_BLOCK_TAGS = ("div", "item", "list", "p", "section", "span")
_RE_TEST = re.compile(r"re:test\(@[\w|@-]+, '([^']*)'\)")


def _first_of(element: _Element, first: str, second: str) -> str:
    """XPath's string value of `@first|@second`: the one earlier in the source, or ''."""
    a, b = element.get(first), element.get(second)
    if a is None:
        return b or ""
    if b is None:
        return a
    for key in element.keys():  # noqa: SIM118 - keys() is the attributes' source order
        if key == first:
            return a
        if key == second:
            return b
    return a


def _has(value: str | None, pattern: re.Pattern[str]) -> bool:
    return value is not None and pattern.search(value) is not None


def _overall_discard(patterns: list[re.Pattern[str]]) -> Matcher:
    cookie, by_id, by_class = patterns

    def match(tree: _Element) -> list[_Element]:
        found = []
        for element in tree.iterdescendants(_BLOCK_TAGS):
            get = element.get
            role, component = get("role"), get("data-component")
            if (get("data-lp-replacement-content") is not None
                    or (role is not None and "nav" in role.replace("N", "n"))
                    or (component is not None and "MostPopularStories" in component)
                    or cookie.search(_first_of(element, "id", "class"))
                    or _has(get("id"), by_id) or _has(get("class"), by_class)):
                found.append(element)
        return found

    return match


def _hidden_or_comment_chrome(patterns: list[re.Pattern[str]]) -> Matcher:
    hidden, by_id, by_class = patterns

    def match(tree: _Element) -> list[_Element]:
        found = []
        for element in tree.iterdescendants(Element):  # `*`: elements, not comments
            if not element.keys():  # noqa: SIM118 - no attribute, no match: the common case
                continue
            get = element.get
            style, css_class = get("style"), get("class")
            if (css_class == "comments-title" or get("aria-hidden") == "true"
                    or _first_of(element, "id", "class").startswith("reply-")
                    or hidden.search(_first_of(element, "id", "style"))
                    or (style is not None and ("display:none" in style or "display: none" in style))
                    or _has(get("id"), by_id) or _has(css_class, by_class)):
                found.append(element)
        return found

    return match


def _comment_sections(patterns: list[re.Pattern[str]], lists: bool) -> Matcher:
    by_id, by_class = patterns[:2]
    list_id, list_class = patterns[2:] if lists else (by_id, by_class)
    tags = ("div", "list", "section", "details", "ol", "ul") if lists else \
        ("div", "list", "section", "details")

    def match(tree: _Element) -> list[_Element]:
        found = []
        for element in tree.iterdescendants(tags):
            element_id, css_class = element.get("id"), element.get("class")
            if not (_has(element_id, by_id) or _has(css_class, by_class)):
                continue
            if element.tag not in ("ol", "ul") or _has(element_id, list_id) \
                    or _has(css_class, list_class):
                found.append(element)
        return found

    return match


def _appended_articles(patterns: list[re.Pattern[str]]) -> Matcher:
    by_id, by_class, box_id, box_class = patterns

    def match(tree: _Element) -> list[_Element]:
        found = []
        for element in tree.iterdescendants("div", "section", "aside"):
            element_id, css_class = element.get("id"), element.get("class")
            if not (_has(element_id, by_id) or _has(css_class, by_class)):
                continue
            if next(element.iterdescendants("h1"), None) is None or _has(element_id, box_id) \
                    or _has(css_class, box_class):
                found.append(element)
        return found

    return match


def _class_contains(tags: tuple[str, ...], token: str) -> Matcher:
    def match(tree: _Element) -> list[_Element]:
        return [element for element in tree.iterdescendants(tags)
                if token in (element.get("class") or "")]

    return match


def _bottom_or_link(patterns: list[re.Pattern[str]]) -> Matcher:
    bottom, link = patterns

    def match(tree: _Element) -> list[_Element]:
        found = []
        for element in tree.iterdescendants(_BLOCK_TAGS):
            first = _first_of(element, "id", "class")
            style = element.get("style")
            if bottom.search(first) or link.search(first) \
                    or (style is not None and "border" in style):
                found.append(element)
        return found

    return match


def _id_or_class_contains(token: str, fold: tuple[str, str] | None = None) -> Matcher:
    def folded(value: str | None) -> str:
        return "" if value is None else value.replace(*fold) if fold else value

    def match(tree: _Element) -> list[_Element]:
        return [element for element in tree.iterdescendants(_BLOCK_TAGS)
                if token in folded(element.get("id")) or token in folded(element.get("class"))]

    return match


@dataclass(frozen=True)
class _StandIn:
    """One expression's replacement: where it lives, which text it replaces, how it matches."""

    table: str
    index: int
    sha256: str  # the first 16 hex digits of the expression text's sha256
    build: Callable[[list[re.Pattern[str]]], Matcher]


_STAND_INS = (
    _StandIn("OVERALL_DISCARD_XPATH", 0, "a837e58a1b1ea116", _overall_discard),
    _StandIn("OVERALL_DISCARD_XPATH", 1, "c1d5b70b8cd03783", _hidden_or_comment_chrome),
    _StandIn("REMOVE_COMMENTS_XPATH", 0, "5d97216ca15d0558",
             lambda p: _comment_sections(p, lists=False)),
    _StandIn("REMOVE_COMMENTS_AND_LISTS_XPATH", 0, "9cc18d34e6e2d258",
             lambda p: _comment_sections(p, lists=True)),
    _StandIn("RAW_TREE_PRUNE_XPATH", 0, "01e7c660fd6406f2", _appended_articles),
    _StandIn("RAW_TREE_PRUNE_XPATH", 1, "3c7afe92279543d5",
             lambda p: _class_contains(("div", "section", "aside"), "elementor-share-buttons")),
    _StandIn("PRECISION_DISCARD_XPATH", 1, "53d31ea1df47920a", _bottom_or_link),
    _StandIn("TEASER_DISCARD_XPATH", 0, "ebb02f066626551d",
             lambda p: _id_or_class_contains("teaser", fold=("T", "t"))),
    _StandIn("DISCARD_IMAGE_ELEMENTS", 0, "cb1ab981e44913f7",
             lambda p: _id_or_class_contains("caption")),
)


class FastXPath:
    """Called like the `XPath` it replaces (`path` kept for anyone who reads it)."""

    def __init__(self, original: XPath, match: Matcher) -> None:
        self.original = original
        self.path = original.path
        self._match = match

    def __call__(self, tree: _Element) -> list[_Element]:
        if not isinstance(tree, _Element):  # an ElementTree or document: the original copes
            return self.original(tree)
        return self._match(tree)


def _digest(path: str) -> str:
    return hashlib.sha256(path.encode()).hexdigest()[:16]


def _patterns(path: str) -> list[re.Pattern[str]] | None:
    """The expression's own `re:test` patterns, as lxml compiles them (Python `re`)."""
    patterns = [re.compile(text) for text in _RE_TEST.findall(path)]
    # A pattern matching '' would make an absent attribute match; the stand-ins skip absent ones.
    return None if any(pattern.search("") for pattern in patterns) else patterns


def _tables() -> Iterator[tuple[_StandIn, list]]:
    from trafilatura import xpaths

    for stand_in in _STAND_INS:
        yield stand_in, getattr(xpaths, stand_in.table)


_warned: set[tuple[str, int]] = set()
_suspended = 0  # inside `uninstalled()`, `install()` leaves trafilatura's expressions alone


def install() -> int:
    """Replace each expression whose text is the expected one; how many are replaced."""
    if _suspended:
        return 0
    replaced = 0
    for stand_in, table in _tables():
        current = table[stand_in.index]
        if isinstance(current, FastXPath):
            replaced += 1
            continue
        patterns = _patterns(current.path) if isinstance(current, XPath) else None
        if patterns is None or _digest(current.path) != stand_in.sha256:
            if (stand_in.table, stand_in.index) not in _warned:
                _warned.add((stand_in.table, stand_in.index))
                log.warning("trafilatura's %s[%d] is not the expression its stand-in was "
                            "written for; it stays as it is", stand_in.table, stand_in.index)
            continue
        table[stand_in.index] = FastXPath(current, stand_in.build(patterns))
        replaced += 1
    return replaced


@contextmanager
def uninstalled() -> Iterator[None]:
    """trafilatura's own expressions for the block's duration (for a comparison)."""
    global _suspended
    swapped = []
    for stand_in, table in _tables():
        current = table[stand_in.index]
        if isinstance(current, FastXPath):
            table[stand_in.index] = current.original
            swapped.append((table, stand_in.index, current))
    _suspended += 1
    try:
        yield
    finally:
        _suspended -= 1
        for table, index, fast in swapped:
            table[index] = fast
