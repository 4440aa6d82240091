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
from collections.abc import Callable
from typing import Any

from ivm_assets.rules.aggregate import AggregateOp
from ivm_assets.rules.distinct import DistinctOp
from ivm_assets.rules.join import JoinOp, OuterJoinOp
from ivm_assets.rules.linear import FilterOp, ProjectOp, ScanOp, UnionAllOp
from ivm_assets.rules.not_in import NotInOp
from ivm_assets.rules.operator import Operator
from ivm_assets.rules.residual_semi_join import ResidualSemiJoinOp
from ivm_assets.rules.semi_join import SemiJoinOp
from ivm_assets.rules.set_operation import SetOperationOp
from ivm_assets.rules.top_k import TopKOp
from ivm_assets.rules.window import WindowOp
from ivm_assets.sql import plan as p
from ivm_assets.state.spec import StateTable

Visit = Callable[[p.Node], Operator]


def _semi_join(node: p.SemiJoin, op_id: str, visit: Visit) -> Operator:
    left, right = visit(node.left), visit(node.right)
    if node.kind == "not_in":
        return NotInOp(op_id, left, right, node.left_keys, node.right_keys)
    if node.residual is not None:
        return ResidualSemiJoinOp(op_id, left, right, node.kind == "anti", node.left_keys, node.right_keys, node.residual)
    return SemiJoinOp(op_id, left, right, node.kind == "anti", node.left_keys, node.right_keys)


def _set_operation(node: p.Intersect | p.Except, op_id: str, visit: Visit) -> Operator:
    kind = "intersect" if isinstance(node, p.Intersect) else "except"
    return SetOperationOp(op_id, visit(node.left), visit(node.right), kind, node.all)


# The operator of each plan node, built from its inputs' operators (children visited in
# field order: left before right, which fixes the numbering of repeated subtrees).
RULES: dict[type[p.Node], Callable[[Any, str, Visit], Operator]] = {
    p.Scan: lambda n, i, visit: ScanOp(i, n.relation, n.source_columns, n.columns),
    p.Filter: lambda n, i, visit: FilterOp(i, visit(n.input), n.predicate),
    p.Project: lambda n, i, visit: ProjectOp(i, visit(n.input), n.exprs),
    p.Join: lambda n, i, visit: JoinOp(i, visit(n.left), visit(n.right), n.left_keys, n.right_keys, n.residual),
    p.OuterJoin: lambda n, i, visit: OuterJoinOp(i, visit(n.left), visit(n.right), n.side, n.left_keys, n.right_keys, n.residual),
    p.SemiJoin: _semi_join,
    p.Aggregate: lambda n, i, visit: AggregateOp(i, visit(n.input), n.keys, n.aggs),
    p.Distinct: lambda n, i, visit: DistinctOp(i, visit(n.input)),
    p.UnionAll: lambda n, i, visit: UnionAllOp(i, tuple(visit(x) for x in n.inputs), n.columns),
    p.Intersect: _set_operation,
    p.Except: _set_operation,
    p.TopK: lambda n, i, visit: TopKOp(i, visit(n.input), n.order, n.limit, n.offset, n.partition, n.position),
    p.Window: lambda n, i, visit: WindowOp(i, visit(n.input), n.partition, n.calls),
}


def incrementalize(plan: p.Plan) -> Operator:
    """The root operator of ``plan``'s dataflow."""
    used: dict[str, int] = {}

    def visit(node: p.Node) -> Operator:
        op_id = f"{type(node).__name__.lower()}_{hashlib.sha256(repr(node).encode()).hexdigest()[:8]}"
        # The same subtree twice (a self-join of one subquery) keeps two states: the second
        # is numbered, in the plan's fixed visiting order.
        used[op_id] = used.get(op_id, 0) + 1
        op_id = op_id if used[op_id] == 1 else f"{op_id}_{used[op_id]}"
        rule = RULES.get(type(node))
        if rule is None:
            raise TypeError(f"No incremental rule for {type(node).__name__}")
        return rule(node, op_id, visit)

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
