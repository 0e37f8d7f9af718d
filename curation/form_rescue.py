"""Main text that trafilatura deletes with a `<form>`: the second pass `Extractor` runs when a
page's text holds no running text but one of its forms does.

trafilatura 2.3.1 deletes every `<form>` with its whole subtree, unless one form holds over half
of the page's text (`htmlprocessing._handle_forms`, for ASP.NET pages wrapped in one form). A
shop page whose product description sits inside the cart form loses the description; when the
form's closing tag is misnested, lxml keeps it open to the end of the column. All 29 Japanese
ClueWeb09 pages in `../shared/data/warc/non_cc/` are such pages: trafilatura keeps a ranking
sidebar or nothing (benchmarks/results/extraction_languages.md). The rescue applies
trafilatura's own demotion (`<form>` to `<div>`) to every form and extracts again, keeping the
new text only when it holds more running text. It fired on none of the 181 English gold pages
(word F1 unchanged) and changed none of the 152 other real pages.
"""

from __future__ import annotations

import re
from typing import Any

# A line of running text has a sentence end and at least this many characters (fewer for lines
# mostly in CJK scripts, which carry more per character).
_SENTENCE_END = re.compile(r"[\u3002\uff0e\uff01\uff1f]|[.!?](?:[\s\"')\]]|$)")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uff66-\uff9f]")
MIN_PROSE_CHARS = 80
MIN_PROSE_CHARS_CJK = 25
_BLOCKS = ("p", "div", "td", "th", "li", "dd", "dt", "blockquote", "pre", "h1", "h2", "h3", "h4",
           "h5", "h6", "table", "ul", "ol", "dl", "section", "article")


def mostly_cjk(line: str) -> bool:
    return 2 * len(_CJK.findall(line)) >= len(line)


def prose_lines(text: str) -> list[str]:
    """The lines of `text` that read as running text; a table row of several cells (`| a | b |`
    in trafilatura's text, tab-separated in resiliparse's) does not."""
    found = []
    for raw in text.splitlines():
        row = raw.strip()
        if row.startswith("| "):
            row = row[2:].removesuffix("|").strip()
        if "\t" in row or " | " in row:
            continue
        line = " ".join(row.split())
        least = MIN_PROSE_CHARS_CJK if mostly_cjk(line) else MIN_PROSE_CHARS
        if len(line) >= least and _SENTENCE_END.search(line):
            found.append(line)
    return found


def running_chars(text: str) -> int:
    return sum(map(len, prose_lines(text)))


def form_has_running_text(form: Any) -> bool:
    """Whether a block inside `form` with no block inside it (a paragraph, a cell, a list item)
    reads as running text."""
    for block in form.iter(*_BLOCKS):
        if next(block.iterdescendants(*_BLOCKS), None) is None and \
                prose_lines(" ".join(block.text_content().split())):
            return True
    return False


def extract_keeping_forms(html: str, url: str | None, options: Any, cache: Any,
                          only_with_running_text: bool = True) -> str | None:
    """`trafilatura.extract` with `options` (`TrafilaturaSettings`) and `cache` on the page with
    every `<form>` made a `<div>`; None, without extracting, when no form holds running text
    (`only_with_running_text`). The tree comes from trafilatura's own `load_html`, so the parse
    (and libxml2's repair of misnested tags) is the one `extract` makes of the string."""
    import trafilatura
    from trafilatura.utils import load_html

    tree = load_html(html)
    if tree is None:
        return None
    forms = list(tree.iter("form"))
    if only_with_running_text and not any(map(form_has_running_text, forms)):
        return None
    for form in forms:
        form.tag = "div"
    return trafilatura.extract(
        tree, url=url, favor_precision=options.favor_precision,
        include_comments=options.include_comments, include_tables=options.include_tables,
        deduplicate=cache if options.deduplicate else False)
