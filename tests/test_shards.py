"""Tokenizer, shuffle order, packing, shard files and the integrity gate, on the real tokenizers
and real text of ../shared/data (Wikipedia articles and Gutenberg books)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from tokenizers import Tokenizer, models

from curation.config import RecipeConfig
from curation.shard_integrity import verify_shards
from curation.shards import (
    BuildInfo,
    Occurrence,
    ShardSettings,
    build_shards,
    order_occurrences,
    read_manifest,
    shard_files,
    shuffle_order,
    upload_shards,
)
from curation.storage import LocalStore
from curation.tokenizer import (
    PinnedTokenizer,
    TokenizerError,
    load_tokenizer,
    tokenizer_from_bytes,
    train_bpe,
)
from tests.conftest import REPO, require_shared_data

PHASES = ("main", "anneal")
INFO = BuildInfo("v-test", "recipe-hash", "pipeline-hash", {"mix": "mix-v1"})


# --- shared helpers (tests/test_loader.py uses them too) -------------------------------------


def require_module(module: str) -> None:
    """Imports `module`, else skips with the reason; in CI (CI set) its absence fails."""
    try:
        __import__(module)
    except ImportError as error:
        reason = (f"{module} is not importable ({error}); install it with "
                  "`.venv/bin/python -m pip install torch==2.13.0 megatron-core==0.16.1`")
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


def tokenizer_path(name: str) -> Path:
    return require_shared_data() / "tokenizers" / name / "tokenizer.json"


def _read(path: Path) -> str:
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:  # the Gutenberg files are Windows-1252
        return raw.decode("cp1252")


def real_documents(limit: int = 160) -> list[tuple[str, str, str | None, str]]:
    """(doc_id, source, licence, text): WikiText-2 articles and Gutenberg book passages of
    varied length (a few hundred to several thousand tokens)."""
    data = require_shared_data() / "sources"
    wiki = _read(data / "wikipedia" / "wikitext-2-raw_wiki.test.raw").replace("\r\n", "\n")
    articles = [a.strip() for a in re.split(r"^ = [^=].* = $", wiki, flags=re.MULTILINE)
                if len(a.split()) > 50]
    docs = [(f"wiki-{i:03d}", "wikipedia", "CC-BY-SA-3.0", text)
            for i, text in enumerate(articles[:40])]
    for path in sorted((data / "books_gutenberg").glob("pg*.txt")):
        paragraphs = [p for p in _read(path).replace("\r\n", "\n").split("\n\n") if p.strip()]
        size, start = 3, 200  # skip the Project Gutenberg header
        while start < len(paragraphs) and len(docs) < limit and size < 60:
            docs.append((f"{path.stem}-{start}", "books", None,
                         "\n\n".join(paragraphs[start : start + size])))
            start, size = start + size, size * 2 if size < 40 else 3
    return docs[:limit]


def occurrences(docs: list[tuple[str, str, str | None, str]]) -> list[Occurrence]:
    """Every third document twice (upsampled), every fourth in the anneal phase."""
    return [Occurrence(doc_id, repeat, PHASES[i % 4 == 0], text, source, licence)
            for i, (doc_id, source, licence, text) in enumerate(docs)
            for repeat in range(1 + (i % 3 == 0))]


def build(items: list[Occurrence], tokenizer: PinnedTokenizer, directory: Path,
          **options: object) -> dict:
    settings = ShardSettings(**({"seq_len": 256, "tokens_per_shard": 4096, "seed": 11,
                                 "phases": PHASES} | options))  # type: ignore[arg-type]
    ordered = order_occurrences(items, settings.phases, settings.seed)
    return build_shards(ordered, tokenizer, directory, settings, INFO).manifest


def read_tokens(directory: Path) -> tuple[np.ndarray, np.ndarray]:
    """All sequences (n, seq_len) and their padding counts, straight from the files."""
    manifest = read_manifest(directory)
    dtype = np.dtype(manifest["dtype"]).newbyteorder("<")
    tokens = [np.fromfile(directory / s["files"]["bin"]["name"], dtype=dtype)
              for s in manifest["shards"]]
    padding = [np.load(directory / s["files"]["padding"]["name"]) for s in manifest["shards"]]
    return (np.concatenate(tokens).reshape(-1, manifest["seq_len"]), np.concatenate(padding))


def stream(directory: Path) -> np.ndarray:
    """The token stream without padding."""
    tokens, padding = read_tokens(directory)
    return np.concatenate([row[: len(row) - pad] for row, pad in zip(tokens, padding,
                                                                      strict=True)])


def file_hashes(directory: Path) -> dict[str, str]:
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(directory.iterdir())}


@pytest.fixture(scope="module")
def gpt2() -> PinnedTokenizer:
    return load_tokenizer(tokenizer_path("gpt2"))


@pytest.fixture(scope="module")
def olmo2() -> PinnedTokenizer:
    return load_tokenizer(tokenizer_path("olmo2-dolma2"))


@pytest.fixture(scope="module")
def docs() -> list[tuple[str, str, str | None, str]]:
    return real_documents()


@pytest.fixture(scope="module")
def concat_build(tmp_path_factory: pytest.TempPathFactory, docs, gpt2) -> Path:
    directory = tmp_path_factory.mktemp("concat")
    build(occurrences(docs), gpt2, directory)
    return directory


# --- tokenizer -------------------------------------------------------------------------------


def test_pinned_tokenizers_have_hash_eos_pad_and_dtype(gpt2, olmo2) -> None:
    assert gpt2.sha256 == hashlib.sha256(tokenizer_path("gpt2").read_bytes()).hexdigest()
    assert (gpt2.eos_id, gpt2.pad_id, gpt2.vocab_size, gpt2.dtype) == (
        50256, 50256, 50257, np.dtype("<u2"))
    assert gpt2.encode_batch(["Hello world!"]) == [[15496, 995, 0]]  # the known GPT-2 ids
    assert (olmo2.eos_id, olmo2.pad_id, olmo2.vocab_size, olmo2.dtype) == (
        100257, 100277, 100278, np.dtype("<i4"))


def test_text_that_spells_a_special_token_never_becomes_eos(gpt2, olmo2) -> None:
    for tokenizer in (gpt2, olmo2):
        [ids] = tokenizer.encode_batch(["end of story <|endoftext|> next"])
        assert tokenizer.eos_id not in ids
        assert tokenizer.decode(ids) == "end of story <|endoftext|> next"


def test_a_tokenizer_without_eos_fails_clearly() -> None:
    bare = Tokenizer(models.BPE()).to_str().encode()
    with pytest.raises(TokenizerError, match="no end-of-document token"):
        tokenizer_from_bytes(bare)


_TRAIN = """
import hashlib, sys
sys.path.insert(0, {repo!r})
from tests.test_shards import real_documents
from curation.tokenizer import train_bpe
texts = [doc[3] for doc in real_documents(60)]
print(train_bpe(texts, 1000, threads={threads}).sha256)
"""


def test_bpe_training_is_deterministic_and_has_eos(docs) -> None:
    texts = [doc[3] for doc in docs[:60]]
    first, second = train_bpe(texts, 1000), train_bpe(texts, 1000, threads=1)
    assert first.json_bytes == second.json_bytes
    # A fresh process has other hash-map seeds and, with threads=2, another rayon pool.
    env = {**os.environ, "CI": os.environ.get("CI", "")}
    other = subprocess.run([sys.executable, "-c", _TRAIN.format(repo=str(REPO), threads=2)],
                           capture_output=True, text=True, check=True, env=env, cwd=REPO)
    assert other.stdout.strip() == first.sha256
    assert first.eos_id == 0 and first.vocab_size == 1000 and first.dtype == np.dtype("<u2")
    [ids] = first.encode_batch([texts[0][:500]])
    assert first.decode(ids) == texts[0][:500] and first.eos_id not in ids


# --- order -----------------------------------------------------------------------------------


def test_shuffle_order_is_per_phase_and_independent_of_other_documents(docs) -> None:
    items = occurrences(docs)
    ordered = order_occurrences(items, PHASES, seed=3)
    phases = [item.phase for item in ordered]
    assert phases == sorted(phases, key=PHASES.index)  # main first, then anneal
    assert order_occurrences(items[::-1], PHASES, seed=3) == ordered
    assert order_occurrences(items, PHASES, seed=4) != ordered
    dropped = docs[5][0]
    without = order_occurrences([i for i in items if i.doc_id != dropped], PHASES, seed=3)
    assert without == [item for item in ordered if item.doc_id != dropped]
    positions = shuffle_order([i.doc_id for i in items], [i.occurrence for i in items],
                              [i.phase for i in items], PHASES, 3)
    assert [items[p] for p in positions] == ordered


def test_the_build_refuses_input_out_of_order(gpt2, docs, tmp_path: Path) -> None:
    items = order_occurrences(occurrences(docs[:20]), PHASES, 11)
    settings = ShardSettings(seq_len=64, tokens_per_shard=1024, seed=11, phases=PHASES)
    with pytest.raises(ValueError, match="out of shard order"):
        build_shards(items[::-1], gpt2, tmp_path / "a", settings, INFO)
    with pytest.raises(ValueError, match="repeated"):
        build_shards([items[0], items[0]], gpt2, tmp_path / "b", settings, INFO)
    with pytest.raises(ValueError, match="not one of the recipe's phases"):
        build_shards([Occurrence("x", 0, "other", "text")], gpt2, tmp_path / "c", settings,
                     INFO)


def test_settings_come_from_the_recipe() -> None:
    recipe = RecipeConfig.model_validate({
        "name": "r", "snapshots": ["s"], "tokenizer": {"path": "tok.json"}, "seq_len": 512,
        "tokens_per_shard": 4096, "seed": 9, "phases": [
            {"name": "main", "fraction": 0.9, "weights": {"web": 1}},
            {"name": "anneal", "fraction": 0.1, "weights": {"web": 1}}]})
    settings = ShardSettings.from_recipe(recipe, packing="best_fit")
    assert (settings.seq_len, settings.sequences_per_shard, settings.seed, settings.phases,
            settings.packing) == (512, 8, 9, ("main", "anneal"), "best_fit")


# --- the build -------------------------------------------------------------------------------


@pytest.mark.parametrize("packing", ["concat", "best_fit"])
def test_two_builds_are_byte_identical(packing, gpt2, docs, tmp_path: Path) -> None:
    items = occurrences(docs)
    build(items, gpt2, tmp_path / "a", packing=packing)
    # Batch size and thread count change how the work is cut, never a byte.
    build(items, gpt2, tmp_path / "b", packing=packing, batch_size=7, threads=1)
    first, second = file_hashes(tmp_path / "a"), file_hashes(tmp_path / "b")
    assert first == second
    assert len(first) > 10 and "manifest.json" in first and "spans.parquet" in first


def test_removing_a_document_cuts_only_its_tokens(concat_build, gpt2, docs, tmp_path) -> None:
    removed = docs[3][0]  # upsampled: two occurrences
    items = [item for item in occurrences(docs) if item.doc_id != removed]
    build(items, gpt2, tmp_path / "without")
    spans = pq.read_table(concat_build / "spans.parquet").to_pylist()
    manifest = read_manifest(concat_build)
    seq_len, first = manifest["seq_len"], [s["first_sequence"] for s in manifest["shards"]]
    keep = np.ones(manifest["totals"]["sequences"] * seq_len, dtype=bool)
    cut = [s for s in spans if s["doc_id"] == removed]
    assert {s["occurrence"] for s in cut} == {0, 1}
    for span in cut:
        base = (first[span["shard"]] + span["sequence"]) * seq_len
        keep[base + span["start"] : base + span["end"]] = False
    tokens, padding = read_tokens(concat_build)
    old = tokens.reshape(-1)[keep[: tokens.size]]
    old = old[: len(old) - int(padding.sum())]  # the old final padding
    assert np.array_equal(stream(tmp_path / "without"), old)


def _doc_tokens(tokenizer: PinnedTokenizer, items: list[Occurrence]) -> dict[str, np.ndarray]:
    texts = {item.doc_id: item.text for item in items}
    ids = tokenizer.encode_batch(list(texts.values()))
    return {doc_id: np.array([*tokens, tokenizer.eos_id])
            for doc_id, tokens in zip(texts, ids, strict=True)}


def _check_spans_trace_back(directory: Path, tokenizer: PinnedTokenizer,
                            items: list[Occurrence]) -> None:
    """Every span's tokens are the next piece of its occurrence's tokens (EOS included), and
    every occurrence is covered completely, in order."""
    expected = _doc_tokens(tokenizer, items)
    manifest = read_manifest(directory)
    tokens, _ = read_tokens(directory)
    first = [s["first_sequence"] for s in manifest["shards"]]
    consumed: dict[tuple[str, int], int] = defaultdict(int)
    for span in pq.read_table(directory / "spans.parquet").to_pylist():
        row = tokens[first[span["shard"]] + span["sequence"]]
        piece = row[span["start"] : span["end"]]
        key = (span["doc_id"], span["occurrence"])
        offset = consumed[key]
        assert np.array_equal(piece, expected[span["doc_id"]][offset : offset + len(piece)])
        consumed[key] = offset + len(piece)
    assert consumed == {(i.doc_id, i.occurrence): len(expected[i.doc_id]) for i in items}


def test_spans_map_every_token_back_to_its_document(olmo2, docs, tmp_path: Path) -> None:
    items = occurrences(docs[:60])
    manifest = build(items, olmo2, tmp_path / "olmo2")
    assert manifest["dtype"] == "int32" and manifest["eos_id"] == 100257
    _check_spans_trace_back(tmp_path / "olmo2", olmo2, items)
    # A decoded piece is text of its document.
    span = pq.read_table(tmp_path / "olmo2" / "spans.parquet").slice(5, 1).to_pylist()[0]
    tokens, _ = read_tokens(tmp_path / "olmo2")
    sequence = tokens[manifest["shards"][span["shard"]]["first_sequence"] + span["sequence"]]
    text = olmo2.decode(sequence[span["start"] : span["end"]].tolist()).replace(
        "<|endoftext|>", "")
    source = next(item.text for item in items if item.doc_id == span["doc_id"])
    assert text.strip("\ufffd") in source  # a cut may fall inside a multi-byte character
    assert verify_shards(tmp_path / "olmo2").ok


def test_concat_pads_only_the_last_sequence(concat_build, gpt2, docs) -> None:
    manifest = read_manifest(concat_build)
    tokens, padding = read_tokens(concat_build)
    assert np.count_nonzero(padding[:-1]) == 0 and 0 < padding[-1] < manifest["seq_len"]
    assert np.all(tokens[-1, manifest["seq_len"] - padding[-1] :] == gpt2.pad_id)
    assert manifest["totals"]["padding_tokens"] == padding[-1]
    assert len(stream(concat_build)) == manifest["totals"]["tokens"]
    _check_spans_trace_back(concat_build, gpt2, occurrences(docs))


def test_best_fit_splits_only_long_documents_and_counts_padding(gpt2, docs, tmp_path) -> None:
    items = occurrences(docs)
    seq_len = 1024
    manifest = build(items, gpt2, tmp_path / "bf", packing="best_fit", seq_len=seq_len,
                     tokens_per_shard=16 * seq_len, best_fit_window=8)
    lengths = {doc_id: len(t) for doc_id, t in _doc_tokens(gpt2, items).items()}
    spans = pq.read_table(tmp_path / "bf" / "spans.parquet").to_pylist()
    pieces: dict[tuple[str, int], int] = defaultdict(int)
    for span in spans:
        pieces[(span["doc_id"], span["occurrence"])] += 1
    for (doc_id, _), count in pieces.items():
        assert count == (1 if lengths[doc_id] <= seq_len else -(-lengths[doc_id] // seq_len))
    assert any(length > seq_len for length in lengths.values())  # long documents were split
    tokens, padding = read_tokens(tmp_path / "bf")
    totals = manifest["totals"]
    assert totals["padding_tokens"] == padding.sum() > 0
    assert totals["padded_sequences"] == np.count_nonzero(padding)
    assert totals["tokens"] == sum(lengths[i.doc_id] for i in items)
    assert totals["tokens"] + totals["padding_tokens"] == len(tokens) * seq_len
    for row, pad in zip(tokens, padding, strict=True):
        assert np.all(row[seq_len - pad :] == gpt2.pad_id)
    _check_spans_trace_back(tmp_path / "bf", gpt2, items)
    assert verify_shards(tmp_path / "bf").ok


def test_manifest_accounts_for_tokens_and_versions(concat_build, gpt2, docs) -> None:
    manifest = read_manifest(concat_build)
    text = (concat_build / "manifest.json").read_text()
    assert json.loads(text) == manifest and "time" not in text
    assert manifest["version"] == "v-test" and manifest["inputs"] == {"mix": "mix-v1"}
    assert manifest["recipe_hash"] == "recipe-hash" and manifest["seed"] == 11
    assert manifest["tokenizer"]["sha256"] == gpt2.sha256 and manifest["dtype"] == "uint16"
    assert set(manifest["libraries"]) == {"tokenizers", "numpy", "pyarrow"}
    items = occurrences(docs)
    lengths = {doc_id: len(t) for doc_id, t in _doc_tokens(gpt2, items).items()}
    by_source: dict[str, int] = defaultdict(int)
    for item in items:
        by_source[item.source or "(none)"] += lengths[item.doc_id]
    assert manifest["tokens_by_source"] == by_source
    assert sum(manifest["tokens_by_licence"].values()) == manifest["totals"]["tokens"]
    assert set(manifest["tokens_by_licence"]) == {"CC-BY-SA-3.0", "(none)"}
    assert manifest["totals"]["occurrences"] == len(items)
    assert sum(manifest["occurrences_by_phase"].values()) == len(items)
    assert len(manifest["shards"]) > 3 and all(
        s["sequences"] == 16 for s in manifest["shards"][:-1])


def test_upload_copies_every_file_then_the_manifest(concat_build, tmp_path: Path) -> None:
    store = LocalStore(str(tmp_path / "root"))
    keys = upload_shards(concat_build, store, "shards/v-test")
    assert keys[-1] == "shards/v-test/manifest.json"
    names = [*shard_files(read_manifest(concat_build)), "manifest.json"]
    assert sorted(store.list("shards/v-test")) == sorted(f"shards/v-test/{n}" for n in names)
    assert verify_shards(tmp_path / "root" / "shards" / "v-test").ok


# --- the integrity gate ----------------------------------------------------------------------


def _copy(source: Path, target: Path) -> Path:
    target.mkdir()
    for path in source.iterdir():
        (target / path.name).write_bytes(path.read_bytes())
    return target


def _rehash(directory: Path, shard: int, kind: str) -> None:
    """Updates the manifest's hash of one file, so only the content checks can object."""
    manifest = read_manifest(directory)
    entry = manifest["shards"][shard]["files"][kind]
    entry["sha256"] = hashlib.sha256((directory / entry["name"]).read_bytes()).hexdigest()
    (directory / "manifest.json").write_text(json.dumps(manifest))


