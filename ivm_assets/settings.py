"""The environment variables ivm_assets reads, read and checked in one place.

ivm.yaml (:mod:`ivm_assets.config`) says what a project holds and where; these say how this
process runs it. A project's own ``spark:`` settings win over ``IVM_SPARK_MASTER`` /
``IVM_SPARK_REMOTE``.

============================  ============================================================
``IVM_SPARK_MASTER``          Spark master of a local session (default ``local[*]``)
``IVM_SPARK_REMOTE``          Spark Connect server to attach to (``sc://…``, or ``local``
                              for the warm local server); unset: local Spark
``IVM_SMALL_EPOCHS``          ``auto`` (default: the cost model picks) or ``spark`` (every
                              epoch in Spark, small builds too, to compare the two engines
                              or rule one out)
``IVM_SMALL_BUILD_ROWS``      a full build whose sources hold at most this many rows runs
                              as a small one in Spark (default 50000; ``0``: never, nor in
                              process, see :mod:`ivm_assets.engine.execute`)
``IVM_PROCESS_BUILD_MB``      a full build whose sources' columns it reads take at most
                              this many MiB as Arrow runs in process where its rules
                              translate (default: 1/32 of the memory this process may use;
                              ``0``: never, see :mod:`ivm_assets.engine.execute`)
``IVM_STATE_CACHE_MB``        state rows kept in memory between refreshes, as row groups
                              or as files indexed by key (default: a quarter of the
                              memory this process may use, see :func:`usable_memory`;
                              ``0`` turns the cache off)
``IVM_SPARK_CONNECT_IDLE_S``  how long an auto-started Connect server waits without a
                              client before it stops (default 1800)
``IVM_SPARK_CONNECT_DIR``     where that server records itself (default ``~/.ivm/spark-connect``)
``IVM_SPARK_CONNECT_PORT``    its port (default 15002)
============================  ============================================================

The environment is read on each call, not cached at import: a long-lived process (a Dagster
code server, a test run) sees a variable set after it started. Reading it costs
microseconds (the values are parsed once per combination). Crash injection for the tests
is not a setting: :mod:`ivm_assets.testing`.

>>> current({"IVM_SMALL_EPOCHS": "Spark", "IVM_STATE_CACHE_MB": "0.5"}).small_epochs
'spark'
>>> current({"IVM_STATE_CACHE_MB": "lots"})
Traceback (most recent call last):
...
ivm_assets.errors.IvmError: IVM_STATE_CACHE_MB must be a number of MiB (e.g. 1024, or 0 to turn the cache off), found 'lots'. Fix or unset it in the environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ivm_assets.errors import IvmError

# The state cache's default share of the memory this process may use. Measured (TPC-H SF 1,
# 22 views refreshed in turn by one process, scattered keys): their touched state needs
# ~1.8 GiB decoded; with 1 GiB each view's row groups were pushed out before its next
# refresh (median speed-up 3.8×, q07 0.56 s), with a quarter of 24 GiB they stayed (5.1×,
# q07 0.31 s) for 0.8 GiB more at the peak (benchmarks/README.md; earlier runs in its git history).
STATE_CACHE_SHARE = 0.25
DEFAULT_CONNECT_IDLE_S = 1800.0
DEFAULT_CONNECT_PORT = 15002
SMALL_EPOCHS = ("auto", "spark")
# The names the tests set.
SMALL_EPOCHS_ENV = "IVM_SMALL_EPOCHS"
SMALL_BUILD_ROWS_ENV = "IVM_SMALL_BUILD_ROWS"
# The sources' rows up to which a full build is small (written from the driver): the bound
# a state table's full write from the driver already has (``arrangement.DRIVER_WRITE_ROWS``).
# Raised to 100,000 it made TPC-H Q1's build 0.56x as fast (benchmarks/README.md; earlier runs in its git history).
DEFAULT_SMALL_BUILD_ROWS = 50_000
STATE_CACHE_ENV = "IVM_STATE_CACHE_MB"
PROCESS_BUILD_ENV = "IVM_PROCESS_BUILD_MB"
# A build in process holds its sources' columns, its state and DuckDB's work on the driver:
# at TPC-H SF 1 the Python process peaked at 4.6-7.3 times the columns' Arrow bytes (Q3:
# 347 MiB of columns, 1.7 GiB; Q5: 364 MiB, 2.8 GiB; benchmarks/README.md, "build_memory.py"; measured
# 2026-11-27). A 32nd of the memory keeps such a peak under about a quarter of it.
PROCESS_BUILD_SHARE = 1 / 32


@dataclass(frozen=True)
class Settings:
    spark_master: str | None
    spark_remote: str | None
    small_epochs: str
    small_build_rows: int
    process_build_bytes: int
    state_cache_bytes: int
    connect_idle_s: float
    connect_dir: Path
    connect_port: int

    @property
    def master_or_default(self) -> str:
        return self.spark_master or "local[*]"


# Every variable :func:`current` reads (HOME: the default Connect directory).
_NAMES = (
    SMALL_EPOCHS_ENV, SMALL_BUILD_ROWS_ENV, PROCESS_BUILD_ENV, STATE_CACHE_ENV, "IVM_SPARK_MASTER", "IVM_SPARK_REMOTE",
    "IVM_SPARK_CONNECT_IDLE_S", "IVM_SPARK_CONNECT_DIR", "IVM_SPARK_CONNECT_PORT", "HOME",
)


def current(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings in ``environ`` (default: this process's environment), each checked:
    a malformed value is an :class:`IvmError` naming the variable, the value and the fix.

    The process's own settings are parsed once per combination of the variables' values:
    hot paths ask for them per file they cache (parsing them costs ~0.1 ms)."""
    if environ is None:
        return _parsed(tuple(os.environ.get(name) for name in _NAMES))
    return _parse(environ)


