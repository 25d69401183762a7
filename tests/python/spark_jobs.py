"""Counting the Spark jobs a call starts (for tests that promise how many)."""

from __future__ import annotations

from typing import Any


def jobs(spark: Any) -> int:
    """Jobs started so far, once Spark's listeners have heard of every one."""
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(None))
