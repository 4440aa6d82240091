"""A project whose folder name needs escaping in a URI (a space, a percent sign, an accent):
delta-rs reports its data files percent-encoded (``/my%20project/…``), and a path handed on
as reported names a folder that does not exist. Built, then refreshed incrementally, on both
engines, equal to its recompute."""

from __future__ import annotations

import pyarrow as pa

from ivm_assets.delta.write import create_table, delete_rows, write
from tests.conftest import ProjectBuilder, assert_engine, assert_oracle


def test_a_folder_name_with_a_space_a_percent_and_an_accent(tmp_path, spark, engine):
    builder = ProjectBuilder(tmp_path / "my project 100% é", spark)
    orders = builder.source("orders", pa.table({"id": [1, 2, 3], "customer": [10, 20, 10], "amount": [5, 7, 9]}))
    customers = str(builder.root / "sources" / "customers")
    # Partitioned: Spark reads it with the table's folder as its base path.
    create_table(customers, pa.table({"customer": [10, 20], "region": ["north", "south"]}), partition_by=["region"])
    builder.sources["customers"] = "sources/customers"
    builder.view("by_region", "SELECT c.region, SUM(o.amount) AS total, COUNT(*) AS n "
                              "FROM orders o JOIN customers c ON o.customer = c.customer GROUP BY c.region")
    project = builder.load()
    project.refresh()
    assert_oracle(project)
    write(orders, pa.table({"id": [4], "customer": [20], "amount": [1]}), mode="append")
    delete_rows(orders, "id = 1")
    write(customers, pa.table({"customer": [30], "region": ["east"]}), mode="append")
    results = project.refresh()
    assert [r.mode for r in results] == ["incremental"]
    assert_engine(results, engine)
    assert_oracle(project)
