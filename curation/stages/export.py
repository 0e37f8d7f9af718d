"""Exports of a dataset version in formats other tools open as they are (no Dagster):

- `hf-parquet`: one row per occurrence, in the order the shards hold them (phases in the
  recipe's order, the keyed shuffle within each), with its scrubbed text and lineage
  (`EXPORT_SCHEMA`), in `data/train-NNNNN-of-NNNNN.parquet` files of `rows_per_file` rows:
  `datasets.load_dataset("parquet", data_dir=OUT/data)` opens it as the `train` split.
- `mds`: the same rows as MosaicML Streaming's MDS shards (`curation.mds`), which its
  `StreamingDataset` reads; the `text` column is what llm-foundry's text datasets tokenize.
- `nanogpt`: the shards' tokens without padding, sequence after sequence, as one flat
  `train.bin` (and `val.bin`: the sequences the loader's validation split holds out for
  `validation_fraction`, `curation.loader.held_out_mask`), `uint16` as nanoGPT reads it, or
  `uint32` when the vocabulary passes 65,535; `meta.pkl` holds `vocab_size` as nanoGPT's
  `train.py` expects.

Every export writes its dataset card (`README.md`, `curation.card`: sources, licences, filters,
dedup, decontamination per benchmark with the export's own re-scan, PII policy, tokenizer,
citation, takedowns) and `export.json` last: the format, the dataset version, the takedown
version honoured, what it cut, and each file's size and sha256. The same version and takedown
list give the same bytes: rows come in stream order, files are cut by row count, Parquet row
groups by `parquet_bytes`' rule, nothing records a time.

**Takedowns.** The current takedown list is honoured even for a version built before it: its
documents and their copies (`curation.takedowns.expand_takedowns`, what the mix cuts) leave the
rows, and their spans leave the token stream, every other occurrence in place.

**Memory.** The rows come from the shard plan (`curation.shards.plan_shards`: DuckDB's sort and
join under the budget, spilling, in a session closed before the rows are read), one bucket of
text and one Parquet row group (or one MDS shard) at a time;
nanoGPT's stream holds a block of `NANOGPT_BLOCK` sequences (memory-mapped) and the cut spans.
"""

from __future__ import annotations

import hashlib
import json
import math
import pickle
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from curation.card import dataset_card
from curation.config import PipelineConfig, RecipeConfig
from curation.decontamination import ResidualMatcher
from curation.duck import current_budget, duckdb_session, literal, register_table
from curation.evals import load_benchmarks
from curation.graph import DOCUMENTS, EXPORTS, MIX, SCRUBBED, SHARDS
from curation.loader import held_out_mask
from curation.partition import PartitionLayout
from curation.report import report_json_key
from curation.shards import SPANS, ShardPlan, ShardSettings, plan_shards, read_bucket
from curation.stages.dataset import local_shards, shards_prefix
from curation.storage import Store, write_parquet_file
from curation.takedowns import EMPTY_VERSION, current_takedowns, expand_takedowns

EXPORT_CODE_VERSION = "export-1"
Format = Literal["hf-parquet", "mds", "nanogpt"]
FORMATS: tuple[str, ...] = ("hf-parquet", "mds", "nanogpt")
MANIFEST = "export.json"
CARD = "README.md"
EXPORT_SCHEMA = pa.schema([
    ("text", pa.string()), ("doc_id", pa.string()), ("url", pa.string()),
    ("snapshot", pa.string()), ("source", pa.string()), ("licence", pa.string()),
    ("phase", pa.string()), ("occurrence", pa.int64()), ("token_count", pa.int64()),
])
"""One occurrence: its scrubbed text (what the shards tokenized), its document's id, URL and
snapshot (null for curated sources), source, licence, phase, occurrence number and tokens in
the shards (EOS included)."""
MDS_COLUMNS = {"text": "str", "doc_id": "str", "url": "str", "snapshot": "str",
               "source": "str", "licence": "str", "phase": "str", "occurrence": "int64",
               "token_count": "int64"}
NANOGPT_UINT16_LIMIT = 1 << 16
NANOGPT_BLOCK = 4096  # sequences read, masked and written at once


class ExportError(RuntimeError):
    """A dataset version that cannot be exported, and why."""


