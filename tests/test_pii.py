"""PII scrubbing (`curation.pii`) and the independent re-scan (`curation.pii_rescan`).

Labelled positives of every type and written format, the negatives the rules must leave alone
(versions, dates, times, prices, ISBNs, order numbers, code constants, Luhn and mod-97
failures), settings, private address ranges, and precision on real text: books, Wikipedia and
the standard library's Python source. `benchmarks/pii.py` lists what those replacements are.
"""

from __future__ import annotations

import os
import random
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from curation.pii import (
    KINDS,
    PiiSettings,
    PiiSpan,
    count_kinds,
    find_pii,
    luhn_ok,
    resolve_overlaps,
    scrub,
    scrub_text,
)
from curation.pii_rescan import residual_pii

PRIVATE = PiiSettings(include_private_ips=True)

POSITIVES: dict[str, list[str]] = {
    "EMAIL_ADDRESS": [
        "john.doe@example.com",
        "j_smith+news@mail.example.co.uk",
        "info@sub-domain.example.org",
        "A.B-C%d@EXAMPLE.COM",
        "user@xn--bcher-kva.de",
    ],
    "IP_ADDRESS": [
        "93.184.216.34",
        "8.26.56.26",
        "172.32.0.5",  # just past 172.16.0.0/12
        "100.128.0.1",  # just past 100.64.0.0/10
        "2a00:1450:4001:82b::200e",  # compressed
        "2606:4700:4700:0000:0000:0000:0000:1111",  # full
        "2001:4860:4860::8888",
        "2a03:2880:f12f:83:face:b00c:0:25de",
        "::ffff:93.184.216.34",  # IPv4-mapped, embedded dotted quad
        "2002:5db8:d822::1",  # 6to4
    ],
    "PHONE_NUMBER": [
        "+1 (555) 123-4567",
        "555-123-4567",
        "555.123.4567",
        "555 123 4567",
        "(555) 123-4567",
        "1-800-555-0199",
        "+1-555-123-4567",
        "(020) 7946 0958",
        "020 7946 0958",
        "+44 20 7946 0958",
        "+44 (0)20 7946 0958",
        "+49 30 901820",
        "030 901820",
        "030/901820",
        "0171 1234567",
        "06 12 34 56 78",
        "01.23.45.67.89",
        "+33 6 12 34 56 78",
        "+33612345678",
        "+91 98765 43210",
        "+61 2 9374 4000",
        "(02) 9374 4000",
        "+86 21 5409 8575",
        "021-54098575",
    ],
    "CREDIT_CARD": [
        "4111 1111 1111 1111",
        "4111-1111-1111-1111",
        "4111111111111111",
        "4000 0566 5566 5556",
        "4222222222222",  # Visa, 13 digits
        "5555 5555 5555 4444",
        "5105105105105100",
        "2223 0031 2200 3222",  # Mastercard 2-series
        "378282246310005",  # American Express, 15 digits
        "3782 822463 10005",  # American Express grouping 4-6-5
        "30569309025904",  # Diners Club, 14 digits
        "3056 930902 5904",  # Diners grouping 4-6-4
        "6011 1111 1111 1117",
        "3530 1113 3330 0000",
        "6200000000000005",
    ],
    "US_SSN": ["123-45-6789", "078-05-1120", "536-22-1234", "219-09-9999"],
    "IBAN": [
        "DE89 3704 0044 0532 0130 00",
        "DE89370400440532013000",
        "GB82 WEST 1234 5698 7654 32",
        "GB82WEST12345698765432",
        "FR14 2004 1010 0505 0001 3M02 606",
        "NL91 ABNA 0417 1643 00",
        "BE68 5390 0754 7034",
        "CH93 0076 2011 6238 5295 7",
        "NO93 8601 1117 947",
        "ES91 2100 0418 4502 0005 1332",
        "IT60 X054 2811 1010 0000 0123 456",
    ],
}
LABELLED = [(kind, value) for kind, values in POSITIVES.items() for value in values]

# Phone numbers written without structure, found through the word before them.
CONTEXT_PHONES = [
    ("Tel.: 5551234567 (office)", "5551234567"),
    ("phone number: 555 1234. Ask for Sam.", "555 1234"),
    ("Mobile/WhatsApp: 98765 43210", "98765 43210"),
    ("Fax no. 2024 5678 90", "2024 5678 90"),
]

