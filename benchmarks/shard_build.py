"""The parallel shard build (`plan_shards` + `build_planned_shards`) against `encode_batch_fast`
alone, and the shard build under a memory cap.

    .venv/bin/python benchmarks/shard_build.py [--documents 3000] [--workers 1 2]
        [--memory-cap [--cap-mb 640] [--cap-text-mb 2700]] [--json FILE]

Method:

1. Throughput. ``--documents`` synthetic documents: words drawn uniformly from the running text
   of WikiText-2 (so with its word frequencies), lengths lognormal with a median of about 600
   GPT-2 tokens (sigma 0.9: a few hundred to several thousand); one occurrence each, every
   seventh twice, every tenth in a second phase. Tokenizer: GPT-2, the one the tests use.
   Each variant runs in a fresh process, measured by `benchmarks.measure.run_measured` (wall,
   summed RSS of the whole process tree, sampled every 0.1 s):
   - ``encode``: `encode_batch_fast` on the texts, batches of 1,024, one thread (it also writes
     each occurrence's exact `est_tokens`, EOS included, which the build's plan needs);
   - ``build N``: the whole build with N workers (`map_tasks`, one tokenizer thread each):
     the plan (keys, DuckDB sort, the join with the texts written to buckets), the ranges'
     tasks, the spans merge and the manifest. "ranges" is the tasks alone.
   - ``encode_batch_fast, N at once``: N copies of ``encode`` at the same time, each over all
     the texts: the most one core gives a tokenizer while N run on this machine, the ceiling
     of a build with N workers (its copies count as each other's "other load");
   tokens/s always divides the texts' own tokens (no EOS), so the rates compare the same work;
   per worker: divided by N. ``--no-ceiling`` skips the copies (a large corpus on a lent
   machine, where each copy costs a single-thread pass over all the texts).
   The default run (this part) takes about a minute.
2. Memory cap (``--memory-cap``, about 15 minutes here). A corpus of ``--cap-text-mb`` of
   text, built twice with one worker (the run's process plans, one pool process builds the
   ranges): unconstrained, then with every process under ``RLIMIT_DATA = --cap-mb`` (set
   before anything is imported, inherited by the fork server and its worker); every output
   file's sha256 must match. The budget
   (``CORPUS_MEMORY_GB``) is 0.6 of the cap and DuckDB gets 96 MB on one thread
   (`CAP_DUCKDB`).
   ``RLIMIT_DATA``, not ``RLIMIT_AS``: opening a DuckDB connection reserves about 650 MB of
   address space it never touches (VmSize 450 MB -> 1.1 GB while VmRSS grows 14 MB), so an
   address-space cap measures reservations, not memory. ``RLIMIT_DATA`` (Linux >= 4.7) counts
   private writable mappings: every page the process can dirty, not shared libraries or
   read-only reservations. Allocators that map writable arenas ahead of use count too, so the
   capped runs use pyarrow's system pool and two glibc arenas (see `memory_cap`). The plan's
   VmData peaks at about 620 MB (VmRSS 380 MB: the imports alone are 220 MB of VmData), so the
   cap is 640 MiB and the text 2.7 GB. The text
   is long synthetic words (16 to 32 letters) and a word-level tokenizer over their vocabulary
   (one token a word): what is measured is memory against text bytes, and GPT-2 tokenizes
   about 0.5 MB of text a second on this shared machine, so four times the cap in GPT-2 would
   take over an hour a run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.measure import Measured, run_child  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "data"
WIKI = SHARED / "sources" / "wikipedia" / "wikitext-2-raw_wiki.test.raw"
GPT2 = SHARED / "tokenizers" / "gpt2" / "tokenizer.json"
WORK = Path(__file__).resolve().parent / ".work" / "shard_build"
PHASES = ("main", "anneal")
SEED = 20
SEQ_LEN = 2048
TOKENS_PER_SHARD = 1 << 19
MEDIAN_TOKENS = 600
TOKENS_PER_WORD = 1.3  # GPT-2 on WikiText words
DOCUMENTS_PER_PART = 2_000
# The capped runs: the budget (bucket sizes) a fraction of the cap, and DuckDB's share set
# apart, on one thread (the budget's rule, what is left past 320 MB of process, gives it its
# 64 MB floor there, where the plan's join ran out with two threads).
CAP_BUDGET = 0.6
CAP_DUCKDB = "96MB"


# --- synthetic data --------------------------------------------------------------------------


def _occurrences(doc_ids: list[str], lengths: list[int]) -> dict[str, list]:
    """One occurrence each, every seventh document twice, every tenth in `anneal`."""
    rows: dict[str, list] = {"doc_id": [], "occurrence": [], "phase": [], "source": [],
                             "licence": [], "est_tokens": []}
    for number, (doc_id, length) in enumerate(zip(doc_ids, lengths, strict=True)):
        for repeat in range(1 + (number % 7 == 0)):
            rows["doc_id"].append(doc_id)
            rows["occurrence"].append(repeat)
            rows["phase"].append(PHASES[number % 10 == 0])
            rows["source"].append("web" if number % 3 else "books")
            rows["licence"].append(None if number % 5 else "CC-BY-4.0")
            rows["est_tokens"].append(length)
    return rows


def write_wiki_corpus(folder: Path, documents: int) -> None:
    """`texts.parquet` (doc_id, text) of WikiText-2 words; `est_tokens` comes from `encode`."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    words = np.array(WIKI.read_text(encoding="utf-8").split())
    rng = np.random.default_rng(SEED)
    counts = np.maximum(4, rng.lognormal(np.log(MEDIAN_TOKENS / TOKENS_PER_WORD), 0.9,
                                         documents)).astype(np.int64)
    texts = [" ".join(words[rng.integers(0, len(words), count)].tolist()) for count in counts]
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"doc_id": [f"doc-{i:08d}" for i in range(documents)],
                             "text": texts}), folder / "texts.parquet")


