#!/usr/bin/env bash
# Sets up everything on a machine that has python3 and the package registries, then runs the
# main job on the built-in sample. Leaves the virtual environment in .venv.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# uv is itself a locked dependency, so `uv sync` keeps it in .venv.
if [ ! -x .venv/bin/uv ]; then
  .venv/bin/python -m pip --version >/dev/null 2>&1 || .venv/bin/python -m ensurepip >/dev/null
  .venv/bin/python -m pip install --quiet --disable-pip-version-check "uv==0.13.9"
fi
.venv/bin/uv sync --frozen --python .venv/bin/python
.venv/bin/corpus sample run "$@"
