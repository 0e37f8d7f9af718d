"""datatrove side of the extraction benchmark: WarcReader -> Trafilatura -> JsonlWriter.

Runs inside ``benchmarks/.venv-datatrove`` (datatrove 0.10 pins trafilatura below 1.12, so it
cannot share the project's environment); ``benchmarks/extraction.py`` starts it as a subprocess.
It imports nothing from the project. The last stdout line is ``RESULT {json}``.

Trafilatura settings are FineWeb's (datatrove's ``examples/fineweb.py`` uses
``Trafilatura(favour_precision=True)``), which are also datatrove 0.10's defaults:
favour_precision=True, deduplicate=True, include_comments=False, timeout=1.0 s per document
(extraction runs in a sandbox subprocess per task; a document that takes longer is dropped).
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
    parser.add_argument("--output-dir", type=Path, required=True)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--tasks", type=int, default=0, help="default: one task per input file")
    parser.add_argument("--timeout", type=float, default=1.0, help="extraction timeout, seconds")
    parser.add_argument("--no-write", action="store_true", help="drop documents, write nothing")
    return parser.parse_args(argv)


def build_pipeline(args: argparse.Namespace) -> list[Any]:
    from datatrove.pipeline.extractors import Trafilatura
    from datatrove.pipeline.readers import WarcReader
    from datatrove.pipeline.writers.jsonl import JsonlWriter

    pipeline: list[Any] = [
        WarcReader(str(args.input_dir), glob_pattern=args.glob, recursive=False),
        Trafilatura(favour_precision=True, timeout=args.timeout, deduplicate=True),
    ]
    if not args.no_write:
        pipeline.append(JsonlWriter(str(args.output_dir / "output")))
    return pipeline


def step_stats(logging_dir: Path) -> dict[str, dict[str, Any]]:
    """Per-step counters from datatrove's merged ``stats.json``."""
    steps = json.loads((logging_dir / "stats.json").read_text())
    out: dict[str, dict[str, Any]] = {}
    for step in steps:
        counters = {}
        for key, value in step.get("stats", {}).items():
            counters[key] = value.get("total", value) if isinstance(value, dict) else value
        out[step["name"]] = counters
    return out


def main(argv: list[str] | None = None) -> int:
    from datatrove.executor import LocalPipelineExecutor

    args = parse_args(argv)
    files = sorted(args.input_dir.glob(args.glob))
    tasks = args.tasks or len(files)
    logging_dir = args.output_dir / "logs"
    executor = LocalPipelineExecutor(
        pipeline=build_pipeline(args),
        tasks=tasks,
        workers=args.workers,
        logging_dir=str(logging_dir),
    )
    start = time.perf_counter()
    executor.run()
    seconds = time.perf_counter() - start
    stats = step_stats(logging_dir)
    reader = next((v for k, v in stats.items() if "Warc" in k), {})
    extractor = next((v for k, v in stats.items() if "Trafilatura" in k), {})
    result = {
        "seconds": seconds,
        "files": len(files),
        "tasks": tasks,
        "workers": args.workers,
        "records_in": int(reader.get("documents", 0)),
        "docs_out": int(extractor.get("forwarded", 0)),
        "extractor": extractor,
        "versions": {p: version(p) for p in ("datatrove", "trafilatura", "lxml", "warcio")},
    }
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
