"""The whole event-time pipeline over one in-memory table, record by record.

This is floodmark without Spark: every channel's generator sees every record (not the
per-bucket maxima the Spark stages use), the valve combines the channels, and one keyed
window operator takes all records in arrival order. It is the reference the Spark
pipeline must equal row for row, and a fast way to run small data.

Columns hold ticks (int64); durations are ``timedelta`` (converted with the units) or
ticks. Records are processed in the order ``(arrival, channel, event time, keys...)``,
the same order the Spark stages use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from floodmark.strategy import WatermarkStrategy
from floodmark.time import I64_MIN, Duration, to_ticks
from floodmark.watermarks import combine, drive


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


def processing_order(
    table: pa.Table,
    arrival: str,
    channel: str,
    event_time: str,
    keys: Sequence[str] = (),
    ties: Sequence[str] = (),
) -> pa.Table:
    """Sort by ``(arrival, channel, event time, keys..., ties...)``, nulls first, as
    Spark sorts: the order of every stage (``ties``: the first/last aggregates' value
    columns, see ``WindowPlan.tie_values``)."""
    by = list(dict.fromkeys([arrival, channel, event_time, *keys, *ties]))
    try:  # pyarrow >= 25: null placement per key
        order = pc.sort_indices(table, sort_keys=[(c, "ascending", "at_start") for c in by])
    except (TypeError, ValueError):  # older pyarrow: one placement for every key
        order = pc.sort_indices(
            table, sort_keys=[(c, "ascending") for c in by], null_placement="at_start"
        )
    return table.take(order)


def replay(
    table: pa.Table,
    strategy: WatermarkStrategy,
    *,
    channel: str,
    arrival: str,
    event_time: str | None = None,
    emit_interval: Duration = timedelta(milliseconds=200),
    event_time_unit: str = "ms",
    arrival_unit: str = "ms",
    window: Any = None,
    key: str | Sequence[str] = (),
    aggs: Sequence[str | tuple[str, str]] = ("count",),
    allowed_lateness: Duration = 0,
) -> Replay:
    """Run watermarks (and windows, if ``window`` is given) over ``table`` in-process."""
    from floodmark.spark.timeline import resolve_strategy
    from floodmark.windows import WindowOperator

    ev = event_time or strategy.timestamp_column
    if ev is None:
        raise ValueError("name the event-time column (event_time=)")
    keys = [key] if isinstance(key, str) else list(key)
    resolved = resolve_strategy(strategy, event_time_unit, arrival_unit)
    interval = to_ticks(emit_interval, arrival_unit, "emit_interval")
    valid = pc.and_(
        pc.and_(pc.is_valid(table[ev]), pc.is_valid(table[arrival])), pc.is_valid(table[channel])
    )
    errors = table.filter(pc.invert(valid))
    reason = pc.case_when(
        pc.make_struct(
            pc.is_null(errors[ev]), pc.is_null(errors[arrival]), pc.is_null(errors[channel])
        ),
        "null_event_time",
        "null_arrival",
        "null_channel",
    )
    errors = errors.append_column("reason", reason)
    picks = [a[1] for a in aggs if not isinstance(a, str) and a[0] in ("first", "last")]
    ties = list(dict.fromkeys(picks)) if window is not None else []
    table = processing_order(table.filter(valid), arrival, channel, ev, keys, ties)
    arr = table[arrival].to_numpy().astype(np.int64)
    ts = table[ev].to_numpy().astype(np.int64)
    chan_values = table[channel].to_pylist()
    channels = sorted(set(chan_values))
    index = {c: i for i, c in enumerate(channels)}
    chan_idx = np.array([index[c] for c in chan_values], dtype=np.int64)
    channel_wm = np.full(len(arr), I64_MIN, dtype=np.int64)
    parts = []
    if len(arr):
        start, until = int(arr.min()), int(arr.max())
        for i in range(len(channels)):
            rows = np.nonzero(chan_idx == i)[0]
            res = drive(
                resolved, ts[rows], arr[rows], emit_interval=interval, start=start, until=until
            )
            channel_wm[rows] = res.record_watermark.to_numpy(zero_copy_only=False)
            em = res.emissions
            parts.append(
                pa.record_batch(
                    [pa.array(np.full(em.num_rows, i, dtype=np.int64)), *em.columns],
                    names=["channel", *em.schema.names],
                )
            )
    if parts:
        tl = combine(pa.concat_batches(parts), num_channels=len(channels))
    else:
        tl = combine(
            pa.record_batch(
                {
                    "channel": pa.array([], pa.int64()),
                    "time": pa.array([], pa.int64()),
                    "kind": pa.array([], pa.string()),
                    "watermark": pa.array([], pa.int64()),
                }
            ),
            num_channels=0,
        )
    times = tl.column("time").to_numpy(zero_copy_only=False)
    wms = tl.column("watermark").to_numpy(zero_copy_only=False)
    at = np.searchsorted(times, arr, side="left") - 1
    if len(wms):
        wm = np.where(at >= 0, wms[np.maximum(at, 0)], I64_MIN).astype(np.int64)
    else:  # no channel ever emitted (no_watermarks, or nothing placeable)
        wm = np.full(len(arr), I64_MIN, dtype=np.int64)
    is_late = (wm > I64_MIN) & (ts <= wm)
    records = (
        table.append_column("channel_watermark", pa.array(channel_wm))
        .append_column("watermark", pa.array(wm))
        .append_column("is_late", pa.array(is_late))
    )
    timeline = pa.table(
        {
            "time": tl.column("time"),
            "watermark": tl.column("watermark"),
            "status": tl.column("status"),
            "min_channel": pa.array(
                [None if c is None else channels[c] for c in tl.column("min_channel").to_pylist()],
                table.schema.field(channel).type,
            ),
        }
    )
    empty = pa.table({})
    if window is None:
        return Replay(records, timeline, empty, empty, errors)
    op = WindowOperator(
        window,
        key=keys,
        event_time=ev,
        aggs=aggs,
        allowed_lateness=to_ticks(allowed_lateness, event_time_unit, "allowed_lateness"),
        unit=event_time_unit,
        arrival=arrival,
    )
    grew = (
        wms > np.concatenate([[I64_MIN], np.maximum.accumulate(wms)[:-1]])
        if len(wms)
        else np.zeros(0, bool)
    )
    adv_t, adv_w = times[grew], wms[grew]
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
        errors = pa.concat_tables([errors, dropped.select(errors.column_names).cast(errors.schema)])
    return Replay(records, timeline, results, late, errors)


__all__ = ["Replay", "processing_order", "replay"]
