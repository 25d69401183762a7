"""Stage 4: event-time windows, keyed, with allowed lateness and side outputs.

Tumbling windows, and sliding windows without gaps, with order-free aggregates, are
native Spark aggregations (:mod:`floodmark.spark.native_windows`). Everything else
runs the keyed Rust operator: the records are shuffled once by key into
``num_partitions`` partitions, sorted by arrival inside each, and streamed through one
Rust window operator per partition (``mapInArrow``): the operator is keyed, so one
instance serves every key of its partition, in arrival order, exactly as Flink's keyed
WindowOperator does. The compact timeline travels with the function; its watermark advances are
placed between the records by arrival time (an advance at time ``t`` comes after every
record with ``arrival <= t``). Only the columns the stage needs cross into Python:
keys, event time, arrival, channel and the aggregated values. The three outputs come
back packed and are cached once (see :mod:`floodmark.spark.packed`).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from floodmark.exceptions import InvalidParameterError
from floodmark.spark.arrival import ordered_input_released
from floodmark.spark.call_sites import without_call_sites
from floodmark.spark.columns import column_names, key_column, name_key, quote, value_column
from floodmark.spark.native_windows import candidate, native_outputs
from floodmark.spark.packed import pack, packed_schema, unpacked
from floodmark.spark.side_candidates import dropped_candidates, late_candidates
from floodmark.spark.timeline import (
    Timeline,
    compute_timeline,
    error_reason,
    make_plan,
    valid_rows,
)
from floodmark.spark.window_plan import ARRIVAL, REFIRE, TS, WindowPlan, agg_name, parse_aggs
from floodmark.strategy import WatermarkStrategy
from floodmark.time import Duration, to_ticks

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType


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


def output_schemas(plan: WindowPlan, sent: StructType) -> dict[str, StructType]:
    """The schema of each output kind as the runner emits it (ticks, not yet converted):
    results, and the late and dropped records with their watermark or reason."""
    from pyspark.sql.types import (
        BooleanType,
        DoubleType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    fields = {f.name: f.dataType for f in sent.fields}
    records = [StructField(c, fields[c]) for c in plan.sent_columns()]
    results = [StructField(k, fields[k]) for k in plan.keys]
    results += [StructField("window_start", LongType()), StructField("window_end", LongType())]
    for agg in plan.aggs:
        dtype: DataType
        if agg == "count":
            dtype = LongType()
        elif agg[0] == "mean":
            dtype = DoubleType()
        else:
            dtype = LongType() if plan.values[agg[1]] == "bigint" else DoubleType()
        results.append(StructField(agg_name(agg), dtype))
    results += [
        StructField("watermark", LongType()),
        StructField(REFIRE, BooleanType()),
        StructField("trigger_time", LongType()),
    ]
    return {
        "result": StructType(results),
        "late": StructType([*records, StructField("watermark", LongType())]),
        "dropped": StructType([*records, StructField("reason", StringType())]),
    }


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """The operator's output ``batch`` in its kind's output ``schema``."""
    cols = []
    for f in schema:
        if f.name == REFIRE:
            cols.append(pc.equal(batch.column("timing"), "late"))
        else:
            cols.append(batch.column(f.name).cast(f.type))
    return pa.record_batch(cols, schema=schema)


def make_runner(
    plan: WindowPlan,
    times: np.ndarray,
    wms: np.ndarray,
    schemas: Mapping[str, pa.Schema],
    names: Sequence[str],
) -> Any:
    """The function each partition runs: records in arrival order through one keyed
    Rust window operator, timeline advances interleaved by arrival time. The batches
    come with positional column names; ``names`` are the real ones."""
    window, keys, aggs, lateness, unit = (
        plan.window,
        plan.keys,
        plan.aggs,
        plan.lateness,
        (plan.wm.event_time.unit),
    )

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from floodmark.windows import WindowOperator

        op = WindowOperator(
            window,
            key=keys,
            event_time=TS,
            aggs=aggs,
            allowed_lateness=lateness,
            unit=unit,
            arrival=ARRIVAL,
        )
        j, empty = 0, None

        def emit(out: Any) -> Iterator[pa.RecordBatch]:
            for kind, b in (("result", out.results), ("late", out.late), ("dropped", out.dropped)):
                if b.num_rows:
                    yield from pack(kind, conform(b, schemas[kind]))

        for b in batches:
            b = b.rename_columns(names)
            if b.num_rows == 0:
                continue
            empty = b.slice(0, 0)
            arr = b.column(ARRIVAL).to_numpy()
            hi = int(np.searchsorted(times, arr[-1], side="left"))
            pos = np.searchsorted(arr, times[j:hi], side="right").astype(np.int64)
            adv = {"position": pos, "watermark": wms[j:hi], "time": times[j:hi]}
            yield from emit(op.process(b, adv))
            j = hi
        if empty is None:
            return
        if j < len(times):
            n = len(times) - j
            adv = {"position": np.zeros(n, np.int64), "watermark": wms[j:], "time": times[j:]}
            yield from emit(op.process(empty, adv))
        yield from emit(op.finish())

    return run


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
    emit_interval: Duration = timedelta(milliseconds=200),
    event_time_unit: str | None = None,
    arrival_unit: str | None = None,
    num_partitions: int | None = None,
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
        event_time_unit: unit of an integer event-time column (default ``"ms"``).
        arrival_unit: unit of an integer arrival column (default ``"ms"``).
        num_partitions: partitions of the keyed operator's shuffle (default: Spark's
            default parallelism); the native path's aggregation uses
            ``spark.sql.shuffle.partitions``.

    Returns:
        A :class:`WindowedOutput` with ``results``, ``late`` and ``dropped``.
    """
    from pyspark.sql import functions as F

    df, wm_plan = make_plan(
        df,
        strategy,
        event_time=event_time,
        channel=channel,
        arrival=arrival,
        emit_interval=emit_interval,
        event_time_unit=event_time_unit,
        arrival_unit=arrival_unit,
    )
    # The row-ordered input (no arrival column) stays cached for the outputs, unless
    # this fails; WindowedOutput.unpersist() releases it.
    with ordered_input_released(df, arrival):
        keys = column_names(key, "key")
        if not keys:
            raise InvalidParameterError("invalid parameter `key`: give at least one key column")
        for k in keys:
            key_column(df, k, "key")
        parsed = parse_aggs(aggs)
        values = {a[1]: value_column(df, a[1], "aggs") for a in parsed if not isinstance(a, str)}
        lateness = to_ticks(allowed_lateness, wm_plan.event_time.unit, "allowed_lateness")
        if lateness < 0:
            raise InvalidParameterError(
                f"invalid parameter `allowed_lateness`: must be >= 0, got {allowed_lateness!r}"
            )
        plan = WindowPlan(
            wm_plan,
            window,
            keys,
            values,
            parsed,
            lateness,
            send_channel=channel not in keys and channel not in values,
        )
        check_window(window, wm_plan.event_time.unit)
        check_output_names(plan, df.columns, name_key(df))
        if num_partitions is not None:
            num_partitions = positive_int(num_partitions, "num_partitions")

        timeline = compute_timeline(df, wm_plan, event_range=candidate(plan))
        times, wms = timeline.advances()
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

        sent = df.where(valid_rows(wm_plan)).select(
            *[F.col(quote(k)) for k in keys],
            wm_plan.event_time.ticks().alias(TS),
            wm_plan.arrival.ticks().alias(ARRIVAL),
            *([F.col(quote(channel))] if plan.send_channel else []),
            *[F.col(quote(v)).cast(t).alias(v) for v, t in values.items() if v not in keys],
        )
        schemas = output_schemas(plan, sent.schema)
        from pyspark.sql.pandas.types import to_arrow_schema

        arrow_schemas = {kind: to_arrow_schema(schema) for kind, schema in schemas.items()}
        parts = num_partitions or default_partitions(df.sparkSession)
        # The documented order (arrival, channel, event time, key, first/last values);
        # the channel is sent unless it is a key (as a value column, if it is one).
        ordered = sent.repartition(parts, *[F.col(quote(k)) for k in keys]).sortWithinPartitions(
            ARRIVAL,
            *([quote(channel)] if channel not in keys else []),
            TS,
            *map(quote, keys),
            *map(quote, plan.tie_values()),
        )
        # mapInArrow resolves every column by name, reading a dot as a struct field: the
        # runner gets positional names and restores the real ones.
        names = ordered.columns
        runner = make_runner(plan, times, wms, arrow_schemas, names)
        positional = ordered.toDF(*[f"__fm_c{i}" for i in range(len(names))])
        cached = positional.mapInArrow(runner, packed_schema()).persist()
        late = unpacked(cached, "late", schemas["late"])
        maybe_late = late_candidates(df.sparkSession, plan, timeline, times, wms)
        dropped = unpacked(cached, "dropped", schemas["dropped"])
        return WindowedOutput(
            results=results_frame(unpacked(cached, "result", schemas["result"]), plan),
            late=side_frame(matched(df, plan, late, "watermark", maybe_late), plan, df, "late"),
            dropped=side_frame(
                matched(df, plan, dropped, "reason", dropped_candidates(plan)), plan, df, "dropped"
            ).unionByName(errors_frame(df, plan)),
            timeline=timeline,
            cached=cached,
            ordered_input=df if arrival is None else None,
        )


