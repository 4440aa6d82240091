"""The demo: a small shop whose sales views are kept up to date from Delta change feeds.

``ivm demo`` creates the project (generated sources in a local folder warehouse), builds
every view, applies a realistic batch of inserts, updates and deletes to the sources,
refreshes again (incrementally), and checks every view against a recompute.
"""

from __future__ import annotations

from ivm_assets.delta.read import read_small
from ivm_assets.delta.write import create_table, delete_rows, update_rows, write
import random
import shutil
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

import pyarrow as pa


VIEWS = {
    "revenue_by_region_day": """\
-- Revenue and order count per customer region and day.
SELECT c.region, o.order_date,
       SUM(l.quantity * l.unit_price) AS revenue,
       COUNT(DISTINCT o.order_id) AS orders
FROM orders o
JOIN order_lines l ON l.order_id = o.order_id
JOIN customers c ON c.customer_id = o.customer_id
WHERE o.status <> 'cancelled'
GROUP BY c.region, o.order_date
""",
    "region_totals": """\
-- A view over a view: stays incremental because view outputs have a change feed too.
SELECT region, SUM(revenue) AS revenue, SUM(orders) AS orders, MAX(order_date) AS last_order_day
FROM revenue_by_region_day
GROUP BY region
""",
    "product_stock": """\
-- Units still reserved by open orders, against the stock on hand.
SELECT p.product_id, p.name, p.stock,
       SUM(l.quantity) AS reserved,
       p.stock - SUM(l.quantity) AS available
FROM products p
JOIN order_lines l ON l.product_id = p.product_id
JOIN orders o ON o.order_id = l.order_id
WHERE o.status IN ('placed', 'paid')
GROUP BY p.product_id, p.name, p.stock
""",
    "order_status_funnel": """\
SELECT status, COUNT(*) AS orders, COUNT(DISTINCT customer_id) AS customers
FROM orders
GROUP BY status
""",
    "top_customers": """\
-- PERCENT_RANK has no incremental rule: refreshed by full recompute, with that reason
-- recorded (the share of all spending, SUM(...) / SUM(SUM(...)) OVER (), alone would be).
SELECT c.customer_id, c.name, SUM(l.quantity * l.unit_price) AS spent,
       PERCENT_RANK() OVER (ORDER BY SUM(l.quantity * l.unit_price)) AS percentile
FROM customers c
JOIN orders o ON o.customer_id = c.customer_id
JOIN order_lines l ON l.order_id = o.order_id
GROUP BY c.customer_id, c.name
ORDER BY spent DESC
LIMIT 10
""",
}

REGIONS = ["north", "south", "east", "west", "central"]
STATUSES = ["placed", "paid", "shipped", "delivered", "cancelled"]
START = date(2026, 1, 1)


def _customers(n: int, rng: random.Random) -> pa.Table:
    return pa.table(
        {
            "customer_id": pa.array(range(1, n + 1), pa.int64()),
            "name": [f"customer {i}" for i in range(1, n + 1)],
            "region": [rng.choice(REGIONS) for _ in range(n)],
        }
    )


def _products(n: int, rng: random.Random) -> pa.Table:
    return pa.table(
        {
            "product_id": pa.array(range(1, n + 1), pa.int64()),
            "name": [f"product {i}" for i in range(1, n + 1)],
            "price": pa.array([Decimal(rng.randint(100, 20000)) / 100 for _ in range(n)], pa.decimal128(10, 2)),
            "stock": pa.array([rng.randint(0, 500) for _ in range(n)], pa.int32()),
        }
    )


def _orders(ids: range, customers: int, products: pa.Table, rng: random.Random) -> tuple[pa.Table, pa.Table]:
    prices = products.column("price").to_pylist()
    orders = {"order_id": [], "customer_id": [], "order_date": [], "status": []}
    lines = {"order_id": [], "product_id": [], "quantity": [], "unit_price": []}
    for order_id in ids:
        orders["order_id"].append(order_id)
        orders["customer_id"].append(rng.randint(1, customers))
        orders["order_date"].append(START + timedelta(days=rng.randint(0, 89)))
        orders["status"].append(rng.choice(STATUSES))
        for product in rng.sample(range(1, len(prices) + 1), rng.randint(1, 4)):
            lines["order_id"].append(order_id)
            lines["product_id"].append(product)
            lines["quantity"].append(rng.randint(1, 5))
            lines["unit_price"].append(prices[product - 1])
    order_schema = pa.schema([("order_id", pa.int64()), ("customer_id", pa.int64()), ("order_date", pa.date32()), ("status", pa.string())])
    line_schema = pa.schema([("order_id", pa.int64()), ("product_id", pa.int64()), ("quantity", pa.int32()), ("unit_price", pa.decimal128(10, 2))])
    return pa.table(orders, schema=order_schema), pa.table(lines, schema=line_schema)


