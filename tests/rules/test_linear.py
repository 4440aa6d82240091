"""Filter, project and UNION ALL against recompute on random change batches; a chain of
them bound into one rule."""

from __future__ import annotations

from dataclasses import fields

from hypothesis import given
from hypothesis import strategies as st

from ivm_assets.rules.linear import FilterOp, ProjectOp, ScanOp, fused
from ivm_assets.ir import rel
from tests.rules.harness import property_settings, run_random_batches


@property_settings
@given(data=st.data())
def test_filter_project_union_all(spark, data):
    run_random_batches(
        spark,
        data,
        {
            "projected": "SELECT id, v * 2 + 1 AS v2, COALESCE(s, 'none') AS s, CASE WHEN x > 1 THEN 'big' ELSE 'small' END AS size "
            "FROM t WHERE v > 0 OR k IS NULL",
            "unioned": "SELECT k, v FROM t WHERE k = 1 UNION ALL SELECT k, v FROM u",
        },
        tables=("t", "u"),
    )


class _Held:
    """The part of an epoch binding :func:`fused` asks: which changes are computed already."""

    def __init__(self, *held: str) -> None:
        self._held = set(held)

    def source(self, relation: str) -> str:
        return f"Δ{relation}"

    def change(self, op) -> str:
        return f"Δ{op.id}"

    def held(self, op) -> bool:
        return op.id in self._held


def _chain():
    scan = ScanOp("s", "t", ("id", "v"), ("id", "v"))
    kept = FilterOp("f", scan, "`v` > 0")
    pruned = ProjectOp("p", kept, (("id", "`id`"),))
    return scan, kept, ProjectOp("x", pruned, (("twice", "`id` * 2"),))


def test_a_chain_of_scans_filters_and_pruning_projections_is_one_rule_over_the_source():
    _, _, top = _chain()
    node, inputs = fused(top, _Held())
    assert inputs == {"change": "Δt"}
    assert [i.name for i in _inputs(node)] == ["change"]
    assert "`v` > 0" in repr(node) and "`id` * 2" in repr(node)


def test_a_link_whose_change_is_held_is_read_not_computed_again():
    _, _, top = _chain()
    node, inputs = fused(top, _Held("f"))
    assert inputs == {"change": "Δf"}
    assert "`v` > 0" not in repr(node)


def test_a_projection_that_computes_is_not_inlined():
    scan = ScanOp("s", "t", ("id",), ("id",))
    computed = ProjectOp("c", scan, (("id", "`id` + 1"),))
    node, inputs = fused(FilterOp("f", computed, "`id` > 0"), _Held())
    assert inputs == {"change": "Δc"}


def _inputs(node) -> list:
    """The inputs a rule reads, in order."""
    if isinstance(node, rel.Input):
        return [node]
    found = []
    for f in fields(node):
        value = getattr(node, f.name)
        for v in value if isinstance(value, tuple) else (value,):
            if isinstance(v, rel.Rel.__args__):
                found += _inputs(v)
    return found