PRIVATE_IPS = [
    "192.168.1.20",
    "10.0.0.12",
    "127.0.0.1",
    "169.254.10.20",
    "172.16.5.4",
    "100.64.1.2",
    "203.0.113.9",  # documentation
    "fe80::1ff:fe23:4567:890a",  # link-local
    "fd12:3456:789a:1::1",  # unique local
    "::ffff:192.168.1.20",  # mapped private
    "2001:db8::ff00:42:8329",  # documentation
]

NEGATIVES = [
    # versions, OIDs
    "version 1.2.3.4",
    "Version 91.4.12.7 is out",
    "release 22.10.3.1",
    "v1.2.3 and v93.2.3.4",
    "Python 3.11.7",
    "2.0.0.1-beta",
    "build 2.0.0.12",
    "Mozilla/5.0 Firefox/91.13.0.1",
    "AssemblyVersion(\"3.10.200.1\")",
    "4.0.0.0",
    "OID 1.3.6.1.4.1.311.21.20",
    "SNMP 1.3.6.1.2.1.1.5.0",
    "HTML5 section 8.2.4.44",
    "1.0.0.127.in-addr.arpa",
    # dates and times
    "2024-01-15",
    "15/01/2024",
    "01.02.2024",
    "2024/01/15 12:30:45",
    "12:30:45.123",
    "Mon, 15 Jan 2024 12:30:45 +0000",
    "on 01-02-2024 at 10.30",
    # prices and quantities
    "$1,234.56",
    "1 234 567 €",
    "€ 1.234.567,89",
    "population 8 336 817",
    "USD 12,345,678.90",
    # ISBNs, orders, tracking numbers
    "ISBN 978-3-16-148410-0",
    "ISBN 0-306-40615-2",
    "ISBN 9783161484100",
    "Order #112-7654321-1234567",
    "Tracking: 1Z999AA10123456784",
    "USPS 9400 1000 0000 0000 0000 00",
    "Invoice 2024-000123",
    # code constants
    "mask = 0x7fffffff",
    "eps = 1e-10",
    "pi = 3.14159265358979",
    "UINT64_MAX = 18446744073709551615",
    "INT64_MAX = 9223372036854775807",
    "M61 = 2305843009213693951",
    "ts = 20000229123340",
    "x[1::2] + y[::2]",
    "std::vector<int>",
    "0xdead::beef",
    # Luhn failures, invalid SSNs, a changed IBAN digit
    "4111 1111 1111 1112",
    "4111111111111112",
    "5555555555554445",
    "000-12-3456",
    "666-12-3456",
    "912-34-5678",
    "123-00-4567",
    "123-45-0000",
    "ref 125-08-2018",  # a date's tail, not an SSN
    "DE89 3704 0044 0532 0130 01",
    "GB82WEST12345698765433",
    # number shapes that are not phone numbers
    "1914-1918",
    "pp. 123-456",
    "51.5074, -0.1278",
    "40.7128° N, 74.0060° W",
    "5551234567",
    "12345678901234",
    "between 1939 and 1945",
    "Cube root 04.14159265",
    "chapters 01 02 03 04 05 06 07",
    "call 1914-1918",
    # not e-mail addresses
    "logo@2x.png",
    "user@localhost",
    "@handle and @decorator",
    "name@domain",
    "a..b@example.com",
    # addresses that do not count or are not addresses
    "::1",
    "00:1A:2B:3C:4D:5E",
    "1.2.3.4",
    "8.8.8.8",
]
NOT_PUBLIC = ["192.168.1.1", "fe80::1", "2001:db8::1"]


def spans_of(text: str, settings: PiiSettings | None = None) -> list[tuple[str, str]]:
    return [(s.kind, text[s.start : s.end]) for s in find_pii(text, settings)]


def hits_of(text: str, **kwargs) -> set[tuple[str, str]]:
    return {(h.kind, h.text) for h in residual_pii(text, **kwargs)}


# --- labelled positives ----------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "value"), LABELLED)
def test_every_labelled_format_is_found_and_replaced_by_its_placeholder(kind: str, value: str):
    text = f"Write to us: {value} or visit."
    assert spans_of(text) == [(kind, value)]
    scrubbed, counts = scrub_text(text)
    assert scrubbed == f"Write to us: |||{kind}||| or visit."
    assert counts == {k: int(k == kind) for k in KINDS}


@pytest.mark.parametrize(("kind", "value"), LABELLED)
def test_the_rescan_finds_every_labelled_instance_and_nothing_after_scrubbing(kind, value):
    text = f"Write to us: {value} or visit."
    assert (kind, value) in hits_of(text)
    assert residual_pii(scrub_text(text)[0]) == []


