"""One rewrite applies every recorded edit (`curation.edits`)."""

from __future__ import annotations

from curation.edits import Replacement, apply_edits, line_starts

TEXT = "Title\nMail me at a@b.org today.\nHome | About\nLast line [1] here."


def test_no_edits_leave_the_text_byte_for_byte() -> None:
    odd = "a\r\nb\u2028c\n\n  d  "
    assert apply_edits(odd, [], []).text == odd


def test_lines_spans_and_placeholders_in_one_pass() -> None:
    mail = TEXT.index("a@b.org")
    cite = TEXT.index(" [1]")
    edited = apply_edits(
        TEXT,
        removed_lines=[2],
        replacements=[Replacement(mail, mail + 7, "|||EMAIL_ADDRESS|||"),
                      Replacement(cite, cite + 4)],
    )
    assert edited.text == "Title\nMail me at |||EMAIL_ADDRESS||| today.\nLast line here."
    assert (edited.lines_removed, len(edited.replacements)) == (1, 2)


def test_a_span_on_a_removed_line_goes_with_the_line() -> None:
    home = TEXT.index("Home")
    edited = apply_edits(TEXT, [2, 2, 99], [Replacement(home, home + 4, "X")])
    assert edited.text == "Title\nMail me at a@b.org today.\nLast line [1] here."
    assert (edited.lines_removed, edited.replacements) == (1, [])


def test_overlapping_spans_keep_the_earliest_and_longest() -> None:
    edited = apply_edits("0123456789", [], [Replacement(2, 6, "A"), Replacement(2, 4, "B"),
                                            Replacement(5, 8, "C"), Replacement(8, 9, "D")])
    assert edited.text == "01A67D9"
    assert [span.new for span in edited.replacements] == ["A", "D"]


def test_removing_every_line_leaves_nothing() -> None:
    assert apply_edits(TEXT, range(4), []).text == ""
    assert line_starts(TEXT)[-1] == len(TEXT)
