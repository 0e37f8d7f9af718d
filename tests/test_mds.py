"""curation.mds against the real MosaicML Streaming (in `.venv-mds`, made by
scripts/mds_venv.sh): the library's own `MDSWriter` writes byte-identical files from the same
samples, and its `StreamingDataset` reads every sample of ours back."""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest

from curation.mds import MDSWriter, encode_value
from tests.conftest import REPO
from tests.mds_reference import to_json

VENV_PYTHON = REPO / ".venv-mds" / "bin" / "python"
COLUMNS = {"text": "str", "raw": "bytes", "doc": "int64", "position": "int32",
           "tokens": "ndarray:uint16", "wide": "ndarray:uint32", "ids": "ndarray:int32"}
TEXTS = ["", "plain ASCII", "Grüße aus Köln", "日本語のテキストです", "مرحبا بالعالم",
         "emoji 🙂🚀 and a NUL \x00 inside", "line\nbreaks\ttabs", "x" * 3000]


def reference_python() -> str:
    """`.venv-mds`'s python, else a skip with the reason; in CI (CI set) its absence fails."""
    if VENV_PYTHON.exists():
        return str(VENV_PYTHON)
    reason = f"{VENV_PYTHON.parent.parent} is missing; `bash scripts/mds_venv.sh` creates it"
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def make_samples(count: int, seed: int) -> list[dict]:
    """Every encoding, with its edges: empty and non-ASCII text, empty bytes, extreme integers,
    arrays of one value, 2-D ones and dimensions that need uint16 and uint32 in the shape."""
    rng = np.random.default_rng(seed)
    samples = []
    for i in range(count):
        length = int(rng.integers(1, 400))
        ids = rng.integers(-2**31, 2**31, size=length, dtype=np.int32)
        samples.append({
            "text": TEXTS[i % len(TEXTS)] * int(rng.integers(1, 4)),
            "raw": rng.bytes(int(rng.integers(0, 64))),
            "doc": [-2**63, 2**63 - 1, i][i % 3], "position": [-2**31, 2**31 - 1, i][i % 3],
            "tokens": rng.integers(0, 2**16, size=length, dtype=np.uint16),
            "wide": rng.integers(0, 2**32, size=(1 + i % 3, 1 + i % 5), dtype=np.uint32),
            "ids": ids if i % 4 else ids[:1],
        })
    samples[1]["raw"] = b""
    # A dimension that needs uint32 in the shape, in a sample alone over a 16 KiB limit.
    samples[7]["wide"] = np.arange(70_000, dtype=np.uint32)
    return samples


def exact_limit(folder, sample: dict, per_shard: int) -> int:
    """The size_limit that `per_shard` copies of `sample` fill to the byte: a shard rule off by
    one byte, or by one byte per sample, writes other shards at it or one byte below it."""
    placeholder = 10_000  # the configuration holds the limit's digits: the result has five too
    writer = MDSWriter(folder, COLUMNS, size_limit=placeholder)
    limit = 8 + len(writer.config_bytes) + per_shard * (len(writer.encode_sample(sample)) + 4)
    assert len(str(limit)) == len(str(placeholder))
    return limit


def write_ours(folder, samples: list[dict], size_limit: int | None) -> None:
    with MDSWriter(folder, COLUMNS, size_limit=size_limit) as writer:
        for sample in samples:
            writer.write(sample)


def as_json(samples: list[dict]) -> list[dict]:
    return [{name: to_json(COLUMNS[name], value) for name, value in sample.items()}
            for sample in samples]


def test_mds_matches_the_library_byte_for_byte_and_reads_back(tmp_path) -> None:
    python = reference_python()
    samples = make_samples(160, seed=5)
    big_first = [samples[7]] + samples[:20]  # alone over the limit: an empty shard comes first
    long = samples[15]  # TEXTS[-1]: some kilobytes, so that four fill a five-digit limit
    exact = exact_limit(tmp_path / "probe", long, 4)
    cases = [("several", samples, 1 << 14), ("one", samples, None), ("big", big_first, 1 << 12),
             ("exact", [long] * 12, exact), ("below", [long] * 12, exact - 1)]
    spec = {"columns": COLUMNS, "cases": []}
    for name, items, size_limit in cases:
        write_ours(tmp_path / name / "ours", items, size_limit)
        (tmp_path / f"{name}.json").write_text(json.dumps(as_json(items)))
        spec["cases"].append({"samples": str(tmp_path / f"{name}.json"), "size_limit": size_limit,
                              "ours": str(tmp_path / name / "ours"),
                              "theirs": str(tmp_path / name / "theirs")})
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    # The library's file locks go to the temporary folder: keep them under tmp_path.
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    subprocess.run([python, str(REPO / "tests" / "mds_reference.py"), str(tmp_path / "spec.json"),
                    str(tmp_path / "result.json")], check=True, env=env, timeout=120)
    result = json.loads((tmp_path / "result.json").read_text())

    for (name, items, _), read in zip(cases, result["reads"], strict=True):
        ours, theirs = tmp_path / name / "ours", tmp_path / name / "theirs"
        files = sorted(path.name for path in theirs.iterdir())
        assert sorted(path.name for path in ours.iterdir()) == files
        for file in files:
            assert (ours / file).read_bytes() == (theirs / file).read_bytes(), (name, file)
        assert read == as_json(items), name
    shards = json.loads((tmp_path / "several" / "ours" / "index.json").read_text())["shards"]
    assert len(shards) > 5 and sum(shard["samples"] for shard in shards) == len(samples)
    big = json.loads((tmp_path / "big" / "ours" / "index.json").read_text())["shards"]
    assert big[0]["samples"] == 0 and big[1]["samples"] == 1
    assert result["empty_array_error"].startswith("ValueError")


def test_mds_edges(tmp_path) -> None:
    with MDSWriter(tmp_path / "none", COLUMNS):  # no sample: no shard, as the library writes it
        pass
    assert (tmp_path / "none" / "index.json").read_text() == '{"shards": [], "version": 2}'
    with pytest.raises(KeyError), MDSWriter(tmp_path / "failed", COLUMNS) as writer:
        writer.write({"text": "a column short"})
    assert not (tmp_path / "failed" / "index.json").exists()  # no reader takes it for a dataset


def test_mds_refuses_what_the_library_refuses(tmp_path) -> None:
    with pytest.raises(ValueError):  # the library: "Attempting to encode ... with 0 elements"
        encode_value("ndarray:uint16", np.zeros(0, np.uint16))
    with pytest.raises(ValueError):
        encode_value("ndarray:uint16", np.arange(3, dtype=np.int32))
    with pytest.raises(ValueError):
        encode_value("str", b"bytes")
    with pytest.raises(ValueError):
        MDSWriter(tmp_path / "a", {"x": "pkl"})
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "stale").write_text("")
    with pytest.raises(FileExistsError):
        MDSWriter(tmp_path / "b", COLUMNS)

