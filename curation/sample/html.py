"""Render a page as HTML inside its site's template (chrome: navigation, cookie banner, sidebar,
comments, footer, scripts).

Separators and symbols in the chrome are written as HTML entities, so the markup is ASCII apart
from the text itself and any page can be served in a legacy charset.
"""

from __future__ import annotations

import json
import random
import re
import unicodedata
from dataclasses import dataclass
from html import escape

from curation.sample.compose import Block
from curation.sample.sites import CHROME, Site

# Forum signatures recur under every post of their author: boilerplate inside the thread.
_SIGNATURES = {
    "veggie-patch-forum.org": (
        "Growing on heavy clay since 2009, and still learning.",
        "Raised beds, two water butts and far too many tomatoes.",
        "Allotment 14b, come and say hello.",
    ),
    "selfhosters-forum.net": (
        "Homelab: three small nodes, one NAS, no free weekends.",
        "If it is not backed up twice, it is not backed up.",
        "Running everything on a fanless box under the stairs.",
    ),
}
_COMMENTERS = ("Margaret", "Dev", "Lotte", "Pete H.", "Ines", "Olu", "Kasia")


@dataclass(frozen=True)
class PageView:
    """Everything the template needs to know about one page."""

    site: Site
    lang: str
    title: str
    blocks: tuple[Block, ...]
    url: str
    canonical: str
    author: str
    published: str
    related: tuple[tuple[str, str], ...]  # (title, url) of other pages of the site
    meta_charset: str | None = "utf-8"


def slug(text: str, fallback: str = "page") -> str:
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    cleaned = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    return cleaned[:60].rstrip("-") or fallback


def _text(text: str) -> str:
    return escape(text, quote=False).replace("\n", "<br>\n")


def render_blocks(blocks: tuple[Block, ...] | list[Block]) -> str:
    parts = []
    for block in blocks:
        if block.kind in ("ul", "ol"):
            items = "".join(f"<li>{_text(item)}</li>" for item in block.items)
            parts.append(f"<{block.kind}>{items}</{block.kind}>")
        elif block.kind == "links":
            items = "".join(
                f'<li><a href="https://{slug(item)}.example-links.xyz/">{_text(item)}</a></li>'
                for item in block.items
            )
            parts.append(f'<ul class="link-list">{items}</ul>')
        elif block.kind == "pre":
            parts.append(f"<pre><code>{_text(block.text)}</code></pre>")
        elif block.kind == "h2":
            parts.append(f"<h2>{_text(block.text)}</h2>")
        elif block.kind == "post":
            # A forum post shown outside a forum (a scraper's copy) is plain paragraphs.
            parts.append(f'<div class="quoted-post"><p>{_text(block.text)}</p></div>')
        else:
            parts.append(f"<p>{_text(block.text)}</p>")
    return "\n".join(parts)


def _head(view: PageView, rng: random.Random) -> str:
    description = escape(_first_text(view.blocks)[:150])
    charset = f'<meta charset="{view.meta_charset}">\n' if view.meta_charset else ""
    ld = json.dumps({"@context": "https://schema.org", "@type": "Article",
                     "headline": view.title, "datePublished": view.published,
                     "author": {"@type": "Person", "name": view.author}}, ensure_ascii=True)
    analytics = rng.choice(("G-SAMPLE01", "G-SAMPLE02", "UA-000000-1"))
    return (
        f'<!DOCTYPE html>\n<html lang="{view.lang}">\n<head>\n{charset}'
        f"<title>{escape(view.title)} | {escape(view.site.name)}</title>\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta name="description" content="{description}">\n'
        f'<link rel="canonical" href="{escape(view.canonical)}">\n'
        '<link rel="stylesheet" href="/assets/css/main.css">\n'
        f'<script type="application/ld+json">{ld}</script>\n'
        "<script>window.dataLayer = window.dataLayer || [];"
        "function gtag(){dataLayer.push(arguments);}"
        f"gtag('js', new Date()); gtag('config', '{analytics}');</script>\n"
        "<style>body{font-family:Georgia,serif;margin:0}.cookie-banner{position:fixed;bottom:0}"
        "</style>\n</head>\n"
    )


