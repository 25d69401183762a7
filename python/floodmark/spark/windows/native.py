"""Stage 4 for tumbling and sliding windows: native aggregations, no record crossing
into Python.

Why this is exact. With the combined watermark timeline known before the window pass
(stage 2), the keyed window operator holds no decision that depends on its state when
windows tumble or slide (``slide <= size``: every record is in a window):

* a record meets the watermark ``W`` in force at its arrival (the last advance at a time
  before its arrival, as in the runner); for each of its windows ``w``, with
  ``m = w.maxTimestamp()`` and ``L`` the allowed lateness, it is *on time* if
  ``m > W``, *refires* ``w`` if ``m <= W < m + L``, and skips ``w`` otherwise; if it
  skips all of them it is late (its last window holds ``ts``, so ``ts + L <= W``:
  element-late, Flink's side output);
* ``W`` grows with arrival, so a window's on-time records all come before its first
  firing and its refiring records all after it. Each window with on-time records fires
  once on time: at the first advance whose watermark reaches ``m`` (that advance's
  watermark and time), or at the end of input (watermark ``MAX``, no time), holding
  its on-time records. Each refiring record fires its window at once (watermark
  ``W``, time its arrival) holding the on-time records and the refiring ones up to it
  in the runner's order (arrival, channel, event time, key);
* the aggregates do not depend on the order of addition (:mod:`.native_aggregates`):
  ``count``, ``sum`` of integers (wrapping like a Java ``long``), ``min``, ``max``,
  ``first``/``last`` (by event time, ties by arrival, channel, then
  the aggregated value columns: :func:`floodmark.vocabulary.tie_values`).

So the on-time results are ``groupBy(key, window)`` over the on-time (record, window)
pairs (sliding windows: one row per pair, by ``explode``), the firing's watermark and
time read from constant arrays indexed by window; the refirings are running window
functions over the open pairs of the windows that refire (selected by a broadcast of
those windows); the late side output is a filter on each record's last window. The
per-bucket watermark and the per-window firing come from the Rust timeline; Spark does
the per-record work natively and combines before its shuffle. When the timeline shows
that no bucket's earliest record can meet a closed window, there is nothing to refire
and the late output needs no scan at all. Measured on 10M rows (docs/performance.md):
the whole pipeline with tumbling windows, all three outputs written, 2.2-3.3x an
identity ``mapInArrow`` pass (medians of the runs since) instead of 5.10x with the keyed
operator.

Anything else (sliding windows with gaps or more than
:data:`MAX_WINDOWS_PER_RECORD` windows per record, session windows, ``mean``, float or
decimal values, event times or watermarks within 2^62 of the ``long`` range's ends,
windows of 2^60 ticks or more, a lateness of 2^61 or more, more than
:data:`MAX_REFIRINGS` records that may refire, tables too large for constant arrays,
Spark Connect, where no test runs) runs the keyed Rust window operator (:mod:`.windows`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from floodmark.spark.columns import quote
from floodmark.spark.lookup import MAX_CONSTANT_SLOTS, constant_array, in_force_column
from floodmark.spark.plan import valid_rows
from floodmark.spark.timeline import LateProbe, Timeline
from floodmark.spark.windows.aggregates import NATIVE_AGGREGATES, merge, parts, result, row_parts
from floodmark.spark.windows.plan import ARRIVAL, REFIRE, TS, WindowPlan
from floodmark.spark.windows.starts import holds, last_start, starts_back
from floodmark.spark.windows.starts import windows_per_record as per_record
from floodmark.time import I64_MAX, I64_MIN
from floodmark.vocabulary import (
    FIRED_WATERMARK,
    LATE_WATERMARK,
    SAFE,
    SAFE_PARAM,
    TRIGGER_TIME,
    WINDOW_END,
    WINDOW_START,
    agg_name,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

#: With allowed lateness, the most (record, window) pairs that may refire (the records
#: the timeline bounds times the windows per record) for which the windows they refire
#: are broadcast; above it, the keyed operator runs.
MAX_REFIRINGS = 2_000_000
#: Most windows per record (``ceil(size / slide)``) that the native path explodes into.
MAX_WINDOWS_PER_RECORD = 1000
_WS, _WM, _REFIRES = "__fm_window_start", "__fm_watermark", "__fm_refires"


@dataclass(frozen=True)
class Schedule:
    """When each window fires: by window start, over the grid ``[low, high]`` (both
    window starts); windows ending at or before the first advance fire at it, windows
    ending after the last one at the end of input."""

    size: int
    step: int  # between window starts: the slide (tumbling: the size)
    offset: int
    low: int
    watermarks: np.ndarray  # per window of the grid: the firing's watermark
    times: np.ndarray  # per window of the grid: the firing advance's time
    first: tuple[int, int]  # (watermark, time) of the first advance
    last_watermark: int


def grid(plan: WindowPlan) -> tuple[str, int, int, int]:
    """``(kind, size, step, offset)``: window starts are ``offset + k * step``."""
    return (plan.window.kind, *plan.window.grid(plan.wm.event_time.unit))


def candidate(plan: WindowPlan) -> bool:
    """Whether the stage may run natively, by its parameters alone (the timeline then
    aggregates what :func:`suitable` and :func:`late_bound` need)."""
    return not_native(plan) is None


def not_native(plan: WindowPlan) -> str | None:
    """Why the stage cannot run natively, by its parameters alone (None: it can): the
    one statement of what the native path runs, for :func:`candidate` and for the
    refusal of a live query's ``path="native"``."""
    kind, size, step, _ = grid(plan)
    if kind not in ("tumbling", "sliding"):
        return f"it runs tumbling and sliding windows, not {kind} windows"
    if step > size:  # gaps: records in no window
        return f"it runs sliding windows without gaps, not a slide of {step} over {size} ticks"
    if windows_per_record(plan) > MAX_WINDOWS_PER_RECORD:
        return (
            f"it runs windows that put a record in at most {MAX_WINDOWS_PER_RECORD:,} "
            f"windows, not {windows_per_record(plan):,}"
        )
    if size >= SAFE_PARAM:
        return f"it runs windows shorter than {SAFE_PARAM} ticks, not {size}"
    if not 0 <= plan.lateness < SAFE >> 1:
        return f"it runs an allowed lateness under {SAFE >> 1} ticks, not {plan.lateness}"
    for agg in plan.aggs:
        if agg != "count" and not (agg[0] in NATIVE_AGGREGATES and plan.values[agg[1]] == "bigint"):
            return (
                f"it runs count and {'/'.join(NATIVE_AGGREGATES)} of integer columns, "
                f"not {agg_name(agg)}"
            )
    return None


