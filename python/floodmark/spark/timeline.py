"""Stages 1 and 2 of the pipeline: per-channel watermarks and the combined timeline.

Why this is exact and cheap. Periodic emission happens on a grid of processing time
(every ``emit_interval``, at multiples of it); the emission at grid time ``t`` sees every
record with ``arrival <= t`` (the documented tie rule). For the periodic generators
(bounded out-of-orderness, monotonous, processing-time lag, no watermarks, each with or
without idleness) what an emission at ``t`` says depends only on the maximum event time
seen so far and on whether anything arrived since the previous emission. So Spark
reduces each channel's records, natively and in parallel, to one row per non-empty grid
bucket ``(channel, bucket, max event time, count)``, and the Rust driver replays the
channel's generator over those rows exactly as it would over every record. The result
is the same emission stream, bit for bit (the equality tests check it against the
per-record engine), without sending a single record through Python.

The compact rows (channels x non-empty buckets) come to the driver, where the Rust
valve merges the channels' emissions into the combined watermark timeline.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from floodmark.exceptions import InvalidInputError, InvalidParameterError
from floodmark.spark.columns import (
    TimeColumn,
    key_column,
    name_key,
    quote,
    schema_error,
    time_column,
)
from floodmark.strategy import WatermarkStrategy
from floodmark.time import I64_MAX, I64_MIN, Duration, to_ticks
from floodmark.watermarks import combine, drive

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

PERIODIC_KINDS = ("bounded_out_of_orderness", "processing_time_lag", "no_watermarks")


@dataclass(frozen=True)
class WatermarkPlan:
    """Everything the watermark stages need, resolved and checked against the schema."""

    event_time: TimeColumn
    arrival: TimeColumn
    channel: str
    interval: int
    strategy: WatermarkStrategy  # durations already in ticks

    def bucket(self, arrival_ticks: str) -> Column:
        """The grid bucket of each record, from the column ``arrival_ticks`` holding its
        arrival in ticks: ``ceil(arrival / interval)`` in exact integer arithmetic (no
        overflow, no float). A record of bucket ``k`` is first seen by the emission at
        ``k * interval``."""
        from pyspark.sql import functions as F

        a, i = quote(arrival_ticks), self.interval
        return F.expr(f"({a} div {i}) + CASE WHEN {a} % {i} > 0 THEN 1 ELSE 0 END")


def resolve_strategy(
    strategy: WatermarkStrategy, event_unit: str, arrival_unit: str
) -> WatermarkStrategy:
    """The same strategy with every duration in ticks: the bound in event-time ticks,
    the idle timeout in arrival ticks."""
    if not isinstance(strategy, WatermarkStrategy):
        raise InvalidParameterError(
            "invalid parameter `strategy`: expected a floodmark.WatermarkStrategy, "
            f"got {type(strategy).__name__}"
        )
    kind = strategy.kind
    if kind not in PERIODIC_KINDS:
        raise InvalidParameterError(
            f"invalid parameter `strategy`: the Spark pipeline runs the periodic strategies "
            f"({', '.join(PERIODIC_KINDS)}, with or without idleness); {kind!r} runs with "
            "floodmark.drive on a single table instead"
        )
    resolved: WatermarkStrategy
    if kind == "bounded_out_of_orderness":
        assert strategy.bound is not None
        resolved = WatermarkStrategy.for_bounded_out_of_orderness(
            to_ticks(strategy.bound, event_unit, "bound")
        )
    elif kind == "processing_time_lag":
        if event_unit != arrival_unit:
            raise InvalidParameterError(
                "invalid parameter `strategy`: a processing-time-lag watermark compares "
                "arrival time with event time, so both columns need the same unit "
                f"(got event time in {event_unit}, arrival in {arrival_unit})"
            )
        assert strategy.lag is not None
        resolved = WatermarkStrategy.for_processing_time_lag(
            to_ticks(strategy.lag, arrival_unit, "lag")
        )
    else:
        resolved = WatermarkStrategy.no_watermarks()
    if strategy.idle_timeout is not None:
        idle = to_ticks(strategy.idle_timeout, arrival_unit, "idle_timeout")
        if idle == 0 and strategy.idle_timeout:
            raise InvalidParameterError(
                f"invalid parameter `idle_timeout`: {strategy.idle_timeout!r} is less than one "
                f"tick of the arrival column's unit ({arrival_unit!r}); give a longer timeout"
            )
        resolved = resolved.with_idleness(idle)
    return resolved


def make_plan(
    df: DataFrame,
    strategy: WatermarkStrategy,
    *,
    event_time: str | None,
    channel: str,
    arrival: str | None,
    emit_interval: Duration,
    event_time_unit: str | None,
    arrival_unit: str | None,
) -> tuple[DataFrame, WatermarkPlan]:
    """Check the columns and parameters (before any job runs) and resolve them.

    Returns ``df`` (with the default arrival column added when ``arrival`` is None, see
    :mod:`floodmark.spark.arrival`) and the plan."""
    from floodmark.spark.arrival import ordered_input_released, with_default_arrival

    if not (hasattr(df, "sparkSession") and hasattr(df, "schema")):
        raise InvalidParameterError(
            f"invalid parameter `df`: expected a pyspark DataFrame, got {type(df).__name__}"
        )
    for parameter, name in (("event_time", event_time), ("channel", channel), ("arrival", arrival)):
        if (name is not None or parameter == "channel") and not isinstance(name, str):
            raise InvalidParameterError(
                f"invalid parameter `{parameter}`: expected a column name (str), "
                f"got {type(name).__name__}"
            )
    if arrival is None and arrival_unit is not None:
        raise InvalidParameterError(
            "invalid parameter `arrival_unit`: it is the unit of the arrival column, and "
            "no arrival= was given (the row order within each channel is the arrival "
            "then, in ms ticks); pass arrival= or drop arrival_unit"
        )
    key = name_key(df)
    reserved = [c for c in df.columns if key(c).startswith("__fm_")]
    if reserved:
        raise schema_error(
            reserved[0],
            f"column {reserved[0]!r}: names starting with __fm_ are floodmark's working "
            "columns; rename it first",
        )
    given = arrival
    df, arrival, arrival_unit = with_default_arrival(df, arrival, channel, arrival_unit)
    with ordered_input_released(df, given):  # a rejected call keeps no cache
        name = event_time or (strategy.timestamp_column if strategy else None)
        if name is None:
            raise InvalidParameterError(
                "invalid parameter `event_time`: name the event-time column, either "
                "event_time='ts' or strategy.with_timestamp_assigner('ts')"
            )
        ev = time_column(df, name, event_time_unit, "event_time")
        arr = time_column(df, arrival, arrival_unit, "arrival")
        key_column(df, channel, "channel")
        interval = to_ticks(emit_interval, arr.unit, "emit_interval")
        if interval <= 0:
            raise InvalidParameterError(
                f"invalid parameter `emit_interval`: {emit_interval!r} is less than one tick of "
                f"the arrival column's unit ({arr.unit!r}); give a longer interval"
            )
        return df, WatermarkPlan(
            ev, arr, channel, interval, resolve_strategy(strategy, ev.unit, arr.unit)
        )


@dataclass
class Timeline:
    """The combined watermark timeline of one input, plus what stage 3 joins against.

    Attributes:
        plan: the resolved plan.
        table: one row per change of the combined watermark or status: ``time``
            (arrival ticks), ``watermark`` (event-time ticks), ``status``
            (``active``/``idle``), ``min_channel`` (the channel value holding the minimum).
        buckets: one row per non-empty ``(channel, bucket)``: ``channel``, ``bucket``,
            ``channel_watermark`` and ``watermark`` in force for records of that bucket
            (and the bucket's smallest event time ``min_ts`` and its number of records
            ``rows`` when aggregated).
        channels: the channel values, in the order of the valve's channel indexes.
        emissions: every channel's own output (deduplicated as Flink's
            ``WatermarkToDataOutput`` does): ``channel`` (value), ``time``, ``kind``
            (``watermark``/``idle``/``active``), ``watermark``.
        event_range: smallest and largest event time (ticks) of the placeable records,
            when the aggregation gave ``min_ts``; None for no records.
    """

    plan: WatermarkPlan
    table: pa.Table
    buckets: pa.Table
    channels: list[Any] = field(default_factory=list)
    emissions: pa.Table | None = None
    event_range: tuple[int, int] | None = None

    def advances(self) -> tuple[np.ndarray, np.ndarray]:
        """``(times, watermarks)`` of the rows where the combined watermark grew."""
        times = self.table.column("time").to_numpy()
        wms = self.table.column("watermark").to_numpy()
        if len(wms) == 0:
            return times, wms
        prev = np.concatenate([[I64_MIN], np.maximum.accumulate(wms)[:-1]])
        keep = wms > prev
        return times[keep], wms[keep]

    def to_dataframe(self, spark: SparkSession) -> DataFrame:
        """The timeline as a DataFrame, times and watermarks in the input's types."""
        from pyspark.sql import functions as F

        # From the Arrow table itself: its schema holds with no rows (an empty input, a
        # strategy that never emits) and keeps an integer channel integer when it is
        # null (every channel idle), which pandas would turn into a float.
        df = spark.createDataFrame(self.table)
        return df.select(
            self.plan.arrival.from_ticks(F.col("time")).alias("time"),
            self.plan.event_time.from_ticks(F.col("watermark")).alias("watermark"),
            F.col("status"),
            F.col("min_channel"),
        )


