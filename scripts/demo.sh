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
# Pools (one run per project at a time) and freshness evaluation for the demo.
cp dagster.yaml "$DAGSTER_HOME/dagster.yaml"

# A warm Spark for the runs: one Spark Connect server, started once, stopped on exit if we
# started it (one that was already running is left alone).
started_spark=""
if ! .venv/bin/ivm spark status >/dev/null 2>&1; then
  echo "starting the warm Spark (a local Spark Connect server, ~20 s)..."
  .venv/bin/ivm spark start
  started_spark=1
fi
stop_spark() { if [ -n "$started_spark" ]; then .venv/bin/ivm spark stop; fi; }
trap stop_spark EXIT

cat <<MSG

== Dagster UI ==
Open http://127.0.0.1:${IVM_DAGSTER_PORT:-3000}. Within about 30 s the sensor ivm_demo_source_sensor observes the
sources and automation (ivm_demo_automation) builds the five views: Runs shows that run.
Assets → group ivm_views: each view shows its mode, change rows, source versions, column
lineage and freshness. Then Jobs → demo_source_changes → Launchpad → Launch run writes a
batch of changes; within a tick the changed sources are observed and the views downstream
are refreshed incrementally (ivm/mode: incremental). "Materialize" on a view refreshes it
by hand (unchanged if its sources did not move). Ctrl-C stops everything.

MSG
# Not exec: the trap above stops the Spark server when dg dev ends.
.venv/bin/dg dev -w workspace.yaml -h 127.0.0.1 -p "${IVM_DAGSTER_PORT:-3000}"
