"""One exception tree for everything ivm_assets raises on purpose.

Every message says what was expected, what was found, where, and what to do next.
The CLI prints ``str(error)`` and exits non-zero; nothing else is needed to act on it.
"""

from __future__ import annotations


class IvmError(Exception):
    """Base of every error ivm_assets raises deliberately."""


class ConfigError(IvmError):
    """`ivm.yaml` or the project folder is not what it must be."""


class SourceError(IvmError):
    """A source table cannot be read as needed (not a Delta table, no change data feed, …)."""


class StorageError(IvmError):
    """The store holding a table cannot be used as configured: a missing bucket or container,
    refused credentials, an unreachable endpoint. Names the table and the setting to check,
    never a secret's value."""


class ViewCycleError(IvmError):
    """Views refer to each other in a cycle."""


class SqlError(IvmError):
    """A view's SQL is malformed, names something unknown, or cannot be maintained as asked.

    Carries the location so tools (CLI, Dagster) can point at the construct.
    """

    def __init__(
        self,
        message: str,
        *,
        view: str,
        file: str | None = None,
        line: int | None = None,
        col: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.view = view
        self.file = file
        self.line = line
        self.col = col
        self.hint = hint
        self.detail = message
        where = file or f"view {view!r}"
        if line is not None:
            where += f":{line}:{col if col is not None else 1}"
        text = f"{where}: view {view!r}: {message}"
        if hint:
            text += f"\n  hint: {hint}"
        super().__init__(text)


class NotIncrementalError(SqlError):
    """A view with ``refresh: incremental`` uses a construct that is only maintained by full recompute."""


class LoweringError(IvmError):
    """A SQL construct has no lowering rule. Internal: compiling a view records it as the
    reason the view is refreshed by full recompute (with ``node``'s line and column, when
    given), or turns it into a :class:`NotIncrementalError` under ``refresh: incremental``."""

    def __init__(self, message: str, node: object | None = None) -> None:
        super().__init__(message)
        self.node = node


class Untranslatable(IvmError):
    """Internal: an expression or plan whose in-process result could differ from Spark's.
    Raised by the DuckDB renderer (:mod:`ivm_assets.render.duckdb`) and caught where an epoch
    chooses its engine: the epoch then runs in Spark, and the reason is recorded, with the
    operator whose rule or inputs raised it (``operator``, its id) where one did."""

    operator: str | None = None


class RefreshError(IvmError):
    """A refresh could not be carried out (the view's previous output is left as it was)."""


class RebuildNeeded(RefreshError):
    """An incremental epoch met state it cannot carry on from. Under ``refresh: auto`` the
    view is rebuilt from its sources at once, with :attr:`reason` recorded; otherwise the
    refresh fails with this message (nothing of the epoch's output was applied)."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class LostDataFile(RebuildNeeded):
    """A data file the Delta log of one of the view's own tables (state or output) names is
    gone: deleted by hand or by a lifecycle rule, or never copied. Its rows cannot be read."""

    def __init__(self, view: str, table: str, path: str) -> None:
        super().__init__(
            f"view {view!r}: {table} is missing a data file its Delta log names: {path} (deleted by hand or by a "
            f"lifecycle rule, or not copied?), so its rows cannot be read. Run `ivm refresh --full {view}` to rebuild "
            "the view from its sources.",
            reason=f"{table} lost a data file ({path}): rebuilt from the sources",
        )


class InexactAggregate(RebuildNeeded):
    """A group's running SUM/AVG cannot be updated exactly: its DECIMAL sum overflowed 38
    digits (Spark's SUM is NULL then, and the exact value is gone), or a value leaves a
    DOUBLE sum that keeps no values to sum again (its argument was not typed as DOUBLE when
    the view was compiled; a running DOUBLE sum keeps the rounding of values that left)."""

    # Carried by the error Spark or DuckDB raise inside an epoch's plan (``raise_error``).
    MARKER = "ivm-inexact-aggregate"

    def __init__(self, view: str, aggregate: str, kind: str) -> None:
        cause = "its sum overflowed 38 digits" if kind == "decimal" else "a value leaves a DOUBLE sum kept without its values"
        why = f"{aggregate} of a group this change touches cannot be updated exactly ({cause})"
        super().__init__(
            f"view {view!r}: {why}. Run `ivm refresh --full {view}` (or set `refresh: auto`) to recompute it.",
            reason=f"{why}: recomputed",
        )


class UnrepeatableRows(RebuildNeeded):
    """A rule must compute again rows it emitted before, to retract them, and the rows it
    reads could come out otherwise: a window over a partition that holds −0.0 in a FLOAT or
    DOUBLE column (−0.0 ties with 0.0, and Spark may place either first, or pick either as
    a MIN). The view is recomputed, which gives one of Spark's answers."""

    # Carried by the error Spark or DuckDB raise inside an epoch's plan (``raise_error``).
    MARKER = "ivm-unrepeatable-rows"

    def __init__(self, view: str, what: str) -> None:
        why = f"{what} cannot be computed again as it was emitted"
        super().__init__(
            f"view {view!r}: {why}. Run `ivm refresh --full {view}` (or set `refresh: auto`) to recompute it.",
            reason=f"{why}: recomputed",
        )


class ChangeTooLarge(RebuildNeeded):
    """An incremental epoch run in Spark brings its change sets to the driver, and this
    epoch's were more than Spark allows there (``spark.driver.maxResultSize``): a change far
    larger than the cost model expected (a join that multiplies it, or ``refresh:
    incremental``, which never switches to a recompute)."""

    def __init__(self, view: str) -> None:
        why = "this epoch's change is more than Spark may bring to the driver (spark.driver.maxResultSize)"
        super().__init__(
            f"view {view!r}: {why}. Run `ivm refresh --full {view}` (or set `refresh: auto`) to recompute it, or raise "
            "spark.driver.maxResultSize under `spark: conf:` in ivm.yaml.",
            reason=f"{why}: recomputed",
        )


class ExpressionError(RefreshError):
    """Spark could not compute one of the view's expressions over the data: under ANSI mode
    an overflow, an invalid cast or a division by zero raises instead of giving NULL. The
    epoch's output change was not applied; the view stays as it was."""

    def __init__(self, view: str, spark_message: str) -> None:
        lines = [line.strip() for line in spark_message.splitlines() if line.strip()]
        first = next((line for line in lines if line.startswith("[")), lines[0] if lines else "")
        # Spark names the expression below a "== SQL (line …) ==" or "== DataFrame ==" header.
        context = next((lines[i + 1] for i, line in enumerate(lines[:-1]) if line.startswith("== ")), "")
        # Spark's error class (ARITHMETIC_OVERFLOW, CAST_INVALID_INPUT, …), as recorded with the epoch.
        self.condition = first[1:first.index("]")] if first.startswith("[") and "]" in first else first[:80]
        super().__init__(
            f"view {view!r}: Spark could not compute it over the sources' rows: {first}"
            + (f" (in: {context})" if context else "")
            + ". Nothing was applied to the view's output. Correct the rows, make the SQL tolerate them (try_cast, "
            "try_divide, try_add, …), or run the session with spark.sql.ansi.enabled=false to get NULL instead."
        )


class ViewBusyError(IvmError):
    """Another process holds the view's refresh claim and did not release it within the wait."""


class CommitConflictError(IvmError):
    """A Delta commit lost its race: another writer committed to the table first.

    Every commit of a refresh is fenced to the table version it was planned against, so a
    conflict means the table moved under the refresh; the commit was not made.
    """

    def __init__(self, uri: str, *, expected: int | None, found: int | None) -> None:
        self.uri = uri
        self.expected = expected
        self.found = found
        planned = f"right after version {expected}" if expected is not None else "to create it"
        now = f"is at version {found}" if found is not None else "changed"
        super().__init__(
            f"Delta table {uri} {now} but this refresh was to commit {planned}: another process wrote it first"
        )
