"""Fingerprints a data root, to prove a change left the outputs as they were.

Prints, sorted: the sha256 of every file of every dataset version under `shards/` (the
Megatron shards, `manifest.json`, `spans.parquet`), each partition manifest's version (its data
version), and the sha256 of every Parquet table a partition lists. Diff two runs' output:
`python scripts/fingerprint.py data > before.txt`, change the code, run the sample again,
`python scripts/fingerprint.py data | diff before.txt -`.

Timings, run ids and task statistics are left out: they differ from run to run by design.
"""

import hashlib
import json
import sys
from pathlib import Path


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fingerprint(root: Path) -> list[str]:
    lines = [f"shards-file {path.relative_to(root)} {_sha256(path)}"
             for path in sorted(root.glob("shards/*/*")) if path.parent.name != "sample"
             and not path.name.startswith(".")]
    for manifest_path in sorted(root.glob("*/*/_manifest.json")):
        manifest = json.loads(manifest_path.read_text())
        label = manifest_path.parent.relative_to(root)
        lines.append(f"version {label} {manifest['version']}")
        lines += [f"table {path.relative_to(root)} {_sha256(path)}"
                  for path in sorted(manifest_path.parent.glob("*.parquet"))]
    return lines


if __name__ == "__main__":
    print("\n".join(fingerprint(Path(sys.argv[1] if len(sys.argv) > 1 else "data"))))
