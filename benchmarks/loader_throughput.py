"""Loader throughput: the project's loader (`curation.loader`) and Megatron-Core's
`IndexedDataset` on the same shards, in tokens per second per rank with 1, 2 and 8 simulated
ranks, beside what one training GPU consumes.

    .venv/bin/python benchmarks/loader_throughput.py [--tokens 64000000] [--seq-len 2048]
        [--tokens-per-shard 16777216] [--dtypes uint16 int32] [--ranks 1 2 8]
        [--sequences 8192] [--repeats 3] [--batch-size 8] [--no-cold] [--json FILE]
        [--markdown benchmarks/results/loader_throughput.md]

The default run takes about 5 minutes on 2 shared cores, 3 once its shards are built.

Method:

1. Shards, built by the project's own builder (`order_occurrences`, then `build_shards`:
   `concat` packing, the recipe's default `tokens_per_shard`) from `benchmarks.synthetic`
   texts (Zipf pseudo-words, log-normal lengths with a median of about 330 words, so several
   documents a sequence and many EOS to find) and a word-level tokenizer over their words, one
   token a word, ids spread over the vocabulary: GPT-2's 50,257 ids give `uint16` shards,
   Llama 3's 128,256 give `int32`. Every tenth document is in a second phase (`anneal`), so
   the sampler serves a curriculum. ``--tokens`` tokens of documents, EOS included. A set is
   checked with `verify_shards` when built and reused from ``benchmarks/.work/`` while its
   settings are the same.
2. Ranks: ``world`` processes forked at once from a parent that has imported torch and
   Megatron-Core (as a trainer has), each one rank: it opens the shards, takes the first
   ``--sequences / world`` of its indices for epoch 0 from `sampler_for(dataset, rank=...,
   world_size=...)` (the keyed permutation within each phase group, dealt round-robin), waits
   on a barrier with the others, then reads them in order. The ranks compete for the cores and
   the disk as a node's ranks do; here 8 ranks share 2 cores.
3. Readers, per sequence:
   - ``loader``: `ShardDataset.sample`: the tokens as int64, the padding mask and the segment
     ids from EOS positions (what a trainer with block-diagonal attention takes);
   - ``loader tokens``: `ShardDataset[i]` copied to int64, the tokens alone;
   - ``megatron``: Megatron-Core's `IndexedDataset` over each shard's ``.bin``/``.idx``, each
     sequence's shard and row computed up front (as Megatron's blended index does), copied to
     int64 (as its `GPTDataset` does): the tokens alone;
   - ``torch, N workers``: `torch_dataset` in a `torch.utils.data.DataLoader` (batches of
     ``--batch-size``, the rank's indices as its sampler, 0 or 2 worker processes, one torch
     thread a process); starting the workers is inside the timing.
4. Cache: ``warm`` reads every shard file once before the runs; ``cold`` evicts every shard
   file from this machine's page cache (`posix_fadvise(DONTNEED)`, no root needed) before each
   repeat, for ``loader`` and ``megatron`` (the other readers make the same reads). The VM's
   host may still cache the disk, so it is cold-ish.
5. Per (dtype, reader, cache, ranks), ``--repeats`` runs, taking turns, medians: the slowest
   rank's tokens/s (its sequences times ``seq_len`` over its own time from the barrier to its
   last sequence: padding counts, a trainer consumes whole sequences), the aggregate (every
   rank's tokens over the span from the first start to the last end), the headroom (the
   slowest rank's tokens/s over what one GPU consumes, `TRAINERS`) and, the largest over the
   ranks, a rank process's peak RSS (`ru_maxrss`, which starts at the parent's resident pages
   the fork shares, its imports among them) and what reading added to it: private memory
   (``RssAnon``) and mapped files (``RssFile``: the shard pages it touched, page cache that
   every rank shares). DataLoader workers are apart.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import resource
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import synthetic  # noqa: E402
from benchmarks.measure import machine_busy_seconds  # noqa: E402
from curation.loader import ShardDataset, sampler_for, torch_dataset  # noqa: E402
from curation.shards import (  # noqa: E402
    BuildInfo,
    Occurrence,
    ShardSettings,
    build_shards,
    read_manifest,
    shard_files,
    shuffle_order,
)
from curation.tokenizer import EOS_TOKEN, PinnedTokenizer, tokenizer_from_bytes  # noqa: E402

BENCH_DIR = Path(__file__).resolve().parent
WORK = BENCH_DIR / ".work" / "loader_throughput"
RESULTS = BENCH_DIR / "results" / "loader_throughput.md"
SEED = 24
PHASES = ("main", "anneal")
CHUNK = 4096  # documents generated at a time while the build streams them
VOCABULARIES = {"uint16": 50_257, "int32": 128_256}  # GPT-2's and Llama 3's id counts
# Tokens/s one H100 consumes training a model of this size (assumptions, not measured here;
# `assumption` states them in the report), and its dense BF16 TFLOP/s for the 100%-MFU bound.
TRAINERS = {"8B": 4_000, "1B": 40_000}
H100_TFLOPS = 989
READERS = ("loader", "loader tokens", "megatron", "torch, 0 workers", "torch, 2 workers")
COLD_READERS = ("loader", "megatron")


# --- the shards --------------------------------------------------------------------------------


def word_tokenizer(vocab_size: int) -> PinnedTokenizer:
    """One token a word of the synthetic texts, ids spread over `vocab_size` (which sets the
    shard dtype); EOS is id 0."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = synthetic.pool_words(SEED)
    stride = (vocab_size - 2) // len(words)
    ids = {EOS_TOKEN: 0, **{word: 1 + k * stride for k, word in enumerate(words)},
           "<unk>": vocab_size - 1}
    tokenizer = Tokenizer(models.WordLevel(ids, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tokenizer_from_bytes(tokenizer.to_str().encode())


def document_count(tokens: int, spec: synthetic.Spec) -> int:
    """How many documents (one token a word, plus EOS) first reach `tokens`."""
    count = tokens // 400 + 1
    while True:
        lengths = np.cumsum(synthetic.text_words(np.arange(count), spec) + 1)
        if lengths[-1] >= tokens:
            return int(np.searchsorted(lengths, tokens)) + 1
        count *= 2


def occurrences(documents: int) -> Iterator[Occurrence]:
    """The documents' occurrences in shard order, their texts made a chunk at a time."""
    spec = synthetic.Spec(documents=documents, seed=SEED)
    numbers = np.arange(documents)
    doc_ids = [f"doc-{n:09d}" for n in range(documents)]
    phases = [PHASES[n % 10 == 0] for n in range(documents)]
    order = shuffle_order(doc_ids, [0] * documents, phases, PHASES, SEED)
    for start in range(0, documents, CHUNK):
        chunk = numbers[order[start : start + CHUNK]]
        for number, text in zip(chunk.tolist(), synthetic.texts(chunk, spec), strict=True):
            yield Occurrence(doc_ids[number], 0, phases[number], text, "web")


def build_set(dtype: str, folder: Path, args: argparse.Namespace) -> None:
    """Builds and verifies the shard set of `dtype` into `folder`."""
    from curation.shard_integrity import verify_shards

    log(f"building {folder.name}")
    settings = ShardSettings(seq_len=args.seq_len, tokens_per_shard=args.tokens_per_shard,
                             seed=SEED, phases=PHASES)
    documents = document_count(args.tokens, synthetic.Spec(documents=1, seed=SEED))
    build_shards(occurrences(documents), word_tokenizer(VOCABULARIES[dtype]), folder, settings,
                 BuildInfo("loader-throughput", "synthetic", "synthetic"), overwrite=True)
    report = verify_shards(folder)
    if not report.ok:
        raise SystemExit(f"{folder}: {report.summary()}")


def shard_set(dtype: str, args: argparse.Namespace) -> Path:
    """The shard folder for these settings, built unless it is already there."""
    folder = WORK / f"{dtype}-t{args.tokens}-s{args.seq_len}-p{args.tokens_per_shard}"
    if not (folder / "manifest.json").exists():  # written last: a set with one is complete
        # In a process of its own, so the ranks fork from a parent that never held a build.
        process = multiprocessing.get_context("fork").Process(target=build_set,
                                                              args=(dtype, folder, args))
        process.start()
        process.join()
        if process.exitcode:
            raise SystemExit(f"building {folder.name} failed ({process.exitcode})")
    return folder


def shard_paths(folder: Path) -> list[Path]:
    return [folder / name for name in shard_files(read_manifest(folder))]


def warm(folder: Path) -> None:
    """Reads every shard file once, so the runs find them in the page cache."""
    buffer = bytearray(1 << 24)
    for path in shard_paths(folder):
        with path.open("rb", buffering=0) as handle:
            while handle.readinto(buffer):
                pass


def evict(folder: Path) -> None:
    """Drops the shard files' clean pages from this machine's page cache."""
    for path in shard_paths(folder):
        handle = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(handle, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(handle)


# --- the readers: each opens what it needs and returns a function that reads every index ----

Reader = Callable[[Path, np.ndarray, int], Callable[[], int]]


def loader_samples(folder: Path, indices: np.ndarray, _batch: int) -> Callable[[], int]:
    dataset = ShardDataset(folder)

    def read() -> int:
        for index in indices.tolist():
            dataset.sample(index)
        return len(indices)

    return read


def loader_tokens(folder: Path, indices: np.ndarray, _batch: int) -> Callable[[], int]:
    dataset = ShardDataset(folder)

    def read() -> int:
        for index in indices.tolist():
            np.array(dataset[index], dtype=np.int64)
        return len(indices)

    return read


def megatron_tokens(folder: Path, indices: np.ndarray, _batch: int) -> Callable[[], int]:
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    shards = read_manifest(folder)["shards"]
    readers = [IndexedDataset(str(folder / shard["name"])) for shard in shards]
    first = np.array([shard["first_sequence"] for shard in shards])
    located = np.searchsorted(first, indices, side="right") - 1
    rows = indices - first[located]

    def read() -> int:
        for shard, row in zip(located.tolist(), rows.tolist(), strict=True):
            np.array(readers[shard][row], dtype=np.int64)
        return len(indices)

    return read


def torch_batches(workers: int) -> Reader:
    def open_loader(folder: Path, indices: np.ndarray, batch: int) -> Callable[[], int]:
        import torch

        torch.set_num_threads(1)  # a trainer's loader does not take the node's cores
        loader = torch.utils.data.DataLoader(torch_dataset(ShardDataset(folder)),
                                             batch_size=batch, sampler=indices.tolist(),
                                             num_workers=workers)
        return lambda: sum(len(batch["input_ids"]) for batch in loader)

    return open_loader


OPENERS: dict[str, Reader] = {"loader": loader_samples, "loader tokens": loader_tokens,
                              "megatron": megatron_tokens,
                              "torch, 0 workers": torch_batches(0),
                              "torch, 2 workers": torch_batches(2)}


# --- one run: `world` forked ranks ---------------------------------------------------------


@dataclass(frozen=True)
class Job:
    folder: Path
    reader: str
    world: int
    sequences: int  # all ranks together
    batch: int


def resident() -> dict[str, int]:
    """This process's resident bytes by kind: `RssAnon` (private), `RssFile` (mapped files,
    here shard pages: page cache every rank shares)."""
    fields = dict(line.split(":", 1) for line in
                  Path("/proc/self/status").read_text().splitlines() if line.startswith("Rss"))
    return {name: int(fields[name].split()[0]) * 1024 for name in ("RssAnon", "RssFile")}


def rank_main(job: Job, rank: int, barrier: Any, results: Any) -> None:
    before = resident()  # the parent's pages this fork shares, its imports among them
    dataset = ShardDataset(job.folder)
    indices = sampler_for(dataset, rank=rank, world_size=job.world).epoch_indices(0)
    read = OPENERS[job.reader](job.folder, indices[: job.sequences // job.world], job.batch)
    barrier.wait()
    start = time.perf_counter()
    sequences = read()
    end = time.perf_counter()
    after = resident()
    results.put({"rank": rank, "sequences": sequences, "start": start, "end": end,
                 "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                 **{f"added_{name}": after[name] - before[name] for name in after}})


def run(job: Job, seq_len: int) -> dict[str, Any]:
    """One run of `job.world` ranks at once: per-rank and aggregate tokens/s."""
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(job.world), context.Queue()
    ranks = [context.Process(target=rank_main, args=(job, rank, barrier, results))
             for rank in range(job.world)]
    for process in ranks:
        process.start()
    done = [results.get(timeout=600) for _ in ranks]
    for process in ranks:
        process.join()
        if process.exitcode:
            raise RuntimeError(f"{job.reader}: a rank exited with {process.exitcode}")
    per_rank = [r["sequences"] * seq_len / (r["end"] - r["start"]) for r in done]
    span = max(r["end"] for r in done) - min(r["start"] for r in done)
    return {"slowest_rank": min(per_rank), "mean_rank": statistics.mean(per_rank),
            "aggregate": sum(r["sequences"] for r in done) * seq_len / span,
            "peak_rss": max(r["peak_rss"] for r in done),
            "added_private": max(r["added_RssAnon"] for r in done),
            "added_mapped": max(r["added_RssFile"] for r in done),
            "sequences_per_rank": done[0]["sequences"]}


# --- the plan, the summary, the report ------------------------------------------------------


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def plan(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(reader, cache) pairs to run, the readers whose libraries are installed. Importing them
    here, in the parent, also spares every forked rank the import."""
    available = [name for name in READERS if name in ("loader", "loader tokens")
                 or importable("megatron.core" if name == "megatron" else "torch")]
    return [(name, "warm") for name in available] + \
        [(name, "cold") for name in available if name in COLD_READERS and not args.no_cold]


def importable(module: str) -> bool:
    try:
        with warnings.catch_warnings():  # Megatron-Core warns that Apex is not installed
            warnings.simplefilter("ignore")
            __import__(module)
    except ImportError:
        return False
    return True


def measure_dtype(dtype: str, args: argparse.Namespace) -> tuple[list[dict[str, Any]], dict]:
    folder = shard_set(dtype, args)
    manifest = read_manifest(folder)
    pairs = plan(args)
    runs: list[dict[str, Any]] = []
    warm(folder)
    busy, children, wall = machine_busy_seconds(), _children_cpu(), time.perf_counter()
    for repeat in range(args.repeats):  # repeats outermost: noise spreads over every reader
        for world in args.ranks:
            for reader, cache in pairs:
                if cache == "cold":
                    evict(folder)
                job = Job(folder, reader, world, args.sequences, args.batch_size)
                result = run(job, args.seq_len)
                if cache == "cold":
                    warm(folder)
                runs.append({"dtype": dtype, "reader": reader, "cache": cache,
                             "ranks": world, "repeat": repeat, **result})
                log(f"{dtype} {reader} {cache} x{world}: "
                    f"{result['slowest_rank']:,.0f} tokens/s per rank")
    wall = time.perf_counter() - wall
    others = max(0.0, machine_busy_seconds() - busy - (_children_cpu() - children)) / wall
    shards = {"dtype": manifest["dtype"], "shards": len(manifest["shards"]),
              "sequences": manifest["totals"]["sequences"], "tokens": manifest["totals"]["tokens"],
              "bytes": sum(path.stat().st_size for path in shard_paths(folder)),
              "other_load": others}
    return runs, shards


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def summarise(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Medians over the repeats of each (dtype, reader, cache, ranks)."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for run_ in runs:
        groups.setdefault((run_["dtype"], run_["reader"], run_["cache"], run_["ranks"]),
                          []).append(run_)
    rows = []
    for (dtype, reader, cache, ranks), group in groups.items():
        row = {"dtype": dtype, "reader": reader, "cache": cache, "ranks": ranks,
               "sequences_per_rank": group[0]["sequences_per_rank"], "repeats": len(group)}
        for field in ("slowest_rank", "mean_rank", "aggregate", "peak_rss", "added_private",
                      "added_mapped"):
            row[field] = statistics.median(r[field] for r in group)
        row["headroom"] = {name: row["slowest_rank"] / rate for name, rate in TRAINERS.items()}
        rows.append(row)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    trainers = [f"x {name} ({rate:,}/s)" for name, rate in TRAINERS.items()]
    header = ["dtype", "reader", "cache", "ranks", "seqs/rank", "tokens/s per rank (slowest)",
              "aggregate tokens/s", *trainers, "peak RSS/rank MiB", "+ private MiB",
              "+ mapped files MiB"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * 4 + "---:|" * (len(header) - 4)]
    for row in rows:
        cells = [row["dtype"], row["reader"], row["cache"], str(row["ranks"]),
                 f"{row['sequences_per_rank']:,}", f"{row['slowest_rank']:,.0f}",
                 f"{row['aggregate']:,.0f}",
                 *(f"{row['headroom'][name]:,.0f}x" for name in TRAINERS),
                 *(f"{row[name] / 2**20:,.0f}" for name in ("peak_rss", "added_private",
                                                             "added_mapped"))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def machine() -> dict[str, Any]:
    memory = next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                  if line.startswith("MemTotal:"))
    versions = {}
    for package in ("numpy", "torch", "megatron-core"):
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            versions[package] = "not installed"
    return {"cores": os.cpu_count(), "memory_gib": round(int(memory) / 2**20, 1),
            "python": platform.python_version(), **versions}


def assumption() -> str:
    ceiling = H100_TFLOPS * 1e12 / (6 * 1e9)
    return ("What one GPU consumes (an assumption, not measured): per H100, an 8B model about "
            f"{TRAINERS['8B']:,} tokens/s and a 1B model about {TRAINERS['1B']:,} (the harder "
            f"target). At 100% MFU ({H100_TFLOPS} dense BF16 TFLOP/s, 6N FLOPs a token)"
            f" a 1B model could not pass {ceiling:,.0f}. \"x 8B\" and \"x 1B\": the slowest "
            "rank's tokens/s over that consumption (the headroom).")


def report(args: argparse.Namespace, rows: list[dict[str, Any]],
           shards: dict[str, dict[str, Any]]) -> str:
    host = machine()
    sets = "; ".join(
        f"{dtype}: {info['shards']} shards, {info['sequences']:,} sequences of {args.seq_len}, "
        f"{info['tokens']:,} tokens, {info['bytes'] / 2**20:,.0f} MiB (others' load during "
        f"its runs: {info['other_load']:.2f} cores)" for dtype, info in shards.items())
    worst = min(rows, key=lambda row: row["headroom"]["1B"])
    return "\n\n".join([
        "# Loader throughput: `curation.loader` and Megatron-Core's `IndexedDataset`",
        f"Command: `.venv/bin/python benchmarks/loader_throughput.py {' '.join(sys.argv[1:])}`"
        " (method: its docstring).",
        f"{time.strftime('%Y-%m-%d')}, {host['cores']} cores, {host['memory_gib']} GiB, Python "
        f"{host['python']}, numpy {host['numpy']}, torch {host['torch']}, megatron-core "
        f"{host['megatron-core']}; a shared VM, so every figure is the median of "
        f"{args.repeats} runs. {sets}.",
        assumption(), table(rows),
        f"Lowest headroom: {worst['reader']}, {worst['cache']}, {worst['ranks']} ranks "
        f"({worst['dtype']}): {worst['slowest_rank']:,.0f} tokens/s for its slowest rank, "
        f"{worst['headroom']['1B']:,.0f}x a 1B model's consumption and "
        f"{worst['headroom']['8B']:,.0f}x an 8B model's.", NOTES]) + "\n"


NOTES = """## Notes

- A rank here has a small share of a core: 8 ranks (and, with workers, 16 DataLoader workers)
  share 2 cores with whatever else runs on the machine. A training node gives each GPU's rank
  several cores of its own, so the 8-rank rows are a floor, not an estimate.
- `loader` does more per sequence than `megatron`: the padding mask and the segment ids (the
  EOS positions of the sequence, for block-diagonal attention) besides the int64 tokens, which
  is all Megatron-Core's reader gives. `loader tokens` is the same work as `megatron`.
- With 2 cores, DataLoader workers compete with their own rank and every batch crosses a
  process boundary (shared-memory tensors), so 2 workers read slower than 0 here; on a node
  with spare cores they overlap loading with the training step.
- Cold: `posix_fadvise(DONTNEED)` drops the shard files from this VM's page cache before each
  repeat; the host may still cache the disk. The figures are medians of few runs on a shared
  machine (others kept about one of the two cores busy): two runs of the whole benchmark a few
  minutes apart differed by up to 2x on the fastest rows, so compare orders of magnitude.
- Peak RSS starts at the parent's resident pages the fork shares (torch and Megatron-Core
  imported, about 320 MiB); reading adds a few MiB of private memory at most, and the shard
  pages a rank touched (page cache, shared by every rank on the machine).
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64_000_000,
                        help="tokens of documents in each shard set, EOS included")
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--tokens-per-shard", type=int, default=1 << 24,
                        help="a quarter of the recipe's default, so the set has several shards")
    parser.add_argument("--dtypes", nargs="+", choices=sorted(VOCABULARIES),
                        default=["uint16", "int32"])
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 8])
    parser.add_argument("--sequences", type=int, default=8192,
                        help="sequences a run reads, all ranks together")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=8, help="DataLoader batch size")
    parser.add_argument("--no-cold", action="store_true", help="skip the cold-cache runs")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path, default=RESULTS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    runs, shards = [], {}
    for dtype in args.dtypes:
        measured, shards[dtype] = measure_dtype(dtype, args)
        runs += measured
    rows = summarise(runs)
    text = report(args, rows, shards)
    print(text, flush=True)
    args.markdown.write_text(text, encoding="utf-8")
    if args.json:
        settings = {name: value for name, value in vars(args).items()
                    if name not in ("json", "markdown")}
        args.json.write_text(json.dumps(
            {"settings": settings, "machine": machine(), "trainers": TRAINERS,
             "shards": shards, "rows": rows, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
