"""Residual-PII re-scan: a second matcher for the rules stated in `curation.pii`, written apart
from it (no import of it, other code, another way of finding candidates), so that one mistake
does not hide itself. The blocking check on `scrubbed` re-scans a sample of its output with it,
and the mix's final gate re-scans the selected text.

How it differs from the scrubber: the scrubber runs patterns over the text and checks structure
in Python. This module walks out from each "@" by hand for e-mail addresses, splits the text
into whitespace tokens and looks only at those with a digit; it cuts them into runs of number
characters by hand, joins runs across single spaces, finds digit chains per separator by hand,
and checks phone shapes with whole-string patterns instead. IP addresses are parsed here (no
`ipaddress`) and classified against the IANA special-purpose registries. Where those registries
and Python 3.11's `ipaddress` tables differ (192.0.0.8-192.0.0.255 apart from .170/.171: IANA
says not global, Python says global), this scan flags less than the scrubber replaces, never
more, so a correct scrub always re-scans clean.

Placeholders (Dolma's by default) are masked before scanning, so scrubbed text is clean.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

RESCAN_KINDS = ("EMAIL_ADDRESS", "IP_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD", "US_SSN", "IBAN")
DEFAULT_PLACEHOLDERS = tuple(f"|||{kind}|||" for kind in RESCAN_KINDS)

_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_LETTER = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_UPPER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_DIGIT = frozenset("0123456789")
_NUMBER_CHARS = frozenset("0123456789()+./-")  # what phone tokens are made of
_NUMBER_RUN = re.compile(r"[0-9()+./-]+")  # a maximal run of _NUMBER_CHARS
# A whitespace-delimited token holding an ASCII digit: the only ones the number scans read (found
# by the regex engine rather than by testing every token of the text in Python).
_NUMERIC_TOKEN = re.compile(r"(?<!\S)(?=[^\s0-9]*[0-9])\S+")
_HEX_RUN_CHARS = frozenset("0123456789abcdefABCDEF:.")
_ALNUM = _WORD - {"_"}
_HEX = frozenset("0123456789abcdefABCDEF")
_LOCAL_CHARS = _WORD | frozenset(".%+-")
_DOMAIN_CHARS = _ALNUM | frozenset(".-")
_NOT_BEFORE_NUMBER = _WORD | frozenset(".,/+-")  # what may not precede a card or an SSN


@dataclass(frozen=True)
class ResidualHit:
    """PII the re-scan found: `text` is the original text[start:end]."""

    kind: str
    start: int
    end: int
    text: str


def residual_pii(
    text: str,
    kinds: Iterable[str] = RESCAN_KINDS,
    include_private_ips: bool = False,
    placeholders: Iterable[str] = DEFAULT_PLACEHOLDERS,
) -> list[ResidualHit]:
    """Every PII instance of the given kinds in `text` (overlapping hits are all reported),
    sorted by position. Placeholders count as clean text."""
    wanted = set(kinds)
    if unknown := wanted - set(RESCAN_KINDS):
        raise ValueError(f"kinds: unknown PII types {sorted(unknown)}; known: {RESCAN_KINDS}")
    clean = _mask(text, placeholders)
    found: list[tuple[int, int, str]] = []
    for scan in _scans(clean, wanted, include_private_ips):
        found.extend(scan)
    return [ResidualHit(kind, s, e, text[s:e]) for s, e, kind in sorted(set(found))]


def residual_kinds(documents: list[tuple[str, str]], kinds: Iterable[str] = RESCAN_KINDS,
                   include_private_ips: bool = False,
                   placeholders: Iterable[str] = DEFAULT_PLACEHOLDERS) -> list[tuple[str, str]]:
    """(doc_id, kind) of every residual hit in a batch of (doc_id, text): one unit of work for
    a process pool (a module-level function, so that `functools.partial` of it pickles)."""
    kinds, placeholders = list(kinds), list(placeholders)
    return [(doc_id, hit.kind) for doc_id, text in documents
            for hit in residual_pii(text, kinds, include_private_ips, placeholders)]


def _mask(text: str, placeholders: Iterable[str]) -> str:
    """Placeholders overwritten by "|" (same length, so offsets hold)."""
    for placeholder in placeholders:
        if placeholder and placeholder in text:
            text = text.replace(placeholder, "|" * len(placeholder))
    return text


def _scans(clean: str, wanted: set[str], private: bool) -> Iterator[Iterable[tuple[int, int, str]]]:
    """One iterable of (start, end, kind) hits per scan."""
    if "EMAIL_ADDRESS" in wanted:
        yield _emails(clean)
    numeric = [(m.start(), m.group()) for m in _NUMERIC_TOKEN.finditer(clean)]
    if "IBAN" in wanted:
        yield _ibans(clean, numeric)
    if "IP_ADDRESS" in wanted:
        yield _ipv6_hits(clean, [(s, t) for s, t in numeric if ":" in t], private)
    runs = list(_runs(clean, numeric))
    yield _run_hits(clean, runs, wanted, private)


# --- e-mail ----------------------------------------------------------------------------------

_IMAGES = {"png", "jpg", "jpeg", "gif", "svg", "webp", "bmp", "ico", "tif", "tiff", "avif"}


def _emails(clean: str) -> Iterator[tuple[int, int, str]]:
    at = -1
    while (at := clean.find("@", at + 1)) != -1:
        begin = at
        while begin > 0 and clean[begin - 1] in _LOCAL_CHARS and at - begin <= 64:
            begin -= 1  # one past 64 is enough to reject
        local = clean[begin:at]
        if not 1 <= len(local) <= 64 or local.startswith(".") or local.endswith("."):
            continue
        if ".." in local:
            continue
        end = _domain_end(clean, at + 1)
        if end is not None:
            yield begin, end, "EMAIL_ADDRESS"


def _domain_end(clean: str, start: int) -> int | None:
    """End of the longest acceptable domain at `start`, or None."""
    stop = start
    while stop < len(clean) and clean[stop] in _DOMAIN_CHARS:
        stop += 1
    labels = clean[start:stop].split(".")
    best, pos = None, start
    for index, label in enumerate(labels):
        if not _label_ok(label):
            break
        pos += len(label)
        if index and _tld_ok(label) and _domain_may_end(clean, pos):
            best = pos
        pos += 1
    if best is None:
        return None
    first = labels[0]
    if first[:-1].isdigit() and first[-1] in "xX" and len(first) > 1:  # logo@2x.png
        return None
    tld = clean[start:best].rsplit(".", 1)[1]
    return None if tld.lower() in _IMAGES else best


def _label_ok(label: str) -> bool:
    return 0 < len(label) <= 63 and label[0] != "-" and label[-1] != "-"


def _tld_ok(label: str) -> bool:
    return 2 <= len(label) <= 24 and all(c in _LETTER for c in label)


def _domain_may_end(clean: str, pos: int) -> bool:
    if pos == len(clean):
        return True
    c = clean[pos]
    if c in _WORD or c == "-":
        return False
    return not (c == "." and pos + 1 < len(clean) and clean[pos + 1] in _ALNUM)


# --- number runs -----------------------------------------------------------------------------


def _pieces(start: int, token: str) -> Iterator[tuple[int, int]]:
    """Absolute spans of the runs of number characters holding a digit in one whitespace
    token."""
    for run in _NUMBER_RUN.finditer(token):
        if not _DIGIT.isdisjoint(run.group()):
            yield start + run.start(), start + run.end()


def _runs(clean: str, numeric: list[tuple[int, str]]) -> Iterator[list[tuple[int, int]]]:
    """Pieces joined across single spaces (a piece ending in "." ends its run)."""
    run: list[tuple[int, int]] = []
    for start, token in numeric:
        for piece in _pieces(start, token):
            if run and run[-1][1] + 1 == piece[0] and clean[run[-1][1]] == " ":
                if clean[run[-1][1] - 1] != ".":
                    run.append(piece)
                    continue
            if run:
                yield run
            run = [piece]
    if run:
        yield run


def _run_hits(
    clean: str, runs: list[list[tuple[int, int]]], wanted: set[str], private: bool
) -> Iterator[tuple[int, int, str]]:
    for run in runs:
        start, end = run[0][0], run[-1][1]
        if end - start < 7:  # shorter than "1.2.3.4" or seven phone digits
            continue
        if "PHONE_NUMBER" in wanted:
            yield from _phone_hits(clean, run)
        if "CREDIT_CARD" in wanted and end - start >= 13:
            for a, b in _chains(clean, start, end, " -"):
                if b - a >= 13 and _card(clean, a, b):
                    yield a, b, "CREDIT_CARD"
        if "US_SSN" in wanted and end - start >= 11:
            for a, b in _chains(clean, start, end, "-"):
                if b - a == 11 and _ssn(clean, a, b):
                    yield a, b, "US_SSN"
        if "IP_ADDRESS" in wanted:
            for a, b in _chains(clean, start, end, "."):
                if clean.count(".", a, b) == 3 and _ipv4_hit(clean, a, b, private):
                    yield a, b, "IP_ADDRESS"


def _chains(clean: str, start: int, end: int, seps: str) -> Iterator[tuple[int, int]]:
    """Maximal digit groups joined by one separator from `seps`, within clean[start:end]."""
    i = start
    while i < end:
        if clean[i] not in _DIGIT:
            i += 1
            continue
        j = i
        while True:
            while j < end and clean[j] in _DIGIT:
                j += 1
            if j + 1 < end and clean[j] in seps and clean[j + 1] in _DIGIT:
                j += 1
                continue
            break
        yield i, j
        i = j


def _before(clean: str, pos: int) -> str:
    return clean[pos - 1] if pos > 0 else ""


def _after(clean: str, pos: int, width: int = 1) -> str:
    return clean[pos : pos + width]


# --- cards and SSNs --------------------------------------------------------------------------

# (lowest prefix, highest prefix, allowed lengths) per issuer.
_ISSUERS = [
    ("4", "4", {13, 16, 19}),
    ("51", "55", {16}),
    ("2221", "2720", {16}),
    ("34", "34", {15}),
    ("37", "37", {15}),
    ("300", "305", set(range(14, 20))),
    ("36", "36", set(range(14, 20))),
    ("38", "39", set(range(14, 20))),
    ("3528", "3589", set(range(16, 20))),
    ("6011", "6011", set(range(16, 20))),
    ("644", "649", set(range(16, 20))),
    ("65", "65", set(range(16, 20))),
    ("62", "62", set(range(16, 20))),
    ("50", "50", set(range(13, 20))),
    ("56", "69", set(range(13, 20))),
]
_LUHN_DOUBLED = (0, 2, 4, 6, 8, 1, 3, 5, 7, 9)


def _number_end_ok(clean: str, pos: int) -> bool:
    nxt = _after(clean, pos, 2)
    if nxt[:1] and nxt[0] in _WORD:
        return False
    return not (len(nxt) == 2 and nxt[0] in ".," and nxt[1] in _DIGIT)


def _card(clean: str, a: int, b: int) -> bool:
    if _before(clean, a) in _NOT_BEFORE_NUMBER:
        return False
    if not _number_end_ok(clean, b):
        return False
    number = clean[a:b]
    digits = number.replace(" ", "").replace("-", "")
    if not 13 <= len(digits) <= 19 or (" " in number and "-" in number):
        return False
    sizes = [len(group) for group in re.split(r"[ -]", number)]
    grouped = len(sizes) == 1 or sizes in ([4, 6, 5], [4, 6, 4])
    grouped = grouped or (set(sizes[:-1]) == {4} and sizes[-1] <= 4)
    if not grouped:
        return False
    if not any(lo <= digits[: len(lo)] <= hi and len(digits) in n for lo, hi, n in _ISSUERS):
        return False
    odd = sum(int(c) for c in digits[-1::-2])
    even = sum(_LUHN_DOUBLED[int(c)] for c in digits[-2::-2])
    return (odd + even) % 10 == 0


def _ssn(clean: str, a: int, b: int) -> bool:
    if _before(clean, a) in _NOT_BEFORE_NUMBER:
        return False
    if not _number_end_ok(clean, b):
        return False
    parts = clean[a:b].split("-")
    if [len(p) for p in parts] != [3, 2, 4]:
        return False
    area, group, serial = parts
    if area == "000" or area == "666" or area.startswith("9"):
        return False
    if group == "00" or serial == "0000":
        return False
    return not (1 <= int(group) <= 12 and 1900 <= int(serial) <= 2099)


# --- IPv4 ------------------------------------------------------------------------------------

_VERSION_WORDS = {
    "v", "ver", "version", "release", "rel", "build", "firmware", "fw", "rev", "revision",
    "update", "patch", "sp", "kernel", "driver", "bios",
}  # fmt: skip
# IANA IPv4 special-purpose blocks that are not globally reachable, and multicast.
_IPV4_SPECIAL = [
    ("0.0.0.0", 8), ("10.0.0.0", 8), ("100.64.0.0", 10), ("127.0.0.0", 8),
    ("169.254.0.0", 16), ("172.16.0.0", 12), ("192.0.0.0", 24), ("192.0.2.0", 24),
    ("192.168.0.0", 16), ("198.18.0.0", 15), ("198.51.100.0", 24), ("203.0.113.0", 24),
    ("224.0.0.0", 4), ("240.0.0.0", 4),
]  # fmt: skip


def _quad_value(quad: str) -> int | None:
    """The 32-bit value of a dotted quad written without leading zeros, or None."""
    parts = quad.split(".")
    if len(parts) != 4:
        return None
    value = 0
    for part in parts:
        if not part or len(part) > 3 or (part[0] == "0" and part != "0"):
            return None
        if not part.isdigit() or int(part) > 255:
            return None
        value = value * 256 + int(part)
    return value


_IPV4_SPECIAL_RANGES = [
    (_quad_value(net), prefix) for net, prefix in _IPV4_SPECIAL  # type: ignore[misc]
]


def _ipv4_public(value: int) -> bool:
    return not any(value >> (32 - p) == net >> (32 - p) for net, p in _IPV4_SPECIAL_RANGES)


def _trailing_word(clean: str, pos: int, skip: str) -> tuple[str, int]:
    """The ASCII-letter word ending where `skip` characters before `pos` start, and where it
    starts (looking back at most 200 characters)."""
    head = clean[max(0, pos - 200) : pos].rstrip(skip)
    m = re.search(r"[A-Za-z]+\Z", head)
    word = m.group() if m else ""
    return word, max(0, pos - 200) + len(head) - len(word)


def _ipv4_hit(clean: str, a: int, b: int, private: bool) -> bool:
    quad = clean[a:b]
    value = _quad_value(quad)
    if value is None:
        return False
    before = _before(clean, a)
    if before in _WORD or before == ".":
        return False
    nxt = _after(clean, b, 2)
    if nxt[:1] and nxt[0] in _WORD:
        return False
    if len(nxt) == 2 and nxt[0] in ".+-" and nxt[1] in _LETTER:
        return False
    parts = quad.split(".")
    if max(len(p) for p in parts[:3]) == 1 or parts[3] == "0":
        return False
    if before == "/" and a >= 2 and clean[a - 2] in _LETTER:
        return False
    word = _trailing_word(clean, a, " \t:=\"'(#")[0].lower()
    if word in _VERSION_WORDS or word.endswith("version"):
        return False
    return private or _ipv4_public(value)


# --- IPv6 ------------------------------------------------------------------------------------


def _ipv6_hits(
    clean: str, tokens: list[tuple[int, str]], private: bool
) -> Iterator[tuple[int, int, str]]:
    for start, token in tokens:
        i = 0
        while i < len(token):
            if token[i] not in _HEX_RUN_CHARS:
                i += 1
                continue
            j = i
            while j < len(token) and token[j] in _HEX_RUN_CHARS:
                j += 1
            hit = _ipv6_run(clean, start + i, start + j, private)
            if hit:
                yield hit
            i = j


def _ipv6_run(clean: str, a: int, b: int, private: bool) -> tuple[int, int, str] | None:
    run = clean[a:b]
    if run.count(":") < 2 or _before(clean, a) in _WORD or _after(clean, b) in _WORD:
        return None
    text = run.rstrip(".")
    if text.endswith(":") and not text.endswith("::"):
        text = text[:-1]
    if text[:1] == "." or (text[:1] == ":" and text[:2] != "::"):
        return None
    value = _ipv6_value(text)
    if value is None or not _ipv6_shown_enough(text):
        return None
    return (a, a + len(text), "IP_ADDRESS") if private or _ipv6_public(value) else None


def _ipv6_value(text: str) -> int | None:
    """The 128-bit value of an IPv6 address text, or None if it is not one."""
    head, tail = text, None
    if "." in text:  # a dotted IPv4 tail stands for the last two groups
        head, _, last = text.rpartition(":")
        tail = _quad_value(last)
        if tail is None:
            return None
        if head.endswith(":"):  # "::a.b.c.d" or "x::a.b.c.d": keep the "::"
            head += ":"
    halves = head.split("::")
    if len(halves) > 2:
        return None
    parsed = [_hex_groups(half) for half in halves]
    if any(p is None for p in parsed):
        return None
    extra = 2 if tail is not None else 0
    shown = sum(len(p) for p in parsed) + extra  # type: ignore[arg-type]
    if len(halves) == 1 and shown != 8 or len(halves) == 2 and shown > 7:
        return None
    left = parsed[0] or []
    right = (parsed[1] or []) if len(halves) == 2 else []
    groups = left + [0] * (8 - shown) + right
    if tail is not None:
        groups += [tail >> 16, tail & 0xFFFF]
    value = 0
    for group in groups:
        value = value << 16 | group
    return value


def _hex_groups(half: str) -> list[int] | None:
    if half == "":
        return []
    out = []
    for group in half.split(":"):
        if not 1 <= len(group) <= 4 or not _HEX.issuperset(group):
            return None
        out.append(int(group, 16))
    return out


def _ipv6_shown_enough(text: str) -> bool:
    groups = [g for g in text.split(":") if g]
    tail = bool(groups) and "." in groups[-1]
    hexes = groups[:-1] if tail else groups
    if len(hexes) + 2 * tail < 2:
        return False
    if not tail and max((len(g) for g in hexes), default=0) < 3:
        return False
    return any(c in _DIGIT for c in text)


def _ipv6_public(value: int) -> bool:
    if value >> 32 == 0xFFFF:  # ::ffff:a.b.c.d: the IPv4 address decides
        return _ipv4_public(value & 0xFFFFFFFF)
    if value >> 125 != 0b001:  # global unicast is 2000::/3
        return False
    if value >> 105 == 0x2001 << 7:  # 2001::/23, IETF protocol assignments
        return False
    return value >> 96 != 0x20010DB8  # documentation


# --- phone numbers ---------------------------------------------------------------------------

_PHONE_WORDS = {
    "tel", "tele", "telephone", "phone", "ph", "mobile", "mob", "cell", "cellphone", "fax",
    "whatsapp", "telefon", "telefono", "telefone", "tlf", "hotline",
}  # fmt: skip
_ITEM = r"(?:[0-9]+|\([0-9]+\))"
_SEP = r"(?:[ ./-]|(?<=\))|(?=\())"
_WELL_FORMED = re.compile(rf"\+?{_ITEM}(?:{_SEP}{_ITEM})*")
_INTL_UNSPLIT = re.compile(r"\+[0-9]{8,15}")
_INTL = re.compile(r"\+([0-9]{1,3})((?:(?:[ .-]|(?<=\))|(?=\())(?:[0-9]{1,8}|\([0-9]{1,5}\)))+)")
_TRUNK_MARK = re.compile(r"[ .-]?\(0\)")
_NANP = (
    re.compile(r"(?:1[-. ])?[2-9][0-9]{2}([-. ])[0-9]{3}\1[0-9]{4}"),
    re.compile(r"(?:1 ?)?\([2-9][0-9]{2}\) ?[0-9]{3}[-. ][0-9]{4}"),
)
_TRUNK_PLAIN = re.compile(r"0[1-9][0-9]{0,3}([ ./-])[0-9]{2,8}(?:\1[0-9]{2,8}){0,3}")
_TRUNK_PAREN = re.compile(
    r"\(0[1-9][0-9]{0,3}\) ?[0-9]{2,8}(?:([ ./-])[0-9]{2,8}(?:\1[0-9]{2,8}){0,2})?"
)


def _phone_hits(clean: str, run: list[tuple[int, int]]) -> Iterator[tuple[int, int, str]]:
    whole = _phone(clean, run[0][0], run[-1][1])
    if whole:
        yield whole
        return
    if len(run) > 1:
        for a, b in run:
            if hit := _phone(clean, a, b):
                yield hit


def _phone(clean: str, a: int, b: int) -> tuple[int, int, str] | None:
    if b - a < 7:
        return None
    a, b = _trim(clean, a, b)
    if b <= a or _before(clean, a) in _WORD or _after(clean, b) in _WORD:
        return None
    candidate = clean[a:b]
    if not _WELL_FORMED.fullmatch(candidate):
        return None
    digits = sum(c in _DIGIT for c in candidate)
    if _shaped(candidate, digits) or (7 <= digits <= 15 and _after_phone_word(clean, a)):
        return a, b, "PHONE_NUMBER"
    return None


def _trim(clean: str, a: int, b: int) -> tuple[int, int]:
    def more(open_: str, close: str) -> bool:
        return clean.count(open_, a, b) > clean.count(close, a, b)

    while b > a and (clean[b - 1] in "./-" or (clean[b - 1] == ")" and more(")", "("))):
        b -= 1
    while a < b and clean[a] == "(" and more("(", ")"):
        a += 1
    if b - a > 1 and clean[a] + clean[b - 1] == "()" and _pairs_up(clean[a + 1 : b - 1]):
        a, b = a + 1, b - 1
    return a, b


def _pairs_up(inner: str) -> bool:
    """Every parenthesis in `inner` has its partner inside it."""
    while True:
        reduced = re.sub(r"\([^()]*\)", "", inner)
        if reduced == inner:
            return "(" not in inner and ")" not in inner
        inner = reduced


def _shaped(candidate: str, digits: int) -> bool:
    if candidate.startswith("+"):
        if _INTL_UNSPLIT.fullmatch(candidate):
            return True
        m = _INTL.fullmatch(candidate)
        if not m:
            return False
        rest = m.group(2)
        mark = _TRUNK_MARK.match(rest)
        if rest.count("(") - bool(mark) > 1:
            return False
        return 8 <= digits - bool(mark) <= 15
    if any(p.fullmatch(candidate) for p in _NANP):
        return True
    if not 9 <= digits <= 12:
        return False
    m = _TRUNK_PLAIN.fullmatch(candidate)
    if m:
        return m.group(1) != "." or candidate.count(".") >= 2
    return bool(_TRUNK_PAREN.fullmatch(candidate))


def _after_phone_word(clean: str, pos: int) -> bool:
    skip = " \t:.#("
    word, start = _trailing_word(clean, pos, skip)
    if word.lower() in {"no", "nr", "num", "number"}:
        word = _trailing_word(clean, start, skip)[0]
    return word.lower() in _PHONE_WORDS


# --- IBAN ------------------------------------------------------------------------------------

_IBAN_LENGTH = dict(
    (entry[:2], int(entry[2:]))
    for entry in """
    AD24 AE23 AL28 AT20 AZ28 BA20 BE16 BG22 BH22 BI27 BR29 BY28 CH21 CR22 CY28 CZ24 DE22 DJ27
    DK18 DO28 EE20 EG29 ES24 FI18 FK18 FO18 FR27 GB22 GE22 GI23 GL18 GR27 GT28 HN28 HR21 HU28
    IE22 IL23 IQ23 IS26 IT27 JO30 KW30 KZ20 LB28 LC32 LI21 LT20 LU20 LV21 LY25 MC27 MD24 ME22
    MK19 MN20 MR27 MT31 MU30 NI28 NL18 NO15 OM23 PK24 PL28 PS29 PT25 QA29 RO24 RS22 RU33 SA24
    SC31 SD18 SE24 SI19 SK24 SM27 SO23 ST25 SV28 TL23 TN24 TR26 UA29 VA22 VG24 XK20 YE30
    """.split()
)


def _ibans(clean: str, numeric: list[tuple[int, str]]) -> Iterator[tuple[int, int, str]]:
    for start, token in numeric:
        for i in range(len(token) - 3):
            if token[i] in _UPPER and (i == 0 or token[i - 1] not in _WORD):
                end = _iban_at(clean, start + i)
                if end is not None:
                    yield start + i, end, "IBAN"


def _iban_at(clean: str, pos: int) -> int | None:
    length = _IBAN_LENGTH.get(clean[pos : pos + 2])
    check = clean[pos + 2 : pos + 4]
    if length is None or not check.isdigit() or not check.isascii() or check in ("00", "01", "99"):
        return None
    body = clean[pos + 4 : pos + length]
    if len(body) == length - 4 and all(c in _UPPER or c in _DIGIT for c in body):
        end = pos + length
    else:
        end, pieces = pos + 4, []
        for size in [4] * ((length - 4) // 4) + ([(length - 4) % 4] if (length - 4) % 4 else []):
            piece = clean[end + 1 : end + 1 + size]
            if clean[end : end + 1] != " " or len(piece) != size:
                return None
            if not all(c in _UPPER or c in _DIGIT for c in piece):
                return None
            pieces.append(piece)
            end += 1 + size
        body = "".join(pieces)
    if _after(clean, end) in _WORD:
        return None
    remainder = 0
    for c in body + clean[pos : pos + 4]:
        for d in str(int(c, 36)):
            remainder = (remainder * 10 + int(d)) % 97
    return end if remainder == 1 else None
