"""Watermark strategies: what Flink's ``WatermarkStrategy`` builds, as immutable values.

A :class:`WatermarkStrategy` describes a watermark generator (bounded
out-of-orderness, monotonous, punctuated, processing-time lag, none, or a user Python
generator), optionally with idleness detection and a timestamp column. It creates
generator objects with :meth:`WatermarkStrategy.create_generator`, and
:func:`floodmark.watermarks.drive` runs it over whole arrays.
"""

from __future__ import annotations

import pickle
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Literal, Protocol

from floodmark import _core
from floodmark.exceptions import InvalidParameterError, SnapshotError
from floodmark.time import Duration, as_int, check_int64, check_unit, to_ticks

Kind = Literal[
    "bounded_out_of_orderness", "punctuated", "processing_time_lag", "no_watermarks", "python"
]
EmissionKind = Literal["watermark", "idle", "active"]


@dataclass(frozen=True)
class Emission:
    """One thing a generator, an output or a valve emitted.

    Attributes:
        kind: ``"watermark"``, ``"idle"`` or ``"active"``.
        watermark: the watermark in ticks for ``"watermark"``, else ``None``.
    """

    kind: EmissionKind
    watermark: int | None = None


def _emissions(raw: list[tuple[str, int | None]]) -> list[Emission]:
    return [Emission(k, w) for k, w in raw]  # type: ignore[arg-type]


class WatermarkOutput(Protocol):
    """What a user generator writes to (Flink's ``WatermarkOutput``)."""

    def emit_watermark(self, ts: int) -> None:
        """Emits a watermark of ``ts`` ticks."""

    def mark_idle(self) -> None:
        """Marks the stream idle."""

    def mark_active(self) -> None:
        """Marks the stream active."""


class UserGenerator(Protocol):
    """A user watermark generator (Flink's ``WatermarkGenerator``)."""

    def on_event(self, timestamp: int, output: WatermarkOutput) -> None:
        """Called for every record, with its event timestamp in ticks."""

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        """Called periodically (every emit interval)."""


class _Collector:
    """The :class:`WatermarkOutput` handed to user generators: it records the calls."""

    def __init__(self) -> None:
        self.out: list[Emission] = []

    def emit_watermark(self, ts: int) -> None:
        self.out.append(Emission("watermark", check_int64(ts, "ts")))

    def mark_idle(self) -> None:
        self.out.append(Emission("idle"))

    def mark_active(self) -> None:
        self.out.append(Emission("active"))


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


