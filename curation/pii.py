"""PII scrubbing: find e-mail addresses, IP addresses, phone numbers, payment card numbers, US
social security numbers and IBANs, and replace each by a typed placeholder (no Dagster here).

`find_pii` returns sorted, non-overlapping `PiiSpan`s; `scrub` rewrites the text with the
placeholders (Dolma's `|||EMAIL_ADDRESS|||` style by default); `count_kinds` counts the spans.
The stage that annotates records the spans as edits and `scrubbed` applies them.

Precision comes first: a number is PII only in a shape PII is written in, and every checksum the
type has is checked. `curation.pii_rescan` is a second matcher written separately from the rules
below (the mix's gate re-scans scrubbed text with it), so the rules are stated exactly. "Alnum"
is ASCII letters and digits; a "digit" is 0-9 only.

EMAIL_ADDRESS
    local@domain. The local part is the whole run of ``A-Za-z0-9._%+-`` before the "@", 1 to 64
    characters, not starting or ending with "." and without "..". The domain is the longest run
    of two or more labels (alnum and "-", not starting or ending with "-", at most 63
    characters) joined by "." whose last label is 2 to 24 letters, and which is followed neither
    by alnum, "_" or "-", nor by "." and alnum. Not an address: a first domain label of digits and
    "x" (``logo@2x.png``) or an image extension as the last label (png, jpg, ...).
IP_ADDRESS, IPv4
    Four decimal octets joined by ".", the whole run of digits and dots (so OIDs, dates and
    "1.2.3.4.5" never match), not preceded by alnum, "_" or "." nor followed by alnum, "_", "."
    and a letter ("1.0.0.127.in-addr.arpa"), or "-"/"+" and a letter ("2.0.0.1-beta"). Each
    octet 0-255 without leading zeros. Not an address (versions and section numbers look the
    same, so the ambiguous quads are left alone): the first three octets single digits
    ("1.2.3.4", "8.2.4.44", "2.0.0.12"; this also leaves "8.8.8.8", a service, not a person),
    a last octet of 0 (a network, and "4.0.0.0"-style versions), a "/" right after a letter
    before it ("Firefox/91.13.0.1"), or a version word before it: after dropping the characters
    `` \\t:="'(#`` before the quad, the letters before are a whole word that ends in "version"
    or is one of `VERSION_WORDS` (looking back at most 200 characters, as for phone words).
IP_ADDRESS, IPv6
    The whole run of hex digits, ":" and "." (not preceded or followed by a letter or "_") with at
    least two ":", trailing "." and one trailing ":" (not "::") dropped, that parses as an IPv6
    address (full, "::"-compressed, or with a dotted IPv4 tail). It must show at least two groups
    (an IPv4 tail counts two), a group of three or more hex digits or an IPv4 tail, and a decimal
    digit: "::1", Python's ``x[1::2]``, ``std::``, "dead::beef" and "12:30:45" are not addresses.
    Public means: for "::ffff:a.b.c.d" the IPv4 address is public; otherwise `ipaddress` says
    global and not reserved, multicast, site- or link-local (Python 3.11: 2000::/3 less
    2001::/23 and 2001:db8::/32). IPv4 public: global (not private, loopback, link-local, shared,
    documentation, benchmark, reserved) and not multicast. Non-public addresses count only with
    `include_private_ips`.
PHONE_NUMBER
    A *token* is a run of ``0-9()+./-`` holding a digit; a *run* is tokens joined by single
    spaces, as long as it goes (a token ending in "." ends it). The whole run is tried, and if
    it is not a phone number each of its tokens alone. A candidate is trimmed: trailing ".",
    "-", "/" and unbalanced ")" drop, then leading unbalanced "(", then one enclosing "(...)"
    pair (the first "(" closing at the last ")"). It must not touch alnum or "_" on either side
    and must read ``[+] item (sep item)*`` with items ``123`` or ``(123)`` and separators " ",
    "-", ".", "/" (none only next to a parenthesis). It is a phone number in one of these
    shapes:
    international: "+" and 8-15 digits unsplit, or "+", a 1-3 digit country code, an optional
    "(0)", groups of 1-8 digits (at most one other in parentheses, 1-5 digits), separators " ",
    "-", "." or none, 8-15 digits in all, the "(0)" not counted ("+1 (555) 123-4567",
    "+44 20 7946 0958");
    North American: [1 sep] AAA sep EEE sep LLLL with one separator of "-", "." or " " (after "1"
    any of them), or [1] (AAA) EEE sep LLLL, area code 2-9xx ("555-123-4567");
    national with trunk 0: "0" and 1-4 digits (not "00"), plain or in parentheses, then 1-4
    groups of 2-8 digits with one separator throughout (with "." at least three groups, so
    "04.14159265" is a decimal), 9-12 digits ("06 12 34 56 78", "(020) 7946 0958",
    "030/901820");
    after a phone word: any well-formed candidate of 7-15 digits whose text before, past
    `` \\t:.#(``, ends in a whole word from `PHONE_WORDS`, possibly through one of "no", "nr",
    "num", "number" ("Tel.: 5551234567", "phone number: 555 1234").
CREDIT_CARD
    The whole run of digits joined by single spaces or dashes (not preceded by alnum or
    ``_.,/+-`` nor followed by alnum, "_" or ``.``/``,`` and a digit) with 13-19 digits, one kind
    of separator, grouped as one block, 4-4-...-(1-4), 4-6-5 or 4-6-4, an issuer prefix and
    length of `CARD_PREFIXES` (so a 14-digit timestamp "20000229123340" is no card), and a valid
    Luhn check digit.
US_SSN
    AAA-GG-SSSS as the whole run of digits and dashes (same boundaries as cards), area not 000,
    666 or 9xx, group not 00, serial not 0000, and not the tail of a date: a group 01-12 with a
    serial 1900-2099 ("125-08-2018") is left alone.
IBAN
    Two capital letters of a country in `IBAN_LENGTHS`, two check digits (not 00, 01 or 99) and
    capitals or digits to the country's length, either unbroken or in groups of four split by
    single spaces (the last group shorter), not preceded or followed by alnum or "_", with a
    valid ISO 7064 mod-97 check.

Overlapping candidates: the longer span wins, then the kind earlier in `PRIORITY`, then the
earlier start. Then the search runs again with the spans found overwritten by "|", as the
re-scan sees placeholders: a neighbour can hide PII ("10.0.0.1+44 20 7946 0958" has a phone
number only once the address is gone), and scrubbed text must re-scan clean.
"""

