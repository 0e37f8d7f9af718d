"""MosaicML Streaming's MDS format, written by the project: numpy and the standard library only.

Why not the library itself: `mosaicml-streaming` 0.13.0 (the latest) cannot be imported in the
project's environment. `import streaming` imports `transformers` (its dataloader module), and
streaming pins `transformers<5` and `numpy<2.2`; transformers 4.x pins `tokenizers<=0.23.0` and
`huggingface-hub<1.0` and checks them when imported, while the project locks tokenizers 0.23.3
and numpy 2.4. So this module writes the format, and `tests/test_mds.py` proves it against the
real library in its own virtual environment (`.venv-mds`, made by `scripts/mds_venv.sh`): the
same samples written by `streaming.MDSWriter(out=..., columns=..., compression=None,
hashes=None, size_limit=N)` give byte-identical files, and `streaming.StreamingDataset` reads
every sample of ours back.

The format, as `streaming/base/format/mds/writer.py`, `mds/encodings.py` and
`base/format/base/writer.py` of 0.13.0 write it (no compression, no hashes):

- Columns are stored in sorted name order. A sample is the uint32 sizes of its variable-size
  columns, in that order, then every column's bytes: `str` UTF-8, `bytes` as is, `int64` and
  `int32` one little-endian scalar, `ndarray:DTYPE` (dtype fixed, shape free) one byte
  `ndim << 2 | k`, the shape as the smallest unsigned int (k: 0 uint8 ... 3 uint64) holding its
  largest dimension, then the values in C order. The library refuses an array with no element.
- `shard.NNNNN.mds`: the uint32 sample count, the uint32 offsets of each sample and of the end
  (from the start of the file), the shard's configuration as JSON (sorted keys), the samples.
- A sample goes to a new shard when the open shard's size (8 bytes plus its configuration, each
  sample plus 4 bytes) would pass `size_limit`; the check does not look at whether the open
  shard is empty, so a sample alone over the limit follows an empty shard, as in the library.
- `index.json`, last: `{"shards": [...], "version": 2}` with sorted keys, each shard its
  configuration plus `raw_data` (`basename`, `bytes`, `hashes`), `samples` and `zip_data`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

INDEX = "index.json"
UINT32 = np.dtype("<u4")
SCALARS = {"int64": np.int64, "int32": np.int32}
ARRAYS = {f"ndarray:{name}": np.dtype(name) for name in ("uint16", "uint32", "int32")}
ENCODINGS = frozenset({"str", "bytes", *SCALARS, *ARRAYS})
SHAPE_DTYPES = (np.uint8, np.uint16, np.uint32, np.uint64)  # index k of the shape byte


def _encode_array(array: np.ndarray, dtype: np.dtype) -> bytes:
    if not isinstance(array, np.ndarray) or array.dtype != dtype:
        raise ValueError(f"expected a numpy array of {dtype.name}, got {array!r:.80}")
    if array.size == 0 or not 0 < array.ndim < 64:
        raise ValueError(f"MDS arrays hold 1 to 63 axes and at least one value: {array.shape}")
    # The smallest unsigned type that holds the largest dimension, as the library picks it.
    k = next(k for k, bits in enumerate((8, 16, 32, 64)) if max(array.shape) < 1 << bits)
    header = bytes([array.ndim << 2 | k]) + np.array(array.shape, SHAPE_DTYPES[k]).tobytes()
    return header + array.tobytes()


def encode_value(encoding: str, value: Any) -> bytes:
    """`value`'s bytes under the MDS column `encoding`."""
    if encoding in ARRAYS:
        return _encode_array(value, ARRAYS[encoding])
    if encoding in SCALARS:
        return SCALARS[encoding](value).tobytes()
    expected = str if encoding == "str" else bytes
    if not isinstance(value, expected):
        raise ValueError(f"column encoding {encoding} takes {expected.__name__}, "
                         f"got {type(value).__name__}")
    return value.encode("utf-8") if encoding == "str" else value


def _publish(path: Path, chunks: Iterable[bytes]) -> None:
    """Writes under a temporary name, then renames: a reader never sees half a file."""
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "wb") as handle:
        handle.writelines(chunks)
    os.replace(temporary, path)