@pytest.mark.parametrize(("text", "phone"), CONTEXT_PHONES)
def test_unstructured_phone_numbers_are_found_after_a_phone_word(text: str, phone: str):
    assert spans_of(text) == [("PHONE_NUMBER", phone)]
    assert ("PHONE_NUMBER", phone) in hits_of(text)
    assert spans_of(f"see {phone} here") == []  # the word is what counts


def test_placeholders_are_exactly_dolmas_and_settable_per_type():
    assert PiiSettings().placeholders == {k: f"|||{k}|||" for k in KINDS}
    custom = PiiSettings(placeholders={"EMAIL_ADDRESS": "<EMAIL>"})
    assert custom.placeholders["EMAIL_ADDRESS"] == "<EMAIL>"
    assert custom.placeholders["IBAN"] == "|||IBAN|||"
    text = "Mail a.b@example.org, card 4111 1111 1111 1111."
    assert scrub(text, find_pii(text, custom), custom) == "Mail <EMAIL>, card |||CREDIT_CARD|||."


# --- negatives -------------------------------------------------------------------------------


@pytest.mark.parametrize("text", NEGATIVES)
def test_things_that_only_look_like_pii_are_left_alone(text: str):
    assert spans_of(text) == []
    assert residual_pii(text) == []
    assert spans_of(text, PRIVATE) == []
    assert residual_pii(text, include_private_ips=True) == []


@pytest.mark.parametrize("text", NOT_PUBLIC)
def test_non_public_addresses_are_left_alone_by_default(text: str):
    assert spans_of(text) == [] and residual_pii(text) == []


def test_a_dotted_quad_after_a_version_word_is_a_version_but_alone_an_address():
    assert spans_of("version 93.184.216.34") == []
    assert spans_of("server 93.184.216.34") == [("IP_ADDRESS", "93.184.216.34")]
    assert spans_of("release: 93.184.216.34") == []


def test_phone_numbers_need_clean_edges():
    assert spans_of("ID555-123-4567") == []
    assert spans_of("555-123-4567x") == []
    assert spans_of("(555-123-4567)") == [("PHONE_NUMBER", "555-123-4567")]
    assert spans_of("(+44 (0)20 7946 0958)") == [("PHONE_NUMBER", "+44 (0)20 7946 0958")]
    assert spans_of("((03) 6049 3034)") == [("PHONE_NUMBER", "(03) 6049 3034")]
    assert hits_of("((03) 6049 3034)") == {("PHONE_NUMBER", "(03) 6049 3034")}
    assert spans_of("call 555-123-4567 24 hours") == [("PHONE_NUMBER", "555-123-4567")]


# --- settings --------------------------------------------------------------------------------


def test_disabled_types_are_not_searched():
    text = "a.b@example.org 93.184.216.34 555-123-4567 4111111111111111 123-45-6789"
    only = PiiSettings(enabled=["EMAIL_ADDRESS", "US_SSN"])
    assert [k for k, _ in spans_of(text, only)] == ["EMAIL_ADDRESS", "US_SSN"]
    assert count_kinds(find_pii(text, only), only) == {"EMAIL_ADDRESS": 1, "US_SSN": 1}
    assert spans_of(text, PiiSettings(enabled=[])) == []


def test_settings_are_validated_and_errors_name_the_field():
    with pytest.raises(ValidationError, match="enabled"):
        PiiSettings(enabled=["EMAIL_ADDRESS", "PASSPORT"])
    with pytest.raises(ValidationError, match="placeholders"):
        PiiSettings(placeholders={"PASSPORT": "<P>"})
    with pytest.raises(ValidationError, match="empty placeholder"):
        PiiSettings(placeholders={"IBAN": ""})
    with pytest.raises(ValidationError, match="placeholders.PHONE_NUMBER"):
        PiiSettings(placeholders={"PHONE_NUMBER": "call +44 20 7946 0958"})
    with pytest.raises(ValidationError, match="include_private"):
        PiiSettings(include_private=True)


def test_the_rescan_rejects_unknown_types():
    with pytest.raises(ValueError, match="kinds"):
        residual_pii("x", kinds=["EMAIL_ADDRESS", "PASSPORT"])


# --- IP addresses ----------------------------------------------------------------------------