def _check_column(value: object, parameter: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidParameterError(
            parameter,
            f"expected a non-empty column name, got {value!r}",
        )
    return value


class WatermarkGenerator:
    """A live watermark generator created by :meth:`WatermarkStrategy.create_generator`.

    Every call returns what the generator emitted, in order. ``now`` is the
    processing-time clock in ticks; only idleness and processing-time lag read it.
    """

    def __init__(self, strategy: WatermarkStrategy, unit: str) -> None:
        self._strategy = strategy
        self._unit = check_unit(unit)
        self._needs_clock = strategy.kind == "processing_time_lag" or (
            strategy.idle_timeout is not None
        )
        idle = (
            None
            if strategy.idle_timeout is None
            else to_ticks(strategy.idle_timeout, unit, "idle_timeout")
        )
        if idle is not None and idle <= 0:
            raise InvalidParameterError(
                "idle_timeout",
                f"{strategy.idle_timeout!r} is 0 ticks of "
                f"unit {unit!r}; it must be greater than zero",
            )
        self._native: _core._Generator | None = None
        self._python: _PythonGenerator | None = None
        if strategy.kind == "python":
            assert strategy.factory is not None
            self._python = _PythonGenerator(strategy.factory(), idle)
        else:
            param = 0
            if strategy.bound is not None:
                param = to_ticks(strategy.bound, unit, "bound")
            elif strategy.lag is not None:
                param = to_ticks(strategy.lag, unit, "lag")
            self._native = _core._Generator(strategy.kind, param, idle)

    @property
    def strategy(self) -> WatermarkStrategy:
        """The strategy this generator was created from."""
        return self._strategy

    @property
    def unit(self) -> str:
        """The tick unit of timestamps and of the clock."""
        return self._unit

    def on_event(self, timestamp: int, marker: int | None = None) -> list[Emission]:
        """Feeds one record (Flink's ``onEvent``).

        Args:
            timestamp: the record's event time in ticks.
            marker: for punctuated generators, the watermark the record carries.

        Returns:
            What the generator emitted (only punctuated and user generators emit here).
        """
        timestamp = check_int64(timestamp, "timestamp")
        if marker is not None:
            marker = check_int64(marker, "marker")
        if self._native is not None:
            return _emissions(self._native.on_event(timestamp, marker))
        assert self._python is not None
        return self._python.on_event(timestamp)

    def on_periodic_emit(self, now: int | None = None) -> list[Emission]:
        """Flink's ``onPeriodicEmit`` with the clock reading ``now`` ticks.

        Raises:
            InvalidParameterError: ``now`` is missing but the generator needs the clock.
        """
        if now is None:
            if self._needs_clock:
                raise InvalidParameterError(
                    "now",
                    "this generator reads the clock "
                    "(idleness or processing-time lag); pass now=<ticks>",
                )
            now = 0
        now = check_int64(now, "now")
        if self._native is not None:
            return _emissions(self._native.on_periodic_emit(now))
        assert self._python is not None
        return self._python.on_periodic_emit(now)

    @property
    def _last_grid(self) -> int | None:
        """The last grid time :func:`~floodmark.watermarks.drive` ran this generator to
        (``None`` before any); part of the snapshot."""
        if self._native is not None:
            return self._native.last_grid
        assert self._python is not None
        return self._python.last_grid

    @_last_grid.setter
    def _last_grid(self, value: int | None) -> None:
        if self._native is not None:
            self._native.last_grid = value
        else:
            assert self._python is not None
            self._python.last_grid = value

    def snapshot(self) -> bytes:
        """The generator's state as bytes, including the output state and the last
        grid time that :func:`~floodmark.watermarks.drive` continues from (user
        generators are pickled), with a checksum."""
        if self._native is not None:
            return self._native.snapshot()
        assert self._python is not None
        return self._python.snapshot()

    def restore(self, data: bytes) -> None:
        """Restores a state taken by :meth:`snapshot` of a generator of the same
        strategy (kind, bound or lag, idleness timeout; for a user generator, the
        timeout and the generator's class).

        Raises:
            SnapshotError: ``data`` is corrupt, or a snapshot of another kind of object
                or of a generator of another configuration (the message says which).
        """
        if self._native is not None:
            self._native.restore(data)
        else:
            assert self._python is not None
            self._python.restore(data)

    def __repr__(self) -> str:
        return f"WatermarkGenerator({self._strategy!r}, unit={self._unit!r})"


_PY_MAGIC = b"FMKPY2"


class _PythonGenerator:
    """A user generator with Flink's ``WatermarksWithIdleness`` timer, in Python."""

    def __init__(self, user: UserGenerator, idle_timeout: int | None) -> None:
        for method in ("on_event", "on_periodic_emit"):
            if not callable(getattr(user, method, None)):
                raise InvalidParameterError(
                    "factory",
                    f"the generator it returned has no `{method}` method",
                )
        self.user = user
        self.timeout = idle_timeout
        self.counter = 0
        self.last_counter = 0
        self.start = 0
        self.idle_now = False
        # The output filter state `drive` continues from (WatermarkToDataOutput).
        self.out_max = -(2**63)
        self.out_idle = False
        self.last_grid: int | None = None

    def on_event(self, timestamp: int) -> list[Emission]:
        out = _Collector()
        self.user.on_event(timestamp, out)
        self.counter += 1
        return out.out

    def _check_if_idle(self, now: int) -> bool:
        assert self.timeout is not None
        if self.counter != self.last_counter:
            self.last_counter = self.counter
            self.start = 0
            return False
        if self.start == 0:
            self.start = now
            return False
        diff = (now - self.start + 2**63) % 2**64 - 2**63  # Java long subtraction
        return diff > self.timeout

    def on_periodic_emit(self, now: int) -> list[Emission]:
        out = _Collector()
        if self.timeout is not None and self._check_if_idle(now):
            if not self.idle_now:
                self.idle_now = True
                out.mark_idle()
            return out.out
        self.idle_now = False
        self.user.on_periodic_emit(out)
        return out.out

    #: The state a snapshot holds, after the idle timeout and the user generator.
    _STATE = ("counter", "last_counter", "start", "idle_now", "out_max", "out_idle", "last_grid")

    def snapshot(self) -> bytes:
        """``FMKPY2``, the CRC-32 of the pickle (4 bytes, little-endian), the pickle of
        the idle timeout, the user generator and the state."""
        state = (self.timeout, self.user, *(getattr(self, name) for name in self._STATE))
        body = pickle.dumps(state)
        return _PY_MAGIC + zlib.crc32(body).to_bytes(4, "little") + body

    def restore(self, data: bytes) -> None:
        if not data.startswith(_PY_MAGIC):
            raise SnapshotError("cannot restore snapshot: not a Python generator snapshot")
        head = len(_PY_MAGIC) + 4
        body = data[head:]
        if (
            len(data) < head
            or zlib.crc32(body).to_bytes(4, "little") != data[len(_PY_MAGIC) : head]
        ):
            raise SnapshotError(
                "cannot restore snapshot: the snapshot is corrupt or truncated (checksum mismatch)"
            )
        try:
            timeout, user, *rest = pickle.loads(body)
            state = dict(zip(self._STATE, rest, strict=True))
        except Exception as e:  # a pickle of another version can raise nearly anything
            raise SnapshotError(f"cannot restore snapshot: {e}") from e
        if timeout != self.timeout or type(user) is not type(self.user):
            raise SnapshotError(
                "cannot restore snapshot: the snapshot was taken from a generator "
                f"{type(user).__name__} with idle timeout {timeout}, this one is "
                f"{type(self.user).__name__} with idle timeout {self.timeout}"
            )
        self.user = user
        for name, value in state.items():
            setattr(self, name, value)


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

        Raises:
            InvalidParameterError: ``bound`` is negative or not a duration.
        """
        return cls(
            _Spec("bounded_out_of_orderness", bound=_check_duration(bound, "bound", positive=False))
        )

    @classmethod
    def for_monotonous_timestamps(cls) -> WatermarkStrategy:
        """Ascending timestamps: bounded out-of-orderness with bound 0."""
        return cls(_Spec("bounded_out_of_orderness", bound=timedelta(0), monotonous=True))

    @classmethod
    def for_punctuated(cls, marker_column: str) -> WatermarkStrategy:
        """Emits the watermark carried by a record in ``marker_column`` (if not null),
        right after the record."""
        return cls(_Spec("punctuated", marker_column=_check_column(marker_column, "marker_column")))

    @classmethod
    def for_processing_time_lag(cls, lag: Duration) -> WatermarkStrategy:
        """Periodically emits the processing-time clock minus ``lag``.

        Raises:
            InvalidParameterError: ``lag`` is negative or not a duration.
        """
        return cls(_Spec("processing_time_lag", lag=_check_duration(lag, "lag", positive=False)))

    @classmethod
    def no_watermarks(cls) -> WatermarkStrategy:
        """Never emits a watermark."""
        return cls(_Spec("no_watermarks"))

    @classmethod
    def for_generator(cls, factory: Callable[[], UserGenerator]) -> WatermarkStrategy:
        """A user generator: ``factory()`` returns an object with
        ``on_event(timestamp, output)`` and ``on_periodic_emit(output)``. Runs in
        Python (slower), with the same driver semantics.

        Raises:
            InvalidParameterError: ``factory`` is not callable.
        """
        if not callable(factory):
            raise InvalidParameterError(
                "factory",
                f"expected a zero-argument callable, got {type(factory).__name__}",
            )
        return cls(_Spec("python", factory=factory))

    # --- modifiers ---------------------------------------------------------------

    def with_idleness(self, timeout: Duration) -> WatermarkStrategy:
        """Marks the stream idle after ``timeout`` without events (Flink's
        ``withIdleness``).

        Raises:
            InvalidParameterError: ``timeout`` is zero, negative or not a duration.
        """
        t = _check_duration(timeout, "idle_timeout", positive=True)
        return WatermarkStrategy(replace(self._spec, idle_timeout=t))

    def with_timestamp_assigner(self, column: str) -> WatermarkStrategy:
        """Takes event timestamps from ``column``."""
        c = _check_column(column, "column")
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


__all__ = [
    "Emission",
    "UserGenerator",
    "WatermarkGenerator",
    "WatermarkOutput",
    "WatermarkStrategy",
]
