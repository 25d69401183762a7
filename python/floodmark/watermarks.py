"""Running watermarks over whole arrays, and combining channels.

* :func:`drive` runs a :class:`~floodmark.strategy.WatermarkStrategy` over one
  channel's records and periodic-emission grid (native, GIL released).
* :func:`combine` runs the output streams of many channels through Flink's
  ``StatusWatermarkValve`` and returns the combined timeline.
* :class:`Valve` and :class:`Multiplexer` expose Flink's ``StatusWatermarkValve`` and
  ``WatermarkOutputMultiplexer`` call by call.

Timing model of :func:`drive` (also in the Rust driver's docs): periodic emissions
happen at every grid time ``t = k * emit_interval`` between ``start`` and ``until``
(both rounded up to the grid); records arriving exactly at ``t`` are processed before
the emission at ``t``; the idleness clock at ``t`` reads ``t``. A record's
``record_watermark`` is the channel's watermark strictly before its arrival. The
emitted stream passes Flink's ``WatermarkToDataOutput``: non-increasing watermarks are
dropped, ``active`` precedes the first watermark after ``idle``, ``idle`` is emitted
once per transition.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, NamedTuple

import pyarrow as pa

from floodmark import _core
from floodmark.exceptions import InvalidInputError, InvalidParameterError
from floodmark.strategy import (
    Emission,
    WatermarkGenerator,
    WatermarkStrategy,
    _emissions,
)
from floodmark.time import I64_MAX, I64_MIN, Duration, as_int, check_int64, to_ticks


def to_int64_array(values: Any, column: str, *, nullable: bool = False) -> pa.Array:
    """Converts a pyarrow array/chunked array, numpy array, pandas Series or list of
    ints to a ``pyarrow.int64`` array.

    Raises:
        InvalidInputError: the values are not integers (floats are refused, even whole
            ones, rather than truncated), do not fit an int64, or hold nulls when not
            allowed.
    """
    try:
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if isinstance(values, pa.Array):
            arr = values
        elif type(values).__module__.startswith("pandas"):
            arr = pa.Array.from_pandas(values)
        elif type(values).__module__.startswith("numpy"):
            arr = pa.array(values)
        else:
            # the type is inferred, so that floats are refused below, not truncated
            arr = pa.array(list(values))
        if pa.types.is_timestamp(arr.type) or pa.types.is_duration(arr.type):
            arr = arr.cast(pa.int64())
        if not (pa.types.is_integer(arr.type) or pa.types.is_null(arr.type)):
            raise InvalidInputError(column, f"must hold integers (int64 ticks), got {arr.type}")
        arr = arr.cast(pa.int64())
    except InvalidInputError:
        raise
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
        raise InvalidInputError(column, f"cannot be read as int64 ticks: {e}") from e
    if not nullable and arr.null_count:
        raise InvalidInputError(column, f"holds {arr.null_count} null value(s); filter nulls first")
    return arr


@dataclass(frozen=True)
class DriveResult:
    """What :func:`drive` returns.

    Attributes:
        record_watermark: ``int64`` per record: the channel watermark in force at its
            arrival (``-2**63`` if none yet).
        emissions: the channel's output stream: ``time`` int64, ``kind`` string
            (``"watermark"``/``"idle"``/``"active"``), ``watermark`` int64 (null for
            statuses).
    """

    record_watermark: pa.Array
    emissions: pa.RecordBatch


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def _drive_python(
    gen: WatermarkGenerator,
    ts: list[int],
    arrival: list[int],
    interval: int,
    start: int,
    until: int,
) -> tuple[list[int], list[tuple[int, Emission]]]:
    """The driver's semantics, one call at a time (for user Python generators)."""
    rows: list[tuple[int, Emission]] = []
    st = gen._python
    assert st is not None

    def push(time: int, emitted: list[Emission]) -> None:
        for e in emitted:
            if e.kind == "watermark":
                assert e.watermark is not None
                if e.watermark > st.out_max:
                    st.out_max = e.watermark
                    if st.out_idle:
                        st.out_idle = False
                        rows.append((time, Emission("active")))
                    rows.append((time, e))
            elif e.kind == "idle":
                if not st.out_idle:
                    st.out_idle = True
                    rows.append((time, e))
            elif st.out_idle:
                st.out_idle = False
                rows.append((time, e))

    rec: list[int] = []
    last_arrival: int | None = None
    before = I64_MIN
    i = 0

    def feed(upto: int | None) -> None:
        nonlocal i, last_arrival, before
        while i < len(ts) and (upto is None or arrival[i] <= upto):
            a = arrival[i]
            if a != last_arrival:
                last_arrival, before = a, st.out_max
            rec.append(before)
            push(a, gen.on_event(ts[i]))
            i += 1

    for k in range(_ceil_div(start, interval), _ceil_div(until, interval) + 1):
        t = k * interval
        feed(t)
        push(t, gen.on_periodic_emit(t))
    feed(None)
    return rec, rows


