"""The built-in sample: a small, deterministic, Common Crawl-like data set written by code.

`generate_sample(out_dir, seed)` writes two WARC snapshots, a curated reference source, a
benchmark file and a URL blocklist, with a manifest and per-page truth, so every pipeline stage
has work to do and its tests have an answer key. Nothing is downloaded or read from elsewhere.
"""

from curation.sample.generate import SampleLayout, generate_sample

__all__ = ["SampleLayout", "generate_sample"]
