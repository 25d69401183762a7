"""The whole event-time pipeline over one in-memory table, record by record.

This is floodmark without Spark: every channel's generator sees every record (not the
per-bucket maxima the Spark stages use), the valve combines the channels, and one keyed
window operator takes all records in arrival order. It is the reference the Spark
pipeline must equal row for row, and a fast way to run small data.

The periodic strategies run through :class:`floodmark.timeline.TimelineBuilder`, one
row per record; the strategies that emit on records (punctuated, user generators) run
per channel through :func:`floodmark.drive`, their streams merged by the builder.

Columns hold ticks (int64); durations are ``timedelta`` (converted with the units) or
ticks. Records are processed in the order ``(arrival, channel, event time, keys...)``
(:func:`floodmark.vocabulary.processing_order`), the same order the Spark stages use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from floodmark._core import element_late
from floodmark.arrays import (
    as_table,
    check_takeable,
    field_index,
    filter_rows,
    take_rows,
    time_column,
    time_ticks,
    to_int64_array,
    typed_nulls,
    without_view,
)
from floodmark.column_kinds import key_type, marker_kind, tick_unit, time_kind, value_type
from floodmark.exceptions import InvalidInputError, InvalidParameterError
from floodmark.strategy import DEFAULT_EMIT_INTERVAL, WatermarkStrategy, event_time_column
from floodmark.time import I64_MIN, Duration, interval_ticks
from floodmark.timeline import (
    PERIODIC_KINDS,
    TimelineBuilder,
    channel_index,
    check_partition_numbers,
    check_topology,
    check_topology_strategy,
    in_force_at,
    strategy_in_ticks,
    subtasks_of,
)
from floodmark.vocabulary import (
    DROP_REASON,
    NULL_REASONS,
    SIDE_OUTPUT_COLUMNS,
    WATERMARK_COLUMNS,
    check_not_added,
    column_name,
    column_names,
    parse_aggs,
    tie_values,
)
from floodmark.vocabulary import processing_order as processing_order_of
from floodmark.watermarks import drive


@dataclass
class Replay:
    """What :func:`replay` returns.

    Attributes:
        records: the input rows (valid ones, in processing order) with
            ``channel_watermark``, ``watermark`` and ``is_late``.
        timeline: the combined timeline (``time``, ``watermark``, ``status``,
            ``min_channel`` as a channel value).
        results, late: the window outputs (empty without a window).
        dropped: the rows that could not be placed (a null event time, arrival or
            channel), with a ``reason`` as the Spark functions give it, then the window
            operator's own (e.g. ``no_window``).
    """

    records: pa.Table
    timeline: pa.Table
    results: pa.Table
    late: pa.Table
    dropped: pa.Table


#: Stand-ins for the arrival and the event time in the processing order (never a
#: column name: the names are looked up in the table only for the other columns).
_ARRIVAL_TICKS, _EVENT_TICKS = "\0arrival", "\0event_time"

#: Whether ``sort_indices`` takes a null placement per sort key (pyarrow >= 25).
_NULLS_PER_KEY = int(pa.__version__.split(".")[0]) >= 25


def processing_order(
    table: pa.Table,
    arrival: str,
    channel: str,
    event_time: str,
    keys: Sequence[str] = (),
    ties: Sequence[str] = (),
    units: tuple[str, str] | None = None,
) -> pa.Table:
    """Sort by :func:`floodmark.vocabulary.processing_order`, as Spark sorts: the
    order of every stage (``ties``: the aggregated value columns, first/last's first,
    :func:`floodmark.vocabulary.tie_values`). Given ``units`` (arrival's, event
    time's), timestamp arrival and event times sort as ticks of them, as the Spark
    stages read them: digits below the unit do not order the records. Nulls first; a
    float NaN after every number, as Spark orders it (Arrow would put it before them),
    by sorting on ``is_nan`` first."""
    table = as_table(table, "table")
    for name in (arrival, channel, event_time, *keys, *ties):
        field_index(table.schema, name)  # missing or twice: named
    # the two time columns apart from the same columns as keys or values, as in Spark
    arrival_unit, event_time_unit = units or (None, None)
    times = {_ARRIVAL_TICKS: (arrival, arrival_unit), _EVENT_TICKS: (event_time, event_time_unit)}
    columns: dict[str, pa.ChunkedArray | pa.Array] = {}
    for i, c in enumerate(processing_order_of(_ARRIVAL_TICKS, channel, _EVENT_TICKS, keys, ties)):
        if c in times:
            name, unit = times[c]
            value = (
                table[name]
                if unit is None
                else time_ticks(table[name].combine_chunks(), name, unit)
            )
        else:
            value = without_view(table[c])  # sorted as its large type
        kind = value.type
        if pa.types.is_dictionary(kind):  # pandas' categorical: ordered by its values
            value, kind = value.cast(kind.value_type), kind.value_type
        if pa.types.is_floating(kind):  # (Arrow sorts no float16: each as a float64)
            value = value.cast(pa.float64())
            columns[f"nan{i}"] = pc.is_nan(value)
        columns[f"v{i}"] = value
    keyed = pa.table(columns)
    if _NULLS_PER_KEY:
        order = pc.sort_indices(keyed, sort_keys=[(c, "ascending", "at_start") for c in columns])
    else:  # one placement for every key (deprecated since pyarrow 25)
        order = pc.sort_indices(
            keyed, sort_keys=[(c, "ascending") for c in columns], null_placement="at_start"
        )
    return take_rows(table, order)


def null_reasons(table: pa.Table, event_time: str, arrival: str, channel: str) -> pa.Table:
    """The rows the watermark stages cannot place (a null event time, arrival or
    channel), with the ``reason``, in the Spark functions' words."""
    invalid = pc.invert(valid_rows(table, event_time, arrival, channel))
    errors = filter_rows(table, invalid)
    columns = (event_time, arrival, channel)  # in the order of NULL_REASONS
    reason = pc.case_when(pc.make_struct(*[pc.is_null(errors[c]) for c in columns]), *NULL_REASONS)
    return errors.append_column(DROP_REASON, reason)


def valid_rows(table: pa.Table, event_time: str, arrival: str, channel: str) -> pa.ChunkedArray:
    """Rows with an event time, an arrival and a channel."""
    return pc.and_(
        pc.and_(pc.is_valid(table[event_time]), pc.is_valid(table[arrival])),
        pc.is_valid(table[channel]),
    )


def watermarks(
    strategy: WatermarkStrategy,
    channel: np.ndarray,
    num_channels: int,
    arrival: np.ndarray,
    event_time: np.ndarray,
    interval: int,
    marker: pa.Array | None = None,
    *,
    subtasks: list[int] | None = None,
    source_parallelism: int | None = None,
    per_channel_end: bool = False,
) -> tuple[np.ndarray, np.ndarray, pa.RecordBatch]:
    """``(channel watermark, combined watermark, timeline)`` of records in arrival
    order (``channel`` the index of each record's channel); ``strategy`` in ticks.
    ``subtasks``: each channel's source subtask; ``per_channel_end``: each channel's
    input ends after its last record (see :class:`TimelineBuilder`)."""
    if strategy.kind in PERIODIC_KINDS:
        ends = None
        if per_channel_end:
            last = np.full(num_channels, I64_MIN, dtype=np.int64)
            np.maximum.at(last, channel, arrival)
            probe = TimelineBuilder(strategy, 0, emit_interval=interval)
            ends = [probe.bucket_of(int(a)) for a in last]
        builder = TimelineBuilder(
            strategy,
            num_channels,
            emit_interval=interval,
            subtasks=subtasks,
            source_parallelism=source_parallelism,
            end_buckets=ends,
        )
        in_force = builder.push(channel, arrival, event_time)
        builder.finish()
        return (
            in_force.channel_watermark.to_numpy(zero_copy_only=False),
            in_force.watermark.to_numpy(zero_copy_only=False),
            builder.take_timeline(),
        )
    # (the topology options were refused for these strategies: check_topology_strategy)
    # Generators that emit on records: each channel through the driver, then the valve.
    channel_wm = np.full(len(arrival), I64_MIN, dtype=np.int64)
    builder = TimelineBuilder.for_emissions(num_channels)
    parts = []
    if len(arrival):
        start, until = int(arrival.min()), int(arrival.max())
        for c in range(num_channels):
            rows = np.flatnonzero(channel == c)
            try:
                res = drive(
                    strategy,
                    event_time[rows],
                    arrival[rows],
                    emit_interval=interval,
                    start=start,
                    until=until,
                    marker=None if marker is None else marker.take(pa.array(rows)),
                )
            except InvalidParameterError as err:
                if err.parameter != "until":
                    raise
                raise InvalidInputError(  # `until` is the last arrival: the input's
                    "arrival",
                    f"the last arrival ({until}) is too close to the top of the 64-bit "
                    "range: its grid time ceil(arrival / emit_interval) * emit_interval "
                    "overflows i64",
                ) from None
            channel_wm[rows] = res.record_watermark.to_numpy(zero_copy_only=False)
            em = res.emissions
            parts.append(em.add_column(0, "channel", pa.array(np.full(em.num_rows, c))))
    if parts:
        merged = pa.Table.from_batches(parts)
        builder.push_emissions(merged.take(pc.sort_indices(merged, [("time", "ascending")])))
    builder.finish()
    timeline = builder.take_timeline()
    times = timeline.column("time").to_numpy(zero_copy_only=False)
    wms = timeline.column("watermark").to_numpy(zero_copy_only=False)
    return channel_wm, in_force_at(times, wms, arrival), timeline


def check_columns(
    table: pa.Table,
    times_and_channel: tuple[str, str, str],
    keys: Sequence[str],
    values: Sequence[str],
    resolved: WatermarkStrategy,
    event_time_unit: str,
) -> None:
    """Every column replay reads (event time, arrival, channel, the keys; with a window
    the aggregated values; a punctuated strategy's marker) exists once and has a
    type floodmark takes (:mod:`floodmark.column_kinds`), and none is named like one
    replay adds: before any record is read or sorted."""
    ev, arrival, channel = times_and_channel
    for name in (ev, arrival, channel, resolved.marker_column, *keys, *values):
        if name is not None:
            field_index(table.schema, name)
    kinds = [(time_kind, ev, "event_time"), (time_kind, arrival, "arrival")]
    kinds += [(key_type, channel, "channel"), *((key_type, k, "key") for k in keys)]
    for rule, name, parameter in [*kinds, *((value_type, v, "aggs") for v in values)]:
        rule(table.schema.field(name).type, name, parameter)
    if resolved.marker_column is not None:
        event = (time_kind(table.schema.field(ev).type, ev, "event_time"), event_time_unit)
        marker_kind(table.schema.field(resolved.marker_column).type, resolved.marker_column, event)
    check_not_added(table.schema.names, {"records": WATERMARK_COLUMNS, **SIDE_OUTPUT_COLUMNS})
    check_takeable(table)


def time_type(table: pa.Table, name: str) -> pa.DataType:
    """The type of ``table``'s time column ``name`` (refused naming it if missing or
    there twice), which decides its default tick (:func:`tick_unit`)."""
    return table.schema.field(field_index(table.schema, name)).type


def replay(
    table: pa.Table,
    strategy: WatermarkStrategy,
    *,
    channel: str,
    arrival: str,
    event_time: str | None = None,
    emit_interval: Duration = DEFAULT_EMIT_INTERVAL,
    event_time_unit: str | None = None,
    arrival_unit: str | None = None,
    window: Any = None,
    key: str | Sequence[str] = (),
    aggs: Sequence[str | tuple[str, str]] = ("count",),
    allowed_lateness: Duration = 0,
    source_parallelism: int | None = None,
    topic: str | None = None,
    end_of_input: str = "together",
) -> Replay:
    """Run watermarks (and windows, if ``window`` is given) over ``table`` in-process.

    Every strategy runs here, the punctuated one reading its marker column (watermarks
    in event-time ticks) and user Python generators too.

    ``event_time_unit`` and ``arrival_unit`` are the ticks each time column is counted
    in (durations, watermarks and window bounds too): ``s``, ``ms``, ``us`` or ``ns``.
    By default an integer column's values are ``ms`` and a timestamp column is counted
    in its own precision, as the Spark functions count theirs (a Spark timestamp is
    ``us``): :func:`floodmark.column_kinds.tick_unit`.

    The topology (``docs/semantics.md``, "Which Flink job"): by default each channel is
    one source subtask reading one partition, and all channels end together after the
    whole input. ``source_parallelism=n`` reads the channels as Kafka partition numbers
    spread over ``n`` subtasks as Flink's Kafka source assigns them (``topic``: the
    topic name its start index is hashed from; default start index 0); each subtask
    combines its partitions with Flink's multiplexer, the valve combines the subtasks.
    ``end_of_input="per_channel"`` ends each channel right after its own last record
    (its watermark becomes ``MAX``), as a bounded source's splits end. Both run with the
    periodic strategies only.

    Example:
        Two channels, bound 10 ms: the combined watermark is the minimum over the
        channels, so channel ``a``'s 89 is in force only once ``b`` has one too.

        >>> import pyarrow as pa
        >>> from floodmark import TumblingEventTimeWindows, WatermarkStrategy
        >>> t = pa.table({"ts": [100, 95, 130, 20], "at": [0, 200, 200, 400],
        ...               "ch": ["a", "a", "b", "a"], "k": ["x"] * 4})
        >>> r = replay(t, WatermarkStrategy.for_bounded_out_of_orderness(10),
        ...            channel="ch", arrival="at", event_time="ts", key="k",
        ...            window=TumblingEventTimeWindows.of(100))
        >>> r.records["channel_watermark"].to_pylist()[1], r.records["watermark"].to_pylist()
        (89, [-9223372036854775808, -9223372036854775808, -9223372036854775808, 89])
        >>> r.results.select(["window_start", "count"]).to_pylist()
        [{'window_start': 0, 'count': 2}, {'window_start': 100, 'count': 2}]

    Raises:
        InvalidParameterError: no event-time column named, a bad strategy or duration,
            a bad topology option (naming it), or a topology option with a strategy
            that emits on records.
        InvalidInputError: with ``source_parallelism``, a channel that is not a
            partition number.
    """
    from floodmark.windows import WindowOperator, lateness_ticks

    source_parallelism = check_topology(source_parallelism, topic, end_of_input)

    ev = event_time_column(strategy, event_time)
    channel, arrival = column_name(channel, "channel"), column_name(arrival, "arrival")
    keys = column_names(key, "key")
    parsed = parse_aggs(aggs)
    table = typed_nulls(as_table(table, "table"), [channel, *keys])
    event_time_unit = tick_unit(time_type(table, ev), event_time_unit, "event_time_unit")
    arrival_unit = tick_unit(time_type(table, arrival), arrival_unit, "arrival_unit")
    resolved = strategy_in_ticks(strategy, event_time_unit, arrival_unit)
    lateness = lateness_ticks(allowed_lateness, event_time_unit)
    check_topology_strategy(resolved.kind, source_parallelism, end_of_input)
    values = [a[1] for a in parsed if isinstance(a, tuple)] if window is not None else []
    named = (ev, arrival, channel)
    check_columns(table, named, keys, values, resolved, event_time_unit)
    if source_parallelism is not None:
        check_partition_numbers(table.schema.field(channel).type, channel)
    interval = interval_ticks(emit_interval, arrival_unit)
    errors = null_reasons(table, ev, arrival, channel)
    ties = tie_values(parsed) if window is not None else []
    table = processing_order(
        filter_rows(table, valid_rows(table, ev, arrival, channel)),
        arrival,
        channel,
        ev,
        keys,
        ties,
        units=(arrival_unit, event_time_unit),
    )
    arr = time_column(table[arrival].combine_chunks(), arrival, arrival_unit, "arrival").to_numpy()
    ts = time_column(table[ev].combine_chunks(), ev, event_time_unit, "event_time").to_numpy()
    channels, chan_idx = channel_index(table[channel])
    marker = None
    if resolved.kind == "punctuated":
        assert resolved.marker_column is not None
        # The marker holds event times: a timestamp column is read in their unit
        marker = to_int64_array(
            table[resolved.marker_column].combine_chunks(),
            resolved.marker_column,
            nullable=True,
            unit=event_time_unit,
        )
    owners = subtasks_of(channels, source_parallelism, topic, channel)
    channel_wm, wm, tl = watermarks(
        resolved,
        chan_idx,
        len(channels),
        arr,
        ts,
        interval,
        marker,
        subtasks=owners,
        source_parallelism=source_parallelism,
        per_channel_end=end_of_input == "per_channel",
    )
    is_late = element_late(pa.array(ts), pa.array(wm))  # the engine's one rule
    records = (
        table.append_column("channel_watermark", pa.array(channel_wm))
        .append_column("watermark", pa.array(wm))
        .append_column("is_late", is_late)
    )
    timeline = pa.table(
        {
            "time": tl.column("time"),
            "watermark": tl.column("watermark"),
            "status": tl.column("status"),
            "min_channel": channels.take(tl.column("min_channel")),
        }
    )
    empty = pa.table({})
    if window is None:
        return Replay(records, timeline, empty, empty, errors)
    op = WindowOperator(
        window,
        key=keys,
        event_time=ev,
        aggs=parsed,
        allowed_lateness=lateness,
        unit=event_time_unit,
        arrival=arrival,
    )
    advance = tl.column("advance").to_numpy(zero_copy_only=False)
    adv_t = tl.column("time").to_numpy(zero_copy_only=False)[advance]
    adv_w = tl.column("watermark").to_numpy(zero_copy_only=False)[advance]
    batch = table.combine_chunks().to_batches()[0] if table.num_rows else None
    outs = []
    if batch is not None:
        pos = np.searchsorted(arr, adv_t, side="right").astype(np.int64)
        outs.append(op.process(batch, {"position": pos, "watermark": adv_w, "time": adv_t}))
        outs.append(op.finish())
    results = pa.Table.from_batches([o.results for o in outs]) if outs else empty
    late = pa.Table.from_batches([o.late for o in outs]) if outs else empty
    dropped = pa.Table.from_batches([o.dropped for o in outs]) if outs else empty
    if dropped.num_columns:
        # by position: the input may have two columns of one name that no call reads
        same = [c.cast(f.type) for c, f in zip(dropped.columns, errors.schema, strict=True)]
        errors = pa.concat_tables([errors, pa.Table.from_arrays(same, schema=errors.schema)])
    return Replay(records, timeline, results, late, errors)


__all__ = ["Replay", "processing_order", "replay"]