def watermark_in_force(
    times: np.ndarray, wms: np.ndarray, buckets: np.ndarray, interval: int
) -> np.ndarray:
    """The watermark in force for a record of each bucket: the last of ``wms`` (at
    ``times``, sorted) strictly before its arrival, i.e. at or before
    ``(bucket - 1) * interval``; ``MIN`` before the first (or with none at all, e.g.
    ``WatermarkStrategy.no_watermarks()``)."""
    if len(wms) == 0:
        return np.full(len(buckets), I64_MIN, np.int64)
    idx = np.searchsorted(times, (buckets - 1) * interval, side="right") - 1
    return np.where(idx >= 0, wms[np.maximum(idx, 0)], I64_MIN).astype(np.int64)


def timeline_from_buckets(agg: pa.Table, plan: WatermarkPlan) -> Timeline:
    """Run the generator per channel over the bucket rows and combine the channels.

    Args:
        agg: columns ``channel``, ``bucket``, ``max_ts`` (one row per non-empty bucket),
            and optionally ``min_ts``.
        plan: the resolved plan.
    """
    interval = plan.interval
    agg = agg.sort_by([("channel", "ascending"), ("bucket", "ascending")])
    chan = agg.column("channel").combine_chunks()
    buckets = agg.column("bucket").to_numpy().astype(np.int64)
    max_ts = agg.column("max_ts").to_numpy().astype(np.int64)
    n = len(buckets)
    if n == 0:
        empty = pa.table(
            {
                "time": pa.array([], pa.int64()),
                "watermark": pa.array([], pa.int64()),
                "status": pa.array([], pa.string()),
                "min_channel": pa.array([], agg.schema.field("channel").type),
            }
        )
        none = pa.array([], pa.int64())
        # No placeable record (an empty input, or every row null somewhere): the same
        # columns as ever, with no rows, so every stage after this one runs unchanged.
        bucket_table = pa.table(
            {
                "channel": agg.column("channel"),
                "bucket": agg.column("bucket"),
                "channel_watermark": none,
                "watermark": none,
                **{c: agg.column(c) for c in ("min_ts", "rows") if c in agg.column_names},
            }
        )
        return Timeline(plan, empty, bucket_table, [])
    # The grid times of the buckets, and the one before each ((bucket - 1) * interval),
    # must be longs: arrivals that close to the range's ends cannot be placed.
    low, high = int(buckets.min()), int(buckets.max())
    if (low - 1) * interval < I64_MIN or high * interval > I64_MAX:
        err = InvalidInputError(
            f"invalid input `{plan.arrival.name}`: arrival times within one emit interval "
            "of the 64-bit range's ends cannot be placed on the emission grid"
        )
        err.column = plan.arrival.name
        raise err
    # Channel boundaries in the sorted rows.
    changed = pc.not_equal(chan.slice(1), chan.slice(0, n - 1)).to_numpy(zero_copy_only=False)
    starts = [0, *(np.flatnonzero(changed) + 1).tolist(), n]
    channel_values = pa.array([chan[s].as_py() for s in starts[:-1]], chan.type)
    channels = channel_values.to_pylist()
    start, until = int(buckets.min()) * interval, int(buckets.max()) * interval
    channel_wm = np.empty(n, dtype=np.int64)
    parts = []
    for idx, (lo, hi) in enumerate(itertools.pairwise(starts)):
        res = drive(
            plan.strategy,
            max_ts[lo:hi],
            buckets[lo:hi] * interval,
            emit_interval=interval,
            start=start,
            until=until,
        )
        channel_wm[lo:hi] = res.record_watermark.to_numpy(zero_copy_only=False)
        em = res.emissions
        parts.append(
            pa.record_batch(
                [pa.array(np.full(em.num_rows, idx, dtype=np.int64)), *em.columns],
                names=["channel", *em.schema.names],
            )
        )
    emissions = pa.Table.from_batches(parts).combine_chunks().to_batches()
    merged = pa.concat_batches(emissions) if emissions else parts[0].slice(0, 0)
    tl = combine(merged, num_channels=len(channels))
    times = tl.column("time").to_numpy(zero_copy_only=False)
    wms = tl.column("watermark").to_numpy(zero_copy_only=False)
    wm_in_force = watermark_in_force(times, wms, buckets, interval)
    table = pa.table(
        {
            "time": tl.column("time"),
            "watermark": tl.column("watermark"),
            "status": tl.column("status"),
            "min_channel": channel_values.take(tl.column("min_channel")),
        }
    )
    bucket_table = pa.table(
        {
            "channel": agg.column("channel"),
            "bucket": pa.array(buckets),
            "channel_watermark": pa.array(channel_wm),
            "watermark": pa.array(wm_in_force),
            **{c: agg.column(c) for c in ("min_ts", "rows") if c in agg.column_names},
        }
    )
    emitted = pa.table(
        {
            "channel": channel_values.take(merged.column("channel")),
            "time": merged.column("time"),
            "kind": merged.column("kind"),
            "watermark": merged.column("watermark"),
        }
    )
    event_range = None
    if "min_ts" in agg.column_names:
        event_range = (int(agg.column("min_ts").to_numpy().min()), int(max_ts.max()))
    return Timeline(plan, table, bucket_table, channels, emitted, event_range)