def windows_per_record(plan: WindowPlan) -> int:
    """The most windows one of the stage's records falls in."""
    _, size, step, _ = grid(plan)
    return per_record(size, step)


def suitable(plan: WindowPlan, timeline: Timeline) -> bool:
    """Whether the stage's outputs follow from the timeline alone (see module doc)."""
    if not candidate(plan) or timeline.event_range is None:
        return False
    low, high = timeline.event_range
    return low > -SAFE and high < SAFE


def schedule(plan: WindowPlan, times: np.ndarray, wms: np.ndarray) -> Schedule | None:
    """The firing of every window between the first and the last advance (None when
    there are more than :data:`MAX_CONSTANT_SLOTS` or a watermark is out of range)."""
    _, size, step, offset = grid(plan)
    if len(wms) == 0:
        empty = np.zeros(0, np.int64)
        return Schedule(size, step, offset, 0, empty, empty, (I64_MAX, 0), I64_MIN)
    wlo, whi = int(wms[0]), int(wms[-1])
    if not (wlo > -SAFE and whi < SAFE):
        return None
    # Grid starts (Python's floor modulo) from the last window ending at or before the
    # first advance to the last window ending at or before the last advance.
    low = (wlo - size + 1) - (wlo - size + 1 - offset) % step
    high = (whi - size + 1) - (whi - size + 1 - offset) % step
    n = (high - low) // step + 1
    if n > MAX_CONSTANT_SLOTS:
        return None
    max_ts = low + step * np.arange(n, dtype=np.int64) + (size - 1)
    fire = firing_index(wms, max_ts)
    return Schedule(size, step, offset, low, wms[fire], times[fire], (wlo, int(times[0])), whi)


