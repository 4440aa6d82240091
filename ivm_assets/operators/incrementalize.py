"""Incrementalization: the ordinary plan becomes a dataflow of incremental operators.

One rule per plan node. An operator's id is its kind plus a hash of its whole subtree
(``join_1f2e3d4c``), so it names the same computation on every refresh and nothing else: the
state tables of ``join_1f2e3d4c`` live at ``_ivm/<view>/join_1f2e3d4c_left`` etc., and a
changed subtree gets new ids instead of reading another computation's state. The
:func:`identity` of the whole dataflow, recorded with every epoch, tells a refresh that the
plan changed (new SQL, an engine upgrade, an upstream schema) and a rebuild is due. It is
made of what each operator computes (its fields, rule version and state tables), not of how
``describe`` words it; :func:`fingerprint`, the older hash of those words, is recorded
beside it so that epochs recorded before identities existed are still recognised.

Example:
    >>> from ivm_assets.sql.plan import Plan, Filter, Scan
    >>> plan = Plan(Filter(Scan("t", ("a",), ("x",)), "`x` > 1"), ("a",))
    >>> incrementalize(plan).id
    'filter_6111c9fd'
"""

from __future__ import annotations

import dataclasses
import hashlib

from ivm_assets.operators.aggregate import AggregateOp
from ivm_assets.operators.base import Operator
from ivm_assets.state.arrangement import StateTable
from ivm_assets.operators.distinct import DistinctOp
from ivm_assets.operators.join import JoinOp
from ivm_assets.operators.linear import FilterOp, ProjectOp, ScanOp, UnionAllOp
from ivm_assets.operators.outer_join import OuterJoinOp
from ivm_assets.operators.residual_semi_join import ResidualSemiJoinOp
from ivm_assets.operators.semi_join import NotInOp, SemiJoinOp
from ivm_assets.operators.set_operation import SetOperationOp
from ivm_assets.operators.top_k import TopKOp
from ivm_assets.operators.window import WindowOp
from ivm_assets.sql.plan import (
    Aggregate, Distinct, Except, Filter, Intersect, Join, Node, OuterJoin, Plan, Project, Scan, SemiJoin, TopK, UnionAll,
    Window,
)


def incrementalize(plan: Plan) -> Operator:
    """The root operator of ``plan``'s dataflow."""
    used: dict[str, int] = {}

    def visit(node: Node) -> Operator:
        op_id = f"{type(node).__name__.lower()}_{hashlib.sha256(repr(node).encode()).hexdigest()[:8]}"
        # The same subtree twice (a self-join of one subquery) keeps two states: the second
        # is numbered, in the plan's fixed visiting order.
        used[op_id] = used.get(op_id, 0) + 1
        op_id = op_id if used[op_id] == 1 else f"{op_id}_{used[op_id]}"
        if isinstance(node, Scan):
            return ScanOp(op_id, node.relation, node.source_columns, node.columns)
        if isinstance(node, Filter):
            return FilterOp(op_id, visit(node.input), node.predicate)
        if isinstance(node, Project):
            return ProjectOp(op_id, visit(node.input), node.exprs)
        if isinstance(node, Join):
            left = visit(node.left)
            return JoinOp(op_id, left, visit(node.right), node.left_keys, node.right_keys, node.residual)
        if isinstance(node, OuterJoin):
            left = visit(node.left)
            return OuterJoinOp(op_id, left, visit(node.right), node.side, node.left_keys, node.right_keys, node.residual)
        if isinstance(node, SemiJoin):
            left = visit(node.left)
            if node.kind == "not_in":
                return NotInOp(op_id, left, visit(node.right), node.left_keys, node.right_keys)
            if node.residual is not None:
                anti = node.kind == "anti"
                return ResidualSemiJoinOp(op_id, left, visit(node.right), anti, node.left_keys, node.right_keys, node.residual)
            return SemiJoinOp(op_id, left, visit(node.right), node.kind == "anti", node.left_keys, node.right_keys)
        if isinstance(node, Aggregate):
            return AggregateOp(op_id, visit(node.input), node.keys, node.aggs)
        if isinstance(node, Distinct):
            return DistinctOp(op_id, visit(node.input))
        if isinstance(node, UnionAll):
            return UnionAllOp(op_id, tuple(visit(i) for i in node.inputs), node.columns)
        if isinstance(node, (Intersect, Except)):
            left = visit(node.left)
            kind = "intersect" if isinstance(node, Intersect) else "except"
            return SetOperationOp(op_id, left, visit(node.right), kind, node.all)
        if isinstance(node, TopK):
            return TopKOp(op_id, visit(node.input), node.order, node.limit, node.offset, node.partition, node.position)
        if isinstance(node, Window):
            return WindowOp(op_id, visit(node.input), node.partition, node.calls)
        raise TypeError(f"No incremental rule for {type(node).__name__}")

    return visit(plan.root)


def fingerprint(root: Operator, state_format: int) -> str:
    """A hash of the dataflow: every operator's id, rule (and its version), columns and state
    tables, and the state format version. Equal fingerprints mean one refresh can carry on another's state."""
    parts = [str(state_format)]
    for op in operators(root):
        tables = [(t.table_name, t.layout_kind, t.keys, t.columns) for t in op.state_tables]
        # The rule version enters only past 1: views of unchanged rules keep their fingerprint.
        version = (op.version,) if op.version > 1 else ()
        parts.append(repr((op.id, op.describe(), op.columns, tables, *version)))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def identity(root: Operator, state_format: int) -> str:
    """A hash of what the dataflow computes: every operator's kind, fields (ids, columns,
    keys, expressions, aggregates, orders; canonical, whatever ``describe`` says), rule
    version and state tables, and the state format version."""
    parts = [f"identity 1, state format {state_format}"]
    for op in operators(root):
        fields = sorted((name, _canonical(value)) for name, value in vars(op).items() if not _structural(value))
        tables = [(t.table_name, t.layout_kind, t.keys, t.columns) for t in op.state_tables]
        parts.append(repr((type(op).__name__, op.version, fields, tables)))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _structural(value) -> bool:
    """Whether an operator's attribute is its place in the dataflow (inputs, state tables),
    which :func:`identity` takes from the operators and tables themselves."""
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (tuple, list)) else (value,)
    return any(isinstance(v, (Operator, StateTable)) for v in items)


def _canonical(value):
    """``value`` as plain, ordered data: a dataclass (an aggregate call) as its kind and the
    fields that make its identity."""
    if dataclasses.is_dataclass(value):
        return (type(value).__name__, *(_canonical(getattr(value, f.name)) for f in dataclasses.fields(value) if f.compare))
    if isinstance(value, (tuple, list)):
        return tuple(_canonical(v) for v in value)
    if isinstance(value, dict):  # ordered by key, as a set is: repr order is the process's
        return tuple(sorted((repr(k), _canonical(v)) for k, v in value.items()))
    if isinstance(value, (set, frozenset)):
        return tuple(sorted(repr(_canonical(v)) for v in value))
    return value


def operators(root: Operator):
    """Every operator of the dataflow, parents before children."""
    yield root
    for child in root.inputs:
        yield from operators(child)
