"""The watermark stages' plan: columns and parameters checked and resolved before any
job, the predicates every stage shares (which rows can be placed, why not), and the
emission grid's bucket of a record.

Why a plan: every public function checks its arguments against the schema first, so a
mistake is reported before Spark runs anything, and the stages after it read resolved
values (ticks, units, column kinds) instead of re-deriving them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from floodmark.exceptions import InvalidParameterError, SchemaError
from floodmark.spark.arrival import ROW_ARRIVAL_UNIT
from floodmark.spark.columns import (
    TimeColumn,
    as_arrow,
    key_column,
    marker_column,
    name_key,
    quote,
    time_column,
)
from floodmark.strategy import WatermarkStrategy, event_time_column
from floodmark.time import Duration, interval_ticks
from floodmark.timeline import (
    PERIODIC_KINDS,
    check_partition_numbers,
    check_topology,
    check_topology_strategy,
    strategy_in_ticks,
)
from floodmark.vocabulary import NULL_REASONS, column_name

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


@dataclass(frozen=True)
class WatermarkPlan:
    """Everything the watermark stages need, resolved and checked against the schema."""

    event_time: TimeColumn
    arrival: TimeColumn
    channel: str
    interval: int
    strategy: WatermarkStrategy  # durations already in ticks
    marker: TimeColumn | None = None  # a punctuated strategy's watermark column
    #: The topology (``docs/semantics.md``): the channels as Kafka partitions over this
    #: many source subtasks (None: one subtask per channel), the topic their start
    #: index is hashed from, and whether each channel ends after its own last record.
    source_parallelism: int | None = None
    topic: str | None = None
    end_of_input: str = "together"

    def bucket(self, arrival_ticks: str) -> Column:
        """The grid bucket of each record, from the column ``arrival_ticks`` holding its
        arrival in ticks: ``ceil(arrival / interval)`` in exact integer arithmetic (no
        overflow, no float), the SQL form of the timeline builder's ``bucket_of`` (a
        test checks that they agree). A record of bucket ``k`` is first seen by the
        emission at ``k * interval``."""
        from pyspark.sql import functions as F

        a, i = quote(arrival_ticks), self.interval
        return F.expr(f"({a} div {i}) + CASE WHEN {a} % {i} > 0 THEN 1 ELSE 0 END")


def require_periodic(strategy: WatermarkStrategy, where: str) -> None:
    """Refuses a generator that emits on records where only the periodic ones run
    (before its columns are checked: no column makes it run there)."""
    if strategy.kind not in PERIODIC_KINDS:
        raise InvalidParameterError(
            "strategy",
            f"{where} runs the periodic strategies "
            f"({', '.join(PERIODIC_KINDS)}, with or without idleness), not "
            f"{strategy.kind!r}: use the batch functions (floodmark.spark) for it",
        )


def check_arguments(
    df: DataFrame,
    event_time: str | None,
    channel: str,
    arrival: str | None,
    arrival_unit: str | None,
) -> None:
    """The call's own arguments, before the columns are looked at."""
    if not (hasattr(df, "sparkSession") and hasattr(df, "schema")):
        kind = f"{type(df).__module__.split('.')[0]}.{type(df).__qualname__}"  # pandas.DataFrame
        raise InvalidParameterError("df", f"expected a pyspark DataFrame, got {kind}")
    for parameter, name in (("event_time", event_time), ("channel", channel), ("arrival", arrival)):
        if name is not None or parameter == "channel":
            column_name(name, parameter)
    if arrival is None and arrival_unit is not None:
        raise InvalidParameterError(
            "arrival_unit",
            "it is the unit of the arrival column, and "
            "no arrival= was given (the row order within each channel is the arrival "
            f"then, in {ROW_ARRIVAL_UNIT} ticks); pass arrival= or drop arrival_unit",
        )
    key = name_key(df)
    reserved = [c for c in df.columns if key(c).startswith("__fm_")]
    if reserved:
        raise SchemaError(
            reserved[0],
            f"column {reserved[0]!r}: names starting with __fm_ are floodmark's working "
            "columns; rename it first",
        )


