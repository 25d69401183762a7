"""Running a watermark strategy over one channel's records: :func:`drive`.

:func:`drive` runs a :class:`~floodmark.WatermarkStrategy` over one channel's records
and periodic-emission grid, in the engine (the GIL released, except while it calls
back into a user's Python generator). :mod:`floodmark.valve` combines channels.

Timing model (the Rust driver's docs, ``rust/watermark/driver.rs``, give it in full):
periodic emissions happen at every grid time ``t = k * emit_interval`` between
``start`` and ``until`` (both rounded up to the grid); records arriving exactly at
``t`` are processed before the emission at ``t``; the idleness clock at ``t`` reads
``t``. A record's ``record_watermark`` is the channel's watermark strictly before its
arrival. The emitted stream passes Flink's ``WatermarkToDataOutput``: non-increasing
watermarks are dropped, ``active`` precedes the first watermark after ``idle``,
``idle`` is emitted once per transition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from floodmark import _core
from floodmark.arrays import to_int64_array
from floodmark.exceptions import InvalidInputError, InvalidParameterError
from floodmark.generator import WatermarkGenerator
from floodmark.strategy import DEFAULT_EMIT_INTERVAL, WatermarkStrategy, check_strategy
from floodmark.time import I64_MAX, Duration, check_int64, interval_ticks


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


def drive(
    strategy: WatermarkStrategy,
    event_time: Any,
    arrival: Any,
    *,
    emit_interval: Duration = DEFAULT_EMIT_INTERVAL,
    start: int | None = None,
    until: int | None = None,
    unit: str = "ms",
    marker: Any = None,
    generator: WatermarkGenerator | None = None,
) -> DriveResult:
    """Runs ``strategy`` over one channel's records.

    Args:
        strategy: the watermark strategy.
        event_time: event timestamps (int64 ticks, or Arrow timestamps read as ticks of
            ``unit``, finer digits floored; no nulls).
        arrival: arrival (processing) times in ticks (or Arrow timestamps, as
            ``event_time``), non-decreasing.
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

    Example:
        Bound 10 ms; the emissions at 0 and 200 ms carry ``max - 10 - 1``. A record
        sees the watermark emitted strictly before its arrival (the tie rule: records
        arriving at a grid time come before that time's emission):

        >>> from floodmark import WatermarkStrategy, drive
        >>> s = WatermarkStrategy.for_bounded_out_of_orderness(10)
        >>> r = drive(s, event_time=[100, 95, 130], arrival=[0, 200, 200])
        >>> r.record_watermark.to_pylist()
        [-9223372036854775808, 89, 89]
        >>> r.emissions.to_pydict()
        {'time': [0, 200], 'kind': ['watermark', 'watermark'], 'watermark': [89, 119]}

    Raises:
        InvalidParameterError: a bad interval, unit, start/until, or a missing marker;
            with ``generator``, a grid (``start``) that does not come after the last
            grid time of the previous call.
        InvalidInputError: nulls or floats in ``event_time``/``arrival``, unsorted
            ``arrival``, columns of different lengths; without ``until`` (it defaults
            to the last arrival), a last arrival before ``start`` or one whose grid
            time overflows int64; with ``generator``, an arrival at or before the last
            grid time of the previous call, or one after this call's (``until``).
    """
    check_strategy(strategy)
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
    interval = interval_ticks(emit_interval, unit)
    ts = to_int64_array(event_time, "event_time", unit=unit)
    arr = to_int64_array(arrival, "arrival", unit=unit)
    if len(ts) != len(arr):
        raise InvalidInputError("arrival", f"has {len(arr)} values but event_time has {len(ts)}")
    if strategy.kind == "punctuated" and marker is None:
        raise InvalidParameterError("marker", "a punctuated strategy needs marker=")
    mk = None if marker is None else to_int64_array(marker, "marker", nullable=True)
    if mk is not None and len(mk) != len(ts):
        raise InvalidInputError("marker", f"has {len(mk)} values but event_time has {len(ts)}")
    if start is not None:
        start = check_int64(start, "start")
    if until is not None:
        until = check_int64(until, "until")
    if len(arr) == 0 and (start is None or until is None):
        return DriveResult(pa.array([], pa.int64()), _emission_batch([], [], []))
    first, last = _grid_bounds(arr, interval, start, until, gen._inner.last_grid)
    grid_end = _ceil_div(last, interval) * interval
    if generator is not None and len(arr) and arr[-1].as_py() > grid_end:
        raise InvalidInputError(
            "arrival",
            f"the last arrival ({arr[-1].as_py()}) is after the grid's end ({grid_end}: "
            "until, rounded up to the interval); with generator=, the next call's "
            "emissions would reach the generator after records that arrived later: pass "
            "until= at or after the last arrival",
        )
    rec, batch = _core.drive(gen._inner, ts, arr, interval, first, last, mk)
    gen._inner.last_grid = grid_end
    return DriveResult(rec, batch)


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
        if until is None and start is None:
            raise InvalidInputError(
                "arrival",
                f"must be non-decreasing, but the last arrival ({last}) is before the "
                f"first ({first})",
            )
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


__all__ = ["DriveResult", "drive"]
