"""All Spark session handling: one shared session per process.

Starting Spark costs ~10 s on a small machine, so every refresh, test and Dagster run in a
process reuses the session made here. Nothing else in ivm_assets builds a SparkSession.

The session is local Spark (``master``, default ``local[*]``) or a Spark Connect client
(``remote``): ``sc://host:port`` for a server elsewhere, or ``local`` for the warm local
server of :mod:`ivm_assets.spark.connect`, started on first use. ``$IVM_SPARK_REMOTE``
gives the default ``remote`` (the test suite runs the engine's tests over Connect with it).
A process is either classic or Connect: pyspark switches its functions to Connect for the
whole process once a Connect session exists.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext

from pyspark.sql import SparkSession

from ivm_assets import settings as ivm_settings
from ivm_assets.errors import IvmError
from ivm_assets.spark.arrow import one_partition_locals
from ivm_assets.spark.cluster import is_local_master

_lock = threading.Lock()
_connect_urls: dict[int, str] = {}  # id(session) -> the URL it was made with (for describe())

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
    # A driver that runs out of heap can leave the job waiting forever (seen: the thread that
    # receives task results died of it, and a refresh hung). Exiting makes the refresh fail
    # loudly instead; its claim expires and the next refresh finishes or redoes the epoch.
    "spark.driver.extraJavaOptions": "-XX:+ExitOnOutOfMemoryError",
    "spark.sql.autoBroadcastJoinThreshold": "10485760",
    "spark.sql.codegen.wholeStage": "true",
    "spark.sql.codegen.factoryMode": "FALLBACK",
    # Generated classes are cached by their code; the default 100 entries hold about two
    # views' plans, so a process refreshing several views compiled (~40 ms a class) on
    # every refresh. The cache lives as long as the process (a Dagster code server, the
    # Connect server): size it for every view it serves.
    "spark.sql.codegen.cache.maxEntries": "2000",
    # PySpark records the Python call site of every DataFrame call for error messages: three
    # JVM round trips and a failed IPython import per call, ~0.1 s of a small refresh's
    # planning. Our errors name the view and the SQL construct instead.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}


# Broadcast joins cost a Spark job each; with small inputs a shuffle inside the same job is
# cheaper, so small epochs broadcast only where an operator asks for it explicitly.
SMALL_CHANGE_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    # Compiling generated code costs more than interpreting a few thousand rows, and even a
    # cached class costs generating its code text (the cache key): a small epoch interprets
    # every expression, projection and ordering. Measured at TPC-H SF 1, 0.1 % batches, over
    # three views refreshed in turn: 38–70 compilations per refresh before, none after; q06
    # 0.9–1.1 s -> 0.64 s, q12 1.9–2.2 s -> 1.2 s, q14 1.6–2.0 s -> 1.2 s. The setting is
    # Spark's switch between the code-generated and interpreted evaluators, which every
    # expression has (the interpreted one is Spark's own fallback when compilation fails).
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


def java_executable(environ: Mapping[str, str] | None = None) -> str | None:
    """The ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java`` when JAVA_HOME is set
    (Spark looks there first, PATH or not), else the first on PATH; None when it is not there."""
    environ = os.environ if environ is None else environ
    home = environ.get("JAVA_HOME")
    if home:
        java = os.path.join(home, "bin", "java")
        return java if os.access(java, os.X_OK) else None
    return shutil.which("java", path=environ.get("PATH", ""))


def check_java() -> None:
    """Fail early, with the fix, when Spark would find no Java runtime to start."""
    if java_executable() is not None:
        return
    if os.environ.get("JAVA_HOME"):
        found = "JAVA_HOME is set but $JAVA_HOME/bin/java does not exist (Spark uses JAVA_HOME before PATH)"
        fix = "Point JAVA_HOME at a Java 17+ installation (the folder holding bin/java), or unset it to use `java` on PATH"
    else:
        found = "`java` was not found on PATH and JAVA_HOME is not set"
        fix = "Install one, e.g. `sudo apt-get install openjdk-17-jre-headless`"
    raise IvmError(f"Spark needs a Java runtime (17 or newer) but {found}. {fix}, then run the command again.")


def get_spark(
    *, master: str | None = None, remote: str | None = None, conf: Mapping[str, str] | None = None
) -> SparkSession:
    """The process-wide Spark session, created on first use.

    ``master`` (default ``local[*]``) or ``remote`` (``sc://…``, or ``local`` for the warm
    local Connect server; default ``$IVM_SPARK_REMOTE``) and extra ``conf`` only take effect
    when the session is first created.
    """
    with _lock:
        active = SparkSession.getActiveSession()
        if active is not None:
            return active
        if remote is None and master is None:
            remote = ivm_settings.current().spark_remote
        if remote is not None:
            return _connect(remote, conf or {})
        check_java()
        # Executors must run the interpreter that runs us, or arrow/pyarrow versions diverge.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        master = master or ivm_settings.current().master_or_default
        if is_local_master(master):
            # Nothing outside this host talks to a local driver: keep its ports off the network.
            # A cluster's executors must reach the driver, so there Spark (or the user's
            # SPARK_LOCAL_IP) picks the address.
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        _remember_jvm_classes()
        builder = SparkSession.builder.appName("ivm_assets").master(master)
        for key, value in {**DEFAULT_CONF, **(conf or {})}.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        # Analysis errors reach the user as SqlErrors; Spark's own log copy is noise.
        session.sparkContext.setLogLevel("ERROR")
        jvm = session.sparkContext._jvm
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
            "SQLQueryContextLogger", jvm.org.apache.logging.log4j.Level.OFF
        )
        logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
        return session


def _remember_jvm_classes() -> None:
    """Keep each JVM class py4j finds by name on the gateway's view, so the next use of the
    name is a Python attribute rather than a round trip to the JVM.

    A classic session looks a class up by name on nearly every DataFrame call
    (``PythonUtils`` to pass its arguments, ``org.apache.spark.sql.functions`` for each
    column function). For a short name the JVM tries each imported package in turn, and a
    package that does not hold the class is a scan of every jar: ~0.9 ms a lookup. The first
    build of the 22 TPC-H views (SF 0.002) made 15,000 lookups, 4.8 s of its 80 s. A name
    means the same class for the gateway's life: pyspark makes its imports when it opens
    the gateway, and ivm adds none."""
    from py4j.java_gateway import JavaClass, JVMView

    if getattr(JVMView.__getattr__, "remembers_classes", False):
        return
    look_up = JVMView.__getattr__

    def remembering(view: JVMView, name: str):
        found = look_up(view, name)
        if isinstance(found, JavaClass):
            view.__dict__[name] = found  # found as an attribute from now on: __getattr__ is not called
        return found

    remembering.remembers_classes = True  # type: ignore[attr-defined]
    JVMView.__getattr__ = remembering


def _connect(remote: str, conf: Mapping[str, str]) -> SparkSession:
    """A Spark Connect session. Only SQL and Hadoop settings can be set per session; the
    server's own settings (memory, master, UI) are fixed when it starts (``ivm spark start
    --conf``), and any other key is an error rather than silently dropped."""
    if remote == "local":
        from ivm_assets.spark.connect import default_idle_timeout, start_server

        # Started here on a refresh's behalf: it stops once no run has used it for a while.
        starter = f"a refresh (pid {os.getpid()}: {' '.join(sys.argv)[:120]})"
        remote = start_server(started_by=starter, idle_timeout_s=default_idle_timeout()).url
    elif not remote.startswith("sc://"):
        raise IvmError(f"expected a Spark Connect URL like sc://host:15002 (or `local`), found {remote!r}")
    fixed = sorted(k for k in conf if not k.startswith(("spark.sql.", "spark.hadoop.")))
    if fixed:
        raise IvmError(
            f"Spark settings {', '.join(fixed)} cannot be set by a Spark Connect client ({remote}): they are the server's. "
            "Start the server with them (`ivm spark start --conf KEY=VALUE`, or the cluster's own configuration), "
            "or give them only where Spark runs in this process (`master`)."
        )
    settings = {k: v for k, v in {**DEFAULT_CONF, **conf}.items() if k.startswith("spark.sql.")}
    for key, value in conf.items():
        if key.startswith("spark.hadoop."):
            # A session's settings reach the Hadoop configuration its file reads and writes
            # use, under their own names: `spark.hadoop.` is only SparkConf's way to say so.
            settings[key.removeprefix("spark.hadoop.")] = value
    builder = SparkSession.builder.remote(remote)
    for key, value in settings.items():
        builder = builder.config(key, value)
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    session = builder.getOrCreate()
    _connect_urls[id(session)] = remote
    return session


@contextmanager
def tuned_for(spark: SparkSession, *, small: bool) -> Iterator[None]:
    """Session settings for one epoch: few partitions and no adaptive re-planning for small
    change sets (each Spark job then costs ~0.1 s instead of ~0.5 s), defaults otherwise;
    small change sets enter Spark as one partition each (see :func:`one_partition_locals`)."""
    settings = SMALL_CHANGE_CONF if small else {k: DEFAULT_CONF[k] for k in SMALL_CHANGE_CONF}
    previous = {k: spark.conf.get(k, None) for k in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        with one_partition_locals() if small else nullcontext():
            yield
    finally:
        for key, value in previous.items():
            if value is not None:
                spark.conf.set(key, value)


# The session settings that change what a view's SQL means: its types (ANSI's stricter casts
# and type coercion), its values (overflow, invalid casts and division by zero raise under
# ANSI, give NULL or wrap without) and how timestamps read. Both engines follow the
# session's: Spark by running in it, DuckDB by its time zone and by leaving every error to
# Spark (an epoch DuckDB cannot finish runs in Spark, which raises or not as ANSI says).
SEMANTIC_SETTINGS = {"ansi": "spark.sql.ansi.enabled", "time_zone": "spark.sql.session.timeZone"}


def semantics(spark: SparkSession | LazySession) -> dict[str, str]:
    """The session's :data:`SEMANTIC_SETTINGS` (ANSI: Spark 4's default is on); of a
    :class:`LazySession` not started yet, the ones it will start with."""
    if isinstance(spark, LazySession) and not spark.started:
        return spark.planned_semantics()
    found = {name: str(spark.conf.get(key)) for name, key in SEMANTIC_SETTINGS.items()}  # unset: Spark's default
    found["ansi"] = found["ansi"].lower()
    return found


class LazySession:
    """The Spark session :func:`get_spark` gives, started when something first uses it.

    A refresh holds one, and touches it only when a view must be analyzed or an epoch runs
    in Spark: a small refresh whose view compiles from its records and whose epoch runs in
    process starts no JVM (Spark takes ~10 s to start, the epoch ~0.1 s). Every attribute
    of a session is the started session's.
    """

    def __init__(self, *, master: str | None = None, remote: str | None = None, conf: Mapping[str, str] | None = None) -> None:
        self._master, self._remote, self._conf = master, remote, dict(conf or {})
        self._session: SparkSession | None = None
        self._on_start: dict[object, Callable[[SparkSession], None]] = {}

    def on_start(self, key: object, action: Callable[[SparkSession], None]) -> None:
        """Run ``action`` on the session once it starts (now, if it has): a check of what
        only a started session knows (the master a Spark Connect server runs on), or
        settings to give it. One action per ``key``."""
        if self._session is not None:
            action(self._session)
        else:
            self._on_start[key] = action

    @property
    def started(self) -> bool:
        return self._session is not None

    @property
    def master(self) -> str:
        """The local master the session will run on (when it is not a Connect session)."""
        return self._master or ivm_settings.current().master_or_default

    def session(self) -> SparkSession:
        if self._session is None:
            session = get_spark(master=self._master, remote=self._remote, conf=self._conf)
            for action in self._on_start.values():
                action(session)  # a check raises before anything used the session
            self._session, self._on_start = session, {}
        return self._session

    def planned_semantics(self) -> dict[str, str]:
        """The :data:`SEMANTIC_SETTINGS` the session will have, known without starting it
        for a local session (from the settings it is made with); a Spark Connect session's
        come from its server, so that one is asked (connecting starts no local JVM)."""
        active = SparkSession.getActiveSession()
        if active is not None:  # the session get_spark would give
            return semantics(active)
        remote = self.remote
        if remote == "local":
            from ivm_assets.spark.connect import server_status

            if server_status() is None:
                remote = None  # the warm server this would start runs with these very settings
        if remote:
            return semantics(self.session())
        conf = {**DEFAULT_CONF, **self._conf}
        return {"ansi": str(conf.get(SEMANTIC_SETTINGS["ansi"], "true")).lower(), "time_zone": conf[SEMANTIC_SETTINGS["time_zone"]]}

    @property
    def remote(self) -> str | None:
        """The Spark Connect server the session will attach to (None: local Spark)."""
        if self._remote is not None or self._master is not None:
            return self._remote
        return ivm_settings.current().spark_remote

    def __getattr__(self, name: str):
        return getattr(self.session(), name)


def describe(spark: SparkSession | LazySession) -> str:
    """``connect sc://host:port`` for a Spark Connect session, else the master (``local[*]`` …);
    for a :class:`LazySession` that nothing started, where it would run, and that it did not."""
    if isinstance(spark, LazySession):
        if not spark.started:
            target = f"connect {spark.remote}" if spark.remote else spark.master
            return f"{target} (not started: nothing ran in Spark)"
        spark = spark.session()
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return f"connect {_connect_urls.get(id(spark), 'sc://?')}"
    return spark.sparkContext.master


def stop_spark() -> None:
    """Stop the shared session (tests and the CLI call this once at exit)."""
    with _lock:
        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()