@dataclass(frozen=True)
class ExportSettings:
    rows_per_file: int = 100_000  # hf-parquet rows per file
    mds_size_limit: int = 1 << 26  # bytes per MDS shard
    validation_fraction: float = 0.0  # nanogpt: sequences held out into val.bin


@dataclass(frozen=True)
class TakenDown:
    version: str
    documents: int
    occurrences: int
    tokens: int


@dataclass(frozen=True)
class ExportResult:
    """What an export wrote (`export.json`, with `files`: name, bytes, sha256, in order)."""

    format: str
    recipe: str
    dataset_version: str
    rows: int  # occurrences (hf-parquet, mds) or sequences (nanogpt)
    tokens: int
    taken_down: TakenDown
    files: list[dict[str, Any]]

    def manifest(self) -> dict[str, Any]:
        return {"code_version": EXPORT_CODE_VERSION, **asdict(self)}


def current_version(store: Store, recipe_name: str) -> str:
    """The dataset version of the recipe's current shards."""
    manifest = PartitionLayout(store, SHARDS, recipe_name).read_manifest()
    if manifest is None:
        raise ExportError(f"recipe {recipe_name} has no shards yet: materialize its dataset")
    return manifest.version


def recipe_of(store: Store, version: str, recipe_names: Sequence[str]) -> str:
    """The recipe whose current shards are `version` (or `version` itself, a recipe name): an
    export reads the recipe's stored mix, which only its current version has."""
    if version in recipe_names:
        return version
    for name in recipe_names:
        manifest = PartitionLayout(store, SHARDS, name).read_manifest()
        if manifest is not None and manifest.version == version:
            return name
    raise ExportError(f"{version} is not the current dataset version of any recipe "
                      f"({', '.join(recipe_names) or 'none'}): an older version's mix is no "
                      "longer stored; export a recipe's current version")


def export_dataset(store: Store, recipe_name: str, recipe: RecipeConfig,
                   pipeline: PipelineConfig, fmt: Format, out: Path,
                   settings: ExportSettings = ExportSettings()) -> ExportResult:
    """Writes the recipe's current dataset version as `fmt` into the local folder `out`
    (emptied of a previous export's files first), its dataset card (`README.md`,
    `curation.card`), then `export.json`. The text formats re-scan every document once (its
    occurrence 0) for eval items with the mix gate's independent matcher, for the card."""
    version = current_version(store, recipe_name)
    shards = json.loads(store.read_bytes(f"{shards_prefix(version)}/manifest.json"))
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST).unlink(missing_ok=True)
    takedowns_version, gone = _taken_down(store, recipe)
    residual: dict[str, int] | None = None
    if fmt == "nanogpt":
        rows, tokens, files, cut = _write_nanogpt(store, version, shards, gone, out, settings)
    else:
        rescan = _Rescan(pipeline)
        with _plan(store, recipe_name, recipe, gone) as plan:
            writer = _write_hf if fmt == "hf-parquet" else _write_mds
            files = writer(map(rescan, _rows(plan)), plan.occurrences, out, settings)
            rows, tokens = plan.occurrences, plan.total_tokens
        residual = rescan.found()
        cut = (int(shards["totals"]["occurrences"]) - rows,
               int(shards["totals"]["tokens"]) - tokens)
    result = ExportResult(fmt, recipe_name, version, rows, tokens,
                          TakenDown(takedowns_version, len(gone), *cut), files)
    report = json.loads(store.read_bytes(report_json_key(recipe_name))) \
        if store.exists(report_json_key(recipe_name)) else None
    if report is not None and report.get("dataset_version") != version:
        report = None  # a report of another version would describe other data
    card = out / CARD
    card.write_text(dataset_card(shards, report, recipe, pipeline, result.manifest(), residual),
                    encoding="utf-8")
    result = replace(result, files=[*files, _file_entry(card, out, 0)])
    (out / MANIFEST).write_text(json.dumps(result.manifest(), indent=1, sort_keys=True) + "\n")
    return result