def drive(
    strategy: WatermarkStrategy,
    event_time: Any,
    arrival: Any,
    *,
    emit_interval: Duration = timedelta(milliseconds=200),
    start: int | None = None,
    until: int | None = None,
    unit: str = "ms",
    marker: Any = None,
    generator: WatermarkGenerator | None = None,
) -> DriveResult:
    """Runs ``strategy`` over one channel's records.

    Args:
        strategy: the watermark strategy.
        event_time: event timestamps (int64 ticks; no nulls).
        arrival: arrival (processing) times in ticks, non-decreasing.
        emit_interval: the periodic-emission interval (Flink's
            ``autoWatermarkInterval``), a ``timedelta`` or ticks.
        start: the grid starts at the first multiple of the interval at or after it
            (default: the first arrival).
        until: the grid ends at the first multiple of the interval at or after it
            (default: the last arrival).
        unit: the tick unit of all times and durations.
        marker: for punctuated strategies, the watermark carried by each record
            (nullable).
        generator: continue from this generator (made by
            ``strategy.create_generator(unit)``) instead of a fresh one; it is advanced,
            so the next call continues the same stream (e.g. batch after batch, with
            ``snapshot()``/``restore()`` in between). The next batch's records and grid
            must come after this one's last grid time (the generator remembers it, in
            its snapshot too).

    Returns:
        The per-record watermark and the emitted stream.

    Raises:
        InvalidParameterError: a bad interval, unit, start/until, or a missing marker;
            with ``generator``, a grid (``start``) that does not come after the last
            grid time of the previous call.
        InvalidInputError: nulls or floats in ``event_time``/``arrival``, unsorted
            ``arrival``, columns of different lengths; without ``until`` (it defaults
            to the last arrival), a last arrival before ``start`` or one whose grid
            time overflows int64; with ``generator``, an arrival at or before the last
            grid time of the previous call.
    """
    if not isinstance(strategy, WatermarkStrategy):
        raise InvalidParameterError(
            "strategy",
            f"expected a WatermarkStrategy, got {type(strategy).__name__}",
        )
    if generator is None:
        gen = strategy.create_generator(unit)
    elif (
        not isinstance(generator, WatermarkGenerator)
        or generator.strategy != strategy
        or generator.unit != unit
    ):
        raise InvalidParameterError(
            "generator",
            f"it must come from strategy.create_generator({unit!r}) of this same strategy",
        )
    else:
        gen = generator
    interval = to_ticks(emit_interval, unit, "emit_interval")
    if interval <= 0:
        raise InvalidParameterError(
            "emit_interval",
            f"must be > 0 ticks of {unit!r}, got {emit_interval!r}",
        )
    ts = to_int64_array(event_time, "event_time")
    arr = to_int64_array(arrival, "arrival")
    if strategy.kind == "punctuated" and marker is None:
        raise InvalidParameterError("marker", "a punctuated strategy needs marker=")
    mk = None if marker is None else to_int64_array(marker, "marker", nullable=True)
    if start is not None:
        start = check_int64(start, "start")
    if until is not None:
        until = check_int64(until, "until")
    if len(arr) == 0 and (start is None or until is None):
        return DriveResult(pa.array([], pa.int64()), _emission_batch([], [], []))
    first, last = _grid_bounds(arr, interval, start, until, gen._last_grid)
    if gen._native is not None:
        rec, batch = _core.drive(gen._native, ts, arr, interval, first, last, mk)
        gen._last_grid = _ceil_div(last, interval) * interval
        return DriveResult(rec, batch)
    if len(ts) != len(arr):
        raise InvalidInputError("arrival", f"has {len(arr)} values but event_time has {len(ts)}")
    arrivals = arr.to_pylist()
    for j in range(1, len(arrivals)):
        if arrivals[j] < arrivals[j - 1]:
            raise InvalidInputError("arrival", f"must be non-decreasing (index {j})")
    rec_py, rows = _drive_python(gen, ts.to_pylist(), arrivals, interval, first, last)
    gen._last_grid = _ceil_div(last, interval) * interval
    return DriveResult(
        pa.array(rec_py, pa.int64()),
        _emission_batch(
            [t for t, _ in rows], [e.kind for _, e in rows], [e.watermark for _, e in rows]
        ),
    )


