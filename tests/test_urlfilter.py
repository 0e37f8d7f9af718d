"""The URL filter applied before extraction."""

from __future__ import annotations

from pathlib import Path

import pytest

from curation.urlfilter import UrlFilter, url_host


@pytest.fixture
def blocklist(tmp_path: Path) -> Path:
    path = tmp_path / "domains.txt"
    path.write_text("# spam\nbad-site.com\nWWW.Shouty.org  # upper case and www are folded\n")
    return path


def test_a_listed_domain_blocks_itself_and_its_subdomains(blocklist: Path) -> None:
    url_filter = UrlFilter.load(str(blocklist), None, use_default_substrings=False)
    assert url_filter.check("https://bad-site.com/page") == ("url_blocklist", "bad-site.com")
    assert url_filter.check("http://www.cdn.bad-site.com/x") == ("url_blocklist", "bad-site.com")
    assert url_filter.check("https://shouty.org/") == ("url_blocklist", "shouty.org")
    assert url_filter.check("https://notbad-site.com/") is None
    assert url_filter.check("https://bad-site.com.example.net/") is None


def test_banned_substrings_match_host_and_path_not_query(tmp_path: Path) -> None:
    own = tmp_path / "subs.txt"
    own.write_text("cheap-pills\n")
    url_filter = UrlFilter.load(None, str(own), use_default_substrings=True)
    assert url_filter.check("https://free-porn-videos.example/") == ("url_banned_substring",
                                                                      "porn")
    assert url_filter.check("https://shop.example/cheap-pills/now")[1] == "cheap-pills"
    assert url_filter.check("https://news.example/?ref=porn") is None
    # Place names and ordinary words stay: the default list avoids short words like "sex".
    assert url_filter.check("https://www.sussex.ac.uk/essex-cricket") is None


def test_no_lists_filters_nothing_and_bad_urls_do_not_raise() -> None:
    url_filter = UrlFilter.load(None, None, use_default_substrings=False)
    assert url_filter.check("https://anything.example/porn") is None
    assert url_filter.check(None) is None
    assert url_host("http://[::1") == ""
    assert url_host("https://WWW.Example.COM:8080/a") == "example.com"
