"""Stage 4: event-time windows, keyed, with allowed lateness and side outputs.

Module map:

* :mod:`.plan`: the resolved window stage (keys, values, aggregates, assigner,
  lateness) and the names of the columns it adds.
* :mod:`.native`: tumbling windows, and sliding windows without gaps, with order-free
  aggregates, as native Spark aggregations (no record crosses into Python), and
  :mod:`.aggregates`, their aggregates as Spark expressions.
* :mod:`.starts`: Flink's window assignment in Spark SQL (the native path's, and
  ``analyze_bounds``').
* :mod:`.keyed`: everything else, on the keyed Rust window operator in ``mapInArrow``.
* :mod:`.side_outputs`: the late and dropped rows with every input column, for both
  paths.

This module holds :func:`window_aggregate`, which checks its arguments (before any
job), computes the timeline and picks the path.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from floodmark.exceptions import InvalidParameterError
from floodmark.spark.arrival import ordered_input_released
from floodmark.spark.call_sites import without_call_sites
from floodmark.spark.columns import (
    check_distinct_columns,
    key_column,
    name_key,
    quote,
    value_column,
)
from floodmark.spark.lookup import shipped_advances
from floodmark.spark.plan import WatermarkPlan, make_plan
from floodmark.spark.timeline import Timeline, compute_timeline
from floodmark.spark.windows.keyed import keyed_outputs
from floodmark.spark.windows.native import candidate, late_probe, native_outputs
from floodmark.spark.windows.plan import REFIRE, WindowPlan
from floodmark.spark.windows.side_outputs import (
    dropped_candidates,
    errors_frame,
    late_candidates,
    matched,
    side_frame,
)
from floodmark.strategy import DEFAULT_EMIT_INTERVAL, WatermarkStrategy
from floodmark.time import Duration
from floodmark.vocabulary import (
    DROP_REASON,
    FIRED_WATERMARK,
    LATE_WATERMARK,
    RESULT_WINDOW,
    SIDE_OUTPUT_COLUMNS,
    SPARK_RESULT_TAIL,
    TRIGGER_TIME,
    agg_name,
    check_not_added,
    check_result_names,
    flag,
    parse_aggs,
    window_keys,
)
from floodmark.windows import LATE, ON_TIME, lateness_ticks, window_params

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass
class WindowedOutput:
    """What :func:`window_aggregate` returns: three DataFrames, over one cached run of
    the keyed operator (``cached``; None when the stage ran natively).

    Attributes:
        results: one row per window firing: key columns, ``window_start``,
            ``window_end``, the aggregates, ``watermark`` (that fired it), ``timing``
            (``on_time``, or ``late`` for a re-fire within the allowed lateness) and
            ``fired_at`` (arrival time of the input that triggered it; null when the
            end of input fired it).
        late: Flink's late side output: records too late for every window, with the
            ``watermark`` they met.
        dropped: records no window could take, with a ``reason``:
            ``null_event_time``, ``null_arrival``, ``null_channel``, ``min_event_time``
            or ``no_window`` (a record in no window, not yet late: Flink drops it
            silently; floodmark reports it).
        timeline: the combined watermark timeline that drove the windows.
        cached: the keyed operator's cached run (None on the native path).
        ordered_input: without an arrival column, the input with its row-order arrival,
            cached so that every job sees the same order (None otherwise).
    """

    results: DataFrame
    late: DataFrame
    dropped: DataFrame
    timeline: Timeline
    cached: DataFrame | None
    ordered_input: DataFrame | None = None

    def unpersist(self) -> None:
        """Release what floodmark cached behind the three DataFrames: the keyed
        operator's run and the row-ordered input (once the outputs are written)."""
        for frame in (self.cached, self.ordered_input):
            if frame is not None:
                frame.unpersist()
        self.timeline.unpersist()


