"""The labelled near-duplicate set of `benchmarks/near_dup_recall.py` and its test, built from
real articles (no Dagster here).

Base texts are the gold article bodies of the article-extraction benchmark
(`../shared/data/html_extraction/article-extraction-benchmark/ground-truth.json`, real news and
blog pages), English ones of 100 to 3,000 words, drawn with a fixed seed. Each article family:

- **template copies**: the same article text inside the built-in sample's English site
  templates (`curation.sample.html.render`: magazine, blog, review, news; each site's chrome and
  its in-article boilerplate lines, `Site.boilerplate`), main-text Jaccard 1;
- **variants**: the article edited word by word (deletions, substitutions by a word of another
  article, insertions, at seeded positions within paragraphs) to a Jaccard drawn uniformly in
  each band of `BANDS`, each rendered in a randomly drawn site template. The number of edits is
  searched so the exact Jaccard of the word 5-grams of the *main texts* (the shingles
  `curation.minhash` takes, normalised the same way) lands in the band; that Jaccard labels the
  pair (base page, variant page).

Every page then goes through the pipeline's path: `curation.extract.Extractor` with the default
`DocumentsSettings` (trafilatura, FineWeb's options) on the rendered HTML, the shared word split,
and `curation.minhash` signatures and band hashes into the `minhash_signatures` table layout
(`signatures_table`). Pairs of different articles (Jaccard near 0, often in the same site
template) are labelled too: shared chrome must not merge them.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from curation.config import DedupSettings, DocumentsSettings
from curation.dedup import frequent_lines, line_hash_table
from curation.extract import Extractor
from curation.minhash import (
    MinHashSettings,
    band_hashes,
    jaccard,
    shingle_hashes,
    signatures,
    signatures_table,
)
from curation.sample.compose import Block
from curation.sample.html import PageView, render, slug
from curation.sample.sites import SITES, Site
from curation.text import split_text

GROUND_TRUTH = Path("html_extraction/article-extraction-benchmark/ground-truth.json")
BANDS: tuple[tuple[float, float], ...] = ((0.9, 1.0), (0.8, 0.9), (0.7, 0.8), (0.5, 0.7),
                                           (0.2, 0.5))
"""The Jaccard bands of the variants (each variant aims at a uniform draw within one)."""
TEMPLATES = ("magazine", "blog", "review", "news")
SITE_POOL: tuple[Site, ...] = tuple(s for s in SITES if s.lang == "en" and s.template in TEMPLATES)


@dataclass(frozen=True)
class Page:
    doc_id: str
    family: int
    site: str
    main_text: str
    text: str  # what extraction returned


@dataclass(frozen=True)
class Pair:
    a: str
    b: str
    jaccard: float  # word 5-gram Jaccard of the main texts
    kind: str  # "template copy", "variant", "unrelated"


@dataclass(frozen=True)
class LabelledSet:
    pages: list[Page]
    pairs: list[Pair]
    signatures: pa.Table  # the `minhash_signatures` layout, signature column included


def articles(data_dir: Path, count: int, seed: int) -> list[str]:
    """`count` English gold article bodies of 100 to 3,000 words, drawn with `seed`."""
    truth = json.loads((data_dir / GROUND_TRUTH).read_text(encoding="utf-8"))
    bodies = []
    for key in sorted(truth):
        body = truth[key]["articleBody"]
        words = body.split()
        ascii_share = sum(w.isascii() for w in words) / max(1, len(words))
        english = sum(w.lower() in ("the", "and", "of", "to") for w in words) / max(1, len(words))
        if 100 <= len(words) <= 3000 and ascii_share > 0.97 and english > 0.05:
            bodies.append(body)
    return random.Random(seed).sample(bodies, min(count, len(bodies)))


def _paragraphs(text: str) -> list[list[str]]:
    return [p.split() for p in text.split("\n") if p.strip()]


def _edit(paragraphs: list[list[str]], edits: int, vocabulary: Sequence[str],
          rng: random.Random) -> str:
    """`edits` word edits (delete, substitute, insert in equal shares) at distinct seeded
    positions; paragraphs keep their boundaries."""
    positions = [(p, w) for p, words in enumerate(paragraphs) for w in range(len(words))]
    out = [list(words) for words in paragraphs]
    chosen = sorted(rng.sample(positions, min(edits, len(positions))), reverse=True)
    for p, w in chosen:
        kind = rng.randrange(3)
        if kind == 0 and len(out[p]) > 1:
            del out[p][w]
        elif kind == 1:
            out[p][w] = rng.choice(vocabulary)
        else:
            out[p].insert(w, rng.choice(vocabulary))
    return "\n".join(" ".join(words) for words in out if words)


def _shingles(text: str, settings: MinHashSettings) -> np.ndarray:
    return shingle_hashes(split_text(text), settings)


def variant(base: str, low: float, high: float, vocabulary: Sequence[str], rng: random.Random,
            settings: MinHashSettings) -> tuple[str, float] | None:
    """`base` edited to a main-text Jaccard within [low, high) (aiming at a uniform draw in
    it): a bisection on the number of edits, each try from the same seeded positions."""
    target = rng.uniform(low, high)
    paragraphs, base_shingles = _paragraphs(base), _shingles(base, settings)
    state = rng.getstate()
    lo, hi = 1, sum(map(len, paragraphs))
    best: tuple[str, float] | None = None
    while lo <= hi:
        edits = (lo + hi) // 2
        rng.setstate(state)
        text = _edit(paragraphs, edits, vocabulary, rng)
        j = jaccard(base_shingles, _shingles(text, settings))
        if low <= j < high and (best is None or abs(j - target) < abs(best[1] - target)):
            best = (text, j)
        if j > target:
            lo = edits + 1
        else:
            hi = edits - 1
    return best


def page_html(text: str, site: Site, title: str, rng: random.Random) -> str:
    """`text` (paragraphs) as the main content of a page of `site`, inside its template, with
    the site's in-article boilerplate lines after it as the sample's pages have them."""
    blocks = tuple(Block("p", p) for p in text.split("\n") if p.strip())
    blocks += tuple(Block("p", line) for line in site.boilerplate)
    related = tuple((f"More from {site.name} {i}", f"https://{site.host}/{slug(site.name)}-{i}/")
                    for i in range(rng.randint(3, 6)))
    url = f"https://{site.host}/{slug(title)}/"
    view = PageView(site=site, lang="en", title=title, blocks=blocks, url=url, canonical=url,
                    author=rng.choice(site.authors or ("Staff writer",)),
                    published=f"2024-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}",
                    related=related)
    return render(view, rng)


def build(data_dir: Path, families: int, seed: int = 21, copies: int = 2,
          per_band: int = 1, bands: Sequence[tuple[float, float]] = BANDS,
          settings: MinHashSettings | None = None) -> LabelledSet:
    """The labelled set: `families` articles, each with `copies` template copies and
    `per_band` variants per Jaccard band of `bands`, extracted and signed as the pipeline
    does."""
    settings = settings or MinHashSettings()
    rng = random.Random(seed)
    bodies = articles(data_dir, families, seed)
    vocabulary = sorted({w for body in bodies for w in body.split() if w.isalpha()})
    pages: list[Page] = []
    pairs: list[Pair] = []
    for family, body in enumerate(bodies):
        title = " ".join(body.split()[:8])
        texts: list[tuple[str, float, str]] = [(body, 1.0, "base")]
        texts += [(body, 1.0, "template copy")] * copies
        for low, high in bands:
            for _ in range(per_band):
                found = variant(body, low, high, vocabulary, rng, settings)
                if found:
                    texts.append((found[0], found[1], "variant"))
        sites = rng.sample(SITE_POOL, min(len(SITE_POOL), len(texts)))
        for number, ((text, j, kind), site) in enumerate(zip(texts, sites, strict=False)):
            doc_id = f"f{family:03d}-{number:02d}"
            html = page_html(text, site, title, rng)
            # A fresh extractor per page: copies of an article sit in different tasks, and
            # trafilatura's `deduplicate` cache would blank paragraphs seen in the same task.
            extracted = Extractor(DocumentsSettings()).extract(html, f"https://{site.host}/")
            pages.append(Page(doc_id, family, site.domain, text, extracted))
            if kind != "base":
                pairs.append(Pair(f"f{family:03d}-00", doc_id, j, kind))
    # Unrelated pairs: each family's base with the next family's base (Jaccard ~ 0).
    bases = [p for p in pages if p.doc_id.endswith("-00")]
    for a, b in zip(bases, bases[1:], strict=False):
        j = jaccard(_shingles(a.main_text, settings), _shingles(b.main_text, settings))
        pairs.append(Pair(a.doc_id, b.doc_id, j, "unrelated"))
    return LabelledSet(pages, pairs, signed([p.doc_id for p in pages],
                                            [p.text for p in pages], settings))


def signed(doc_ids: list[str], texts: list[str], settings: MinHashSettings) -> pa.Table:
    """The `minhash_signatures` table of `texts`, as the heuristics stage writes it."""
    sigs = signatures([split_text(text) for text in texts], settings)
    return signatures_table(doc_ids, band_hashes(sigs, settings), sigs)


def without_boilerplate(labelled: LabelledSet, dedup: DedupSettings) -> LabelledSet:
    """`labelled` signed on its texts less the lines `line_dedup`'s rule finds frequent in the
    set (`curation.dedup.frequent_lines` with the settings' thresholds): what signatures
    computed after `line_dedup` would see."""
    doc_ids, texts = [p.doc_id for p in labelled.pages], [p.text for p in labelled.pages]
    edits = frequent_lines(line_hash_table(doc_ids, texts), max_documents=dedup.line_max_documents,
                           min_chars=dedup.line_min_chars).edits
    removed: dict[str, set[int]] = {}
    for doc_id, line in zip(edits["doc_id"].to_pylist(), edits["line"].to_pylist(), strict=True):
        removed.setdefault(doc_id, set()).add(line)
    kept = ["\n".join(line for number, line in enumerate(text.splitlines())
                      if number not in removed.get(doc_id, set()))
            for doc_id, text in zip(doc_ids, texts, strict=True)]
    return LabelledSet(labelled.pages, labelled.pairs, signed(doc_ids, kept, dedup.minhash))
