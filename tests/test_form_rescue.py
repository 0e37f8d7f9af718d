"""trafilatura's form rescue (curation/form_rescue.py): the 29 Japanese ClueWeb09 shop pages keep
their product descriptions, and a page whose text is already running text is left alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from curation.config import DocumentsSettings, TrafilaturaSettings
from curation.extract import Extractor, Rejected
from curation.form_rescue import prose_lines
from curation.partition import PartitionLayout
from curation.stages.documents import run_documents
from curation.storage import LocalStore
from tests.conftest import require_shared_data

CLUEWEB = "warc/non_cc/clueweb09-ja_resiliparse-quirk_29responses.warc.gz"
# The start of page 0's product description (benchmarks/results/extraction_languages.md).
DESCRIPTION = "Ａ４ノートサイズのノートパソコンが収納可能なＰＣ対応のブリー"


def _texts(tmp_path: Path, rescue: bool) -> list[str]:
    settings = DocumentsSettings(trafilatura=TrafilaturaSettings(rescue_forms=rescue))
    store = LocalStore(str(tmp_path / f"rescue-{rescue}"))
    warc = require_shared_data() / CLUEWEB
    run_documents("CLUEWEB-JA", [str(warc)], store, settings, workers=0)
    return PartitionLayout(store, "documents", "CLUEWEB-JA").read_table(
        ["text"])["text"].to_pylist()


def test_the_japanese_shop_pages_keep_their_descriptions(tmp_path: Path) -> None:
    rescued, plain = _texts(tmp_path, True), _texts(tmp_path, False)
    assert len(plain) <= 3  # the ranking sidebar, then nothing: dedup drops its repeats
    assert not any(DESCRIPTION in text for text in plain)
    assert len(rescued) == 29
    assert all(prose_lines(text) for text in rescued)
    assert sum(DESCRIPTION in text for text in rescued) == 2  # pages 0 and 1: one product


# A ranking table beside the form, as on the ClueWeb shop: trafilatura keeps it, and with the
# form demoted, the description after it.
_SIDEBAR = "<table>" + "".join(f"<tr><td>{n}</td><td>Popular item number {n} in this week's "
                               "ranking of the shop</td></tr>" for n in range(6)) + "</table>"
_FOOTER = "<div>Company footer, 1-2-3 Street, open daily from nine to five except holidays.</div>"
_STORY = ("<p>The harbour wall was rebuilt in 1887 after the storm took half of it, and the "
          "stones still carry the masons' marks that visitors photograph every summer.</p>")


def _page(main: str) -> str:
    return (f"<html><body><div class='side'>{_SIDEBAR}</div><div class='main'>{main}</div>"
            f"{_FOOTER}</body></html>")


@pytest.mark.parametrize("deduplicate", [True, False])
def test_a_description_inside_a_misnested_form_is_rescued(deduplicate: bool) -> None:
    html = _page(f"<form name='cart'><table><tr><td><h1>Harbour walk</h1></td></tr>"
                 f"<tr><td>{_STORY}</form></td></tr></table>")

    def extracted(rescue: bool) -> str:
        options = TrafilaturaSettings(deduplicate=deduplicate, rescue_forms=rescue)
        try:
            return Extractor(DocumentsSettings(trafilatura=options)).extract(html, "https://x.org")
        except Rejected:
            return ""

    assert "masons' marks" in extracted(True)
    assert "masons' marks" not in extracted(False)  # trafilatura deleted the form


def test_an_article_beside_a_search_form_is_left_alone() -> None:
    html = _page(f"<article><h1>Harbour walk</h1>{_STORY * 3}</article>"
                 "<form action='/search'><input name='q'><p>Search the archive of older "
                 "stories about the harbour, the boats and the people who worked there.</p>"
                 "</form>")
    on = Extractor(DocumentsSettings()).extract(html, "https://example.org/b")
    off = Extractor(DocumentsSettings(trafilatura=TrafilaturaSettings(rescue_forms=False)))
    assert on == off.extract(html, "https://example.org/b")
    assert "Search the archive" not in on
