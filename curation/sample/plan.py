"""Decide which pages the sample holds: originals of every kind, then exact and near duplicates
of some of them, each with a snapshot, a URL and a charset.

Every page draws from its own `random.Random` seeded by (seed, page id), so changing one page's
recipe does not reshuffle every other page.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from curation.sample import evals, pii, spam
from curation.sample.compose import SLOT, Block, Filler, count_words, main_text, target_words
from curation.sample.content import BANKS, Content, build_article
from curation.sample.html import slug
from curation.sample.sites import SITES_BY_DOMAIN, Site
from curation.sample.values import LOOKALIKE_TYPES

SNAPSHOTS = ("SAMPLE-01", "SAMPLE-02")

# Ordinary articles per language and site (weights within a language).
ARTICLE_SITES: dict[str, dict[str, int]] = {
    "en": {
        "greenthumb-journal.net": 19, "veggie-patch-forum.org": 10, "trailnotes-outdoors.com": 15,
        "weeknight-kitchen.com": 17, "fixit-at-home.co.uk": 14, "plainmoney-guide.com": 13,
        "devnotes-daily.io": 14, "selfhosters-forum.net": 10, "gearcheck-reviews.com": 15,
        "shelfwise-reviews.com": 11, "riverton-gazette.com": 16, "curious-cosmos.org": 11,
        "pawsandwhiskers-blog.com": 12, "wanderlight-travel.com": 13, "pubquiz-corner.com": 5,
    },
    "de": {"bergwandern-blog.de": 15, "technik-ratgeber.de": 13},
    "fr": {"cuisine-facile.fr": 14, "escapades-en-france.fr": 13},
    "es": {"recetas-del-sol.es": 14, "huerto-urbano.es": 13},
    "ja": {"hibi-no-gohan.jp": 14},
    "ru": {"pohody-i-gory.ru": 14},
}
EVAL_SITES = ("pubquiz-corner.com",) * 12 + ("veggie-patch-forum.org",) * 2 + (
    "selfhosters-forum.net",)
QUOTED_ITEMS = 12

# (subtype, source snapshot, target snapshot, count): exact copies of the main text.
DUPLICATES = (
    ("syndicated", 0, 0, 3), ("syndicated", 1, 1, 3), ("alt_path", 0, 0, 2),
    ("alt_path", 1, 1, 2), ("syndicated", 0, 1, 4), ("recrawl_same_url", 0, 1, 8),
    ("recrawl_tracking", 0, 1, 7), ("recrawl_slash", 0, 1, 5), ("url_variant", 0, 0, 3),
    ("url_variant", 1, 1, 3),
)
# (source snapshot, target snapshot, count): copies with small edits.
NEAR_DUPLICATES = ((0, 0, 17), (1, 1, 10), (0, 1, 13))
ORIGINALS_IN_FIRST = 225
NEAR_EDITS = ("words", "sentence", "paragraph", "sentence+paragraph")
AGGREGATOR = "dailyfeed-aggregator.com"


@dataclass
class Page:
    """One HTML page of the sample and the truth about it."""

    page_id: str
    kind: str  # article, pii, eval_quote, spam, stub, duplicate, near_duplicate
    subkind: str
    site: Site
    lang: str
    content: Content
    snapshot: str = ""
    url: str = ""
    canonical: str = ""
    author: str = ""
    published: str = ""
    charset: str = "utf-8"  # utf-8, cp1252-declared-utf-8 (a lying header) or shift_jis
    source: str | None = None
    eval_items: list[int] = field(default_factory=list)

    @property
    def text(self) -> str:
        return main_text(self.content.blocks)

    @property
    def words(self) -> int:
        return count_words(self.text, self.lang)


def _page_rng(seed: int, page_id: str, purpose: str = "content") -> random.Random:
    return random.Random(f"{seed}:{purpose}:{page_id}")


def _allocate(weights: dict[str, int]) -> list[str]:
    return [domain for domain, count in weights.items() for _ in range(count)]


def _published(rng: random.Random) -> str:
    return f"{rng.randint(2021, 2023)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def _original_specs() -> list[tuple[str, str, str, str]]:
    """(kind, subkind, domain, lang) for every original page, in a fixed order."""
    specs = []
    for lang, weights in ARTICLE_SITES.items():
        specs += [("article", "ordinary", domain, lang) for domain in _allocate(weights)]
    for subkind, count in pii.COUNTS.items():
        _, domains, _ = pii.SUBKINDS[subkind]
        for n in range(count):
            domain = domains[n % len(domains)]
            specs.append(("pii", subkind, domain, SITES_BY_DOMAIN[domain].lang))
    specs += [("eval_quote", "quiz", domain, "en") for domain in EVAL_SITES]
    for entry in spam.PLAN:
        specs += [(entry.kind, entry.subkind, entry.domains[n % len(entry.domains)], entry.lang)
                  for n in range(entry.count)]
    return specs


def _target(rng: random.Random, site: Site) -> int:
    if site.lang != "en":
        return target_words(rng, 150, 700, 300)
    if site.genre == "forum":
        return target_words(rng, 150, 800, 320)
    return target_words(rng)


def _build_original(seed: int, number: int, spec: tuple[str, str, str, str],
                    quotes: list[list[int]]) -> Page:
    kind, subkind, domain, lang = spec
    page_id = f"p{number:04d}"
    rng = _page_rng(seed, page_id)
    site = SITES_BY_DOMAIN[domain]
    eval_items: list[int] = []
    if kind == "article":
        content = build_article(rng, site, _target(rng, site))
    elif kind == "pii":
        content = pii.build_pii_page(rng, site, subkind, target_words(rng, 150, 600, 280))
    elif kind == "eval_quote":
        eval_items = quotes.pop()
        content = evals.build_eval_page(rng, eval_items, site)
    else:
        content = spam.build_spam_page(rng, subkind, domain, lang)
    author = rng.choice(site.authors) if site.authors else site.name
    return Page(page_id, kind, subkind, site, lang, content, author=author,
                published=_published(rng), eval_items=eval_items)


def _eval_quotes(rng: random.Random) -> list[list[int]]:
    """Which items each eval-quoting page quotes: every chosen item at least once."""
    chosen = evals.choose_quoted(rng, QUOTED_ITEMS)
    quotes = [[item] for item in chosen[: len(EVAL_SITES)]]
    while len(quotes) < len(EVAL_SITES):
        quotes.append([])
    for group in quotes:
        extra = [i for i in rng.sample(chosen, rng.randint(1, 3)) if i not in group]
        group.extend(extra)
        group.sort()
    return quotes[::-1]


def build_originals(seed: int) -> list[Page]:
    rng = random.Random(f"{seed}:plan")
    quotes = _eval_quotes(rng)
    pages = [_build_original(seed, n, spec, quotes)
             for n, spec in enumerate(_original_specs(), start=1)]
    _mark_charsets(pages)
    rng.shuffle(pages)
    # Stratified split: walk the pages grouped by kind and language and hand every group to the
    # snapshots in the overall proportion, so both snapshots have the same mix (a stage that
    # compares a snapshot's language mix with the previous one must not see sampling noise).
    pages.sort(key=lambda page: (page.kind, page.lang))
    share = ORIGINALS_IN_FIRST / len(pages)
    for index, page in enumerate(pages):
        first = int((index + 1) * share) > int(index * share)
        page.snapshot = SNAPSHOTS[0] if first else SNAPSHOTS[1]
    return pages


def _mark_charsets(pages: list[Page]) -> None:
    # One French page in windows-1252 behind a utf-8 header; one Japanese page in Shift_JIS.
    french = next(p for p in pages if p.lang == "fr" and p.kind == "article")
    french.charset = "cp1252-declared-utf-8"
    japanese = next(p for p in pages if p.lang == "ja" and p.kind == "article")
    japanese.charset = "shift_jis"


# --- URLs ----------------------------------------------------------------------------------


def page_url(rng: random.Random, page: Page) -> str:
    site, title = page.site, page.content.title
    base = f"https://{site.host}"
    words = slug(title, "page")
    number = rng.randint(1000, 99999)
    year, month, day = page.published.split("-")
    if site.url_style == "dated":
        return f"{base}/{year}/{month}/{words}/"
    if site.url_style == "section":
        return f"{base}/{slug(site.nav[1], 'articles')}/{words}"
    if site.url_style == "news":
        return f"{base}/news/{year}/{month}/{day}/{words}-{number}"
    if site.url_style == "forum":
        if not site.www:
            return f"{base}/viewtopic.php?f={rng.randint(2, 9)}&t={number}"
        return f"{base}/t/{words}/{number}"
    if site.url_style == "html" and not site.nav:
        # Spam and parked domains: keyword slugs, often with a tracking id.
        return f"{base}/{words}-{number}.html"
    if site.url_style == "html":
        return f"{base}/{slug(site.nav[0], 'pages')}/{words}.html"
    if site.genre == "aggregator":
        return f"{base}/story/{number}-{words}"
    return f"{base}/entry/{year}/{month}/{day}/{number}"


def assign_urls(seed: int, pages: list[Page]) -> None:
    taken: set[tuple[str, str]] = {(p.snapshot, p.url) for p in pages if p.url}
    for page in pages:
        if page.url:
            continue
        url = page_url(_page_rng(seed, page.page_id, "url"), page)
        while (page.snapshot, url) in taken:
            url = _bump(url)
        taken.add((page.snapshot, url))
        page.url = page.canonical = url


def _bump(url: str) -> str:
    """The next free variant of a slug URL: /a/ -> /a-2/, /a.html -> /a-2.html."""
    for ending in (".html", "/"):
        if url.endswith(ending):
            return url[: -len(ending)] + "-2" + ending
    return url + ("&page=2" if "?" in url else "-2")


# --- duplicates ----------------------------------------------------------------------------


def _eligible(page: Page, snapshot: str, min_words: int, used: set[str]) -> bool:
    return (page.kind == "article" and page.snapshot == snapshot and page.charset == "utf-8"
            and page.words >= min_words and page.page_id not in used)


def _url_variant(rng: random.Random, url: str, subtype: str) -> str:
    if subtype == "recrawl_same_url":
        return url
    if subtype == "recrawl_slash" or (subtype == "url_variant" and rng.random() < 0.3):
        return url[:-1] if url.endswith("/") else url + "/"
    if subtype == "url_variant" and rng.random() < 0.4:
        return url.replace("https://", "http://", 1)
    source = rng.choice(("newsletter", "twitter", "facebook", "rss"))
    params = f"utm_source={source}&utm_medium=social&utm_campaign=spring"
    if rng.random() < 0.3:
        params = f"fbclid=IwAR{rng.randint(10**8, 10**9)}"
    return url + ("&" if "?" in url else "?") + params


def _duplicate(seed: int, number: int, source: Page, subtype: str, snapshot: str) -> Page:
    page_id = f"p{number:04d}"
    rng = _page_rng(seed, page_id)
    copy = replace(source, page_id=page_id, kind="duplicate", subkind=subtype, snapshot=snapshot,
                   source=source.page_id, url="", canonical="", eval_items=[])
    if subtype.startswith("recrawl") or subtype == "url_variant":
        copy.url = _url_variant(rng, source.url, subtype)
        copy.canonical = source.url
    elif subtype == "alt_path":
        host_end = source.url.index("/", len("https://"))
        prefix = rng.choice(("/amp", "/print", "/mobile"))
        copy.url = source.url[:host_end] + prefix + source.url[host_end:]
        copy.canonical = source.url
    else:
        copy.site = SITES_BY_DOMAIN[AGGREGATOR]
        copy.author = "DailyFeed staff"
    return copy


def _needs_query_free(subtype: str) -> bool:
    return subtype in ("recrawl_slash", "alt_path")


def build_duplicates(seed: int, originals: list[Page], first_number: int) -> list[Page]:
    rng = random.Random(f"{seed}:duplicates")
    used: set[str] = set()
    pages: list[Page] = []
    number = first_number
    for subtype, source_snap, target_snap, count in DUPLICATES:
        pool = [p for p in originals if _eligible(p, SNAPSHOTS[source_snap], 200, used)
                and not (_needs_query_free(subtype) and "?" in p.url)
                and not (subtype == "syndicated" and p.lang != "en")]
        for source in rng.sample(pool, count):
            used.add(source.page_id)
            pages.append(_duplicate(seed, number, source, subtype, SNAPSHOTS[target_snap]))
            number += 1
    for source_snap, target_snap, count in NEAR_DUPLICATES:
        # Long sources only: the same edit on a short page would fall below the similarity
        # at which MinHash (about 0.75 Jaccard for FineWeb's 14x8 bands) reliably pairs them.
        pool = [p for p in originals if _eligible(p, SNAPSHOTS[source_snap], 300, used)]
        for n, source in enumerate(rng.sample(pool, count)):
            used.add(source.page_id)
            edit = NEAR_EDITS[(n + source_snap) % len(NEAR_EDITS)]
            pages.append(_near_duplicate(seed, number, source, edit, SNAPSHOTS[target_snap]))
            number += 1
    return pages


# --- near duplicates -----------------------------------------------------------------------

_INSERTS = {
    "en": ("really", "honestly", "actually", "quite", "certainly"),
    "de": ("wirklich", "eigentlich", "ziemlich"),
    "fr": ("vraiment", "plutôt", "assez"),
    "es": ("realmente", "bastante", "muy"),
    "ja": ("本当に", "とても"),
    "ru": ("действительно", "очень"),
}


def _edit_words(rng: random.Random, blocks: list[Block], lang: str) -> list[Block]:
    """Insert or drop a handful of words in a few paragraphs."""
    indices = [i for i, b in enumerate(blocks) if b.kind in ("p", "post") and len(b.text) > 80]
    for i in rng.sample(indices, min(3, len(indices))):
        block = blocks[i]
        if lang == "ja":
            cut = rng.randrange(5, len(block.text) - 5)
            text = block.text[:cut] + rng.choice(_INSERTS["ja"]) + block.text[cut:]
        else:
            words = block.text.split(" ")
            position = rng.randrange(1, len(words) - 1)
            if rng.random() < 0.5:
                words.insert(position, rng.choice(_INSERTS[lang]))
            else:
                del words[position]
            text = " ".join(words)
        blocks[i] = replace(block, text=text)
    return blocks


def _fresh_sentences(rng: random.Random, page: Page, count: int, found: Filler) -> list[str]:
    """Sentences of the page's topic bank that the page does not already contain."""
    bank = BANKS.get(page.site.topic or "")
    if bank is None:
        return []
    used = set(page.content.templates)
    fresh = [t for t in bank.sentences_about(page.content.item) if _fillable(t) and t not in used]
    rng.shuffle(fresh)
    return [found.fill(t) for t in fresh[:count]]


