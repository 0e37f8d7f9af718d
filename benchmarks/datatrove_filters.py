"""datatrove side of the filter benchmark: its four quality filters on extracted texts.

Runs inside ``benchmarks/.venv-datatrove`` (datatrove 0.10 cannot share the project's
environment); ``benchmarks/filters.py`` starts it as a subprocess and imports nothing from it.
Input: a folder of JSONL shards, one ``{"id", "text"}`` object a line. The last stdout line is
``RESULT {json}``.

Two modes, both with the filters' default arguments:

- ``independent``: every filter on every document on its own (a fresh ``Document`` each time,
  and datatrove's word-split cache cleared before each call, so each suite pays for its own
  split as it would alone), writing one verdict line per document and the per-filter seconds;
  for documents C4 keeps, also C4's rewritten text and FineWeb's verdict on it (what the
  cascade's FineWeb sees); and the number and a SHA-1 of spaCy's words of each document.
- ``cascade``: the usual pipeline, ``JsonlReader -> GopherRepetitionFilter ->
  GopherQualityFilter -> C4QualityFilter -> FineWebQualityFilter``, with
  ``LocalPipelineExecutor`` (one task per shard, ``--workers`` processes); wall-clock seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

SUITES = ("gopher_repetition", "gopher_quality", "c4", "fineweb")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input-dir", type=Path, required=True)
    parser.add_argument("--mode", choices=("independent", "cascade"), required=True)
    parser.add_argument("--output", type=Path, help="independent: the verdicts JSONL")
    parser.add_argument("--workers", type=int, default=1, help="cascade: worker processes")
    return parser.parse_args(argv)


def make_filters() -> dict[str, Any]:
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
    )

    return {
        "gopher_repetition": GopherRepetitionFilter(),
        "gopher_quality": GopherQualityFilter(),
        "c4": C4QualityFilter(),
        "fineweb": FineWebQualityFilter(),
    }


def read_docs(input_dir: Path) -> list[dict[str, str]]:
    docs = []
    for path in sorted(input_dir.glob("*.jsonl")):
        with path.open(encoding="utf-8") as fh:
            docs.extend(json.loads(line) for line in fh)
    return docs


def _digest(words: list[str]) -> str:
    """A fingerprint of a word list (words hold no newline)."""
    return hashlib.sha1("\n".join(words).encode("utf-8", "surrogatepass")).hexdigest()


def run_independent(args: argparse.Namespace) -> dict[str, Any]:
    from datatrove.data import Document
    from datatrove.pipeline.filters.base_filter import get_filter_result
    from datatrove.utils.text import split_into_parts, split_into_words

    filters = make_filters()
    docs = read_docs(args.input_dir)
    seconds = dict.fromkeys(SUITES, 0.0)
    with args.output.open("w", encoding="utf-8") as out:
        for doc in docs:
            row: dict[str, Any] = {"id": doc["id"]}
            for suite, step in filters.items():
                document = Document(text=doc["text"], id=doc["id"])
                split_into_parts.cache_clear()
                start = time.perf_counter()
                keep, reason = get_filter_result(step.filter(document))
                seconds[suite] += time.perf_counter() - start
                row[suite] = [bool(keep), reason]
                if suite == "c4" and keep:
                    row["c4_text"] = document.text
            words = split_into_words(doc["text"])  # the word split itself (not timed)
            row["words"] = [len(words), _digest(words)]
            if "c4_text" in row:  # what the cascade's FineWeb sees (not timed)
                after = Document(text=row["c4_text"], id=doc["id"])
                row["fineweb_after_c4"] = list(get_filter_result(filters["fineweb"].filter(after)))
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    return {"documents": len(docs), "seconds": seconds}


def run_cascade(args: argparse.Namespace) -> dict[str, Any]:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import JsonlReader

    shards = sorted(args.input_dir.glob("*.jsonl"))
    logging_dir = Path(tempfile.mkdtemp(prefix="dt-filters-"))
    pipeline = [JsonlReader(str(args.input_dir), glob_pattern="*.jsonl"), *make_filters().values()]
    executor = LocalPipelineExecutor(
        pipeline=pipeline,
        tasks=len(shards),
        workers=args.workers,
        logging_dir=str(logging_dir),
        skip_completed=False,
    )
    start = time.perf_counter()
    executor.run()
    wall = time.perf_counter() - start
    steps = json.loads((logging_dir / "stats.json").read_text())
    shutil.rmtree(logging_dir, ignore_errors=True)
    return {"wall_seconds": wall, "workers": args.workers, "steps": _step_summary(steps)}


def _step_summary(steps: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per step: documents in, forwarded, and seconds, from datatrove's merged stats."""
    out = {}
    for step in steps:
        stats = step.get("stats", {})

        def total(key: str, stats: dict[str, Any] = stats) -> Any:
            value = stats.get(key, 0)
            return value.get("total", value) if isinstance(value, dict) else value

        out[step["name"]] = {
            "total": total("total"),
            "forwarded": total("forwarded"),
            "seconds": step.get("time_stats", {}).get("total", 0.0),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    runner = run_independent if args.mode == "independent" else run_cascade
    result = runner(args)
    result["versions"] = {name: version(name) for name in ("datatrove", "spacy")}
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
