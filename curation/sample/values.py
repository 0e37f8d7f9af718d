"""Typed values the generator drops into text: PII and the look-alikes a scrubber must leave alone.

Every value is drawn from the `random.Random` passed in and recorded by type, so the manifest can
say exactly which strings a PII stage should replace (`PII_TYPES`) and which it should keep
(`LOOKALIKE_TYPES`).
"""

from __future__ import annotations

import random
from collections.abc import Callable

FIRST_NAMES = (
    "anna", "ben", "carla", "david", "elif", "felix", "grace", "hugo", "ines", "jonas",
    "kate", "liam", "maya", "noah", "olga", "pavel", "rosa", "sam", "tariq", "yuki",
)
LAST_NAMES = (
    "miller", "koch", "garcia", "novak", "brennan", "okafor", "lindqvist", "moreau",
    "tanaka", "petrov", "hughes", "schmidt", "rossi", "walsh", "duarte", "fischer",
)
MAIL_DOMAINS = (
    "fastpost-mail.com", "inboxly.net", "kmail-online.de", "courriel-express.fr",
    "buzon-web.es", "letterbox-uk.co.uk",
)

# Public-looking first octets (no private, loopback, link-local, multicast or reserved ranges).
_PUBLIC_FIRST_OCTETS = (23, 31, 37, 45, 52, 62, 77, 81, 85, 91, 104, 138, 145, 151, 176, 185, 212)
_PRIVATE_PREFIXES = ("192.168.", "10.0.", "172.16.")


def email(rng: random.Random, domain: str | None = None) -> str:
    first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
    number = rng.randint(7, 99)
    local = rng.choice((f"{first}.{last}", f"{first}{last[0]}", f"{first}_{last}{number}"))
    return f"{local}@{domain or rng.choice(MAIL_DOMAINS)}"


def phone_us(rng: random.Random) -> str:
    # 555 numbers, in the forms people actually type.
    mid, end = rng.randint(200, 989), rng.randint(1000, 9999)
    return rng.choice((f"(555) {mid}-{end}", f"555-{mid}-{end}", f"555.{mid}.{end}"))


def phone_us_intl(rng: random.Random) -> str:
    return f"+1 555 {rng.randint(200, 989)} {rng.randint(1000, 9999)}"


def phone_uk(rng: random.Random) -> str:
    # Ofcom's drama range 020 7946 0000-0999.
    return rng.choice(("+44 20 7946 0{:03d}", "020 7946 0{:03d}")).format(rng.randint(0, 999))


def phone_de(rng: random.Random) -> str:
    area = rng.choice(("30", "89", "40", "221"))
    number = rng.randint(1_000_000, 9_999_999)
    return rng.choice((f"+49 {area} {number}", f"0{area} {number}"))


def phone_fr(rng: random.Random) -> str:
    pairs = " ".join(f"{rng.randint(10, 99)}" for _ in range(4))
    return rng.choice((f"+33 1 {pairs}", f"01 {pairs}"))


def phone_es(rng: random.Random) -> str:
    return f"+34 91 {rng.randint(100, 999)} {rng.randint(10, 99)} {rng.randint(10, 99)}"


def ipv4_public(rng: random.Random) -> str:
    first = rng.choice(_PUBLIC_FIRST_OCTETS)
    return f"{first}.{rng.randint(1, 254)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"


def ipv6_public(rng: random.Random) -> str:
    groups = [rng.choice(("2a01", "2a02", "2600", "2604", "2a03"))]
    groups += [f"{rng.randint(0, 0xFFFF):x}" for _ in range(3)]
    return ":".join(groups) + f"::{rng.randint(1, 0xFFF):x}"


def ipv4_private(rng: random.Random) -> str:
    return f"{rng.choice(_PRIVATE_PREFIXES)}{rng.randint(0, 20)}.{rng.randint(2, 254)}"


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, char in enumerate(reversed(digits)):
        value = int(char) * (2 if i % 2 else 1)
        total += value - 9 if value > 9 else value
    return total % 10 == 0


