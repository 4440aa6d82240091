"""Incrementalization: the ordinary plan becomes a dataflow of incremental operators.

One rule per plan node. Operator ids are stable for a given plan (pre-order position plus
kind), and the state tables of operator ``op3_join`` live at ``_ivm/<view>/op3_join_left``
etc., so a view whose SQL is unchanged finds its state again on the next refresh.

Example:
    >>> from ivm_assets.sql.plan import Plan, Filter, Scan
    >>> plan = Plan(Filter(Scan("t", ("a",), ("x",)), "`x` > 1"), ("a",))
    >>> incrementalize(plan).id
    'op0_filter'
"""

from __future__ import annotations

import itertools

from ivm_assets.operators.aggregate import AggregateOp
from ivm_assets.operators.base import Operator
from ivm_assets.operators.distinct import DistinctOp
from ivm_assets.operators.join import JoinOp
from ivm_assets.operators.linear import FilterOp, ProjectOp, ScanOp, UnionAllOp
from ivm_assets.sql.plan import Aggregate, Distinct, Filter, Join, Node, Plan, Project, Scan, UnionAll


def incrementalize(plan: Plan) -> Operator:
    """The root operator of ``plan``'s dataflow."""
    counter = itertools.count()

    def visit(node: Node) -> Operator:
        op_id = f"op{next(counter)}_{type(node).__name__.lower()}"
        if isinstance(node, Scan):
            return ScanOp(op_id, node.relation, node.source_columns, node.columns)
        if isinstance(node, Filter):
            return FilterOp(op_id, visit(node.input), node.predicate)
        if isinstance(node, Project):
            return ProjectOp(op_id, visit(node.input), node.exprs)
        if isinstance(node, Join):
            left = visit(node.left)
            return JoinOp(op_id, left, visit(node.right), node.left_keys, node.right_keys, node.residual)
        if isinstance(node, Aggregate):
            return AggregateOp(op_id, visit(node.input), node.keys, node.aggs)
        if isinstance(node, Distinct):
            return DistinctOp(op_id, visit(node.input))
        if isinstance(node, UnionAll):
            return UnionAllOp(op_id, tuple(visit(i) for i in node.inputs), node.columns)
        raise TypeError(f"No incremental rule for {type(node).__name__}")

    return visit(plan.root)


def operators(root: Operator):
    """Every operator of the dataflow, parents before children."""
    yield root
    for child in root.inputs:
        yield from operators(child)