def _fillable(template: str) -> bool:
    return all(name == "item" or name in LOOKALIKE_TYPES for name in SLOT.findall(template))


def _edit_sentence(
    rng: random.Random, blocks: list[Block], page: Page, found: Filler
) -> list[Block]:
    """Swap one sentence of a long paragraph for another sentence of the same topic."""
    indices = [i for i, b in enumerate(blocks) if b.kind in ("p", "post") and len(b.text) > 120]
    fresh = _fresh_sentences(rng, page, 1, found)
    if not indices or not fresh:
        return _edit_words(rng, blocks, page.lang)
    i = rng.choice(indices)
    end = "\u3002" if page.lang == "ja" else ". "
    sentences = blocks[i].text.split(end)
    position = rng.randrange(len(sentences) - 1) if len(sentences) > 1 else 0
    sentences[position] = fresh[0].rstrip(".\u3002")
    blocks[i] = replace(blocks[i], text=end.join(sentences))
    return blocks


def _edit_paragraph(
    rng: random.Random, blocks: list[Block], page: Page, found: Filler
) -> list[Block]:
    """Add a paragraph of new sentences of the same topic."""
    fresh = _fresh_sentences(rng, page, rng.randint(1, 2), found)
    if not fresh:
        return _edit_words(rng, blocks, page.lang)
    kind = "post" if any(b.kind == "post" for b in blocks) else "p"
    meta = next((b.meta for b in blocks if b.kind == "post"), "")
    paragraph = ("" if page.lang == "ja" else " ").join(fresh)
    position = rng.randint(1, max(1, len(blocks) - len(page.site.boilerplate)))
    blocks.insert(position, Block(kind, paragraph, meta=meta))
    return blocks