class _Rescan:
    """Counts, per benchmark, the eval items found in the rows' documents (each scanned once,
    at its occurrence 0) by `ResidualMatcher`, passing the rows through."""

    def __init__(self, pipeline: PipelineConfig):
        settings = pipeline.decontamination
        self.matcher = ResidualMatcher(load_benchmarks(settings.benchmarks), settings.ngram) \
            if settings.benchmarks else None
        self.items: dict[str, set[str]] = {}

    def __call__(self, table: pa.Table) -> pa.Table:
        if self.matcher is not None:
            first = table.filter(pc.equal(table["occurrence"], 0))["text"].to_pylist()
            for residual in self.matcher.scan(first):
                self.items.setdefault(residual.benchmark, set()).add(residual.item_id)
        return table

    def found(self) -> dict[str, int]:
        return {benchmark: len(items) for benchmark, items in sorted(self.items.items())}


def exports_prefix(dataset_version: str, fmt: str) -> str:
    return f"{EXPORTS}/{dataset_version}/{fmt}"


def store_exports(store: Store, recipe_name: str, recipe: RecipeConfig,
                  pipeline: PipelineConfig, formats: Sequence[str],
                  settings: ExportSettings = ExportSettings()) -> list[ExportResult]:
    """The recipe's current version in each of `formats`, under `exports_prefix` of `store`:
    written to a local work folder, then copied file by file, `export.json` last (a prefix
    with an `export.json` is complete)."""
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        raise ExportError(f"formats: {', '.join(unknown)} not among {', '.join(FORMATS)}")
    results = []
    for fmt in formats:
        with tempfile.TemporaryDirectory(prefix="export-",
                                         dir=current_budget().spill_directory) as work:
            result = export_dataset(store, recipe_name, recipe, pipeline, fmt, Path(work),
                                    settings)
            prefix = exports_prefix(result.dataset_version, fmt)
            store.delete_prefix(prefix)
            for entry in [*result.files, {"name": MANIFEST}]:
                store.write_file(f"{prefix}/{entry['name']}", Path(work) / entry["name"])
        results.append(result)
    return results


def _taken_down(store: Store, recipe: RecipeConfig) -> tuple[str, frozenset[str]]:
    """The current takedown list's version and the documents it removes from the recipe's
    partitions, copies included (what the mix would cut were it rebuilt now)."""
    takedowns = current_takedowns(store)
    if takedowns.version == EMPTY_VERSION:
        return takedowns.version, frozenset()
    return takedowns.version, frozenset(expand_takedowns(store, takedowns,
                                                         recipe.partition_keys()))


# --- rows in stream order -----------------------------------------------------------------------


@contextmanager
def _plan(store: Store, recipe_name: str, recipe: RecipeConfig, gone: frozenset[str]
          ) -> Iterator[ShardPlan]:
    """The mix's occurrences without the taken-down documents, in shard order, bucketed with
    their text, URL and snapshot in a local work folder (removed after)."""
    budget = current_budget()
    with tempfile.TemporaryDirectory(prefix="export-", dir=budget.spill_directory) as local:
        # the session closes before the rows are read: its buffers do not stay beside them
        with duckdb_session() as con:
            plan = _plan_in(con, store, recipe_name, recipe, gone, Path(local))
        yield plan


def _plan_in(con: duckdb.DuckDBPyConnection, store: Store, recipe_name: str,
             recipe: RecipeConfig, gone: frozenset[str], local: Path) -> ShardPlan:
    """`_plan`'s work in the session `con`."""
    register_table(con, "mix_rows", PartitionLayout(store, MIX, recipe_name))
    con.register("_gone", pa.table({"doc_id": pa.array(sorted(gone), pa.string())}))
    con.execute("CREATE VIEW export_occurrences AS "
                "SELECT m.* FROM mix_rows m ANTI JOIN _gone g USING (doc_id)")
    _register_texts(con, store, [row[0] for row in con.execute(
        "SELECT DISTINCT partition FROM mix_rows ORDER BY 1").fetchall()])
    return plan_shards(con, "export_occurrences", "export_texts", ("partition", "doc_id"),
                       ShardSettings.from_recipe(recipe), local,
                       carry=("t.url", "t.snapshot"))


