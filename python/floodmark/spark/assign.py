"""Stage 3: each record gets its channel's watermark and the combined watermark in
force when it arrived, and whether it is late.

Each record reads its row of the per-``(channel, bucket)`` table the timeline stage
produced: from constant arrays in the plan or through a broadcast join when the table
came to the driver, through a join on the executors when it stayed there (see
:mod:`floodmark.spark.lookup`): native Spark, no record crosses into Python. Where
there is no such table (the records path, a generator emitting on records), a
per-channel pass already gave each record its channel watermark, and it reads the
combined one by arrival.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from floodmark.spark.arrival import ordered_input_released
from floodmark.spark.call_sites import without_call_sites
from floodmark.spark.columns import check_distinct_columns, name_key, quote
from floodmark.spark.late import behind_watermark
from floodmark.spark.lookup import bucket_slots, join_bucket_frame, join_buckets, with_in_force
from floodmark.spark.plan import WatermarkPlan, error_reason, make_plan
from floodmark.spark.timeline import Timeline, compute_timeline
from floodmark.strategy import DEFAULT_EMIT_INTERVAL, WatermarkStrategy
from floodmark.time import Duration
from floodmark.vocabulary import WATERMARK_COLUMNS, check_not_added

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: Why a record could not be placed (null when it was), in :func:`assign_watermarks`'
#: records and the live handler's.
ERROR_COLUMN = "error"
#: Columns :func:`assign_watermarks` adds.
ADDED_COLUMNS = (*WATERMARK_COLUMNS, ERROR_COLUMN)
_CWM, _WM, _ARRIVAL = "__fm_channel_wm", "__fm_wm", "__fm_arrival"


def record_columns(
    plan: WatermarkPlan,
    columns: Sequence[str],
    channel_wm: Column,
    wm: Column,
    ts: Column,
    error: Column | None = None,
) -> list[Column]:
    """The watermark stage's output row: the input's ``columns``, then
    :data:`ADDED_COLUMNS` from the channel and combined watermarks and the event time
    (ticks; the watermarks back in the event time's type). ``error``: the rows'
    :func:`floodmark.spark.plan.error_reason` when some may not be placed (None: all
    are)."""
    from pyspark.sql import functions as F

    late = behind_watermark(ts, wm)
    return [
        *[F.col(quote(c)) for c in columns],
        plan.event_time.from_ticks(channel_wm).alias("channel_watermark"),
        plan.event_time.from_ticks(wm).alias("watermark"),
        (late if error is None else F.when(error.isNull(), late)).alias("is_late"),
        (F.lit(None).cast("string") if error is None else error).alias(ERROR_COLUMN),
    ]


def unplaced_records(df: DataFrame, plan: WatermarkPlan) -> DataFrame:
    """``df``'s records that cannot be placed (a null event time, arrival or channel),
    as :func:`record_columns` gives them: no watermarks, not late, and the reason."""
    from pyspark.sql import functions as F

    none = F.lit(None).cast("bigint")
    reason = error_reason(plan)
    return df.where(reason.isNotNull()).select(
        *record_columns(plan, df.columns, none, none, none, error=reason)
    )


def check_added_names(df: DataFrame) -> None:
    """No input column is named like one :func:`assign_watermarks` adds, or like
    another, the way the session compares names (before any job)."""
    check_not_added(df.columns, {"records": ADDED_COLUMNS}, key=name_key(df))
    check_distinct_columns(df, "assign_watermarks returns every column")


def apply_timeline(df: DataFrame, timeline: Timeline) -> DataFrame:
    """Each record with the watermarks in force when it arrived (stage 3)."""
    from pyspark.sql import functions as F

    plan = timeline.plan
    names = ["channel", "bucket", _CWM, _WM]
    if timeline.buckets is not None:
        table = timeline.buckets.select(["channel", "bucket", "channel_watermark", "watermark"])
        joined = join_buckets(df, plan, table.rename_columns(names))
    elif timeline.bucket_frame is not None:
        joined = join_bucket_frame(df, plan, timeline.bucket_frame.toDF(*names))
    else:  # no table made
        return read_by_arrival(df, timeline)
    ts, reason = plan.event_time.ticks(), error_reason(plan)
    return joined.select(*record_columns(plan, df.columns, F.col(_CWM), F.col(_WM), ts, reason))


def read_by_arrival(df: DataFrame, timeline: Timeline) -> DataFrame:
    """Stage 3 when a per-channel pass gave the records their channel watermark (a
    generator that emits on records, or the records path): they read the combined
    watermark by arrival (:func:`floodmark.spark.lookup.with_in_force`)."""
    from pyspark.sql import functions as F

    plan = timeline.plan
    if timeline.records is None or (bucket_slots(timeline) == 0 and not timeline.record_driven):
        # no placeable record
        placed = df.where(F.lit(False)).select("*", F.lit(None).cast("bigint").alias(_CWM))
        looked = placed.select("*", F.lit(None).cast("bigint").alias(_WM))
    else:
        placed = timeline.records.withColumnRenamed("channel_watermark", _CWM)
        placed = placed.select("*", plan.arrival.ticks().alias(_ARRIVAL))
        looked = with_in_force(placed, {_WM: timeline}, _ARRIVAL).drop(_ARRIVAL)
    ts = plan.event_time.ticks()
    good = looked.select(*record_columns(plan, df.columns, F.col(_CWM), F.col(_WM), ts))
    bad = unplaced_records(df, plan)
    return good.unionByName(bad)


@without_call_sites
def assign_watermarks(
    df: DataFrame,
    strategy: WatermarkStrategy,
    *,
    channel: str,
    arrival: str | None = None,
    event_time: str | None = None,
    emit_interval: Duration = DEFAULT_EMIT_INTERVAL,
    event_time_unit: str | None = None,
    arrival_unit: str | None = None,
    source_parallelism: int | None = None,
    topic: str | None = None,
    end_of_input: str = "together",
) -> DataFrame:
    """Flink's watermarks for every record of ``df``.

    Each channel (e.g. a Kafka partition) runs its own generator over its records in
    arrival order, emitting periodically every ``emit_interval`` of arrival time; a
    per-channel valve combines them (minimum over active channels, idleness, rejoin
    only when caught up), exactly as Flink 2.3.0 does.

    Args:
        df: the events.
        strategy: a :class:`floodmark.WatermarkStrategy`, e.g.
            ``WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=5))
            .with_idleness(timedelta(minutes=1))``.
        channel: the column naming each record's input channel (integer or string).
        arrival: the column holding when each record arrived (processing time, e.g. the
            Kafka broker timestamp): it orders the records and drives the periodic
            emission and idleness clocks. Without it, the row order within each channel
            is the arrival (one row = one tick = 1 ms; see ``floodmark.spark.arrival``)
            and the rows get an ``arrival_index`` column.
        event_time: the event-time column; defaults to the strategy's
            ``with_timestamp_assigner`` column.
        emit_interval: Flink's ``autoWatermarkInterval`` (200 ms by default).
        event_time_unit: unit of an integer event-time column (default ``"ms"``), or
            the ticks a timestamp one is read in (default ``"us"``; docs/spark.md,
            "Columns and units").
        arrival_unit: the same for the arrival column.
        source_parallelism: read the channels as Kafka partition numbers spread over
            this many source subtasks, as Flink's Kafka source assigns them (each
            subtask combines its partitions with Flink's multiplexer, the valve
            combines the subtasks; ``docs/semantics.md``). None (default): one subtask
            per channel. Periodic strategies only.
        topic: the Kafka topic name the partitions' start subtask is hashed from
            (``((topic.hashCode() * 31) & 0x7FFFFFFF) % source_parallelism``); default
            start subtask 0.
        end_of_input: ``"together"`` (default: a slice of an ongoing stream, every
            channel ends after the whole input) or ``"per_channel"`` (data that truly
            ends per partition: a channel's watermark becomes ``MAX`` right after its
            own last record, at the first periodic emission that sees it).

    Returns:
        ``df`` with four more columns: ``channel_watermark`` (the record's channel
        watermark in force when it arrived), ``watermark`` (the combined watermark in
        force when it arrived), ``is_late`` (``event time <= watermark``) and ``error``
        (why a row could not be placed: ``null_event_time``, ``null_arrival`` or
        ``null_channel``; null otherwise). Watermarks are in the event-time column's
        type; null means "no watermark yet" for timestamp columns. The result may read
        frames cached while it was built, which stay cached for it: without
        ``arrival``, the input with its row-order arrival (every job must see the same
        order); with a generator that emits on records, the per-channel pass's output;
        where the per-(channel, bucket) table is large (over 2^19 rows) and the
        records path is not taken, its channel watermarks.
        ``spark.catalog.clearCache()`` releases them once the result is written (with
        every other cache of the session).
    """
    df, plan = make_plan(
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
    with ordered_input_released(df, arrival):  # kept for the result, unless this fails
        check_added_names(df)
        return apply_timeline(df, compute_timeline(df, plan, channel_watermarks=True))


@without_call_sites
def watermark_timeline(
    df: DataFrame,
    strategy: WatermarkStrategy,
    *,
    channel: str,
    arrival: str | None = None,
    event_time: str | None = None,
    emit_interval: Duration = DEFAULT_EMIT_INTERVAL,
    event_time_unit: str | None = None,
    arrival_unit: str | None = None,
    source_parallelism: int | None = None,
    topic: str | None = None,
    end_of_input: str = "together",
) -> DataFrame:
    """The combined watermark timeline: one row per change, with ``time`` (arrival),
    ``watermark``, ``status`` (``active``/``idle``) and ``min_channel`` (the channel
    holding the minimum, i.e. the one time waits for). Arguments as in
    :func:`assign_watermarks`."""
    df, plan = make_plan(
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
    with ordered_input_released(df, arrival, on_success=True):
        timeline = compute_timeline(df, plan)
        timeline.unpersist()
        return timeline.to_dataframe(df.sparkSession)