def check_topology_input(
    df: DataFrame,
    channel: str,
    resolved: WatermarkStrategy,
    source_parallelism: int | None,
    end_of_input: str,
) -> None:
    """The topology options need a periodic strategy, and ``source_parallelism`` Kafka
    partition numbers as channels (the rules of :mod:`floodmark.timeline`)."""
    check_topology_strategy(resolved.kind, source_parallelism, end_of_input)
    if source_parallelism is not None:
        dtype = key_column(df, channel, "channel")
        check_partition_numbers(as_arrow(dtype), channel, dtype.simpleString())


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
    source_parallelism: int | None = None,
    topic: str | None = None,
    end_of_input: str = "together",
    live: bool = False,
) -> tuple[DataFrame, WatermarkPlan]:
    """Check the columns and parameters (before any job runs) and resolve them; ``df``
    must be at rest unless ``live`` (a live query's handler checks its stream).

    Returns ``df`` (with the default arrival column added when ``arrival`` is None, see
    :mod:`floodmark.spark.arrival`) and the plan."""
    from floodmark.spark.arrival import ordered_input_released, with_default_arrival

    check_arguments(df, event_time, channel, arrival, arrival_unit)
    if not live and df.isStreaming:
        raise InvalidParameterError(
            "df",
            "a streaming DataFrame: the batch functions read data at rest; in a live "
            "query use floodmark.spark.streaming (StreamingWindows, StreamingWatermarks) "
            "with writeStream.foreachBatch",
        )
    source_parallelism = check_topology(source_parallelism, topic, end_of_input)
    given = arrival
    df, arrival, arrival_unit = with_default_arrival(df, arrival, channel, arrival_unit)
    with ordered_input_released(df, given):  # a rejected call keeps no cache
        ev = time_column(df, event_time_column(strategy, event_time), event_time_unit, "event_time")
        arr = time_column(df, arrival, arrival_unit, "arrival")
        key_column(df, channel, "channel")
        interval = interval_ticks(emit_interval, arr.unit)
        # Every kind runs on Spark: the periodic ones from per-(channel, bucket) rows
        # (spark/timeline.py), the ones that emit on records per channel (per_channel.py).
        resolved = strategy_in_ticks(strategy, ev.unit, arr.unit)
        marker = None
        if resolved.marker_column is not None:
            marker = marker_column(df, resolved.marker_column, ev)
        check_topology_input(df, channel, resolved, source_parallelism, end_of_input)
        return df, WatermarkPlan(
            ev,
            arr,
            channel,
            interval,
            resolved,
            marker,
            source_parallelism=source_parallelism,
            topic=topic,
            end_of_input=end_of_input,
        )


def valid_rows(plan: WatermarkPlan) -> Column:
    """Rows the watermark stages can place: event time, arrival and channel not null."""
    from pyspark.sql import functions as F

    return (
        F.col(quote(plan.event_time.name)).isNotNull()
        & F.col(quote(plan.arrival.name)).isNotNull()
        & F.col(quote(plan.channel)).isNotNull()
    )


def error_reason(plan: WatermarkPlan) -> Column:
    """Why a row cannot be placed (one of :data:`floodmark.vocabulary.NULL_REASONS`;
    null when it can)."""
    from pyspark.sql import functions as F

    columns = (plan.event_time.name, plan.arrival.name, plan.channel)
    reason = F.when(F.col(quote(columns[0])).isNull(), F.lit(NULL_REASONS[0]))
    for column, why in zip(columns[1:], NULL_REASONS[1:], strict=True):
        reason = reason.when(F.col(quote(column)).isNull(), F.lit(why))
    return reason


__all__ = [
    "WatermarkPlan",
    "error_reason",
    "make_plan",
    "require_periodic",
    "valid_rows",
]