def _luhn_digit(partial: str) -> str:
    return next(d for d in "0123456789" if luhn_ok(partial + d))


def _group(digits: str, sep: str) -> str:
    return sep.join(digits[i : i + 4] for i in range(0, len(digits), 4))


def card_number(rng: random.Random) -> str:
    """A 16-digit number that passes the Luhn check, grouped as people write card numbers."""
    partial = rng.choice("45") + "".join(str(rng.randint(0, 9)) for _ in range(14))
    return _group(partial + _luhn_digit(partial), rng.choice((" ", "-")))


def non_luhn_number(rng: random.Random) -> str:
    """A card-shaped 16-digit reference number that fails the Luhn check (not a card)."""
    partial = "4" + "".join(str(rng.randint(0, 9)) for _ in range(14))
    good = _luhn_digit(partial)
    bad = str((int(good) + rng.randint(1, 9)) % 10)
    return _group(partial + bad, " ")


def isbn13(rng: random.Random) -> str:
    body = "978" + "".join(str(rng.randint(0, 9)) for _ in range(9))
    check = (10 - sum(int(d) * (3 if i % 2 else 1) for i, d in enumerate(body)) % 10) % 10
    return f"{body[:3]}-{body[3]}-{body[4:8]}-{body[8:12]}-{check}"


def version(rng: random.Random) -> str:
    return f"{rng.randint(1, 5)}.{rng.randint(0, 24)}.{rng.randint(0, 9)}"


_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")


def date(rng: random.Random, lang: str) -> str:
    year, month, day = rng.randint(2021, 2024), rng.randint(1, 12), rng.randint(1, 28)
    if lang == "en":
        return rng.choice((f"{_MONTHS[month - 1]} {day}, {year}", f"{year}-{month:02d}-{day:02d}"))
    if lang in ("de", "ru"):
        return f"{day:02d}.{month:02d}.{year}"
    if lang == "ja":
        return f"{year}年{month}月{day}日"
    return f"{day:02d}/{month:02d}/{year}"


def time_of_day(rng: random.Random) -> str:
    return f"{rng.randint(7, 21)}:{rng.choice((0, 15, 30, 45)):02d}"


def price(rng: random.Random, lang: str) -> str:
    whole, cents = rng.randint(3, 480), rng.choice((0, 49, 50, 95, 99))
    if lang == "en":
        return f"{rng.choice('$£')}{whole}.{cents:02d}"
    if lang == "ja":
        return f"{whole * 10:,}円"
    if lang == "ru":
        return f"{whole * 10} ₽"
    return f"{whole},{cents:02d} €"


def order_number(rng: random.Random) -> str:
    prefix, year = rng.choice(("ORD", "A", "INV")), rng.randint(2021, 2024)
    return f"{prefix}-{year}-{rng.randint(100000, 999999)}"


Generator = Callable[[random.Random, str], str]

PII_TYPES: dict[str, Generator] = {
    "email": lambda rng, lang: email(rng),
    "phone_us": lambda rng, lang: phone_us(rng),
    "phone_us_intl": lambda rng, lang: phone_us_intl(rng),
    "phone_uk": lambda rng, lang: phone_uk(rng),
    "phone_de": lambda rng, lang: phone_de(rng),
    "phone_fr": lambda rng, lang: phone_fr(rng),
    "phone_es": lambda rng, lang: phone_es(rng),
    "ipv4": lambda rng, lang: ipv4_public(rng),
    "ipv6": lambda rng, lang: ipv6_public(rng),
    "card": lambda rng, lang: card_number(rng),
}

LOOKALIKE_TYPES: dict[str, Generator] = {
    "version": lambda rng, lang: version(rng),
    "date": date,
    "time": lambda rng, lang: time_of_day(rng),
    "price": price,
    "isbn": lambda rng, lang: isbn13(rng),
    "order": lambda rng, lang: order_number(rng),
    "private_ip": lambda rng, lang: ipv4_private(rng),
    "non_luhn": lambda rng, lang: non_luhn_number(rng),
}