def create_demo_project(folder: str | Path, *, customers: int = 2000, products: int = 200, orders: int = 20000, seed: int = 7) -> Path:
    """Write the demo project (ivm.yaml, views/*.sql, generated Delta sources) into ``folder``."""
    root = Path(folder).resolve()
    if root.exists():
        if not (root / ".ivm-demo").exists():
            raise FileExistsError(f"{root} exists and is not a demo project; choose another --dir")
        shutil.rmtree(root)
    (root / "views").mkdir(parents=True)
    (root / ".ivm-demo").write_text("created by `ivm demo`; safe to delete\n")
    rng = random.Random(seed)
    product_table = _products(products, rng)
    order_table, line_table = _orders(range(1, orders + 1), customers, product_table, rng)
    tables = {"customers": _customers(customers, rng), "products": product_table, "orders": order_table, "order_lines": line_table}
    for name, table in tables.items():
        create_table(str(root / "sources" / name), table)
    for name, sql in VIEWS.items():
        (root / "views" / f"{name}.sql").write_text(sql)
    sources = "\n".join(f"  {name}: sources/{name}" for name in tables)
    (root / "ivm.yaml").write_text(
        "# The demo shop. Outputs and operator state go to ./warehouse.\n"
        f"warehouse: warehouse\nsources:\n{sources}\n"
        "views:\n"
        "  order_status_funnel:\n    refresh: incremental\n    freshness: {fail_window: 30m, warn_window: 10m}\n"
        "  revenue_by_region_day:\n    freshness: {fail_window: 1h, warn_window: 20m}\n"
        "  region_totals:\n    freshness: {fail_window: 1h}\n"
        "  product_stock:\n    freshness: {fail_window: 2h}\n"
        "  top_customers:\n    freshness: {cron: '0 9 * * *', fail_window: 1d}\n"
    )
    return root


def apply_demo_changes(folder: str | Path, *, seed: int = 1, new_orders: int = 200, status_changes: int = 100, deletions: int = 50) -> str:
    """One realistic batch: new orders with lines, orders moving along, cancelled orders removed."""
    root = Path(folder).resolve()
    rng = random.Random(seed)
    orders_uri, lines_uri = str(root / "sources" / "orders"), str(root / "sources" / "order_lines")
    products = read_small(str(root / "sources" / "products"))
    existing = read_small(orders_uri).column("order_id").to_pylist()
    customers = read_small(str(root / "sources" / "customers")).num_rows
    first = max(existing) + 1
    new, new_lines = _orders(range(first, first + new_orders), customers, products, rng)
    write(orders_uri, new, mode="append")
    write(lines_uri, new_lines, mode="append")
    moved = rng.sample(existing, status_changes)
    update_rows(orders_uri, set_sql={"status": "'shipped'"}, predicate=f"order_id IN ({', '.join(map(str, moved))})")
    gone = rng.sample([o for o in existing if o not in set(moved)], deletions)
    predicate = f"order_id IN ({', '.join(map(str, gone))})"
    delete_rows(lines_uri, predicate)
    delete_rows(orders_uri, predicate)
    return f"{new_orders} new orders ({new_lines.num_rows} lines), {status_changes} orders shipped, {deletions} orders deleted"


def run_demo(folder: str) -> int:
    """Build, change, refresh, verify; print what happened. Returns the exit status."""
    from ivm_assets.engine.oracle import check_views
    from ivm_assets.project import IvmProject

    root = create_demo_project(folder)
    print(f"demo project created in {root}")
    project = IvmProject.load(root)
    print("\n== first refresh (builds every view) ==")
    for result in project.refresh():
        print("  " + result.summary())
    print("\n== applying a batch of source changes ==")
    print("  " + apply_demo_changes(root))
    print("\n== second refresh (from the change data feeds) ==")
    for result in project.refresh():
        print("  " + result.summary())
    print("\n== checking every view against a recompute of its SQL ==")
    bad = 0
    for result in check_views(project, project.order):
        bad += not result.ok
        print(f"  {result.view}: {'equal' if result.ok else f'DIFFERENT ({result.missing} missing, {result.extra} extra)'}")
    print("\n" + project.explain("revenue_by_region_day"))
    print(f"\nNext: `ivm status --project {folder}`, `ivm explain VIEW --project {folder}`, edit sources and `ivm refresh --project {folder}`.")
    return 1 if bad else 0
