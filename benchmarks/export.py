"""Export throughput and memory: `export_dataset` in each format as the dataset version grows.

    .venv/bin/python benchmarks/export.py [--documents 20000 100000 400000]
        [--formats hf-parquet mds nanogpt] [--memory-gb 1.0] [--no-rescan]
        [--rescan-max-documents 100000] [--json FILE]
        [--markdown benchmarks/results/export.md]

Method:

1. A store per size, in the project's layout under ``benchmarks/.work/export/`` (reused while
   its settings are the same), written through `PartitionLayout` (`prepare`, `write_part`,
   `write_manifest`) so `curation.stages.export.export_dataset` runs unchanged on it:
   - ``documents[SYN-01]`` (`doc_id`, `url`, `snapshot`: what the export joins for lineage) and
     ``scrubbed[SYN-01]`` (`doc_id`, `text`), parts of `PART_DOCUMENTS` documents; the texts are
     `benchmarks.synthetic`'s (Zipf pseudo-words, log-normal lengths: median ~330 words, mean
     ~550, a tail of books);
   - ``mix[bench]`` (`curation.mix.OCCURRENCE_SCHEMA`): one occurrence a document, every
     seventh twice and every 29th once more, every tenth in the second phase (`anneal`);
     `est_tokens` is exact for the tokenizer: one token a word plus EOS;
   - the shards, built by the project's own builder (`shards_version`, then
     `build_dataset_shards` with two worker processes: the plan, the range tasks, the
     manifest), which points ``shards[bench]`` at the dataset version; the tokenizer is
     `benchmarks.loader_throughput.word_tokenizer` (one token a word, GPT-2's 50,257 ids, so
     `uint16`), pinned in the recipe by its ``tokenizer.json``. The recipe is the smallest valid
     one: one snapshot, two phases, ``seq_len`` 2048, the default ``tokens_per_shard`` (2**26).
2. Each (size, format) export runs in a fresh process under ``CORPUS_MEMORY_GB=--memory-gb``,
   measured by `benchmarks.measure.run_measured` (wall, CPU and the peak summed RSS of the
   process tree, sampled every 0.1 s), with `ExportSettings()` (100,000 rows a Parquet file,
   64 MiB MDS shards). The pipeline declares no decontamination benchmark, so the card's re-scan
   is skipped; ``hf-parquet + re-scan`` is the same export with ``sample_eval`` declared (the
   built-in sample's eval set, `data/sample/evals/sample_eval.jsonl`, made by
   `scripts/setup.sh`; skipped when absent or with ``--no-rescan``), which scans every
   document's first occurrence with the mix gate's `ResidualMatcher`: at sizes up to
   ``--rescan-max-documents`` (100,000; it scans about 6 MB of text a second here, so
   400,000 documents would add 5 minutes).
3. Per row: documents, occurrences (rows written; nanoGPT writes sequences), the text's MB
   (UTF-8 of every occurrence, what the text formats write), wall and CPU seconds, occurrences
   and text MB per second, tokens per second (nanoGPT: tokens written), peak RSS, the
   microseconds of wall time per document; then per format the peak RSS and the time per
   document at the largest size over the smallest. The export's output is removed after each
   run. The default sizes take about 7 minutes on 2 shared cores, 4 of them building the
   stores (reused while their settings are the same: then 3 minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import synthetic  # noqa: E402
from benchmarks.measure import Measured, run_child  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
WORK = REPO / "benchmarks" / ".work" / "export"
RESULTS = REPO / "benchmarks" / "results" / "export.md"
EVALS = REPO / "data" / "sample" / "evals" / "sample_eval.jsonl"
RECIPE = "bench"
SNAPSHOT = "SYN-01"
PHASES = ("main", "anneal")
SEED = 24  # benchmarks.loader_throughput.SEED: its word tokenizer covers these texts' words
PART_DOCUMENTS = 25_000
BUILD_WORKERS = 2
FORMATS = ("hf-parquet", "mds", "nanogpt")
RESCAN = "hf-parquet + re-scan"
STORE_VERSION = 1  # bump when what a store holds changes, so an old one is rebuilt

PIPELINE = """version: 1
snapshots:
  {snapshot}: {{warc: {{path: warcs/}}}}