def default_partitions(spark: SparkSession) -> int:
    """Spark's default parallelism; a Spark Connect session has no ``SparkContext`` to
    ask (its attribute error is an ``AttributeError``), so there the SQL shuffle
    partitions."""
    context = getattr(spark, "sparkContext", None)
    if context is not None:
        return int(context.defaultParallelism)
    return int(spark.conf.get("spark.sql.shuffle.partitions") or 200)


def check_window(window: Any, unit: str) -> None:
    """Fail early (before any job) on an invalid window assigner."""
    try:
        window.assign_windows(0, unit=unit)
    except AttributeError:
        raise InvalidParameterError(
            "invalid parameter `window`: expected TumblingEventTimeWindows.of(...), "
            "SlidingEventTimeWindows.of(...) or EventTimeSessionWindows.with_gap(...), "
            f"got {type(window).__name__}"
        ) from None
    except InvalidParameterError as err:
        raise InvalidParameterError(
            f"invalid parameter `window`: {err} (in whole ticks of the event-time unit "
            f"{unit!r}: a duration is truncated to it, so one under a tick is 0)"
        ) from None


def results_frame(results: DataFrame, plan: WindowPlan) -> DataFrame:
    from pyspark.sql import functions as F

    ev, arr = plan.wm.event_time, plan.wm.arrival
    timing = F.when(F.col(REFIRE), F.lit("late")).otherwise(F.lit("on_time"))
    return results.select(
        *[F.col(quote(k)) for k in plan.keys],
        ev.from_ticks(F.col("window_start")).alias("window_start"),
        ev.from_ticks(F.col("window_end")).alias("window_end"),
        *[F.col(quote(agg_name(a))) for a in plan.aggs],
        ev.from_ticks(F.col("watermark")).alias("watermark"),
        timing.alias("timing"),
        arr.from_ticks(F.col("trigger_time")).alias("fired_at"),
    )