def write_word_corpus(folder: Path, text_bytes: int) -> int:
    """`texts.parquet` and `occurrences.parquet` of long synthetic words until `text_bytes`,
    written a part at a time, and the word-level `tokenizer.json`; returns the documents."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from tokenizers import Tokenizer, models, pre_tokenizers

    rng = np.random.default_rng(SEED)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
    vocab = sorted({bytes(letters[rng.integers(0, 26, rng.integers(16, 33))]).decode()
                    for _ in range(8192)})
    ids = {word: number for number, word in enumerate(vocab)}
    ids["<|endoftext|>"] = len(ids)
    tokenizer = Tokenizer(models.WordLevel(ids, unk_token="<|endoftext|>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokenizer.json").write_text(tokenizer.to_str())
    words = np.array(vocab)
    written = documents = 0
    with pq.ParquetWriter(folder / "texts.parquet", pa.schema(
            [("doc_id", pa.string()), ("text", pa.string())])) as texts, \
            pq.ParquetWriter(folder / "occurrences.parquet", _occurrence_schema()) as mix:
        while written < text_bytes:
            counts = np.maximum(4, rng.lognormal(np.log(MEDIAN_TOKENS), 0.9,
                                                 DOCUMENTS_PER_PART)).astype(np.int64)
            part = [" ".join(words[rng.integers(0, len(words), c)].tolist()) for c in counts]
            doc_ids = [f"doc-{documents + i:09d}" for i in range(len(part))]
            # Row groups of a few MB, like stored parts: a reader holds one at a time.
            texts.write_table(pa.table({"doc_id": doc_ids, "text": part}), row_group_size=200)
            mix.write_table(pa.table(_occurrences(doc_ids, (counts + 1).tolist()),
                                     _occurrence_schema()))
            written += sum(map(len, part))
            documents += len(part)
    return documents


def _occurrence_schema() -> Any:
    import pyarrow as pa

    return pa.schema([("doc_id", pa.string()), ("occurrence", pa.int64()),
                      ("phase", pa.string()), ("source", pa.string()),
                      ("licence", pa.string()), ("est_tokens", pa.int64())])


# --- the measured children -------------------------------------------------------------------


def child_encode(folder: Path, write: bool = True) -> dict[str, Any]:
    """`encode_batch_fast` alone over the texts, one thread; writes `occurrences.parquet`
    unless told not to (the copies that run at once)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from curation.tokenizer import load_tokenizer

    texts = pq.read_table(folder / "texts.parquet")
    values = texts["text"].to_pylist()
    tokenizer = load_tokenizer(GPT2).tokenizer
    start = time.perf_counter()
    lengths: list[int] = []
    for begin in range(0, len(values), 1024):
        encodings = tokenizer.encode_batch_fast(values[begin:begin + 1024],
                                                add_special_tokens=False)
        lengths += [len(encoding) for encoding in encodings]
    seconds = time.perf_counter() - start
    if write:
        pq.write_table(pa.table(_occurrences(texts["doc_id"].to_pylist(),
                                             [n + 1 for n in lengths]), _occurrence_schema()),
                       folder / "occurrences.parquet")
    return {"seconds": seconds, "tokens": sum(lengths), "documents": len(values),
            "text_bytes": sum(len(v.encode()) for v in values)}