decontamination: {{benchmarks: {benchmarks}}}
"""
RECIPE_YAML = """name: {name}
snapshots: [{snapshot}]
phases:
  - {{name: main, fraction: 0.9, weights: {{web: 1.0}}}}
  - {{name: anneal, fraction: 0.1, weights: {{web: 1.0}}}}
tokenizer: {{path: ../tokenizer.json}}
seq_len: 2048
seed: {seed}
"""


# --- the store ---------------------------------------------------------------------------------


def _configs(folder: Path) -> None:
    """`tokenizer.json`, `plain/pipeline.yaml` (no eval set) and `rescan/pipeline.yaml`
    (`sample_eval`), each with `recipes/bench.yaml`."""
    from benchmarks.loader_throughput import word_tokenizer

    (folder / "tokenizer.json").write_bytes(word_tokenizer(50_257).tokenizer.to_str().encode())
    evals = f"[{{name: sample_eval, path: {EVALS}, layout: query_choices_gold}}]"
    for name, benchmarks in (("plain", "[]"), ("rescan", evals)):
        (folder / name / "recipes").mkdir(parents=True, exist_ok=True)
        (folder / name / "pipeline.yaml").write_text(
            PIPELINE.format(snapshot=SNAPSHOT, benchmarks=benchmarks))
        (folder / name / "recipes" / f"{RECIPE}.yaml").write_text(
            RECIPE_YAML.format(name=RECIPE, snapshot=SNAPSHOT, seed=SEED).replace(
                "../tokenizer.json", str(folder / "tokenizer.json")))


def _load(folder: Path, variant: str) -> tuple[Any, Any]:
    from curation.config import load_pipeline, load_recipe

    pipeline = load_pipeline(folder / variant / "pipeline.yaml")
    return pipeline, load_recipe(folder / variant / "recipes" / f"{RECIPE}.yaml", pipeline)


def _occurrences(numbers: np.ndarray, words: np.ndarray) -> pa.Table:
    """One occurrence a document, every seventh twice and every 29th once more; every tenth
    document in `anneal`; one token a word plus EOS."""
    from benchmarks.synthetic import doc_ids
    from curation.mix import OCCURRENCE_SCHEMA

    copies = 1 + (numbers % 7 == 0) + (numbers % 29 == 0)
    owner = np.repeat(np.arange(numbers.size), copies)
    occurrence = np.arange(owner.size) - np.repeat(np.cumsum(copies) - copies, copies)
    rows = owner.size
    return pa.table({
        "doc_id": doc_ids(numbers[owner]), "partition": pa.array([SNAPSHOT] * rows),
        "source": pa.array(["web"] * rows), "licence": pa.nulls(rows, pa.string()),
        "phase": pa.array(np.array(PHASES)[(numbers[owner] % 10 == 0).astype(int)]),
        "occurrence": pa.array(occurrence.astype(np.int64)),
        "est_tokens": pa.array((words[owner] + 1).astype(np.int64))}, schema=OCCURRENCE_SCHEMA)


def child_build(folder: Path, documents: int) -> dict[str, Any]:
    """Writes the store of `documents` documents under `folder/store` and builds its shards;
    `text_bytes` counts every occurrence's text (what the text formats write)."""
    from curation.graph import DOCUMENTS, MIX, SCRUBBED
    from curation.partition import Manifest, PartitionLayout
    from curation.stages.dataset import build_dataset_shards, shards_version
    from curation.storage import LocalStore
    from curation.takedowns import EMPTY_VERSION
    from curation.tokenizer import load_tokenizer

    start = time.perf_counter()
    _configs(folder)
    pipeline, recipe = _load(folder, "plain")
    store = LocalStore(str(folder / "store"))
    spec = synthetic.Spec(documents=documents, seed=SEED)
    layouts = {asset: PartitionLayout(store, asset, key) for asset, key in (
        (DOCUMENTS, SNAPSHOT), (SCRUBBED, SNAPSHOT), (MIX, RECIPE))}
    for layout in layouts.values():
        layout.prepare("bench")
    parts: dict[str, list] = {asset: [] for asset in layouts}
    text_bytes = 0
    for index, begin in enumerate(range(0, documents, PART_DOCUMENTS)):
        numbers = np.arange(begin, min(begin + PART_DOCUMENTS, documents), dtype=np.int64)
        ids = synthetic.doc_ids(numbers)
        texts = synthetic.texts(numbers, spec)
        words = np.minimum(synthetic.text_words(numbers, spec), synthetic.POOL_WORDS // 2)
        mix = _occurrences(numbers, words)
        sizes = dict(zip(ids.to_pylist(), (len(text.encode()) for text in texts), strict=True))
        text_bytes += sum(sizes[doc_id] for doc_id in mix["doc_id"].to_pylist())
        tables = {
            DOCUMENTS: pa.table({"doc_id": ids, "url": pa.array(
                [f"https://site{n % 5_000}.example/page/{n}" for n in numbers.tolist()]),
                "snapshot": pa.array([SNAPSHOT] * numbers.size)}),
            SCRUBBED: pa.table({"doc_id": ids, "text": pa.array(texts, pa.string())}),
            MIX: mix}
        for asset, table in tables.items():
            parts[asset].append(layouts[asset].write_part(index, table))
    for asset, layout in layouts.items():
        extra = {"takedown_version": EMPTY_VERSION} if asset == MIX else {}
        layout.write_manifest(Manifest(asset, layout.partition, "bench", parts[asset],
                                       extra=extra))
    stored = time.perf_counter() - start
    tokenizer = load_tokenizer(folder / "tokenizer.json")
    info = shards_version(store, RECIPE, recipe, pipeline, tokenizer)
    build = build_dataset_shards(store, RECIPE, recipe, None, tokenizer, info, BUILD_WORKERS)
    totals = build.manifest["totals"]
    return {"documents": documents, "occurrences": int(totals["occurrences"]),
            "tokens": int(totals["tokens"]), "sequences": int(totals["sequences"]),
            "shards": len(build.manifest["shards"]), "dataset_version": build.dataset_version,
            "text_bytes": text_bytes, "store_seconds": stored,
            "seconds": time.perf_counter() - start}


# --- the measured export -----------------------------------------------------------------------


def child_export(folder: Path, fmt: str, variant: str, out: Path) -> dict[str, Any]:
    from curation.stages.export import export_dataset
    from curation.storage import LocalStore

    pipeline, recipe = _load(folder, variant)
    start = time.perf_counter()
    result = export_dataset(LocalStore(str(folder / "store")), RECIPE, recipe, pipeline, fmt,
                            out)
    seconds = time.perf_counter() - start
    return {"rows": result.rows, "tokens": result.tokens, "files": len(result.files),
            "bytes": sum(entry["bytes"] for entry in result.files), "seconds": seconds,
            "self_max_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def child_main(argv: list[str]) -> None:
    if argv[0] == "build":
        result = child_build(Path(argv[1]), int(argv[2]))
    else:
        result = child_export(Path(argv[1]), argv[2], argv[3], Path(argv[4]))
    print("RESULT " + json.dumps(result), flush=True)


# --- the parent --------------------------------------------------------------------------------


def _environment(memory_gb: float) -> dict[str, str]:
    (WORK / "spill").mkdir(parents=True, exist_ok=True)
    return {**os.environ, "TOKENIZERS_PARALLELISM": "false", "RAYON_NUM_THREADS": "1",
            "CORPUS_MEMORY_GB": str(memory_gb), "CORPUS_SPILL_DIR": str(WORK / "spill")}


def _run(args: list[str], log: Path, env: dict[str, str]) -> Measured:
    return run_child(__file__, args, log, REPO, env)


def store_for(documents: int, env: dict[str, str]) -> dict[str, Any]:
    """The store of `documents` documents, built (measured) unless it is there already."""
    folder = WORK / f"n{documents}"
    marker = folder / "store.json"
    if marker.exists():
        built = json.loads(marker.read_text())
        if built.get("store_version") == STORE_VERSION:
            return {**built, "reused": True}
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    print(f"building the store of {documents:,} documents", flush=True)
    measured = _run(["build", str(folder), str(documents)], folder / "build", env)
    built = {**(measured.result or {}), "store_version": STORE_VERSION,
             "build_wall_s": measured.wall_seconds,
             "build_peak_rss_mib": measured.peak_rss_bytes / 2**20}
    marker.write_text(json.dumps(built, indent=1))  # last: a folder with one is complete
    return {**built, "reused": False}


def export_row(documents: int, built: dict[str, Any], fmt: str, env: dict[str, str]
               ) -> dict[str, Any]:
    folder = WORK / f"n{documents}"
    variant = "rescan" if fmt == RESCAN else "plain"
    out = folder / "out"
    shutil.rmtree(out, ignore_errors=True)
    print(f"exporting {documents:,} documents as {fmt}", flush=True)
    measured = _run(["export", str(folder), fmt.split(" ")[0], variant, str(out)],
                    folder / f"export-{fmt.split(' ')[0]}-{variant}", env)
    shutil.rmtree(out, ignore_errors=True)
    result = measured.result or {}
    wall = measured.wall_seconds
    return {"documents": documents, "format": fmt, "occurrences": built["occurrences"],
            "rows": result["rows"], "text_mb": built["text_bytes"] / 1e6,
            "tokens": result["tokens"], "wall_s": wall, "export_s": result["seconds"],
            "cpu_s": measured.cpu_seconds, "occurrences_per_s": built["occurrences"] / wall,
            "text_mb_per_s": built["text_bytes"] / 1e6 / wall,
            "tokens_per_s": result["tokens"] / wall, "us_per_document": wall / documents * 1e6,
            "peak_rss_mib": measured.peak_rss_bytes / 2**20,
            "peak_pss_mib": measured.peak_pss_bytes / 2**20,
            "output_mb": result["bytes"] / 1e6, "files": result["files"],
            "other_load": measured.other_load}


def ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per format, the largest size against the smallest (and against the next largest, where
    there are three sizes or more): peak RSS, wall and wall per document."""
    out = []
    for fmt in dict.fromkeys(row["format"] for row in rows):
        mine = sorted((row for row in rows if row["format"] == fmt),
                      key=lambda row: row["documents"])
        for small in dict.fromkeys([0, len(mine) - 2][:max(0, len(mine) - 1)]):
            small, large = mine[small], mine[-1]
            out.append({"format": fmt, "documents": (small["documents"], large["documents"]),
                        "size_ratio": large["documents"] / small["documents"],
                        "peak_rss_ratio": large["peak_rss_mib"] / small["peak_rss_mib"],
                        "wall_ratio": large["wall_s"] / small["wall_s"],
                        "us_per_document": (small["us_per_document"],
                                            large["us_per_document"])})
    return out


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| documents | format | occurrences | text MB | wall s | CPU s | occurrences/s "
             "| text MB/s | tokens/s | µs/document | peak RSS MiB | other load |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        tokens = f"{row['tokens_per_s']:,.0f}" if row["format"] == "nanogpt" else ""
        lines.append(
            f"| {row['documents']:,} | {row['format']} | {row['occurrences']:,} "
            f"| {row['text_mb']:,.0f} | {row['wall_s']:.1f} | {row['cpu_s']:.1f} "
            f"| {row['occurrences_per_s']:,.0f} | {row['text_mb_per_s']:.1f} | {tokens} "
            f"| {row['us_per_document']:.0f} | {row['peak_rss_mib']:,.0f} "
            f"| {row['other_load']:.1f} |")
    return "\n".join(lines)


def ratio_lines(rows: list[dict[str, Any]]) -> list[str]:
    return [f"- {r['format']}: {r['size_ratio']:.0f}x the documents "
            f"({r['documents'][0]:,} -> {r['documents'][1]:,}): peak RSS "
            f"{r['peak_rss_ratio']:.2f}x, wall {r['wall_ratio']:.1f}x, "
            f"{r['us_per_document'][0]:.0f} -> {r['us_per_document'][1]:.0f} µs a document"
            for r in ratios(rows)]


MEMORY_NOTES = """What holds the memory (`curation/stages/export.py`):

- every format but nanoGPT: the plan (`plan_shards`: DuckDB's sort and join under the budget's
  share), in a session closed before the rows are read; then one bucket of text (a sixteenth
  of the budget) at a time;
- `hf-parquet`: one Parquet row group (`write_parquet_file`: 16,384 rows or 64 MB) beside the
  bucket, whatever `rows_per_file`;
- `mds`: one bucket's rows as Python objects and the open MDS shard (64 MiB);
- `nanogpt`: a block of 4,096 memory-mapped sequences, masked and written, and the cut spans.

Before these (`_chunks` holding whole files, a shard read whole, the plan's session open while
rows were written) the 400,000-document run peaked at 1,986 MiB (`hf-parquet`), 1,109 MiB
(`mds`) and 596 MiB (`nanogpt`) under the same 1 GiB budget."""


def report(rows: list[dict[str, Any]], stores: dict[int, dict[str, Any]],
           args: argparse.Namespace, command: str) -> str:
    from importlib.metadata import version

    stores_lines = [
        f"- {n:,} documents: {s['occurrences']:,} occurrences, {s['tokens']:,} tokens, "
        f"{s['text_bytes'] / 1e6:,.0f} MB of occurrence text, {s['shards']} shard(s) of "
        f"2**26 tokens; store and shards built in {s['build_wall_s']:.0f} s (peak RSS "
        f"{s['build_peak_rss_mib']:,.0f} MiB)" for n, s in stores.items()]
    return "\n".join([
        "# Export: throughput and memory as the dataset grows",
        "",
        f"Command: `{command}` (method: the script's docstring).",
        "",
        f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores (a shared VM: others' load in "
        f"the last column; one run each, so expect noise of 10-20%), Python "
        f"{platform.python_version()}, duckdb {version('duckdb')}, pyarrow {version('pyarrow')};"
        f" `CORPUS_MEMORY_GB={args.memory_gb:g}` (buckets of "
        f"{args.memory_gb * 1024 / 16:.0f} MiB of text), `ExportSettings()` defaults: 100,000 "
        "rows a Parquet file, 64 MiB MDS shards.",
        "",
        *stores_lines,
        "",
        table(rows),
        "",
        "Largest size against the smallest and the next largest:",
        "",
        *ratio_lines(rows),
        "",
        f"Over the budget ({args.memory_gb:g} GiB = {args.memory_gb * 1024:,.0f} MiB): "
        + (", ".join(f"{row['format']} at {row['documents']:,} ({row['peak_rss_mib']:,.0f} MiB)"
                     for row in rows if row["peak_rss_mib"] > args.memory_gb * 1024)
           or "none") + ".",
        "",
        MEMORY_NOTES,
    ])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, nargs="+", default=[20_000, 100_000, 400_000])
    parser.add_argument("--formats", nargs="+", default=list(FORMATS), choices=FORMATS)
    parser.add_argument("--memory-gb", type=float, default=1.0)
    parser.add_argument("--no-rescan", action="store_true",
                        help="skip hf-parquet with the sample eval set's re-scan")
    parser.add_argument("--rescan-max-documents", type=int, default=100_000,
                        help="the re-scan variant only up to this size (it scans ~6 MB/s)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path, default=RESULTS)
    args = parser.parse_args()
    env = _environment(args.memory_gb)
    formats = list(args.formats)
    if not args.no_rescan and "hf-parquet" in formats:
        if EVALS.exists():
            formats.insert(formats.index("hf-parquet") + 1, RESCAN)
        else:
            print(f"{EVALS} is absent (scripts/setup.sh makes it): no re-scan variant")
    rows, stores = [], {}
    for documents in sorted(args.documents):
        built = store_for(documents, env)
        stores[documents] = built
        rows += [export_row(documents, built, fmt, env) for fmt in formats
                 if fmt != RESCAN or documents <= args.rescan_max_documents]
    command = " ".join([".venv/bin/python benchmarks/export.py", *sys.argv[1:]])
    text = report(rows, stores, args, command)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "stores": stores,
                                         "ratios": ratios(rows)}, indent=1))


if __name__ == "__main__":
    main()
