"""Our side of `benchmarks/compare.py`: the recipe as this project's Dagster assets.

Started as a fresh subprocess of the project's venv (so its peak memory is its own process tree).
Writes a `pipeline.yaml` and a recipe for one snapshot of WARC files, then, by `--mode`:

- ``graph``: the main jobs `per_snapshot`, `models`, `scores` and `dataset` on a temporary Dagster
  instance, exactly as `corpus backfill` runs them (every asset check included), and reads each
  step's duration from the instance's event log;
- ``direct``: the per-snapshot kernels called in the assets' order without Dagster (no
  instance, no checks), the baseline for Dagster's own overhead;
- ``assets``: the same per-snapshot assets as one Dagster job without their checks, the other side
  of that comparison.

The recipe is FineWeb's as `benchmarks/datatrove_pipeline.py` runs it: trafilatura with
FineWeb's precision settings (or `--extractor`), lid.176 English at 0.65, Gopher repetition and
quality, C4 (no terminal-punctuation line rule, as FineWeb), FineWeb's rules, MinHash with 14
bands of 8 over word 5-grams, GPT-2 tokens. This project also does more than that recipe on the
way (URL and exact dedup, boilerplate lines, PII scrubbing, the funnel report); those steps run
and are counted in the end-to-end time. The last stdout line is ``RESULT {json}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

SNAPSHOT = "BENCH"
RECIPE = "bench"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input-dir", type=Path, required=True)
    parser.add_argument("--work-dir", type=Path, required=True, help="emptied first")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--mode", choices=("graph", "direct", "assets"), default="graph")
    parser.add_argument("--extractor", default="trafilatura")
    parser.add_argument("--tokenizer", type=Path,
                        default=Path(__file__).resolve().parents[2] / "shared" / "data"
                        / "tokenizers/gpt2/tokenizer.json")
    return parser.parse_args(argv)


def write_config(work: Path, input_dir: Path, extractor: str, tokenizer: Path) -> Path:
    pipeline = work / "pipeline.yaml"
    (work / "recipes").mkdir(parents=True)
    pipeline.write_text(f"""version: 1
snapshots:
  {SNAPSHOT}:
    warc: {{path: {input_dir}}}
documents:
  extractor: {extractor}
  trafilatura: {{favor_precision: true, include_comments: false, deduplicate: true}}
  languages: [en]
  survival: {{min: 0.0, max: 1.0}}
language:
  languages: [en]
  threshold: 0.65
  max_drift: 1.0
heuristics:                      # FineWeb's: C4 without its terminal-punctuation line rule,
  english_only_languages: [en]    # and no bad-words filter (datatrove's example has none)
  c4: {{enabled: true, filter_no_terminal_punct: false}}
  bad_words: {{enabled: false}}
dedup:
  minhash: {{ngram: 5, bands: 14, rows: 8, seed: 1}}
gates:
  heuristics_keep: {{min: 0.0, max: 1.0}}
  max_duplicate_rate: 1.0
""")
    (work / "recipes" / f"{RECIPE}.yaml").write_text(f"""name: {RECIPE}
snapshots: [{SNAPSHOT}]
selection: {{languages: [en], drop_contaminated: false}}
phases:
  - {{name: main, fraction: 1.0, weights: {{web: 1.0}}}}
max_epochs: 1
tokenizer: {{path: {tokenizer}}}
seq_len: 2048
seed: 1
""")
    return pipeline


def _step_windows(instance: Any, run_id: str) -> dict[str, list[float]]:
    """Each step's [start, end] in epoch seconds, from the event log."""
    from dagster import DagsterEventType

    windows: dict[str, list[float]] = {}
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event is None or event.step_key is None:
            continue
        if event.event_type == DagsterEventType.STEP_START:
            windows[event.step_key] = [record.timestamp, record.timestamp]
        elif event.event_type in (DagsterEventType.STEP_SUCCESS, DagsterEventType.STEP_FAILURE):
            windows[event.step_key][1] = record.timestamp
    return windows


