"""Gopher's alpha-word rule: what datatrove's token words and the paper's whitespace words drop.

    .venv/bin/python benchmarks/gopher_alpha.py [--data ../shared/data] [--examples 6]

Gopher's quality filter drops a document unless at least 80% of its words contain an alphabetic
character (Rae et al. 2021, appendix A). datatrove (FineWeb) counts spaCy tokens as words, so
every comma, full stop and quote mark is a word without a letter; the paper's words are
whitespace-separated, so "said." is one word with a letter. `GopherQualitySettings.alpha_words`
picks the definition (`datatrove`, the default, or `gopher_paper`); `heuristics` stores both
ratios (`gopher_alpha_words_frac`, `gopher_alpha_words_frac_whitespace`).

Corpora, all real text read in place from ``shared/data`` (PROVENANCE.md):

- books: the seven Project Gutenberg texts (PG header and licence cut off), split into
  documents of about 2,000 words at paragraph breaks; Shakespeare's plays are speaker-line
  dialogue, the novels (Pride and Prejudice, Little Women, ...) dialogue-heavy prose;
- wikipedia: the 62 WikiText-2 test articles, detokenized (WikiText puts spaces around
  punctuation and writes hyphens as " @-@ ", which would make every mark a whitespace word);
- articles: the article-extraction benchmark's 181 news pages, their gold main text (sports
  pages with scores among them).

For each corpus: documents, drops by the alpha-word rule alone under each definition, drops by
the whole Gopher quality suite under each setting, and examples of the documents the two
definitions disagree on, with both ratios and the commonest letterless words under each
definition (why the rule trips). Prints markdown and writes ``benchmarks/results/gopher_alpha.md``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from curation.heuristics import (  # noqa: E402
    GopherQualitySettings,
    HeuristicsSettings,
    annotate_splits,
)
from curation.text import split_text  # noqa: E402

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "results" / "gopher_alpha.md"
DEFAULT_DATA = BENCH_DIR.parent.parent / "shared" / "data"
BOOK_WORDS = 2000
DEFINITIONS = ("datatrove", "gopher_paper")
READING = "\n## Reading"
BOOK_TITLES = {"pg1342": "Pride and Prejudice", "pg84": "Frankenstein",
               "pg2641": "A Room with a View", "pg2701": "Moby Dick", "pg37106": "Little Women",
               "pg64317": "The Great Gatsby", "tinyshakespeare_input": "Shakespeare (plays)"}
# News pages about sport, by their URL (the benchmark's pages carry no section label).
_SPORTS = re.compile(r"/sports?/|sports?\.|/(nfl|nba|nhl|soccer|tennis|football)/|"
                     r"autoracing|dawgsbynature", re.I)


@dataclass(frozen=True)
class Doc:
    doc_id: str
    text: str
    group: str  # a book's title, or sports/other for the news pages


# --- corpora ---------------------------------------------------------------------------------

_PG_START = re.compile(r"\*\*\* ?START OF (THE|THIS) PROJECT GUTENBERG[^\n]*\n")
_PG_END = re.compile(r"\*\*\* ?END OF (THE|THIS) PROJECT GUTENBERG")


def _chunks(paragraphs: list[str], words: int) -> list[str]:
    """Consecutive paragraphs joined into documents of about `words` whitespace words."""
    docs, current, count = [], [], 0
    for paragraph in paragraphs:
        current.append(paragraph)
        count += len(paragraph.split())
        if count >= words:
            docs.append("\n\n".join(current))
            current, count = [], 0
    if current:
        docs.append("\n\n".join(current))
    return docs


def books(data: Path) -> list[Doc]:
    docs = []
    for path in sorted((data / "sources" / "books_gutenberg").glob("*.txt")):
        # The PG files are Windows-1252 with CRLF line ends (PROVENANCE.md).
        text = path.read_bytes().decode("cp1252", "replace").replace("\r\n", "\n")
        start, end = _PG_START.search(text), _PG_END.search(text)
        text = text[start.end() if start else 0: end.start() if end else len(text)]
        paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
        title = BOOK_TITLES.get(path.stem, path.stem)
        docs += [Doc(f"{path.stem}:{i:03d}", chunk, title)
                 for i, chunk in enumerate(_chunks(paragraphs, BOOK_WORDS))]
    return docs


_WIKI_TITLE = re.compile(r"^ = ([^=].*[^=]) = $")
_WIKI_DETOKENIZE = [(" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."), (" , ", ", "),
                    (" . ", ". "), (" ; ", "; "), (" : ", ": "), (" 's", "'s"), (" n't", "n't"),
                    ("( ", "("), (" )", ")"), (" ? ", "? "), (" ! ", "! ")]


def wikipedia(data: Path) -> list[Doc]:
    path = data / "sources" / "wikipedia" / "wikitext-2-raw_wiki.test.raw"
    articles: list[tuple[str, list[str]]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        title = _WIKI_TITLE.match(line)
        if title:
            articles.append((title.group(1), []))
        elif articles and line.strip():
            text = line.strip()
            for old, new in _WIKI_DETOKENIZE:
                text = text.replace(old, new)
            text = re.sub(r' " ([^"]*?) " ', r' "\1" ', text)
            articles[-1][1].append(text.replace(" = ", "").strip(" ="))
    return [Doc(f"wiki:{title[:40]}", "\n".join(lines), "Wikipedia")
            for title, lines in articles]


def articles(data: Path) -> list[Doc]:
    truth = json.loads((data / "html_extraction" / "article-extraction-benchmark" /
                        "ground-truth.json").read_text(encoding="utf-8"))
    return [Doc(f"{key[:12]} {entry['url'].split('/')[2]}", entry["articleBody"],
                "sports news" if _SPORTS.search(entry["url"]) else "other news")
            for key, entry in sorted(truth.items()) if entry["articleBody"].strip()]


# --- measurement -----------------------------------------------------------------------------


def letterless(text: str, definition: str, top: int = 6) -> str:
    """The commonest words without a letter under `definition`, with their share of words."""
    words = split_text(text).words if definition == "datatrove" else text.split()
    counts = Counter(w for w in words if not any(ch.isalpha() for ch in w))
    return ", ".join(f"`{w}` {n / len(words):.1%}" for w, n in counts.most_common(top))


def measure(docs: list[Doc], examples: int) -> dict:
    splits = [split_text(doc.text) for doc in docs]
    languages = ["en"] * len(docs)
    ratios: dict[str, list[float | None]] = {}
    suite: dict[str, list[str | None]] = {}
    for definition in DEFINITIONS:
        settings = HeuristicsSettings(gopher_quality=GopherQualitySettings(alpha_words=definition))
        ann = annotate_splits(splits, languages, settings)
        ratios[definition] = ann.signals[settings.gopher_quality.alpha_signal]
        suite[definition] = ann.suite_reason["gopher_quality"]
    threshold = GopherQualitySettings().min_alpha_words_ratio
    drops = {d: [r is not None and r < threshold for r in ratios[d]] for d in DEFINITIONS}
    by = list(zip(drops["datatrove"], drops["gopher_paper"], strict=True))
    only_dt = [i for i, (dt, ws) in enumerate(by) if dt and not ws]
    only_ws = [i for i, (dt, ws) in enumerate(by) if ws and not dt]
    both = [i for i, (dt, ws) in enumerate(by) if dt and ws]

    def example(i: int) -> dict:
        return {"doc_id": docs[i].doc_id, "words": len(docs[i].text.split()),
                "datatrove": ratios["datatrove"][i], "gopher_paper": ratios["gopher_paper"][i],
                "suite_gopher_paper": suite["gopher_paper"][i],
                "why_datatrove": letterless(docs[i].text, "datatrove"),
                "why_gopher_paper": letterless(docs[i].text, "gopher_paper")}

    def lowest(indices: list[int], definition: str) -> list[int]:
        """The lowest ratios, one group (book, sports or other news) after another."""
        ranked = sorted(indices, key=lambda i: ratios[definition][i])
        rank_in_group = {i: sum(docs[j].group == docs[i].group for j in ranked[:n])
                         for n, i in enumerate(ranked)}
        return sorted(ranked, key=lambda i: rank_in_group[i])[:examples]

    return {
        "documents": len(docs),
        "alpha_drops": {d: sum(drops[d]) for d in DEFINITIONS},
        "suite_drops": {d: sum(r is not None for r in suite[d]) for d in DEFINITIONS},
        "only_datatrove": len(only_dt), "only_gopher_paper": len(only_ws), "both": len(both),
        "groups": _groups(docs, drops),
        "median": {d: sorted(r for r in ratios[d] if r is not None)[len(docs) // 2]
                   for d in DEFINITIONS},
        "examples_only_datatrove": [example(i) for i in lowest(only_dt, "datatrove")],
        "examples_both": [example(i) for i in lowest(both, "gopher_paper")],
        "examples_only_gopher_paper": [example(i) for i in lowest(only_ws, "gopher_paper")],
    }


def _groups(docs: list[Doc], drops: dict[str, list[bool]]) -> dict[str, dict[str, int]]:
    """Per group: documents and alpha-rule drops under each definition."""
    groups: dict[str, dict[str, int]] = {}
    for i, doc in enumerate(docs):
        row = groups.setdefault(doc.group, dict.fromkeys(("documents", *DEFINITIONS), 0))
        row["documents"] += 1
        for d in DEFINITIONS:
            row[d] += drops[d][i]
    return groups


EXAMPLE_KINDS = (("examples_only_datatrove", "dropped by datatrove's definition only"),
                 ("examples_both", "dropped by both definitions"),
                 ("examples_only_gopher_paper", "dropped by the paper's definition only"))


def render(results: dict[str, dict], command: str, date: str) -> str:
    lines = [
        "# Gopher alpha-word rule: datatrove tokens against the paper's whitespace words",
        "",
        f"Command: `{command}`  ",
        f"Date: {date}  ",
        "Threshold: `min_alpha_words_ratio` 0.8 (a document is dropped below it). Ratios: "
        "`gopher_alpha_words_frac` (datatrove: spaCy tokens) and "
        "`gopher_alpha_words_frac_whitespace` (Gopher paper: whitespace words), both stored by "
        "`heuristics`.",
        "",
        "| corpus | documents | median ratio datatrove | median ratio paper | alpha-rule drops "
        "datatrove | alpha-rule drops paper | dropped by datatrove only | by paper only | by both "
        "| Gopher quality suite drops, datatrove | suite drops, paper |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in results.items():
        n = r["documents"]
        lines.append(
            f"| {name} | {n} | {r['median']['datatrove']:.3f} | {r['median']['gopher_paper']:.3f} "
            f"| {r['alpha_drops']['datatrove']} ({r['alpha_drops']['datatrove'] / n:.1%}) "
            f"| {r['alpha_drops']['gopher_paper']} ({r['alpha_drops']['gopher_paper'] / n:.1%}) "
            f"| {r['only_datatrove']} | {r['only_gopher_paper']} | {r['both']} "
            f"| {r['suite_drops']['datatrove']} | {r['suite_drops']['gopher_paper']} |")
    lines += ["", "Per group (alpha-rule drops):", "",
              "| corpus | group | documents | drops datatrove | drops paper |",
              "|---|---|---:|---:|---:|"]
    lines += [f"| {name} | {group} | {g['documents']} | {g['datatrove']} | {g['gopher_paper']} |"
              for name, r in results.items() for group, g in sorted(r["groups"].items())]
    for name, r in results.items():
        for key, title in EXAMPLE_KINDS:
            if not r[key]:
                continue
            lines += ["", f"### {name}: {title}", "",
                      "| doc id | words | ratio datatrove | ratio paper | suite verdict (paper) "
                      "| letterless words, datatrove | letterless words, paper |",
                      "|---|---:|---:|---:|---|---|---|"]
            lines += [f"| {e['doc_id']} | {e['words']} | {e['datatrove']:.3f} "
                      f"| {e['gopher_paper']:.3f} | {e['suite_gopher_paper'] or 'kept'} "
                      f"| {e['why_datatrove']} | {e['why_gopher_paper']} |" for e in r[key]]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--examples", type=int, default=6)
    args = parser.parse_args()
    corpora = {"books": books(args.data), "wikipedia": wikipedia(args.data),
               "articles": articles(args.data)}
    results = {name: measure(docs, args.examples) for name, docs in corpora.items()}
    date = subprocess.run(["date", "-u"], capture_output=True, text=True, check=True).stdout.strip()
    command = "python benchmarks/gopher_alpha.py " + " ".join(sys.argv[1:])
    text = render(results, command.strip(), date)
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    # The hand-written reading of the figures, if any, stays below the regenerated tables.
    old = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else ""
    reading = old[old.find(READING):] if READING in old else ""
    RESULTS.write_text(text + reading, encoding="utf-8")


if __name__ == "__main__":
    main()
