#!/usr/bin/env bash
# Creates .venv-mds, the real MosaicML Streaming beside the project (it cannot be imported in
# .venv: curation/mds.py says why), when missing or broken; scripts/test.sh runs it for
# tests/test_mds.py.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv-mds
check() { "$VENV/bin/python" tests/mds_reference.py --check >/dev/null 2>&1; }
if [ -x "$VENV/bin/python" ] && check; then
  exit 0
fi
rm -rf "$VENV"
# The project's interpreter, so the pinned wheels (cp311) fit; pip picks torch's CPU wheel here.
.venv/bin/python -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
  -r scripts/mds-requirements.txt
check || { echo "$VENV: tests/mds_reference.py --check fails" >&2; exit 1; }
