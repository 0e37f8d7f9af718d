"""A tiny text-bank format, so hand-written sentences stay readable and under 100 columns.

A bank is a block of text with sections and items::

    [sentences]
    - First item, which may run over
      several lines when it is long.
    - Second item.
    [slot:item]
    - tomatoes

A line `[name]` opens a section, `- ` starts an item, and an indented line continues the item
before it. Continuations are joined with a space, except between two wide (CJK) characters,
where a space would be wrong.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field


def _is_wide(char: str) -> bool:
    return unicodedata.east_asian_width(char) in ("W", "F")


def _join(left: str, right: str) -> str:
    if left and right and _is_wide(left[-1]) and _is_wide(right[0]):
        return left + right
    return f"{left} {right}"


def parse_bank(text: str) -> dict[str, tuple[str, ...]]:
    """Sections of a bank as tuples of items, in the order written."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
        elif line.startswith("- "):
            if current is None:
                raise ValueError(f"item outside a section: {line!r}")
            current.append(line[2:].strip())
        elif line.startswith("  ") and current:
            current[-1] = _join(current[-1], line.strip())
        else:
            raise ValueError(f"cannot parse bank line: {line!r}")
    return {name: tuple(items) for name, items in sections.items()}


@dataclass(frozen=True)
class Bank:
    """The text of one topic in one language: titles, headings, sentences and slot values."""

    key: str
    lang: str
    sections: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def parse(cls, key: str, lang: str, text: str) -> Bank:
        return cls(key, lang, parse_bank(text))

    def get(self, name: str) -> tuple[str, ...]:
        return self.sections.get(name, ())

    @property
    def slots(self) -> dict[str, tuple[str, ...]]:
        return {
            name.removeprefix("slot:"): items
            for name, items in self.sections.items()
            if name.startswith("slot:")
        }

    def sentences_about(self, item: str) -> tuple[str, ...]:
        """General sentences plus those written for one subject (`[about:SUBJECT]`)."""
        return self.get("sentences") + self.get(f"about:{item}")