def _register_texts(con: duckdb.DuckDBPyConnection, store: Store,
                    partitions: Sequence[str]) -> None:
    """View `export_texts` (`partition`, `doc_id`, `text`, `url`, `snapshot`): the scrubbed
    text of every document of `partitions` with its URL and snapshot from `documents`."""
    selects = ["SELECT NULL::VARCHAR AS partition, NULL::VARCHAR AS doc_id, NULL::VARCHAR AS "
               "text, NULL::VARCHAR AS url, NULL::VARCHAR AS snapshot WHERE false"]
    for number, partition in enumerate(partitions):
        register_table(con, f"scrubbed_{number}", PartitionLayout(store, SCRUBBED, partition),
                       columns=["doc_id", "text"])
        register_table(con, f"documents_{number}", PartitionLayout(store, DOCUMENTS, partition),
                       columns=["doc_id", "url", "snapshot"])
        selects.append(f"SELECT {literal(partition)} AS partition, s.doc_id, s.text, d.url, "
                       f"d.snapshot FROM scrubbed_{number} s JOIN documents_{number} d "
                       "USING (doc_id)")
    con.execute(f"CREATE OR REPLACE VIEW export_texts AS {' UNION ALL '.join(selects)}")


def _rows(plan: ShardPlan) -> Iterator[pa.Table]:
    """The plan's occurrences as `EXPORT_SCHEMA` tables, a bucket at a time, in stream order."""
    for number in range(len(plan.buckets.parts)):
        bucket = read_bucket(plan.buckets, number)
        if bucket is not None:
            yield pa.Table.from_arrays(
                [bucket[name].cast(field.type) for name, field in zip(
                    [*EXPORT_SCHEMA.names[:-1], "est_tokens"], EXPORT_SCHEMA, strict=True)],
                schema=EXPORT_SCHEMA)


def _file_entry(path: Path, out: Path, rows: int) -> dict[str, Any]:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 22):
            digest.update(block)
    return {"name": path.relative_to(out).as_posix(), "bytes": path.stat().st_size,
            "sha256": digest.hexdigest(), "rows": rows}


def _take(batches: Iterator[pa.RecordBatch], held: list[pa.RecordBatch], count: int
          ) -> Iterator[pa.RecordBatch]:
    """The next `count` rows of `batches` (what `held` kept over from the last file first);
    the rest of the batch that ends them stays in `held`."""
    while count > 0:
        batch = held.pop() if held else next(batches, None)
        if batch is None:
            return
        if batch.num_rows > count:
            held.append(batch.slice(count))
            batch = batch.slice(0, count)
        count -= batch.num_rows
        yield batch


def _write_hf(tables: Iterator[pa.Table], count: int, out: Path,
              settings: ExportSettings) -> list[dict[str, Any]]:
    """`data/train-NNNNN-of-NNNNN.parquet`, `rows_per_file` rows each (one empty file when
    there are no rows, so the split exists), each streamed a row group at a time
    (`write_parquet_file`: `parquet_bytes`' bytes)."""
    total = max(1, math.ceil(count / settings.rows_per_file))
    folder = out / "data"
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.parquet"):
        stale.unlink()
    batches = (batch for table in tables for batch in table.to_batches())
    held: list[pa.RecordBatch] = []
    files = []
    for number in range(total):
        path = folder / f"train-{number:05d}-of-{total:05d}.parquet"
        rows = write_parquet_file(path, EXPORT_SCHEMA,
                                  _take(batches, held, settings.rows_per_file))
        files.append(_file_entry(path, out, rows))
    if held or next(batches, None) is not None:
        raise ExportError(f"the plan announced {count} occurrences but held more")
    return files


def _write_mds(tables: Iterator[pa.Table], count: int, out: Path,
               settings: ExportSettings) -> list[dict[str, Any]]:
    """MDS shards and `index.json` (`curation.mds.MDSWriter`, the library's bytes)."""
    from curation.mds import MDSWriter

    folder = out / "mds"
    for stale in folder.glob("*"):
        stale.unlink()
    written = 0
    with MDSWriter(folder, MDS_COLUMNS, settings.mds_size_limit) as writer:
        for table in tables:
            for row in table.to_pylist():
                writer.write({key: "" if value is None else value
                              for key, value in row.items()})
                written += 1
    if written != count:
        raise ExportError(f"the plan announced {count} occurrences but held {written}")
    return [_file_entry(path, out, 0) for path in sorted(folder.iterdir())]


# --- nanoGPT --------------------------------------------------------------------------------------


