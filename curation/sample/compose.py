"""Fill sentence templates and assemble them into the main content of a page.

Text is built from hand-written sentence banks: a page draws sentences without replacement, so
it never repeats itself, and fills `{slot}`s, so two pages of the same site share templates but
not whole paragraphs (near-duplicate detection must not fire on ordinary pages).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from curation.sample import values
from curation.sample.variation import vary

SLOT = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Block:
    """One element of a page's main content: p, h2, ul, ol, pre, links (a link farm's list) or
    post (a forum post; `meta` is "author|date")."""

    kind: str
    text: str = ""
    items: tuple[str, ...] = ()
    meta: str = ""

    def plain(self) -> str:
        """The text a perfect extractor would return for this block."""
        return "\n".join(self.items) if self.items else self.text


def main_text(blocks: Sequence[Block]) -> str:
    return "\n".join(block.plain() for block in blocks)


def count_words(text: str, lang: str) -> int:
    # Japanese has no spaces; about 1.5 characters per word is close enough for length targets.
    if lang == "ja":
        return int(len(text) / 1.5)
    return len(text.split())


@dataclass
class Filler:
    """Fills `{slot}` templates; records every PII and look-alike value it writes."""

    rng: random.Random
    lang: str
    slots: Mapping[str, Sequence[str]]
    bound: dict[str, str] = field(default_factory=dict)
    pii: list[dict[str, str]] = field(default_factory=list)
    lookalikes: list[dict[str, str]] = field(default_factory=list)
    used: list[str] = field(default_factory=list)  # sentence templates written, in order

    def fill(self, template: str) -> str:
        return SLOT.sub(lambda match: self.value(match.group(1)), template)

    def value(self, name: str) -> str:
        if name in self.bound:
            return self.bound[name]
        if name in values.PII_TYPES:
            value = values.PII_TYPES[name](self.rng, self.lang)
            self.pii.append({"type": _pii_type(name), "value": value})
            return value
        if name in values.LOOKALIKE_TYPES:
            value = values.LOOKALIKE_TYPES[name](self.rng, self.lang)
            self.lookalikes.append({"type": name, "value": value})
            return value
        if name in self.slots:
            return self.rng.choice(self.slots[name])
        raise KeyError(f"unknown slot {{{name}}} in a {self.lang} bank")


def _pii_type(slot: str) -> str:
    return "phone" if slot.startswith("phone") else slot


def capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


class Pool:
    """Sentences drawn without replacement, so a page never repeats a sentence.

    `share` caps how much of the bank one page may use: two pages that each use half of a bank
    share about a quarter of it, which keeps unrelated pages well below near-duplicate
    similarity.
    """

    def __init__(self, rng: random.Random, items: Sequence[str], share: float = 1.0) -> None:
        self._items = list(dict.fromkeys(items))
        rng.shuffle(self._items)
        self._items = self._items[: max(4, round(len(self._items) * share))]

    def take(self, count: int) -> list[str]:
        taken, self._items = self._items[:count], self._items[count:]
        return taken

    def __len__(self) -> int:
        return len(self._items)


def _joiner(lang: str) -> str:
    return "" if lang == "ja" else " "


def paragraph(filler: Filler, templates: Sequence[str]) -> str:
    filler.used.extend(templates)
    sentences = (vary(filler.rng, capitalise(filler.fill(t)), filler.lang) for t in templates)
    return _joiner(filler.lang).join(sentences)


def page_share(rng: random.Random) -> float:
    """How much of its bank a page may use: about half, and most of it for a few long pages."""
    return 0.85 if rng.random() < 0.12 else 0.5


@dataclass
class ProseSpec:
    """What one stretch of prose draws on."""

    sentences: Sequence[str]
    target_words: int
    intros: Sequence[str] = ()
    closings: Sequence[str] = ()
    headings: Sequence[str] = ()
    per_paragraph: tuple[int, int] = (2, 5)


def prose(
    rng: random.Random, filler: Filler, spec: ProseSpec, pool: Pool | None = None
) -> list[Block]:
    """Intro, body paragraphs (with an h2 every two or three paragraphs) and a closing.

    Pass the same `pool` to every call that builds one page, so no sentence appears twice.
    """
    pool = pool if pool is not None else Pool(rng, spec.sentences, page_share(rng))
    headings = Pool(rng, spec.headings)
    blocks: list[Block] = []
    words = 0
    first = ([rng.choice(spec.intros)] if spec.intros else []) + pool.take(rng.randint(1, 2))
    blocks.append(Block("p", paragraph(filler, first)))
    words += count_words(blocks[-1].text, filler.lang)
    since_heading = 0
    while words < spec.target_words and len(pool) >= 2:
        if headings and since_heading >= rng.randint(2, 3):
            blocks.append(Block("h2", filler.fill(headings.take(1)[0])))
            since_heading = 0
        text = paragraph(filler, pool.take(rng.randint(*spec.per_paragraph)))
        blocks.append(Block("p", text))
        words += count_words(text, filler.lang)
        since_heading += 1
    if spec.closings:
        # The closing line joins real sentences, so it never stands alone as a repeated line.
        closing = pool.take(1) + [rng.choice(spec.closings)]
        blocks.append(Block("p", paragraph(filler, closing)))
    return blocks


def target_words(rng: random.Random, low: int = 150, high: int = 1200, mode: int = 420) -> int:
    return int(rng.triangular(low, high, mode))
