"""Random views and random changes for differential tests (SQLancer's idea, our oracle).

:func:`random_views` draws queries over two small tables from a grammar of the constructs
docs/sql-support.md calls incremental: filters and projections over every value type (FLOAT
and DOUBLE among them) and most functions the in-process engine translates, inner joins
(``ON``, ``USING``, a comma; ``NATURAL``, recomputed with its reason), outer, semi and anti
joins, NOT IN, scalar subqueries, grouped and global
aggregates with HAVING, DISTINCT, UNION [ALL], INTERSECT and EXCEPT [ALL], windows,
per-group and global top-k, and nestings of them. :func:`random_changes` draws an epoch's
inserts (duplicates and NULLs), deletes and updates. A test refreshes the views after each
batch and compares each with Spark's answer to its SQL as written, at the same source
versions: a view that drifts from Spark under some change is a wrong answer, and its seed
and SQL are in the failure message.

With ANSI mode on (Spark 4's default), values stay where a query cannot fail (no overflow,
no division by a column, no cast of text to a number), so every difference is the engine's,
not an ANSI error's; with it off, those expressions are drawn too, and Spark's NULLs and
wrapped values are the answer.
"""

from __future__ import annotations

import datetime as dt
import decimal
import random

import pyarrow as pa

T = pa.schema([
    ("id", pa.int64()), ("k", pa.int32()), ("v", pa.int64()), ("d", pa.decimal128(10, 2)),
    ("x", pa.float64()), ("f", pa.float32()), ("s", pa.string()), ("day", pa.date32()), ("ts", pa.timestamp("us", tz="UTC")), ("nt", pa.timestamp("us")),
])
U = pa.schema([("uid", pa.int64()), ("k", pa.int32()), ("w", pa.int64()), ("name", pa.string())])
SCHEMAS = {"t": T, "u": U}

# Values near the edges the engines disagree on when a rule is wrong: NULLs, zero and its
# negative, NaN, text with trailing spaces or accents, dates before 1970.
_K = [0, 1, 2, 3, None]
_V = [-3, -1, 0, 1, 2, 5, 40, None]
_D = [decimal.Decimal(s) for s in ("-2.50", "0.00", "0.01", "1.10", "9.99", "120.00")] + [None]
_X = [-0.0, 0.0, 0.5, -1.25, 3.0, 1e10, float("nan"), None]
# FLOATs whose DOUBLE is not their decimal text (0.1), beside zero, its negative and NaN.
_F = [-0.0, 0.0, 0.1, 1.5, -2.75, 1e30, float("nan"), None]
_S = ["a", "b", "ab", "a ", "B", "é", "", None]
_DAYS = [dt.date(1969, 12, 31), dt.date(1994, 1, 31), dt.date(2024, 2, 29), dt.date(2026, 11, 28), None]
_NAMES = ["a", "b", "c", "é", None]
# Instants around New York's DST changes (the gap at 2024-03-10 07:00 UTC; 01:30 twice on
# 2024-11-03, at 05:30 and 06:30 UTC), midnight, and before 1970; the same wall times
# without a zone (01:30 on 2024-11-03 among them).
_TIMES = [dt.datetime(2024, 3, 10, 6, 59, 59), dt.datetime(2024, 3, 10, 7, 0), dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
          dt.datetime(2026, 11, 28, 0, 0), dt.datetime(2024, 11, 3, 5, 30), dt.datetime(2024, 11, 3, 6, 30),
          dt.datetime(2024, 11, 3, 1, 30), None]