def child_build(folder: Path, out: Path, workers: int, tokenizer_path: Path,
                duckdb_memory: str) -> dict[str, Any]:
    """The whole build: plan (DuckDB: the budget's session, or `duckdb_memory` on one thread)
    then the ranges; returns timings and output hashes."""
    import pyarrow.parquet as pq

    from curation.duck import DuckDBSettings, current_budget, duckdb_session, register
    from curation.shards import (
        BuildInfo,
        ShardSettings,
        build_planned_shards,
        file_sha256,
        plan_shards,
    )
    from curation.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(tokenizer_path)
    settings = ShardSettings(seq_len=SEQ_LEN, tokens_per_shard=TOKENS_PER_SHARD, seed=SEED,
                             phases=PHASES, threads=1)
    info = BuildInfo("bench", "recipe", "pipeline")
    start = time.perf_counter()
    session = DuckDBSettings(duckdb_memory, 1, current_budget().spill_directory) \
        if duckdb_memory else None
    with duckdb_session(session) as con:
        register(con, "occurrences", folder / "occurrences.parquet")
        register(con, "texts", folder / "texts.parquet")
        plan = plan_shards(con, "occurrences", "texts", ("doc_id",), settings, out / "plan")
    planned = time.perf_counter() - start
    build = build_planned_shards(plan, tokenizer, out / "shards", settings, info, workers)
    seconds = time.perf_counter() - start
    eos = pq.read_metadata(folder / "occurrences.parquet").num_rows  # one EOS each
    hashes = {path.name: file_sha256(path) for path in sorted((out / "shards").iterdir())}
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"seconds": seconds, "plan_seconds": planned,
            "ranges_seconds": build.timings.get("ranges", 0.0),
            "tokens": build.manifest["totals"]["tokens"] - eos,
            "shards": len(build.manifest["shards"]), "buckets": plan.last_bucket + 1,
            "sha256": hashlib.sha256(json.dumps(hashes, sort_keys=True).encode()).hexdigest(),
            "self_max_rss": usage.ru_maxrss * 1024}


def child_main(argv: list[str]) -> None:
    mode, folder = argv[0], Path(argv[1])
    if mode in ("encode", "encode-copy"):
        result = child_encode(folder, write=mode == "encode")
    else:
        out, workers, tokenizer, cap = Path(argv[2]), int(argv[3]), Path(argv[4]), int(argv[5])
        if cap:
            resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
        result = child_build(folder, out, workers, tokenizer, argv[6])
    print("RESULT " + json.dumps(result), flush=True)


# --- the parent ------------------------------------------------------------------------------


def _run(args: list[str], log: Path, env: dict[str, str]) -> Measured:
    return run_child(__file__, args, log, REPO, env)


def _environment(memory_gb: float) -> dict[str, str]:
    return {**os.environ, "TOKENIZERS_PARALLELISM": "false", "RAYON_NUM_THREADS": "1",
            "CORPUS_MEMORY_GB": str(memory_gb), "CORPUS_SPILL_DIR": str(WORK / "spill")}