from __future__ import annotations

import bisect
import ipaddress
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple, get_args

import regex
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

PiiKind = Literal["EMAIL_ADDRESS", "IP_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD", "US_SSN", "IBAN"]
KINDS: tuple[PiiKind, ...] = get_args(PiiKind)
DEFAULT_PLACEHOLDERS: dict[PiiKind, str] = {kind: f"|||{kind}|||" for kind in KINDS}
# Overlap ties: a checksum-validated or more specific type beats a looser one.
PRIORITY: dict[str, int] = {
    kind: rank
    for rank, kind in enumerate(
        ("EMAIL_ADDRESS", "IBAN", "CREDIT_CARD", "US_SSN", "IP_ADDRESS", "PHONE_NUMBER")
    )
}

VERSION_WORDS = frozenset(
    "v ver version release rel build firmware fw rev revision update patch sp kernel driver "
    "bios".split()
)
PHONE_WORDS = frozenset(
    "tel tele telephone phone ph mobile mob cell cellphone fax whatsapp telefon telefono "
    "telefone tlf hotline".split()
)
PHONE_QUALIFIERS = frozenset({"no", "nr", "num", "number"})
IMAGE_EXTENSIONS = frozenset("png jpg jpeg gif svg webp bmp ico tif tiff avif".split())
# SWIFT IBAN registry: country -> IBAN length.
IBAN_LENGTHS: dict[str, int] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27,
    "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27,
    "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HN": 28, "HR": 21, "HU": 28,
    "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28,
    "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22,
    "MK": 19, "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23,
    "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24,
    "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28,
    "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}  # fmt: skip