def _seconds(windows: dict[str, list[float]]) -> dict[str, float]:
    return {step: end - start for step, (start, end) in windows.items()}


def run_graph(pipeline: Path, root: Path, workers: int, home: Path) -> dict[str, Any]:
    from dagster import instance_for_test

    from corpus_assets.definitions import defs
    from corpus_assets.main_job import main_run_config
    from partitions import RECIPE_PARTITIONS_NAME, SNAPSHOT_PARTITIONS_NAME

    run_config = main_run_config(str(pipeline), str(root), workers, log_level="WARNING")
    windows: dict[str, list[float]] = {}
    jobs: dict[str, float] = {}
    home.mkdir(parents=True)
    with instance_for_test(temp_dir=str(home)) as instance:
        instance.add_dynamic_partitions(SNAPSHOT_PARTITIONS_NAME, [SNAPSHOT])
        instance.add_dynamic_partitions(RECIPE_PARTITIONS_NAME, [RECIPE])
        started = time.perf_counter()
        for name, partition in (("per_snapshot", SNAPSHOT), ("models", None),
                                ("scores", SNAPSHOT), ("dataset", RECIPE)):
            job_started = time.perf_counter()
            job = defs.resolve_job_def(name)
            # FineWeb's recipe has no quality classifier: its two assets are left out.
            selection = [key for key in job.asset_layer.executable_asset_keys
                         if key.to_user_string() not in ("quality_classifier", "quality_scores")]
            result = job.execute_in_process(
                partition_key=partition, instance=instance, run_config=run_config,
                asset_selection=selection, raise_on_error=True)
            jobs[name] = time.perf_counter() - job_started
            windows.update(_step_windows(instance, result.run_id))
        total = time.perf_counter() - started
    return {"seconds": total, "job_seconds": jobs, "step_seconds": _seconds(windows),
            "step_windows": windows}


def run_direct(pipeline_path: Path, root: Path, workers: int) -> dict[str, Any]:
    """The per-snapshot assets' kernel calls, in their order, without Dagster."""
    from curation.config import load_pipeline
    from curation.inputs import describe, input_files_table, list_locations
    from curation.partition import Manifest, PartitionLayout
    from curation.schema import WEB_SOURCE
    from curation.stages.base import DocumentsInput
    from curation.stages.dedup import EXACT, LINES, NEAR, URL, run_partition_dedup
    from curation.stages.documents import run_documents, run_version
    from curation.stages.heuristics import run_heuristics
    from curation.stages.language import run_language
    from curation.stages.scrubbed import run_scrubbed
    from curation.storage import InputReader, open_store

    config = load_pipeline(pipeline_path)
    store = open_store(str(root))
    reader = InputReader()
    seconds: dict[str, float] = {}
    started = time.perf_counter()

    def timed(name: str, call: Any) -> Any:
        begin = time.perf_counter()
        out = call()
        seconds[name] = time.perf_counter() - begin
        return out

    def list_files() -> tuple[list[str], list[str]]:
        files = [describe(location, reader) for location in list_locations(config, SNAPSHOT,
                                                                           reader)]
        layout = PartitionLayout(store, "warc_files", SNAPSHOT)
        layout.write_part(0, input_files_table(files))
        layout.write_manifest(Manifest("warc_files", SNAPSHOT, "direct", []))
        return [file.location for file in files], [file.sha256 for file in files]

    locations, hashes = timed("warc_files", list_files)
    entry = config.partition_entry(SNAPSHOT)
    version = run_version(config.documents, locations, entry, hashes)
    timed("documents", lambda: run_documents(SNAPSHOT, locations, store, config.documents,
                                             workers, reader=reader, source=WEB_SOURCE,
                                             version=version))
    documents = DocumentsInput(store, SNAPSHOT)
    timed("language", lambda: run_language(documents, config.language, workers))
    timed("heuristics", lambda: run_heuristics(documents, config.heuristics,
                                               config.dedup.minhash, workers))

    def upstream(*names: str) -> dict[str, str]:
        return {name: PartitionLayout(store, name, SNAPSHOT).complete_manifest().data_version
                for name in names}

    for stage, names in ((URL, ()), (EXACT, ()), (NEAR, ("minhash_signatures",)), (LINES, ())):
        timed(stage, lambda stage=stage, names=names: run_partition_dedup(
            documents, stage, config.dedup, upstream(*names)))
    timed("scrubbed", lambda: run_scrubbed(documents, config.pii, workers))
    return {"seconds": time.perf_counter() - started, "step_seconds": seconds}


