#!/usr/bin/env bash
# One command: install everything, then run the whole test suite (extra args go to pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The browser test drives Debian's chromium through Playwright (which never downloads a
# browser here). Install it when missing and we may; otherwise that one test is skipped.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq >/dev/null && apt-get install -y -qq chromium >/dev/null \
      || echo "warning: could not install chromium; the browser test will be skipped" >&2
  else
    echo "note: chromium is not installed; the browser test will be skipped (sudo apt-get install -y chromium)" >&2
  fi
fi
# Two workers, a test file each at a time (files share their Spark session and fixtures);
# pass -n 0 to run in one process.
exec .venv/bin/python -m pytest -n 2 --dist loadfile "$@"