def matched(
    df: DataFrame, plan: WindowPlan, rows: DataFrame, extra: str, candidates: Column | None
) -> DataFrame:
    """The input rows, every column, that the keyed operator emitted in ``rows`` (its
    late or dropped records, carrying only the columns it was sent), with ``extra``
    (the watermark they met, or the reason). A record's fate depends only on its keys,
    event time, arrival and channel: records equal in those are adjacent in the
    runner's order (arrival, channel, event time, key), meet the same watermark, and a
    late one leaves the window state as it was; so joining the input on them (keys
    null-safe) finds exactly the rows the operator emitted, each once. ``candidates``
    (over ``TS`` and ``ARRIVAL``) narrows the input first to rows that can be emitted
    (:mod:`.side_candidates`), so that only those are shuffled for the join."""
    from pyspark.sql import functions as F

    wm = plan.wm
    names = [*plan.keys, TS, ARRIVAL, *([wm.channel] if wm.channel not in plan.keys else [])]
    types = {f.name: f.dataType for f in rows.schema.fields}
    emitted = rows.select(
        *[F.col(quote(n)).alias(f"__fm_m{i}") for i, n in enumerate(names)],
        F.col(extra).alias("__fm_extra"),
    ).distinct()
    records = df.where(valid_rows(wm)).select(
        "*", wm.event_time.ticks().alias(TS), wm.arrival.ticks().alias(ARRIVAL)
    )
    if candidates is not None:
        records = records.where(candidates)
    same = [
        F.col(quote(n)).cast(types[n]).eqNullSafe(F.col(f"__fm_m{i}")) for i, n in enumerate(names)
    ]
    joined = records.join(emitted, functools.reduce(operator.and_, same), "inner")
    return joined.select(*[F.col(quote(c)) for c in df.columns], F.col("__fm_extra").alias(extra))