def run_assets(pipeline: Path, root: Path, workers: int, home: Path) -> dict[str, Any]:
    """The per-snapshot assets as one job without their checks."""
    from dagster import AssetSelection, Definitions, define_asset_job, instance_for_test

    from corpus_assets.definitions import defs
    from corpus_assets.main_job import main_run_config
    from partitions import SNAPSHOT_PARTITIONS_NAME

    selection = AssetSelection.groups("ingest", "signals", "dedup", "scrub").without_checks()
    job = define_asset_job("per_snapshot_assets", selection=selection)
    job_def = Definitions.merge(defs, Definitions(jobs=[job])).resolve_job_def(
        "per_snapshot_assets")
    home.mkdir(parents=True)
    with instance_for_test(temp_dir=str(home)) as instance:
        instance.add_dynamic_partitions(SNAPSHOT_PARTITIONS_NAME, [SNAPSHOT])
        started = time.perf_counter()
        result = job_def.execute_in_process(
            partition_key=SNAPSHOT, instance=instance, raise_on_error=True,
            run_config=main_run_config(str(pipeline), str(root), workers, log_level="WARNING"))
        total = time.perf_counter() - started
        windows = _step_windows(instance, result.run_id)
    return {"seconds": total, "step_seconds": _seconds(windows), "step_windows": windows}


def counts(root: Path) -> dict[str, Any]:
    """Documents in and out and tokens out, read from the stored outputs."""
    from curation.partition import PartitionLayout
    from curation.storage import open_store

    store = open_store(str(root))
    out: dict[str, Any] = {}
    documents = PartitionLayout(store, "documents", SNAPSHOT).complete_manifest()
    stats = documents.extra["stats"]
    out["docs_in"] = stats["candidates"]
    out["docs_extracted"] = stats["docs_out"]
    out["documents_rejects"] = stats.get("rejects", {})
    for stage in ("language", "heuristics"):
        layout = PartitionLayout(store, stage, SNAPSHOT)
        if layout.is_complete():
            out[f"{stage}_stats"] = layout.complete_manifest().extra.get("stats", {})
    mix = PartitionLayout(store, "mix", RECIPE)
    if mix.is_complete():
        extra = mix.complete_manifest().extra
        out["docs_out"] = extra["selected"]
        out["selection_funnel"] = extra["funnel"]
        shards = PartitionLayout(store, "shards", RECIPE).complete_manifest()
        totals = json.loads(store.read_bytes(f"shards/{shards.version}/manifest.json"))["totals"]
        out["tokens_out"] = totals["tokens"]
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import shutil

    if args.work_dir.exists():
        shutil.rmtree(args.work_dir)
    args.work_dir.mkdir(parents=True)
    pipeline = write_config(args.work_dir, args.input_dir.resolve(), args.extractor,
                            args.tokenizer)
    root = args.work_dir / "data"
    if args.mode == "graph":
        result = run_graph(pipeline, root, args.workers, args.work_dir / "home")
    elif args.mode == "assets":
        result = run_assets(pipeline, root, args.workers, args.work_dir / "home")
    else:
        result = run_direct(pipeline, root, args.workers)
    result.update(counts(root), mode=args.mode, workers=args.workers, extractor=args.extractor)
    print("RESULT " + json.dumps(result, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

