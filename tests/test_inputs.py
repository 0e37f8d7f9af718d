"""Snapshot inputs: folders, globs and Common Crawl listings with a sample size."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import pytest

from curation.config import ConfigError, load_pipeline
from curation.inputs import InputListingError, describe, list_locations
from curation.storage import InputReader

LISTING = [f"crawl-data/CC-MAIN-2099-01/segments/{i}/warc/file-{i:05d}.warc.gz" for i in range(40)]


def _pipeline(tmp_path: Path, snapshot_yaml: str) -> Path:
    path = tmp_path / "pipeline.yaml"
    path.write_text(f"version: 1\nsnapshots:\n  S:\n    warc: {snapshot_yaml}\n")
    return path


@pytest.fixture
def listing(tmp_path: Path) -> Path:
    path = tmp_path / "warc.paths.gz"
    path.write_bytes(gzip.compress("\n".join(LISTING).encode() + b"\n"))
    return path


def test_listing_first_n(tmp_path, listing) -> None:
    config = load_pipeline(_pipeline(
        tmp_path, "{listing: warc.paths.gz, base: 'https://data.example.org/', "
                  "sample: {files: 3}}"))
    assert list_locations(config, "S", InputReader()) == [
        f"https://data.example.org/{line}" for line in LISTING[:3]]


def test_listing_seeded_sample_is_stable_and_seed_dependent(tmp_path, listing) -> None:
    def chosen(seed: int) -> list[str]:
        config = load_pipeline(_pipeline(
            tmp_path, f"{{listing: warc.paths.gz, sample: {{files: 5, method: random, "
                      f"seed: {seed}}}}}"))
        return list_locations(config, "S", InputReader())

    first = chosen(1)
    assert first == chosen(1) and first != chosen(2)
    assert len(set(first)) == 5
    assert all(location.startswith("s3://commoncrawl/crawl-data/") for location in first)
    # Kept in listing order, so task numbers follow the listing.
    assert first == sorted(first, key=lambda loc: LISTING.index(loc[len("s3://commoncrawl/"):]))


def _found(tmp_path: Path, snapshot_yaml: str, folder: Path) -> list[str]:
    config = load_pipeline(_pipeline(tmp_path, snapshot_yaml))
    return [Path(p).relative_to(folder).as_posix()
            for p in list_locations(config, "S", InputReader())]


def test_folder_and_glob_inputs(tmp_path) -> None:
    folder = tmp_path / "crawl"
    (folder / "sub").mkdir(parents=True)
    for name in ("b.warc.gz", "a.warc", "sub/c.warc.gz", "notes.txt"):
        (folder / name).write_bytes(b"x")
    # A folder is read flat unless the snapshot asks for its subfolders.
    assert _found(tmp_path, "{path: crawl}", folder) == ["a.warc", "b.warc.gz"]
    assert _found(tmp_path, "{path: crawl, recursive: true}", folder) == [
        "a.warc", "b.warc.gz", "sub/c.warc.gz"]
    # A glob descends only where it says **.
    assert _found(tmp_path, "{path: 'crawl/*.warc.gz'}", folder) == ["b.warc.gz"]
    assert _found(tmp_path, "{path: 'crawl/**/*.warc.gz'}", folder) == [
        "b.warc.gz", "sub/c.warc.gz"]


def test_a_snapshot_folder_does_not_take_in_its_subfolders(shared_data, tmp_path) -> None:
    """The trial's case: a `warc/` snapshot took in the other crawls under `warc/non_cc/`."""
    folder = shared_data / "warc"
    flat = _found(tmp_path, f"{{path: '{folder}'}}", folder)
    assert flat == sorted(p.name for p in folder.glob("*.warc*") if p.name.endswith(
        (".warc", ".warc.gz")))
    assert flat and not any(name.startswith("non_cc/") for name in flat)
    every = _found(tmp_path, f"{{path: '{folder}', recursive: true}}", folder)
    assert [name for name in every if name.startswith("non_cc/")] == sorted(
        f"non_cc/{p.name}" for p in (folder / "non_cc").glob("*.warc.gz"))


def test_recursion_is_for_folders_and_a_flat_miss_says_how_to_descend(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"recursive applies to a folder.*write \*\*"):
        load_pipeline(_pipeline(tmp_path, "{path: 'crawl/*.warc.gz', recursive: true}"))
    (tmp_path / "crawl" / "2024").mkdir(parents=True)
    (tmp_path / "crawl" / "2024" / "a.warc.gz").write_bytes(b"x")
    config = load_pipeline(_pipeline(tmp_path, "{path: crawl}"))
    with pytest.raises(InputListingError, match="in its subfolders; set `recursive: true`"):
        list_locations(config, "S", InputReader())


def test_an_empty_input_is_a_clear_error(tmp_path) -> None:
    (tmp_path / "empty").mkdir()
    config = load_pipeline(_pipeline(tmp_path, "{path: empty}"))
    with pytest.raises(InputListingError, match="S: no input files found at empty"):
        list_locations(config, "S", InputReader())
    config = load_pipeline(_pipeline(tmp_path, "{path: missing}"))
    with pytest.raises(InputListingError, match=f"{tmp_path / 'missing'} does not exist"):
        list_locations(config, "S", InputReader())


def test_describe_hashes_the_whole_file(tmp_path) -> None:
    path = tmp_path / "f.warc.gz"
    data = bytes(range(256)) * 40_000
    path.write_bytes(data)
    described = describe(str(path), InputReader())
    assert described.size == len(data)
    assert described.sha256 == hashlib.sha256(data).hexdigest()
