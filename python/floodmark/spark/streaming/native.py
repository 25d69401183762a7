"""The native path of a live query's windows (``path="native"``; ``auto`` takes the
keyed one, faster in a live query: docs/streaming.md, "The two paths"): tumbling
windows, and sliding windows without gaps, with order-free aggregates, as Spark
aggregations, batch after batch, no record crossing into Python (the batch pipeline's
:mod:`floodmark.spark.windows.native`, with the windows still open carried from batch to
batch).

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

One aggregation per batch gives all of it: grouped by ``(key, window)``, over the
batch's pairs and the carried windows, it holds the parts of every row (the windows to
carry), the parts of the unfired rows (what an on-time firing holds), and the count of
late records; the caller caches it and reads the firings, the carried table and the
counts from it (on 1M-row batches: one shuffle of the records instead of two, and no
count job over the records).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

from floodmark.exceptions import InvalidInputError
from floodmark.spark.columns import quote
from floodmark.spark.lookup import computed_on_executors
from floodmark.spark.streaming import frontier as st
from floodmark.spark.streaming.state import StateStore
from floodmark.spark.streaming.watermarks import in_force
from floodmark.spark.windows.aggregates import merge, merged, part_names, row_parts
from floodmark.spark.windows.native import (
    _WM,
    _WS,
    finished,
    firing_columns,
    firing_of,
    grid,
    last_window_start,
    not_cleaned,
    refirings,
    schedule,
    unfired,
    window_bounds,
    window_max,
    with_pairs,
)
from floodmark.spark.windows.plan import ARRIVAL, REFIRE, TS, WindowPlan
from floodmark.vocabulary import FIRED_WATERMARK, LATE_WATERMARK, SAFE, TRIGGER_TIME

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: How the native path's refusals say what to do instead.
KEYED_INSTEAD = (
    "path='keyed' (before the first committed batch the same checkpoint and state "
    "location take the change; after it, a changed path needs new ones)"
)

_FIRED, _UNFIRED, _LATE, _ON = "__fm_st_fired", "__fm_st_unfired", "__fm_st_late", "_on"
_MAX, _FIRE_WM, _FIRE_TIME = "__fm_st_max", "__fm_st_fire_wm", "__fm_st_fire_time"


@dataclasses.dataclass
class NativeBatch:
    """One batch's outputs (in the runner's schemas, times in ticks) and its open
    windows to carry, all read from ``groups`` (the one aggregation over the batch's
    rows: the caller persists it), with ``fires`` (over ``groups``: the window fires on
    time) and ``late_count`` (over ``groups``: its late records)."""

    groups: DataFrame
    results: DataFrame
    fires: Column
    late: DataFrame
    open: DataFrame

    def counts(self) -> tuple[int, int]:
        """``(on-time firings, late records)``, from ``groups`` (one small job)."""
        from pyspark.sql import functions as F

        row = self.groups.agg(
            F.count(F.when(self.fires, F.lit(1))).alias("fired"),
            F.coalesce(F.sum(_LATE), F.lit(0)).alias("late"),
        ).collect()[0]
        return int(row["fired"]), int(row["late"])


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
            f"arithmetic must stay in range; run the query with {KEYED_INSTEAD}",
        )
        raise err


def native_batch(
    batch_rows: DataFrame, plan: WindowPlan, segment: st.Segment, carried: DataFrame | None
) -> NativeBatch:
    """The native path over one batch's rows (see the module docstring)."""
    from pyspark.sql import functions as F

    spark = batch_rows.sparkSession
    recs = (
        in_force(batch_rows, plan.wm, segment, _WM)
        .withColumn(TS, F.col(st.TS))
        .withColumn(ARRIVAL, F.col(st.ARRIVAL))
        .withColumn(_WS, last_window_start(plan))
    )
    max_ts = window_max(plan)
    on_time = unfired(plan, F.col(_WM))
    is_open = not_cleaned(plan, F.col(_WM))
    pairs = with_pairs(recs, plan)
    keys = [F.col(quote(k)) for k in plan.keys]
    parts = part_columns(plan)
    row_specs = [spec for i, a in enumerate(plan.aggs) for spec in row_parts(plan, i, a)]
    merges = [spec for i, a in enumerate(plan.aggs) for spec in merged(i, a)]
    start_watermark, end_watermark = segment.start_watermark, segment.watermark

    def as_parts(frame: DataFrame, unfired: Column, late: Column) -> DataFrame:
        return frame.select(
            *keys,
            F.col(_WS),
            *[c.alias(n) for n, c in row_specs],
            unfired.alias(_UNFIRED),
            late.cast("long").alias(_LATE),
        )

    # One aggregation per (key, window) over the batch's open pairs, the late records
    # (their last window's pair) and the carried windows, in one pass over the records:
    # the parts of every row (the window's state to carry) and of its unfired rows (what
    # an on-time firing holds), whether it has an unfired row, and how many late records
    # it holds. A late record's window is closed at the new frontier (the watermark
    # never decreases), so its parts never reach a carried window, and it is not
    # unfired (a closed pair is not on time).
    is_last = F.col(_WS) == last_window_start(plan)
    rows = as_parts(pairs.where(is_open | is_last), on_time, ~is_open)
    if carried is not None:
        rows = rows.unionByName(
            carried.select(
                *keys,
                F.col(_WS),
                *[F.col(n) for n in parts],
                (~F.col(_FIRED)).alias(_UNFIRED),
                F.lit(0).cast("long").alias(_LATE),
            )
        )
    unfired_merges = [
        merge(a)(F.when(F.col(_UNFIRED), F.col(n))).alias(n + _ON)
        for i, a in enumerate(plan.aggs)
        for n in part_names(i, a)
    ]
    groups = rows.groupBy(*keys, F.col(_WS)).agg(
        *[c.alias(n) for n, c in merges],
        *unfired_merges,
        F.max(_UNFIRED).alias(_UNFIRED),
        F.sum(_LATE).alias(_LATE),
    )
    # On-time firings: windows not fired yet, reached by the new watermark.
    size = grid(plan)[1]
    firing_groups = groups
    if end_watermark > start_watermark:
        fires = F.col(_UNFIRED) & ~unfired(plan, F.lit(end_watermark))
        times, wms = segment.advances()
        sched = schedule(plan, times, wms)
        firing = None if sched is None else firing_columns(spark, plan, sched)
        if firing is not None:
            fire_wm, fire_time = firing
        else:  # too many windows between the advances for constant arrays (a topic
            # waking up after a long quiet), or no JVM gateway: looked up by max_ts
            firing_groups = computed_on_executors(
                groups.where(fires).withColumn(_MAX, max_ts),
                _MAX,
                {
                    _FIRE_WM: functools.partial(firing_of, wms, wms),
                    _FIRE_TIME: functools.partial(firing_of, wms, times),
                },
            )
            fire_wm, fire_time = F.col(_FIRE_WM), F.col(_FIRE_TIME)
    else:  # the watermark did not move: nothing fires on time
        fire_wm = fire_time = F.lit(None).cast("bigint")
        fires = F.lit(False)
    on_time_results = firing_groups.where(fires).select(
        *keys,
        *window_bounds(size),
        *finished(plan, lambda n: F.col(n + _ON)),
        fire_wm.alias(FIRED_WATERMARK),
        F.lit(False).alias(REFIRE),
        fire_time.alias(TRIGGER_TIME),
    )
    results = on_time_results
    if plan.lateness:
        again = refirings(plan, pairs, on_time, is_open, size, carried)
        results = results.unionByName(again)
    # The windows to carry: every pair so far of a window still open.
    still_open = groups.where(not_cleaned(plan, F.lit(end_watermark))).select(
        *keys,
        F.col(_WS),
        *[F.col(n) for n in parts],
        (~unfired(plan, F.lit(end_watermark))).alias(_FIRED),
    )
    late = recs.where(~is_open).drop(TS, ARRIVAL, _WS).withColumnRenamed(_WM, LATE_WATERMARK)
    return NativeBatch(groups, results, fires, late, still_open)


def carried_windows(store: StateStore, batch_id: int | None, spark: Any) -> DataFrame | None:
    """The open windows committed batch ``batch_id`` left, or None."""
    if batch_id is None:
        return None
    carried: DataFrame = spark.read.parquet(store.committed_file(batch_id, "open"))
    return carried


__all__ = ["NativeBatch", "carried_windows", "check_range", "native_batch"]