@pytest.mark.parametrize("address", PRIVATE_IPS)
def test_private_and_reserved_addresses_count_only_with_the_flag(address: str):
    text = f"host {address} is up"
    assert spans_of(text) == []
    assert residual_pii(text) == []
    assert spans_of(text, PRIVATE) == [("IP_ADDRESS", address)]
    assert ("IP_ADDRESS", address) in hits_of(text, include_private_ips=True)
    assert residual_pii(scrub_text(text, PRIVATE)[0], include_private_ips=True) == []


@pytest.mark.parametrize("address", ["::1", "0:0:0:0:0:0:0:1", "1::2", "a::b"])
def test_loopback_and_slice_like_ipv6_never_match(address: str):
    assert spans_of(f"at {address} now", PRIVATE) == []
    assert residual_pii(f"at {address} now", include_private_ips=True) == []


# --- checksums -------------------------------------------------------------------------------


def test_luhn():
    assert luhn_ok("4111111111111111") and luhn_ok("378282246310005")
    assert not luhn_ok("4111111111111112") and not luhn_ok("378282246310006")
    text = "cards 4111 1111 1111 1111 and 4111 1111 1111 1112"
    assert spans_of(text) == [("CREDIT_CARD", "4111 1111 1111 1111")]


@pytest.mark.parametrize("iban", POSITIVES["IBAN"])
def test_every_one_digit_change_of_an_iban_fails_mod_97(iban: str):
    assert spans_of(f"IBAN: {iban}.") == [("IBAN", iban)]
    for i, c in enumerate(iban):
        if c.isdigit() and i >= 2:
            changed = iban[:i] + str((int(c) + 1) % 10) + iban[i + 1 :]
            assert "IBAN" not in {k for k, _ in spans_of(f"IBAN: {changed}.")}, changed
            assert "IBAN" not in {k for k, _ in hits_of(f"IBAN: {changed}.")}, changed


# --- spans and scrubbing ---------------------------------------------------------------------


def test_overlaps_resolve_longest_first_then_by_type():
    spans = [PiiSpan(0, 11, "PHONE_NUMBER"), PiiSpan(0, 11, "US_SSN"), PiiSpan(5, 20, "IBAN")]
    assert resolve_overlaps(spans) == [PiiSpan(5, 20, "IBAN")]
    assert resolve_overlaps(spans[:2]) == [PiiSpan(0, 11, "US_SSN")]
    text = "SSN or phone: 078-05-1120; IBAN NL91 ABNA 0417 1643 00"
    assert spans_of(text) == [("US_SSN", "078-05-1120"), ("IBAN", "NL91 ABNA 0417 1643 00")]


def test_scrub_rejects_unsorted_spans():
    with pytest.raises(ValueError, match="sorted"):
        scrub("abcdef", [PiiSpan(3, 4, "IBAN"), PiiSpan(0, 1, "IBAN")])


def test_pii_hidden_by_its_neighbour_is_found_once_the_neighbour_is_gone():
    # The digit before "+" blocks the phone number until the address is replaced.
    text = "log 93.184.216.34+44 20 7946 0958 end"
    assert [k for k, _ in spans_of(text)] == ["IP_ADDRESS", "PHONE_NUMBER"]
    assert residual_pii(scrub_text(text)[0]) == []


def test_a_mixed_document_scrubs_clean():
    text = (
        "Contact Jane <jane.roe@corp.example.com>, tel. +1 (415) 555-0134, from host "
        "2a00:1450:4001:82b::200e. Pay to DE89 3704 0044 0532 0130 00 or card 5555 5555 5555 "
        "4444. SSN 123-45-6789. Version 2.0.0.12 released 2024-01-15."
    )
    scrubbed, counts = scrub_text(text)
    assert counts == {k: 1 for k in KINDS}
    assert "Version 2.0.0.12 released 2024-01-15." in scrubbed
    assert residual_pii(scrubbed) == []
    assert find_pii(scrubbed) == []


def test_scrubber_and_rescan_agree_on_random_pii_like_strings():
    """Fragments of every type glued together with separators, labels and noise: the re-scan
    finds each span the scrubber replaces (in the text, or once the other spans are blanked: a
    neighbour can hide PII, and the scrubber looks again without it), and the scrubbed text
    re-scans clean."""
    rng = random.Random(7)
    fragments = [v for _, v in LABELLED] + [t for t, _ in CONTEXT_PHONES] + NEGATIVES[:20]
    glue = ["", " ", "  ", "(", ")", ".", "-", "+", "/", ":", "x", "1", "Tel: ", "\n", ", "]
    for _ in range(3000):
        text = "".join(rng.choice(glue) + _mutate(rng, rng.choice(fragments)) for _ in range(4))
        for settings in (PiiSettings(), PRIVATE):
            private = settings.include_private_ips
            spans = find_pii(text, settings)
            assert all(_rescan_finds(text, spans, span, private) for span in spans), text
            assert residual_pii(scrub_text(text, settings)[0], include_private_ips=private) == []


