"""``StreamingWatermarks``: each record of a live query with its watermarks, batch after
batch, and the combined timeline."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from floodmark.spark.assign import (
    ERROR_COLUMN,
    check_added_names,
    record_columns,
    unplaced_records,
)
from floodmark.spark.columns import TimeColumn
from floodmark.spark.lookup import join_buckets
from floodmark.spark.plan import WatermarkPlan, valid_rows
from floodmark.spark.streaming.frontier import (
    ARRIVAL,
    TS,
    EngineState,
    Segment,
    advance,
    bucket_rows,
    processed_by,
    with_ticks,
)
from floodmark.spark.streaming.handler import (
    DEFAULT_ALLOWANCE,
    BatchHandler,
    BatchResult,
    pending_rows,
    save_engine,
    save_pending,
)
from floodmark.spark.streaming.state import StateStore
from floodmark.spark.timeline import ticks_frame
from floodmark.strategy import DEFAULT_EMIT_INTERVAL, WatermarkStrategy
from floodmark.time import Duration

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_CWM, _WM = "__fm_st_cwm", "__fm_st_wm"


def stamped_plan(plan: WatermarkPlan) -> WatermarkPlan:
    """The plan reading the hidden re-stamped arrival (ticks) as the arrival column."""
    return dataclasses.replace(plan, arrival=TimeColumn(ARRIVAL, "integer", plan.arrival.unit))


def batch_rows(
    batch: DataFrame,
    plan: WatermarkPlan,
    state: EngineState,
    store: StateStore,
    previous: int | None,
) -> DataFrame:
    """The batch's rows (ticks, re-stamped arrival; null where they cannot be placed)
    and the rows committed batch ``previous`` held back."""
    fresh = with_ticks(batch, plan, state.frontier)
    pending = pending_rows(store, previous, state, fresh)
    return fresh if pending is None else fresh.unionByName(pending)


@dataclasses.dataclass(frozen=True)
class Advanced:
    """One batch's watermark stages: ``rows``, the placeable rows (with the held back
    ones); ``segment``, up to the new frontier (its state saved; ``segment.pending``
    rows wait for a later batch); ``unplaced``, how many of the batch's rows the
    watermark stages cannot place (null event time, arrival or channel)."""

    rows: DataFrame
    segment: Segment
    unplaced: int


def advance_batch(
    handler: BatchHandler,
    batch: DataFrame,
    batch_id: int,
    plan: WatermarkPlan,
    state: EngineState,
    store: StateStore,
    inspect: Callable[[pa.Table], None] | None = None,
) -> Advanced:
    """The watermark stages of one batch (:class:`Advanced`). ``inspect`` sees the
    batch's per-(channel, bucket) rows first (and may refuse them)."""
    previous = store.last_before(batch_id)
    every = batch_rows(batch, plan, state, store, previous)
    table, unplaced = bucket_rows(every, plan)
    rows = every.where(valid_rows(plan))
    if inspect is not None:
        inspect(table)
    with handler.clock("driver"):
        segment = advance(
            table,
            plan,
            state,
            handler.allowance_ticks(plan),
            emissions=handler.emissions,
            known=handler.channels,
        )
    handler.kill("after_timeline", batch_id)

    def pending() -> None:
        with handler.clock("state"):
            save_pending(store, batch_id, rows, segment)

    handler.background.start(pending)
    return Advanced(rows, segment, unplaced)


def processed(rows: DataFrame, segment: Segment) -> DataFrame:
    """The rows up to the new frontier."""
    from pyspark.sql import functions as F

    frontier = segment.state.frontier
    if frontier is None:
        return rows.where(F.lit(False))
    return rows.where(processed_by(F.col(ARRIVAL), F.lit(frontier)))