def firing_index(wms: np.ndarray, max_ts: np.ndarray) -> np.ndarray:
    """Which advance fires each window (by its last timestamp ``max_ts``): the first
    whose watermark reaches it (the first advance for a window that ended before it);
    the last for a window beyond every advance, which does not fire (its caller's
    test)."""
    return np.minimum(np.searchsorted(wms, max_ts, side="left"), len(wms) - 1)


def firing_of(wms: np.ndarray, values: np.ndarray, max_ts: np.ndarray) -> np.ndarray:
    """``values`` (the advances' watermarks or times) at :func:`firing_index`."""
    picked: np.ndarray = np.asarray(values)[firing_index(wms, max_ts)]
    return picked


def late_probe(plan: WindowPlan) -> LateProbe:
    """How many records of a chunk of bucket rows may be late for one of their windows,
    given the combined watermark in force for each row (an upper bound; 0: none).
    Window ends grow with event time, so a ``(channel, bucket)`` holds such a record
    only if the first window of its smallest event time ends at or before the
    watermark in force for it; without any, no scan is needed for the late output and
    no lookup for the results. Runs where the timeline builder runs."""
    _, size, step, offset = grid(plan)

    def probe(rows: pa.RecordBatch, in_force: np.ndarray) -> int:
        min_ts = rows.column("min_ts").to_numpy(zero_copy_only=False).astype(np.int64)
        earliest = min_ts - (size - 1)  # the first window starts here or just after
        ends = earliest + (offset - earliest) % step + (size - 1)
        count = rows.column("rows").to_numpy(zero_copy_only=False)
        return int(count[ends <= in_force].sum())

    return probe


def native_outputs(
    df: DataFrame, plan: WindowPlan, timeline: Timeline, times: np.ndarray, wms: np.ndarray
) -> tuple[DataFrame, DataFrame] | None:
    """``(results, late)`` in the runner's output schemas (times in ticks), or None
    when the stage needs the keyed operator (see module doc)."""
    from pyspark.sql import functions as F

    if not suitable(plan, timeline):
        return None
    sched = schedule(plan, times, wms)
    if sched is None:
        return None
    spark = df.sparkSession
    in_force_wm = in_force_column(spark, timeline, ARRIVAL)
    firing_at = firing_columns(spark, plan, sched)
    if in_force_wm is None or firing_at is None:
        return None
    fire_wm_col, fire_time_col = firing_at

    wm, size = plan.wm, sched.size
    # Every input column rides along (the late output carries them; the aggregations
    # read only what they need, and Spark prunes the rest).
    recs = (
        df.where(valid_rows(wm))
        .select("*", wm.event_time.ticks().alias(TS), wm.arrival.ticks().alias(ARRIVAL))
        .select("*", in_force_wm.alias(_WM), last_window_start(plan).alias(_WS))
    )
    # A (record, window) pair is on time before the window's first firing, refires it
    # until the watermark passes max_ts + lateness, then is skipped.
    maybe_late = timeline.maybe_late if timeline.maybe_late is not None else I64_MAX
    if plan.lateness and maybe_late > MAX_REFIRINGS // windows_per_record(plan):
        return None  # too many windows may refire to broadcast them
    on_time = unfired(plan, F.col(_WM)) if maybe_late else F.lit(True)
    is_open = not_cleaned(plan, F.col(_WM)) if maybe_late else F.lit(True)

    pairs = with_pairs(recs, plan)
    keys = [F.col(quote(k)) for k in plan.keys]
    specs = [part for i, a in enumerate(plan.aggs) for part in parts(plan, i, a)]
    grouped = pairs.where(on_time).groupBy(*keys, F.col(_WS)).agg(*[c.alias(n) for n, c in specs])
    at_end = unfired(plan, F.lit(sched.last_watermark))
    firing = [
        F.when(at_end, F.lit(I64_MAX)).otherwise(fire_wm_col).alias(FIRED_WATERMARK),
        F.lit(False).alias(REFIRE),
        F.when(at_end, F.lit(None).cast("bigint")).otherwise(fire_time_col).alias(TRIGGER_TIME),
    ]
    results = grouped.select(*keys, *window_bounds(size), *finished(plan, F.col), *firing)
    if plan.lateness and maybe_late:
        results = results.unionByName(refirings(plan, pairs, on_time, is_open, size))
    late = recs.where(~is_open).select(
        *[F.col(quote(c)) for c in df.columns], F.col(_WM).alias(LATE_WATERMARK)
    )
    return results, late


