"""Small builds: a full epoch over few source rows (``IVM_SMALL_BUILD_ROWS``) computes in one
Spark partition and writes its state and output from the driver; a larger one (or with the
setting at 0) has the executors write them. Both give the recompute's answer; that both
leave the same state is checked by tests/test_state_parity.py."""

from __future__ import annotations

import pyarrow as pa
import pytest

from ivm_assets.delta.write import delete_rows, write
from ivm_assets.errors import IvmError
from ivm_assets.settings import SMALL_BUILD_ROWS_ENV, current
from tests.conftest import assert_oracle

VIEWS = {
    "sales": "SELECT c.region, COUNT(*) AS n, SUM(o.amount) AS total FROM orders o JOIN customers c ON o.cust = c.cust GROUP BY c.region",
    "ranked": "SELECT region, cust, RANK() OVER (PARTITION BY region ORDER BY cust) AS r FROM customers",
}


def _project(builder):
    builder.source("orders", {"id": pa.array(range(1, 41), pa.int64()), "cust": pa.array([i % 5 for i in range(40)], pa.int64()),
                              "amount": pa.array(range(40), pa.int64())})
    builder.source("customers", {"cust": pa.array(range(5), pa.int64()), "region": ["eu", "us", "eu", "ap", "us"]})
    for name, sql in VIEWS.items():
        builder.view(name, sql)
    return builder.load()


@pytest.mark.parametrize("limit", ["45", "44", "0"])
def test_a_build_is_small_up_to_the_limit_and_gives_the_recompute(builder, monkeypatch, limit):
    """45 source rows (40 orders, 5 customers): small up to a limit of 45, not at 44 or 0 (off)."""
    monkeypatch.setenv(SMALL_BUILD_ROWS_ENV, limit)
    project = _project(builder)
    built = {r.view: r for r in project.refresh()}
    assert {r.mode for r in built.values()} == {"full"}
    small = {view: r.stats.get("small_build_rows") for view, r in built.items()}
    assert small == ({"sales": 45, "ranked": 5} if limit == "45" else {"sales": None, "ranked": 5} if limit == "44" else {"sales": None, "ranked": None})
    assert_oracle(project)
    # The state a build left serves the next epochs, and a --full rebuild replaces it.
    write(builder.uri("orders"), pa.table({"id": pa.array([41], pa.int64()), "cust": pa.array([3], pa.int64()), "amount": pa.array([7], pa.int64())}), mode="append")
    delete_rows(builder.uri("customers"), "cust = 1")
    assert {r.mode for r in project.refresh()} <= {"incremental", "full"}
    assert_oracle(project)
    rebuilt = project.refresh(full=True)
    assert {r.mode for r in rebuilt} == {"full"}
    assert_oracle(project)


def test_a_malformed_limit_is_named_with_the_fix():
    with pytest.raises(IvmError, match=f"{SMALL_BUILD_ROWS_ENV} must be a number of rows .* found 'many'"):
        current({SMALL_BUILD_ROWS_ENV: "many"})