def _grid_bounds(
    arr: pa.Array, interval: int, start: int | None, until: int | None, after: int | None
) -> tuple[int, int]:
    """``(start, until)`` of the grid, the first or last arrival standing in for the
    one not given; errors name what the caller gave (``arrival`` for a bound it did
    not give). ``after``: the last grid time of the previous call with the generator,
    which this call's records and grid must come after."""
    first = start if start is not None else arr[0].as_py()
    last = until if until is not None else arr[-1].as_py()
    if last < first:
        if until is None:
            raise InvalidInputError(
                "arrival",
                f"the last arrival ({last}) is before start ({first}); pass until= to "
                "run the grid past start",
            )
        which = "start" if start is not None else "the first arrival"
        raise InvalidParameterError("until", f"must be >= {which} ({first})")
    if _ceil_div(last, interval) * interval > I64_MAX:
        message = "the last grid time ceil(until / emit_interval) * emit_interval overflows i64"
        if until is None:
            raise InvalidInputError("arrival", f"{message} (until defaults to the last arrival)")
        raise InvalidParameterError("until", f"{message}")
    if after is not None:
        if len(arr) and arr[0].as_py() <= after:
            raise InvalidInputError(
                "arrival",
                f"arrival[0] = {arr[0].as_py()} is at or before {after}, the last grid time "
                "the generator was driven to: a continued stream must arrive after it",
            )
        grid = _ceil_div(first, interval) * interval
        if grid <= after:
            raise InvalidParameterError(
                "start",
                f"the grid would start at {grid}, at or before "
                f"{after}, the last grid time the generator was driven to",
            )
    return first, last


def _emission_batch(time: list[int], kind: list[str], wm: list[int | None]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array(time, pa.int64()), pa.array(kind, pa.string()), pa.array(wm, pa.int64())],
        schema=pa.schema(
            [
                pa.field("time", pa.int64(), nullable=False),
                pa.field("kind", pa.string(), nullable=False),
                pa.field("watermark", pa.int64()),
            ]
        ),
    )


def _strings(values: Any, column: str) -> pa.Array:
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if not isinstance(arr, pa.Array):
        arr = pa.array(list(arr), pa.string())
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        raise InvalidInputError(column, f"must be strings, got {arr.type}")
    return arr.cast(pa.string())


def _check_channels(num_channels: object) -> int:
    n = as_int(num_channels)
    if n is None or not 0 <= n <= I64_MAX:
        raise InvalidParameterError(
            "num_channels",
            f"expected an int >= 0, got {num_channels!r}",
        )
    return n


