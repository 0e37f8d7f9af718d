"""Read + extract throughput: the project's `documents` stage against datatrove 0.10.

    .venv/bin/python benchmarks/extraction.py [--records 5000] [--repeats 3]

1. Builds (or reuses) a seeded corpus of WARC HTML response records from the real pages in
   shared/data (``benchmarks/corpus.py``) under ``benchmarks/.work/corpus-<records>/``.
2. Runs our documents stage (``benchmarks/ours_extract.py``, project venv) and datatrove's
   WarcReader -> Trafilatura(favour_precision=True) -> JsonlWriter
   (``benchmarks/datatrove_extract.py``, in ``benchmarks/.venv-datatrove``, created here if
   missing) with 1 and 2 workers, each run a fresh subprocess on a fresh output folder, one task
   per WARC file for both.
3. Prints one markdown table (and writes it to ``benchmarks/results/extraction.md``).

Wall time is measured inside each subprocess around the pipeline call (interpreter start and
imports excluded; worker start-up included); the process's whole life is reported too. Peak
memory is the peak of the summed RSS (and PSS) of the subprocess's whole process tree, sampled
from /proc every 0.1 s (``benchmarks/measure.py``).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.corpus import DEFAULT_RATE, DEFAULT_SEED, CorpusInfo, build_corpus  # noqa: E402
from benchmarks.measure import Measured, run_measured  # noqa: E402

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
WORK_DIR = BENCH_DIR / ".work"
DT_VENV = BENCH_DIR / ".venv-datatrove"
DT_REQUIREMENTS = [
    "datatrove[processing,io]==0.10.*",
    "spacy",
    "aiohttp",
    # trafilatura 1.11's justext imports lxml.html.clean, split out of lxml 5.2+.
    "lxml_html_clean",
]
DT_IMPORT_CHECK = (
    "import datatrove, trafilatura, spacy, aiohttp, lxml.html.clean, warcio, cchardet, magic;"
    "from datatrove.pipeline.extractors import Trafilatura"
)
IMPLEMENTATIONS = ("ours", "datatrove")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- datatrove venv


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _venv_ready(venv: Path) -> bool:
    python = _venv_python(venv)
    if not python.exists():
        return False
    check = subprocess.run([str(python), "-c", DT_IMPORT_CHECK], capture_output=True)
    return check.returncode == 0


def ensure_datatrove_venv(venv: Path = DT_VENV) -> Path:
    """``venv``'s python, creating the venv and installing datatrove there if needed."""
    if _venv_ready(venv):
        return _venv_python(venv)
    base = shutil.which("python3") or sys.executable
    if not _venv_python(venv).exists():
        log(f"creating {venv} with {base}")
        subprocess.run([base, "-m", "venv", str(venv)], check=True)
    log(f"installing {' '.join(DT_REQUIREMENTS)} into {venv}")
    pip = [str(_venv_python(venv)), "-m", "pip", "install", "--quiet"]
    subprocess.run(pip + DT_REQUIREMENTS, check=True)
    if not _venv_ready(venv):
        raise RuntimeError(f"datatrove venv {venv} still fails: {DT_IMPORT_CHECK}")
    return _venv_python(venv)


# --------------------------------------------------------------------------- runs


@dataclass
class RunSpec:
    impl: str
    workers: int


@dataclass
class RunResults:
    """All repeats of one (implementation, workers) pair."""

    spec: RunSpec
    runs: list[Measured] = field(default_factory=list)

    @property
    def ok_runs(self) -> list[Measured]:
        return [m for m in self.runs if m.ok]

    def median(self, key: str) -> float:
        return statistics.median(float(m.result[key]) for m in self.ok_runs)  # type: ignore[index]

    @property
    def wall(self) -> float:
        return self.median("seconds")

    @property
    def process_wall(self) -> float:
        return statistics.median(m.wall_seconds for m in self.ok_runs)

    @property
    def last(self) -> dict[str, Any]:
        return self.ok_runs[-1].result or {}

    @property
    def peak_rss_mb(self) -> float:
        return max(m.peak_rss_bytes for m in self.ok_runs) / 2**20

    @property
    def peak_pss_mb(self) -> float:
        return max(m.peak_pss_bytes for m in self.ok_runs) / 2**20

    @property
    def cpu(self) -> float:
        return statistics.median(m.cpu_seconds for m in self.ok_runs)

    @property
    def other_load(self) -> float:
        return statistics.median(m.other_load for m in self.ok_runs)


def command_for(
    spec: RunSpec, corpus: CorpusInfo, out_dir: Path, dt_python: Path | None, dt_timeout: float
) -> list[str]:
    common = [
        "--input-dir",
        str(corpus.directory),
        "--glob",
        "*.warc.gz",
        "--output-dir",
        str(out_dir),
        "--workers",
        str(spec.workers),
    ]
    if spec.impl == "ours":
        return [sys.executable, str(BENCH_DIR / "ours_extract.py"), *common]
    assert dt_python is not None
    return [
        str(dt_python),
        str(BENCH_DIR / "datatrove_extract.py"),
        *common,
        "--timeout",
        str(dt_timeout),
    ]


