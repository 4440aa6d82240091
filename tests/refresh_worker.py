"""A long-lived `ivm` process for the concurrency tests: one Spark session, many commands.

Starting Spark costs ~10 s, so each worker starts it once, prints ``READY``, then runs the
real CLI entry (:func:`ivm_assets.cli.run`) once per line of JSON arguments on stdin and
answers each with one ``RESULT {"code": …, "stdout": …, "stderr": …}`` line. EOF ends it.

    python -m tests.refresh_worker
"""

from __future__ import annotations

import io
import json
import sys
import traceback
from contextlib import redirect_stderr, redirect_stdout

from ivm_assets import cli
from ivm_assets.spark.session import get_spark, stop_spark


def main() -> None:
    answer = sys.stdout
    get_spark()
    print("READY", file=answer, flush=True)
    for line in sys.stdin:
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = cli.run(json.loads(line))
            except Exception:
                code = -1
                traceback.print_exc()
        print("RESULT " + json.dumps({"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}), file=answer, flush=True)
    stop_spark()


if __name__ == "__main__":
    main()