# Every near-duplicate keeps at least this 5-gram Jaccard similarity with its source, so a
# MinHash stage tuned like FineWeb's (about 0.75) should pair them all.
NEAR_MIN_SIMILARITY = 0.8


def similarity(left: str, right: str, lang: str) -> float:
    """Jaccard similarity of word 5-grams (character 5-grams for Japanese)."""

    def shingles(text: str) -> set[object]:
        if lang == "ja":
            flat = text.replace("\n", "")
            return {flat[i : i + 5] for i in range(len(flat) - 4)}
        words = text.lower().split()
        return {tuple(words[i : i + 5]) for i in range(len(words) - 4)}

    a, b = shingles(left), shingles(right)
    return len(a & b) / max(1, len(a | b))


def _apply_edit(
    rng: random.Random, source: Page, edit: str, found: Filler
) -> list[Block]:
    blocks = list(source.content.blocks)
    if edit == "words":
        blocks = _edit_words(rng, blocks, source.lang)
    if "sentence" in edit:
        blocks = _edit_sentence(rng, blocks, source, found)
    if "paragraph" in edit:
        blocks = _edit_paragraph(rng, blocks, source, found)
    return blocks


def _near_duplicate(seed: int, number: int, source: Page, edit: str, snapshot: str) -> Page:
    page_id = f"p{number:04d}"
    rng = _page_rng(seed, page_id)
    found = Filler(rng, source.lang, {}, {"item": source.content.item})
    blocks = _apply_edit(rng, source, edit, found)
    if similarity(main_text(blocks), source.text, source.lang) < NEAR_MIN_SIMILARITY:
        # Too big a change for a short source: a few changed words instead.
        edit, found.lookalikes = "words", []
        blocks = _apply_edit(rng, source, edit, found)
    # Edits can drop a sentence holding a recorded value: keep only values still in the text.
    text = main_text(blocks)
    lookalikes = [v for v in source.content.lookalikes + found.lookalikes if v["value"] in text]
    pii = [v for v in source.content.pii if v["value"] in text]
    content = replace(source.content, blocks=blocks, lookalikes=lookalikes, pii=pii)
    if rng.random() < 0.4:
        content = replace(content, title=content.title + rng.choice((" (updated)", " - revised")))
    site = source.site
    if source.lang == "en" and rng.random() < 0.3:
        site = SITES_BY_DOMAIN[AGGREGATOR]
    return replace(source, page_id=page_id, kind="near_duplicate", subkind=edit, site=site,
                   content=content, snapshot=snapshot, source=source.page_id, url="",
                   canonical="", eval_items=[], published=_published(rng))
