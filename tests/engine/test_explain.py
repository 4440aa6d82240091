"""`ivm explain`: where the last epoch ran and which operator kept it out of process, and
the engine the next epoch is to run in with the cost model's estimate."""

from __future__ import annotations

import pyarrow as pa
from tests.conftest import assert_oracle

from ivm_assets.delta.write import write


def _orders(builder) -> None:
    builder.source("orders", pa.table({
        "id": pa.array(range(6), pa.int64()),
        "cust": pa.array([1, 1, 2, 2, 3, 3], pa.int64()),
        "name": pa.array(["a", "b", "a", "c", "d", None], pa.string()),
    }))


def test_the_operator_that_kept_an_epoch_out_of_process_is_named_under_it(builder):
    _orders(builder)
    # md5 has no in-process rule: the projection computing it sends each epoch to Spark.
    builder.view("hashed", "SELECT cust, md5(name) AS h, COUNT(*) AS n FROM orders GROUP BY cust, md5(name)")
    builder.view("plain", "SELECT cust, COUNT(*) AS n FROM orders GROUP BY cust")
    project = builder.load()
    project.refresh()
    write(builder.uri("orders"), pa.table({"id": [6], "cust": [1], "name": ["e"]}), mode="append")
    hashed, plain = sorted(project.refresh(), key=lambda r: r.view)
    assert hashed.mode == plain.mode == "incremental"
    assert hashed.engine.startswith("spark: ") and "MD5" in hashed.engine.upper() and plain.engine == "in process"
    assert_oracle(project)

    lines = project.explain("hashed").splitlines()
    marked = [i for i, line in enumerate(lines) if "in Spark at epoch" in line]
    assert len(marked) == 1, lines
    operator_line = lines[marked[0] - 1].strip()
    assert operator_line.startswith("project_"), lines  # the operator whose expression it is
    assert f"in Spark at epoch {hashed.epoch}, not in process: " in lines[marked[0]]
    assert not any("in Spark at epoch" in line for line in project.explain("plain").splitlines())


def test_the_next_epochs_engine_follows_the_cost_estimate(builder):
    _orders(builder)
    builder.view("plain", "SELECT cust, COUNT(*) AS n FROM orders GROUP BY cust")
    project = builder.load()
    project.refresh()
    write(builder.uri("orders"), pa.table({"id": [6], "cust": [1], "name": ["e"]}), mode="append")
    (pending,) = [line for line in project.explain("plain").splitlines() if "next refresh:" in line]
    assert "cost: 1 change rows vs" in pending and "engine: in process (DuckDB over Arrow)" in pending
