"""Choosing the out-of-orderness bound: every candidate bound from one pass.

Why one pass is exact. With bound ``B`` a channel's watermark is ``max - B - 1``, i.e.
the bound-0 (monotonous) watermark minus ``B``. Every later step (Flink's
``WatermarkToDataOutput`` deduplication, the valve's minimum, alignment, idleness,
flush) only *compares* watermarks with each other, and idleness depends on arrivals
alone, so shifting every channel by ``B`` shifts the combined timeline by ``B`` and
changes nothing else: ``W_B(t) = W_0(t) - B`` (``MIN`` stays ``MIN``). Hence:

* a record is late under ``B`` iff ``ts <= W_0(arrival) - B``, i.e.
  ``B <= W_0(arrival) - ts``;
* a window (per key) fires on time under ``B`` iff one of its records arrived while
  ``W_B < end - 1``, i.e. ``B > min(W_0(arrival) - end + 1)``, and it fires at the first
  timeline time where ``W_0 >= end - 1 + B``.

So one pass of the timeline builder gives one timeline per idle timeout, Spark reads
``W_0`` per record by its arrival bucket (constant arrays, see
:func:`floodmark.spark.lookup.with_in_force`), then a handful of sums per
candidate bound. Quantiles are
nearest-rank over the on-time firings (``fired_at - window_end``); windows fired only by
the end of input are counted in ``fired_at_end`` and left out of the quantiles.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from floodmark.exceptions import InvalidInputError, InvalidParameterError
from floodmark.spark.arrival import ordered_input_released
from floodmark.spark.call_sites import without_call_sites
from floodmark.spark.columns import key_column, quote
from floodmark.spark.late import element_late
from floodmark.spark.lookup import with_in_force
from floodmark.spark.plan import make_plan, valid_rows
from floodmark.spark.timeline import compute_timelines
from floodmark.spark.windows.starts import holds, last_start, starts_back
from floodmark.strategy import DEFAULT_EMIT_INTERVAL, WatermarkStrategy
from floodmark.time import I64_MIN, TICKS_PER_SECOND, Duration, to_ticks
from floodmark.timeline import strategy_in_ticks
from floodmark.vocabulary import NOT_SWEPT, SAFE, SAFE_PARAM, SWEPT_WINDOWS, column_names
from floodmark.windows import window_params

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def window_grid(window: Any, unit: str) -> tuple[int, int, int]:
    """``(size, slide, offset)`` in ticks of a tumbling or sliding assigner."""
    kind = window_params(window, unit)[0]
    if kind not in SWEPT_WINDOWS:
        raise InvalidParameterError(
            "window", f"bound analysis needs a tumbling or sliding window ({NOT_SWEPT})"
        )
    grid: tuple[int, int, int] = window.grid(unit)
    return grid


def nearest_rank(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The nearest-rank ``q`` quantile of ``values`` repeated ``weights`` times."""
    if weights.sum() == 0:
        return float("nan")
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weights[order])
    rank = max(1, int(np.ceil(q * cum[-1])))
    return float(values[order][np.searchsorted(cum, rank, side="left")])


