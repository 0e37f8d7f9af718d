"""The URL filter: a domain blocklist and banned URL substrings, applied before extraction."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_SUBSTRINGS = Path(__file__).parent / "data" / "url_banned_substrings.txt"


def url_host(url: str | None) -> str:
    """The lower-cased host name without a leading `www.`; empty for an unparsable URL."""
    if not url:
        return ""
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return ""
    return host.removeprefix("www.")


def read_list(path: str | Path) -> list[str]:
    """Non-empty lines of a list file, lower-cased; `#` starts a comment."""
    entries = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        entry = line.split("#", 1)[0].strip().lower()
        if entry:
            entries.append(entry)
    return entries


@dataclass(frozen=True)
class UrlFilter:
    domains: frozenset[str]
    substrings: tuple[str, ...]

    @classmethod
    def load(cls, blocklist: str | None, banned_substrings: str | None,
             use_default_substrings: bool) -> UrlFilter:
        domains = frozenset(d.removeprefix("www.") for d in read_list(blocklist)) if blocklist \
            else frozenset()
        substrings = read_list(DEFAULT_SUBSTRINGS) if use_default_substrings else []
        if banned_substrings:
            substrings += read_list(banned_substrings)
        return cls(domains, tuple(dict.fromkeys(substrings)))

    def __post_init__(self) -> None:
        pattern = "|".join(re.escape(s) for s in self.substrings) if self.substrings else None
        object.__setattr__(self, "_pattern", re.compile(pattern) if pattern else None)

    def check(self, url: str | None) -> tuple[str, str] | None:
        """(reason, what matched) when the URL is filtered, else None."""
        host = url_host(url)
        parts = host.split(".")
        for index in range(len(parts)):
            if ".".join(parts[index:]) in self.domains:
                return "url_blocklist", ".".join(parts[index:])
        if self._pattern is not None and url:
            split = urlsplit(url.lower())
            found = self._pattern.search(f"{split.hostname or ''}{split.path}")
            if found:
                return "url_banned_substring", found.group(0)
        return None