def _first_text(blocks: tuple[Block, ...]) -> str:
    return next((b.text for b in blocks if b.kind in ("p", "post") and b.text), "")


def _cookie(chrome: dict[str, str]) -> str:
    return (
        f'<div class="cookie-banner" id="cookie-consent"><p>{_text(chrome["cookie"])}</p>'
        f'<button class="accept">{_text(chrome["accept"])}</button>'
        f'<button class="manage">{_text(chrome["settings"])}</button></div>\n'
    )


def _nav(site: Site) -> str:
    links = "".join(
        f'<li><a href="/{slug(label, f"c{i}")}/">{_text(label)}</a></li>'
        for i, label in enumerate(site.nav)
    )
    return f'<nav class="main-nav" aria-label="Main"><ul>{links}</ul></nav>\n'


def _header(site: Site, chrome: dict[str, str]) -> str:
    return (
        f'<header class="site-header"><a class="logo" href="/">{_text(site.name)}</a>'
        f'<p class="tagline">{_text(site.tagline)}</p>'
        f'<form class="search" action="/search"><input name="q" placeholder="{chrome["search"]}">'
        f"</form>\n{_nav(site)}</header>\n"
    )


def _related(view: PageView, heading: str) -> str:
    items = "".join(f'<li><a href="{escape(u)}">{_text(t)}</a></li>' for t, u in view.related)
    return f'<section class="widget related"><h3>{_text(heading)}</h3><ul>{items}</ul></section>\n'


def _newsletter(chrome: dict[str, str]) -> str:
    return (
        f'<section class="widget newsletter"><h3>{_text(chrome["newsletter"])}</h3>'
        f'<p>{_text(chrome["newsletter_text"])}</p><form action="/subscribe">'
        f'<input type="email" name="email"><button>{_text(chrome["subscribe"])}</button>'
        "</form></section>\n"
    )


def _footer(site: Site, chrome: dict[str, str], year: int) -> str:
    links = " &middot; ".join(
        f'<a href="/{slug(chrome[key])}/">{_text(chrome[key])}</a>'
        for key in ("about", "contact", "privacy", "terms")
    )
    return (
        f'<footer class="site-footer"><p class="footer-tagline">{_text(site.name)}: '
        f"{_text(site.tagline)}</p><p>{links}</p>"
        f"<p>&copy; {year} {_text(site.name)}. {_text(chrome['rights'])}</p></footer>\n"
        '<script src="/assets/js/app.js" defer></script>\n</body>\n</html>\n'
    )


def _byline(view: PageView, chrome: dict[str, str], minutes: int) -> str:
    return (
        f'<p class="byline">{_text(chrome["by"])} <a rel="author" href="/author/'
        f'{slug(view.author, "author")}/">{_text(view.author)}</a> &middot; '
        f'<time datetime="{view.published}">{view.published}</time> &middot; '
        f"{minutes} {_text(chrome['read'])}</p>\n"
    )


def _share(chrome: dict[str, str]) -> str:
    return (
        f'<div class="share"><span>{_text(chrome["share"])}</span> '
        '<a href="#" class="share-fb">Facebook</a> <a href="#" class="share-x">X</a> '
        '<a href="#" class="share-mail">Email</a></div>\n'
    )


def _comments(rng: random.Random, chrome: dict[str, str], lines: tuple[str, ...]) -> str:
    count = rng.randint(0, 3) if lines else 0
    items = "".join(
        f'<li class="comment"><b>{_text(rng.choice(_COMMENTERS))}</b>'
        f"<p>{_text(rng.choice(lines))}</p><a href=\"#\">{_text(chrome['reply'])}</a></li>"
        for _ in range(count)
    )
    return (
        f'<section id="comments"><h3>{count} {_text(chrome["comments"])}</h3><ol>{items}</ol>'
        f'<h3>{_text(chrome["leave_comment"])}</h3><form action="/comment"><textarea '
        'name="comment"></textarea></form></section>\n'
    )