def throughput(documents: int, workers: list[int], memory_gb: float,
               ceiling: bool = True) -> list[dict[str, Any]]:
    folder = WORK / "wiki"
    shutil.rmtree(folder, ignore_errors=True)
    write_wiki_corpus(folder, documents)
    env = _environment(memory_gb)
    encode = _run(["encode", str(folder)], folder / "encode", env)
    base = encode.result or {}
    rows = [{"variant": "encode_batch_fast", "workers": 1, "wall_s": base["seconds"],
             "tokens": base["tokens"], "tokens_per_s_per_worker": base["tokens"] / base["seconds"],
             "peak_rss_mib": encode.peak_rss_bytes / 2**20, "other_load": encode.other_load,
             "text_mb": base["text_bytes"] / 1e6}]
    for count in (count for count in workers if count > 1 and ceiling):
        rows.append(_concurrent_encode(folder, count, env))
    hashes = set()
    for count in workers:
        out = folder / f"build-{count}"
        measured = _run(["build", str(folder), str(out), str(count), str(GPT2), "0", ""],
                        folder / f"build-{count}", env)
        result = measured.result or {}
        hashes.add(result["sha256"])
        rows.append({
            "variant": f"shard build, {count} worker{'s' * (count > 1)}", "workers": count,
            "wall_s": result["seconds"], "plan_s": result["plan_seconds"],
            "ranges_s": result["ranges_seconds"], "tokens": result["tokens"],
            "tokens_per_s_per_worker": result["tokens"] / result["seconds"] / count,
            "ranges_tokens_per_s_per_worker":
                result["tokens"] / result["ranges_seconds"] / count,
            "peak_rss_mib": measured.peak_rss_bytes / 2**20, "other_load": measured.other_load,
            "shards": result["shards"], "buckets": result["buckets"],
            "sha256": result["sha256"]})
        shutil.rmtree(out)
    if len(hashes) != 1:
        raise AssertionError(f"builds with {workers} workers differ: {hashes}")
    return rows


def _concurrent_encode(folder: Path, count: int, env: dict[str, str]) -> dict[str, Any]:
    """`count` copies of the encode child at once, each over all the texts: what one core
    gives a tokenizer while `count` of them run, the ceiling of a build with `count` workers on
    this machine (shared caches, memory bandwidth, neighbours' load)."""
    with ThreadPoolExecutor(count) as pool:
        runs = list(pool.map(lambda index: _run(["encode-copy", str(folder)],
                                                folder / f"encode-{count}-{index}", env),
                             range(count)))
    results = [run.result or {} for run in runs]
    return {"variant": f"encode_batch_fast, {count} at once", "workers": count,
            "wall_s": max(result["seconds"] for result in results),
            "tokens": results[0]["tokens"],
            "tokens_per_s_per_worker": statistics.mean(
                result["tokens"] / result["seconds"] for result in results),
            "peak_rss_mib": sum(run.peak_rss_bytes for run in runs) / 2**20,
            "other_load": max(run.other_load for run in runs)}


def memory_cap(cap_mb: int, text_mb: int) -> dict[str, Any]:
    folder = WORK / "capped"
    marker = folder / "corpus.json"
    if marker.exists() and json.loads(marker.read_text())["text_mb"] == text_mb:
        documents = json.loads(marker.read_text())["documents"]  # the same seed, the same data
    else:
        shutil.rmtree(folder, ignore_errors=True)
        documents = write_word_corpus(folder, text_mb * 10**6)
        marker.write_text(json.dumps({"text_mb": text_mb, "documents": documents}))
    # pyarrow's default pool (jemalloc or mimalloc) maps arenas writable long before it uses
    # them (VmData 250 MB -> 1.3 GB over the first Parquet write, VmRSS +50 MB), glibc gives
    # each thread a 64 MB arena, and its moving mmap threshold sends freed large blocks back
    # into the heap, which stays mapped (a range task failed on one 25 MB block after the
    # plan): all count against RLIMIT_DATA without being memory in use.
    env = {**_environment(cap_mb * CAP_BUDGET / 1024), "ARROW_DEFAULT_MEMORY_POOL": "system",
           "MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": str(1 << 20)}
    runs = {}
    for name, cap in (("unconstrained", 0), ("capped", cap_mb * 2**20)):
        out = folder / name
        measured = _run(["build", str(folder), str(out), "1", str(folder / "tokenizer.json"),
                         str(cap), CAP_DUCKDB], folder / name, env)
        runs[name] = {"wall_s": measured.wall_seconds,
                      "peak_rss_mib": measured.peak_rss_bytes / 2**20,
                      **(measured.result or {})}
        shutil.rmtree(out)
    same = runs["capped"]["sha256"] == runs["unconstrained"]["sha256"]
    return {"cap_mib": cap_mb, "text_mb": text_mb, "documents": documents,
            "text_to_cap": text_mb * 10**6 / (cap_mb * 2**20), "same_bytes": same, **runs}


