"""Changes that come to nothing, through every operator, on both engines.

A no-op UPDATE makes delta-rs rewrite the file and report every row of it as deleted and
inserted again; a delete followed by the re-insert of identical rows, or an insert followed
by its delete, does the same across commits (these cancel where the change feed is read,
``engine.changes.read_range``); an insert a WHERE drops leaves the filtered input unchanged,
an empty change set after the filter, which an operator must take as "nothing changed",
not as "nothing is left": issue 23's ORDER BY … LIMIT view lost every row to one (in
process; the last such insert runs in Spark). Every
view has fewer input rows than its LIMIT, so a top-k refills from its whole input at every
change. After each epoch every view equals its recompute.
"""

from __future__ import annotations

import itertools

import pyarrow as pa

from ivm_assets.delta.read import read_small
from ivm_assets.delta.write import delete_rows, update_rows, write
from ivm_assets.spark.arrow import normalize_table
from tests.conftest import assert_engine, assert_oracle, small_epochs
from tests.random_changes import SCHEMA, initial_table

VIEWS = {
    "filtered": "SELECT id, v + 1 AS w FROM t WHERE k IS NOT NULL AND v > -100",
    "inner": "SELECT t.id, u.id AS uid FROM t JOIN u ON t.k = u.k",
    "left_outer": "SELECT t.id, u.id AS uid FROM t LEFT JOIN u ON t.k = u.k",
    "full_outer": "SELECT t.id, u.id AS uid FROM t FULL JOIN u ON t.k = u.k AND u.v > t.v",
    "semi": "SELECT id FROM t WHERE k IN (SELECT k FROM u)",
    "anti": "SELECT id FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.k = t.k)",
    "residual_semi": "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND u.v <> t.v)",
    "not_in": "SELECT id FROM t WHERE k NOT IN (SELECT k FROM u WHERE k IS NOT NULL)",
    "grouped": "SELECT k, COUNT(*) AS n, SUM(v) AS s, AVG(v) AS a, MIN(s) AS lo, MAX(x) AS hi, COUNT(DISTINCT v) AS nd "
    "FROM t GROUP BY k",
    "overall": "SELECT COUNT(*) AS n, SUM(v) AS s FROM t",
    "scalar": "SELECT id FROM t WHERE v > (SELECT AVG(v) FROM u)",
    "distinct": "SELECT DISTINCT k, s FROM t",
    "union": "SELECT k FROM t UNION SELECT k FROM u",
    "union_all": "SELECT k, s FROM t UNION ALL SELECT k, s FROM u",
    "intersect": "SELECT k FROM t INTERSECT SELECT k FROM u",
    "except_all": "SELECT k FROM t EXCEPT ALL SELECT k FROM u",
    "window": "SELECT id, k, RANK() OVER (PARTITION BY k ORDER BY v) AS r FROM t",
    "lag_frames": "SELECT id, k, LAG(v, 1, 0) OVER (PARTITION BY k ORDER BY v, id) AS prev, "
    "SUM(v) OVER (PARTITION BY k ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS recent, AVG(v) OVER (PARTITION BY k) AS mean "
    "FROM t",
    "top": "SELECT id, v FROM t ORDER BY v DESC, id LIMIT 100",
    "top_offset": "SELECT id, s FROM t WHERE k IS NOT NULL ORDER BY s, id LIMIT 100 OFFSET 2",
    "top_per_group": "SELECT k, id, rn FROM (SELECT k, id, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) AS rn FROM t) "
    "WHERE rn <= 50",
}


def _where(uri: str, ids: list[int]) -> pa.Table:
    table = normalize_table(read_small(uri)).select(SCHEMA.names).cast(SCHEMA)
    return table.filter(pa.compute.is_in(table.column("id"), value_set=pa.array(ids, pa.int64())))


def test_changes_that_cancel_leave_every_view_right(builder):
    """The changes netted at the source reach no operator, whichever engine; the two inserts
    the WHERE drops reach them, one epoch in process and one in Spark."""
    ids = itertools.count(1)
    t, u = builder.source("t", initial_table(ids)), builder.source("u", initial_table(ids, n=4))
    for name, sql in VIEWS.items():
        builder.view(name, sql, refresh="incremental")
    project = builder.load()
    project.refresh()
    dropped, dropped_too = (
        pa.Table.from_pylist([{"id": i, "k": None, "v": -1000, "x": None, "s": None}], schema=SCHEMA) for i in (99, 100)
    )
    epochs = [
        # A no-op UPDATE: every row of t deleted and inserted again by the change feed.
        ([lambda: update_rows(t, set_sql={"v": "v"}, predicate="id > 0")], VIEWS, True),
        # Rows deleted, then the same rows inserted again.
        ([lambda: (lambda rows: (delete_rows(t, "id IN (2, 3)"), write(t, rows, mode="append")))(_where(t, [2, 3]))],
         VIEWS, True),
        # A row that arrives and leaves within the epoch.
        ([lambda: write(u, dropped, mode="append"), lambda: delete_rows(u, "id = 99")], VIEWS, True),
        # Only the other side changes, and that change too cancels.
        ([lambda: update_rows(u, set_sql={"k": "k"}, predicate="id > 0")], VIEWS, True),
        # An insert the views' WHERE drops: their filtered input does not change (in process,
        # then in Spark).
        ([lambda: write(t, dropped, mode="append")], ("filtered", "top_offset"), False),
        ([lambda: write(t, dropped_too, mode="append")], ("filtered", "top_offset"), False),
    ]
    for step, (changes, quiet, at_source) in enumerate(epochs):
        for change in changes:
            change()
        with small_epochs("spark" if step == len(epochs) - 1 else "auto"):
            results = project.refresh()
        assert_engine(results, "spark" if step == len(epochs) - 1 else "in process")
        assert all(r.mode in ("incremental", "unchanged") for r in results), [r.summary() for r in results]
        assert all(r.rows_out == 0 for r in results if r.view in quiet), [r.summary() for r in results if r.rows_out]
        if at_source:  # netted where the change feed is read: nothing reaches an operator
            assert all(r.rows_in == 0 for r in results), [r.summary() for r in results if r.rows_in]
        # The changes netted at the source leave the sources' contents as they were and
        # wrote nothing (rows_out 0, above): one comparison after the last of them stands
        # for all of them, for the suite's time.
        if not (at_source and epochs[step + 1][2]):
            assert_oracle(project)
