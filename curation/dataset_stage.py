"""The per-recipe stages around the tokenizer and shard kernels: `tokenizer[recipe]` and
`shards[recipe]` (architecture.md, "Data contracts" and "Determinism").

The tokenizer is a pinned `tokenizer.json` or a byte-level BPE trained on a seeded sample of
the recipe's sources (their scrubbed text, never the mix, so mix weights cannot change it); it
is stored as a one-row part, so its data version is its content. The shards are written to
`shards/{dataset version}/` with `manifest.json` last; the asset's own partition records which
version the recipe currently points at.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib.metadata import version as package_version
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curation.config import PipelineConfig, RecipeConfig, stable_hash
from curation.mix import recipe_partitions
from curation.partition import Manifest, PartitionLayout
from curation.shards import (
    BuildInfo,
    Occurrence,
    ShardSettings,
    build_shards,
    shuffle_order,
    upload_shards,
)
from curation.storage import LocalStore, Store
from curation.tokenizer import PinnedTokenizer, tokenizer_from_bytes, train_bpe

TOKENIZER = "tokenizer"
SHARDS = "shards"
SCRUBBED = "scrubbed"
# Code versions name the libraries that shape the output, so an upgrade makes the asset stale.
TOKENIZER_CODE_VERSION = f"tokenizer-1+tokenizers-{package_version('tokenizers')}"
SHARDS_CODE_VERSION = "shards-1+" + "+".join(
    f"{name}-{package_version(name)}" for name in ("tokenizers", "numpy", "pyarrow"))
# The BPE training sample: documents with the smallest keyed hash, up to this much text.
TRAINING_CHARS = 50_000_000
TRAINING_DOCUMENTS = 100_000
TEXT_BATCH = 4_096


def _keyed_rank(doc_id: str, seed: int) -> bytes:
    return hashlib.blake2b(doc_id.encode(), digest_size=8, key=str(seed).encode()).digest()


def training_sample(store: Store, partitions: Sequence[str], seed: int) -> list[str]:
    """A seeded sample of the partitions' scrubbed text: the same inputs and seed, the same
    texts in the same order."""
    ranked: list[tuple[bytes, str, str]] = []
    for partition in partitions:
        rows = PartitionLayout(store, SCRUBBED, partition).read_table(["doc_id", "text"])
        ranked += heapq.nsmallest(
            TRAINING_DOCUMENTS,
            ((_keyed_rank(d, seed), d, t) for d, t in zip(rows["doc_id"].to_pylist(),
                                                          rows["text"].to_pylist(), strict=True)
             if t.strip()))
    texts, chars = [], 0
    for _, _, text in sorted(ranked)[:TRAINING_DOCUMENTS]:
        if chars >= TRAINING_CHARS:
            break
        texts.append(text)
        chars += len(text)
    return texts


@dataclass(frozen=True)
class TokenizerBuild:
    tokenizer: PinnedTokenizer
    how: str  # "pinned" or "trained"
    rebuilt: bool
    manifest: Manifest


def _store_tokenizer(layout: PartitionLayout, version: str, tokenizer: PinnedTokenizer,
                     how: str) -> Manifest:
    layout.prepare(version)
    part = layout.write_part(0, pa.table({"tokenizer_json": [tokenizer.json_bytes.decode()],
                                          "sha256": [tokenizer.sha256]}))
    manifest = Manifest(TOKENIZER, layout.partition, version, [part],
                        extra={"how": how, "sha256": tokenizer.sha256,
                               "vocab_size": tokenizer.vocab_size, "eos_id": tokenizer.eos_id,
                               "pad_id": tokenizer.pad_id, "dtype": str(tokenizer.dtype)})
    layout.write_manifest(manifest)
    return manifest


def load_stored_tokenizer(store: Store, recipe_name: str) -> PinnedTokenizer:
    table = PartitionLayout(store, TOKENIZER, recipe_name).read_table(["tokenizer_json"])
    return tokenizer_from_bytes(table["tokenizer_json"][0].as_py().encode(), name=recipe_name)


def build_tokenizer(store: Store, pipeline: PipelineConfig, recipe_name: str,
                    recipe: RecipeConfig) -> TokenizerBuild:
    """The recipe's tokenizer, rebuilt only when its inputs changed."""
    layout = PartitionLayout(store, TOKENIZER, recipe_name)
    spec = recipe.tokenizer
    if spec.path is not None:
        data = Path(pipeline.resolve(spec.path)).read_bytes()
        version = stable_hash({"code": TOKENIZER_CODE_VERSION,
                               "file": hashlib.sha256(data).hexdigest()})
        how = "pinned"
    else:
        partitions = recipe_partitions(recipe)
        inputs = {p: PartitionLayout(store, SCRUBBED, p).complete_manifest().data_version
                  for p in partitions}
        version = stable_hash({"code": TOKENIZER_CODE_VERSION, "vocab": spec.train_vocab_size,
                               "seed": recipe.seed, "inputs": inputs})
        how = "trained"
    existing = layout.read_manifest()
    if existing is not None and existing.version == version:
        return TokenizerBuild(load_stored_tokenizer(store, recipe_name), how, False, existing)
    if spec.path is not None:
        tokenizer = tokenizer_from_bytes(data, name=spec.path)
    else:
        texts = training_sample(store, partitions, recipe.seed)
        tokenizer = train_bpe(texts, spec.train_vocab_size)
    return TokenizerBuild(tokenizer, how, True, _store_tokenizer(layout, version, tokenizer, how))