def in_force(
    rows: DataFrame,
    plan: WatermarkPlan,
    segment: Segment,
    watermark: str,
    channel_watermark: str | None = None,
) -> DataFrame:
    """The rows up to the new frontier, each with the combined watermark in force at
    its (re-stamped) arrival as ``watermark`` and, when named, its channel's own as
    ``channel_watermark`` (ticks), read from the segment's per-(channel, bucket) table."""
    renamed = {"channel": "channel", "bucket": "bucket", "watermark": watermark}
    if channel_watermark is not None:
        renamed["channel_watermark"] = channel_watermark
    table = segment.buckets.select(list(renamed)).rename_columns(list(renamed.values()))
    return join_buckets(processed(rows, segment), stamped_plan(plan), table)


def timeline_frame(batch: DataFrame, plan: WatermarkPlan, segment: Segment) -> DataFrame:
    """The batch's segment of the combined timeline (``time``, ``watermark``,
    ``status``, ``min_channel``), in the input's types."""
    table = segment.timeline.select(["time", "watermark", "status", "min_channel"])
    return _in_input_types(batch, plan, table, "min_channel")


def emissions_frame(batch: DataFrame, plan: WatermarkPlan, segment: Segment) -> DataFrame:
    """Every channel's own output rows of the batch (``channel``, ``time``, ``kind``
    in ``watermark``/``idle``/``active``, ``watermark``: null for ``idle`` and
    ``active``), in the input's types."""
    return _in_input_types(batch, plan, segment.emissions, "channel")


def write_segment(
    handler: Any,
    batch: DataFrame,
    plan: WatermarkPlan,
    segment: Segment,
    batch_id: int,
    result: Any,
    *,
    timeline: bool,
) -> None:
    """Writes the batch's segment of the combined timeline (if ``timeline``) and, if the
    handler asks for them, the channels' emissions, through ``handler.write`` (an
    empty one known from the driver's table)."""
    frames = {"timeline": (timeline, timeline_frame, segment.timeline)}
    frames["emissions"] = (handler.emissions, emissions_frame, segment.emissions)
    for kind, (wanted, frame, table) in frames.items():
        if wanted:
            handler.write(
                kind,
                functools.partial(frame, batch, plan, segment),
                batch_id,
                result,
                empty=not table.num_rows,
            )


def _in_input_types(
    batch: DataFrame, plan: WatermarkPlan, table: pa.Table, channel: str
) -> DataFrame:
    """A driver table as a DataFrame in the input's types (its ``channel`` column in
    the channel column's type)."""
    from pyspark.sql.pandas.types import to_arrow_type

    channel_type = to_arrow_type(batch.schema[plan.channel].dataType)
    index = table.schema.get_field_index(channel)
    table = table.set_column(index, channel, table.column(channel).cast(channel_type))
    return ticks_frame(batch.sparkSession, plan, table)


def progress(segment: Segment, plan: WatermarkPlan) -> dict[str, Any]:
    """The watermark part of a batch's progress summary (JSON-ready)."""
    state = segment.state
    return {
        "frontier": state.frontier,
        "watermark": segment.watermark,
        "min_channel": segment.min_channel,
        "idle_channels": segment.idle,
        "channels": len(state.channels),
        "restamped": segment.restamped,
        "pending": segment.pending,
        "timeline_rows": segment.timeline.num_rows,
        "arrival_unit": plan.arrival.unit,
        "event_time_unit": plan.event_time.unit,
    }