def test_verifier_passes_a_good_build(concat_build) -> None:
    report = verify_shards(concat_build)
    assert report.ok, report.summary()
    assert report.shards == len(read_manifest(concat_build)["shards"]) and report.tokens > 0


def test_verifier_catches_a_flipped_byte(concat_build, tmp_path: Path) -> None:
    directory = _copy(concat_build, tmp_path / "flipped")
    path = directory / "shard-00001.bin"
    data = bytearray(path.read_bytes())
    data[100] ^= 0x01
    path.write_bytes(bytes(data))
    report = verify_shards(directory)
    assert not report.ok
    assert report.failures[0].check == "sha256" and report.failures[0].file == path.name


def test_verifier_catches_a_token_outside_the_vocabulary(concat_build, tmp_path: Path) -> None:
    directory = _copy(concat_build, tmp_path / "vocab")
    tokens = np.fromfile(directory / "shard-00002.bin", dtype="<u2")
    tokens[7] = 60_000  # GPT-2 has 50,257 ids
    tokens.tofile(directory / "shard-00002.bin")
    _rehash(directory, 2, "bin")
    report = verify_shards(directory)
    assert report.checks_failed() == {"vocab"}, report.summary()
    assert verify_shards(concat_build, vocab_size=1000).checks_failed() == {"vocab"}


