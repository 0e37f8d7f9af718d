"""Canonical URLs: one string per resource, so `url_dedup` can group pages fetched under
different spellings of the same address.

Rules, in the order they apply (only to `http`, `https` and scheme-relative `//host` URLs;
anything else, and anything `urllib.parse` cannot take apart, comes back as the input stripped
of surrounding whitespace, so the function never raises):

- Scheme: `http` and `https` are the same resource for deduplication (sites serve both, and
  crawls hold both); the canonical scheme is `https`.
- Host: lower-cased, trailing dot dropped, internationalised names in IDNA (punycode) form
  (Python's `idna` codec, IDNA 2003: no new dependency);
  user name and password dropped (they are credentials, not part of what the page is).
- Port: the defaults 80 and 443 are dropped (either one, since the scheme is unified); others kept.
- Path: `;jsessionid=...` dropped, dot segments resolved, duplicate slashes collapsed, index pages
  (`INDEX_PAGES`, case-insensitive) reduced to their folder, the trailing slash dropped (`/a/` and
  `/a` are the same; the root stays `/`, and an empty path becomes `/`). Case is kept: paths are
  case-sensitive on most servers.
- Query: tracking parameters dropped (`TRACKING_PARAMETERS` and every `utm_*`, matched on the
  decoded, lower-cased name), empty pairs dropped, the rest sorted (by name, then value). No `?`
  when nothing is left.
- Percent-encoding (path and query): characters that must be escaped (spaces, non-ASCII as UTF-8)
  are escaped, escapes of unreserved characters (`A-Z a-z 0-9 - . _ ~`) are decoded, every other
  escape is upper-cased. `+` and `%20` in a query stay distinct (servers may differ on them).
- Fragment: dropped (it never reaches the server; `#!` pages are treated the same way).
"""

from __future__ import annotations

import re
from urllib.parse import SplitResult, quote, unquote, urlsplit

CANONICAL_SCHEME = "https"
WEB_SCHEMES = frozenset({"http", "https", ""})
DEFAULT_PORTS = frozenset({80, 443})
INDEX_PAGES = frozenset(
    {
        "index.html", "index.htm", "index.shtml", "index.php", "index.asp", "index.aspx",
        "index.jsp", "index.cgi", "default.htm", "default.html", "default.asp", "default.aspx",
    }
)
# Click ids, campaign tags and analytics cookies in the URL: they name the visit, not the page.
TRACKING_PARAMETERS = frozenset(
    {
        "fbclid", "gclid", "gclsrc", "dclid", "gbraid", "wbraid", "msclkid", "yclid", "twclid",
        "ttclid", "igshid", "li_fat_id", "mc_cid", "mc_eid", "_ga", "_gl", "_hsenc", "_hsmi",
        "__hstc", "__hssc", "__hsfp", "hsctatrk", "mkt_tok", "ref_src", "ref_url", "s_cid",
        "vero_id", "vero_conv", "wickedid", "oly_anon_id", "oly_enc_id", "rb_clickid",
        "_openstat", "phpsessid", "jsessionid", "sessionid",
    }
)
TRACKING_PREFIXES = ("utm_",)

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_SLASHES = re.compile(r"/{2,}")
_JSESSIONID = re.compile(r";jsessionid=[^/?#]*", re.IGNORECASE)
# Everything a path or a query may hold unescaped (RFC 3986 pchar plus '/' and '?'), and '%' so
# that existing escapes are left to `_normalise_escapes`.
_PATH_SAFE = "/:@!$&'()*+,;=-._~%"
_QUERY_SAFE = _PATH_SAFE + "?"


def canonical_url(url: str) -> str:
    """The canonical form of `url` (rules in the module docstring); never raises."""
    stripped = url.strip()
    try:
        parts = urlsplit(stripped)
        if parts.scheme.lower() not in WEB_SCHEMES or not parts.hostname:
            return stripped
        return f"{CANONICAL_SCHEME}://{_netloc(parts)}{_path(parts.path)}{_query(parts.query)}"
    except ValueError:  # bad IPv6 literal, non-numeric port, IDNA label too long (UnicodeError)
        return stripped


def _netloc(parts: SplitResult) -> str:
    host = (parts.hostname or "").rstrip(".")
    if not host.isascii():
        host = host.encode("idna").decode("ascii")
    if ":" in host:  # an IPv6 literal: `hostname` dropped its brackets
        host = f"[{host}]"
    port = parts.port
    return host if port is None or port in DEFAULT_PORTS else f"{host}:{port}"


def _path(path: str) -> str:
    path = _normalise_escapes(quote(_JSESSIONID.sub("", path), safe=_PATH_SAFE))
    segments = _remove_dot_segments(_SLASHES.sub("/", path).split("/"))
    if segments and segments[-1].lower() in INDEX_PAGES:
        segments[-1] = ""
    joined = "/".join(segments).rstrip("/")
    return "/" + joined.lstrip("/")


def _remove_dot_segments(segments: list[str]) -> list[str]:
    """RFC 3986 section 5.2.4 over '/'-split segments (the leading "" stands for the root)."""
    out: list[str] = []
    for segment in segments:
        if segment == "..":
            if len(out) > 1:
                out.pop()
        elif segment != ".":
            out.append(segment)
    return out


def _query(query: str) -> str:
    pairs = []
    for pair in quote(query, safe=_QUERY_SAFE).split("&"):
        if not pair:
            continue
        name, sep, value = pair.partition("=")
        if _is_tracking(unquote(name).lower()):
            continue
        pairs.append((_normalise_escapes(name), sep, _normalise_escapes(value)))
    pairs.sort()
    return "?" + "&".join("".join(p) for p in pairs) if pairs else ""


def _is_tracking(name: str) -> bool:
    return name in TRACKING_PARAMETERS or name.startswith(TRACKING_PREFIXES)


def _normalise_escapes(text: str) -> str:
    """Decode escapes of unreserved characters, upper-case the others."""

    def fix(match: re.Match[str]) -> str:
        char = chr(int(match.group(1), 16))
        return char if char in _UNRESERVED else match.group(0).upper()

    return _ESCAPE.sub(fix, text)