@without_call_sites
def analyze_bounds(
    df: DataFrame,
    *,
    bounds: Sequence[Duration],
    window: Any,
    event_time: str,
    channel: str,
    arrival: str | None = None,
    key: str | Sequence[str] = (),
    idle_timeouts: Sequence[Duration | None] = (None,),
    emit_interval: Duration = DEFAULT_EMIT_INTERVAL,
    event_time_unit: str | None = None,
    arrival_unit: str | None = None,
    source_parallelism: int | None = None,
    topic: str | None = None,
) -> pa.Table:
    """Late fraction and window firing delay for each candidate bound and idle timeout.

    Each candidate is Flink's bounded out-of-orderness strategy with that bound (and,
    with a timeout, ``with_idleness``), replayed over ``df`` as ``assign_watermarks``
    would (docs/spark.md, "Choosing the bound").

    Args:
        df: the events.
        bounds: the candidate out-of-orderness bounds (durations, or ticks of the
            event-time unit), at least one, each ``>= 0``.
        window: the windows whose firing delay is measured: tumbling or sliding (session
            windows depend on which records are late).
        event_time, channel, arrival: the columns, as in ``assign_watermarks``.
        key: the window key columns (the windows fired are counted per key).
        idle_timeouts: the candidate idle timeouts, ``None`` for no idleness (the
            default: only that).
        emit_interval: the periodic emission interval (default 200 ms).
        event_time_unit, arrival_unit: as in ``assign_watermarks``.

    Returns:
        A table with one row per (idle timeout, bound), candidates equal in ticks of
        their unit counted once: ``idle_timeout`` and ``bound``
        (durations; ``idle_timeout`` null without idleness), ``late_fraction`` (NaN
        when there is no record to place), ``late``, ``records``, ``windows`` (on-time
        firings), ``fired_at_end``, ``delay_median_s``, ``delay_p99_s`` (NaN without
        an ``arrival`` column: positions in row order are no clock to measure a delay
        from the windows' ends with).

    ``source_parallelism`` and ``topic``: the Flink job's source topology, as in
    :func:`floodmark.spark.assign_watermarks` (every candidate runs on it).
    """
    from pyspark.sql import functions as F

    bounds, idle_timeouts = (
        listed(bounds, "bounds"),
        listed(idle_timeouts, "idle_timeouts"),
    )
    df, base = make_plan(
        df,
        WatermarkStrategy.for_monotonous_timestamps(),
        event_time=event_time,
        channel=channel,
        arrival=arrival,
        emit_interval=emit_interval,
        event_time_unit=event_time_unit,
        arrival_unit=arrival_unit,
        source_parallelism=source_parallelism,
        topic=topic,
    )
    with ordered_input_released(df, arrival, on_success=True):
        keys = column_names(key, "key")
        for k in keys:
            key_column(df, k, "key")
        ev, arr = base.event_time, base.arrival
        # Bounds (idle timeouts) equal in ticks are one candidate: one row each.
        b_ticks = list(dict.fromkeys(to_ticks(b, ev.unit, "bounds") for b in bounds))
        if min(b_ticks) < 0 or max(b_ticks) >= SAFE:
            raise InvalidParameterError(
                "bounds", "give bounds >= 0 and under 2^62 ticks of the event-time unit"
            )
        per_ev, per_arr = TICKS_PER_SECOND[ev.unit], TICKS_PER_SECOND[arr.unit]
        bound_durations = reported(b_ticks, per_ev, "bounds")
        by_ticks: dict[int | None, Duration | None] = {}
        for i in idle_timeouts:
            by_ticks.setdefault(None if i is None else to_ticks(i, arr.unit, "idle_timeouts"), i)
        idle_ticks, idle_timeouts = list(by_ticks), list(by_ticks.values())
        size, slide, offset = window_grid(window, ev.unit)
        strategies = []
        for idle in idle_timeouts:
            strategy = WatermarkStrategy.for_monotonous_timestamps()
            try:
                if idle is not None:
                    strategy = strategy.with_idleness(idle)
                strategies.append(strategy_in_ticks(strategy, ev.unit, arr.unit))
            except InvalidParameterError as err:  # each names idle_timeout
                raise err.renamed("idle_timeouts") from None
        # after the strategies' own check (> 0), so a negative one is not "too large"
        idle_durations = reported(idle_ticks, per_arr, "idle_timeouts")
        if max(size, slide, abs(offset)) >= SAFE_PARAM:
            raise InvalidParameterError(
                "window", "analyze_bounds takes window sizes, slides and offsets under 2^60 ticks"
            )
        timelines = compute_timelines(df, base, strategies, stats=True)
        low_high = timelines[0].event_range
        if low_high is not None and (low_high[0] <= -SAFE or low_high[1] >= SAFE):
            raise InvalidInputError(
                ev.name,
                "analyze_bounds' window arithmetic needs event times within 2^62 ticks of "
                f"zero; the input's range is {low_high[0]} to {low_high[1]}",
            )
        curves = [tl.advances() for tl in timelines]
        needed = dict.fromkeys([*keys, channel, arr.name, ev.name])
        recs = (
            df.where(valid_rows(base))
            .select(*[F.col(quote(c)) for c in needed])
            .withColumn("__fm_arrival", arr.ticks())
        )
        recs = with_in_force(
            recs, {f"__fm_w{j}": tl for j, tl in enumerate(timelines)}, "__fm_arrival"
        )
        recs = recs.withColumn("__fm_ts", ev.ticks())
        js = range(len(idle_timeouts))
        minimum = F.lit(I64_MIN)
        # W0 = MIN ("no watermark yet") becomes null before any arithmetic (ANSI mode).
        w0 = {j: F.when(F.col(f"__fm_w{j}") > minimum, F.col(f"__fm_w{j}")) for j in js}
        # Late under bound B: ts + B <= W0 (Flink's element-late rule, W_B = W0 - B).
        late_exprs = [
            F.sum(F.when(element_late(F.col("__fm_ts"), b, w0[j]), 1).otherwise(0)).alias(
                f"late_{j}_{i}"
            )
            for j in js
            for i, b in enumerate(b_ticks)
        ]
        late_row = recs.agg(F.count("*").alias("n"), *late_exprs).collect()[0]
        # Per (key, window): the smallest W0(arrival) - end + 1 (MIN when no watermark yet).
        # Working columns are named apart from the input's (a key named ``end``).
        ts, start = F.col("__fm_ts"), F.col("__fm_start")
        starts = F.explode(starts_back(last_start(ts, slide, offset), size, slide))
        per_window = (
            recs.withColumn("__fm_start", starts)
            .where(holds(start, ts, size))
            .withColumn("__fm_end", start + F.lit(size))
        )
        end = F.col("__fm_end")
        margin = [F.min(F.coalesce(w0[j] - end + 1, minimum)).alias(f"__fm_m{j}") for j in js]
        groups = per_window.groupBy(*[quote(k) for k in keys], end).agg(*margin)
        counts = (
            groups.groupBy(end.alias("end"))
            .agg(
                *[
                    F.sum(F.when(F.col(f"__fm_m{j}") < b, 1).otherwise(0)).alias(f"c_{j}_{i}")
                    for j in js
                    for i, b in enumerate(b_ticks)
                ]
            )
            .toArrow()
        )
        ends = counts["end"].to_numpy().astype(np.int64)
        rows: dict[str, list[Any]] = {
            k: []
            for k in (
                "idle_timeout",
                "bound",
                "late_fraction",
                "late",
                "records",
                "windows",
                "fired_at_end",
                "delay_median_s",
                "delay_p99_s",
            )
        }
        n = int(late_row["n"])
        clock = arrival is not None  # row positions are no clock to measure delays with
        for j in range(len(idle_timeouts)):
            times, wms = curves[j]
            for i, b in enumerate(b_ticks):
                weight = counts[f"c_{j}_{i}"].to_numpy().astype(np.int64)
                need = ends - 1 + b
                at = np.searchsorted(wms, need, side="left")
                fired = at < len(wms)
                # Delay in the finer of the two units, exactly, then in seconds.
                fine = max(per_ev, per_arr)
                fired_at = times[np.minimum(at, max(len(times) - 1, 0))] if len(times) else ends
                delay = (fired_at * (fine // per_arr) - ends * (fine // per_ev)) / fine
                w_on = np.where(fired, weight, 0)
                late = int(late_row[f"late_{j}_{i}"] or 0)  # a sum over no rows is null
                rows["idle_timeout"].append(idle_durations[j])
                rows["bound"].append(bound_durations[i])
                rows["late_fraction"].append(late / n if n else math.nan)
                rows["late"].append(late)
                rows["records"].append(n)
                rows["windows"].append(int(w_on.sum()))
                rows["fired_at_end"].append(int(np.where(fired, 0, weight).sum()))
                rows["delay_median_s"].append(nearest_rank(delay, w_on, 0.5) if clock else math.nan)
                rows["delay_p99_s"].append(nearest_rank(delay, w_on, 0.99) if clock else math.nan)
        durations = {"idle_timeout", "bound"}
        return pa.table(
            {
                k: pa.array(v, pa.duration("us")) if k in durations else pa.array(v)
                for k, v in rows.items()
            }
        )


def listed(values: object, parameter: str) -> list[Any]:
    """A non-empty list from any iterable (a list, tuple, numpy array, pandas index...);
    a clear error for anything else."""
    items: list[Any] | None = None
    if not isinstance(values, (str, bytes)):
        with contextlib.suppress(TypeError):  # not iterable
            items = list(values)  # type: ignore[call-overload]
    if not items:
        raise InvalidParameterError(parameter, f"expected a non-empty list, got {values!r}")
    return items


def reported(ticks: Sequence[int | None], per_second: int, parameter: str) -> list[Any]:
    """Durations as the report gives them, in whole microseconds (its Arrow type; None
    stays None), checked before any job: a value beyond ``int64`` microseconds (about
    292,000 years) is refused naming ``parameter``."""
    micros = [None if t is None else t * 1_000_000 // per_second for t in ticks]
    if any(m is not None and abs(m) >= 2**63 for m in micros):
        raise InvalidParameterError(
            parameter, "a value too large to report (over 2^63 microseconds, ~292,000 years)"
        )
    return [None if m is None else timedelta(microseconds=m) for m in micros]


__all__ = ["analyze_bounds", "nearest_rank", "window_grid"]
