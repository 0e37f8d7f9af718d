#!/usr/bin/env bash
# Runs the tests; assumes scripts/setup.sh has run. Installs what only the tests need.
set -euo pipefail
cd "$(dirname "$0")/.."

# --inexact keeps what the lock file does not list: the test-only packages below.
.venv/bin/uv sync --frozen --inexact --group test --python .venv/bin/python
# A CPU build of torch and megatron-core, to open the shards with Megatron's own reader. They
# stay out of the lock file: resolving torch from the index pulls a CUDA build of several GB;
# pip picks the CPU wheel here.
if ! .venv/bin/python -c "import torch, megatron.core" >/dev/null 2>&1; then
  .venv/bin/python -m pip --version >/dev/null 2>&1 || .venv/bin/python -m ensurepip >/dev/null
  .venv/bin/python -m pip install --quiet --disable-pip-version-check \
    "torch==2.13.0" "megatron-core==0.16.1"
fi
# The real MosaicML Streaming in .venv-mds, beside the project, for tests/test_mds.py.
bash scripts/mds_venv.sh
# Debian's chromium (the UI is checked in a real browser) and PostgreSQL (the production
# instance is tested for real), when missing.
bash scripts/browser.sh
bash scripts/postgres.sh >/dev/null
.venv/bin/ruff check .
.venv/bin/lint-imports
# Two worker processes: one alone keeps about one of the two cores busy (the suite waits on
# subprocesses, servers and a browser); tests/conftest.py keeps each group on one worker.
.venv/bin/python -m pytest -q -n 2 --dist loadgroup --no-loadscope-reorder "$@"
