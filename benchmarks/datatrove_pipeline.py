"""datatrove side of the end-to-end comparison: FineWeb's recipe in datatrove 0.10, then tokens.

Runs inside ``benchmarks/.venv-datatrove`` (datatrove 0.10 pins trafilatura below 1.12, so it
cannot share the project's environment); ``benchmarks/compare.py`` starts it as a subprocess.
It imports nothing from the project and needs no network. The last stdout line is
``RESULT {json}``.

Stages, each its own ``LocalPipelineExecutor`` run (as in datatrove's ``examples/fineweb.py``),
timed by wall clock:

1. ``filter``: ``WarcReader -> URLFilter -> Trafilatura(favour_precision=True) ->
   LanguageFilter(["en"], 0.65) -> GopherRepetitionFilter -> GopherQualityFilter ->
   C4QualityFilter(filter_no_terminal_punct=False) -> FineWebQualityFilter -> JsonlWriter``;
   ``--tasks`` tasks (default: one per WARC file).
2. MinHash dedup with FineWeb's ``MinhashConfig`` (word 5-grams, 14 buckets x 8 hashes, 64-bit
   xxhash): ``minhash_signatures`` (one task per stage-1 shard), ``minhash_buckets`` (one task
   per bucket), ``minhash_cluster`` (one task), ``minhash_filter`` (``JsonlReader ->
   TokensCounter -> MinhashDedupFilter -> JsonlWriter``, one task per shard).
3. ``tokenize``: ``JsonlReader -> DocumentTokenizer`` with a local ``tokenizer.json`` (GPT-2 by
   default, ``<|endoftext|>`` after each document), writing datatrove's ``.ds`` token files.

Offline set-up: ``LanguageFilter``'s fastText model is ``--lid-model`` (lid.176; datatrove
copies it into its assets cache instead of downloading lid.176.bin), ``URLFilter``'s
``tldextract`` uses its bundled public-suffix snapshot (no fetch), and the tokenizer is loaded
from the file (``Tokenizer.from_file``).

URL filter (``--url-filter``): ``ours`` (default) is datatrove's ``URLFilter`` with its
integrated block lists off and the project's default banned substrings
(``curation/data/url_banned_substrings.txt``, mirrored below) as ``banned_subwords``, the same
rule as our ``documents`` stage's default ``url_filter``; ``fineweb`` is datatrove's default
(FineWeb's: integrated UT1 domain/URL lists, banned words and subwords); ``off`` drops the step.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import threading
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

# The project's default banned URL substrings (curation/data/url_banned_substrings.txt).
OUR_BANNED_SUBSTRINGS = (
    "porn",
    "xxx",
    "hentai",
    "camgirl",
    "escort-service",
    "nudecam",
    "onlyfans-leak",
    "viagra",
    "cialis",
    "casino-bonus",
    "free-spins",
    "payday-loan",
    "replica-watches",
)
DEFAULT_TOKENIZER = (Path(__file__).resolve().parents[2] / "shared" / "data"
                     / "tokenizers/gpt2/tokenizer.json")
STAGES = (
    "filter",
    "minhash_signatures",
    "minhash_buckets",
    "minhash_cluster",
    "minhash_filter",
    "tokenize",
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input-dir", type=Path, required=True, help="folder of WARC files")
    parser.add_argument("--glob", default="*.warc.gz", help="which files of --input-dir to read")
    parser.add_argument("--work-dir", type=Path, required=True, help="emptied, then written")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--tasks", type=int, default=0, help="default: one per WARC file")
    parser.add_argument("--lid-model", type=Path, required=True, help="lid.176 .ftz or .bin")
    parser.add_argument(
        "--tokenizer", type=Path, default=DEFAULT_TOKENIZER, help="tokenizer.json or its folder"
    )
    parser.add_argument("--eos-token", default="<|endoftext|>")
    parser.add_argument(
        "--timeout", type=float, default=5.0, help="Trafilatura timeout per document, seconds"
    )
    parser.add_argument("--url-filter", choices=("ours", "fineweb", "off"), default="ours")
    parser.add_argument(
        "--sample-interval", type=float, default=0.2, help="RSS sampling period, seconds"
    )
    args = parser.parse_args(argv)
    if args.tokenizer.is_dir():
        args.tokenizer = args.tokenizer / "tokenizer.json"
    for path in (args.lid_model, args.tokenizer):
        if not path.is_file():
            parser.error(f"{path} is not a file")
    return args


# --------------------------------------------------------------------------- memory


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


class TreeMemory:
    """Samples the RSS of this process and all its descendants (datatrove's workers and its
    forkserver, Trafilatura's sandbox processes) every ``interval`` seconds; keeps the peak of
    their sum and of the largest single process."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.peak_tree = 0
        self.peak_process = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def sample(self) -> None:
        tree = _children()
        pids, stack = [], [os.getpid()]
        while stack:
            pid = stack.pop()
            pids.append(pid)
            stack.extend(tree.get(pid, []))
        sizes = [_rss_bytes(pid) for pid in pids]
        self.peak_tree = max(self.peak_tree, sum(sizes))
        self.peak_process = max(self.peak_process, max(sizes, default=0))

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)