def valid_rows(plan: WatermarkPlan) -> Column:
    """Rows the watermark stages can place: event time, arrival and channel not null."""
    from pyspark.sql import functions as F

    return (
        F.col(quote(plan.event_time.name)).isNotNull()
        & F.col(quote(plan.arrival.name)).isNotNull()
        & F.col(quote(plan.channel)).isNotNull()
    )


def error_reason(plan: WatermarkPlan) -> Column:
    """Why a row cannot be placed (null when it can)."""
    from pyspark.sql import functions as F

    return (
        F.when(F.col(quote(plan.event_time.name)).isNull(), F.lit("null_event_time"))
        .when(F.col(quote(plan.arrival.name)).isNull(), F.lit("null_arrival"))
        .when(F.col(quote(plan.channel)).isNull(), F.lit("null_channel"))
    )


def bucket_aggregate(df: DataFrame, plan: WatermarkPlan, event_range: bool = False) -> pa.Table:
    """Stage 1, native: one row per non-empty ``(channel, bucket)`` with ``max_ts``, and
    ``min_ts`` and ``rows`` with ``event_range`` (the window stage needs the event-time
    range and which buckets can hold late records)."""
    from pyspark.sql import functions as F

    agg = (
        df.where(valid_rows(plan))
        .select(
            F.col(quote(plan.channel)).alias("channel"),
            plan.arrival.ticks().alias("arrival"),
            plan.event_time.ticks().alias("ts"),
        )
        .groupBy("channel", plan.bucket("arrival").alias("bucket"))
        .agg(
            F.max("ts").alias("max_ts"),
            *([F.min("ts").alias("min_ts"), F.count("*").alias("rows")] if event_range else []),
        )
    )
    return agg.toArrow()


def compute_timeline(df: DataFrame, plan: WatermarkPlan, event_range: bool = False) -> Timeline:
    """Stages 1-2: one native aggregation pass over three columns, then the engine;
    with ``event_range``, the timeline knows the smallest and largest event time."""
    return timeline_from_buckets(bucket_aggregate(df, plan, event_range), plan)
