"""Asset specs of views and sources: keys, deps, lineage, freshness, overrides (no Spark)."""

from __future__ import annotations

from datetime import timedelta

import dagster as dg
import pytest

from ivm_assets import IvmProject
from ivm_assets.config import Freshness
from ivm_assets.dagster import IvmTranslator, IvmViewProps, build_ivm_specs
from ivm_assets.dagster.translator import freshness_policy
from ivm_assets.demo import create_demo_project
from ivm_assets.errors import ConfigError

from tests.dagster.conftest import TINY


@pytest.fixture(scope="module")
def shop(tmp_path_factory) -> IvmProject:
    root = create_demo_project(tmp_path_factory.mktemp("translator") / "shop", **TINY)
    config = (root / "ivm.yaml").read_text()
    (root / "ivm.yaml").write_text(
        config[: config.index("views:")]
        + "views:\n  revenue_by_region_day:\n    group: finance\n    owners: [team:finance, ana@example.com]\n"
        "    tags: {tier: gold}\n    freshness: {fail_window: 1h, warn_window: 30m}\n"
        "  region_totals:\n    description: Totals per region.\n    freshness: {cron: '0 9 * * *', fail_window: 2h}\n"
    )
    return IvmProject.load(root)


def test_view_spec_carries_deps_kinds_code_version_and_settings(shop):
    specs = build_ivm_specs(shop)
    revenue = specs.views["revenue_by_region_day"]
    assert revenue.key == dg.AssetKey("revenue_by_region_day")
    assert {d.asset_key for d in revenue.deps} == {dg.AssetKey(s) for s in ("orders", "order_lines", "customers")}
    assert {d.asset_key for d in specs.views["region_totals"].deps} == {revenue.key}
    assert revenue.kinds == {"spark", "delta"}
    assert revenue.code_version == shop.views["revenue_by_region_day"].sql_hash
    assert revenue.group_name == "finance" and specs.views["top_customers"].group_name == "ivm_views"
    assert revenue.owners == ["team:finance", "ana@example.com"] and revenue.tags["tier"] == "gold"
    assert revenue.description == "Revenue and order count per customer region and day."
    assert specs.views["region_totals"].description == "Totals per region."
    assert revenue.freshness_policy == dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=1), warn_window=timedelta(minutes=30))
    assert specs.views["region_totals"].freshness_policy == dg.FreshnessPolicy.cron(deadline_cron="0 9 * * *", lower_bound_delta=timedelta(hours=2))
    assert revenue.automation_condition.get_label() == "ivm_eager"
    assert specs.sources["orders"].metadata["dagster/uri"] == shop.sources["orders"]


def test_view_metadata_has_table_schema_lineage_code_reference_and_sql(shop):
    spec = build_ivm_specs(shop).views["revenue_by_region_day"]
    meta = spec.metadata
    assert meta["dagster/table_name"] == "revenue_by_region_day"
    assert meta["dagster/uri"] == shop.location("revenue_by_region_day").output
    assert [c.name for c in meta["dagster/column_schema"].columns] == ["region", "order_date", "revenue", "orders"]
    lineage = meta["dagster/column_lineage"].deps_by_column
    assert {(d.asset_key.to_user_string(), d.column_name) for d in lineage["revenue"]} == {("order_lines", "quantity"), ("order_lines", "unit_price")}
    assert [(d.asset_key.to_user_string(), d.column_name) for d in lineage["region"]] == [("customers", "region")]
    totals = build_ivm_specs(shop).views["region_totals"].metadata["dagster/column_lineage"].deps_by_column
    assert [(d.asset_key.to_user_string(), d.column_name) for d in totals["revenue"]] == [("revenue_by_region_day", "revenue")]
    table = meta["ivm/column_lineage"].value  # readable in the UI, which does not show dagster/column_lineage
    [row] = [line for line in table.splitlines() if line.startswith("| `revenue` |")]
    assert row.endswith("| `order_lines.quantity`, `order_lines.unit_price` |")
    reference = meta["dagster/code_references"].code_references[0]
    assert reference.file_path == str(shop.root / "views" / "revenue_by_region_day.sql")
    assert "SUM(l.quantity * l.unit_price)" in meta["ivm/sql"].value


def test_subclass_overrides_keys_and_downstream_deps_follow(shop):
    class Prefixed(IvmTranslator):
        def get_asset_spec(self, view: IvmViewProps) -> dg.AssetSpec:
            return super().get_asset_spec(view).replace_attributes(key=dg.AssetKey(["shop", view.name]))

    specs = build_ivm_specs(shop, Prefixed())
    assert specs.views["region_totals"].key == dg.AssetKey(["shop", "region_totals"])
    assert {d.asset_key for d in specs.views["region_totals"].deps} == {dg.AssetKey(["shop", "revenue_by_region_day"])}
    lineage = specs.views["region_totals"].metadata["dagster/column_lineage"].deps_by_column
    assert lineage["revenue"][0].asset_key == dg.AssetKey(["shop", "revenue_by_region_day"])


def test_bad_freshness_names_the_view_and_key():
    with pytest.raises(ConfigError, match=r"views\.v\.freshness\.fail_window: expected a duration.*'soon'"):
        freshness_policy(Freshness(fail_window="soon"), view="v")
    with pytest.raises(ConfigError, match="warn_window` only applies to time windows"):
        freshness_policy(Freshness(cron="0 9 * * *", warn_window="1h"), view="v")
