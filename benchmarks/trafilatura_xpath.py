"""trafilatura's pruning XPath expressions against their stand-ins (curation/trafilatura_xpath.py).

    .venv/bin/python benchmarks/trafilatura_xpath.py [--records 5000 --english 1.0] [--files 4]

On the pages of the first `--files` WARC files of the compare.py corpus (built if missing):

1. every call trafilatura makes to one of the replaced expressions runs both the expression and
   its stand-in on the same tree: calls, elements selected, disagreements and seconds for each;
2. `trafilatura.extract` (FineWeb's precision settings, through the project's `Extractor`) on
   every page with trafilatura's own expressions and with the stand-ins, taking turns for
   `--repeats` rounds: median seconds, pages/s, and how many pages get the same text.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from trafilatura import xpaths  # noqa: E402

from benchmarks.compare import corpus_dir  # noqa: E402
from curation import trafilatura_xpath  # noqa: E402
from curation.config import DocumentsSettings  # noqa: E402
from curation.extract import Extractor, Rejected, decode_html, unwrap_payload  # noqa: E402
from curation.warc import WarcItem, iter_warc  # noqa: E402


@dataclass
class _Tally:
    calls: int = 0
    selected: int = 0
    disagreements: int = 0
    xpath_seconds: float = 0.0
    stand_in_seconds: float = 0.0


class _Both(trafilatura_xpath.FastXPath):
    """Stands in the table (as an installed stand-in): runs the expression and the stand-in,
    tallies both, and returns the expression's answer."""

    def __init__(self, fast: trafilatura_xpath.FastXPath, tally: _Tally) -> None:
        super().__init__(fast.original, fast)
        self.fast, self.tally = fast, tally

    def __call__(self, tree):  # noqa: ANN001, ANN204 - an lxml element in, elements out
        start = time.perf_counter()
        expected = self.fast.original(tree)
        middle = time.perf_counter()
        found = self.fast(tree)
        self.tally.stand_in_seconds += time.perf_counter() - middle
        self.tally.xpath_seconds += middle - start
        self.tally.calls += 1
        self.tally.selected += len(expected)
        if len(found) != len(expected) or any(a is not b for a, b in zip(expected, found,
                                                                         strict=True)):
            self.tally.disagreements += 1
        return expected


def load_pages(corpus: Path, files: int) -> list[tuple[str, str | None]]:
    settings = DocumentsSettings()
    pages = []
    for path in sorted(corpus.glob("*.warc.gz"))[:files]:
        for item in iter_warc(path):
            if isinstance(item, WarcItem) and item.record_type == "response" and item.payload:
                payload = unwrap_payload(item.payload, settings.max_html_bytes)
                pages.append((decode_html(payload, item.charset)[0], item.url))
    return pages


def extract_all(pages: list[tuple[str, str | None]]) -> list[str]:
    extractor = Extractor(DocumentsSettings())
    texts = []
    for html, url in pages:
        try:
            texts.append(extractor.extract(html, url))
        except Rejected as rejected:
            texts.append(f"rejected: {rejected.reason}")
    return texts


def per_expression(pages: list[tuple[str, str | None]]) -> dict[str, _Tally]:
    trafilatura_xpath.install()
    tallies: dict[str, _Tally] = {}
    originals = []
    for stand_in in trafilatura_xpath._STAND_INS:
        table = getattr(xpaths, stand_in.table)
        tally = tallies.setdefault(f"{stand_in.table}[{stand_in.index}]", _Tally())
        originals.append((table, stand_in.index, table[stand_in.index]))
        table[stand_in.index] = _Both(table[stand_in.index], tally)
    try:
        extract_all(pages)
    finally:
        for table, index, fast in originals:
            table[index] = fast
    return tallies


def _timed(run: Callable[[], list[str]]) -> tuple[float, list[str]]:
    start = time.perf_counter()
    texts = run()
    return time.perf_counter() - start, texts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--english", type=float, default=1.0, help="the corpus's English share")
    parser.add_argument("--files", type=int, default=4, help="500 records a file")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    corpus = corpus_dir(args.records, args.english, lambda message: print(message,
                                                                          file=sys.stderr))
    pages = load_pages(corpus, args.files)
    print(f"{len(pages)} pages from {corpus.name}\n")

    tallies = per_expression(pages)
    print("| expression | calls | elements selected | disagreements | XPath s | stand-in s "
          "| speed-up |\n|---|---:|---:|---:|---:|---:|---:|")
    for name, tally in [*tallies.items(), ("all", _Tally(
            sum(t.calls for t in tallies.values()), sum(t.selected for t in tallies.values()),
            sum(t.disagreements for t in tallies.values()),
            sum(t.xpath_seconds for t in tallies.values()),
            sum(t.stand_in_seconds for t in tallies.values())))]:
        print(f"| {name} | {tally.calls:,} | {tally.selected:,} | {tally.disagreements} | "
              f"{tally.xpath_seconds:.2f} | {tally.stand_in_seconds:.2f} | "
              f"{tally.xpath_seconds / max(tally.stand_in_seconds, 1e-9):.2f}x |")

    own_seconds, fast_seconds, same = [], [], 0
    for _ in range(args.repeats):  # taking turns, so that the machine's drift hits both
        with trafilatura_xpath.uninstalled():
            seconds, own = _timed(lambda: extract_all(pages))
        own_seconds.append(seconds)
        seconds, fast = _timed(lambda: extract_all(pages))
        fast_seconds.append(seconds)
        same = sum(a == b for a, b in zip(own, fast, strict=True))
    own_median, fast_median = statistics.median(own_seconds), statistics.median(fast_seconds)
    print(f"\n| trafilatura.extract | median s | pages/s | every round's s |\n|---|---:|---:|---|\n"
          f"| trafilatura's expressions | {own_median:.2f} | {len(pages) / own_median:.1f} | "
          f"{', '.join(f'{s:.2f}' for s in own_seconds)} |\n"
          f"| stand-ins | {fast_median:.2f} | {len(pages) / fast_median:.1f} | "
          f"{', '.join(f'{s:.2f}' for s in fast_seconds)} |\n"
          f"\nspeed-up {own_median / fast_median:.2f}x; the same text on {same:,} of "
          f"{len(pages):,} pages")


if __name__ == "__main__":
    main()
