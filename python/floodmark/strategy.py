"""Watermark strategies: what Flink's ``WatermarkStrategy`` builds, as immutable values.

A :class:`WatermarkStrategy` describes a watermark generator (bounded
out-of-orderness, monotonous, punctuated, processing-time lag, none, or a user Python
generator), optionally with idleness detection and a timestamp column. It creates
generator objects (:mod:`floodmark.generator`) with
:meth:`WatermarkStrategy.create_generator`, and :func:`floodmark.drive` runs it over
whole arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Literal

from floodmark.exceptions import InvalidParameterError
from floodmark.generator import UserGenerator, WatermarkGenerator
from floodmark.time import Duration, as_int
from floodmark.vocabulary import column_name

Kind = Literal[
    "bounded_out_of_orderness", "punctuated", "processing_time_lag", "no_watermarks", "python"
]


def _check_duration(value: object, parameter: str, *, positive: bool) -> Duration:
    whole = as_int(value)
    if whole is not None:
        value = whole
    elif not isinstance(value, timedelta):
        raise InvalidParameterError(
            parameter,
            f"expected a datetime.timedelta or an int of ticks, got {type(value).__name__}",
        )
    zero: Duration = timedelta(0) if isinstance(value, timedelta) else 0
    if value < zero or (positive and value == zero):  # type: ignore[operator]
        need = "greater than zero" if positive else ">= 0"
        raise InvalidParameterError(parameter, f"must be {need}, got {value!r}")
    return value


#: How often periodic generators emit, by default: Flink's
#: ``pipeline.auto-watermark-interval`` (200 ms). Every entry point's ``emit_interval``.
DEFAULT_EMIT_INTERVAL = timedelta(milliseconds=200)


@dataclass(frozen=True)
class _Spec:
    kind: Kind
    bound: Duration | None = None
    lag: Duration | None = None
    marker_column: str | None = None
    factory: Callable[[], UserGenerator] | None = None
    idle_timeout: Duration | None = None
    timestamp_column: str | None = None
    monotonous: bool = False


class WatermarkStrategy:
    """An immutable description of how to generate watermarks (Flink's
    ``WatermarkStrategy``). Every method returns a new strategy.

    Durations are ``datetime.timedelta`` or ``int`` ticks (of the unit chosen when the
    strategy is used).

    Example:
        >>> from datetime import timedelta
        >>> s = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=5))
        >>> s.with_idleness(timedelta(minutes=1)).is_shift_invariant
        True
    """

    __slots__ = ("_spec",)

    def __init__(self, _spec: _Spec) -> None:
        self._spec = _spec

    # --- constructors ------------------------------------------------------------

    @classmethod
    def for_bounded_out_of_orderness(cls, bound: Duration) -> WatermarkStrategy:
        """Watermark = largest timestamp seen - ``bound`` - 1, emitted periodically.

        Example:
            >>> from datetime import timedelta
            >>> s = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=5))
            >>> s.kind, s.bound
            ('bounded_out_of_orderness', datetime.timedelta(seconds=5))

        Raises:
            InvalidParameterError: ``bound`` is negative or not a duration.
        """
        return cls(
            _Spec("bounded_out_of_orderness", bound=_check_duration(bound, "bound", positive=False))
        )

    @classmethod
    def for_monotonous_timestamps(cls) -> WatermarkStrategy:
        """Ascending timestamps: bounded out-of-orderness with bound 0.

        Example:
            >>> WatermarkStrategy.for_monotonous_timestamps().bound
            datetime.timedelta(0)
        """
        return cls(_Spec("bounded_out_of_orderness", bound=timedelta(0), monotonous=True))

    @classmethod
    def for_punctuated(cls, marker_column: str) -> WatermarkStrategy:
        """Emits the watermark carried by a record in ``marker_column`` (if not null),
        right after the record.

        Example:
            >>> from floodmark import drive
            >>> s = WatermarkStrategy.for_punctuated("marker")
            >>> r = drive(s, [5, 7, 9], [0, 10, 20], marker=[None, 6, None])
            >>> r.record_watermark.to_pylist()[2]  # emitted right after the second record
            6
        """
        return cls(_Spec("punctuated", marker_column=column_name(marker_column, "marker_column")))

    @classmethod
    def for_processing_time_lag(cls, lag: Duration) -> WatermarkStrategy:
        """Periodically emits the processing-time clock minus ``lag``.

        Example:
            >>> from floodmark import drive
            >>> s = WatermarkStrategy.for_processing_time_lag(50)
            >>> drive(s, [1, 2], [100, 300]).emissions["watermark"].to_pylist()
            [150, 350]

        Raises:
            InvalidParameterError: ``lag`` is negative or not a duration.
        """
        return cls(_Spec("processing_time_lag", lag=_check_duration(lag, "lag", positive=False)))

    @classmethod
    def no_watermarks(cls) -> WatermarkStrategy:
        """Never emits a watermark.

        Example:
            >>> from floodmark import drive
            >>> drive(WatermarkStrategy.no_watermarks(), [1, 2], [0, 400]).emissions.num_rows
            0
        """
        return cls(_Spec("no_watermarks"))

    @classmethod
    def for_generator(cls, factory: Callable[[], UserGenerator]) -> WatermarkStrategy:
        """A user generator: ``factory()`` returns an object with
        ``on_event(timestamp, output)`` and ``on_periodic_emit(output)`` (see
        :class:`~floodmark.generator.UserGenerator`). The engine's driver and
        idleness timer run it, calling back into Python for each record and periodic
        emission (slower than a built-in generator); its snapshots pickle the object.

        Raises:
            InvalidParameterError: ``factory`` is not callable, or not with no
                arguments (a class whose ``__init__`` takes a bound, say: pass
                ``functools.partial(MyGenerator, bound)`` or a lambda).
        """
        import inspect

        if not callable(factory):
            raise InvalidParameterError(
                "factory",
                f"expected a zero-argument callable, got {type(factory).__name__}",
            )
        try:
            inspect.signature(factory).bind()
        except TypeError as err:
            raise InvalidParameterError(
                "factory",
                f"expected a zero-argument callable, but calling it with none fails ({err}); "
                "bind its arguments with functools.partial or a lambda",
            ) from None
        except ValueError:  # no signature to read (some builtins): called as it is
            pass
        return cls(_Spec("python", factory=factory))

    # --- modifiers ---------------------------------------------------------------

    def with_idleness(self, timeout: Duration) -> WatermarkStrategy:
        """Marks the stream idle after ``timeout`` without events (Flink's
        ``withIdleness``).

        Example:
            >>> from floodmark import drive
            >>> s = WatermarkStrategy.for_monotonous_timestamps().with_idleness(500)
            >>> r = drive(s, [10], [0], until=1000)
            >>> list(zip(r.emissions["time"].to_pylist(), r.emissions["kind"].to_pylist()))
            [(0, 'watermark'), (800, 'idle')]

        Raises:
            InvalidParameterError: ``timeout`` is zero, negative or not a duration.
        """
        t = _check_duration(timeout, "idle_timeout", positive=True)
        return WatermarkStrategy(replace(self._spec, idle_timeout=t))

    def with_timestamp_assigner(self, column: str) -> WatermarkStrategy:
        """Takes event timestamps from ``column``."""
        c = column_name(column, "column")
        return WatermarkStrategy(replace(self._spec, timestamp_column=c))

    # --- properties --------------------------------------------------------------

    @property
    def kind(self) -> Kind:
        """The generator kind."""
        return self._spec.kind

    @property
    def bound(self) -> Duration | None:
        """The out-of-orderness bound (``timedelta(0)`` for monotonous), else ``None``."""
        return self._spec.bound

    @property
    def lag(self) -> Duration | None:
        """The processing-time lag, else ``None``."""
        return self._spec.lag

    @property
    def idle_timeout(self) -> Duration | None:
        """The idleness timeout, or ``None`` without idleness."""
        return self._spec.idle_timeout

    @property
    def timestamp_column(self) -> str | None:
        """The event-timestamp column, if one was assigned."""
        return self._spec.timestamp_column

    @property
    def marker_column(self) -> str | None:
        """The punctuation column of a punctuated strategy."""
        return self._spec.marker_column

    @property
    def factory(self) -> Callable[[], UserGenerator] | None:
        """The user generator factory of a ``python`` strategy."""
        return self._spec.factory

    @property
    def is_shift_invariant(self) -> bool:
        """True if shifting every timestamp and the clock by d shifts every watermark by
        d (bounded out-of-orderness and monotonous, with or without idleness)."""
        return self._spec.kind == "bounded_out_of_orderness"

    # --- use -----------------------------------------------------------------------

    def create_generator(self, unit: str = "ms") -> WatermarkGenerator:
        """A fresh generator; durations become ticks of ``unit``.

        Raises:
            InvalidParameterError: ``unit`` is unknown, or the idle timeout is 0 ticks.
        """
        return WatermarkGenerator(self, unit)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WatermarkStrategy) and self._spec == other._spec

    def __hash__(self) -> int:
        return hash(self._spec)

    def __repr__(self) -> str:
        s = self._spec
        if s.monotonous:
            text = "WatermarkStrategy.for_monotonous_timestamps()"
        elif s.kind == "bounded_out_of_orderness":
            text = f"WatermarkStrategy.for_bounded_out_of_orderness({s.bound!r})"
        elif s.kind == "punctuated":
            text = f"WatermarkStrategy.for_punctuated({s.marker_column!r})"
        elif s.kind == "processing_time_lag":
            text = f"WatermarkStrategy.for_processing_time_lag({s.lag!r})"
        elif s.kind == "no_watermarks":
            text = "WatermarkStrategy.no_watermarks()"
        else:
            text = f"WatermarkStrategy.for_generator({s.factory!r})"
        if s.idle_timeout is not None:
            text += f".with_idleness({s.idle_timeout!r})"
        if s.timestamp_column is not None:
            text += f".with_timestamp_assigner({s.timestamp_column!r})"
        return text


def check_strategy(value: object) -> WatermarkStrategy:
    """``value`` if it is a :class:`WatermarkStrategy`, else a clear error naming
    ``strategy`` (every entry point's one check of it)."""
    if not isinstance(value, WatermarkStrategy):
        raise InvalidParameterError(
            "strategy", f"expected a floodmark.WatermarkStrategy, got {type(value).__name__}"
        )
    return value


def event_time_column(strategy: object, event_time: object) -> str:
    """The event-time column's name: ``event_time`` if given, else the strategy's
    timestamp assigner's.

    Raises:
        InvalidParameterError: ``strategy`` is not a strategy, or no name (or not a
            ``str``) is given either way, naming ``event_time``.
    """
    checked = check_strategy(strategy)
    name = checked.timestamp_column if event_time is None else event_time
    if name is None:
        raise InvalidParameterError(
            "event_time",
            "name the event-time column, either "
            "event_time='ts' or strategy.with_timestamp_assigner('ts')",
        )
    return column_name(name, "event_time")


__all__ = ["WatermarkStrategy", "check_strategy", "event_time_column"]