def combine(emissions: pa.RecordBatch | pa.Table, *, num_channels: int) -> pa.RecordBatch:
    """Combines per-channel output streams through Flink's ``StatusWatermarkValve``.

    Args:
        emissions: columns ``channel`` int64, ``time`` int64, ``kind`` string,
            ``watermark`` int64; the rows of each channel in that channel's order.
            Rows are merged by ``(time, channel)``, stably.
        num_channels: the number of input channels of the valve.

    Returns:
        One row per valve emission: ``time`` int64, ``watermark`` int64 (combined,
        after the change), ``status`` string (``"active"``/``"idle"``),
        ``min_channel`` int64 (the aligned channel holding the minimum, or null),
        ``advance`` bool (the combined watermark grew: an advance for the windows).

    Raises:
        InvalidInputError: a missing or mistyped column, or a bad kind.
        ChannelOutOfRangeError: a channel outside ``0..num_channels``.
    """
    n = _check_channels(num_channels)
    if isinstance(emissions, pa.Table):
        emissions = emissions.combine_chunks().to_batches()
        emissions = (
            emissions[0]
            if emissions
            else pa.RecordBatch.from_pylist(
                [],
                schema=pa.schema(
                    [
                        ("channel", pa.int64()),
                        ("time", pa.int64()),
                        ("kind", pa.string()),
                        ("watermark", pa.int64()),
                    ]
                ),
            )
        )
    if not isinstance(emissions, pa.RecordBatch):
        raise InvalidParameterError(
            "emissions",
            f"expected a pyarrow.RecordBatch, got {type(emissions).__name__}",
        )
    cols = {}
    for name in ("channel", "time", "kind", "watermark"):
        if name not in emissions.schema.names:
            raise InvalidInputError(name, "missing column")
        col = emissions.column(name)
        cols[name] = (
            _strings(col, name)
            if name == "kind"
            else to_int64_array(col, name, nullable=name == "watermark")
        )
    batch = pa.RecordBatch.from_arrays(list(cols.values()), names=list(cols))
    result: pa.RecordBatch = _core.combine(batch, n)
    return result


class Valve:
    """Flink's ``StatusWatermarkValve`` over ``num_channels`` input channels.

    Raises:
        InvalidParameterError: ``num_channels`` is negative.
    """

    def __init__(self, num_channels: int) -> None:
        self._inner = _core._Valve(_check_channels(num_channels))

    def input_watermark(self, channel: int, wm: int) -> list[Emission]:
        """A watermark on ``channel``; returns what the valve emitted.

        Raises:
            ChannelOutOfRangeError: ``channel`` is not in ``0..num_channels``.
        """
        return _emissions(
            self._inner.input_watermark(check_int64(channel, "channel"), check_int64(wm, "wm"))
        )

    def input_status(self, channel: int, status: Literal["idle", "active"]) -> list[Emission]:
        """A status change on ``channel``; returns what the valve emitted.

        Raises:
            InvalidParameterError: ``status`` is not ``"idle"`` or ``"active"``.
            ChannelOutOfRangeError: ``channel`` is not in ``0..num_channels``.
        """
        if status not in ("idle", "active"):
            raise InvalidParameterError("status", f"expected 'idle' or 'active', got {status!r}")
        return _emissions(
            self._inner.input_status(check_int64(channel, "channel"), status == "idle")
        )

    def process(self, channel: Any, kind: Any, watermark: Any) -> pa.RecordBatch:
        """Feeds many inputs at once (row ``i``: a watermark or a status for
        ``channel[i]``). Returns the emissions as ``step`` (input row) int64, ``kind``
        string, ``watermark`` int64 columns."""
        result: pa.RecordBatch = self._inner.process(
            to_int64_array(channel, "channel"),
            _strings(kind, "kind"),
            to_int64_array(watermark, "watermark", nullable=True),
        )
        return result

    @property
    def num_channels(self) -> int:
        """The number of input channels."""
        return self._inner.num_channels

    @property
    def min_channel(self) -> int | None:
        """The aligned channel holding the minimum (lowest index on ties), or ``None``."""
        return self._inner.min_channel

    @property
    def watermark(self) -> int:
        """The last watermark the valve emitted (``-2**63`` if none)."""
        return self._inner.watermark

    @property
    def is_idle(self) -> bool:
        """True if every channel is idle."""
        return self._inner.is_idle

    def snapshot(self) -> bytes:
        """The valve's state as bytes."""
        return self._inner.snapshot()

    def restore(self, data: bytes) -> None:
        """Restores a :meth:`snapshot` of a valve with as many channels.

        Raises:
            SnapshotError: ``data`` is corrupt, not a valve snapshot, or one of a valve
                with another number of channels.
        """
        self._inner.restore(data)

    def __repr__(self) -> str:
        return (
            f"Valve(num_channels={self.num_channels}, watermark={self.watermark}, "
            f"idle={self.is_idle})"
        )