class Changes:
    """The live rows of both tables, and the next free ids."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.next_id = 1
        self.live: dict[str, list[int]] = {"t": [], "u": []}

    def row(self, table: str) -> dict:
        r, i = self.rng, self.next_id
        self.next_id += 1
        self.live[table].append(i)
        if table == "t":
            return {
                "id": i, "k": r.choice(_K), "v": r.choice(_V), "d": r.choice(_D), "x": r.choice(_X), "f": r.choice(_F), "s": r.choice(_S),
                "day": r.choice(_DAYS), "ts": r.choice(_TIMES), "nt": r.choice(_TIMES),
            }
        return {"uid": i, "k": r.choice(_K), "w": r.choice(_V), "name": r.choice(_NAMES)}

    def initial(self, table: str, n: int) -> pa.Table:
        return pa.Table.from_pylist([self.row(table) for _ in range(n)], schema=SCHEMAS[table])


def random_changes(rng: random.Random, changes: Changes, uris: dict[str, str]) -> None:
    """One epoch's changes: to one table or both, some of inserts (a row twice, sometimes),
    deletes and updates of a key or a value (the same row updated twice, sometimes)."""
    from ivm_assets.delta.write import delete_rows, update_rows, write

    for table in rng.sample(["t", "u"], rng.choice([1, 2])):
        id_col = "id" if table == "t" else "uid"
        live = changes.live[table]
        for kind in rng.choices(["insert", "delete", "update"], k=rng.randint(1, 3)):
            if kind == "insert" or len(live) < 3:
                rows = [changes.row(table) for _ in range(rng.randint(1, 3))]
                if rng.random() < 0.3:
                    rows.append(dict(rows[0]))  # an identical row: bag semantics
                write(uris[table], pa.Table.from_pylist(rows, schema=SCHEMAS[table]), mode="append")
            elif kind == "delete":
                victim = rng.choice(live)
                live.remove(victim)
                delete_rows(uris[table], f"{id_col} = {victim}")
            else:
                target = rng.choice(live)
                for _ in range(rng.choice([1, 1, 2])):
                    column, value = _update(rng, table)
                    update_rows(uris[table], set_sql={column: value}, predicate=f"{id_col} = {target}")


def _update(rng: random.Random, table: str) -> tuple[str, str]:
    def sql(value) -> str:
        if value is None:
            return "NULL"
        if isinstance(value, str):
            return "'" + value + "'"
        if isinstance(value, float):
            return f"CAST('{value}' AS {'FLOAT' if column == 'f' else 'DOUBLE'})"
        if isinstance(value, decimal.Decimal):
            return f"CAST('{value}' AS DECIMAL(10, 2))"
        if isinstance(value, dt.datetime):
            return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
        if isinstance(value, dt.date):
            return f"DATE '{value.isoformat()}'"
        return str(value)

    if table == "u":
        column, values = rng.choice([("k", _K), ("w", _V), ("name", _NAMES)])
    else:
        column, values = rng.choice([("k", _K), ("v", _V), ("x", _X), ("f", _F), ("s", _S), ("d", _D), ("day", _DAYS), ("ts", _TIMES)])
    return column, sql(rng.choice(values))


class _Query:
    """One query's drawing, from ``rng``; ``ansi``: whether Spark's ANSI mode is on, else
    expressions that overflow, divide by zero or cast malformed text are drawn too (Spark
    gives NULL or a wrapped value for them then)."""

    def __init__(self, rng: random.Random, ansi: bool = True) -> None:
        self.rng = rng
        self.ansi = ansi

    def pick(self, *options):
        return self.rng.choice(options)

    # Expressions over t's columns, each of one type family, each total (no ANSI error).
    def number(self, p: str = "") -> str:
        total = (
            f"{p}v", f"{p}k", f"{p}d", f"{p}v + 1", f"{p}v * 2", f"{p}d * 3", f"{p}d - {p}v", f"abs({p}v)",
            f"COALESCE({p}v, 0)", f"{p}v / 4", f"CASE WHEN {p}v > 0 THEN {p}d ELSE 0 END", f"{p}v % 3",
            f"round({p}d, 1)", f"greatest({p}v, {p}k)", f"NULLIF({p}v, 0)", f"IF({p}k > 1, {p}d, -{p}d)", f"pmod({p}v, 3)",
            f"least({p}d, 1)", f"length({p}s)", f"try_divide({p}v, {p}k)", f"bround({p}d, 0)", f"floor({p}d)", f"ceil({p}v / 3)",
            f"CAST({p}f AS DOUBLE)", f"COALESCE({p}f, CAST(0 AS FLOAT))", f"{p}f * 2", f"{p}x + {p}f", f"round({p}x, 2)",
            f"{p}x % 2", f"dayofweek({p}day)", f"datediff({p}day, DATE '2000-01-01') * {p}k", f"instr({p}s, 'b')",
        )
        failing = (
            f"{p}v / {p}k", f"{p}k % {p}v", f"CAST({p}s AS INT)", f"{p}v * 3074457345618258602", f"CAST({p}d * 100 AS TINYINT)",
            f"CAST({p}x AS INT)", f"{p}d / {p}v", f"CAST({p}f AS INT)", f"pmod({p}v, {p}k)", f"CAST({p}s AS DECIMAL(3, 1))",
        )
        return self.pick(*total, *(() if self.ansi else failing))

    def text(self, p: str = "") -> str:
        return self.pick(
            f"{p}s", f"upper({p}s)", f"concat({p}s, 'x')", f"substring({p}s, 1, 1)", f"COALESCE({p}s, '-')",
            f"CAST({p}v AS STRING)", f"trim({p}s)", f"CASE WHEN {p}s LIKE 'a%' THEN 'A' WHEN {p}s IS NULL THEN NULL ELSE 'other' END",
            f"date_format({p}day, 'yyyy-MM')", f"CAST({p}day AS STRING)", f"CAST({p}d AS STRING)", f"CAST({p}ts AS STRING)",
            f"CAST({p}nt AS STRING)", f"date_format({p}ts, 'yyyy-MM-dd HH:mm')", f"lower({p}s)", f"initcap({p}s)",
            f"lpad({p}s, 3, '*')", f"replace({p}s, 'a', 'xy')", f"concat_ws('-', {p}s, CAST({p}k AS STRING))", f"left({p}s, 1)",
            f"reverse({p}s)", f"regexp_replace({p}s, '[ab]', 'z')", f"regexp_extract({p}s, '([a-z])', 1)", f"CAST({p}f AS STRING)",
            f"CAST({p}x AS STRING)", f"date_format({p}nt, 'EEE HH:mm')", f"CAST(add_months({p}day, 1) AS STRING)",
            f"{p}s || '!'", f"nvl2({p}s, 'set', 'unset')", f"CAST(last_day({p}day) AS STRING)",
        )

    def predicate(self, p: str = "") -> str:
        one = lambda: self.pick(  # noqa: E731 - a small grammar reads best inline
            f"{p}v > {self.pick(-1, 0, 2)}", f"{p}v IS NULL", f"{p}k IN (0, 1)", f"{p}s LIKE 'a%'", f"{p}s <> 'a '",
            f"{p}d BETWEEN 0 AND 10", f"{p}x > 0", f"{p}x = 0", f"isnan({p}x)", f"{p}day < DATE '1994-02-01' + INTERVAL 1 MONTH",
            f"NOT ({p}k = 2)", f"{p}s IS NOT NULL", f"{p}v <=> {p}k", f"{p}ts >= TIMESTAMP '2024-03-10 07:00:00'",
            f"{p}nt < {p}ts", f"{p}ts < {p}day", f"{p}s RLIKE '^a'", f"startswith({p}s, 'a')", f"contains({p}s, 'b')",
            f"{p}f > 0.1", f"{p}f = {p}x", f"{p}f < CAST(1 AS FLOAT)", f"{p}v BETWEEN {p}k AND 10", f"{p}s IN ('a', 'b ', NULL)",
            f"{p}d IN (1.10, 0)", f"{p}s NOT LIKE '%b'", f"{p}x <> {p}x", f"-{p}x = 0",
        )
        shape = self.rng.random()
        if shape < 0.6:
            return one()
        return f"({one()} {self.pick('AND', 'OR')} {one()})"

    def aggregate(self, p: str = "") -> str:
        return self.pick(
            *(() if self.ansi else (f"SUM({p}v * 4611686018427387904)",)), "COUNT(*)", f"COUNT({p}v)", f"SUM({p}v)", f"SUM({p}d)", f"AVG({p}d)", f"AVG({p}v)", f"MIN({p}s)", f"MAX({p}x)",
            f"MIN({p}day)", f"COUNT(DISTINCT {p}k)", f"MAX({p}d)", f"SUM({p}x)", f"SUM({p}v * {p}d)", f"MAX({p}ts)",
            f"MIN({p}nt)", f"SUM({p}f)", f"AVG({p}x)", f"MIN({p}f)", f"MAX({p}f)", f"COUNT(DISTINCT {p}s)", f"MAX(length({p}s))",
            f"SUM(CASE WHEN {p}s LIKE 'a%' THEN 1 ELSE 0 END)", f"COUNT(DISTINCT {p}f)", f"AVG({p}k)",
        )

    def key(self, p: str = "") -> str:
        return self.pick(
            f"{p}k", f"{p}s", f"{p}x", f"{p}day", f"{p}k % 2", f"upper({p}s)", f"{p}v IS NULL", f"year({p}day)",
            f"date_add({p}day, 3)", f"datediff({p}day, DATE '2000-01-01')", f"{p}d", f"hour({p}ts)", f"CAST({p}ts AS DATE)",
            f"date_trunc('HOUR', {p}ts)", f"{p}nt", f"CAST({p}nt AS DATE)", f"{p}f", f"IF({p}s IS NULL, 'none', {p}s)",
            f"last_day({p}day)", f"-{p}x", f"{p}x + 0.0", f"trunc({p}day, 'MM')", f"minute({p}ts)",
        )

    # The FROM clause t's columns are read from (as ``p``-prefixed names), and whether it
    # ends in a WHERE of its own (a semi join's) that a filter joins with AND.
    def source(self) -> tuple[str, str, bool]:
        shape = self.rng.random()
        if shape < 0.4:
            return "t", "", False
        if shape < 0.55:
            if self.rng.random() < 0.3:
                return self.pick(("t JOIN u USING (k)", "t.", False), ("t NATURAL JOIN u", "t.", False), ("t, u WHERE t.k = u.k", "t.", True))
            return f"t JOIN u ON t.k = u.k{self.pick('', ' AND u.w > t.v', ' AND u.name <> t.s')}", "t.", False
        if shape < 0.6:
            if self.rng.random() < 0.3:
                return f"t LEFT {self.pick('SEMI', 'ANTI')} JOIN u ON t.k = u.k{self.pick('', ' AND u.w > 1')}", "t.", False
            return f"t JOIN u ON t.k = u.k JOIN u u2 ON u2.name = u.name{self.pick('', ' AND u2.uid <> u.uid')}", "t.", False
        if shape < 0.7:
            join = self.pick("LEFT JOIN", "RIGHT JOIN", "FULL JOIN")
            return f"t {join} u ON t.k = u.k{self.pick('', ' AND u.w > 0')}", "t.", False
        if shape < 0.8:
            sub = self.pick(
                "EXISTS (SELECT 1 FROM u WHERE u.k = t.k)", "NOT EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND u.w > t.v)",
                "t.k IN (SELECT k FROM u WHERE w > 0)", "t.k NOT IN (SELECT k FROM u)", "t.v > (SELECT AVG(w) FROM u)",
                "t.v >= (SELECT MIN(w) FROM u WHERE u.k = t.k)", "(t.k, t.s) IN (SELECT k, name FROM u)",
                "EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND u.name <> t.s)",
            )
            return f"t WHERE {sub}", "t.", True
        if shape < 0.9:
            return f"(SELECT * FROM t WHERE {self.predicate()}) t", "t.", False
        aggregated = (
            "SELECT k, MAX(v) AS v, SUM(d) AS d, MIN(x) AS x, MAX(f) AS f, MAX(s) AS s, MIN(day) AS day, MIN(id) AS id, MAX(ts) AS ts, "
            "MIN(nt) AS nt FROM t GROUP BY k"
        )
        return f"({aggregated}) t", "t.", False

    def where(self, has_where: bool, p: str) -> str:
        if self.rng.random() < 0.5:
            return ""
        return f" {'AND' if has_where else 'WHERE'} {self.predicate(p)}"

    def query(self) -> str:
        shape = self.pick(
            "select", "select", "aggregate", "aggregate", "global", "distinct", "set", "window", "top_k", "group_top",
            "cte_twice", "scalar_select", "union_aggregates", "grouped_window",
        )
        return getattr(self, f"_{shape}")()

    def _columns(self, p: str, n: int) -> list[str]:
        makers = [self.number, self.number, self.text, lambda p: self.key(p), lambda p: self.pick(f"{p}x * 2.0", f"{p}day", f"{p}id")]
        return [f"{self.rng.choice(makers)(p)} AS c{i}" for i in range(n)]

    def _select(self) -> str:
        source, p, has_where = self.source()
        return f"SELECT {', '.join(self._columns(p, self.rng.randint(1, 4)))} FROM {source}{self.where(has_where, p)}"

    def _aggregate(self) -> str:
        source, p, has_where = self.source()
        keys = self.rng.sample([self.key(p) for _ in range(3)], self.rng.randint(1, 2))
        keys = list(dict.fromkeys(keys))
        aggs = [f"{self.aggregate(p)} AS a{i}" for i in range(self.rng.randint(1, 3))]
        condition = self.pick("COUNT(*) > 1", f"SUM({p}v) > 0", f"MAX({p}d) IS NOT NULL", f"SUM({p}v) > (SELECT AVG(w) FROM u)")
        having = f" HAVING {condition}" if self.rng.random() < 0.3 else ""
        select = [f"{k} AS g{i}" for i, k in enumerate(keys)] + aggs
        return f"SELECT {', '.join(select)} FROM {source}{self.where(has_where, p)} GROUP BY {', '.join(keys)}{having}"

    def _global(self) -> str:
        source, p, has_where = self.source()
        aggs = [f"{self.aggregate(p)} AS a{i}" for i in range(self.rng.randint(1, 3))]
        return f"SELECT {', '.join(aggs)} FROM {source}{self.where(has_where, p)}"

    def _distinct(self) -> str:
        source, p, has_where = self.source()
        return f"SELECT DISTINCT {', '.join(f'{self.key(p)} AS c{i}' for i in range(self.rng.randint(1, 2)))} FROM {source}{self.where(has_where, p)}"

    def _grouped_window(self) -> str:
        source, p, has_where = self.source()
        call = self.pick(f"RANK() OVER (ORDER BY SUM({p}v))", "SUM(COUNT(*)) OVER ()", f"DENSE_RANK() OVER (ORDER BY MAX({p}d) DESC)")
        return f"SELECT {p}k AS k, SUM({p}v) AS s, COUNT(*) AS n, {call} AS w FROM {source}{self.where(has_where, p)} GROUP BY {p}k"

    def _union_aggregates(self) -> str:
        op = self.pick("UNION ALL", "UNION", "EXCEPT")
        return f"SELECT k, COUNT(*) AS n FROM t{self.where(False, '')} GROUP BY k {op} SELECT k, COUNT(*) AS n FROM u GROUP BY k"

    def _set(self) -> str:
        op = self.pick("UNION ALL", "UNION", "INTERSECT", "EXCEPT", "INTERSECT ALL", "EXCEPT ALL")
        left = f"SELECT k, s AS name FROM t WHERE {self.predicate()}"
        right = f"SELECT k, name FROM u{self.pick('', ' WHERE w > 0', ' WHERE name IS NOT NULL')}"
        return f"{left} {op} {right}"

    def _window(self) -> str:
        source, p, has_where = self.source()
        order = self.pick(f"{p}id", f"{p}v, {p}id", f"{p}d DESC, {p}id")
        calls = self.rng.sample([
            f"ROW_NUMBER() OVER (PARTITION BY {p}k ORDER BY {order}) AS rn",
            f"RANK() OVER (PARTITION BY {p}k ORDER BY {p}v) AS rk",
            f"SUM({p}v) OVER (PARTITION BY {p}k) AS total",
            f"LAG({p}v) OVER (PARTITION BY {p}k ORDER BY {order}) AS before",
            f"COUNT(*) OVER (PARTITION BY {p}s ORDER BY {order} ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS recent",
            f"DENSE_RANK() OVER (ORDER BY {p}v) AS dr",
            f"SUM({p}d) OVER (PARTITION BY {p}k ORDER BY {order}) AS running",
            f"LEAD({p}s, 1, 'z') OVER (PARTITION BY {p}k ORDER BY {order}) AS after",
            f"MIN({p}x) OVER (PARTITION BY {p}k) AS least",
        ], self.rng.randint(1, 2))
        if _ties_rows(source):
            # Two calls that each number tied rows (a join repeats t's rows, an outer join
            # pads NULL ids) pair their values in an order SQL leaves open: Spark's answer
            # is one of several. One such call alone gives the same rows whatever the order.
            numbering = [c for c in calls if any(f in c for f in _NUMBERING)]
            calls = [c for c in calls if c not in numbering[1:]]
        return f"SELECT {p}id AS id, {p}k AS k, {', '.join(calls)} FROM {source}{self.where(has_where, p)}"

    def _top_k(self) -> str:
        inner = self.pick(self._select, self._aggregate, self._distinct)()
        columns = [c.split(" AS ")[-1] for c in _select_list(inner)]
        order = ", ".join(f"{c} {self.pick('ASC', 'DESC')} NULLS {self.pick('FIRST', 'LAST')}" for c in columns)
        return f"SELECT * FROM ({inner}) q ORDER BY {order} LIMIT {self.pick(1, 2, 3)}{self.pick('', ' OFFSET 1')}"

    def _group_top(self) -> str:
        source, p, has_where = self.source()
        row = f"ROW_NUMBER() OVER (PARTITION BY {p}k ORDER BY {p}v DESC NULLS LAST, {p}id) AS r"
        return f"SELECT id, k, v FROM (SELECT {p}id AS id, {p}k AS k, {p}v AS v, {row} FROM {source}{self.where(has_where, p)}) q WHERE r <= {self.pick(1, 2)}"


    def _cte_twice(self) -> str:
        cte = f"SELECT k, SUM(v) AS v, COUNT(*) AS n FROM t{self.where(False, '')} GROUP BY k"
        on = self.pick("a.k = b.k + 1", "a.k = b.k AND a.v > b.n", "a.v = b.v")
        return f"WITH c AS ({cte}) SELECT a.k AS k, a.v AS v, b.n AS n FROM c a JOIN c b ON {on}"

    def _scalar_select(self) -> str:
        sub = self.pick("(SELECT COUNT(*) FROM u WHERE u.k = t.k)", "(SELECT MAX(w) FROM u WHERE u.k = t.k)", "(SELECT SUM(w) FROM u)")
        return f"SELECT t.id AS id, t.v AS v, {sub} AS n FROM t{self.where(False, 't.')}"

    def layered(self, name: str, columns: list[str]) -> str:
        """A view over the view ``name`` (of ``columns``)."""
        c = self.rng.choice(columns)
        return self.pick(
            f"SELECT COUNT(*) AS n, COUNT({c}) AS m FROM {name}",
            f"SELECT DISTINCT {c} AS c FROM {name}",
            f"SELECT {c} AS c, COUNT(*) AS n FROM {name} GROUP BY {c}",
            f"SELECT a.{c} AS c FROM {name} a JOIN {name} b ON a.{c} = b.{c}",
            f"SELECT * FROM {name} WHERE {c} IS NOT NULL",
            f"SELECT {c} AS c FROM {name} EXCEPT ALL SELECT {c} AS c FROM {name} WHERE {c} IS NULL",
        )


def output_columns(sql: str) -> list[str]:
    """The output column names of a query :class:`_Query` drew."""
    if sql.startswith("SELECT * FROM ("):
        depth = 0
        for i, c in enumerate(sql[len("SELECT * FROM ("):]):
            depth += (c == "(") - (c == ")")
            if depth < 0:
                return output_columns(sql[len("SELECT * FROM ("):len("SELECT * FROM (") + i])
    if sql.startswith("WITH "):
        return ["k", "v", "n"]
    return [item.split(" AS ")[-1].split(".")[-1] for item in _select_list(sql)]


def _select_list(sql: str) -> list[str]:
    """The items of a generated query's outer SELECT: split on the commas outside
    parentheses, up to the FROM outside them."""
    head = sql[len("SELECT "):].removeprefix("DISTINCT ")
    items, depth, start = [], 0, 0
    for i, c in enumerate(head):
        depth += (c == "(") - (c == ")")
        if depth == 0 and c == ",":
            items.append(head[start:i].strip())
            start = i + 1
        elif depth == 0 and head.startswith(" FROM ", i):
            break
    return items + [head[start:i].strip()]


def random_views(rng: random.Random, n: int, *, ansi: bool = True) -> dict[str, str]:
    """``n`` random queries named v0, v1, …: over ``t`` and ``u``, and one in five over an
    earlier view (views over views); ``ansi``: see :class:`_Query`."""
    views: dict[str, str] = {}
    for i in range(n):
        query = _Query(rng, ansi)
        bases = [v for v, sql in views.items() if not sql.startswith("SELECT * FROM v")]
        if bases and rng.random() < 0.2:
            base = rng.choice(bases)
            views[f"v{i}"] = query.layered(base, output_columns(views[base]))
        else:
            views[f"v{i}"] = query.query()
    return views


# Window functions whose value differs between rows tied in their order.
_NUMBERING = ("ROW_NUMBER()", "LAG(", "LEAD(", "ROWS BETWEEN")


def _ties_rows(source: str) -> bool:
    """Whether a FROM clause can give rows tied in every window order the views draw: a
    join that repeats t's rows or pads t's columns with NULLs (not a semi or anti join)."""
    return ("JOIN" in source or ", u WHERE" in source) and "SEMI" not in source and "ANTI" not in source