def _rescan_finds(text: str, spans: list[PiiSpan], span: PiiSpan, private: bool) -> bool:
    """The re-scan finds `span` in `text`, or with the other spans blanked."""
    others = "".join(
        "|" if any(o.start <= i < o.end for o in spans if o != span) else c
        for i, c in enumerate(text)
    )
    hits = residual_pii(text, include_private_ips=private)
    hits += residual_pii(others, include_private_ips=private)
    return (span.start, span.end, span.kind) in {(h.start, h.end, h.kind) for h in hits}


def _mutate(rng: random.Random, value: str) -> str:
    if rng.random() < 0.5 or not value:
        return value
    i = rng.randrange(len(value))
    return value[:i] + rng.choice("0123456789 -.():@aZ") + value[i + 1 :]


# --- real text -------------------------------------------------------------------------------


def _read(path: Path) -> str:
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("cp1252")  # the Gutenberg files


def _scan(texts: list[str], settings: PiiSettings | None = None) -> list[tuple[str, str]]:
    """Every replacement in the texts; checks on the way that the re-scan agrees and that
    scrubbed text re-scans clean."""
    found = []
    for text in texts:
        spans = find_pii(text, settings)
        hits = {(h.start, h.end, h.kind) for h in residual_pii(text)}
        assert {(s.start, s.end, s.kind) for s in spans} <= hits
        assert residual_pii(scrub(text, spans, settings)) == []
        found += [(s.kind, text[s.start : s.end]) for s in spans]
    return found


def test_books_yield_only_the_gutenberg_foundations_phone_number(shared_data: Path):
    books = [_read(p) for p in sorted((shared_data / "sources/books_gutenberg").glob("*.txt"))]
    found = _scan(books)
    # Measured: 6, the PGLAF number "(801) 596-1887" in the licence of six of the seven files.
    assert len(found) <= 10
    assert set(found) <= {("PHONE_NUMBER", "(801) 596-1887")}


def test_wikipedia_yields_nothing(shared_data: Path):
    wiki = _read(shared_data / "sources/wikipedia/wikitext-2-raw_wiki.test.raw")
    assert len(_scan([wiki])) <= 2  # measured: 0


def test_standard_library_code_yields_its_authors_addresses_and_little_else():
    files = sorted(Path(os.__file__).parent.glob("*.py"))[:300]
    found = _scan([p.read_text(encoding="utf-8", errors="replace") for p in files])
    emails = [value for kind, value in found if kind == "EMAIL_ADDRESS"]
    other = [(kind, value) for kind, value in found if kind != "EMAIL_ADDRESS"]
    # Measured on CPython 3.11: 62 addresses (authors and doctest examples such as
    # "guido@python.org", "me@my.org") and the example address "123.45.67.89" twice.
    assert all(re.fullmatch(r"[\w.%+-]+@[\w.-]+\.[A-Za-z]{2,}", e) for e in emails)
    assert len(emails) <= 100
    assert len(other) <= 6, other


def test_the_residual_check_finds_the_same_hits_on_worker_processes_as_in_this_one():
    from checks.rescan import residual_pii_result

    documents = [(f"doc-{n}", f"Clean text number {n}, version 2.0.{n}.") for n in range(40)]
    planted = LABELLED[::4][:8]
    for n, (_, value) in enumerate(planted):
        documents[n * 5] = (f"doc-{n * 5}", f"Write to us: {value} or visit.")
    documents.append(("doc-scrubbed", scrub_text("Mail jane.roe@corp.example.com now.")[0]))
    expected = [[doc_id, hit.kind] for doc_id, text in documents for hit in residual_pii(text)]
    settings = PiiSettings()
    here = residual_pii_result(documents, settings, workers=0)
    pooled = residual_pii_result(documents, settings, workers=2)
    assert not here.passed and not pooled.passed
    assert pooled.metadata["documents_scanned"].value == len(documents)
    # the same hits, in document order, each planted document among them
    assert here.metadata["where"].value == pooled.metadata["where"].value == expected
    assert {row[0] for row in expected} == {f"doc-{n * 5}" for n in range(len(planted))}
    assert pooled.metadata["residual_matches"].value == len(expected)