def last_window_start(plan: WindowPlan) -> Column:
    """The start of each record's last window (sliding windows: the latest start), from
    ``TS``; null outside the safe range (Spark may test the other null checks of
    ``valid_rows`` after this arithmetic: the CASE keeps it in range under ANSI mode)."""
    from pyspark.sql import functions as F

    _, _, step, offset = grid(plan)
    ts = F.col(TS)
    return F.when(ts.between(-SAFE, SAFE), last_start(ts, step, offset))


def window_max(plan: WindowPlan) -> Column:
    """The window's largest timestamp, ``start + size - 1``, from the start ``_WS``."""
    from pyspark.sql import functions as F

    _, size, _, _ = grid(plan)
    return F.col(_WS) + F.lit(size - 1)


def unfired(plan: WindowPlan, watermark: Column) -> Column:
    """The window (start ``_WS``) has not fired at ``watermark``: Flink fires a window
    when the watermark reaches its largest timestamp, so a record reaching it is on
    time while ``max_ts > watermark``."""
    return window_max(plan) > watermark


def not_cleaned(plan: WindowPlan, watermark: Column) -> Column:
    """The window (start ``_WS``) is still kept at ``watermark``: Flink's
    ``isWindowLate`` is ``max_ts + allowedLateness <= watermark`` (no wrapping here:
    :func:`candidate` keeps both terms far inside the long range), and a record reaching
    a window that is not late refires it."""
    from pyspark.sql import functions as F

    return window_max(plan) + F.lit(plan.lateness) > watermark


def with_pairs(recs: DataFrame, plan: WindowPlan) -> DataFrame:
    """One row per (record, window): sliding windows explode, back from the record's
    last window (``_WS``); tumbling windows are the records themselves."""
    from pyspark.sql import functions as F

    _, size, step, _ = grid(plan)
    if size <= step:
        return recs
    starts = F.explode(starts_back(F.col(_WS), size, step)).alias(_WS)
    return recs.select(*[F.col(quote(c)) for c in recs.columns if c != _WS], starts).where(
        holds(F.col(_WS), F.col(TS), size)
    )


def firing_columns(
    spark: SparkSession, plan: WindowPlan, sched: Schedule
) -> tuple[Column, Column] | None:
    """``(watermark, time)`` of the advance that fires each window (by ``_WS``) among
    the schedule's: windows ending at or before the first advance fire at it; read
    from two constant arrays (None without a JVM gateway). Windows ending after the
    last advance are not covered: the caller decides (end of input, or still open)."""
    from pyspark.sql import functions as F

    fire_wm, fire_time = (constant_array(spark, a) for a in (sched.watermarks, sched.times))
    if fire_wm is None or fire_time is None:
        return None
    index = F.expr(f"CAST(({_WS} - ({sched.low})) div {sched.step} AS INT)")
    before = ~unfired(plan, F.lit(sched.first[0]))
    return (
        F.when(before, F.lit(sched.first[0])).otherwise(F.get(fire_wm, index)),
        F.when(before, F.lit(sched.first[1])).otherwise(F.get(fire_time, index)),
    )


