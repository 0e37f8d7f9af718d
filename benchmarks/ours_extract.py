"""Our side of the extraction benchmark: the project's `documents` stage over WARC files.

Started by ``benchmarks/extraction.py`` as a fresh subprocess of the project's venv, so its peak
memory is that of its own process tree. The last stdout line is ``RESULT {json}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input-dir", type=Path, required=True)
    parser.add_argument("--glob", default="*.warc.gz", help="which files of --input-dir to read")
    parser.add_argument("--output-dir", type=Path, required=True, help="a fresh store root")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--snapshot", default="BENCH-01")
    return parser.parse_args(argv)


def _stage_stats(run: Any) -> dict[str, Any]:
    stats = getattr(run, "stats", None)
    if stats is not None and hasattr(stats, "to_dict"):
        return stats.to_dict()
    return {}


def main(argv: list[str] | None = None) -> int:
    from curation.config import DocumentsSettings
    from curation.stages.documents import run_documents
    from curation.storage import open_store

    args = parse_args(argv)
    files = [str(p) for p in sorted(args.input_dir.glob(args.glob))]
    settings = DocumentsSettings()
    start = time.perf_counter()
    run = run_documents(
        snapshot=args.snapshot,
        warc_files=files,
        store=open_store(str(args.output_dir)),
        settings=settings,
        workers=args.workers,
    )
    seconds = time.perf_counter() - start
    stats = _stage_stats(run)
    result = {
        "seconds": seconds,
        "stage_seconds": float(run.seconds),
        "files": len(files),
        "workers": args.workers,
        # HTML response records (the documents stage's candidates); `warc_records` counts every
        # WARC record read, warcinfo and request records included.
        "records_in": int(stats.get("candidates", run.records_in)),
        "warc_records": int(run.records_in),
        "docs_out": int(run.docs_out),
        "rejects": dict(run.rejects),
        "settings": settings.model_dump(mode="json"),
        "versions": {p: version(p) for p in ("trafilatura", "lxml", "fastwarc")},
    }
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
