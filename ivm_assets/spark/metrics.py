"""Counting the Spark jobs a piece of work starts (refresh statistics, benchmarks).

Spark's fixed cost per job dominates small refreshes, so the job count is the first
number to look at when one is slow. Counted through a job group on the classic session's
status tracker; a Spark Connect session has no tracker here, and the count is None.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

_groups = itertools.count()


class JobCount:
    """Filled in when the ``counting_jobs`` block ends."""

    value: int | None = None


@contextmanager
def counting_jobs(spark: SparkSession) -> Iterator[JobCount]:
    """Count the Spark jobs started inside the block (in this thread)."""
    count = JobCount()
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        yield count
        return
    sc = spark.sparkContext
    group = f"ivm-{next(_groups)}"
    previous = sc.getLocalProperty("spark.jobGroup.id")
    sc.setJobGroup(group, "ivm refresh", interruptOnCancel=False)
    try:
        yield count
    finally:
        count.value = len(sc.statusTracker().getJobIdsForGroup(group))
        if previous is None:
            sc.setLocalProperty("spark.jobGroup.id", None)
        else:
            sc.setJobGroup(previous, "", interruptOnCancel=False)
