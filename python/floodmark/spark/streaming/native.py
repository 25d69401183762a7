"""The native path of a live query's windows: tumbling windows, and sliding windows
without gaps, with order-free aggregates, as Spark aggregations, batch after batch, no
record crossing into Python (the batch pipeline's :mod:`floodmark.spark.windows.native`,
with the windows still open carried from batch to batch).

Why this is exact. Within one batch, as in the batch pipeline, a record meets the
watermark ``W`` in force at its arrival; a (record, window) pair is on time if the
window's ``max_ts > W``, refires it if ``max_ts <= W < max_ts + L``, and is skipped
otherwise. What crosses batches is each open window's **parts** (the mergeable partial
aggregates of :mod:`floodmark.spark.windows.aggregates`) over every pair of the earlier
batches, and whether it fired. So per batch:

* a window fires on time in this batch when it has not fired and its ``max_ts`` is at
  or below the watermark at the new frontier, at the segment's first advance that
  reaches it (its watermark and time), holding the carried parts and the batch's on-time
  pairs (a window's on-time records all arrive before its firing);
* each refiring pair fires its window at once, holding the carried parts and the
  batch's open pairs of the window up to it in the runner's order (the carried ones
  first);
* the carried table becomes the merged parts of every window still open (``max_ts + L``
  above the new watermark), with its fired flag; records whose last window is closed
  are late.

The carried table lives in the state (``versions/<b>/open``): one row per open
``(key, window)``, bounded by the keys times the windows the allowed lateness keeps.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from floodmark.exceptions import InvalidInputError
from floodmark.spark.columns import quote
from floodmark.spark.lookup import join_buckets
from floodmark.spark.streaming import frontier as st
from floodmark.spark.streaming.state import StateStore
from floodmark.spark.streaming.watermarks import processed, stamped_plan
from floodmark.spark.windows.aggregates import merged, row_parts
from floodmark.spark.windows.native import (
    _WM,
    _WS,
    finished,
    firing_columns,
    last_window_start,
    refirings,
    schedule,
    window_bounds,
    window_max,
    with_pairs,
)
from floodmark.spark.windows.plan import ARRIVAL, REFIRE, TS, WindowPlan
from floodmark.vocabulary import SAFE

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_FIRED = "__fm_st_fired"


@dataclasses.dataclass
class NativeBatch:
    """One batch's outputs (in the runner's schemas, times in ticks) and its open
    windows to carry."""

    results: DataFrame
    late: DataFrame
    open: DataFrame


def part_columns(plan: WindowPlan) -> list[str]:
    return [n for i, a in enumerate(plan.aggs) for n, _ in row_parts(plan, i, a)]


def check_range(table: Any, plan: WindowPlan) -> None:
    """The native path's arithmetic needs event times within 2^62 of zero."""
    import pyarrow.compute as pc

    if not table.num_rows:
        return
    low = pc.min(table.column("min_ts")).as_py()
    high = pc.max(table.column("max_ts")).as_py()
    if low <= -SAFE or high >= SAFE:
        err = InvalidInputError(
            plan.wm.event_time.name,
            "an event time within 2^62 of the "
            "long range's ends reached the native path of a live query, whose window "
            "arithmetic must stay in range; run the query with path='keyed'",
        )
        raise err


def native_batch(
    batch_rows: DataFrame, plan: WindowPlan, segment: st.Segment, carried: DataFrame | None
) -> NativeBatch:
    """The native path over one batch's rows (see the module docstring)."""
    from pyspark.sql import functions as F

    spark = batch_rows.sparkSession
    done = processed(batch_rows, segment)
    names = ["channel", "bucket", _WM]
    table = segment.buckets.select(["channel", "bucket", "watermark"]).rename_columns(names)
    recs = (
        join_buckets(done, stamped_plan(plan.wm), table)
        .withColumn(TS, F.col(st.TS))
        .withColumn(ARRIVAL, F.col(st.ARRIVAL))
        .withColumn(_WS, last_window_start(plan))
    )
    max_ts = window_max(plan)
    on_time = max_ts > F.col(_WM)
    is_open = max_ts + F.lit(plan.lateness) > F.col(_WM)
    pairs = with_pairs(recs, plan)
    keys = [F.col(quote(k)) for k in plan.keys]
    parts = part_columns(plan)
    row_specs = [spec for i, a in enumerate(plan.aggs) for spec in row_parts(plan, i, a)]
    merges = [spec for i, a in enumerate(plan.aggs) for spec in merged(i, a)]
    start_watermark, end_watermark = segment.start_watermark, segment.watermark

    def grouped(frame: DataFrame) -> DataFrame:
        return frame.groupBy(*keys, F.col(_WS)).agg(*[c.alias(n) for n, c in merges])

    def as_parts(frame: DataFrame) -> DataFrame:
        return frame.select(*keys, F.col(_WS), *[c.alias(n) for n, c in row_specs])

    # On-time firings: windows not fired yet, reached by the new watermark.
    fresh = as_parts(pairs.where(on_time))
    unfired = fresh
    if carried is not None:
        unfired = fresh.unionByName(carried.where(~F.col(_FIRED)).select(*keys, _WS, *parts))
    sched = schedule(plan, *segment.advances())
    if sched is None:
        raise InvalidInputError(
            "a micro-batch's watermark advances span more windows than the native path of "
            "a live query looks up (2^19): use smaller micro-batches (a per-trigger limit "
            "on the source) or path='keyed'"
        )
    if end_watermark > start_watermark:
        firing = firing_columns(spark, plan, sched)
        if firing is None:
            raise InvalidInputError(
                "the native path of a live query reads constant arrays through the JVM "
                "gateway, which this session lacks; use path='keyed'"
            )
        fire_wm, fire_time = firing
        reached = grouped(unfired).where(max_ts <= F.lit(end_watermark))
    else:  # the watermark did not move: nothing fires on time (an empty relation)
        fire_wm = fire_time = F.lit(None).cast("bigint")
        reached = grouped(unfired).where(F.lit(False))
    results = reached.select(
        *keys,
        *window_bounds(sched.size),
        *finished(plan, F.col),
        fire_wm.alias("watermark"),
        F.lit(False).alias(REFIRE),
        fire_time.alias("trigger_time"),
    )
    if plan.lateness:
        again = refirings(plan, pairs, on_time, is_open, sched.size, carried)
        results = results.unionByName(again)
    # The windows to carry: every pair so far of a window still open.
    everything = as_parts(pairs.where(is_open))
    if carried is not None:
        everything = everything.unionByName(carried.select(*keys, _WS, *parts))
    still_open = (
        grouped(everything)
        .where(max_ts + F.lit(plan.lateness) > F.lit(end_watermark))
        .withColumn(_FIRED, max_ts <= F.lit(end_watermark))
    )
    late = recs.where(~is_open).drop(TS, ARRIVAL, _WS).withColumnRenamed(_WM, "watermark")
    return NativeBatch(results, late, still_open)


def carried_windows(store: StateStore, batch_id: int | None, spark: Any) -> DataFrame | None:
    """The open windows committed batch ``batch_id`` left, or None."""
    if batch_id is None:
        return None
    path = store.version(batch_id, "open")
    return spark.read.parquet(path) if store.exists(path) else None


__all__ = ["NativeBatch", "carried_windows", "check_range", "native_batch"]