_ASCII_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_DIGITS = frozenset("0123456789")


# --- settings --------------------------------------------------------------------------------


class PiiSettings(BaseModel):
    """Which PII types are replaced, by what, and whether non-public IP addresses count."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: tuple[PiiKind, ...] = KINDS
    include_private_ips: bool = False
    # Per type; types left out keep Dolma's placeholder.
    placeholders: dict[PiiKind, str] = Field(default_factory=lambda: dict(DEFAULT_PLACEHOLDERS))

    @field_validator("enabled")
    @classmethod
    def _unique(cls, value: tuple[PiiKind, ...]) -> tuple[PiiKind, ...]:
        return tuple(dict.fromkeys(value))

    @field_validator("placeholders")
    @classmethod
    def _complete(cls, value: dict[PiiKind, str]) -> dict[PiiKind, str]:
        if empty := [kind for kind, text in value.items() if not text]:
            raise ValueError(f"empty placeholder for {empty}")
        return {**DEFAULT_PLACEHOLDERS, **value}

    @model_validator(mode="after")
    def _placeholders_are_clean(self) -> PiiSettings:
        # A placeholder that itself looks like PII would be flagged by every re-scan.
        for kind, text in self.placeholders.items():
            if found := _candidates(text, KINDS, include_private_ips=True):
                raise ValueError(f"placeholders.{kind} {text!r} contains {found[0].kind}")
        return self


# --- results ---------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class PiiSpan:
    """Characters text[start:end] are PII of type `kind`."""

    start: int
    end: int
    kind: str


def find_pii(text: str, settings: PiiSettings | None = None) -> list[PiiSpan]:
    """The enabled PII in `text`: sorted, non-overlapping spans."""
    settings = settings or DEFAULT_SETTINGS
    kinds, private = settings.enabled, settings.include_private_ips
    spans = resolve_overlaps(_candidates(text, kinds, private))
    # A span's neighbour can hide PII: in "10.0.0.1+44 20 7946 0958" the digit before "+"
    # blocks the phone number until the address is replaced. Look again with the spans blanked
    # as the re-scan sees placeholders, so scrubbed text re-scans clean.
    for _ in range(_MAX_ROUNDS):
        more = resolve_overlaps(_candidates(_blank(text, spans), kinds, private)) if spans else []
        if not more:
            break
        spans = sorted(spans + more)
    return spans


_MAX_ROUNDS = 3


def _blank(text: str, spans: Sequence[PiiSpan]) -> str:
    """`text` with each span overwritten by "|" (offsets kept): no PII contains "|"."""
    parts, pos = [], 0
    for span in spans:
        parts += (text[pos : span.start], "|" * (span.end - span.start))
        pos = span.end
    parts.append(text[pos:])
    return "".join(parts)


def scrub(text: str, spans: Sequence[PiiSpan], settings: PiiSettings | None = None) -> str:
    """`text` with every span replaced by its type's placeholder. Spans must be sorted and
    non-overlapping (as `find_pii` returns them)."""
    placeholders = (settings or DEFAULT_SETTINGS).placeholders
    parts, pos = [], 0
    for span in spans:
        if span.start < pos or span.end < span.start:
            raise ValueError(f"spans must be sorted and non-overlapping: {span}")
        parts += (text[pos : span.start], placeholders[span.kind])  # type: ignore[index]
        pos = span.end
    parts.append(text[pos:])
    return "".join(parts)


def count_kinds(spans: Sequence[PiiSpan], settings: PiiSettings | None = None) -> dict[str, int]:
    """Spans per enabled type (zero included)."""
    counts = dict.fromkeys((settings or DEFAULT_SETTINGS).enabled, 0)
    for span in spans:
        counts[span.kind] = counts.get(span.kind, 0) + 1
    return counts


def scrub_text(text: str, settings: PiiSettings | None = None) -> tuple[str, dict[str, int]]:
    """Find, replace and count in one call."""
    spans = find_pii(text, settings)
    return scrub(text, spans, settings), count_kinds(spans, settings)


def resolve_overlaps(candidates: Sequence[PiiSpan]) -> list[PiiSpan]:
    """Keep the longest candidates (ties: `PRIORITY`, then start), dropping any that overlaps
    one kept; the result is sorted by position."""
    starts: list[int] = []
    kept: list[PiiSpan] = []
    order = sorted(candidates, key=lambda s: (s.start - s.end, PRIORITY[s.kind], s.start))
    for span in order:
        i = bisect.bisect_left(starts, span.start)
        if i < len(kept) and kept[i].start < span.end:
            continue
        if i > 0 and kept[i - 1].end > span.start:
            continue
        starts.insert(i, span.start)
        kept.insert(i, span)
    return kept


# --- candidates ------------------------------------------------------------------------------

_HAS_DIGIT = re.compile(r"[0-9]")


def _candidates(text: str, kinds: Sequence[str], include_private_ips: bool) -> list[PiiSpan]:
    """Every match of every type in `kinds`, overlaps included."""
    found: list[PiiSpan] = []
    if "EMAIL_ADDRESS" in kinds and "@" in text:
        found += (PiiSpan(s, e, "EMAIL_ADDRESS") for s, e in _emails(text))
    if not _HAS_DIGIT.search(text):  # every other type has a digit
        return found
    if "IBAN" in kinds:
        found += (PiiSpan(s, e, "IBAN") for s, e in _ibans(text))
    if any(kind in kinds for kind in _IN_RUNS):
        found += _in_runs(text, kinds, include_private_ips)
    # Only an IPv6 address with "::" or six colons can pass: skip the scan otherwise.
    if "IP_ADDRESS" in kinds and ("::" in text or text.count(":") >= 6):
        found += (PiiSpan(s, e, "IP_ADDRESS") for s, e in _ipv6s(text, include_private_ips))
    return found


# Types whose matches lie inside one phone run (digits and "()+./-", spaces between tokens), so
# one regex pass over the text finds every place worth a closer look.
_IN_RUNS = ("PHONE_NUMBER", "CREDIT_CARD", "US_SSN", "IP_ADDRESS")
_MIN_RUN = 7  # the shortest match of any of them: "1.2.3.4", seven phone digits
# A stretch of run characters long enough to hold such a run: far fewer than runs (most numbers
# are a year, a count or a price), so the run pattern only scans these.
_LONG_RUNS = re.compile(r"[0-9()+./-][0-9()+./ -]{5,}[0-9()+./-]")


def _in_runs(text: str, kinds: Sequence[str], include_private: bool) -> Iterator[PiiSpan]:
    for window in _LONG_RUNS.finditer(text):
        for run in _PHONE_RUN.finditer(text, *window.span()):
            if run.end() - run.start() >= _MIN_RUN:
                yield from _in_run(text, run.start(), run.group(), kinds, include_private)


def _in_run(
    text: str, start: int, run: str, kinds: Sequence[str], include_private: bool
) -> Iterator[PiiSpan]:
    """The phone numbers, cards, SSNs and IPv4 addresses in the run at `start`."""
    end = start + len(run)
    if "PHONE_NUMBER" in kinds:
        yield from (PiiSpan(s, e, "PHONE_NUMBER") for s, e in _phones(text, start, run))
    # Each pattern looks at most two characters around its match.
    lo = max(0, start - 2)
    window = text[lo : end + 2]
    if "CREDIT_CARD" in kinds and end - start >= 13:
        yield from _spans(_cards(window), lo, start, end, "CREDIT_CARD")
    if "US_SSN" in kinds and end - start >= 11 and "-" in run:
        yield from _spans(_ssns(window), lo, start, end, "US_SSN")
    if "IP_ADDRESS" in kinds and "." in run:
        ips = ((s, e) for s, e in _ipv4s(window) if _ipv4_ok(text, lo + s, e - s, include_private))
        yield from _spans(ips, lo, start, end, "IP_ADDRESS")


def _spans(
    found: Iterator[tuple[int, int]], offset: int, start: int, end: int, kind: str
) -> Iterator[PiiSpan]:
    """Window matches as text spans; those starting in the margin belong to another run."""
    for s, e in found:
        if start <= s + offset < end:
            yield PiiSpan(s + offset, e + offset, kind)


def _word_before(text: str, pos: int, skip: str) -> tuple[str, int]:
    """The run of ASCII letters that ends where the characters in `skip` before `pos` begin,
    and its start, within the `_LOOK_BACK` characters before `pos`."""
    limit = max(0, pos - _LOOK_BACK)
    end = pos
    while end > limit and text[end - 1] in skip:
        end -= 1
    start = end
    while start > limit and text[start - 1] in _ASCII_LETTERS:
        start -= 1
    return text[start:end], start


_LOOK_BACK = 200  # a word further back than this is not about the number


# --- e-mail ----------------------------------------------------------------------------------

_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+-])"
    r"([A-Za-z0-9_%+-](?:[A-Za-z0-9._%+-]{0,62}[A-Za-z0-9_%+-])?)"
    r"@((?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+([A-Za-z]{2,24}))"
    r"(?![A-Za-z0-9_-]|\.[A-Za-z0-9])"
)
_RETINA_LABEL = re.compile(r"[0-9]+[xX]")
_LOCAL_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._%+-")


def _emails(text: str) -> Iterator[tuple[int, int]]:
    # From each "@" back to the start of its local part, then one anchored match: much faster
    # than a pattern tried at every character.
    at = text.find("@")
    while at != -1:
        start = at
        while start > 0 and text[start - 1] in _LOCAL_CHARS and at - start <= 64:
            start -= 1
        m = _EMAIL.match(text, start)
        if m and _email_ok(*m.groups()):
            yield m.span()
        at = text.find("@", m.end() if m else at + 1)


def _email_ok(local: str, domain: str, tld: str) -> bool:
    if ".." in local or tld.lower() in IMAGE_EXTENSIONS:
        return False
    return not _RETINA_LABEL.fullmatch(domain.split(".", 1)[0])


# --- IP addresses ----------------------------------------------------------------------------

# Patterns start with a character class and check what precedes by a look-behind over it, so
# the regex engine only tries positions that hold that class.
_IPV4 = re.compile(
    r"[0-9](?<![A-Za-z0-9_.][0-9])[0-9]*\.[0-9]+\.[0-9]+\.[0-9]+"
    r"(?![A-Za-z0-9_]|[.+-][A-Za-z]|\.[0-9])"
)
# Every address that can pass has "::" or six colons with groups between (clock times do not).
_IPV6_HINT = re.compile(r"::|:(?:[0-9A-Fa-f]{1,4}:){5}")
_IPV6_CHARS = frozenset("0123456789ABCDEFabcdef:.")
_VERSION_SKIP = " \t:=\"'(#"


def _ipv4s(text: str) -> Iterator[tuple[int, int]]:
    return (m.span() for m in _IPV4.finditer(text))


def _ipv6s(text: str, include_private: bool) -> Iterator[tuple[int, int]]:
    # From each hint out to the whole run of hex digits, ":" and ".": hex letters are too common
    # in prose for a pattern tried at every one of them.
    done = 0
    for hint in _IPV6_HINT.finditer(text):
        if hint.start() < done:
            continue
        start, done = hint.start(), hint.end()
        while start > 0 and text[start - 1] in _IPV6_CHARS:
            start -= 1
        while done < len(text) and text[done] in _IPV6_CHARS:
            done += 1
        if (start > 0 and _is_word_char(text[start - 1])) or (
            done < len(text) and _is_word_char(text[done])
        ):
            continue
        if (length := _ipv6_end(text[start:done], include_private)) is not None:
            yield start, start + length


def _ipv4_ok(text: str, start: int, length: int, include_private: bool) -> bool:
    """The rules beyond the pattern, for the quad at text[start:start + length]."""
    quad = text[start : start + length]
    octets = quad.split(".")
    if any(len(o) > 3 or (len(o) > 1 and o[0] == "0") or int(o) > 255 for o in octets):
        return False
    if all(len(o) == 1 for o in octets[:3]) or octets[3] == "0":
        return False
    if start >= 2 and text[start - 1] == "/" and text[start - 2] in _ASCII_LETTERS:
        return False
    word = _word_before(text, start, _VERSION_SKIP)[0].lower()
    if word.endswith("version") or word in VERSION_WORDS:
        return False
    return include_private or _public(ipaddress.IPv4Address(quad))


def _ipv6_end(run: str, include_private: bool) -> int | None:
    """Length of the address at the start of a hex/colon/dot run, or None."""
    if run.count(":") < 2:
        return None
    addr = run.rstrip(".")
    if addr.endswith(":") and not addr.endswith("::"):
        addr = addr[:-1]
    if addr.startswith(".") or (addr.startswith(":") and not addr.startswith("::")):
        return None
    try:
        parsed = ipaddress.IPv6Address(addr)
    except ValueError:
        return None
    groups = [g for g in addr.split(":") if g]
    tail = bool(groups) and "." in groups[-1]
    shown = len(groups) + (1 if tail else 0)  # an IPv4 tail stands for two groups
    if shown < 2 or not (tail or any(len(g) >= 3 for g in groups)):
        return None
    if not _HAS_DIGIT.search(addr):
        return None
    return len(addr) if include_private or _public(parsed) else None


def _public(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.ipv4_mapped is not None:
            return _public(addr.ipv4_mapped)
        if addr.is_reserved or addr.is_site_local or addr.is_link_local:
            return False
    return addr.is_global and not addr.is_multicast


# --- phone numbers ---------------------------------------------------------------------------

_PHONE_TOKEN = r"[0-9()+./-]*[0-9][0-9()+./-]*"
# A token ending in "." ends its run: "call 555 1234. 1914 was..." is two runs.
_PHONE_RUN = re.compile(rf"{_PHONE_TOKEN}(?:(?<!\.) {_PHONE_TOKEN})*")
_PHONE_SKIP = " \t:.#("
_MIN_PHONE_DIGITS = 7


class _Item(NamedTuple):
    digits: str
    paren: bool
    sep: str  # the separator before the item ("" for the first)


def _phones(text: str, start: int, run: str) -> Iterator[tuple[int, int]]:
    """The phone number a run is, or those some of its tokens are."""
    if _digits_in(run) < _MIN_PHONE_DIGITS:
        return
    if span := _phone_at(text, start, run):
        yield span
    elif " " in run:
        pos = start
        for token in run.split(" "):
            if len(token) >= _MIN_PHONE_DIGITS and (span := _phone_at(text, pos, token)):
                yield span
            pos += len(token) + 1


def _digits_in(s: str) -> int:
    return len(s) - sum(map(s.count, " ()+./-"))


def _trim(s: str) -> tuple[int, int]:
    """Offsets of a candidate without trailing punctuation and unbalanced parentheses."""
    a, b = 0, len(s)
    while b > a and (s[b - 1] in ".-/" or (s[b - 1] == ")" and _unbalanced(s, a, b, ")"))):
        b -= 1
    while a < b and s[a] == "(" and _unbalanced(s, a, b, "("):
        a += 1
    if b - a >= 2 and s[a] == "(" and s[b - 1] == ")" and _nested(s, a + 1, b - 1):
        a, b = a + 1, b - 1
    return a, b


def _nested(s: str, a: int, b: int) -> bool:
    """Parentheses in s[a:b] pair up, so "(" before a closes at b: "(+44 (0)20 ...)"."""
    depth = 0
    for c in s[a:b]:
        depth += (c == "(") - (c == ")")
        if depth < 0:
            return False
    return depth == 0


def _unbalanced(s: str, a: int, b: int, paren: str) -> bool:
    """More `paren` than its partner in s[a:b]."""
    other = "(" if paren == ")" else ")"
    return s.count(paren, a, b) > s.count(other, a, b)


def _phone_at(text: str, pos: int, raw: str) -> tuple[int, int] | None:
    a, b = _trim(raw)
    start, end = pos + a, pos + b
    if start > 0 and _is_word_char(text[start - 1]):
        return None
    if end < len(text) and _is_word_char(text[end]):
        return None
    parsed = _items(raw[a:b])
    if parsed is None:
        return None
    plus, items = parsed
    if plus:
        ok = _is_international(items)
    else:
        ok = _is_north_american(items) or _is_trunk(items)
    ok = ok or (_digit_count(items) in range(7, 16) and _phone_word_before(text, start))
    return (start, end) if ok else None


def _is_word_char(c: str) -> bool:
    return c in _ASCII_LETTERS or c in _DIGITS or c == "_"


def _items(s: str) -> tuple[bool, list[_Item]] | None:
    """("+" present, items) when `s` reads [+] item (sep item)*, else None."""
    plus = s.startswith("+")
    i, n, sep = int(plus), len(s), ""
    items: list[_Item] = []
    while i < n:
        paren = s[i] == "("
        j = k = i + paren
        while k < n and s[k] in _DIGITS:
            k += 1
        if k == j or (paren and (k == n or s[k] != ")")):
            return None
        if sep == "" and items and not (paren or items[-1].paren):
            return None
        items.append(_Item(s[j:k], paren, sep))
        i = k + paren
        sep = ""
        if i < n and s[i] in " -./":
            sep, i = s[i], i + 1
            if i == n:
                return None
    return (plus, items) if items else None


def _digit_count(items: list[_Item]) -> int:
    return sum(len(item.digits) for item in items)


def _is_international(items: list[_Item]) -> bool:
    if len(items) == 1:
        return not items[0].paren and 8 <= len(items[0].digits) <= 15
    code, rest = items[0], items[1:]
    if code.paren or not 1 <= len(code.digits) <= 3:
        return False
    if rest[0].paren and rest[0].digits == "0":  # "+44 (0)20 ...": the trunk 0 not dialled
        rest = rest[1:]
    if sum(item.paren for item in rest) > 1 or any(item.sep == "/" for item in rest):
        return False
    if any(not 1 <= len(item.digits) <= (5 if item.paren else 8) for item in rest):
        return False
    return 8 <= len(code.digits) + _digit_count(rest) <= 15


def _is_north_american(items: list[_Item]) -> bool:
    lead = None
    if len(items) == 4 and items[0] == ("1", False, ""):
        lead, items = items[1].sep, items[1:]
    if len(items) != 3:
        return False
    area, exchange, line = items
    if (len(area.digits), len(exchange.digits), len(line.digits)) != (3, 3, 4):
        return False
    if area.digits[0] in "01" or exchange.paren or line.paren or line.sep not in "-. ":
        return False
    if area.paren:
        return exchange.sep in ("", " ") and lead in (None, "", " ")
    return exchange.sep == line.sep and lead in (None, "-", ".", " ")


def _is_trunk(items: list[_Item]) -> bool:
    first, rest = items[0], items[1:]
    if not (2 <= len(first.digits) <= 5 and first.digits[0] == "0" and first.digits[1] != "0"):
        return False
    if not 1 <= len(rest) <= 4 or any(item.paren for item in rest):
        return False
    if any(not 2 <= len(item.digits) <= 8 for item in rest):
        return False
    seps = [item.sep for item in rest]
    if first.paren:
        if seps[0] not in ("", " "):
            return False
        seps = seps[1:]
    if len(set(seps)) > 1 or (seps[-1:] == ["."] and len(items) < 3):
        return False
    return 9 <= _digit_count(items) <= 12


def _phone_word_before(text: str, start: int) -> bool:
    word, word_start = _word_before(text, start, _PHONE_SKIP)
    if word.lower() in PHONE_QUALIFIERS:
        word = _word_before(text, word_start, _PHONE_SKIP)[0]
    return word.lower() in PHONE_WORDS


# --- payment cards and social security numbers -----------------------------------------------

_CARD = re.compile(
    r"[0-9](?<![A-Za-z0-9_.,/+-][0-9])(?<![0-9] [0-9])(?:[ -]?[0-9]){12,}"
    r"(?![A-Za-z0-9_]|[.,][0-9]|[ -][0-9])"
)
_SSN = re.compile(
    r"([0-9](?<![A-Za-z0-9_.,/+-][0-9])[0-9]{2})-([0-9]{2})-([0-9]{4})"
    r"(?![A-Za-z0-9_]|[.,][0-9]|-[0-9])"
)
_CARD_GROUPS = ((4, 6, 5), (4, 6, 4))
_ANY = range(13, 20)
# Issuer prefixes (first..last, as many digits as written) and card lengths: Visa, Mastercard,
# American Express, Diners Club, JCB, Discover, UnionPay, Maestro.
CARD_PREFIXES: tuple[tuple[str, str, Sequence[int]], ...] = (
    ("4", "4", (13, 16, 19)),
    ("51", "55", (16,)),
    ("2221", "2720", (16,)),
    ("34", "34", (15,)),
    ("37", "37", (15,)),
    ("300", "305", range(14, 20)),
    ("36", "36", range(14, 20)),
    ("38", "39", range(14, 20)),
    ("3528", "3589", range(16, 20)),
    ("6011", "6011", range(16, 20)),
    ("644", "649", range(16, 20)),
    ("65", "65", range(16, 20)),
    ("62", "62", range(16, 20)),
    ("50", "50", _ANY),
    ("56", "69", _ANY),
)


def _cards(text: str) -> Iterator[tuple[int, int]]:
    for m in _CARD.finditer(text):
        if _card_ok(m.group()):
            yield m.span()


def _card_ok(number: str) -> bool:
    seps = {c for c in number if c in " -"}
    if len(seps) > 1:
        return False
    groups = number.split(seps.pop()) if seps else [number]
    digits = "".join(groups)
    if not _issuer_ok(digits):
        return False
    sizes = tuple(map(len, groups))
    if len(sizes) > 1 and sizes not in _CARD_GROUPS:
        if any(size != 4 for size in sizes[:-1]) or sizes[-1] > 4:
            return False
    return luhn_ok(digits)


def _issuer_ok(digits: str) -> bool:
    for low, high, lengths in CARD_PREFIXES:
        prefix = digits[: len(low)]
        if low <= prefix <= high and len(digits) in lengths:
            return True
    return False


def luhn_ok(digits: str) -> bool:
    """The Luhn (mod 10) check over a string of digits."""
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def _ssns(text: str) -> Iterator[tuple[int, int]]:
    for m in _SSN.finditer(text):
        area, group, serial = m.groups()
        if area in ("000", "666") or area[0] == "9" or group == "00" or serial == "0000":
            continue
        if "01" <= group <= "12" and "1900" <= serial <= "2099":  # "...-08-2018": a date
            continue
        yield m.span()


# --- IBAN ------------------------------------------------------------------------------------

# The `regex` module scans this one about twice as fast as `re`.
_IBAN_START = regex.compile(r"[A-Z][A-Z][0-9][0-9]")
_IBAN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


def _ibans(text: str) -> Iterator[tuple[int, int]]:
    for m in _IBAN_START.finditer(text):
        if m.start() > 0 and _is_word_char(text[m.start() - 1]):
            continue
        length = IBAN_LENGTHS.get(text[m.start() : m.start() + 2])
        if length is None or text[m.start() + 2 : m.end()] in ("00", "01", "99"):
            continue
        end = _iban_end(text, m.start(), length)
        if end is not None and _mod97_ok(text[m.start() : end].replace(" ", "")):
            yield m.start(), end


def _iban_end(text: str, start: int, length: int) -> int | None:
    """End of an IBAN of `length` characters at `start`, unbroken or in groups of four."""
    end = start + length
    if all(c in _IBAN_CHARS for c in text[start + 4 : end]) and len(text) >= end:
        return end if end == len(text) or not _is_word_char(text[end]) else None
    pos, left = start + 4, length - 4
    while left:
        size = min(4, left)
        chunk = text[pos + 1 : pos + 1 + size]
        if text[pos : pos + 1] != " " or len(chunk) < size:
            return None
        if not all(c in _IBAN_CHARS for c in chunk):
            return None
        pos, left = pos + 1 + size, left - size
    return pos if pos == len(text) or not _is_word_char(text[pos]) else None


def _mod97_ok(iban: str) -> bool:
    rearranged = iban[4:] + iban[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


DEFAULT_SETTINGS = PiiSettings()
