"""Live watermark generators, and the protocol a user's own generator follows.

:meth:`WatermarkStrategy.create_generator <floodmark.WatermarkStrategy.create_generator>`
returns a :class:`WatermarkGenerator`, which runs call by call (Flink's ``onEvent`` /
``onPeriodicEmit``) or over whole arrays with :func:`floodmark.drive`. Every kind runs
in the engine: the built-in generators natively, a user's Python generator
(:class:`UserGenerator`, made by ``WatermarkStrategy.for_generator``) through the same
native driver and idleness timer, which call back into its two methods.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from floodmark import _core
from floodmark.exceptions import InvalidParameterError
from floodmark.time import check_int64, check_unit, to_ticks
from floodmark.vocabulary import snapshot_bytes

if TYPE_CHECKING:
    from floodmark.strategy import WatermarkStrategy

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
    """A user watermark generator (Flink's ``WatermarkGenerator``).

    Example:
        >>> from floodmark import WatermarkStrategy, drive
        >>> class Ascending:
        ...     def __init__(self) -> None:
        ...         self.max = -(2**63)
        ...     def on_event(self, timestamp: int, output: WatermarkOutput) -> None:
        ...         self.max = max(self.max, timestamp)
        ...     def on_periodic_emit(self, output: WatermarkOutput) -> None:
        ...         output.emit_watermark(self.max - 1)
        >>> res = drive(WatermarkStrategy.for_generator(Ascending), [5, 9], [0, 100],
        ...             emit_interval=100)
        >>> res.record_watermark.to_pylist()   # the second record saw the emission at 0
        [-9223372036854775808, 4]
    """

    def on_event(self, timestamp: int, output: WatermarkOutput) -> None:
        """Called for every record, with its event timestamp in ticks."""

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        """Called periodically (every emit interval)."""


class WatermarkGenerator:
    """A live watermark generator created by :meth:`WatermarkStrategy.create_generator`.

    Every call returns what the generator emitted, in order. ``now`` is the
    processing-time clock in ticks; only idleness and processing-time lag read it. An
    exception a user generator raises propagates unchanged.
    """

    def __init__(self, strategy: WatermarkStrategy, unit: str) -> None:
        self._strategy = strategy
        self._unit = check_unit(unit)
        self._needs_clock = strategy.kind == "processing_time_lag" or (
            strategy.idle_timeout is not None
        )
        idle = None
        if strategy.idle_timeout is not None:
            idle = to_ticks(strategy.idle_timeout, unit, "idle_timeout")
            if idle <= 0:
                raise InvalidParameterError(
                    "idle_timeout",
                    f"{strategy.idle_timeout!r} is 0 ticks of unit {unit!r}; it must be "
                    "greater than zero",
                )
        param = 0
        if strategy.bound is not None:
            param = to_ticks(strategy.bound, unit, "bound")
        elif strategy.lag is not None:
            param = to_ticks(strategy.lag, unit, "lag")
        user = None if strategy.factory is None else strategy.factory()
        if strategy.factory is not None and user is None:
            raise InvalidParameterError(
                "factory", "it returned None; it must return a new generator object"
            )
        self._inner = _core._Generator(strategy.kind, param, idle, user)

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
        return _emissions(self._inner.on_event(timestamp, marker))

    def on_periodic_emit(self, now: int | None = None) -> list[Emission]:
        """Flink's ``onPeriodicEmit`` with the clock reading ``now`` ticks.

        Raises:
            InvalidParameterError: ``now`` is missing but the generator needs the clock.
        """
        if now is None:
            if self._needs_clock:
                raise InvalidParameterError(
                    "now",
                    "this generator reads the clock (idleness or processing-time lag); "
                    "pass now=<ticks>",
                )
            now = 0
        return _emissions(self._inner.on_periodic_emit(check_int64(now, "now")))

    def check_grid_span(self, first: int, last: int) -> None:
        """Refuses, as :func:`~floodmark.drive` would, the grid times ``first..=last``
        (grid indexes: times over the emit interval) for a generator called at every
        one (processing-time lag, a user's) when they are more than 2^28; for a caller
        that drives a channel in chunks, each of which is under it.

        Raises:
            InvalidParameterError: naming ``emit_interval``.
        """
        self._inner.check_grid_span(check_int64(first, "first"), check_int64(last, "last"))

    def snapshot(self) -> bytes:
        """The generator's state as bytes, including the output state and the last
        grid time that :func:`~floodmark.drive` continues from, with a checksum (a
        user generator's object is pickled inside)."""
        return self._inner.snapshot()

    def restore(self, data: bytes) -> None:
        """Restores a state taken by :meth:`snapshot` of a generator of the same
        strategy (kind, bound or lag, idleness timeout; for a user generator, the
        timeout and the generator's class).

        Raises:
            SnapshotError: ``data`` is corrupt, or a snapshot of another kind of object
                or of a generator of another configuration (the message says which).
        """
        self._inner.restore(snapshot_bytes(data))

    def __repr__(self) -> str:
        return f"WatermarkGenerator({self._strategy!r}, unit={self._unit!r})"


__all__ = [
    "Emission",
    "UserGenerator",
    "WatermarkGenerator",
    "WatermarkOutput",
]
