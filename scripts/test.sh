#!/usr/bin/env bash
# Runs the tests; assumes scripts/setup.sh has run. Installs what only the tests need.
set -euo pipefail
cd "$(dirname "$0")/.."

.venv/bin/uv sync --frozen --group test --python .venv/bin/python
.venv/bin/ruff check .
.venv/bin/python -m pytest -q "$@"
