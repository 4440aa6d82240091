"""What an operator declares of a state table (:class:`StateTable`): its name, columns, keys
and layout. No I/O: reading, appending and committing are the state store's
(:mod:`ivm_assets.state.arrangement`), which each engine calls with a table declared here.

Two layouts:
- a *z-set* (``__w`` column): rows with weights, appended as changes; a row's multiplicity is
  the sum of its weights (join sides, DISTINCT counts, MIN/MAX/COUNT DISTINCT values);
- *latest value* (``__epoch`` column): one row per key per epoch that touched it; the row of
  the highest epoch is the current one (aggregate groups).

>>> t = StateTable(operator_id="join_1f2e3d4c", name="left", columns=("k", "v"), keys=("k",), layout="zset")
>>> t.table_name, t.uri("/w/_ivm/v"), t.stored_columns()
('join_1f2e3d4c_left', '/w/_ivm/v/join_1f2e3d4c_left', ['k', 'v', '__w'])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from ivm_assets.zset import WEIGHT

if TYPE_CHECKING:
    from ivm_assets.epoch_context import EpochContext


class StateTable:
    """One operator's state table: ``columns`` (keys first) plus ``__w`` or ``__epoch``."""

    def __init__(
        self,
        *,
        operator_id: str,
        name: str,
        columns: tuple[str, ...],
        keys: tuple[str, ...],
        layout: Literal["zset", "latest"],
        alive_column: str | None = None,
    ) -> None:
        """``alive_column`` (latest layout): rows where it is 0 mean "no such key" and are
        dropped when compacting."""
        self.alive_column = alive_column
        self.operator_id = operator_id
        self.name = name
        self.columns = columns
        self.keys = keys
        self.layout_kind = layout

    @property
    def table_name(self) -> str:
        """The table's folder name under the view's state root."""
        return f"{self.operator_id}_{self.name}"

    def uri(self, ctx_or_root: EpochContext | str) -> str:
        root = ctx_or_root if isinstance(ctx_or_root, str) else ctx_or_root.state_root
        return f"{root}/{self.table_name}"

    def stored_columns(self) -> list[str]:
        """The columns the table's files hold, besides ``__bucket``: the state's, and ``__w`` for a z-set."""
        return [*self.columns, WEIGHT] if self.layout_kind == "zset" else list(self.columns)
