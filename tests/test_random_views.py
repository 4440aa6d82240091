"""Random views (:mod:`tests.random_views`) refreshed through random changes, every epoch
compared with Spark's answer to the SQL as written, epochs alternating between Spark and
in process.

CI runs one seed's dozen views over a few epochs, in each ANSI mode, and a smaller set whose
every epoch is first interrupted after a random number of commits (as a SIGKILL would leave
it) and then recovered. A deeper search is a loop over seeds:

    for s in $(seq 1 20); do IVM_RANDOM_VIEWS_SEED=$s IVM_RANDOM_VIEWS=30 IVM_RANDOM_VIEWS_EPOCHS=6 \\
        .venv/bin/python -m pytest tests/test_random_views.py -q -p no:cacheprovider || break; done
"""

from __future__ import annotations

import os
import random

import pytest

from ivm_assets.engine.oracle import check_views
from ivm_assets.spark.session import tuned_for
from tests.rules.harness import epochs_alternating
from tests.random_views import Changes, random_changes, random_views
from tests.test_crash import _crash_at

SEED = int(os.environ.get("IVM_RANDOM_VIEWS_SEED", "20261128"))
VIEWS = int(os.environ.get("IVM_RANDOM_VIEWS", "12"))
EPOCHS = int(os.environ.get("IVM_RANDOM_VIEWS_EPOCHS", "4"))


def _built(builder, rng: random.Random, n: int, *, ansi: bool = True) -> tuple:
    """Two random sources and ``n`` random views over them, built: (project, views, the
    sources' :class:`Changes`, their URIs)."""
    changes = Changes(rng)
    uris = {"t": builder.source("t", changes.initial("t", 14)), "u": builder.source("u", changes.initial("u", 6))}
    views = random_views(rng, n, ansi=ansi)
    for name, sql in views.items():
        builder.view(name, sql)
    project = builder.load()
    project.refresh()
    return project, views, changes, uris


def _check(project, views: dict[str, str], when: str, results=()) -> None:
    """Every view equals Spark's answer to it as written; and every epoch of ``results``
    recomputed in full says why (every generated construct is maintained incrementally,
    docs/sql-support.md: a DECIMAL SUM past 38 digits, say, is recomputed with its reason)."""
    with tuned_for(project.spark, small=True):
        wrong = [r for r in check_views(project, list(views), as_written=True) if not r.ok]
    assert not wrong, f"seed {SEED}, {when}:\n" + "\n".join(
        f"{r.view}: {views[r.view]}\n  {r.missing} missing {r.sample_missing}, {r.extra} extra {r.sample_extra}" for r in wrong
    )
    unexplained = [f"{r.view}: {views[r.view]}" for r in results if r.mode == "full" and not r.reason]
    assert not unexplained, "\n".join(unexplained)


@pytest.fixture(params=["ansi on, UTC", "ansi off, New York"])
def ansi(request, spark):
    """Both of Spark's modes: with ANSI off the views also overflow, divide by zero and cast
    malformed text. The second run's session time zone is New York's, whose DST change
    the timestamps straddle. Each epoch records both settings, so the views are built
    under them."""
    on = request.param.startswith("ansi on")
    settings = {"spark.sql.ansi.enabled": str(on).lower(), "spark.sql.session.timeZone": "UTC" if on else "America/New_York"}
    before = {key: spark.conf.get(key) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    yield on
    for key, value in before.items():
        spark.conf.set(key, value)


def test_random_views_equal_spark_answers(builder, ansi):
    # Each seed and mode a stream of its own (seed n's ANSI-off run once drew seed n+1's views).
    rng = random.Random(f"{SEED} ansi {'on' if ansi else 'off'}")
    project, views, changes, uris = _built(builder, rng, VIEWS, ansi=ansi)
    _check(project, views, "first build")
    for epoch in range(EPOCHS):
        random_changes(rng, changes, uris)
        with epochs_alternating(epoch):
            results = project.refresh()
        _check(project, views, f"epoch {epoch + 1} ({'in Spark' if epoch % 2 else 'in process where it can'})", results)


def test_random_views_recover_from_a_crash_in_any_epoch(builder, monkeypatch):
    """Each epoch's refresh dies after a random number of commits (``IVM_CRASH_MODE=raise``
    leaves what a SIGKILL leaves), in whichever view it is then, and the next refresh
    finishes it: every view then equals Spark's answer, whichever commits had landed."""
    rng = random.Random(f"{SEED} crash")
    project, views, changes, uris = _built(builder, rng, max(VIEWS // 2, 4))
    crashes = 0
    for epoch in range(EPOCHS):
        random_changes(rng, changes, uris)
        # A few commits per touched view: a wider range drew, for some seeds, no crash at all.
        after = rng.randint(1, 2 * len(views))
        with epochs_alternating(epoch):
            crashes += _crash_at(project, monkeypatch, after)
        with epochs_alternating(epoch + 1):  # recovered by the other engine
            results = project.refresh()
        _check(project, views, f"epoch {epoch + 1}, recovered after a crash at commit {after}", results)
    assert crashes, "no epoch crashed: the crash points drawn were past every epoch's commits"
