"""The integrity gate's curriculum check: the manifest's phase runs must be the runs that
`spans.parquet` holds, on a real build (GPT-2, main and anneal phases, shards and phase
boundaries inside documents)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curation.shard_integrity import verify_shards
from curation.shards import file_sha256, read_manifest
from curation.tokenizer import load_tokenizer
from tests.test_shards import build, occurrences, real_documents, tokenizer_path


@pytest.fixture(scope="module")
def small_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("integrity")
    build(occurrences(real_documents(40)), load_tokenizer(tokenizer_path("gpt2")), directory,
          seq_len=64, tokens_per_shard=1024)
    return directory


def _copy(source: Path, target: Path) -> Path:
    target.mkdir()
    for path in source.iterdir():
        (target / path.name).write_bytes(path.read_bytes())
    return target


def _write(directory: Path, manifest: dict) -> None:
    (directory / "manifest.json").write_text(json.dumps(manifest))


def test_a_good_build_passes_with_spans_read_group_by_group(small_build, tmp_path) -> None:
    manifest = read_manifest(small_build)
    assert len(manifest["curriculum"]) >= 2 and len(manifest["shards"]) > 4
    assert verify_shards(small_build).ok
    # row groups of 3 spans: sequences straddle row groups
    rebuilt = _copy(small_build, tmp_path / "regrouped")
    pq.write_table(pq.read_table(small_build / "spans.parquet"), rebuilt / "spans.parquet",
                   row_group_size=3)
    assert pq.ParquetFile(rebuilt / "spans.parquet").num_row_groups > 10
    manifest["spans"]["sha256"] = file_sha256(rebuilt / "spans.parquet")
    _write(rebuilt, manifest)
    report = verify_shards(rebuilt)
    assert report.ok, report.summary()


@pytest.mark.parametrize("tamper", ["boundary", "tokens", "order", "missing_phase"])
def test_a_tampered_curriculum_fails(small_build, tmp_path: Path, tamper: str) -> None:
    directory = _copy(small_build, tmp_path / tamper)
    manifest = read_manifest(directory)
    runs = manifest["curriculum"]
    if tamper == "boundary":  # the anneal phase said to start one sequence late
        runs[0]["end_sequence"] += 1
        runs[1]["first_sequence"] += 1
    elif tamper == "tokens":
        name = runs[-1]["phases"][0]
        runs[-1]["tokens"][name] += 1
    elif tamper == "order":
        runs.reverse()
    else:
        runs.pop()
    _write(directory, manifest)
    report = verify_shards(directory)
    assert report.checks_failed() == {"curriculum"}, report.summary()