# --------------------------------------------------------------------------- pipeline


def make_url_filter(mode: str) -> Any:
    """datatrove's URLFilter, offline (bundled public-suffix list), or None for ``off``."""
    if mode == "off":
        return None
    from datatrove.pipeline.filters import URLFilter
    from tldextract import TLDExtract

    if mode == "ours":
        step = URLFilter(use_integrated_lists=False, banned_subwords=OUR_BANNED_SUBSTRINGS)
    else:
        step = URLFilter()
    step.tldextractor = TLDExtract(suffix_list_urls=())
    return step


def make_language_filter(lid_model: Path) -> Any:
    from datatrove.pipeline.filters import LanguageFilter

    step = LanguageFilter(languages=["en"], language_threshold=0.65)
    # An instance attribute, so it travels with the pickled step to the workers.
    step.model.MODEL_URL = str(lid_model.resolve())
    return step


def minhash_config() -> Any:
    """FineWeb's: 5-grams, 14 buckets of 8 hashes, 64-bit hashes (xxhash, 0.10's default)."""
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.utils.hashing import HashConfig

    return MinhashConfig(
        n_grams=5,
        num_buckets=14,
        hashes_per_bucket=8,
        hash_config=HashConfig(precision=64, hash_fc="xxhash"),
    )


def filter_pipeline(args: argparse.Namespace, out: Path) -> list[Any]:
    from datatrove.pipeline.extractors import Trafilatura
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
    )
    from datatrove.pipeline.readers import WarcReader
    from datatrove.pipeline.writers.jsonl import JsonlWriter

    url_filter = make_url_filter(args.url_filter)
    return [
        WarcReader(str(args.input_dir), glob_pattern=args.glob, recursive=False),
        *([url_filter] if url_filter is not None else []),
        Trafilatura(favour_precision=True, timeout=args.timeout),
        make_language_filter(args.lid_model),
        GopherRepetitionFilter(),
        GopherQualityFilter(),
        C4QualityFilter(filter_no_terminal_punct=False),
        FineWebQualityFilter(),
        JsonlWriter(str(out)),
    ]


def step_stats(logging_dir: Path) -> dict[str, dict[str, Any]]:
    """Per step of one executor run, from datatrove's merged ``stats.json``: seconds (summed over
    tasks) and every counter (totals)."""
    path = logging_dir / "stats.json"
    if not path.exists():
        return {}
    out: dict[str, dict[str, Any]] = {}
    for index, step in enumerate(json.loads(path.read_text())):
        counters: dict[str, Any] = {}
        for key, value in step.get("stats", {}).items():
            counters[key] = value.get("total", value) if isinstance(value, dict) else value
        # "📖 - READER: 🕷 Warc" -> "READER: Warc"
        name = "".join(c for c in step.get("name", f"step{index}") if c.isascii())
        name = " ".join(name.split()).removeprefix("- ")
        timing = step.get("time_stats")
        seconds = timing.get("total", 0.0) if isinstance(timing, dict) else (timing or 0.0)
        out[f"{index}:{name}"] = {
            "seconds": round(float(seconds), 3),
            **counters,
        }
    return out


def _count(stats: dict[str, dict[str, Any]], position: int, key: str) -> int:
    """Counter ``key`` of the step at ``position`` (negative: from the end) of a stage."""
    steps = list(stats.values())
    if not -len(steps) <= position < len(steps):
        return 0
    return int(steps[position].get(key, 0) or 0)


def run_stage(
    name: str,
    pipeline: list[Any],
    tasks: int,
    workers: int,
    work_dir: Path,
    sample_interval: float,
) -> dict[str, Any]:
    from datatrove.executor import LocalPipelineExecutor

    logging_dir = work_dir / "logs" / name
    executor = LocalPipelineExecutor(
        pipeline=pipeline,
        tasks=tasks,
        workers=min(workers, tasks),
        logging_dir=str(logging_dir),
        skip_completed=False,
    )
    with TreeMemory(sample_interval) as memory:
        start = time.perf_counter()
        executor.run()
        seconds = time.perf_counter() - start
    return {
        "seconds": round(seconds, 3),
        "tasks": tasks,
        "workers": min(workers, tasks),
        "peak_tree_rss_mb": round(memory.peak_tree / 2**20, 1),
        "peak_process_rss_mb": round(memory.peak_process / 2**20, 1),
        "steps": step_stats(logging_dir),
    }


def _shards(folder: Path) -> int:
    return len(list(folder.glob("*.jsonl.gz"))) if folder.exists() else 0


