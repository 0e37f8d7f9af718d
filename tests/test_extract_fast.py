"""The fast `hybrid` extractor (curation/extract_fast.py): boilerplate pruning, determinism
and its config value. Its quality floor on the 181 gold article pages is in
tests/test_extraction_quality.py (measured: benchmarks/results/extraction_frontier.md)."""

from __future__ import annotations

import pytest

from curation.config import ConfigError, DocumentsSettings, load_pipeline
from curation.extract import Extractor, Rejected, check_depth, html_depth
from curation.extract_fast import extract_hybrid

ARTICLE = [
    "The city council voted on Tuesday to extend the riverside park by another two kilometres, "
    "after a public consultation that drew more than four thousand responses from residents.",
    "Work on the new section is expected to begin next spring and to last eighteen months, "
    "according to the engineer in charge of the project, who spoke to reporters afterwards.",
    "Opponents argued that the money would be better spent on repairing existing playgrounds, "
    "but the motion passed by a comfortable margin of nineteen votes to six.",
]
BOILERPLATE = {
    "nav": "Home News Sport Weather Contact",
    "byline header": "12 March 2024 By Jane Doe, City Reporter",
    "caption": "Photo: riverside park at dusk, by Jane Doe",
    "share": "Share on Facebook Share on Twitter Email this story",
    "tags footer": "Filed under: City, Parks, Council meetings",
    "related": "Related stories: Council approves budget; Bridge closure extended",
    "comments": "Great news, finally something for the kids of this town.",
    "footer": "Copyright 2024 Example Media Ltd. All rights reserved. Privacy policy",
    "cookie": "We use cookies to improve your experience. Accept all cookies",
}
# Kept by the plain `resiliparse` extractor (main_content=True): what the hybrid adds.
KEPT_BY_RESILIPARSE = ("byline header", "caption", "tags footer", "comments")


def _page() -> str:
    paragraphs = "".join(f"<p>{text}</p>" for text in ARTICLE)
    b = BOILERPLATE
    return f"""<!doctype html><html><head><title>Park extension approved</title></head><body>
<header class="site-header"><nav><ul><li><a href="/">{b['nav']}</a></li></ul></nav></header>
<div class="cookie-banner"><span>{b['cookie']}</span></div>
<main><article>
  <header class="entry-header"><span class="date">{b['byline header']}</span></header>
  <h1>Park extension approved</h1>
  <div class="image-caption">{b['caption']}</div>
  {paragraphs}
  <div class="share-buttons"><a href="#">{b['share']}</a></div>
  <footer class="entry-footer"><span>{b['tags footer']}</span></footer>
</article>
<aside class="related-articles"><h3>Related</h3><ul><li><a href="/a">{b['related']}</a>
</li></ul></aside>
<div id="comments"><div class="comment"><p>{b['comments']}</p></div></div></main>
<footer class="site-footer"><p>{b['footer']}</p></footer>
</body></html>"""


def test_drops_boilerplate_blocks_and_keeps_the_article() -> None:
    text = Extractor(DocumentsSettings(extractor="hybrid")).extract(_page(), "https://x.test/a")
    for paragraph in ARTICLE:
        assert paragraph in text
    for kind, boilerplate in BOILERPLATE.items():
        assert boilerplate not in text, kind


def test_the_page_is_a_real_test_plain_resiliparse_keeps_some_boilerplate() -> None:
    text = Extractor(DocumentsSettings(extractor="resiliparse")).extract(_page(), None)
    assert all(BOILERPLATE[kind] in text for kind in KEPT_BY_RESILIPARSE)
    assert all(paragraph in text for paragraph in ARTICLE)


def test_header_holding_the_content_is_kept() -> None:
    # Some sites wrap whole sections in <header>: pruning it would empty the page.
    page = f"<html><body><header class='section'><p>{ARTICLE[0]}</p><p>{ARTICLE[1]}</p>" \
           "</header></body></html>"
    text = extract_hybrid(page)
    assert ARTICLE[0] in text and ARTICLE[1] in text


def test_a_selector_matching_the_page_wrapper_falls_back_to_the_whole_page() -> None:
    page = f"<html><body class='has-sticky-footer'><p>{ARTICLE[0]}</p></body></html>"
    assert ARTICLE[0] in extract_hybrid(page)


def test_is_deterministic() -> None:
    page = _page()
    outputs = {Extractor(DocumentsSettings(extractor="hybrid")).extract(page, None)
               for _ in range(3)}
    assert len(outputs) == 1


def test_empty_page_is_a_counted_reject() -> None:
    with pytest.raises(Rejected) as error:
        Extractor(DocumentsSettings(extractor="hybrid")).extract(
            "<html><body><script>var x = 1;</script></body></html>", None)
    assert error.value.reason == "empty_text"


def test_config_accepts_hybrid_and_names_the_field_of_an_unknown_extractor(tmp_path) -> None:
    assert DocumentsSettings(extractor="hybrid").extractor == "hybrid"
    good = tmp_path / "good.yaml"
    good.write_text("snapshots: {X: {warc: {path: a}}}\ndocuments: {extractor: hybrid}\n")
    assert load_pipeline(good).documents.extractor == "hybrid"
    bad = tmp_path / "bad.yaml"
    bad.write_text("snapshots: {X: {warc: {path: a}}}\ndocuments: {extractor: fastest}\n")
    with pytest.raises(ConfigError) as error:
        load_pipeline(bad)
    assert ": documents.extractor" in str(error.value)


@pytest.mark.parametrize("name", ["hybrid", "resiliparse"])
def test_a_page_parsed_once_gives_the_same_text(name: str) -> None:
    # The documents stage parses a page once for the language pre-check and the extractor.
    extractor = Extractor(DocumentsSettings(extractor=name))
    html = _page()
    parsed = extractor.parse(html)
    assert not isinstance(parsed, str)
    assert extractor.extract(html, None, parsed) == extractor.extract(html, None)
    assert extractor.extract(html, None, parsed) == extractor.extract(html, None, parsed)


@pytest.mark.parametrize(("html", "depth"), [
    ("<html><body><div><p>a</p><p>b<b>c</b></p></div></body></html>", 5),
    # void and self-closed elements do not nest, whatever their attributes hold
    ("<div><br><img src='a/b.png'><input value=x /><span/><p>x</p></div>", 2),
    ("<DIV><Div><IMG SRC=x><P>x</P></Div></DIV>", 3),
    # stray end tags never take the depth below zero
    ("</p></div><div><div></div></div>", 2),
    ("<!-- <div><div><div> --><p>x</p>", 4),  # a tag scan, not a parser: comments count
])
def test_html_depth_counts_nesting_by_a_tag_scan(html: str, depth: int) -> None:
    assert html_depth(html) == depth


def test_html_depth_stops_once_past_the_limit() -> None:
    assert html_depth("<div>" * 100, stop=10) == 11
    with pytest.raises(Rejected, match="nest over 10 deep"):
        check_depth("<div>" * 100, limit=10)
    check_depth("<div></div>" * 100, limit=10)  # many tags, shallow: passes
