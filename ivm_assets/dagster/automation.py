"""When declarative automation refreshes a view: :func:`ivm_eager`.

Dagster's ``AutomationCondition.eager()`` is ``(newly_missing | any_deps_updated)
.since_last_handled()`` (and nothing missing or in progress), where "handled" is the view
newly requested *or newly updated*. A view's own materialization therefore ends every
pending update, even one that arrived while the run producing that materialization was in
progress and had already read its sources. The source sensor reports a Delta version
once, when it moves: an observation that lands during a refresh run (or between two
automation ticks together with that run's materialization) was dropped and the view
stayed behind its source until the source moved again (issue 9).

``ivm_eager()`` is the same condition with one change for dependencies that are source
assets (observed, never materialized: the ivm sources): an observation counts as handled
only by a request made on the tick that saw it or later, never by the view's
materialization. A request made on tick T launches a run that reads its sources after T, so
it covers every observation seen up to T; one first seen on the tick after the request (the
run may have read its sources before it) or while the view is in progress stays pending
and requests one more refresh once the run is over. That refresh is incremental, or
``unchanged`` (a no-op of about a run start) when the run had read the new version after
all. Nothing is requested when no source moved, and a failed run is not retried until one
moves again (as with ``eager()``).

Updates of materialized dependencies (upstream views, Dagster assets a Python view reads)
keep ``eager()``'s rule: they may come from the view's own run, and Dagster recognises that
(``executed_with_root_target``) only for runs that record their asset selection; a whole
asset job's run does not, so without the materialization as "handled" a view of a view
refreshed in such a run would be refreshed once more for nothing.

Only Dagster's built-in conditions are used, so it is serializable: Dagster's own automation
sensor and any ``AutomationConditionSensorDefinition`` evaluate it in the daemon, with no
user-code evaluation.

Example:
    >>> ivm_eager().get_label()
    'ivm_eager'
"""

from __future__ import annotations

import warnings

import dagster as dg


def ivm_eager() -> dg.AutomationCondition:
    """``eager()`` where a view's own materialization does not count as having handled a source's observation."""
    ac = dg.AutomationCondition
    with warnings.catch_warnings():
        # `include_sources` is beta in Dagster 1.13 (Dagster's own automation tester uses it).
        warnings.simplefilter("ignore", dg.BetaWarning)
        observed = dg.AssetSelection.all(include_sources=True) - dg.AssetSelection.all()
    source_moved = ac.any_deps_updated().allow(observed).with_label("any_source_observed")
    # A request on the previous tick handles the observations seen up to then; one first seen
    # on this tick may have come after that run read its sources, so the view stays pending.
    # (any_deps_updated keeps no state of its own, so evaluating it again here, only on ticks
    # after a request, is exact.)
    requested_since = ((ac.newly_requested() & ~source_moved) | ac.initial_evaluation()).with_label("requested_since_observed")
    materialized_dep_updated = ac.any_deps_updated().ignore(observed).with_label("any_materialized_dep_updated")
    return (
        ac.in_latest_time_window()
        & ((ac.newly_missing() | materialized_dep_updated).since_last_handled() | source_moved.since(requested_since))
        & ~ac.any_deps_missing()
        & ~ac.any_deps_in_progress()
        & ~ac.in_progress()
    ).with_label("ivm_eager")
