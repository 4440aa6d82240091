"""All Spark session handling: one shared session per process.

Starting Spark costs ~10 s on a small machine, so every refresh, test and Dagster run in a
process reuses the session made here. Nothing else in ivm_assets builds a SparkSession.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from pyspark.sql import SparkSession

from ivm_assets.errors import IvmError

_lock = threading.Lock()

# Small change sets dominate incremental refreshes: a few shuffle partitions keep the
# per-task overhead low; adaptive execution coalesces further and still scales up for full
# refreshes. INT96 timestamps would not round-trip through Arrow/Delta unchanged.
DEFAULT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.driver.memory": "4g",
    "spark.sql.ansi.enabled": "false",
    "spark.sql.autoBroadcastJoinThreshold": "10485760",
    "spark.sql.codegen.wholeStage": "true",
}


# Broadcast joins cost a Spark job each; with small inputs a shuffle inside the same job is
# cheaper, so small epochs broadcast only where an operator asks for it explicitly.
SMALL_CHANGE_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    # Compiling generated code costs more than interpreting a few thousand rows.
    "spark.sql.codegen.wholeStage": "false",
}


def check_java() -> None:
    """Fail early, with the fix, when no Java runtime is on the machine."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise IvmError(
            "Spark needs a Java runtime (17 or newer) but `java` was not found on PATH and "
            "JAVA_HOME is not set. Install one, e.g. `sudo apt-get install openjdk-17-jre-headless`, "
            "then run the command again."
        )


def get_spark(
    *, master: str | None = None, remote: str | None = None, conf: Mapping[str, str] | None = None
) -> SparkSession:
    """The process-wide Spark session, created on first use.

    ``master`` (default ``local[*]``) or ``remote`` (a Spark Connect URL ``sc://…``) and extra
    ``conf`` only take effect when the session is first created.
    """
    with _lock:
        active = SparkSession.getActiveSession()
        if active is not None:
            return active
        if remote is None:
            check_java()
        # Executors must run the interpreter that runs us, or arrow/pyarrow versions diverge.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = SparkSession.builder.appName("ivm_assets")
        if remote:
            builder = builder.remote(remote)
        else:
            builder = builder.master(master or os.environ.get("IVM_SPARK_MASTER", "local[*]"))
        for key, value in {**DEFAULT_CONF, **(conf or {})}.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        if remote is None:
            # Analysis errors reach the user as SqlErrors; Spark's own log copy is noise.
            session.sparkContext.setLogLevel("ERROR")
            jvm = session.sparkContext._jvm
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
                "SQLQueryContextLogger", jvm.org.apache.logging.log4j.Level.OFF
            )
        logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
        return session


@contextmanager
def tuned_for(spark: SparkSession, *, small: bool) -> Iterator[None]:
    """Session settings for one epoch: few partitions and no adaptive re-planning for small
    change sets (each Spark job then costs ~0.1 s instead of ~0.5 s), defaults otherwise."""
    settings = SMALL_CHANGE_CONF if small else {k: DEFAULT_CONF[k] for k in SMALL_CHANGE_CONF}
    previous = {k: spark.conf.get(k, None) for k in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is not None:
                spark.conf.set(key, value)


def stop_spark() -> None:
    """Stop the shared session (tests and the CLI call this once at exit)."""
    with _lock:
        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()
