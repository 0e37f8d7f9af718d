#!/usr/bin/env bash
# A headless browser for tests/test_ui_browser.py: installs Debian's chromium when no chromium
# (or Chrome) is on PATH. Idempotent and quiet; prints only what it installed or why it failed.
set -euo pipefail

for name in chromium chromium-browser google-chrome google-chrome-stable; do
  if command -v "$name" >/dev/null 2>&1; then
    exit 0
  fi
done

if ! command -v apt-get >/dev/null 2>&1; then
  echo "browser.sh: no chromium on PATH and no apt-get to install it; install chromium" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
# The recommended packages bring the fonts the screenshots need.
$sudo apt-get install -y -qq chromium >/dev/null
echo "browser.sh: installed $(chromium --version 2>/dev/null || echo chromium)"
