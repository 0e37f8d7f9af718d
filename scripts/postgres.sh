#!/usr/bin/env bash
# Makes sure PostgreSQL's server programs (initdb, pg_ctl, postgres) are installed, and prints
# the folder that holds them, e.g. /usr/lib/postgresql/15/bin. Installs Debian's `postgresql`
# package with apt-get when they are missing (needs root). Idempotent and quiet: nothing but
# that folder goes to stdout, errors go to stderr.
#
#   bash scripts/postgres.sh            # install if missing, print the bin folder
#   bash scripts/postgres.sh --check    # print the bin folder, or exit 1 if missing
#   PG_BIN=/opt/pg/bin bash scripts/postgres.sh   # use these binaries instead
#
# It installs the programs only: it starts no server. tests/test_deploy.py starts a private
# cluster with them; production uses a managed Postgres (docs/deploy.md).
set -euo pipefail

find_bin() {
  local dir
  for dir in "${PG_BIN:-}" $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then
      echo "$dir"
      return 0
    fi
  done
  # Other layouts (Homebrew, RPM): initdb on PATH.
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(readlink -f "$(command -v initdb)")"
    return 0
  fi
  return 1
}

if bin=$(find_bin); then
  echo "$bin"
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  echo "postgres.sh: PostgreSQL server programs (initdb, pg_ctl) not found" >&2
  exit 1
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "postgres.sh: PostgreSQL server programs not found and apt-get is not available;" \
       "install PostgreSQL (initdb, pg_ctl) or set PG_BIN" >&2
  exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "postgres.sh: PostgreSQL server programs not found; installing Debian's postgresql" \
       "package needs root: sudo bash $0" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends postgresql; } \
    >"$log" 2>&1; then
  cat "$log" >&2
  echo "postgres.sh: apt-get install postgresql failed" >&2
  exit 1
fi

if bin=$(find_bin); then
  echo "$bin"
else
  echo "postgres.sh: postgresql installed but initdb/pg_ctl were not found" >&2
  exit 1
fi
