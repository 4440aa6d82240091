"""The table properties ivm sets on the Delta tables it creates."""

from __future__ import annotations

CDF_ON = {"delta.enableChangeDataFeed": "true"}

# Tables ivm writes (state, outputs, progress logs) take a commit per refresh or more, and
# each open replays the commits since the last checkpoint (~0.2 ms each; Delta's default is
# one checkpoint per 100 commits). A checkpoint every 10 commits costs ~10 ms once and keeps
# every later open of the table short, however many epochs ran.
OWN_TABLE = {"delta.checkpointInterval": "10"}

# ivm's internal tables (state tables, progress logs) are read only at the versions the
# epoch in flight recorded, and after it committed only at their latest. Delta keeps log
# files 30 days, and delta-rs lists the whole log folder on every commit and open, so a
# commit cost 2.6 ms on a new table and 9.6 ms after 700 commits (measured; the soak's
# progress logs take 2 commits an epoch): their logs are cleaned by ivm
# (:func:`~ivm_assets.delta.maintenance.clean_log`), at a point no epoch needs an older
# version, never by delta-rs after some commit mid-epoch.
INTERNAL_TABLE = {**OWN_TABLE, "delta.logRetentionDuration": "interval 0 seconds", "delta.enableExpiredLogCleanup": "false"}


def new_table_configuration(change_feed: bool) -> dict[str, str]:
    """The configuration a table ivm creates starts with: a view's output carries the change
    feed (downstream views read it) and keeps Delta's log retention (users time-travel it);
    a table without one is internal (state)."""
    return {**OWN_TABLE, **CDF_ON} if change_feed else INTERNAL_TABLE
