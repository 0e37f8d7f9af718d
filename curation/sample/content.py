"""Main content of ordinary pages, per genre: blog posts, articles, recipes, how-tos, reviews,
news items and forum threads."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from curation.sample import texts_en, texts_intl
from curation.sample.bank import Bank
from curation.sample.compose import (
    Block,
    Filler,
    Pool,
    ProseSpec,
    capitalise,
    page_share,
    paragraph,
    prose,
)
from curation.sample.sites import CHROME, Site

BANKS: dict[str, Bank] = {**texts_en.TOPICS, **texts_intl.TOPICS}


@dataclass
class Content:
    """A page's title and main content, plus the typed values written into it."""

    title: str
    blocks: list[Block]
    item: str = ""
    pii: list[dict[str, str]] = field(default_factory=list)
    lookalikes: list[dict[str, str]] = field(default_factory=list)
    templates: list[str] = field(default_factory=list)  # so an edit can pick unused ones


def make_filler(rng: random.Random, bank: Bank) -> Filler:
    slots = {**texts_en.GENERIC.slots, **bank.slots} if bank.lang == "en" else bank.slots
    filler = Filler(rng, bank.lang, slots)
    filler.bound["item"] = rng.choice(bank.slots["item"])
    return filler


# Topics where the generic hobbyist sentences ("cheap tools are fine to begin with") fit.
HOBBY_TOPICS = ("gardening", "hiking", "cooking", "diy", "tech", "pets")


def _spec(bank: Bank, item: str, target: int, **overrides: object) -> ProseSpec:
    generic = texts_en.GENERIC if bank.lang == "en" else None
    sentences = list(bank.sentences_about(item))
    if generic is not None and bank.key in HOBBY_TOPICS:
        sentences += generic.get("sentences")
    spec = ProseSpec(
        sentences=sentences,
        target_words=target,
        intros=bank.get("intros") + (generic.get("intros") if generic else ()),
        closings=bank.get("closings") or (generic.get("closings") if generic else ()),
        headings=bank.get("headings"),
    )
    for name, value in overrides.items():
        setattr(spec, name, value)
    return spec


def _list_section(
    rng: random.Random, label: str, items: tuple[str, ...], kind: str, size: tuple[int, int]
) -> list[Block]:
    if not items:
        return []
    count = min(len(items), rng.randint(*size))
    picked = sorted(rng.sample(range(len(items)), count))
    return [Block("h2", label), Block(kind, items=tuple(items[i] for i in picked))]


def _blog(rng: random.Random, filler: Filler, bank: Bank, target: int) -> list[Block]:
    return prose(rng, filler, _spec(bank, filler.bound["item"], target))


