#!/usr/bin/env bash
# One command: install everything, then build the demo shop project, change its sources,
# refresh incrementally, and check every view against a recompute.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/ivm demo --dir "${1:-demo_project}"