class MDSWriter:
    """Writes samples (a mapping per sample, one value per column) as an MDS dataset in `out`.

    `columns` maps names to encodings (`ENCODINGS`); `size_limit` is the most bytes per shard
    (`None` or 0: one shard), below 2**32 since offsets are uint32. Holds one shard's samples
    in memory. A context manager; `finish` writes the last shard and `index.json`.
    """

    def __init__(self, out: Path, columns: Mapping[str, str],
                 size_limit: int | None = 1 << 26) -> None:
        unknown = {name: enc for name, enc in columns.items() if enc not in ENCODINGS}
        if unknown:
            raise ValueError(f"unsupported MDS encodings {unknown}; supported: {sorted(ENCODINGS)}")
        if size_limit is not None and not 0 <= size_limit < 1 << 32:
            raise ValueError(f"size_limit must be in [0, 2**32): {size_limit}")
        self.out = Path(out)
        if self.out.exists() and any(self.out.iterdir()):
            raise FileExistsError(f"directory is not empty: {self.out}")
        self.out.mkdir(parents=True, exist_ok=True)
        self.size_limit = size_limit or None
        self.names = sorted(columns)
        self.encodings = [columns[name] for name in self.names]
        self.config = {
            "column_encodings": self.encodings, "column_names": self.names,
            "column_sizes": [np.dtype(SCALARS[e]).itemsize if e in SCALARS else None
                             for e in self.encodings],
            "compression": None, "format": "mds", "hashes": [],
            "size_limit": self.size_limit, "version": 2,
        }
        self.config_bytes = json.dumps(self.config, sort_keys=True).encode("utf-8")
        self.shards: list[dict[str, Any]] = []
        # What a shard holds besides its samples: their count, the end offset, the configuration.
        self._overhead = 4 + 4 + len(self.config_bytes)
        self._samples: list[bytes] = []
        self._size = self._overhead

    def encode_sample(self, sample: Mapping[str, Any]) -> bytes:
        """The bytes of one sample: the sizes of its variable-size columns, then every column."""
        columns = list(zip(self.names, self.encodings, strict=True))
        data = [encode_value(encoding, sample[name]) for name, encoding in columns]
        sizes = [len(datum) for datum, (_, encoding) in zip(data, columns, strict=True)
                 if encoding not in SCALARS]
        return np.array(sizes, UINT32).tobytes() + b"".join(data)

    def write(self, sample: Mapping[str, Any]) -> None:
        """Adds `sample`, first closing the open shard if the sample would take it past the
        limit."""
        encoded = self.encode_sample(sample)
        size = len(encoded) + 4  # its offset
        if self.size_limit and self.size_limit < self._size + size:
            self._flush()
        self._samples.append(encoded)
        self._size += size

    def _flush(self) -> None:
        count = len(self._samples)
        header = 4 + 4 * (count + 1) + len(self.config_bytes)
        ends = np.cumsum([0] + [len(sample) for sample in self._samples]) + header
        if ends[-1] >= 1 << 32:
            raise ValueError(f"an MDS shard holds less than 4 GiB; this one {ends[-1]} bytes")
        name = f"shard.{len(self.shards):05}.mds"
        # Chunk by chunk: the shard is in memory once, as its samples.
        _publish(self.out / name, [np.array([count], UINT32).tobytes(),
                                   ends.astype(UINT32).tobytes(), self.config_bytes,
                                   *self._samples])
        self.shards.append({"raw_data": {"basename": name, "bytes": int(ends[-1]), "hashes": {}},
                            "samples": count, "zip_data": None, **self.config})
        self._samples, self._size = [], self._overhead

    def finish(self) -> None:
        """Writes the open shard, if it holds a sample, then `index.json`."""
        if self._samples:
            self._flush()
        index = json.dumps({"shards": self.shards, "version": 2}, sort_keys=True)
        _publish(self.out / INDEX, [index.encode("utf-8")])

    def __enter__(self) -> MDSWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        # A failed run leaves its shards but no index, so no reader takes it for a dataset.
        if kind is None:
            self.finish()