def test_verifier_catches_a_truncated_bin(concat_build, tmp_path: Path) -> None:
    directory = _copy(concat_build, tmp_path / "truncated")
    path = directory / "shard-00000.bin"
    path.write_bytes(path.read_bytes()[:-6])
    assert {"sha256", "size"} <= verify_shards(directory).checks_failed()
    _rehash(directory, 0, "bin")
    assert verify_shards(directory).checks_failed() == {"size"}


def test_verifier_catches_broken_offsets_eos_and_padding(concat_build, tmp_path: Path) -> None:
    directory = _copy(concat_build, tmp_path / "offsets")
    index = bytearray((directory / "shard-00000.idx").read_bytes())
    count = read_manifest(directory)["shards"][0]["sequences"]
    index[34 + 4 * count + 8 * 3] ^= 0x40  # the 4th sequence pointer
    (directory / "shard-00000.idx").write_bytes(bytes(index))
    _rehash(directory, 0, "idx")
    assert verify_shards(directory).checks_failed() == {"offsets"}
    # An EOS written over a document token: one more EOS than occurrences ending there.
    directory = _copy(concat_build, tmp_path / "eos")
    tokens = np.fromfile(directory / "shard-00001.bin", dtype="<u2")
    position = int(np.flatnonzero(tokens != 50256)[0])
    tokens[position] = 50256
    tokens.tofile(directory / "shard-00001.bin")
    _rehash(directory, 1, "bin")
    assert verify_shards(directory).checks_failed() == {"eos"}
    # Padding that is not recorded: the last sequence claims none.
    directory = _copy(concat_build, tmp_path / "padding")
    last = len(read_manifest(directory)["shards"]) - 1
    padding_file = directory / f"shard-{last:05d}.padding.npy"
    np.save(padding_file, np.zeros_like(np.load(padding_file)))
    _rehash(directory, last, "padding")
    assert "padding" in verify_shards(directory).checks_failed()


# --- Megatron-Core reads the shards ----------------------------------------------------------


@pytest.mark.parametrize("name", ["gpt2", "olmo2"])
def test_megatron_indexed_dataset_reads_every_sequence(name, request, docs, tmp_path) -> None:
    require_module("torch")
    require_module("megatron.core")
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    tokenizer = request.getfixturevalue(name)
    manifest = build(occurrences(docs[:50]), tokenizer, tmp_path / name)
    ours, _ = read_tokens(tmp_path / name)
    for shard in manifest["shards"]:
        dataset = IndexedDataset(str(tmp_path / name / shard["name"]))
        assert len(dataset) == shard["sequences"]
        assert dataset.index.dtype == np.dtype(manifest["dtype"]).type
        assert np.array_equal(dataset.document_indices, np.arange(shard["sequences"] + 1))
        for row in range(len(dataset)):
            assert np.array_equal(dataset[row], ours[shard["first_sequence"] + row])
