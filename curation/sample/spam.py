"""Spam and stub pages: what the quality filters exist to drop.

Keyword-stuffed SEO pages, link farms, product-name lists, pages of leaked JavaScript, lorem
ipsum placeholders, "coming soon" and "under construction" stubs, pages of ellipses and bullets
and pages under fifty words. Each is built to trip a specific published rule (Gopher repetition
and symbol ratios, C4's curly-bracket and lorem-ipsum rules, FineWeb's line rules, minimum
length).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from curation.sample.compose import Block
from curation.sample.content import Content

STUFFING = {
    "casino": (
        "casino bonus", "best casino bonus", "free spins", "no deposit bonus", "online casino",
        "casino bonus codes", "real money casino", "best online casino 2024", "slots bonus",
    ),
    "pharma": (
        "cheap pills online", "discount pharmacy", "cheap meds", "online pharmacy",
        "generic pills", "buy pills online", "pharmacy discount codes", "cheap pharmacy 2024",
    ),
    "loans": (
        "fast loans", "payday loans", "bad credit loans", "instant approval loans",
        "cash loans today", "loans online", "same day loans", "easy loans no credit check",
    ),
}
_GLUE = ("best", "top", "today", "now", "uk", "usa", "2024", "free", "cheap", "online")
_PITCH = {
    "casino": "Claim the best casino bonus today and get free spins with no deposit bonus codes!",
    "pharma": "Order cheap pills online from the best discount pharmacy with fast delivery!",
    "loans": "Get fast loans today with instant approval, even with bad credit!",
}

_LINK_WORDS = (
    ("cheap", "best", "top", "buy", "free", "discount"),
    ("flights", "hotels", "seo services", "web hosting", "car insurance", "followers",
     "backlinks", "phone cases", "vpn", "essay writing", "watches", "sneakers"),
    ("online", "2024", "london", "new york", "deals", "reviews", "now"),
)

_WATCHES = (
    ("Tidemaster", "Aviator", "Regent", "Oceanic", "Monarch", "Vantage", "Heritage"),
    ("Diver 41mm", "Chrono GMT", "Pilot Automatic", "Classic 36mm", "Skeleton", "Moonphase"),
    ("Black Dial", "Blue Dial", "Steel Bracelet", "Rose Gold", "Green Bezel", "White Dial"),
)
_GADGETS = (
    ("Wireless Earbuds", "Smart Watch", "Phone Holder", "LED Strip", "Power Bank", "Mini Drone"),
    ("Pro Max", "Ultra", "Plus", "2024 Edition", "XL", "Lite"),
    ("Black", "White", "Blue", "Pink", "Silver", "Gold"),
)

_JS = (
    "var _0x3f2a = function() { return document.cookie.split(';'); };",
    "if (window.innerWidth < 768) { initMobileMenu({ sticky: true }); } else { initMenu(); }",
    "window.adsQueue = window.adsQueue || []; adsQueue.push({ slot: 'top', size: [728, 90] });",
    "function loadWidget(id) { var el = document.getElementById(id); if (!el) { return; } }",
    "$(document).ready(function() { $('.carousel').slick({ autoplay: true, dots: false }); });",
    "try { tracker.send('pageview', { path: location.pathname }); } catch (e) { console.log(e); }",
    "setTimeout(function() { document.body.classList.add('loaded'); }, 250);",
    "for (var i = 0; i < items.length; i++) { render(items[i], { lazy: true }); }",
)

_LOREM = (
    "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut "
    "labore et dolore magna aliqua ut enim ad minim veniam quis nostrud exercitation ullamco "
    "laboris nisi ut aliquip ex ea commodo consequat duis aute irure dolor in reprehenderit in "
    "voluptate velit esse cillum dolore eu fugiat nulla pariatur excepteur sint occaecat "
    "cupidatat non proident sunt in culpa qui officia deserunt mollit anim id est laborum"
).split()

_STUBS = {
    "coming_soon": {
        "en": ("Coming soon", "We are working hard on something new. Check back soon!"),
        "de": ("Demnächst verfügbar", "Wir arbeiten gerade an dieser Seite. Schauen Sie bald "
               "wieder vorbei!"),
        "fr": ("Bientôt disponible", "Cette page est en cours de préparation. Revenez bientôt !"),
    },
    "under_construction": {
        "en": ("Under construction", "This page is under construction. Please come back later."),
        "es": ("Página en construcción", "Estamos trabajando en esta página. Vuelve pronto."),
    },
}
_SHORT = {
    "en": (
        ("Page not found", "Sorry, the page you are looking for does not exist or has been "
         "moved. Try the search box or return to the homepage."),
        ("Thank you for subscribing", "Please check your inbox and click the link to confirm "
         "your email address."),
        ("Members only", "This content is available to members only. Log in or register to "
         "read the full article."),
        ("Log in", "Username. Password. Remember me. Forgot your password?"),
        ("Your basket", "Your basket is empty. Continue shopping."),
        ("Posts tagged: compost", "No posts found. Try a different tag."),
    ),
    "de": (("Seite nicht gefunden", "Die gewünschte Seite existiert leider nicht mehr. Zurück "
            "zur Startseite."),),
}


@dataclass(frozen=True)
class SpamKind:
    """One kind of spam or stub page: where it lives, in which language, how many."""

    subkind: str
    kind: str  # spam or stub
    domains: tuple[str, ...]
    lang: str
    count: int


PLAN: tuple[SpamKind, ...] = (
    SpamKind("seo_casino", "spam", ("mega-casino-bonus.biz",), "en", 5),
    SpamKind("seo_pharma", "spam", ("cheap-pharma-deals.info",), "en", 3),
    SpamKind("seo_loans", "spam", ("fast-loans-today.xyz",), "en", 3),
    SpamKind("link_farm", "spam", ("best-links-directory.xyz",), "en", 5),
    SpamKind("product_list", "spam", ("replica-watch-outlet.top", "top10-deals-online.com"),
             "en", 5),
    SpamKind("javascript", "spam", ("gearcheck-reviews.com", "weeknight-kitchen.com",
                                    "riverton-gazette.com", "plainmoney-guide.com"), "en", 4),
    SpamKind("lorem_ipsum", "spam", ("wanderlight-travel.com", "pawsandwhiskers-blog.com",
                                     "curious-cosmos.org"), "la", 3),
    SpamKind("coming_soon", "stub", ("parked-domains-4sale.com", "greenthumb-journal.net",
                                     "gearcheck-reviews.com"), "en", 4),
    SpamKind("coming_soon", "stub", ("technik-ratgeber.de",), "de", 1),
    SpamKind("coming_soon", "stub", ("cuisine-facile.fr",), "fr", 1),
    SpamKind("under_construction", "stub", ("parked-domains-4sale.com", "trailnotes-outdoors.com"),
             "en", 2),
    SpamKind("under_construction", "stub", ("huerto-urbano.es",), "es", 1),
    SpamKind("ellipsis_bullets", "stub", ("top10-deals-online.com", "weeknight-kitchen.com",
                                          "wanderlight-travel.com"), "en", 5),
    SpamKind("short", "stub", ("greenthumb-journal.net", "plainmoney-guide.com",
                               "shelfwise-reviews.com", "riverton-gazette.com"), "en", 7),
    SpamKind("short", "stub", ("bergwandern-blog.de",), "de", 1),
)


def _stuffed(rng: random.Random, topic: str) -> Content:
    keywords = STUFFING[topic]
    blocks = []
    for _ in range(rng.randint(4, 7)):
        words: list[str] = []
        length = rng.randint(45, 80)
        while len(words) < length:
            words += rng.choice(keywords).split()
            if rng.random() < 0.3:
                words.append(rng.choice(_GLUE))
        blocks.append(Block("p", " ".join(words)))
        if rng.random() < 0.5:
            blocks.append(Block("p", _PITCH[topic]))
    title = " - ".join(rng.sample(keywords, 3)).title()
    return Content(title, blocks, topic)


def _link_farm(rng: random.Random) -> Content:
    count = rng.randint(70, 120)
    anchors = sorted({" ".join(rng.choice(part) for part in _LINK_WORDS) for _ in range(count)})
    return Content("Best Links Directory - Top Sites", [Block("links", items=tuple(anchors))])


def _product_list(rng: random.Random, domain: str) -> Content:
    parts = _WATCHES if "watch" in domain else _GADGETS
    lines = []
    for _ in range(rng.randint(30, 60)):
        name = " ".join(rng.choice(part) for part in parts)
        lines.append(f"{name} - ${rng.randint(19, 299)}.00 - Free Shipping")
    title = "Cheap Replica Watches Outlet" if "watch" in domain else "Top 10 Deals Today"
    return Content(title, [Block("ul", items=tuple(lines))])


def _javascript(rng: random.Random) -> Content:
    blocks = [Block("p", "Loading...")]
    for _ in range(rng.randint(5, 9)):
        code = rng.sample(_JS, rng.randint(2, 4))
        blocks.append(Block("p", " ".join(code)))
    blocks.append(Block("p", "Please enable JavaScript to view this page."))
    return Content(rng.choice(("Deals widget", "Loading", "Interactive map")), blocks)


def _lorem(rng: random.Random) -> Content:
    blocks = []
    for _ in range(rng.randint(3, 6)):
        sentences = []
        for _ in range(rng.randint(3, 6)):
            start = rng.randrange(len(_LOREM) - 12)
            words = _LOREM[start : start + rng.randint(6, 12)]
            sentences.append(" ".join(words).capitalize() + ".")
        blocks.append(Block("p", " ".join(sentences)))
    opening = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. "
    blocks[0] = Block("p", opening + blocks[0].text)
    return Content(rng.choice(("Sample Page", "Hello world!", "Lorem ipsum")), blocks)


def _stub(rng: random.Random, subkind: str, lang: str) -> Content:
    title, text = _STUBS[subkind][lang]
    return Content(title, [Block("h2", title), Block("p", text)])


def _ellipsis(rng: random.Random) -> Content:
    lines = []
    for _ in range(rng.randint(12, 25)):
        lines.append(rng.choice(("...", "Read more...", "\u2022 New arrivals...", "\u2022 ...",
                                 "\u2022 Coming soon...", "More...", "\u2022 Offers...")))
    return Content("Latest updates", [Block("p", "\n".join(lines))])


def _short(rng: random.Random, lang: str) -> Content:
    title, text = rng.choice(_SHORT[lang])
    return Content(title, [Block("h2", title), Block("p", text)])


def build_spam_page(rng: random.Random, subkind: str, domain: str, lang: str) -> Content:
    if subkind.startswith("seo_"):
        return _stuffed(rng, subkind.removeprefix("seo_"))
    if subkind == "link_farm":
        return _link_farm(rng)
    if subkind == "product_list":
        return _product_list(rng, domain)
    if subkind == "javascript":
        return _javascript(rng)
    if subkind == "lorem_ipsum":
        return _lorem(rng)
    if subkind == "ellipsis_bullets":
        return _ellipsis(rng)
    if subkind == "short":
        return _short(rng, lang)
    return _stub(rng, subkind, lang)
