#!/usr/bin/env bash
# One command: install everything, build the demo shop project, change its sources, refresh
# incrementally, check every view against a recompute; then serve it in Dagster's UI.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
dir="${1:-demo_project}"
.venv/bin/ivm demo --dir "$dir"
if [ -n "${IVM_DEMO_NO_UI:-}" ]; then
  exit 0
fi
export IVM_DEMO_DIR="$PWD/$dir"
export DAGSTER_HOME="${DAGSTER_HOME:-$PWD/.dagster_home}"
mkdir -p "$DAGSTER_HOME"
cat <<MSG

== Dagster UI ==
Open http://127.0.0.1:3000 and go to Assets → "View lineage" (group ivm_views): click
"Materialize all" to refresh the views (each shows its mode, change rows and source versions
under its latest materialization). Then Jobs → demo_source_changes → Launchpad → Launch run
writes a batch of changes; within a minute the sources are observed and the views downstream
are refreshed incrementally by automation (Automation tab). Ctrl-C stops everything.

MSG
exec .venv/bin/dagster dev -w workspace.yaml -h 127.0.0.1 -p "${IVM_DAGSTER_PORT:-3000}"