def run(args: argparse.Namespace) -> dict[str, Any]:
    from datatrove.pipeline.dedup import (
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.dedup.minhash import MinhashDedupBuckets
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.tokens import DocumentTokenizer, TokensCounter
    from datatrove.pipeline.writers.jsonl import JsonlWriter

    work = args.work_dir.resolve()
    for sub in ("filtered", "minhash", "deduped", "tokens", "logs"):
        shutil.rmtree(work / sub, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    files = sorted(args.input_dir.glob(args.glob))
    if not files:
        raise SystemExit(f"no {args.glob} in {args.input_dir}")
    tasks = args.tasks or len(files)
    config = minhash_config()
    filtered, deduped, tokens_dir = work / "filtered", work / "deduped", work / "tokens"
    signatures, buckets, remove_ids = (work / "minhash" / d for d in ("sigs", "buckets", "ids"))
    stages: dict[str, dict[str, Any]] = {}
    total_start = time.perf_counter()

    def stage(name: str, pipeline: list[Any], n_tasks: int) -> dict[str, Any]:
        print(f"[datatrove_pipeline] stage {name}: {n_tasks} tasks", file=sys.stderr, flush=True)
        stages[name] = run_stage(name, pipeline, n_tasks, args.workers, work, args.sample_interval)
        return stages[name]

    stage("filter", filter_pipeline(args, filtered), tasks)
    shard_tasks = max(1, _shards(filtered))

    def reader(folder: Path) -> Any:
        return JsonlReader(str(folder), glob_pattern="*.jsonl.gz")

    stage(
        "minhash_signatures",
        [reader(filtered), MinhashDedupSignature(output_folder=str(signatures), config=config)],
        shard_tasks,
    )
    stage(
        "minhash_buckets",
        [
            MinhashDedupBuckets(
                input_folder=str(signatures), output_folder=str(buckets), config=config
            )
        ],
        config.num_buckets,
    )
    stage(
        "minhash_cluster",
        [
            MinhashDedupCluster(
                input_folder=str(buckets), output_folder=str(remove_ids), config=config
            )
        ],
        1,
    )
    stage(
        "minhash_filter",
        [
            reader(filtered),
            TokensCounter(tokenizer_name_or_path=str(args.tokenizer)),
            MinhashDedupFilter(input_folder=str(remove_ids)),
            JsonlWriter(str(deduped)),
        ],
        shard_tasks,
    )
    stage(
        "tokenize",
        [
            reader(deduped),
            DocumentTokenizer(
                output_folder=str(tokens_dir),
                tokenizer_name_or_path=str(args.tokenizer),
                eos_token=args.eos_token,
            ),
        ],
        max(1, _shards(deduped)),
    )
    total_seconds = time.perf_counter() - total_start

    first = stages["filter"]["steps"]
    dedup = stages["minhash_filter"]["steps"]
    tok = stages["tokenize"]["steps"]
    docs_in = _count(first, 0, "documents")  # WarcReader
    docs_filtered = _count(first, -1, "total")  # JsonlWriter
    docs_deduped = _count(dedup, -1, "total")  # JsonlWriter
    tokens_out = _count(tok, -1, "tokens")  # DocumentTokenizer (with an EOS per document)
    return {
        "system": "datatrove",
        "workers": args.workers,
        "tasks": tasks,
        "files": len(files),
        "url_filter": args.url_filter,
        "trafilatura_timeout": args.timeout,
        "total_seconds": round(total_seconds, 3),
        "docs_in": docs_in,
        "docs_after_filter": docs_filtered,
        "docs_out": docs_deduped,
        "docs_removed_by_dedup": docs_filtered - docs_deduped,
        "tokens_before_dedup": _count(dedup, 1, "tokens"),  # TokensCounter (no EOS)
        "tokens_out": tokens_out,
        "docs_per_second": round(docs_in / total_seconds, 2) if total_seconds else None,
        "peak_tree_rss_mb": max(s["peak_tree_rss_mb"] for s in stages.values()),
        "peak_process_rss_mb": max(s["peak_process_rss_mb"] for s in stages.values()),
        "stage_seconds": {name: s["seconds"] for name, s in stages.items()},
        "stages": stages,
        "token_files": sorted(p.name for p in tokens_dir.glob("*.ds")),
        "lid_model": str(args.lid_model.resolve()),
        "tokenizer": str(args.tokenizer),
        "versions": _versions(),
    }


def _versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0]}
    for name in (
        "datatrove",
        "trafilatura",
        "lxml",
        "warcio",
        "fasttext-numpy2-wheel",
        "tokenizers",
        "xxhash",
        "spacy",
        "nltk",
        "tldextract",
    ):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            pass
    return out


def main(argv: list[str] | None = None) -> int:
    result = run(parse_args(argv))
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
