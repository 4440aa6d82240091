"""The in-process epoch of NOT IN (its rule is in :mod:`ivm_assets.rules.not_in`): it binds
the relations its rule reads (change sets, state rows read on the driver) and has DuckDB
compute the rule's steps (:mod:`ivm_assets.local.render_duckdb`); and the state lookups it
shares with the bound operators' epochs (:mod:`ivm_assets.local.binding`). A mixin of
:class:`~ivm_assets.local.epoch.LocalEpoch`, whose state helpers it uses."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ivm_assets.local import render_duckdb
from ivm_assets.local.columns import cast_columns, check_key_types, split_null_keys
from ivm_assets.local.untranslatable import Untranslatable
from ivm_assets.operators.semi_join import NotInOp
from ivm_assets.rules import rel
from ivm_assets.rules.not_in import NULL
from ivm_assets.spark.arrow import normalize_table
from ivm_assets.state.arrangement import StateTable
from ivm_assets.zset import BUCKET, WEIGHT


class RuleVisits:
    """NOT IN's visit, and the state lookups by the keys of several changes it shares with
    :class:`~ivm_assets.local.binding.DriverBinding`."""

    # --- NOT IN: the two steps of :mod:`ivm_assets.rules.not_in` ------------------------------
    def visit_NotInOp(self, op: NotInOp) -> pa.Table:
        rule = op.rule
        left = self.consolidate(self.change(op.left), op.left.columns)
        right = self.consolidate(self.change(op.right), op.right.columns)
        right = right.append_column(NULL, pc.is_null(right.column(op.c)))
        check_key_types(left, right, zip(op.left_keys, op.right_keys), "NOT IN's keys", full=self.ctx.full)
        dl_grouped, dl_no_group = split_null_keys(left, op.left_groups_keys)
        dl_pairs, _ = split_null_keys(dl_grouped, (op.x,))
        dr_grouped, _ = split_null_keys(right, op.right_group_keys)  # a NULL group is no group
        dr_pairs, _ = split_null_keys(dr_grouped, (op.c,))
        hashes = {t.name: self._hashes(t) for t in op.state_tables}
        keyed = {  # per state table: its keys, and the change it stores (bucketed below)
            "left": (op.left_keys, dl_pairs), "left_groups": (op.left_groups_keys, dl_grouped),
            "values": (op.right_keys, dr_pairs), "groups": (op.right_group_keys, dr_grouped),
        }
        tables = {"dl_no_group": dl_no_group, "dl_grouped": dl_grouped, "dr_groups": dr_grouped, "dr_pairs": dr_pairs}
        present: set[str] = set()
        if dl_grouped.num_rows or dr_grouped.num_rows:
            found = {
                "old_groups": (op.groups, [(dr_grouped, op.right_group_keys), (dl_grouped, op.left_groups_keys)]),
                "old_values": (op.values, [(dr_pairs, op.right_keys), (dl_pairs, op.left_keys)]),
            }
            for name, (table, parts) in found.items():
                if (rows := self._read(table, parts, hashes)) is not None:
                    tables[name] = rows
                    present.add(name)
            tables["status"] = self._computed(rule.status(present), tables)
            tables["counts"] = self._computed(rule.counts(present), tables)
            present |= {"status", "counts"}
            if dr_grouped.num_rows:
                flipped = self._computed(rule.flipped(), tables)
                if flipped.num_rows:
                    if (rows := self._read(op.left_groups, [(flipped, op.right_group_keys)], hashes)) is not None:
                        rows_pairs, _ = split_null_keys(rows, (op.x,))
                        counts = tables["counts"]
                        if rows_pairs.num_rows:
                            theirs = {"dr_pairs": dr_pairs}
                            if (old := self._read(op.values, [(rows_pairs, op.left_keys)], hashes)) is not None:
                                theirs["old_values"] = old
                            counts = self._computed(rule.counts(set(theirs)), theirs)
                        tables |= {"flipped_rows": rows, "flipped_counts": counts}
                        present.add("flipped_rows")
                    tables["flipped"] = flipped
                    present.add("flipped")
                if dr_pairs.num_rows and (rows := self._read(op.left_state, [(dr_pairs, op.right_keys)], hashes)) is not None:
                    tables["touched_rows"] = rows
                    present.add("touched_rows")
        out = self._rendered(rule.output(present), tables, {f.name: f for f in left.schema}, op.columns)
        for table in op.state_tables:
            keys, change = keyed[table.name]
            self._write(table, change.append_column(BUCKET, self._buckets(change, keys, hashes[table.name])))
        return out

    def _read(self, table: StateTable, parts: list[tuple[pa.Table, tuple[str, ...]]], hashes: dict[str, tuple[str, ...]]) -> pa.Table | None:
        """``table``'s current rows for the keys of ``parts`` (None: none, or no state)."""
        parts = [(t, keys) for t, keys in parts if t.num_rows]
        if not parts:
            return None
        return self._lookup(table, self._probe(parts, table.keys, hashes[table.name]), table.keys)

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