def run_one(
    spec: RunSpec, repeat: int, corpus: CorpusInfo, dt_python: Path | None, dt_timeout: float
) -> Measured:
    name = f"{spec.impl}-w{spec.workers}-r{repeat}"
    out_dir = WORK_DIR / "runs" / name
    shutil.rmtree(out_dir, ignore_errors=True)
    (WORK_DIR / "logs").mkdir(parents=True, exist_ok=True)
    cmd = command_for(spec, corpus, out_dir, dt_python, dt_timeout)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    measured = run_measured(cmd, WORK_DIR / "logs" / name, cwd=REPO_ROOT, env=env)
    shutil.rmtree(out_dir, ignore_errors=True)
    if measured.ok:
        res = measured.result or {}
        log(
            f"{name}: {res['seconds']:.1f} s, {res['records_in']} in, {res['docs_out']} out, "
            f"CPU {measured.cpu_seconds:.0f} s, peak RSS {measured.peak_rss_bytes / 2**20:.0f} MB, "
            f"others' load {measured.other_load:.2f} cores"
        )
    else:
        log(f"{name}: FAILED (exit {measured.returncode}); see {measured.log_path}")
    return measured


def run_all(
    specs: list[RunSpec],
    repeats: int,
    corpus: CorpusInfo,
    dt_python: Path | None,
    dt_timeout: float,
) -> list[RunResults]:
    """Repeats interleaved (r1 of every spec, then r2, ...) so machine noise spreads evenly."""
    results = [RunResults(spec) for spec in specs]
    for repeat in range(1, repeats + 1):
        for res in results:
            res.runs.append(run_one(res.spec, repeat, corpus, dt_python, dt_timeout))
    return results


# --------------------------------------------------------------------------- report


def _label(spec: RunSpec) -> str:
    return f"{spec.impl}, {spec.workers} worker{'s' if spec.workers > 1 else ''}"


def _ratio(res: RunResults, results: list[RunResults]) -> str:
    if res.spec.impl != "ours":
        return "1.00" if res.ok_runs else "-"
    other = next(
        (
            r
            for r in results
            if r.spec.impl == "datatrove" and r.spec.workers == res.spec.workers and r.ok_runs
        ),
        None,
    )
    return f"{other.wall / res.wall:.2f}" if other and res.ok_runs else "-"


TABLE_COLUMNS = (
    "run",
    "records in",
    "documents out",
    "wall s (median of {repeats})",
    "process s",
    "CPU s",
    "documents/s",
    "documents per CPU s",
    "MB/s of WARC input",
    "peak RSS MB",
    "peak PSS MB",
    "others' load, cores",
    "speed ours/datatrove",
)


def _row(res: RunResults, results: list[RunResults], warc_mb: float) -> list[str]:
    wall, cpu, last = res.wall, res.cpu, res.last
    return [
        _label(res.spec),
        str(last["records_in"]),
        str(last["docs_out"]),
        f"{wall:.1f}",
        f"{res.process_wall:.1f}",
        f"{cpu:.0f}",
        f"{last['docs_out'] / wall:.1f}",
        f"{last['docs_out'] / cpu:.1f}",
        f"{warc_mb / wall:.2f}",
        f"{res.peak_rss_mb:.0f}",
        f"{res.peak_pss_mb:.0f}",
        f"{res.other_load:.2f}",
        _ratio(res, results),
    ]