# --- shards ----------------------------------------------------------------------------------


def _texts(store: Store, occurrences: pa.Table) -> dict[str, str]:
    """Scrubbed text of every document the mix selected, read partition by partition."""
    texts: dict[str, str] = {}
    for partition in sorted(set(occurrences["partition"].to_pylist())):
        wanted = pc.unique(occurrences.filter(pc.equal(occurrences["partition"], partition))
                           ["doc_id"])
        rows = PartitionLayout(store, SCRUBBED, partition).read_table(["doc_id", "text"])
        rows = rows.filter(pc.is_in(rows["doc_id"], wanted))
        texts.update(zip(rows["doc_id"].to_pylist(), rows["text"].to_pylist(), strict=True))
    return texts


def ordered_occurrences(store: Store, occurrences: pa.Table,
                        recipe: RecipeConfig) -> Iterator[Occurrence]:
    """The mix's occurrences in shuffle order (phases in recipe order, then the keyed hash of
    doc_id and occurrence), with their scrubbed text."""
    phases = [phase.name for phase in recipe.phases]
    order = shuffle_order(occurrences["doc_id"].to_pylist(),
                          occurrences["occurrence"].to_pylist(),
                          occurrences["phase"].to_pylist(), phases, recipe.seed)
    texts = _texts(store, occurrences)
    columns = occurrences.select(["doc_id", "occurrence", "phase", "source", "licence"])
    for start in range(0, len(order), TEXT_BATCH):
        batch = columns.take(pa.array(np.asarray(order[start:start + TEXT_BATCH]))).to_pylist()
        for row in batch:
            yield Occurrence(row["doc_id"], row["occurrence"], row["phase"],
                             texts[row["doc_id"]], row["source"], row["licence"])


@dataclass(frozen=True)
class ShardsBuild:
    dataset_version: str
    prefix: str
    manifest: dict
    rebuilt: bool


def shards_prefix(dataset_version: str) -> str:
    return f"{SHARDS}/{dataset_version}"


def build_dataset_shards(store: Store, recipe_name: str, recipe: RecipeConfig,
                         occurrences: pa.Table, tokenizer: PinnedTokenizer,
                         info: BuildInfo, threads: int) -> ShardsBuild:
    """Tokenizes, packs and writes the shards of `info.version` unless they exist already."""
    prefix = shards_prefix(info.version)
    layout = PartitionLayout(store, SHARDS, recipe_name)
    if store.exists(f"{prefix}/manifest.json"):
        manifest = json.loads(store.read_bytes(f"{prefix}/manifest.json"))
        rebuilt = False
    else:
        settings = ShardSettings.from_recipe(recipe, threads=max(1, threads))
        with tempfile.TemporaryDirectory(prefix="shards-") as folder:
            build = build_shards(ordered_occurrences(store, occurrences, recipe), tokenizer,
                                 Path(folder) / "out", settings, info)
            upload_shards(build.directory, store, prefix)
            manifest = build.manifest
        rebuilt = True
    layout.prepare(info.version)
    part = layout.write_part(0, pa.table({"dataset_version": [info.version],
                                          "prefix": [prefix]}))
    layout.write_manifest(Manifest(SHARDS, recipe_name, info.version, [part],
                                   extra={"prefix": prefix}))
    return ShardsBuild(info.version, prefix, manifest, rebuilt)


def local_shards(store: Store, prefix: str, folder: str) -> Path:
    """A local folder holding the shards under `prefix` (the folder itself for a local store;
    otherwise a download into `folder`)."""
    if isinstance(store, LocalStore):
        return Path(store.uri(prefix))
    # The folder may be shared (the CLI downloads a version to one folder per machine): each
    # file is published whole, so a concurrent download never shows a reader a partial file.
    target = LocalStore(folder)
    for key in store.list(prefix):
        target.write_bytes(key.removeprefix(prefix).lstrip("/"), store.read_bytes(key))
    return Path(target.root)