def report(rows: list[dict[str, Any]], cap: dict[str, Any] | None) -> str:
    lines: list[str] = []
    if rows:
        lines += ["| variant | wall s | plan s | ranges s | tokens/s per worker (whole build) "
                  "| tokens/s per worker (ranges) | vs encode (whole / ranges) | peak RSS MiB "
                  "| other load |", "|" + " --- |" * 9]
        base = rows[0]["tokens_per_s_per_worker"]
        for row in rows:
            whole = row["tokens_per_s_per_worker"]
            ranges = row.get("ranges_tokens_per_s_per_worker", whole)
            lines.append(
                f"| {row['variant']} | {row['wall_s']:.1f} | {row.get('plan_s', 0):.1f} "
                f"| {row.get('ranges_s', row['wall_s']):.1f} | {whole:,.0f} | {ranges:,.0f} "
                f"| {whole / base:.0%} / {ranges / base:.0%} | {row['peak_rss_mib']:.0f} "
                f"| {row['other_load']:.1f} |")
        builds = [row for row in rows if "sha256" in row]
        lines.append(f"\n{rows[0]['tokens']:,} tokens, {rows[0]['text_mb']:.0f} MB of text; "
                     f"every build wrote the same bytes: {builds[0]['sha256'][:16]}")
        ceilings = {row["workers"]: row["tokens_per_s_per_worker"] for row in rows
                    if row["variant"].endswith("at once")}
        for row in builds:
            if row["workers"] in ceilings:
                ceiling = ceilings[row["workers"]]
                lines.append(f"- {row['variant']} against {row['workers']} tokenizers at once: "
                             f"{row['tokens_per_s_per_worker'] / ceiling:.0%} (whole build), "
                             f"{row['ranges_tokens_per_s_per_worker'] / ceiling:.0%} (ranges)")
    if cap:
        lines.append(
            f"\nMemory cap: RLIMIT_DATA {cap['cap_mib']} MiB, {cap['text_mb']:,} MB of text "
            f"({cap['text_to_cap']:.1f}x the cap), {cap['documents']:,} documents, "
            f"{cap['capped']['shards']} shards, {cap['capped']['buckets']} buckets")
        for name in ("unconstrained", "capped"):
            run = cap[name]
            lines.append(f"- {name}: {run['wall_s']:.0f} s, peak RSS {run['peak_rss_mib']:.0f}"
                         f" MiB, sha256 {run['sha256'][:16]}")
        lines.append(f"- same bytes: {cap['same_bytes']}")
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=8000)
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--memory-gb", type=float, default=1.0)
    parser.add_argument("--no-ceiling", action="store_true",
                        help="skip the N tokenizers at once (each over all the texts)")
    parser.add_argument("--memory-cap", action="store_true",
                        help="also run the memory-cap build (about 15 minutes here)")
    parser.add_argument("--cap-mb", type=int, default=640)
    parser.add_argument("--cap-text-mb", type=int, default=2700)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    (WORK / "spill").mkdir(parents=True, exist_ok=True)
    rows = [] if args.skip_throughput else throughput(args.documents, args.workers,
                                                         args.memory_gb, not args.no_ceiling)
    cap = memory_cap(args.cap_mb, args.cap_text_mb) if args.memory_cap else None
    print(report(rows, cap))
    if args.json:
        args.json.write_text(json.dumps({"throughput": rows, "memory_cap": cap}, indent=1))
    if cap and not cap["same_bytes"]:
        raise SystemExit("the capped build wrote other bytes")


if __name__ == "__main__":
    main()