def _write_nanogpt(store: Store, version: str, shards: dict[str, Any], gone: frozenset[str],
                   out: Path, settings: ExportSettings
                   ) -> tuple[int, int, list[dict[str, Any]], tuple[int, int]]:
    """`train.bin`, `val.bin` and `meta.pkl`; returns the sequences written, their tokens, the
    file entries and the (occurrences, tokens) the takedowns cut."""
    with tempfile.TemporaryDirectory(prefix="export-shards-") as download:
        folder = local_shards(store, shards_prefix(version), download)
        total = int(shards["totals"]["sequences"])
        dtype = np.uint16 if int(shards["tokenizer"]["vocab_size"]) <= NANOGPT_UINT16_LIMIT \
            else np.uint32
        cut_spans = _cut_spans(folder / SPANS, gone)
        paths = {"train": out / "train.bin", "val": out / "val.bin"}
        tokens = 0
        with paths["train"].open("wb") as train, paths["val"].open("wb") as val:
            for number, shard in enumerate(shards["shards"]):
                sequences = _shard_sequences(folder, number, shard, shards)
                padding = np.load(folder / f"shard-{number:05d}.padding.npy")
                cut = [span[1:4] for span in cut_spans if span[0] == number]
                for start in range(0, len(sequences), NANOGPT_BLOCK):
                    block = slice(start, start + NANOGPT_BLOCK)
                    kept = _kept(padding[block], start, int(shards["seq_len"]), cut)
                    first = int(shard["first_sequence"]) + start
                    held = held_out_mask(np.arange(first, first + len(kept)),
                                         int(shards["seed"]), settings.validation_fraction)
                    rows = np.asarray(sequences[block])
                    # a 2-D mask selects in row order: the kept tokens sequence after sequence
                    train.write(rows[~held][kept[~held]].astype(dtype, copy=False).tobytes())
                    val.write(rows[held][kept[held]].astype(dtype, copy=False).tobytes())
                    tokens += int(kept.sum())
    meta = out / "meta.pkl"
    meta.write_bytes(pickle.dumps({"vocab_size": int(shards["tokenizer"]["vocab_size"])},
                                  protocol=4))
    cut_tokens = int(shards["totals"]["tokens"]) - tokens
    files = [_file_entry(path, out, 0) for path in (paths["train"], paths["val"], meta)]
    cut_occurrences = len({(doc, occurrence) for _, _, _, _, doc, occurrence in cut_spans})
    return total, tokens, files, (cut_occurrences, cut_tokens)


def _cut_spans(spans: Path, gone: frozenset[str]) -> list[tuple[int, int, int, int, str, int]]:
    """(shard, sequence, start, end, doc_id, occurrence) of the taken-down documents' spans,
    read a row group at a time."""
    if not gone:
        return []
    wanted = pa.array(sorted(gone), pa.string())
    cut = []
    reader = pq.ParquetFile(spans)
    for group in range(reader.num_row_groups):
        table = reader.read_row_group(group)
        table = table.filter(pc.is_in(table["doc_id"], wanted))
        cut += zip(*(table[name].to_pylist() for name in (
            "shard", "sequence", "start", "end", "doc_id", "occurrence")), strict=True)
    return cut


def _shard_sequences(folder: Path, number: int, shard: dict[str, Any],
                     shards: dict[str, Any]) -> np.ndarray:
    """A shard's sequences, memory-mapped."""
    seq_len = int(shards["seq_len"])
    path = folder / f"shard-{number:05d}.bin"
    dtype = np.dtype(shards["dtype"]).newbyteorder("<")
    if path.stat().st_size != int(shard["sequences"]) * seq_len * dtype.itemsize:
        raise ExportError(f"shard {number} is not {shard['sequences']} sequences of {seq_len} "
                          "tokens: run `corpus shards verify`")
    return np.memmap(path, dtype=dtype, mode="r", shape=(int(shard["sequences"]), seq_len))


def _kept(padding: np.ndarray, start: int, seq_len: int,
          cut: Sequence[tuple[int, int, int]]) -> np.ndarray:
    """Per token of the sequences from `start` on (their `padding`), whether it stays: not
    padding, not in a `cut` span (sequence, start, end)."""
    kept = np.arange(seq_len)[None, :] < (seq_len - padding.astype(np.int64))[:, None]
    for sequence, begin, end in cut:
        if start <= sequence < start + len(kept):
            kept[sequence - start, begin:end] = False
    return kept
