"""Operators' bindings (:mod:`ivm_assets.rules.binding`) run in process: change sets are
Arrow tables, state is read on the driver for the touched keys and its rows typed as the
change's, rules are computed by DuckDB (:mod:`ivm_assets.render.duckdb.rel`). A mixin of
:class:`~ivm_assets.render.duckdb.epoch.LocalEpoch`, whose state helpers it uses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from ivm_assets.epoch_context import FromContext
from ivm_assets.render.duckdb import rel as render_duckdb
from ivm_assets.render.duckdb.columns import cast_columns, check_key_types, split_null_keys
from ivm_assets.ir.types import VALUE_FAMILIES, arrow_type
from ivm_assets.errors import Untranslatable
from ivm_assets.rules.operator import Operator
from ivm_assets.rules.keyed_pair import KeyedPair
from ivm_assets.rules.linear import FilterOp, ProjectOp, ScanOp, fused
from ivm_assets.rules.not_in import NotInOp
from ivm_assets.ir import rel
from ivm_assets.rules.not_in import NULL
from ivm_assets.ir.rel import Rel
from ivm_assets.spark.arrow import normalize_table, spark_type_name
from ivm_assets.state.spec import StateTable
from ivm_assets.zset import BUCKET, WEIGHT
from ivm_assets.state import arrangement

if TYPE_CHECKING:
    from ivm_assets.rules.aggregate_steps import AggregateRule


@dataclass(frozen=True)
class Fused:
    """A change whose rule (``node`` over ``table``, read as ``fused``) is not computed on its
    own but in the statement of the rule that reads it (see ``aggregated``)."""

    node: Rel
    table: pa.Table

    @property
    def schema(self) -> pa.Schema:
        return self.table.schema


class DriverBinding(FromContext):
    """An epoch in process, as an operator's binding sees it."""

    def source(self, relation: str) -> pa.Table:
        return self.changes[relation]

    def held(self, op: Operator) -> bool:
        return op.id in self._done

    def unions_alike(self, changes: tuple[pa.Table, ...]) -> None:
        if len({tuple(c.schema.types) for c in changes}) > 1:
            raise Untranslatable("UNION ALL of inputs typed differently (Spark widens them)")

    def aggregated(self, op: Operator, *, fused: bool) -> pa.Table | Fused:
        raw = self.change(op)
        if self.ctx.full:
            return raw  # every weight is +1: the partials and value tables sum them as they are
        if fused:  # consolidated in the statement of its one rule: a statement less
            return Fused(rel.Consolidate(rel.Input("fused", tuple(raw.column_names)), op.columns), raw)
        return self.consolidate(raw, op.columns)

    def constant(self, change: pa.Table | Fused, name: str, value: int) -> pa.Table | Fused:
        if isinstance(change, Fused):
            items = tuple((c, rel.Col(c)) for c in rel.columns(change.node)) + ((name, rel.Cast(rel.Lit(value), "int")),)
            return Fused(rel.Select(change.node, items), change.table)
        return change.append_column(name, pa.array([value] * change.num_rows, pa.int32()))

    def type_name(self, change: pa.Table | Fused, column: str) -> str:
        return spark_type_name(change.schema.field(column).type)

    def columns(self, change: pa.Table | Fused) -> tuple[str, ...]:
        return rel.columns(change.node) if isinstance(change, Fused) else tuple(change.column_names)

    def aggregates_alike(self, change: pa.Table | Fused, rule: AggregateRule, values: tuple[int, ...]) -> None:
        for i, a in enumerate(rule.aggs):
            family = arrow_type(change.schema.field(a.arg).type).family if a.arg else None
            # DOUBLE too: both engines add doubles one after another, uncompensated, and a
            # running sum differs from a recompute by rounding in either engine (docs/sql-support.md,
            # Exactness). FLOAT too: both add its values converted to DOUBLE. Not a string
            # (Spark sums it cast to DOUBLE, from text DuckDB reads otherwise).
            if a.func in ("sum", "avg") and family not in ("number", "double", "float"):
                raise Untranslatable(f"{a.func.upper()} over a {family}")
            # DOUBLE and FLOAT too: the values are consolidated in one rule for both (one
            # NaN; COUNT(DISTINCT) counts −0.0 and 0.0 as one value, as Spark does), and
            # both order NaN above +Infinity.
            if i in values and family not in (*VALUE_FAMILIES, "double", "float"):
                raise Untranslatable(f"{a.func.upper()} over a column of type {change.schema.field(a.arg).type}")

    def stored(self, change: pa.Table, table: StateTable, columns: tuple[str, ...]) -> pa.Table:
        # A key DuckDB widened would not match the state's on the driver.
        typed = cast_columns(change, self._state_schema(table), list(columns))
        for name in change.column_names:
            if name not in columns:
                typed = typed.append_column(change.schema.field(name), change.column(name))
        return typed

    def reads_whole(self, table: StateTable) -> bool:
        return False  # looking up the touched keys costs no more than reading them all

    def empty(self, change: pa.Table) -> bool:
        return change.num_rows == 0

    def consolidated(self, op: Operator, columns: tuple[str, ...]) -> pa.Table:
        if isinstance(op, (ScanOp, FilterOp, ProjectOp)) and not self.held(op):
            # A chain of linear operators not computed yet is consolidated in the statement
            # of its own rule (the one rule, rel.Consolidate): a statement less per join
            # input that is a source's scan (1.5-3.5 ms each).
            node, inputs = fused(op, self)
            return self.bounded(op, self._computed(rel.Consolidate(node, columns), inputs))
        return self.consolidate(self.change(op), columns)

    def tagged(self, ops: tuple[Operator, ...], columns: tuple[str, ...], tag: str) -> pa.Table:
        parts = []
        for index, op in enumerate(ops):
            change = self.change(op).rename_columns([*columns, WEIGHT])
            parts.append(change.append_column(tag, pa.array([index] * change.num_rows, pa.int32())))
        if len({part.schema for part in parts}) > 1:
            raise Untranslatable("inputs typed differently (Spark widens them to a common type)")
        return self.consolidate(pa.concat_tables(parts), (*columns, tag))

    def keyed(self, change: pa.Table, keys: tuple[str, ...], table: StateTable, inputs: tuple[Operator, ...]) -> pa.Table:
        assert not isinstance(change, Fused), "a fused change is read by one rule only"
        return change.append_column(BUCKET, self._buckets(change, keys, self._hashes(table)))

    def pair(self, op: KeyedPair) -> tuple[pa.Table, pa.Table, dict[str, pa.Table]]:
        keyed, nulls = {}, {}
        for side, child, keys, table in (("left", op.left, op.left_keys, op.left_state), ("right", op.right, op.right_keys, op.right_state)):
            if self.ctx.full:
                # A build takes each side as it is, as Spark's does (every weight is +1; grouping
                # millions of rows by all their columns would cost a second), ordered by key on
                # every core unless it already is: the state writer then does not sort it again.
                change, nulls[side] = split_null_keys(self.change(child), keys)
                change = self.in_key_order(change, keys)
            else:
                change, nulls[side] = split_null_keys(self.consolidated(child, child.columns), keys)
            keyed[side] = self.keyed(change, keys, table, ())
        check_key_types(keyed["left"], keyed["right"], zip(op.left_keys, op.right_keys), "the join key", full=self.ctx.full)
        return keyed["left"], keyed["right"], nulls

    def not_in_changes(self, op: NotInOp) -> tuple[pa.Table, pa.Table, pa.Table, pa.Table, pa.Table]:
        left = self.consolidated(op.left, op.left.columns)
        right = self.consolidated(op.right, op.right.columns)
        right = right.append_column(NULL, pc.is_null(right.column(op.c)))
        check_key_types(left, right, zip(op.left_keys, op.right_keys), "NOT IN's keys", full=self.ctx.full)
        dl_grouped, dl_no_group = split_null_keys(left, op.left_groups_keys)
        dr_grouped, _ = split_null_keys(right, op.right_group_keys)  # a NULL group is no group
        return (
            self.keyed(split_null_keys(dl_grouped, (op.x,))[0], op.left_keys, op.left_state, ()),
            self.keyed(dl_grouped, op.left_groups_keys, op.left_groups, ()),
            dl_no_group,
            self.keyed(split_null_keys(dr_grouped, (op.c,))[0], op.right_keys, op.values, ()),
            self.keyed(dr_grouped, op.right_group_keys, op.groups, ()),
        )

    def probe(self, change: pa.Table, keys: tuple[str, ...], table: StateTable) -> pa.Table:
        return self.keyed(change, keys, table, ())  # hashed as the table records, as every key here

    def present(self, keyed: pa.Table, keys: tuple[str, ...]) -> pa.Table:
        return split_null_keys(keyed, keys)[0]

    def rows(self, keyed: pa.Table) -> int:
        return keyed.num_rows

    def kept(self, change: pa.Table) -> pa.Table:
        return change

    def copies(self, kept: pa.Table) -> int:
        return int(pc.sum(kept.column(WEIGHT)).as_py() or 0)

    def distinct(self, keyed: pa.Table, columns: tuple[str, ...]) -> pa.Table:
        return self.sql("SELECT DISTINCT * FROM t", t=keyed.select(list(columns)))

    def orders_alike(self, change: pa.Table, columns: tuple[str, ...], what: str) -> None:
        for name in columns:
            # FLOAT/DOUBLE too: DuckDB orders and partitions them as Spark does (−0.0 ties
            # with 0.0, every NaN with every NaN, above every other value); NULLs' place is
            # written out by the rules.
            if arrow_type(change.schema.field(name).type).family not in (*VALUE_FAMILIES, "double", "float"):
                raise Untranslatable(f"{what} a column of type {change.schema.field(name).type}")

    def unkeyed(self, keyed: pa.Table, columns: tuple[str, ...] | None = None, *, lazily: bool = False) -> pa.Table:
        change = keyed.drop_columns([BUCKET])
        return change if columns is None else change.select([*columns, WEIGHT])

    def lookup(
        self, table: StateTable, keyed: pa.Table | None, keys: tuple[str, ...], *, like: pa.Table | None = None, reused: bool = False,
    ) -> pa.Table | None:
        if keyed is None:
            old = self._current(table, arrangement.read(table, self.ctx, None, ()))
        elif keyed.num_rows == 0:
            return None
        else:
            old = self._lookup(table, keyed, keys)
        if old is None:
            return None
        schema = (like if like is not None else self.unkeyed(keyed)).schema
        return cast_columns(old, schema, [n for n in schema.names if n in old.column_names])

    def lookup_keys(self, table: StateTable, parts: list[tuple[pa.Table, tuple[str, ...]]]) -> pa.Table | None:
        parts = [(change, keys) for change, keys in parts if change.num_rows]
        if not parts:
            return None
        if len(parts) == 1:
            # The change is the probe as it is, with its buckets: a pair's keys are hashed
            # alike in both its tables (Spark lays them out by the pair's type, and a build
            # in process refuses pairs whose own types would hash otherwise).
            return self._lookup(table, *parts[0])
        return self._lookup(table, self._probe(parts, table.keys, self._hashes(table)), table.keys)

    def compute(self, node: Rel, inputs: dict[str, pa.Table | Fused], columns: tuple[str, ...] | None = None, like: tuple[pa.Table, ...] = ()) -> pa.Table:
        for name, change in list(inputs.items()):
            if isinstance(change, Fused):
                node = rel.bound(node, name, change.node)
                inputs = {n: t for n, t in inputs.items() if n != name} | {"fused": change.table}
        if columns is None:
            return self._computed(node, inputs)
        fields = {f.name: f for t in reversed(like) for f in t.schema}  # the first's where names repeat
        return self._rendered(node, inputs, fields, columns)

    def append(self, table: StateTable, keyed: pa.Table) -> None:
        self._write(table, keyed)

    # --- helpers -----------------------------------------------------------------------------
    def _computed(self, node: rel.Rel, tables: dict[str, pa.Table]) -> pa.Table:
        """A step of a rule computed by DuckDB over ``tables``, as DuckDB types it."""
        query, _ = render_duckdb.render(node, {name: t.schema for name, t in tables.items()})
        return normalize_table(self.sql(query, **tables))

    def _probe(self, parts: list[tuple[pa.Table, tuple[str, ...]]], names: tuple[str, ...], hashes: tuple[str, ...]) -> pa.Table:
        """The keys of ``parts`` (change sets with their key columns) as one probe of a state
        table keyed by ``names`` (hashed by ``hashes``), cast to the first part's key types.
        Without keys (a cross join) one row of bucket 0, which reads the whole table: Arrow
        would concatenate the parts' rows without columns into no rows at all."""
        if not names:
            return pa.table({BUCKET: pa.array([0], pa.int32())})
        first = parts[0][0].select(list(parts[0][1])).rename_columns(list(names))
        probes = []
        for table, keys in parts:
            keyed = table.select(list(keys)).rename_columns(list(names))
            try:
                keyed = keyed.cast(first.schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise Untranslatable(f"join keys of types {keyed.schema.types} and {first.schema.types} ({exc})") from exc
            probes.append(keyed)
        probe = pa.concat_tables(probes)
        return probe.append_column(BUCKET, self._buckets(probe, names, hashes))

    def _rendered(self, node: rel.Rel, tables: dict[str, pa.Table], fields: dict[str, pa.Field], columns: tuple[str, ...]) -> pa.Table:
        """A rule's IR computed by DuckDB over ``tables``: ``columns`` typed as ``fields``, and the weight."""
        query, _ = render_duckdb.render(node, {name: t.schema for name, t in tables.items()})
        schema = pa.schema([*(fields[c] for c in columns), pa.field(WEIGHT, pa.int64())])
        return cast_columns(self.sql(query, **tables), schema, schema.names)
