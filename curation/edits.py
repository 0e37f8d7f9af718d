"""Every recorded text edit applied in one rewrite (docs/architecture.md, "Annotate, then select").

Stages record edits instead of rewriting text: C4 line removals and citation cuts
(`heuristics`), boilerplate lines (`line_dedup`), PII spans (`scrubbed`). Lines index
`text.splitlines()`; spans are character offsets in the original text. `apply_edits` drops the
removed lines with their line breaks and replaces the spans on the lines that stay, so a
document nothing edits comes out byte for byte as it went in.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate


@dataclass(frozen=True, order=True)
class Replacement:
    """`text[start:end]` becomes `new` ("" cuts it); `kind` says what it replaces."""

    start: int
    end: int
    new: str = ""
    kind: str = ""


@dataclass(frozen=True)
class EditedText:
    text: str
    lines_removed: int
    # Those applied: a span on a removed line, or overlapping an earlier one, is not.
    replacements: list[Replacement]


def line_starts(text: str) -> list[int]:
    """Offset of each line of `text.splitlines()`, and the length of the text at the end."""
    return [0, *accumulate(map(len, text.splitlines(keepends=True)))]


def apply_edits(
    text: str, removed_lines: Collection[int], replacements: Iterable[Replacement]
) -> EditedText:
    """The text with `removed_lines` gone and `replacements` made, in one pass. Overlapping
    replacements keep the earliest (then longest) one."""
    starts = line_starts(text)
    pieces: list[str] = []
    position = 0  # everything before it is copied or dropped already
    removed = sorted(line for line in set(removed_lines) if 0 <= line < len(starts) - 1)
    applied = []
    for span in _without_overlaps(replacements):
        line = _line_of(starts, span.start)
        if line in removed or _line_of(starts, max(span.start, span.end - 1)) in removed:
            continue
        pieces.append(_kept(text, starts, removed, position, span.start))
        pieces.append(span.new)
        position = span.end
        applied.append(span)
    pieces.append(_kept(text, starts, removed, position, len(text)))
    return EditedText("".join(pieces), len(removed), applied)


def _without_overlaps(replacements: Iterable[Replacement]) -> list[Replacement]:
    kept: list[Replacement] = []
    for span in sorted(replacements, key=lambda r: (r.start, -r.end)):
        if span.end > span.start and (not kept or span.start >= kept[-1].end):
            kept.append(span)
    return kept


def _line_of(starts: Sequence[int], offset: int) -> int:
    return bisect_right(starts, offset) - 1


def _kept(text: str, starts: Sequence[int], removed: Sequence[int], begin: int, end: int) -> str:
    """`text[begin:end]` without the removed lines in it."""
    pieces = []
    for line in removed:
        line_start, line_end = starts[line], starts[line + 1]
        if line_end <= begin or line_start >= end:
            continue
        pieces.append(text[begin:line_start])
        begin = max(begin, line_end)
    if begin < end:
        pieces.append(text[begin:end])
    return "".join(pieces)