class StreamingWatermarks(BatchHandler):
    """Flink's watermarks for every record of a live query (``foreachBatch``).

    Each micro-batch writes, through ``outputs``, its records up to the frontier with
    ``channel_watermark``, ``watermark`` (the combined watermark in force when the
    record arrived), ``is_late`` and ``error``, as :func:`floodmark.spark.assign_watermarks`
    gives them for the same rows at rest (kind ``records``), and its segment of the
    combined timeline (kind ``timeline``).

    Args:
        strategy: a periodic watermark strategy.
        channel: the input-channel column (Kafka ``partition``).
        arrival: the arrival column (the Kafka record ``timestamp``).
        event_time: the event-time column (default: the strategy's timestamp column).
        state_location: a folder for floodmark's state (any Hadoop file system path),
            one per query, next to its checkpoint.
        outputs: :class:`~floodmark.spark.streaming.ParquetOutputs` or a callable
            ``(kind, df, batch_id)`` (see :mod:`floodmark.spark.streaming.outputs`).
        emit_interval: periodic emission interval (200 ms).
        event_time_unit, arrival_unit: units of integer time columns (``ms``), or the
            ticks timestamp ones are read in (``us``; docs/spark.md, "Columns and units").
        allowance: how far behind the latest arrival the frontier stays (1 s): the skew
            allowed between channels (see :mod:`.frontier`).
        channels: the channel values known up front (a topic's partitions, e.g.
            ``range(1000)``): they join the valve at the first batch, as Flink's source
            assigns a topic's splits when it starts. A channel not named joins when a
            batch first has a row of it (docs/streaming.md, "New partitions").
        emissions: also write every channel's own watermark output of each batch (kind
            ``emissions``: ``channel``, ``time``, ``kind``, ``watermark``); part of the
            state's layout.
        cache_batch: cache each micro-batch while its passes read it (None: unless it
            comes from files, which each pass reads again for less; see
            docs/streaming.md, "Reading the batch").
        on_progress: called with the progress summary of each batch this handler
            commits (a batch committed before a crash, which Spark runs again, only
            publishes its outputs: it is not reported again).
    """

    def __init__(
        self,
        strategy: WatermarkStrategy,
        *,
        channel: str,
        arrival: str,
        state_location: str,
        outputs: Any,
        event_time: str | None = None,
        emit_interval: Duration = DEFAULT_EMIT_INTERVAL,
        event_time_unit: str | None = None,
        arrival_unit: str | None = None,
        allowance: Duration = DEFAULT_ALLOWANCE,
        emissions: bool = False,
        channels: Iterable[Any] | None = None,
        cache_batch: bool | None = None,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        super().__init__(
            strategy,
            channel=channel,
            arrival=arrival,
            event_time=event_time,
            state_location=state_location,
            outputs=outputs,
            emit_interval=emit_interval,
            event_time_unit=event_time_unit,
            arrival_unit=arrival_unit,
            allowance=allowance,
            on_progress=on_progress,
            channels=channels,
            emissions=emissions,
            cache_batch=cache_batch,
        )

    def settings(self, plan: WatermarkPlan) -> dict[str, Any]:
        return {}

    def check(self, events: DataFrame) -> WatermarkPlan:
        plan = self.watermark_plan(events)
        check_added_names(events)
        return plan

    def run(
        self,
        batch: DataFrame,
        batch_id: int,
        plan: WatermarkPlan,
        state: EngineState,
        store: StateStore,
    ) -> BatchResult:
        from pyspark.sql import functions as F

        result = BatchResult({})
        advanced = advance_batch(self, batch, batch_id, plan, state, store)
        rows, segment = advanced.rows, advanced.segment
        looked_up = in_force(rows, plan, segment, _WM, _CWM)
        columns = record_columns(plan, batch.columns, F.col(_CWM), F.col(_WM), F.col(TS))
        placed = looked_up.select(*columns)
        unplaced = unplaced_records(batch, plan)
        records = placed.unionByName(unplaced).persist()
        try:
            counts = records.agg(
                F.count(F.lit(1)).alias("rows"),
                F.sum(F.col("is_late").cast("long")).alias("late"),
                F.sum(F.col(ERROR_COLUMN).isNotNull().cast("long")).alias("errors"),
            ).collect()[0]
            self.write("records", records, batch_id, result, empty=not counts["rows"])
        finally:
            records.unpersist()
        write_segment(self, batch, plan, segment, batch_id, result, timeline=True)
        self.kill("after_outputs", batch_id)
        late, errors = int(counts["late"] or 0), int(counts["errors"] or 0)
        new = dataclasses.replace(
            segment.state, late=state.late + late, dropped=state.dropped + errors
        )
        with self.clock("state"):
            save_engine(store, batch_id, new, batch)
        result.summary = {
            **progress(segment, plan),
            "records": int(counts["rows"]),
            "late": late,
            "errors": errors,
            "late_total": new.late,
            "errors_total": new.dropped,
        }
        return result


__all__ = ["StreamingWatermarks"]