def _article(view: PageView, chrome: dict[str, str], rng: random.Random, body_class: str) -> str:
    words = sum(len(b.plain().split()) for b in view.blocks)
    return (
        f'<article class="{body_class}"><h1 class="entry-title">{_text(view.title)}</h1>\n'
        f"{_byline(view, chrome, max(1, words // 200))}"
        f'<div class="entry-content">\n{render_blocks(view.blocks)}\n</div>\n'
        f"{_share(chrome)}</article>\n"
    )


def _breadcrumbs(view: PageView, chrome: dict[str, str]) -> str:
    section = view.site.nav[1] if len(view.site.nav) > 1 else chrome["home"]
    return (
        f'<div class="breadcrumbs"><a href="/">{_text(chrome["home"])}</a> &rsaquo; '
        f'<a href="/{slug(section, "c1")}/">{_text(section)}</a> &rsaquo; '
        f"<span>{_text(view.title)}</span></div>\n"
    )


def _magazine(view: PageView, rng: random.Random, comments: tuple[str, ...]) -> str:
    chrome = CHROME[view.lang]
    return (
        f"<body class=\"magazine\">\n{_cookie(chrome)}{_header(view.site, chrome)}"
        f'<div class="container">{_breadcrumbs(view, chrome)}<main id="main">\n'
        f"{_article(view, chrome, rng, 'post')}</main>\n"
        f'<aside class="sidebar">{_related(view, chrome["related"])}{_newsletter(chrome)}'
        "</aside></div>\n"
    )


