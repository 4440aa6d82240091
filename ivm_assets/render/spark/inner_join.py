"""The inner join's epoch in Spark: the one operator Spark does not run through the shared
binding (:meth:`~ivm_assets.rules.keyed_pair.KeyedPair.epoch`, which the in-process engine
runs, as Spark runs the outer joins'). The rule is the same (:class:`~ivm_assets.rules.join.JoinRule`);
what differs is how Spark feeds it: in a build each side is staged straight into its state
table by the executors (:func:`~ivm_assets.state.arrangement.stage`), the state read is joined as it is read
(a join needs no consolidated state: it is bilinear), and a large read gets the change
broadcast to it rather than shuffling both.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ivm_assets.epoch_context import EpochContext
from ivm_assets.render.spark import rel as render_spark
from ivm_assets.render.spark.keying import key_types, keyed_change
from ivm_assets.rules.join import JoinOp
from ivm_assets.sql.plan import q
from ivm_assets.zset import BUCKET
from ivm_assets.state import arrangement


def inner_join(ctx: EpochContext, op: JoinOp, left_change: DataFrame, right_change: DataFrame) -> DataFrame:
    """``op``'s change this epoch (an inner join, not an outer one) from its inputs' changes
    (consolidated in an incremental epoch), its state appends queued."""
    types = key_types(left_change, right_change, op.left_keys, op.right_keys)
    # Each side's keyed change is exactly what its state table stores (NULL keys left out).
    dl = keyed_change(ctx, op.left, _present(left_change, op.left_keys), op.left_keys, types, op.left_state)
    dr = keyed_change(ctx, op.right, _present(right_change, op.right_keys), op.right_keys, types, op.right_state)
    inputs = {"dl": dl.df.drop(BUCKET), "dr": dr.df.drop(BUCKET)}
    present = {name for name, batch in (("dl", dl), ("dr", dr)) if batch.rows}
    # Each state is read for the keys of the other side's change; a large read is joined
    # by broadcasting the change to it rather than shuffling both.
    for name, table, touched, keys, probe in (
        ("old_right", op.right_state, dl, op.left_keys, "dl"), ("old_left", op.left_state, dr, op.right_keys, "dr"),
    ):
        read = arrangement.read(table, ctx, touched, keys) if touched.rows else None
        if read is not None:
            inputs[name] = read.df
            present.add(name)
            if read.large:
                inputs[probe] = F.broadcast(inputs[probe])
    # Left lazy: whoever consumes a change set materializes it once (with its buckets),
    # and a second materialization here would cost one more Spark job per epoch.
    out = render_spark.render(op.rule.rule(present, consolidated=not ctx.full), inputs)
    arrangement.write(op.left_state, ctx, dl, types)
    arrangement.write(op.right_state, ctx, dr, types)
    return out


def _present(df: DataFrame, keys: tuple[str, ...]) -> DataFrame:
    """The rows of ``df`` whose ``keys`` are all present (the rows a join side stores)."""
    return df.filter(" AND ".join(f"{q(k)} IS NOT NULL" for k in keys)) if keys else df
