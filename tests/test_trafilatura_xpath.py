"""The stand-ins of curation/trafilatura_xpath.py select exactly the elements trafilatura's own
XPath expressions select, so `trafilatura.extract` returns the same text with them."""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from lxml.etree import XPath, _Element
from trafilatura import xpaths
from trafilatura.utils import load_html

from benchmarks.trafilatura_xpath import extract_all, per_expression
from curation import trafilatura_xpath
from curation.config import DocumentsSettings
from curation.extract import Extractor, decode_html

BENCHMARK = "html_extraction/article-extraction-benchmark"

# Each line tries one corner of the expressions' semantics: `@id|@class` reads whichever of the
# two comes first in the source; translate() folds one letter only; `*` is elements only; an
# empty attribute still exists; `not(.//h1)` looks at every descendant.
EDGE_CASES = """<html><body>
<div id="main" class="cookie-bar">first attribute id: no cookie</div>
<div class="cookie-bar" id="main">first attribute class: cookie</div>
<span role="Navigation">folded to navigation</span><span role="NAV">nAV, kept</span>
<p data-lp-replacement-content="">empty but present</p>
<section style="display: none">hidden</section><div aria-hidden="true">hidden</div>
<div aria-hidden="false">shown</div><div class="comments-title">title</div>
<div id="reply-1">reply</div><div class="x" id="reply-2">first is class</div>
<div style="color: red" id="hidden-1">first is style</div><div id="hidden-2" style="x">id</div>
<ol class="comment-list"><li>a</li></ol><ol id="disqus_thread"><li>b</li></ol>
<ul id="comments"><li>c</li></ul><div id="dsq-comments">d</div><div class="post-comments">e</div>
<div class="infinite-scroll"><h1>the article</h1></div><div class="infinite-scroll">more</div>
<section class="mvp-post-add-box"><div><h1>appended</h1></div></section>
<aside class="elementor-share-buttons">share</aside>
<div class="Teaser">teaser</div><div id="TEASER">tEASER</div><div id="x-caption">caption</div>
<div class="page-bottom">bottom</div><div class="padding-bottom-lg">utility</div>
<p class="link">link</p><p class="permalink">permalink</p><div style="border: 1px">b</div>
<list class="menu"><item class="ad-slot">converted tags</item></list>
<!-- a comment --><?php echo 1 ?><header>head</header><span class="widget-x">w</span>
</body></html>"""


@contextmanager
def _replaced(table: list, index: int, value: object) -> Iterator[None]:
    """`monkeypatch.setitem` for a list entry."""
    previous, table[index] = table[index], value
    try:
        yield
    finally:
        table[index] = previous


def _same(expected: list[_Element], found: list[_Element]) -> bool:
    return len(expected) == len(found) and all(a is b for a, b in zip(expected, found, strict=True))


def _benchmark_pages(shared: Path) -> list[tuple[str, str]]:
    gold = json.loads((shared / BENCHMARK / "ground-truth.json").read_text())
    pages = []
    for file_id, entry in sorted(gold.items()):
        raw = gzip.decompress((shared / BENCHMARK / "html" / f"{file_id}.html.gz").read_bytes())
        pages.append((decode_html(raw, None)[0], entry["url"]))
    return pages


def test_every_expression_of_the_pinned_trafilatura_is_replaced() -> None:
    assert trafilatura_xpath.install() == len(trafilatura_xpath._STAND_INS)
    for stand_in in trafilatura_xpath._STAND_INS:
        assert isinstance(getattr(xpaths, stand_in.table)[stand_in.index],
                          trafilatura_xpath.FastXPath)


def test_stand_ins_select_what_the_expressions_select_on_edge_cases() -> None:
    trafilatura_xpath.install()
    tree = load_html(EDGE_CASES)
    matched = 0
    for stand_in in trafilatura_xpath._STAND_INS:
        fast = getattr(xpaths, stand_in.table)[stand_in.index]
        expected = fast.original(tree)
        assert _same(expected, fast(tree)), (stand_in.table, stand_in.index)
        matched += len(expected)
        # and on a subtree, where `.//` starts below the context element
        body = tree.find("body")
        assert _same(fast.original(body), fast(body)), (stand_in.table, stand_in.index)
    assert matched >= 25  # the cases do match: a comparison of empty lists would prove nothing


def test_extraction_is_unchanged_and_every_call_agrees_on_real_pages(shared_data: Path) -> None:
    pages = _benchmark_pages(shared_data)
    with trafilatura_xpath.uninstalled():
        original = extract_all(pages)
    assert extract_all(pages) == original
    # every call trafilatura makes, on the trees it makes, run both ways
    tallies = per_expression(pages)
    assert sum(tally.selected for tally in tallies.values()) > 1000
    for name, tally in tallies.items():
        assert tally.calls >= len(pages), name
        assert tally.disagreements == 0, name


def test_a_changed_expression_keeps_trafilaturas_own(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    trafilatura_xpath.install()
    changed = XPath(".//div[contains(@class, 'teaser')]")
    monkeypatch.setattr(trafilatura_xpath, "_warned", set())
    with _replaced(xpaths.TEASER_DISCARD_XPATH, 0, changed), \
            caplog.at_level(logging.WARNING, logger="curation.trafilatura_xpath"):
        replaced = trafilatura_xpath.install()
        assert xpaths.TEASER_DISCARD_XPATH[0] is changed
    assert replaced == len(trafilatura_xpath._STAND_INS) - 1
    assert "TEASER_DISCARD_XPATH[0]" in caplog.text


def test_uninstalled_restores_the_originals_for_the_block() -> None:
    trafilatura_xpath.install()
    with trafilatura_xpath.uninstalled():
        Extractor(DocumentsSettings())  # which installs them, but not here
        assert all(isinstance(getattr(xpaths, s.table)[s.index], XPath)
                   for s in trafilatura_xpath._STAND_INS)
    assert isinstance(xpaths.OVERALL_DISCARD_XPATH[0], trafilatura_xpath.FastXPath)
