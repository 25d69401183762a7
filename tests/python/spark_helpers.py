"""Helpers of the Spark tests: counting the jobs a call starts, reading outputs back."""

from __future__ import annotations

from collections import Counter
from typing import Any


def jobs(spark: Any) -> int:
    """Jobs started so far, once Spark's listeners have heard of every one."""
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(None))


def outputs(out: Any) -> dict[str, Counter[tuple[Any, ...]]]:
    """The rows of a ``WindowedOutput``'s three outputs (as counted tuples), released."""
    got = {}
    for kind in ("results", "late", "dropped"):
        t = getattr(out, kind).toArrow()
        got[kind] = Counter(zip(*[t[c].to_pylist() for c in t.column_names], strict=True))
    out.unpersist()
    return got
