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
  # --no-compile, then compileall on every core: pip compiles one module at a time, a third
  # of the install's time. Compiled here, not left to the first import: where
  # PYTHONDONTWRITEBYTECODE is set (as on the development machine, and in many containers) no
  # import ever writes bytecode, and every fresh process (an `ivm` command, a Dagster run,
  # each test's subprocess) then compiled pandas, pyarrow and the rest again: 2.8 s instead
  # of 1.0 s to import the engine.
  .venv/bin/python -m pip install --quiet --no-compile -e ".[dev]" -c constraints.txt
  .venv/bin/python -m compileall -q -j0 .venv/lib/python*/site-packages ivm_assets >/dev/null \
    || echo "note: some modules could not be byte-compiled; they compile as they load" >&2
  touch "$stamp"
fi
