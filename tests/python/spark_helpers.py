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


def judged_to_reduce(df: Any, strategy: Any) -> bool:
    """:func:`floodmark.spark.timeline.reduces` for ``df`` with the ``partition``,
    ``arrival`` and ``event_time`` columns: whether the timeline stage would aggregate
    (else it takes the records path)."""
    from datetime import timedelta

    from floodmark.spark import timeline
    from floodmark.spark.plan import make_plan

    frame, plan = make_plan(
        df,
        strategy,
        event_time="event_time",
        channel="partition",
        arrival="arrival",
        emit_interval=timedelta(milliseconds=200),
        event_time_unit=None,
        arrival_unit=None,
    )
    return timeline.reduces(frame, plan)