def positive_int(value: object, parameter: str) -> int:
    """An integer >= 1 (numpy integers too); a clear error for anything else."""
    try:
        number = None if isinstance(value, bool) else operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        number = None
    if number is None or number < 1:
        raise InvalidParameterError(
            f"invalid parameter `{parameter}`: expected an int >= 1 or None, got {value!r}"
        )
    return number


def check_output_names(plan: WindowPlan, columns: Sequence[str], key: Callable[[str], str]) -> None:
    """Each output's columns have distinct names, compared by ``key`` (:func:`name_key`:
    Spark resolves names without regard to case by default, and a write fails on a
    repeated one): before any job. Late and dropped rows carry every input column."""
    results = [
        *plan.keys,
        "window_start",
        "window_end",
        *[agg_name(a) for a in plan.aggs],
        "watermark",
        "timing",
        "fired_at",
        "trigger_time",  # the operator's names, before results_frame renames them
        "trigger_position",
    ]
    for output, names in (
        ("results", results),
        ("late", [*columns, "watermark"]),
        ("dropped", [*columns, "reason"]),
    ):
        seen: dict[str, str] = {}
        for name in names:
            if key(name) in seen:
                first = seen[key(name)]
                same = repr(name) if first == name else f"{first!r} and {name!r}"
                if output == "results":
                    hint = (
                        "a key or value column named like a column window_aggregate adds "
                        "(window_start, window_end, watermark, timing, fired_at, the "
                        "aggregates' names; trigger_time and trigger_position inside) must "
                        "be renamed first, and an aggregate or key given only once"
                    )
                else:
                    hint = (
                        "late and dropped rows carry every input column, plus watermark "
                        "(late) or reason (dropped): rename or drop the input's column first"
                    )
                raise InvalidParameterError(
                    f"invalid parameters: the {output} output would have two columns named "
                    f"{same}; {hint}"
                )
            seen[key(name)] = name


def side_frame(rows: DataFrame, plan: WindowPlan, df: DataFrame, kind: str) -> DataFrame:
    """Late or dropped rows: every input column, in the input's order and types, and
    the watermark they met (``late``, from ticks) or the reason (``dropped``)."""
    from pyspark.sql import functions as F

    extra = (
        plan.wm.event_time.from_ticks(F.col("watermark")).alias("watermark")
        if kind == "late"
        else F.col("reason")
    )
    return rows.select(*[F.col(quote(c)) for c in df.columns], extra)


def errors_frame(df: DataFrame, plan: WindowPlan) -> DataFrame:
    """Rows the watermark stages cannot place, every column, with the reason (never
    lost)."""
    from pyspark.sql import functions as F

    cols = [F.col(quote(c)) for c in df.columns]
    return df.where(~valid_rows(plan.wm)).select(*cols, error_reason(plan.wm).alias("reason"))
