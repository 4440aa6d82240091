"""The cost model: a change too large for an incremental epoch is recomputed, with the
estimate as the reason; the decision and the estimate are visible in the result and in
`ivm explain`."""

from __future__ import annotations

import pyarrow as pa
from tests.conftest import assert_oracle

from ivm_assets.delta.log import change_rows_between
from ivm_assets.delta.write import create_table, delete_rows, update_rows, write
from ivm_assets.engine.cost import MIN_SOURCE_ROWS

ROWS = MIN_SOURCE_ROWS + 20_000
TOTALS = "SELECT cust, COUNT(*) AS n, SUM(amount) AS total FROM orders GROUP BY cust"


def _orders(builder) -> None:
    builder.source("orders", pa.table({
        "id": pa.array(range(ROWS), pa.int64()),
        "cust": pa.array([i % 97 for i in range(ROWS)], pa.int64()),
        "amount": pa.array([i % 1000 for i in range(ROWS)], pa.int64()),
    }))


def test_change_rows_come_from_the_commit_metrics(tmp_path):
    uri = str(tmp_path / "t")
    create_table(uri, pa.table({"a": list(range(100))}))
    write(uri, pa.table({"a": [1000, 1001]}), mode="append")
    delete_rows(uri, "a < 5")
    update_rows(uri, set_sql={"a": "a + 1"}, predicate="a > 95 AND a < 100")
    # 2 inserted + 5 deleted + 4 updated (a pre- and a post-image each)
    assert change_rows_between(uri, 0, 3) == 2 + 5 + 8
    assert change_rows_between(uri, 1, 2) == 5
    assert change_rows_between(uri, 3, 3) == 0


def test_a_large_change_is_recomputed_with_the_estimate_as_reason(builder):
    _orders(builder)
    builder.view("totals", TOTALS)
    project = builder.load()
    project.refresh()
    write(builder.uri("orders"), pa.table({"id": [ROWS], "cust": [1], "amount": [5]}), mode="append")
    (small,) = project.refresh()
    assert small.mode == "incremental" and small.cost.startswith("cost: 1 change rows vs") and "incremental" in small.cost

    delete_rows(builder.uri("orders"), "id % 10 = 3")  # 10 % of the rows
    assert "next refresh: cost: 12,000 change rows vs" in project.explain("totals")
    (big,) = project.refresh()
    assert big.mode == "full" and big.reason.startswith("cost: 12,000 change rows vs 108,001 source rows (11.1%, above 5%")
    assert_oracle(project)
    delete_rows(builder.uri("orders"), "id = 7")
    (after,) = project.refresh()
    assert after.mode == "incremental"  # the state rebuilt by the recompute carries on
    assert_oracle(project)


def test_refresh_incremental_never_switches(builder):
    _orders(builder)
    builder.view("totals", TOTALS, refresh="incremental")
    project = builder.load()
    project.refresh()
    delete_rows(builder.uri("orders"), "id % 10 = 3")
    (result,) = project.refresh()
    assert result.mode == "incremental" and "above 5%: recompute is cheaper" in result.cost
    assert_oracle(project)
