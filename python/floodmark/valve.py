"""Combining channels: Flink's ``StatusWatermarkValve`` and
``WatermarkOutputMultiplexer``.

* :func:`combine` runs the output streams of many channels (e.g. from
  :func:`floodmark.drive`) through the valve and returns the combined timeline.
* :class:`Valve` and :class:`Multiplexer` expose the two classes call by call.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

import pyarrow as pa

from floodmark import _core
from floodmark.arrays import field_index, one_batch, to_int64_array, to_string_array
from floodmark.exceptions import InvalidParameterError
from floodmark.generator import Emission, _emissions
from floodmark.time import I64_MAX, as_int, check_int64
from floodmark.vocabulary import snapshot_bytes


def check_num_channels(num_channels: object) -> int:
    """``num_channels`` as an ``int`` (the engine refuses more than it supports, naming
    it too); a clear error for anything else."""
    n = as_int(num_channels)
    if n is None or not 0 <= n <= I64_MAX:
        raise InvalidParameterError(
            "num_channels",
            f"expected an int >= 0, got {num_channels!r}",
        )
    return n


#: An empty table of emissions (a Table without chunks has no record batch).
_NO_EMISSIONS = pa.RecordBatch.from_pylist(
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


def emission_batch(emissions: pa.RecordBatch | pa.Table) -> pa.RecordBatch:
    """Channels' output streams (``channel``, ``time``, ``kind``, ``watermark``) as the
    engine's one record batch of them.

    Raises:
        InvalidParameterError: ``emissions`` is not a Table or RecordBatch.
        InvalidInputError: a missing or mistyped column, or a table too large for one
            record batch (a column over 2 GiB).
    """
    if isinstance(emissions, pa.Table):
        advice = "pass it in parts to TimelineBuilder.push_emissions"
        whole = one_batch(emissions, "emissions", advice)
        emissions = whole if whole is not None else _NO_EMISSIONS
    if not isinstance(emissions, pa.RecordBatch):
        raise InvalidParameterError(
            "emissions",
            f"expected a pyarrow Table or RecordBatch, got {type(emissions).__name__}",
        )
    cols = {}
    for name in ("channel", "time", "kind", "watermark"):
        col = emissions.column(field_index(emissions.schema, name))
        cols[name] = (
            to_string_array(col, name)
            if name == "kind"
            else to_int64_array(col, name, nullable=name == "watermark")
        )
    return pa.RecordBatch.from_arrays(list(cols.values()), names=list(cols))


def combine(emissions: pa.RecordBatch | pa.Table, *, num_channels: int) -> pa.RecordBatch:
    """Combines per-channel output streams through Flink's ``StatusWatermarkValve``.

    Args:
        emissions: columns ``channel`` int64, ``time`` int64, ``kind`` string,
            ``watermark`` int64; the rows of each channel in that channel's order.
            Rows are merged by ``(time, channel)``, stably.
        num_channels: the number of input channels of the valve.

    Returns:
        One row per time at which the combined watermark or status changed (the
        state after all of that time's rows, so two valve emissions at one time are
        one row): ``time`` int64, ``watermark`` int64 (combined, after the change),
        ``status`` string (``"active"``/``"idle"``),
        ``min_channel`` int64 (the aligned channel holding the minimum, or null),
        ``advance`` bool (the combined watermark grew: an advance for the windows).

    Raises:
        InvalidInputError: a missing or mistyped column, or a bad kind.
        ChannelOutOfRangeError: a channel outside ``0..num_channels``.
    """
    n = check_num_channels(num_channels)
    batch = emission_batch(emissions)
    result: pa.RecordBatch = _core.combine(batch, n)
    return result


class Valve:
    """Flink's ``StatusWatermarkValve`` over ``num_channels`` input channels.

    The combined watermark is the minimum over the active channels. An idle channel
    leaves the minimum; when it resumes it rejoins only once caught up to the
    combined watermark, so the combined watermark never goes back.

    Example:
        >>> v = Valve(2)
        >>> v.input_watermark(0, 10), v.input_watermark(1, 5)
        ([], [Emission(kind='watermark', watermark=5)])
        >>> v.input_status(1, "idle")  # channel 0 alone decides
        [Emission(kind='watermark', watermark=10)]
        >>> v.input_status(1, "active"), v.input_watermark(1, 7)  # behind: not counted
        ([], [])
        >>> v.input_watermark(0, 20), v.watermark
        ([Emission(kind='watermark', watermark=20)], 20)

    Raises:
        InvalidParameterError: ``num_channels`` is negative.
    """

    def __init__(self, num_channels: int) -> None:
        self._inner = _core._Valve(check_num_channels(num_channels))

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
        string, ``watermark`` int64 columns. Every row is checked first: on an error
        (a channel out of range, an unknown kind) the valve is unchanged."""
        result: pa.RecordBatch = self._inner.process(
            to_int64_array(channel, "channel"),
            to_string_array(kind, "kind"),
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
        self._inner.restore(snapshot_bytes(data))

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


def _output_id(output_id: object) -> str:
    if not isinstance(output_id, str):
        raise InvalidParameterError(
            "output_id", f"expected a str, got {type(output_id).__name__} {output_id!r}"
        )
    return output_id


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
            InvalidParameterError: ``output_id`` is not a ``str``.
        """
        self._inner.register_output(_output_id(output_id))

    def unregister_output(self, output_id: str) -> bool:
        """Removes an output; True if it was registered. Does not recompute."""
        return self._inner.unregister_output(_output_id(output_id))

    def emit_watermark(
        self, output_id: str, wm: int, *, via: Via = "immediate"
    ) -> MultiplexerResult:
        """``emitWatermark`` on the immediate or deferred output of ``output_id``.

        Raises:
            InvalidParameterError: no output ``output_id``, or a bad ``via``.
        """
        return _mux_result(
            self._inner.emit_watermark(_output_id(output_id), check_int64(wm, "wm"), _deferred(via))
        )

    def mark_idle(self, output_id: str, *, via: Via = "immediate") -> MultiplexerResult:
        """``markIdle`` on the output ``output_id``."""
        return _mux_result(self._inner.mark(_output_id(output_id), True, _deferred(via)))

    def mark_active(self, output_id: str, *, via: Via = "immediate") -> MultiplexerResult:
        """``markActive`` on the output ``output_id``."""
        return _mux_result(self._inner.mark(_output_id(output_id), False, _deferred(via)))

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
        self._inner.restore(snapshot_bytes(data))


__all__ = [
    "ListenerEvent",
    "Multiplexer",
    "MultiplexerResult",
    "Valve",
    "Via",
    "combine",
]
