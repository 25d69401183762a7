"""The combined watermark timeline of many channels, built incrementally (in Rust).

:class:`TimelineBuilder` is the one place where channels' generators and Flink's valve
run together: it takes rows in arrival order (records, or one row per non-empty
``(channel, bucket)`` of the emission grid with the largest event time of its records),
chunk by chunk, and yields the watermarks in force for each row, the combined timeline
(with its advances) and, if asked for, every channel's own output stream. Memory is
bounded by the number of channels, and the work grows with the rows and channels, not
with the time span (calls that cannot emit anything new are skipped). Its state
snapshots between chunks; a stream cut into any chunks gives the output of the whole.

:func:`floodmark.replay` and the Spark pipeline (``floodmark.spark``) are thin callers
of it. The exact timing model is in ``rust/watermark/builder.rs`` and
``docs/semantics.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from floodmark import _core
from floodmark.arrays import to_int64_array, without_view
from floodmark.exceptions import InvalidInputError, InvalidParameterError, SchemaError
from floodmark.strategy import DEFAULT_EMIT_INTERVAL, WatermarkStrategy, check_strategy
from floodmark.time import I64_MIN, Duration, as_int, check_int64, interval_ticks, to_ticks
from floodmark.valve import check_num_channels
from floodmark.vocabulary import flag, snapshot_bytes


class InForce(NamedTuple):
    """The watermarks in force when the rows of one :meth:`TimelineBuilder.push` arrived.

    Attributes:
        channel_watermark: ``int64`` per row: its channel's watermark (``-2**63``: none).
        watermark: ``int64`` per row: the combined watermark (``-2**63``: none).
    """

    channel_watermark: pa.Array
    watermark: pa.Array


#: The order of one channel's output rows at one grid time, as the builder emits them
#: (one periodic call's output): a channel coming back from idle is marked active
#: before its watermark; idle comes alone.
EMISSION_KINDS = ("active", "watermark", "idle")


def in_emission_order(emissions: pa.Table) -> pa.Table:
    """Channels' output rows (``channel``, ``time``, ``kind``, ...) read back from
    storage, where row order is not kept, in the builder's order: by time, then channel
    (the valve's order: channel values sorted), then kind (:data:`EMISSION_KINDS`)."""
    rank = pc.index_in(emissions.column("kind"), value_set=pa.array(EMISSION_KINDS))
    ranked = emissions.append_column("__fm_rank", rank)
    keys = [("time", "ascending"), ("channel", "ascending"), ("__fm_rank", "ascending")]
    return ranked.sort_by(keys).drop(["__fm_rank"])


def channel_index(values: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, np.ndarray]:
    """``(channels, index)``: the distinct channel values in the valve's order (sorted)
    and each value's index among them. At one time, channels reach the valve in this
    order (the documented tie rule). A dictionary (pandas' categorical) counts by its
    values, a string view as a string."""
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    values = without_view(values)  # a view's values, as its large type
    channels = pc.unique(values)
    channels = channels.take(pc.sort_indices(channels))
    index = pc.index_in(values, value_set=channels)
    return channels, index.to_numpy(zero_copy_only=False).astype(np.int64)


#: How a bounded input ends: every channel together after all the input (a slice of an
#: ongoing stream), or each channel right after its own last record (data that truly
#: ends per partition, as a bounded Flink source's splits do). See ``docs/semantics.md``.
END_OF_INPUT = ("together", "per_channel")


def check_topology(source_parallelism: object, topic: object, end_of_input: object) -> int | None:
    """Checks the topology options (``source_parallelism``, ``topic``,
    ``end_of_input``) of :func:`floodmark.replay` and the Spark functions.

    Returns:
        ``source_parallelism`` as a Python ``int`` (a numpy integer is one), or None.

    Raises:
        InvalidParameterError: naming the option that is wrong.
    """
    parallelism = None if source_parallelism is None else as_int(source_parallelism)
    if source_parallelism is not None and (
        parallelism is None or not 1 <= parallelism <= _core.MAX_CHANNELS
    ):
        raise InvalidParameterError(
            "source_parallelism",
            f"expected None or an int from 1 to {_core.MAX_CHANNELS:,} (the subtasks are "
            f"the valve's channels), got {source_parallelism!r}",
        )
    if topic is not None:
        if not isinstance(topic, str):
            raise InvalidParameterError("topic", f"expected a str, got {type(topic).__name__}")
        if source_parallelism is None:
            raise InvalidParameterError(
                "topic",
                "it places the partitions on the source subtasks, which needs "
                "source_parallelism=; give it, or drop topic",
            )
    if end_of_input not in END_OF_INPUT:
        raise InvalidParameterError(
            "end_of_input", f"expected one of {', '.join(END_OF_INPUT)}, got {end_of_input!r}"
        )
    return parallelism


def in_force_at(times: np.ndarray, wms: np.ndarray, arrivals: np.ndarray) -> np.ndarray:
    """The combined watermark in force at each of ``arrivals`` (ticks): the last of
    ``wms`` (at ``times``, sorted) strictly before it; ``MIN`` before the first (or
    with none at all, e.g. ``WatermarkStrategy.no_watermarks()``)."""
    if len(wms) == 0:
        return np.full(len(arrivals), I64_MIN, np.int64)
    idx = np.searchsorted(times, arrivals, side="left") - 1
    return np.where(idx >= 0, wms[np.maximum(idx, 0)], I64_MIN).astype(np.int64)


def check_topology_strategy(kind: str, source_parallelism: int | None, end_of_input: str) -> None:
    """The topology options (``source_parallelism``, ``end_of_input="per_channel"``)
    run with the periodic strategies only: checked from the strategy's ``kind``, before
    any data is read.

    Raises:
        InvalidParameterError: naming the option given.
    """
    if (source_parallelism is not None or end_of_input != "together") and (
        kind not in PERIODIC_KINDS
    ):
        raise InvalidParameterError(
            "source_parallelism" if source_parallelism is not None else "end_of_input",
            "runs with the periodic strategies "
            f"({', '.join(PERIODIC_KINDS)}, with or without idleness), not {kind!r}",
        )


def check_partition_numbers(t: pa.DataType, column: str, shown: str | None = None) -> None:
    """With ``source_parallelism`` the channels are Kafka partition numbers: the channel
    column (of Arrow type ``t``; ``shown``: the type's name in the caller's layer) must
    be an integer column.

    Raises:
        SchemaError: naming ``column``.
    """
    if pa.types.is_dictionary(t):  # pandas' categorical: its values
        t = t.value_type
    if not pa.types.is_integer(t):
        raise SchemaError(
            column,
            "source_parallelism assigns Kafka partitions to subtasks, so the channels "
            f"must be partition numbers (an integer column), got {shown or t}",
        )


def subtasks_of(
    channels: pa.Array, source_parallelism: int | None, topic: str | None, column: str
) -> list[int] | None:
    """The source subtask of each channel (Kafka partition number, in the valve's
    order), as Flink's Kafka source enumerator assigns partitions to its
    ``source_parallelism`` readers: ``(start + partition) % source_parallelism`` with
    ``start = ((topic.hashCode() * 31) & 0x7FFFFFFF) % source_parallelism`` (Java's
    ``String.hashCode``), or ``start = 0`` without a ``topic``. None when
    ``source_parallelism`` is None (one subtask per channel).

    Raises:
        InvalidInputError: naming ``column`` when a channel is not a partition number
            (an integer >= 0).
    """
    if source_parallelism is None or len(channels) == 0:
        return None
    check_partition_numbers(channels.type, column)
    partitions = channels.to_pylist()
    if any(p < 0 for p in partitions):
        bad = min(partitions)
        raise InvalidInputError(
            column, f"a Kafka partition number is >= 0, got {bad} (with source_parallelism)"
        )
    return _core.kafka_split_owners(topic, partitions, source_parallelism)


#: The strategies whose watermarks depend only on the largest event time so far and
#: the emission grid: a per-``(channel, bucket)`` summary drives them exactly.
PERIODIC_KINDS = ("bounded_out_of_orderness", "processing_time_lag", "no_watermarks")
#: The periodic strategies that emit at every grid time, records or not: each channel
#: is called at every grid time (channels x grid calls between two buckets with
#: records bounded by the core's ``MAX_EVERY_GRID_CALLS``, 2^28), and its output
#: stream has a row at each.
EVERY_GRID_KINDS = ("processing_time_lag",)


def strategy_in_ticks(
    strategy: WatermarkStrategy, event_unit: str, arrival_unit: str
) -> WatermarkStrategy:
    """The same strategy with every duration in ticks: the bound in event-time ticks,
    the lag and the idle timeout in arrival ticks.

    Raises:
        InvalidParameterError: not a strategy; a processing-time lag with different
            units for event time and arrival (it compares the two); an idle timeout
            under one arrival tick.
    """
    check_strategy(strategy)
    kind = strategy.kind
    resolved: WatermarkStrategy
    if kind == "bounded_out_of_orderness":
        assert strategy.bound is not None
        resolved = WatermarkStrategy.for_bounded_out_of_orderness(
            to_ticks(strategy.bound, event_unit, "bound")
        )
    elif kind == "processing_time_lag":
        if event_unit != arrival_unit:
            raise InvalidParameterError(
                "strategy",
                "a processing-time-lag watermark compares "
                "arrival time with event time, so both columns need the same unit "
                f"(got event time in {event_unit}, arrival in {arrival_unit})",
            )
        assert strategy.lag is not None
        resolved = WatermarkStrategy.for_processing_time_lag(
            to_ticks(strategy.lag, arrival_unit, "lag")
        )
    elif kind == "punctuated":
        assert strategy.marker_column is not None
        resolved = WatermarkStrategy.for_punctuated(strategy.marker_column)
    elif kind == "python":
        assert strategy.factory is not None
        resolved = WatermarkStrategy.for_generator(strategy.factory)
    else:
        resolved = WatermarkStrategy.no_watermarks()
    if strategy.idle_timeout is not None:
        idle = to_ticks(strategy.idle_timeout, arrival_unit, "idle_timeout")
        if idle == 0 and strategy.idle_timeout:
            raise InvalidParameterError(
                "idle_timeout",
                f"{strategy.idle_timeout!r} is less than one "
                f"tick of the arrival column's unit ({arrival_unit!r}); give a longer timeout",
            )
        resolved = resolved.with_idleness(idle)
    if strategy.timestamp_column is not None:
        resolved = resolved.with_timestamp_assigner(strategy.timestamp_column)
    return resolved


class TimelineBuilder:
    """The combined watermark timeline of ``num_channels`` channels, built incrementally.

    Args:
        strategy: a periodic strategy (bounded out-of-orderness, monotonous,
            processing-time lag, no watermarks; with or without idleness), its
            durations in ticks of ``unit`` (or ``timedelta``).
        num_channels: the number of input channels of the valve (more can be added with
            :meth:`insert_channel`).
        emit_interval: the periodic emission interval (Flink's ``autoWatermarkInterval``).
        unit: the tick unit of times and durations.
        keep_emissions: keep every channel's own output stream for
            :meth:`take_emissions` (it grows with channels x time: off by default).
        subtasks: several channels per source subtask: the subtask index of each
            channel (:func:`subtasks_of`). Each subtask combines its channels with
            Flink's multiplexer, the valve combines the subtasks. None: one subtask
            per channel.
        source_parallelism: the number of subtasks (default: the largest of
            ``subtasks`` plus one); each must read at least one channel.
        end_buckets: end each channel's input separately (``end_of_input=
            "per_channel"``): the grid bucket of each channel's last records; its
            watermark becomes ``MAX`` right after the emission at that bucket's grid time.

    Raises:
        InvalidParameterError: a strategy that emits on records (punctuated, a user
            generator: drive those per channel with :func:`floodmark.drive` and merge
            their streams with :meth:`for_emissions`), or a bad interval.

    Example:
        >>> from floodmark import WatermarkStrategy
        >>> b = TimelineBuilder(WatermarkStrategy.for_monotonous_timestamps(), 2,
        ...                     emit_interval=200)
        >>> f = b.push([0, 1, 0], [150, 160, 380], [100, 150, 300])
        >>> b.finish()
        >>> f.watermark.to_pylist()   # the third row arrived after the emission at 200
        [-9223372036854775808, -9223372036854775808, 99]
        >>> b.take_timeline().column("watermark").to_pylist()
        [99, 149]
    """

    def __init__(
        self,
        strategy: WatermarkStrategy,
        num_channels: int,
        *,
        emit_interval: Duration = DEFAULT_EMIT_INTERVAL,
        unit: str = "ms",
        keep_emissions: bool = False,
        subtasks: Sequence[int] | None = None,
        source_parallelism: int | None = None,
        end_buckets: Sequence[int] | None = None,
    ) -> None:
        check_strategy(strategy)
        generator = strategy.create_generator(unit)._inner
        interval = interval_ticks(emit_interval, unit)
        count = check_num_channels(num_channels)
        owners = None if subtasks is None else _per_channel(subtasks, "subtasks", count, 0)
        if source_parallelism is None:
            n_sub = max(owners) + 1 if owners else 0
            idle = sorted(set(range(n_sub)) - set(owners or ()))
            if idle:  # the engine would blame source_parallelism, not given here
                raise InvalidParameterError(
                    "subtasks",
                    f"subtask {idle[0]} reads none of the channels (the subtasks are 0 to "
                    "the largest given): number them from 0 without gaps",
                )
        else:
            n_sub = _ints([source_parallelism], "source_parallelism", least=1)[0]
        ends = None if end_buckets is None else _per_channel(end_buckets, "end_buckets", count)
        self._inner = _core._TimelineBuilder(
            generator,
            count,
            interval,
            flag(keep_emissions, "keep_emissions"),
            owners,
            n_sub,
            ends,
        )
        self.interval = interval

    @classmethod
    def for_emissions(cls, num_channels: int, *, keep_emissions: bool = False) -> TimelineBuilder:
        """A builder that merges channels' output streams computed elsewhere (e.g. by
        :func:`floodmark.drive`) through the valve: :meth:`push_emissions`."""
        builder = cls.__new__(cls)
        builder._inner = _core._TimelineBuilder(
            None, check_num_channels(num_channels), 1, flag(keep_emissions, "keep_emissions")
        )
        builder.interval = 1
        return builder

    def push(self, channel: Any, arrival: Any, max_ts: Any) -> InForce:
        """Feeds rows in arrival order: row ``i`` is a record of channel index
        ``channel[i]`` arriving at ``arrival[i]`` with event time ``max_ts[i]``, or the
        records of one channel in one bucket of the emission grid (any arrival in the
        bucket, and their largest event time).

        Raises:
            InvalidInputError: a channel out of range, rows out of arrival order or at
                or before a grid time already run (:meth:`advance_to`), arrival times
                too close to the ends of the ``int64`` range.
            InvalidParameterError: a processing-time-lag strategy over too many grid
                times (every channel emits at each).
        """
        cw, wm = self._inner.push(
            to_int64_array(channel, "channel"),
            to_int64_array(arrival, "arrival"),
            to_int64_array(max_ts, "max_ts"),
        )
        return InForce(cw, wm)

    def push_emissions(self, emissions: pa.RecordBatch | pa.Table) -> None:
        """Feeds channels' output streams (``channel`` index, ``time``, ``kind``,
        ``watermark`` columns, as :func:`floodmark.drive` emits them) in time order; the
        rows of one time reach the valve in channel order."""
        from floodmark.valve import emission_batch

        self._inner.push_emissions(emission_batch(emissions))

    def start_at(self, bucket: int) -> None:
        """Starts the emission grid at ``bucket`` before any row, as a first row in
        ``bucket`` would (every channel is first called at its grid time): a builder
        over some channels of an input that starts earlier, whose channels' watermarks
        in force are then those of the whole input's builder.

        Raises:
            InvalidParameterError: ``bucket`` is not an ``int64``, or its grid time
                leaves the ``int64`` range (naming it).
            IllegalStateError: rows came already (the grid has started).
        """
        self._inner.start_at(check_int64(bucket, "bucket"))

    def advance_to(self, bucket: int) -> None:
        """Declares every grid bucket up to ``bucket`` complete (no row of it will come)
        and runs the periodic emissions up to grid time ``bucket * emit_interval``: a
        live query's frontier. Before the first row it does nothing.

        Raises:
            InvalidParameterError: ``bucket`` is not an ``int64``, or its grid time
                leaves the ``int64`` range (naming it).
        """
        self._inner.advance_to(check_int64(bucket, "bucket"))

    def finish(self) -> None:
        """Runs the periodic emissions up to the last row's bucket: the end of a bounded
        input (the grid ends at the first grid time at or after the last arrival)."""
        self._inner.finish()

    def take_timeline(self) -> pa.RecordBatch:
        """The combined timeline rows since the last call: ``time``, ``watermark``,
        ``status`` (``active``/``idle``), ``min_channel`` (the index of the channel
        holding the minimum, null when none is aligned) and ``advance`` (the watermark
        grew: the windows' advances)."""
        batch: pa.RecordBatch = self._inner.take_timeline()
        return batch

    def take_emissions(self) -> pa.RecordBatch:
        """Every channel's own output rows since the last call (``channel`` index,
        ``time``, ``kind``, ``watermark``); empty unless ``keep_emissions``."""
        batch: pa.RecordBatch = self._inner.take_emissions()
        return batch

    def insert_channel(self, at: int) -> None:
        """Adds a channel at index ``at`` (later channels move up by one), as Flink
        registers a newly discovered split: at ``-2**63``, active, holding the combined
        watermark back until it catches up or goes idle. A timeline row it causes (the
        valve active again) is stamped at the last grid time run, or for a builder of
        output streams (:meth:`for_emissions`) at the last time fed.

        Raises:
            InvalidParameterError: ``at`` is not an integer in ``0..=num_channels``
                (naming it), or the valve is full.
        """
        self.insert_channels([at])

    def insert_channels(self, at: Sequence[int]) -> None:
        """Adds several channels at once, each as :meth:`insert_channel` adds one:
        ``at`` holds their indexes among the channels after the insertion, strictly
        ascending (one pass over the channels, whatever their number).

        Raises:
            InvalidParameterError: an index that is not an integer, not ascending, or
                past the channels after the insertion (naming ``at``), or the valve is
                full.
        """
        if isinstance(at, str | bytes) or not isinstance(at, Iterable):
            raise InvalidParameterError("at", f"expected a list of channel indexes, got {at!r}")
        self._inner.insert_channels([check_int64(a, "at") for a in at])

    def bucket_of(self, arrival: int) -> int:
        """The grid bucket of an arrival time, ``ceil(arrival / emit_interval)``: its
        records are first seen by the periodic emission at ``bucket * emit_interval``.

        Raises:
            InvalidParameterError: ``arrival`` is not an ``int64`` (naming it).
        """
        return self._inner.bucket_of(check_int64(arrival, "arrival"))

    def snapshot(self) -> bytes:
        """The builder's state (not the outputs not yet taken)."""
        return self._inner.snapshot()

    def restore(self, data: bytes) -> None:
        """Restores a :meth:`snapshot`.

        Raises:
            SnapshotError: not a builder snapshot, or one of another strategy or
                emission interval.
        """
        self._inner.restore(snapshot_bytes(data))

    def channel_status(self, channel: int) -> tuple[int, bool]:
        """Channel ``channel``'s watermark so far (``-2**63``: none) and whether it is
        idle.

        Raises:
            InvalidParameterError: ``channel`` is not an integer in ``0..num_channels``
                (naming it).
        """
        return self._inner.channel_status(check_int64(channel, "channel"))

    @property
    def min_channel(self) -> int | None:
        """The index of the channel holding the combined watermark back (the lowest
        aligned one), or None when no channel is aligned."""
        return self._inner.min_channel

    @property
    def num_channels(self) -> int:
        """The number of channels."""
        return self._inner.num_channels

    @property
    def watermark(self) -> int:
        """The combined watermark so far (``-2**63`` before the first)."""
        return self._inner.watermark

    @property
    def is_idle(self) -> bool:
        """True if every channel is idle."""
        return self._inner.is_idle

    @property
    def ran_through(self) -> int | None:
        """The last grid bucket whose periodic emissions ran (None before the first row)."""
        return self._inner.ran_through

    @property
    def last(self) -> int | None:
        """The largest bucket (or, merging streams, time) pushed so far."""
        return self._inner.last


def _ints(values: Iterable[object], name: str, *, least: int | None = None) -> list[int]:
    """``values`` as ``int`` of the ``i64`` range, at least ``least`` if given; else
    an error naming ``name`` (a float is no index, not even a whole one)."""
    out = [check_int64(v, name) for v in values]
    low = next((v for v in out if least is not None and v < least), None)
    if low is not None:
        raise InvalidParameterError(name, f"expected ints of at least {least}, got {low}")
    return out


def _per_channel(
    values: Iterable[object], name: str, num_channels: int, least: int | None = None
) -> list[int]:
    """:func:`_ints`, one per channel, else an error naming ``name``."""
    out = _ints(values, name, least=least)
    if len(out) != num_channels:
        raise InvalidParameterError(
            name, f"expected one value per channel ({num_channels}), got {len(out)}"
        )
    return out


__all__ = [
    "EMISSION_KINDS",
    "END_OF_INPUT",
    "EVERY_GRID_KINDS",
    "PERIODIC_KINDS",
    "InForce",
    "TimelineBuilder",
    "channel_index",
    "check_partition_numbers",
    "check_topology",
    "check_topology_strategy",
    "in_emission_order",
    "in_force_at",
    "strategy_in_ticks",
    "subtasks_of",
]