def table(results: list[RunResults], corpus: CorpusInfo, repeats: int) -> str:
    head = [c.format(repeats=repeats) for c in TABLE_COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for res in results:
        if res.ok_runs:
            cells = _row(res, results, corpus.warc_bytes / 1e6)
        else:
            cells = [_label(res.spec), "failed"] + [""] * (len(head) - 2)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


TABLE_NOTE = """\
wall s: median pipeline time measured inside the subprocess (imports excluded, worker start-up
included); process s: the subprocess's whole life; CPU s: user + system time of its whole process
tree. records in and documents out are the last repeat's (datatrove's output varies by a few
documents: its 1 s timeout drops more pages when the machine is busy). documents/s = documents
out / wall; MB/s = WARC.gz bytes on disk / wall. Peak RSS/PSS: the
highest sum over the subprocess's process tree, sampled from /proc every 0.1 s, max over repeats.
others' load: cores kept busy by other processes on this shared machine during the run (machine
busy time from /proc/stat minus the run's and the sampler's CPU time, / wall). speed
ours/datatrove = datatrove wall / ours wall at the same worker count (> 1: ours is faster)."""

DATATROVE_SETTINGS = """\
- datatrove: `WarcReader(glob_pattern='*.warc.gz')` -> `Trafilatura(favour_precision=True,
  deduplicate=True, timeout={timeout:g})` (include_comments=False; the call in FineWeb's
  `examples/fineweb.py`, whose other arguments are datatrove 0.10.1's defaults: timeout 1 s per
  document, extraction in a sandbox subprocess per task) -> `JsonlWriter` (gzip);
  `LocalPipelineExecutor(tasks=<number of files>, workers=N)` (forkserver pool)"""


def _duplicate_line(dup: dict[str, Any]) -> str:
    return (
        "- duplicate rate (records sharing > 50% of their word 5-grams with another record): "
        f"{dup['rate']:.2%} ({dup['duplicate_records']} records); max containment "
        f"{dup['max_containment']:.3f}; two copies of the same page share a median "
        f"{dup['same_page_median_containment']:.3f} (max "
        f"{dup['same_page_max_containment']:.3f}) of their 5-grams; {dup['pairs_checked']} "
        "pairs checked exactly (every same-page pair, plus "
        f"{dup['cross_page_candidates']} cross-page MinHash-LSH candidates)"
    )


def corpus_facts(corpus: CorpusInfo) -> str:
    m = corpus.manifest
    langs = m.get("languages") or {}
    lang_text = ", ".join(f"{k} {v / corpus.records:.1%}" for k, v in list(langs.items())[:8])
    origins = ", ".join(f"{k} {v}" for k, v in m["source_origins"].items())
    charsets = ", ".join(f"{k} {v}" for k, v in m["source_charsets"].items())
    return "\n".join(
        [
            f"- records: {corpus.records} HTML responses (+ one request record each, one "
            f"warcinfo per file) in {len(m['files'])} per-record-gzip WARC/1.0 files, seed "
            f"{m['seed']}, {m['substitution_rate']:.0%} of text-node words substituted per copy",
            f"- size: {corpus.warc_bytes / 1e6:.1f} MB of WARC.gz on disk, "
            f"{m['html_bytes'] / 1e6:.1f} MB of HTML payload "
            f"({m['html_bytes'] / corpus.records / 1e3:.0f} KB a page)",
            f"- made from {m['source_pages']} real pages: {origins}",
            f"- source charsets (decoded, re-encoded as UTF-8): {charsets}",
            _duplicate_line(m["duplicates"]),
            f"- language mix (fastText lid.176 on visible text): {lang_text or 'unavailable'}",
        ]
    )


def details(results: list[RunResults]) -> str:
    lines = []
    for res in results:
        if not res.ok_runs:
            continue
        last = res.last
        kind, extra = (
            ("rejects", last.get("rejects"))
            if res.spec.impl == "ours"
            else ("extractor stats", last.get("extractor"))
        )
        lines.append(f"- {_label(res.spec)}: versions {last.get('versions')}; {kind} {extra}")
    return "\n".join(lines)


def settings_text(results: list[RunResults], dt_timeout: float) -> str:
    ours = next((r.last for r in results if r.spec.impl == "ours" and r.ok_runs), {})
    return "\n".join(
        [
            f"- ours: `DocumentsSettings()` defaults: {ours.get('settings', 'n/a')}",
            DATATROVE_SETTINGS.format(timeout=dt_timeout),
        ]
    )


def report(
    results: list[RunResults],
    corpus: CorpusInfo,
    args: argparse.Namespace,
    load_before: tuple[float, ...],
) -> str:
    load_after = os.getloadavg()
    header = (
        f"Command: `.venv/bin/python benchmarks/extraction.py --records {args.records} "
        f"--repeats {args.repeats}` on {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} "
        f"cores, Python {platform.python_version()}; load average {load_before[0]:.2f} before, "
        f"{load_after[0]:.2f} after (shared, noisy machine)."
    )
    sections = [
        "# Extraction throughput: ours vs datatrove",
        header,
        table(results, corpus, args.repeats),
        TABLE_NOTE,
        "## Corpus\n\n" + corpus_facts(corpus),
        "## Settings\n\n" + settings_text(results, args.datatrove_timeout),
        "## Run details\n\n" + details(results),
    ]
    return "\n\n".join(sections) + "\n"


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5000, help="HTML records in the corpus")
    parser.add_argument("--repeats", type=int, default=3, help="runs per row (median reported)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--only", choices=IMPLEMENTATIONS, help="run one side only")
    parser.add_argument(
        "--datatrove-timeout",
        type=float,
        default=1.0,
        help="datatrove's per-document extraction timeout (its default: 1 s)",
    )
    parser.add_argument("--results", type=Path, default=BENCH_DIR / "results" / "extraction.md")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    load_before = os.getloadavg()
    corpus = build_corpus(
        WORK_DIR, records=args.records, seed=args.seed, rate=DEFAULT_RATE, log=log
    )
    impls = [args.only] if args.only else list(IMPLEMENTATIONS)
    dt_python = ensure_datatrove_venv() if "datatrove" in impls else None
    specs = [RunSpec(impl, w) for impl in impls for w in args.workers]
    results = run_all(specs, args.repeats, corpus, dt_python, args.datatrove_timeout)
    text = report(results, corpus, args, load_before)
    print(text)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(text)
    log(f"wrote {args.results}")
    return 0 if all(r.ok_runs for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