@without_call_sites
def window_aggregate(
    df: DataFrame,
    strategy: WatermarkStrategy,
    window: Any,
    *,
    key: str | Sequence[str],
    channel: str,
    arrival: str | None = None,
    aggs: Sequence[str | tuple[str, str]] = ("count",),
    allowed_lateness: Duration = timedelta(0),
    event_time: str | None = None,
    emit_interval: Duration = DEFAULT_EMIT_INTERVAL,
    event_time_unit: str | None = None,
    arrival_unit: str | None = None,
    num_partitions: int | None = None,
    source_parallelism: int | None = None,
    topic: str | None = None,
    end_of_input: str = "together",
    emissions: bool = False,
) -> WindowedOutput:
    """Flink's keyed event-time windows over ``df``, driven by Flink's watermarks.

    Args:
        df: the events.
        strategy: the watermark strategy (see :func:`assign_watermarks`).
        window: ``TumblingEventTimeWindows.of(...)``, ``SlidingEventTimeWindows.of(...)``
            or ``EventTimeSessionWindows.with_gap(...)``.
        key: the key column(s), integer or string.
        channel: the input-channel column (e.g. Kafka partition).
        arrival: the arrival (processing) time column; without it, the row order within
            each channel (see :func:`assign_watermarks`).
        aggs: ``"count"`` and ``(function, column)`` pairs, function one of sum, min,
            max, mean, first, last. Result columns are ``count`` and ``function_column``.
        allowed_lateness: Flink's ``allowedLateness``: fired windows are kept this long
            past their end and re-fire for each late record.
        event_time: event-time column (default: the strategy's timestamp assigner).
        emit_interval: periodic watermark emission interval (Flink's 200 ms default).
        event_time_unit: unit of an integer event-time column (default ``"ms"``), or
            the ticks a timestamp one is read in (default ``"us"``; docs/spark.md,
            "Columns and units").
        arrival_unit: the same for the arrival column.
        num_partitions: partitions of the keyed operator's shuffle (default: Spark's
            default parallelism); the native path's aggregation uses
            ``spark.sql.shuffle.partitions``.
        source_parallelism, topic, end_of_input: the Flink job's topology (see
            :func:`assign_watermarks` and ``docs/semantics.md``).
        emissions: also keep every channel's own watermark output in
            ``out.timeline.emissions`` (what the report's per-partition views read;
            compacted to what they read when the input is large). Off by default: it
            grows with the channels and their idle transitions.

    Returns:
        A :class:`WindowedOutput` with ``results``, ``late`` and ``dropped``.
    """
    df, wm_plan = make_plan(
        df,
        strategy,
        event_time=event_time,
        channel=channel,
        arrival=arrival,
        emit_interval=emit_interval,
        event_time_unit=event_time_unit,
        arrival_unit=arrival_unit,
        source_parallelism=source_parallelism,
        topic=topic,
        end_of_input=end_of_input,
    )
    # The row-ordered input (no arrival column) stays cached for the outputs, unless
    # this fails; WindowedOutput.unpersist() releases it.
    with ordered_input_released(df, arrival):
        plan = make_window_plan(df, wm_plan, window, key, aggs, allowed_lateness)
        if num_partitions is not None:
            num_partitions = positive_int(num_partitions, "num_partitions")
        emissions = flag(emissions, "emissions")

        native_candidate = candidate(plan)
        timeline = compute_timeline(
            df,
            wm_plan,
            stats=native_candidate,
            emissions=emissions,
            probe=late_probe(plan) if native_candidate else None,
        )
        times, wms = shipped_advances(timeline)
        native = native_outputs(df, plan, timeline, times, wms)
        if native is not None:
            return WindowedOutput(
                results=results_frame(native[0], plan),
                late=side_frame(native[1], plan, df, "late"),
                dropped=errors_frame(df, plan),
                timeline=timeline,
                cached=None,
                ordered_input=df if arrival is None else None,
            )

        keyed = keyed_outputs(df, plan, times, wms, num_partitions)
        maybe_late = late_candidates(df.sparkSession, plan, timeline)
        return WindowedOutput(
            results=results_frame(keyed.results, plan),
            late=side_frame(
                matched(df, plan, keyed.late, LATE_WATERMARK, maybe_late), plan, df, "late"
            ),
            dropped=side_frame(
                matched(df, plan, keyed.dropped, DROP_REASON, dropped_candidates(plan)),
                plan,
                df,
                "dropped",
            ).unionByName(errors_frame(df, plan)),
            timeline=timeline,
            cached=keyed.cached,
            ordered_input=df if arrival is None else None,
        )


