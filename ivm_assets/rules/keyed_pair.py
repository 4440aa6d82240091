"""What the operators that look state up by the keys of two inputs share (inner, outer, semi
and anti joins): their two keyed state tables and their binding, written once for both
engines (:meth:`KeyedPair.epoch`): both changes bucketed alike, rows with a NULL key set
apart, each state read for the keys of the changes the operator names.

Each engine keys the two changes its own way (:meth:`EpochBinding.pair`): Spark's
(:mod:`ivm_assets.render.spark.binding`) works on change sets already materialized, whose
small ones have an Arrow copy on the driver, split or combined there without another job.
"""

from __future__ import annotations

from abc import abstractmethod

from ivm_assets.ir.rel import Rel
from ivm_assets.rules.binding import Change, EpochBinding
from ivm_assets.rules.operator import Operator
from ivm_assets.state.spec import StateTable


class KeyedPair(Operator):
    """Two inputs matched on key columns. Each input's rows are kept as a z-set keyed by its
    keys (state tables ``left`` and ``right``); each epoch both changes are bucketed alike.

    The binding (:meth:`epoch`) is one for every such operator and both engines: both
    changes keyed, each state read for the keys :attr:`lookups` names, the rule over what is
    present, both changes appended. What differs between operators is declared here."""

    # Per rule input read from state: (the side whose table is read, the sides whose
    # change's keys are looked up in it, the table's own side first).
    lookups: dict[str, tuple[str, tuple[str, ...]]] = {
        "old_right": ("right", ("right", "left")), "old_left": ("left", ("right",)),
    }
    # Per rule input of rows with a NULL key (which match nothing and need no state): its side.
    null_inputs: dict[str, str] = {"nulls": "left"}

    def __init__(
        self, op_id: str, left: Operator, right: Operator, left_keys: tuple[str, ...], right_keys: tuple[str, ...],
        columns: tuple[str, ...],
    ) -> None:
        self.id, self.left, self.right, self.columns = op_id, left, right, columns
        self.left_keys, self.right_keys = left_keys, right_keys
        self.left_state = StateTable(operator_id=op_id, name="left", columns=left.columns, keys=left_keys, layout="zset")
        self.right_state = StateTable(operator_id=op_id, name="right", columns=right.columns, keys=right_keys, layout="zset")

    @property
    def inputs(self) -> tuple[Operator, ...]:
        return (self.left, self.right)

    @property
    def state_tables(self) -> tuple[StateTable, ...]:
        return (self.left_state, self.right_state)

    @abstractmethod
    def rule_on(self, present: set[str]) -> Rel:
        """This operator's rule on changes over the rule inputs in ``present``."""

    def epoch(self, cx: EpochBinding) -> Change:
        dl, dr, nulls = cx.pair(self)
        inputs = {"dl": cx.unkeyed(dl), "dr": cx.unkeyed(dr)} | {name: nulls[side] for name, side in self.null_inputs.items()}
        present = {name for name, keyed in (("dl", dl), ("dr", dr)) if cx.rows(keyed)}
        if present:
            changes = {"left": (dl, self.left_keys), "right": (dr, self.right_keys)}
            tables = {"left": self.left_state, "right": self.right_state}
            for name, (side, probes) in self.lookups.items():
                if (rows := cx.lookup_keys(tables[side], [changes[p] for p in probes])) is not None:
                    inputs[name] = rows
                    present.add(name)
        out = cx.compute(self.rule_on(present), inputs, self.columns, like=(dl, dr))
        cx.append(self.left_state, dl)
        cx.append(self.right_state, dr)
        return out
