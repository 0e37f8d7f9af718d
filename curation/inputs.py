"""The `warc_files` stage: which input files a partition reads, with sizes, sha256 and ETags.

A snapshot maps to its WARC files in one of three ways: a local folder or glob, an S3 prefix, or a
Common Crawl `warc.paths.gz` listing (local, s3:// or https://) with a sample size. A curated
source maps to the files of its folder or glob.
"""

from __future__ import annotations

import glob
import gzip
import hashlib
import random
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from curation.code import CODE_SUFFIXES
from curation.config import (
    ListingWarcInput,
    LocalWarcInput,
    PipelineConfig,
    S3WarcInput,
    SnapshotConfig,
    SourceConfig,
)
from curation.schema import WARC_FILES_SCHEMA
from curation.storage import InputReader, list_s3_objects, split_s3_uri

WARC_SUFFIXES = (".warc", ".warc.gz", ".arc", ".arc.gz")
SOURCE_SUFFIXES = {"jsonl": (".jsonl", ".json", ".jsonl.gz"), "parquet": (".parquet",),
                   "text": (".txt", ".md"), "files": (*CODE_SUFFIXES, ".txt")}
_HASH_CHUNK = 1 << 22


@dataclass(frozen=True)
class InputFile:
    location: str
    size: int
    sha256: str
    etag: str | None = None


class InputListingError(ValueError):
    """A partition's inputs cannot be listed (missing folder, empty prefix, bad listing)."""


def _local_files(pattern: str, suffixes: tuple[str, ...], recursive: bool) -> list[str]:
    """A folder's files with `suffixes` (its subfolders' too when `recursive`), or the files a
    glob matches (a glob descends only where it says `**`)."""
    path = Path(pattern)
    if path.is_dir():
        candidates = path.rglob("*") if recursive else path.iterdir()
        found = [str(p) for p in candidates if p.is_file() and p.name.endswith(suffixes)]
    else:
        found = [p for p in glob.glob(pattern, recursive=True) if Path(p).is_file()]
    return sorted(found)


def _nothing_found(partition: str, entry: SnapshotConfig | SourceConfig,
                   pipeline: PipelineConfig) -> InputListingError:
    """The error for a partition without inputs, naming where it looked and what to change."""
    spec = entry.warc if isinstance(entry, SnapshotConfig) else entry
    where = getattr(spec, "path", None) or getattr(spec, "s3_prefix", None) or \
        getattr(spec, "listing", "")
    message = f"{partition}: no input files found at {where}"
    if isinstance(spec, LocalWarcInput):
        folder = Path(pipeline.resolve(spec.path))
        if not folder.exists() and not glob.has_magic(spec.path):
            return InputListingError(f"{message}: {folder} does not exist")
        if folder.is_dir() and not spec.recursive and _local_files(str(folder), WARC_SUFFIXES,
                                                                    recursive=True):
            return InputListingError(f"{message}: the WARC files are in its subfolders; set "
                                     "`recursive: true` under the snapshot's warc to read them")
    return InputListingError(message)


def _sample(lines: list[str], listing: ListingWarcInput) -> list[str]:
    if listing.sample is None:
        return lines
    count = min(listing.sample.files, len(lines))
    if listing.sample.method == "first":
        return lines[:count]
    chosen = random.Random(listing.sample.seed).sample(range(len(lines)), count)
    return [lines[index] for index in sorted(chosen)]


def _listing_locations(listing: ListingWarcInput, pipeline: PipelineConfig,
                       reader: InputReader) -> list[str]:
    raw = reader.read_bytes(pipeline.resolve(listing.listing))
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    lines = [line.strip() for line in raw.decode().splitlines() if line.strip()]
    if not lines:
        raise InputListingError(f"listing {listing.listing} names no files")
    base = listing.base if "://" in listing.base else pipeline.resolve(listing.base)
    separator = "" if base.endswith("/") else "/"
    return [f"{base}{separator}{line}" for line in _sample(lines, listing)]


def list_locations(pipeline: PipelineConfig, partition: str, reader: InputReader) -> list[str]:
    """Every input location of a partition, in a stable order."""
    entry = pipeline.partition_entry(partition)
    if isinstance(entry, SourceConfig):
        found = _local_or_s3(pipeline.resolve(entry.path), SOURCE_SUFFIXES[entry.format], reader,
                             recursive=True)
    else:
        found = _snapshot_locations(entry, pipeline, reader)
    if not found:
        raise _nothing_found(partition, entry, pipeline)
    return found


def name_files(labels: list[str], limit: int = 5) -> str:
    """`a.warc.gz, b.warc.gz and 3 more`: file paths (or `path (note)` labels) by base name,
    for one line of a log, a check description or the CLI."""
    named = [label.rsplit("/", 1)[-1] for label in labels[:limit]]
    more = len(labels) - limit
    return ", ".join(named) + (f" and {more} more" if more > 0 else "")


def ignored_local_files(pipeline: PipelineConfig, partition: str) -> list[str]:
    """Files in a local snapshot folder that are not read as WARC files (WET and WAT files,
    stray downloads), so that a user learns they were left out instead of finding out later."""
    entry = pipeline.partition_entry(partition)
    spec = getattr(entry, "warc", None)
    if not isinstance(spec, LocalWarcInput):
        return []
    folder = Path(pipeline.resolve(spec.path))
    if not folder.is_dir():
        return []
    candidates = folder.rglob("*") if spec.recursive else folder.iterdir()
    return sorted(str(p) for p in candidates
                  if p.is_file() and not p.name.startswith(".")
                  and not p.name.endswith(WARC_SUFFIXES))


def _snapshot_locations(entry: SnapshotConfig, pipeline: PipelineConfig,
                        reader: InputReader) -> list[str]:
    spec = entry.warc
    if isinstance(spec, LocalWarcInput):
        return _local_or_s3(pipeline.resolve(spec.path), WARC_SUFFIXES, reader, spec.recursive)
    if isinstance(spec, S3WarcInput):  # S3 has no folders: every key under the prefix
        return _local_or_s3(spec.s3_prefix, WARC_SUFFIXES, reader, recursive=True)
    return _listing_locations(spec, pipeline, reader)


def _local_or_s3(location: str, suffixes: tuple[str, ...], reader: InputReader,
                 recursive: bool) -> list[str]:
    if not location.startswith("s3://"):
        return _local_files(location, suffixes, recursive)
    bucket, prefix = split_s3_uri(location)
    client = reader.s3_client()
    return sorted(f"s3://{bucket}/{entry['key']}" for entry in list_s3_objects(client, bucket,
                                                                               prefix)
                  if entry["key"].endswith(suffixes))


def describe(location: str, reader: InputReader) -> InputFile:
    """Size, sha256 and (on S3) ETag of one input, read as a stream."""
    digest = hashlib.sha256()
    if location.startswith("s3://"):
        bucket, key = split_s3_uri(location)
        answer = reader.s3_client().get_object(Bucket=bucket, Key=key)
        size = 0
        for chunk in answer["Body"].iter_chunks(_HASH_CHUNK):
            digest.update(chunk)
            size += len(chunk)
        return InputFile(location, size, digest.hexdigest(), answer["ETag"].strip('"'))
    if "://" in location:
        data = reader.read_bytes(location)
        return InputFile(location, len(data), hashlib.sha256(data).hexdigest())
    with open(location, "rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            digest.update(chunk)
    return InputFile(location, Path(location).stat().st_size, digest.hexdigest())


def input_files_table(files: list[InputFile]) -> pa.Table:
    return pa.Table.from_pylist([file.__dict__ for file in files], WARC_FILES_SCHEMA)