def _recipe(rng: random.Random, filler: Filler, bank: Bank, target: int) -> list[Block]:
    labels = CHROME[bank.lang]
    first = _spec(bank, filler.bound["item"], target // 2, headings=(), closings=())
    pool = Pool(rng, first.sentences, page_share(rng))
    blocks = prose(rng, filler, first, pool)
    blocks += _list_section(rng, labels["ingredients"], bank.get("items"), "ul", (4, 8))
    blocks += _list_section(rng, labels["method"], bank.get("steps"), "ol", (3, 6))
    rest = _spec(bank, filler.bound["item"], target // 2, intros=())
    return blocks + prose(rng, filler, rest, pool)


def _howto(rng: random.Random, filler: Filler, bank: Bank, target: int) -> list[Block]:
    labels = CHROME[bank.lang]
    first = _spec(bank, filler.bound["item"], target // 3, headings=(), closings=())
    pool = Pool(rng, first.sentences, page_share(rng))
    blocks = prose(rng, filler, first, pool)
    blocks += _list_section(rng, labels["need"], bank.get("items"), "ul", (3, 6))
    blocks += _list_section(rng, labels["steps"], bank.get("steps"), "ol", (4, 7))
    if bank.get("code"):
        blocks.append(Block("pre", rng.choice(bank.get("code"))))
    rest = _spec(bank, filler.bound["item"], 2 * target // 3, intros=())
    return blocks + prose(rng, filler, rest, pool)


def _review(rng: random.Random, filler: Filler, bank: Bank, target: int) -> list[Block]:
    labels = CHROME[bank.lang]
    blocks = prose(rng, filler, _spec(bank, filler.bound["item"], target, closings=()))
    blocks += _list_section(rng, labels["pros"], bank.get("pros"), "ul", (2, 4))
    blocks += _list_section(rng, labels["cons"], bank.get("cons"), "ul", (1, 3))
    score = rng.choice(("6/10", "7/10", "8/10", "9/10", "3.5/5", "4/5", "4.5/5"))
    verdict = f"{labels['score']}: {score}. " + rng.choice(texts_en.GENERIC.get("closings"))
    return blocks + [Block("h2", labels["verdict"]), Block("p", verdict)]


def _news(rng: random.Random, filler: Filler, bank: Bank, target: int) -> list[Block]:
    spec = _spec(bank, filler.bound["item"], target, intros=(), closings=(), headings=())
    spec.sentences = bank.get("sentences")
    spec.per_paragraph = (1, 3)
    blocks = prose(rng, filler, spec)
    dateline = f"RIVERTON, {filler.fill('{weekday}').upper()}: "
    blocks[0] = Block("p", dateline + blocks[0].text)
    quote = f"\u201c{rng.choice(bank.get('quotes'))}\u201d said {filler.fill('{official}')}."
    blocks.insert(min(3, len(blocks)), Block("p", quote))
    return blocks


def forum_posts(
    rng: random.Random, filler: Filler, bank: Bank, site: Site, target: int
) -> list[Block]:
    """A thread: an opening question and replies, each a post block with author and date."""
    generic = texts_en.GENERIC
    sentences = Pool(rng, bank.sentences_about(filler.bound["item"]), page_share(rng)).take(99)
    posts: list[Block] = []
    # Threads date from late 2023, before either snapshot was crawled.
    words, day, month = 0, rng.randint(1, 20), rng.choice(("2023-10", "2023-11", "2023-12"))
    users = list(site.authors)
    rng.shuffle(users)
    # Openers and sign-offs are drawn without replacement too: a thread never repeats one.
    openers, closers = Pool(rng, generic.get("forum_open")), Pool(rng, generic.get("forum_close"))
    while sentences and (words < target or len(posts) < 2) and len(posts) < 6:
        body = openers.take(1)
        body += [sentences.pop() for _ in range(min(len(sentences), rng.randint(2, 4)))]
        body += closers.take(1)
        text = paragraph(filler, body)
        user = users[len(posts) % len(users)]
        posts.append(Block("post", text, meta=f"{user}|{month}-{day:02d}"))
        words += len(text.split())
        day = min(28, day + rng.randint(0, 2))
    return posts


GENRES: dict[str, Callable[[random.Random, Filler, Bank, int], list[Block]]] = {
    "blog": _blog,
    "article": _blog,
    "recipe": _recipe,
    "howto": _howto,
    "review": _review,
    "news": _news,
}


def build_article(rng: random.Random, site: Site, target: int) -> Content:
    """An ordinary page of `site`: title, main content and the site's in-article lines."""
    bank = BANKS[site.topic or ""]
    filler = make_filler(rng, bank)
    titles = bank.get("forum_titles") if site.genre == "forum" else ()
    title = capitalise(filler.fill(rng.choice(titles or bank.get("titles"))))
    if site.genre == "forum":
        blocks = forum_posts(rng, filler, bank, site, target)
    else:
        blocks = GENRES[site.genre](rng, filler, bank, target)
    blocks += [Block("p", line) for line in site.boilerplate]
    return Content(title, blocks, filler.bound["item"], filler.pii, filler.lookalikes, filler.used)
