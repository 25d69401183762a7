"""What Spark Structured Streaming's own watermark would drop, computed in Spark SQL.

Structured Streaming has one global watermark per query. The records are cut into
micro-batches by arrival time (a processing-time trigger every ``trigger_interval``:
batch ``i`` holds arrivals in ``[i * T, (i + 1) * T)``). At the end of each batch the
watermark becomes the maximum event time seen so far minus the delay
(``withWatermark(col, delay)``), both in whole milliseconds (the delay truncated), if
that is higher: it starts at 0 (1970-01-01) and never goes back. Since Spark 3.4 a batch
evicts state with the watermark computed at the end of the previous batch, but filters
late *input* with the one before that (``eventTimeWatermarkForLateEvents``). A trigger
that finds no new record still runs a batch when the watermark moved
(``spark.sql.streaming.noDataMicroBatches.enabled``, on by default), so batch ``i``
filters with the maximum event time over the batches ``<= i - 2`` minus the delay; with
no-data batches off, over the batches that had records, up to two of those back. A
windowed aggregation drops an input record whose window ended at or before that
watermark; for a tumbling window of size ``S`` the end is ``floor(ts / S) * S + S``.
This model matches real Structured Streaming queries, in every partition
(``tests/python/spark/test_baseline.py``,
``tests/python/spark/test_conservation_and_errors.py``). Everything is native Spark:
one aggregation per batch, a running maximum over the small batch table, and a
broadcast join back.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from floodmark.exceptions import InvalidInputError, InvalidParameterError
from floodmark.spark.call_sites import without_call_sites
from floodmark.spark.columns import TimeColumn, key_column, quote, time_column
from floodmark.spark.plan import check_arguments
from floodmark.time import I64_MAX, I64_MIN, TICKS_PER_SECOND, Duration, as_int, to_ticks
from floodmark.vocabulary import flag

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def micros(column: TimeColumn) -> Column:
    """The column's ticks as microseconds since the epoch (floored); a value beyond
    Spark's timestamps (microseconds in a ``long``, ~292,000 years either side of
    1970) fails the job naming the column, as Spark's own conversion would."""
    from pyspark.sql import functions as F

    per_s = TICKS_PER_SECOND[column.unit]
    ticks = column.ticks()
    if per_s > 1_000_000:
        return floor_div(ticks, per_s // 1_000_000)
    factor = 1_000_000 // per_s
    if factor == 1 or column.kind != "integer":  # a timestamp's ticks came from micros
        return ticks * factor
    reach = I64_MAX // factor
    problem = InvalidInputError(
        column.name,
        f"\0 {column.unit} is beyond what Spark's timestamps hold (microseconds in a "
        "long, about 292,000 years either side of 1970), so Spark's own watermark cannot "
        "read it; is the unit right?",
    )
    pattern = str(problem).replace("%", "%%").replace("\0", "%s")  # the value at \0
    beyond = F.raise_error(F.format_string(pattern, ticks))
    return F.when(ticks.between(-reach, reach), ticks * factor).otherwise(beyond.cast("bigint"))


def duration_micros(value: Duration, column: TimeColumn, parameter: str) -> int:
    """A duration parameter in microseconds: a ``timedelta`` as it is, an integer
    counted in ticks of ``column``'s unit (as every duration of floodmark's Spark
    functions), floored to whole microseconds."""
    if as_int(value) is None:
        return to_ticks(value, "us", parameter)
    ticks = to_ticks(value, column.unit, parameter)
    per_s = TICKS_PER_SECOND[column.unit]
    if per_s > 1_000_000:
        return ticks // (per_s // 1_000_000)
    return max(I64_MIN, min(I64_MAX, ticks * (1_000_000 // per_s)))


def floor_div(column: Column, divisor: int) -> Column:
    """Exact integer ``floor(column / divisor)`` (through decimal, never a double)."""
    from pyspark.sql import functions as F

    return F.floor(column.cast("decimal(38,0)") / F.lit(divisor)).cast("bigint")


@without_call_sites
def spark_global_watermark_late(
    df: DataFrame,
    *,
    event_time: str,
    arrival: str,
    channel: str,
    delay: Duration,
    trigger_interval: Duration = timedelta(seconds=10),
    window_size: Duration = timedelta(seconds=10),
    event_time_unit: str | None = None,
    arrival_unit: str | None = None,
    no_data_batches: bool = True,
) -> DataFrame:
    """Per channel, how many records Spark's global watermark would drop.

    Args:
        df: the events.
        event_time: the event-time column (timestamp or integer epoch).
        arrival: the arrival-time column: it decides each record's micro-batch.
        channel: the column to count by (e.g. the Kafka partition).
        delay: the ``withWatermark`` delay threshold (an integer counts ticks of the
            event-time column's unit, as every duration of floodmark's Spark functions).
        trigger_interval: the processing-time trigger (micro-batch length; an integer
            counts ticks of the arrival column's unit).
        window_size: the tumbling window's size (an integer counts ticks of the
            event-time column's unit).
        event_time_unit: unit of an integer event-time column (default ``"ms"``).
        arrival_unit: unit of an integer arrival column (default ``"ms"``).
        no_data_batches: whether the query runs a batch at a trigger without new
            records (``spark.sql.streaming.noDataMicroBatches.enabled``, Spark's
            default): such a batch moves the watermark that filters the next one.

    Returns:
        ``channel``, ``records``, ``spark_dropped``, one row per channel value.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    check_arguments(df, event_time, channel, arrival, arrival_unit)
    for parameter, name in (("event_time", event_time), ("arrival", arrival)):
        if name is None:
            raise InvalidParameterError(parameter, "expected a column name (str), got NoneType")
    with_data_batches = flag(no_data_batches, "no_data_batches")
    ev = time_column(df, event_time, event_time_unit, "event_time")
    arr = time_column(df, arrival, arrival_unit, "arrival")
    key_column(df, channel, "channel")
    trigger = duration_micros(trigger_interval, arr, "trigger_interval")
    size = duration_micros(window_size, ev, "window_size")
    lag = duration_micros(delay, ev, "delay")
    for parameter, value, ticks, least in (
        ("trigger_interval", trigger_interval, trigger, 1),
        ("window_size", window_size, size, 1),
        ("delay", delay, lag, 0),
    ):
        if ticks < least:
            need = "positive" if least else ">= 0"
            raise InvalidParameterError(parameter, f"must be {need}, got {value!r}")
    rows = df.where(
        F.col(quote(event_time)).isNotNull() & F.col(quote(arrival)).isNotNull()
    ).select(
        F.col(quote(channel)).alias("channel"),
        micros(ev).alias("ts"),
        floor_div(micros(arr), trigger).alias("batch"),
    )
    # two batches back: by trigger (empty ones ran a batch) or by batch that had records
    order = Window.orderBy("batch")
    before = (
        order.rangeBetween(Window.unboundedPreceding, -2)
        if with_data_batches
        else order.rowsBetween(Window.unboundedPreceding, -2)
    )
    seen_ms = floor_div(F.max("max_ts").over(before), 1_000)  # null before any
    wm_ms = F.greatest(F.coalesce(seen_ms - F.lit(lag // 1_000), F.lit(0)), F.lit(0))
    batches = (
        rows.groupBy("batch")
        .agg(F.max("ts").alias("max_ts"))
        .select("batch", (wm_ms * F.lit(1_000)).alias("wm"))
    )
    window_end = F.col("ts") - F.expr(f"pmod(ts, {size})") + F.lit(size)
    dropped = window_end <= F.col("wm")
    joined = rows.join(F.broadcast(batches), on="batch", how="left")
    return (
        joined.groupBy("channel")
        .agg(
            F.count(F.lit(1)).alias("records"),
            F.sum(F.when(dropped, 1).otherwise(0)).cast("bigint").alias("spark_dropped"),
        )
        .orderBy("channel")
    )


__all__ = ["spark_global_watermark_late"]