@lru_cache(maxsize=16)
def _parsed(values: tuple[str | None, ...]) -> Settings:
    return _parse({name: value for name, value in zip(_NAMES, values) if value is not None})


def _parse(env: Mapping[str, str]) -> Settings:
    small = (env.get(SMALL_EPOCHS_ENV) or "auto").strip().lower()
    if small not in SMALL_EPOCHS:
        raise _bad(SMALL_EPOCHS_ENV, env[SMALL_EPOCHS_ENV], "auto or spark")
    return Settings(
        spark_master=env.get("IVM_SPARK_MASTER") or None,
        spark_remote=env.get("IVM_SPARK_REMOTE") or None,
        small_epochs=small,
        small_build_rows=int(_number(env, SMALL_BUILD_ROWS_ENV, DEFAULT_SMALL_BUILD_ROWS, "a number of rows (e.g. 50000, or 0 for never)", integer=True)),
        process_build_bytes=int(
            _number(env, PROCESS_BUILD_ENV, usable_memory() * PROCESS_BUILD_SHARE / (1 << 20), "a number of MiB (e.g. 512, or 0 for never)")
            * (1 << 20)
        ),
        state_cache_bytes=int(
            _number(env, STATE_CACHE_ENV, usable_memory() * STATE_CACHE_SHARE / (1 << 20), "a number of MiB (e.g. 1024, or 0 to turn the cache off)")
            * (1 << 20)
        ),
        connect_idle_s=_number(env, "IVM_SPARK_CONNECT_IDLE_S", DEFAULT_CONNECT_IDLE_S, "a number of seconds (e.g. 1800)"),
        connect_dir=Path(env.get("IVM_SPARK_CONNECT_DIR") or Path.home() / ".ivm" / "spark-connect"),
        connect_port=int(_number(env, "IVM_SPARK_CONNECT_PORT", DEFAULT_CONNECT_PORT, "a port number (e.g. 15002)", integer=True)),
    )


@lru_cache(maxsize=1)
def usable_memory() -> int:
    """Bytes of memory this process may use: the machine's, or its container's limit when
    lower (cgroup v2 ``memory.max``, v1 ``memory.limit_in_bytes``; a container sees the
    machine's memory in ``/proc`` and the rest through these). Read once per process; 4 GiB
    where the system does not say (no ``sysconf``)."""
    try:
        found = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        found = 4 << 30
    for limit in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(limit).read_text().strip()
        except OSError:
            continue
        if text.isdigit():  # "max" (v2) or a huge number (v1): no limit
            found = min(found, int(text))
    return found


def _number(env: Mapping[str, str], name: str, default: float, expected: str, *, integer: bool = False) -> float:
    text = env.get(name)
    if text is None or not text.strip():
        return default
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        raise _bad(name, text, expected) from None
    if value < 0:
        raise _bad(name, text, expected)
    return value


def _bad(name: str, found: str, expected: str) -> IvmError:
    return IvmError(f"{name} must be {expected}, found {found!r}. Fix or unset it in the environment.")