def window_bounds(size: int) -> list[Column]:
    from pyspark.sql import functions as F

    start = F.col(_WS)
    return [start.alias(WINDOW_START), (start + F.lit(size)).alias(WINDOW_END)]


def finished(plan: WindowPlan, part: Callable[[str], Column]) -> list[Column]:
    """The aggregates' values from their parts."""
    return [result(i, a, part) for i, a in enumerate(plan.aggs)]


def refirings(
    plan: WindowPlan,
    pairs: DataFrame,
    on_time: Column,
    is_open: Column,
    size: int,
    carried: DataFrame | None = None,
) -> DataFrame:
    """One result per (record, window) pair that refires its window (allowed lateness):
    running aggregates over the window's open pairs in the runner's order (arrival,
    channel, event time, key; a window's on-time records arrive before its refiring
    ones), with the watermark the record met and its arrival as the trigger time. Only
    the windows that refire are aggregated: their keys and starts are broadcast (one
    row per refired window) and select the open pairs. In a live query, ``carried``
    holds the parts of the records of earlier batches (keys, ``_WS``, the parts), one
    row per window, which comes first."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    keys = [F.col(quote(k)) for k in plan.keys]
    refired = pairs.where(~on_time & is_open).select(
        *[F.col(quote(k)).alias(f"__fm_refired{j}") for j, k in enumerate(plan.keys)],
        F.col(_WS).alias("__fm_refired_ws"),
    )
    same = F.col(_WS) == F.col("__fm_refired_ws")
    for j, k in enumerate(plan.keys):
        same = same & F.col(quote(k)).eqNullSafe(F.col(f"__fm_refired{j}"))
    chosen = F.broadcast(refired.distinct())
    row_specs = [part for i, a in enumerate(plan.aggs) for part in row_parts(plan, i, a)]
    tie_only = set(plan.tie_values()) - {plan.wm.channel, *plan.keys}  # compared as bigint
    ordering = [
        F.col(quote(c)).cast("bigint") if c in tie_only else F.col(quote(c))
        for c in plan.processing_order()
    ]
    rows = (
        pairs.where(is_open)
        .join(chosen, same, "left_semi")
        .select(
            *keys,
            F.col(_WS),
            F.col(_WM),
            F.lit(1).alias(_REFIRES + "_kind"),
            (~on_time).alias(_REFIRES),
            *[c.alias(f"__fm_order{j}") for j, c in enumerate(ordering)],
            *[c.alias(n) for n, c in row_specs],
        )
    )
    if carried is not None:  # earlier batches' parts, ordered first
        prefix = carried.join(chosen, same, "left_semi").select(
            *keys,
            F.col(_WS),
            F.lit(None).cast("bigint").alias(_WM),
            F.lit(0).alias(_REFIRES + "_kind"),
            F.lit(False).alias(_REFIRES),
            *[F.col(n) for n, _ in row_specs],
        )
        rows = rows.unionByName(prefix, allowMissingColumns=True)
    order = Window.partitionBy(*keys, F.col(_WS)).orderBy(
        F.col(_REFIRES + "_kind"), *[F.col(f"__fm_order{j}") for j in range(len(ordering))]
    )
    so_far = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    running = rows.select(
        *keys,
        _WS,
        _WM,
        F.col("__fm_order0").alias(ARRIVAL),
        _REFIRES,
        *[
            merge(a)(F.col(n)).over(so_far).alias(n)
            for i, a in enumerate(plan.aggs)
            for n, _ in row_parts(plan, i, a)
        ],
    )
    return running.where(F.col(_REFIRES)).select(
        *keys,
        *window_bounds(size),
        *finished(plan, F.col),
        F.col(_WM).alias(FIRED_WATERMARK),
        F.lit(True).alias(REFIRE),
        F.col(ARRIVAL).alias(TRIGGER_TIME),
    )


__all__ = [
    "candidate",
    "firing_columns",
    "firing_index",
    "firing_of",
    "last_window_start",
    "native_outputs",
    "refirings",
    "schedule",
    "suitable",
    "window_max",
    "with_pairs",
]