def make_window_plan(
    df: DataFrame,
    wm_plan: WatermarkPlan,
    window: Any,
    key: str | Sequence[str],
    aggs: Sequence[str | tuple[str, str]],
    allowed_lateness: Duration,
) -> WindowPlan:
    """The window stage's arguments checked against ``df``'s schema (before any job)
    and resolved; shared by :func:`window_aggregate` and the streaming handler."""
    keys = window_keys(key)
    for k in keys:
        key_column(df, k, "key")
    parsed = parse_aggs(aggs)
    values = {a[1]: value_column(df, a[1], "aggs") for a in parsed if not isinstance(a, str)}
    lateness = lateness_ticks(allowed_lateness, wm_plan.event_time.unit)
    channel = wm_plan.channel
    plan = WindowPlan(
        wm_plan,
        window,
        keys,
        values,
        parsed,
        lateness,
        send_channel=channel not in keys and channel not in values,
    )
    window_params(window, wm_plan.event_time.unit)
    check_output_names(plan, df)
    return plan


def results_frame(results: DataFrame, plan: WindowPlan) -> DataFrame:
    """The results in their output columns and units; the ``REFIRE`` flag, worded
    once, as ``timing``."""
    from pyspark.sql import functions as F

    ev, arr = plan.wm.event_time, plan.wm.arrival
    timing = F.when(F.col(REFIRE), F.lit(LATE)).otherwise(F.lit(ON_TIME))
    tail = (ev.from_ticks(F.col(FIRED_WATERMARK)), timing, arr.from_ticks(F.col(TRIGGER_TIME)))
    return results.select(
        *[F.col(quote(k)) for k in plan.keys],
        *[ev.from_ticks(F.col(c)).alias(c) for c in RESULT_WINDOW],
        *[F.col(quote(agg_name(a))) for a in plan.aggs],
        *[c.alias(n) for n, c in zip(SPARK_RESULT_TAIL, tail, strict=True)],
    )


def positive_int(value: object, parameter: str) -> int:
    """An integer from 1 to Java's largest ``int`` (numpy integers too: a count of Spark
    partitions); a clear error for anything else."""
    try:
        number = None if isinstance(value, bool) else operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        number = None
    if number is None or not 1 <= number <= JAVA_INT_MAX:
        raise InvalidParameterError(
            parameter, f"expected an int from 1 to {JAVA_INT_MAX:,} or None, got {value!r}"
        )
    return number


#: Spark counts partitions in a Java ``int``.
JAVA_INT_MAX = 2**31 - 1


def check_output_names(plan: WindowPlan, df: DataFrame) -> None:
    """Each output's columns have distinct names, compared the way ``df``'s session
    compares them (:func:`name_key`: Spark resolves names without regard to case by
    default, and a write fails on a repeated one): before any job. Late and dropped
    rows carry every input column."""
    key = name_key(df)
    check_result_names(plan.keys, [agg_name(a) for a in plan.aggs], key=key, tail=SPARK_RESULT_TAIL)
    check_not_added(df.columns, SIDE_OUTPUT_COLUMNS, key=key)
    check_distinct_columns(df, "the late and dropped rows carry every input column")


__all__ = ["WindowedOutput", "make_window_plan", "results_frame", "window_aggregate"]