def _blog(view: PageView, rng: random.Random, comments: tuple[str, ...]) -> str:
    chrome = CHROME[view.lang]
    # Month archives counted back from January 2024, before either snapshot's crawl.
    months = [(2024 - (i + 11) // 12, -i % 12 + 1) for i in range(rng.randint(4, 8))]
    archives = "".join(f'<li><a href="/{y}/{m:02d}/">{y}-{m:02d}</a></li>' for y, m in months)
    return (
        f'<body class="blog single-post">\n<div id="page" class="site">{_cookie(chrome)}'
        f'{_header(view.site, chrome)}<div id="content" class="site-content">'
        f'<main id="primary" class="site-main">\n'
        f"{_article(view, chrome, rng, 'post type-post hentry')}"
        f'<nav class="post-navigation"><a rel="prev" href="#">{_text(chrome["prev"])}</a> '
        f'<a rel="next" href="#">{_text(chrome["next"])}</a></nav>\n'
        f"{_comments(rng, chrome, comments)}</main>\n"
        f'<aside id="secondary" class="widget-area">{_related(view, chrome["recent"])}'
        f'<section class="widget widget_archive"><h3>{_text(chrome["archives"])}</h3>'
        f"<ul>{archives}</ul></section>{_newsletter(chrome)}</aside></div></div>\n"
    )


def _forum(view: PageView, rng: random.Random, comments: tuple[str, ...]) -> str:
    chrome = CHROME[view.lang]
    posts, notices = [], []
    for number, block in enumerate(view.blocks):
        if block.kind != "post":
            notices.append(f'<div class="notice">{render_blocks([block])}</div>')
            continue
        user, date = block.meta.split("|")
        signatures = _SIGNATURES.get(view.site.domain, ("",))
        posts.append(
            f'<div class="post" id="p{1000 + number}"><div class="postprofile">'
            f'<span class="username">{_text(user)}</span> '
            f'<span class="posts">{chrome["posts"]}: {rng.randint(3, 4000)}</span> '
            f'<span class="joined">{chrome["joined"]}: {rng.randint(2012, 2023)}</span></div>'
            f'<div class="postbody"><p class="author">{_text(user)} &raquo; {date}</p>'
            f'<div class="content"><p>{_text(block.text)}</p></div>'
            f'<div class="signature">{_text(signatures[hash_index(user, len(signatures))])}'
            "</div></div></div>\n"
        )
    return (
        f"<body class=\"forum\">\n{_header(view.site, chrome)}{_breadcrumbs(view, chrome)}"
        f'<main class="forum-wrap"><h1 class="topic-title">{_text(view.title)}</h1>\n'
        f"{''.join(notices)}{''.join(posts)}</main>\n"
        f'<div class="similar">{_related(view, "Similar topics")}</div>\n'
    )


def hash_index(text: str, size: int) -> int:
    """A stable index for `text` (Python's hash() is salted per process)."""
    return sum(text.encode()) % size


def _review(view: PageView, rng: random.Random, comments: tuple[str, ...]) -> str:
    chrome = CHROME[view.lang]
    stars = "&#9733;" * rng.randint(3, 5)
    return (
        f"<body class=\"review\">\n{_cookie(chrome)}{_header(view.site, chrome)}"
        f'<div class="container">{_breadcrumbs(view, chrome)}'
        f'<div class="product-box"><span class="rating">{stars}</span>'
        '<a class="btn" href="#" rel="sponsored">Check price</a>'
        '<a class="btn" href="#" rel="sponsored">Compare deals</a></div>\n'
        f'<main id="main">{_article(view, chrome, rng, "review-article")}</main>\n'
        f'<aside class="sidebar">{_related(view, chrome["related"])}{_newsletter(chrome)}'
        "</aside></div>\n"
    )


def _news(view: PageView, rng: random.Random, comments: tuple[str, ...]) -> str:
    chrome = CHROME[view.lang]
    ticker = rng.choice(("Road closures this weekend", "Weather warning for Friday",
                         "Results from the county cup"))
    return (
        f'<body class="news">\n{_cookie(chrome)}<div class="ticker">Latest: {_text(ticker)}</div>'
        f"{_header(view.site, chrome)}<div class=\"container\">\n"
        f'<main id="main">{_article(view, chrome, rng, "news-article")}</main>\n'
        f'<aside class="sidebar">{_related(view, chrome["popular"])}{_newsletter(chrome)}'
        "</aside></div>\n"
    )


def _spam(view: PageView, rng: random.Random, comments: tuple[str, ...]) -> str:
    ads = "".join(
        f'<div class="ad"><a href="#">{_text(view.title)} - click here</a></div>'
        for _ in range(rng.randint(2, 5))
    )
    return (
        f'<body class="spam">\n<div class="top-banner">{ads}</div>'
        f"<h1>{_text(view.title)}</h1>\n<div class=\"content\">\n{render_blocks(view.blocks)}\n"
        f"</div>\n{ads}\n"
    )


def _parked(view: PageView, rng: random.Random, comments: tuple[str, ...]) -> str:
    return (
        '<body class="parked">\n<div class="parked-notice">This domain may be for sale. '
        '<a href="#">Make an offer</a></div>\n'
        f"<div class=\"content\">\n{render_blocks(view.blocks)}\n</div>\n"
    )


_TEMPLATES = {
    "magazine": _magazine, "blog": _blog, "forum": _forum, "review": _review, "news": _news,
    "spam": _spam, "parked": _parked,
}


def render(view: PageView, rng: random.Random, comments: tuple[str, ...] = ()) -> str:
    """The full HTML document for `view`; `rng` varies only the chrome, never the content."""
    body = _TEMPLATES[view.site.template](view, rng, comments)
    if view.site.template in ("spam", "parked"):
        return _head(view, rng) + body + "</body>\n</html>\n"
    year = int(view.published[:4]) if view.published[:4].isdigit() else 2024
    return _head(view, rng) + body + _footer(view.site, CHROME[view.lang], year)
