"""The real MosaicML Streaming's side of tests/test_mds.py, run by `.venv-mds/bin/python`.

`python tests/mds_reference.py SPEC RESULT`: for each case of SPEC (JSON: `columns`, and per
case `samples`, `size_limit`, `ours`, `theirs`) writes the samples with `streaming.MDSWriter`
into `theirs` and reads `ours` with `streaming.StreamingDataset`; RESULT (JSON) holds what each
read gave and the error the library's writer raises on an array with no element. `--check` only
imports the library (scripts/mds_venv.sh's check).

Samples travel as JSON (`to_json`, `from_json`; the test uses them too): arrays as nested
lists, bytes as base64. Standard library and numpy only at import, so both environments load it.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np


def import_streaming() -> tuple[type, type]:
    """`MDSWriter` and `StreamingDataset` from `streaming.base`, without running the `streaming`
    package's __init__: it imports the vision datasets, hence torchvision, whose PyPI wheel
    needs a CUDA build of torch (`.venv-mds` holds the CPU one). Nothing in `streaming.base`
    imports them."""
    spec = importlib.util.find_spec("streaming")
    package = types.ModuleType("streaming")
    package.__path__ = list(spec.submodule_search_locations)
    sys.modules["streaming"] = package
    from streaming.base import MDSWriter, StreamingDataset

    return MDSWriter, StreamingDataset


def to_json(encoding: str, value: Any) -> Any:
    if encoding == "bytes":
        return base64.b64encode(value).decode("ascii")
    if encoding.startswith("ndarray:") or encoding in ("int64", "int32"):
        return np.asarray(value).tolist()
    return value


def from_json(encoding: str, value: Any) -> Any:
    if encoding == "bytes":
        return base64.b64decode(value)
    if encoding.startswith("ndarray:"):
        return np.array(value, encoding.split(":")[1])
    return value


def _empty_array_error(writer_class: type, folder: Path) -> str:
    try:
        with writer_class(out=str(folder), columns={"a": "ndarray:uint16"}) as writer:
            writer.write({"a": np.zeros(0, np.uint16)})
    except Exception as error:  # whatever type the library raises
        return f"{type(error).__name__}: {error}"
    return ""


def run(spec: dict[str, Any]) -> dict[str, Any]:
    writer_class, dataset_class = import_streaming()
    columns = spec["columns"]
    reads = []
    for case in spec["cases"]:
        samples = json.loads(Path(case["samples"]).read_text())
        with writer_class(out=case["theirs"], columns=columns, compression=None, hashes=None,
                          size_limit=case["size_limit"]) as writer:
            for sample in samples:
                writer.write({name: from_json(columns[name], v) for name, v in sample.items()})
        dataset = dataset_class(local=case["ours"], shuffle=False, batch_size=1)
        reads.append([{name: to_json(columns[name], v) for name, v in sample.items()}
                      for sample in dataset])
    empty = Path(spec["cases"][0]["theirs"]).parent / "empty-array"
    return {"reads": reads, "empty_array_error": _empty_array_error(writer_class, empty)}


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        import_streaming()
    else:
        result = run(json.loads(Path(sys.argv[1]).read_text()))
        Path(sys.argv[2]).write_text(json.dumps(result))