class ListenerEvent(NamedTuple):
    """A call on an output's ``WatermarkUpdateListener``.

    Attributes:
        output: the output id.
        type: ``"watermark"`` (``onWatermarkUpdate``) or ``"idle"`` (``onIdleUpdate``).
        watermark: the new watermark for ``"watermark"``, else ``None``.
        idle: the new idle flag for ``"idle"``, else ``None``.
    """

    output: str
    type: Literal["watermark", "idle"]
    watermark: int | None = None
    idle: bool | None = None


class MultiplexerResult(NamedTuple):
    """What one multiplexer call produced.

    Attributes:
        emitted: calls on the underlying output (``watermark`` and ``idle`` only).
        listener: listener calls, in order.
    """

    emitted: list[Emission]
    listener: list[ListenerEvent]


def _mux_result(
    raw: tuple[list[tuple[str, int | None]], list[tuple[str, str, int]]],
) -> MultiplexerResult:
    emitted, listener = raw
    events = [
        ListenerEvent(o, "watermark", watermark=v)
        if t == "watermark"
        else ListenerEvent(o, "idle", idle=bool(v))
        for o, t, v in listener
    ]
    return MultiplexerResult(_emissions(emitted), events)


Via = Literal["immediate", "deferred"]


def _deferred(via: str) -> bool:
    if via not in ("immediate", "deferred"):
        raise InvalidParameterError("via", f"expected 'immediate' or 'deferred', got {via!r}")
    return via == "deferred"


class Multiplexer:
    """Flink's ``WatermarkOutputMultiplexer``: per-split outputs (by string id)
    combined into one underlying output."""

    def __init__(self) -> None:
        self._inner = _core._Multiplexer()

    def register_output(self, output_id: str) -> None:
        """Registers a new output starting at ``-2**63``, active.

        Raises:
            IllegalStateError: ``output_id`` is already registered.
        """
        self._inner.register_output(output_id)

    def unregister_output(self, output_id: str) -> bool:
        """Removes an output; True if it was registered. Does not recompute."""
        return self._inner.unregister_output(output_id)

    def emit_watermark(
        self, output_id: str, wm: int, *, via: Via = "immediate"
    ) -> MultiplexerResult:
        """``emitWatermark`` on the immediate or deferred output of ``output_id``.

        Raises:
            InvalidParameterError: no output ``output_id``, or a bad ``via``.
        """
        return _mux_result(
            self._inner.emit_watermark(output_id, check_int64(wm, "wm"), _deferred(via))
        )

    def mark_idle(self, output_id: str, *, via: Via = "immediate") -> MultiplexerResult:
        """``markIdle`` on the output ``output_id``."""
        return _mux_result(self._inner.mark(output_id, True, _deferred(via)))

    def mark_active(self, output_id: str, *, via: Via = "immediate") -> MultiplexerResult:
        """``markActive`` on the output ``output_id``."""
        return _mux_result(self._inner.mark(output_id, False, _deferred(via)))

    def on_periodic_emit(self) -> MultiplexerResult:
        """``onPeriodicEmit``: recomputes the combined watermark."""
        return _mux_result(self._inner.on_periodic_emit())

    @property
    def combined_watermark(self) -> int:
        """The combined watermark so far."""
        return self._inner.combined_watermark

    @property
    def output_ids(self) -> list[str]:
        """The registered output ids, in registration order."""
        return self._inner.output_ids

    def snapshot(self) -> bytes:
        """The multiplexer's state as bytes."""
        return self._inner.snapshot()

    def restore(self, data: bytes) -> None:
        """Restores a :meth:`snapshot` (the outputs registered come from it: a
        multiplexer has no configuration of its own).

        Raises:
            SnapshotError: ``data`` is corrupt or not a multiplexer snapshot.
        """
        self._inner.restore(data)


__all__ = [
    "DriveResult",
    "ListenerEvent",
    "Multiplexer",
    "MultiplexerResult",
    "Valve",
    "combine",
    "drive",
    "to_int64_array",
]
