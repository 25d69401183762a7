"""Ticks and units: how Python durations and timestamps become the engine's ``i64`` ticks.

The engine is unit-agnostic: every time is an integer count of ticks. A *unit* says how
long one tick is: ``"s"``, ``"ms"``, ``"us"`` or ``"ns"``. Spark ``TimestampType`` values
are microseconds (``"us"``); Flink's own numbers are milliseconds (``"ms"``).
"""

from __future__ import annotations

import operator
from datetime import timedelta
from typing import Literal

from floodmark.exceptions import InvalidInputError, InvalidParameterError

Unit = Literal["s", "ms", "us", "ns"]
Duration = timedelta | int

TICKS_PER_SECOND: dict[str, int] = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}

I64_MIN = -(2**63)
I64_MAX = 2**63 - 1


def check_unit(unit: str, parameter: str = "unit") -> Unit:
    """Return ``unit`` if it is one of ``s, ms, us, ns``; raise otherwise."""
    if not isinstance(unit, str) or unit not in TICKS_PER_SECOND:
        raise InvalidParameterError(
            parameter, f"{unit!r} is not a time unit; use one of 's', 'ms', 'us', 'ns'"
        )
    return unit  # type: ignore[return-value]


def as_int(value: object) -> int | None:
    """``value`` as a Python ``int`` if it is an integer (a Python or numpy integer,
    anything with ``__index__``), else ``None``. Booleans are not integers here, nor
    are floats, even whole ones."""
    if isinstance(value, bool) or type(value).__name__ in ("bool_", "bool"):
        return None
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return None


def check_int64(value: object, name: str, *, column: bool = False) -> int:
    """``value`` as an ``int`` of the ``i64`` range (a tick count, a timestamp, a
    watermark, an index).

    Raises:
        InvalidParameterError: naming the parameter ``name`` (InvalidInputError naming
            the column ``name`` if ``column``), if ``value`` is not an integer (see
            :func:`as_int`) or is outside ``-2**63 .. 2**63 - 1``.
    """
    v = as_int(value)
    if v is not None and I64_MIN <= v <= I64_MAX:
        return v
    if v is None:
        problem = f"expected an int, got {type(value).__name__} {value!r}"
    else:
        problem = f"{v} is outside the 64-bit range -2**63 .. 2**63 - 1"
    if column:
        raise InvalidInputError(name, problem)
    raise InvalidParameterError(name, problem)


def to_ticks(value: Duration, unit: str, parameter: str) -> int:
    """Convert a duration to ticks of ``unit``.

    Args:
        value: a ``timedelta``, or an integer (Python or numpy) already counted in
            ticks.
        unit: the tick unit (``"s"``, ``"ms"``, ``"us"``, ``"ns"``).
        parameter: the parameter's name, used in error messages.

    Returns:
        The number of ticks, saturated to the ``i64`` range (as Flink saturates
        ``Duration.toNanos()``). A duration that is not a whole number of ticks is
        truncated toward zero, as ``Duration.toMillis()`` does.

    Raises:
        InvalidParameterError: ``value`` is neither a ``timedelta`` nor an integer.
    """
    check_unit(unit)
    whole = as_int(value)
    if whole is None and not isinstance(value, timedelta):
        raise InvalidParameterError(
            parameter,
            f"expected a datetime.timedelta or an int of ticks, got {type(value).__name__}",
        )
    if whole is not None:
        ticks = whole
    else:
        assert isinstance(value, timedelta)
        nanos, div = nanoseconds(value), 1_000_000_000 // TICKS_PER_SECOND[unit]
        ticks = abs(nanos) // div * (1 if nanos >= 0 else -1)
    return max(I64_MIN, min(I64_MAX, ticks))


def nanoseconds(value: timedelta) -> int:
    """``value`` in nanoseconds: a ``timedelta``'s days, seconds and microseconds, and
    the nanoseconds of a ``pandas.Timedelta`` (a ``timedelta`` subclass that keeps them
    in a component of its own, 0-999, as its microseconds are 0-999999)."""
    micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    extra = getattr(value, "nanoseconds", 0)
    return micros * 1_000 + (extra if isinstance(extra, int) else 0)


_MAX_INTERVAL = 1 << 61


def interval_ticks(interval: Duration, unit: str, parameter: str = "emit_interval") -> int:
    """An emission interval in ticks of ``unit`` (the arrival's, whose clock the
    emissions follow): at least one tick and under 2^61 ticks, in every entry point.
    Arrival times within two intervals of the 64-bit range's ends cannot be placed on
    the emission grid; under 2^61 ticks every arrival within 2^62 of zero can (a
    coarser grid would refuse every arrival, naming the data instead of this).

    Raises:
        InvalidParameterError: naming ``parameter``.
    """
    ticks = to_ticks(interval, unit, parameter)
    if ticks <= 0:
        raise InvalidParameterError(
            parameter,
            f"must be at least one tick of the arrival's unit ({unit!r}), got {interval!r}",
        )
    if ticks >= _MAX_INTERVAL:
        raise InvalidParameterError(
            parameter,
            f"must be under 2^61 ticks of the arrival's unit ({unit!r}), got {interval!r}: "
            "on a coarser emission grid no arrival time can be placed",
        )
    return ticks


def whole_ticks(value: timedelta, unit: str) -> bool:
    """Whether ``value`` is a whole number of ticks of ``unit`` (:func:`to_ticks`
    truncates one that is not)."""
    check_unit(unit)
    return nanoseconds(value) % (1_000_000_000 // TICKS_PER_SECOND[unit]) == 0


#: The duration suffixes floodmark writes (and the command line reads), longest first,
#: as microseconds.
MICROS_PER_SUFFIX: dict[str, int] = {
    "d": 86_400_000_000,
    "h": 3_600_000_000,
    "m": 60_000_000,
    "s": 1_000_000,
    "ms": 1_000,
    "us": 1,
}


def format_duration(value: timedelta) -> str:
    """The shortest exact spelling of ``value``: ``5s``, ``200ms``, ``1m``, ``1500us``."""
    micros = value // timedelta(microseconds=1)
    if not micros:
        return "0s"
    unit, size = next((u, n) for u, n in MICROS_PER_SUFFIX.items() if micros % n == 0)
    return f"{micros // size}{unit}"


__all__ = [
    "MICROS_PER_SUFFIX",
    "Duration",
    "Unit",
    "as_int",
    "check_int64",
    "check_unit",
    "format_duration",
    "interval_ticks",
    "nanoseconds",
    "to_ticks",
    "whole_ticks",
]
