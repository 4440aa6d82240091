#!/usr/bin/env bash
# Shared by scripts/demo.sh and scripts/test.sh: check Java, make .venv, install ivm_assets
# (with the pinned test environment of constraints.txt).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v java >/dev/null 2>&1 && [ -z "${JAVA_HOME:-}" ]; then
  echo "error: Spark needs Java 17 or newer, and no 'java' was found on PATH (JAVA_HOME is not set either)." >&2
  echo "Install it, e.g. 'sudo apt-get install -y openjdk-17-jre-headless', then run this command again." >&2
  exit 1
fi
java_major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
if [ -n "$java_major" ] && [ "$java_major" -lt 17 ]; then
  echo "error: Spark 4 needs Java 17 or newer; found Java $java_major. Install openjdk-17 and put it first on PATH." >&2
  exit 1
fi

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.ivm-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  # pyproject.toml declares ranges; constraints.txt pins the exact versions the suite runs on.
  # --no-compile: byte-compiling every module of every dependency is a third of the install's
  # time; the modules a run imports compile as they load (once, into __pycache__).
  .venv/bin/python -m pip install --quiet --no-compile -e ".[dev]" -c constraints.txt
  touch "$stamp"
fi
