"""Event-time windows exactly as Apache Flink 2.3.0's ``WindowOperator``.

Window assigners (:class:`TumblingEventTimeWindows`, :class:`SlidingEventTimeWindows`,
:class:`EventTimeSessionWindows`) and the keyed :class:`WindowOperator` with
``EventTimeTrigger`` semantics, allowed lateness and a late side output. The engine is
native (Rust); this module checks schemas, converts Arrow inputs and assembles outputs.

Departures from Flink (each deliberate, nothing is lost silently):

* A record that lands in no live window and is not late (``ts + L > watermark``) is
  dropped silently by Flink; floodmark reports it in ``dropped`` with reason
  ``"no_window"``.
* A record with a null event time is reported in ``dropped`` (``"null_event_time"``).
* A record at ``Long.MIN_VALUE`` under tumbling/sliding windows fails a Flink job
  (``RuntimeException``); floodmark reports it in ``dropped`` (``"min_event_time"``),
  and :meth:`TumblingEventTimeWindows.assign_windows` raises
  :class:`~floodmark.exceptions.InvalidInputError`.
* Sliding windows near ``Long.MIN_VALUE`` whose start would wrap past ``MIN`` stop
  there (Flink would loop through the wrapped range); a record of a gapped sliding
  assigner whose grid cell begins below ``MIN`` is in no window.
* ``size <= 0`` and ``slide <= 0`` are refused whatever the offset (Flink accepts a
  negative one with ``offset = Long.MIN_VALUE``, as ``Math.abs(MIN)`` is negative).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from floodmark import _core
from floodmark.arrays import (
    NULLS_TYPE,
    as_table,
    check_takeable,
    combined,
    field_index,
    no_rows,
    one_batch,
    take_rows,
    time_column,
)
from floodmark.column_kinds import key_type, value_type
from floodmark.exceptions import (
    InvalidInputError,
    InvalidParameterError,
    SchemaError,
    SnapshotError,
)
from floodmark.time import Duration, as_int, check_int64, check_unit, to_ticks
from floodmark.vocabulary import (
    DROP_REASON,
    LATE_WATERMARK,
    SIDE_OUTPUT_COLUMNS,
    Agg,
    agg_name,
    check_not_added,
    check_result_names,
    column_name,
    parse_aggs,
    snapshot_bytes,
    window_keys,
)

#: The ``timing`` of a result: fired when the watermark passed the window's end, or
#: fired again by a late record within the allowed lateness.
ON_TIME, LATE = "on_time", "late"
BatchLike = Any  # pyarrow.RecordBatch | pyarrow.Table | pandas.DataFrame

_Params = tuple[str, int, int, int, int]


class _Assigner:
    """Common part of the assigners: parameters as durations, checked as ticks."""

    kind = ""

    def __init__(
        self, size: Duration = 0, slide: Duration = 0, offset: Duration = 0, gap: Duration = 0
    ) -> None:
        raw = {"size": size, "slide": slide, "offset": offset, "gap": gap}
        for name, value in raw.items():  # a value of the wrong type is refused now
            to_ticks(value, "ms", name)
        ints = {k: as_int(v) for k, v in raw.items()}
        # numpy integers become ints (a timedelta stays one)
        self._raw: dict[str, Duration] = {k: raw[k] if i is None else i for k, i in ints.items()}
        if None not in ints.values():
            self.params("ms")  # plain ticks: check now (the unit does not matter)

    def params(self, unit: str = "ms") -> _Params:
        """The assigner as ``(kind, size, slide, offset, gap)`` in ticks of ``unit``.

        Raises:
            InvalidParameterError: a parameter is out of range (names it).
        """
        check_unit(unit)
        t = {name: to_ticks(value, unit, name) for name, value in self._raw.items()}
        _core.window_check(self.kind, t["size"], t["slide"], t["offset"], t["gap"])
        return (self.kind, t["size"], t["slide"], t["offset"], t["gap"])

    def grid(self, unit: str = "ms") -> tuple[int, int, int]:
        """``(size, step, offset)`` in ticks of ``unit``: the windows start at ``offset +
        k * step``, the step being a sliding window's slide and any other's size (a
        session window has no grid: its ``size`` is 0).

        Raises:
            InvalidParameterError: a parameter is out of range (names it).
        """
        kind, size, slide, offset, _ = self.params(unit)
        return size, slide if kind == "sliding" else size, offset

    def assign_windows(self, timestamp: int, unit: str = "ms") -> list[tuple[int, int]]:
        """The windows ``[(start, end), ...]`` of a record at ``timestamp`` (Flink order).

        Raises:
            InvalidParameterError: invalid assigner parameters.
            InvalidInputError: ``timestamp`` is ``Long.MIN_VALUE`` (tumbling/sliding).
        """
        kind, size, slide, offset, gap = self.params(unit)
        ts = check_int64(timestamp, "timestamp")
        return _core.window_assign(kind, size, slide, offset, gap, ts)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._raw.items() if v != 0 or k == "offset")
        return f"{type(self).__name__}({args})"


class TumblingEventTimeWindows(_Assigner):
    """Fixed-size, non-overlapping windows ``[start, start + size)``.

    Example:
        >>> TumblingEventTimeWindows.of(1000).assign_windows(7350)
        [(7000, 8000)]
        >>> TumblingEventTimeWindows.of(1000, offset=500).assign_windows(7350)
        [(6500, 7500)]
    """

    kind = "tumbling"

    @classmethod
    def of(cls, size: Duration, offset: Duration = 0) -> TumblingEventTimeWindows:
        """Tumbling windows of ``size``, grid shifted by ``offset`` (``|offset| < size``)."""
        return cls(size=size, offset=offset)


class SlidingEventTimeWindows(_Assigner):
    """Windows of ``size`` starting every ``slide``; a record belongs to several.

    Example:
        >>> from datetime import timedelta
        >>> w = SlidingEventTimeWindows.of(timedelta(seconds=1), timedelta(milliseconds=400), 100)
        >>> w.assign_windows(7350)  # latest start first, as Flink
        [(7300, 8300), (6900, 7900), (6500, 7500)]
    """

    kind = "sliding"

    @classmethod
    def of(cls, size: Duration, slide: Duration, offset: Duration = 0) -> SlidingEventTimeWindows:
        """Sliding windows (``size > 0``, ``|offset| < slide``, ``size / slide <= 1e7``)."""
        return cls(size=size, slide=slide, offset=offset)


class EventTimeSessionWindows(_Assigner):
    """Per-key sessions: ``[ts, ts + gap)`` merged while they touch or overlap.

    Example:
        >>> EventTimeSessionWindows.with_gap(300).assign_windows(7350)
        [(7350, 7650)]
    """

    kind = "session"

    @classmethod
    def with_gap(cls, gap: Duration) -> EventTimeSessionWindows:
        """Session windows with inactivity ``gap > 0``."""
        return cls(gap=gap)


WindowAssigner = TumblingEventTimeWindows | SlidingEventTimeWindows | EventTimeSessionWindows
#: The assigner classes, for ``isinstance``.
WINDOW_ASSIGNERS = (TumblingEventTimeWindows, SlidingEventTimeWindows, EventTimeSessionWindows)


def check_assigner(window: Any) -> WindowAssigner:
    """``window`` if it is one of the window assigners.

    Raises:
        InvalidParameterError: naming ``window``.
    """
    if not isinstance(window, WINDOW_ASSIGNERS):
        raise InvalidParameterError(
            "window",
            "expected TumblingEventTimeWindows.of(...), SlidingEventTimeWindows.of(...) or "
            f"EventTimeSessionWindows.with_gap(...), got {type(window).__name__}",
        )
    return window


def window_params(window: Any, unit: str) -> _Params:
    """``window``'s parameters as ``(kind, size, slide, offset, gap)`` in ticks of the
    event-time ``unit``: the one check of a ``window`` argument, in every layer.

    Raises:
        InvalidParameterError: naming ``window``: not one of the assigners, or a
            parameter out of range once in ``unit`` ticks (a duration under a tick is 0).
    """
    try:
        return check_assigner(window).params(unit)
    except InvalidParameterError as err:
        raise InvalidParameterError(
            "window",
            f"{err} (in whole ticks of the event-time unit {unit!r}: a duration is "
            "truncated to it, so one under a tick is 0)",
        ) from None


def lateness_ticks(allowed_lateness: Duration, unit: str) -> int:
    """``allowed_lateness`` in ticks of the event-time ``unit``: the one check of that
    argument, in every layer (a live query's handler checks it when made in the coarsest
    unit, ``s``, whose ticks are negative only if they are in every unit).

    Raises:
        InvalidParameterError: naming ``allowed_lateness``: not a duration, or negative.
    """
    lateness = to_ticks(allowed_lateness, unit, "allowed_lateness")
    if lateness < 0:
        raise InvalidParameterError("allowed_lateness", f"must be >= 0, got {allowed_lateness!r}")
    return lateness


def window_start_with_offset(timestamp: int, offset: int, size: int) -> int:
    """Flink's ``TimeWindow.getWindowStartWithOffset`` (Java remainder, wrapping).

    Example:
        >>> window_start_with_offset(7350, 500, 1000), window_start_with_offset(-1, 0, 1000)
        (6500, -1000)

    Raises:
        InvalidParameterError: ``size`` is zero, or an argument is not an int64.
    """
    return _core.window_start_with_offset(
        check_int64(timestamp, "timestamp"),
        check_int64(offset, "offset"),
        check_int64(size, "size"),
    )


def merge_windows(
    windows: Sequence[tuple[int, int]],
) -> list[tuple[list[tuple[int, int]], tuple[int, int]]]:
    """Flink's ``TimeWindow.mergeWindows``: ``[(merged windows sorted, cover), ...]``.

    Only groups of more than one distinct window are reported, in sweep order.

    Raises:
        InvalidParameterError: a window is not a pair of int64 bounds (named
            ``windows``).
    """
    if isinstance(windows, (str, bytes)) or not isinstance(windows, Iterable):
        raise InvalidParameterError(
            "windows", f"expected a list of (start, end) pairs, got {type(windows).__name__}"
        )
    pairs = []
    for window in windows:
        if isinstance(window, (str, bytes)) or not hasattr(window, "__len__") or len(window) != 2:
            raise InvalidParameterError("windows", f"expected (start, end) pairs, got {window!r}")
        pairs.append((check_int64(window[0], "windows"), check_int64(window[1], "windows")))
    return _core.merge_windows(pairs)


class WindowOutput(NamedTuple):
    """What one call of :class:`WindowOperator` emits.

    Attributes:
        results: one row per window firing: key columns, ``window_start``,
            ``window_end``, aggregates, ``watermark``, ``timing`` (``"on_time"`` or
            ``"late"``), ``trigger_position`` (how many records the operator had
            processed, over all calls, before what fired it: a watermark advance or
            a late record) and ``trigger_time`` (the advance's ``time``, or the late
            record's ``arrival``; null when not given).
        late: the late input rows (all input columns) plus ``watermark``.
        dropped: the dropped input rows (all input columns) plus ``reason``.
    """

    results: pa.RecordBatch
    late: pa.RecordBatch
    dropped: pa.RecordBatch


def _parse_aggs(aggs: Sequence[Agg]) -> tuple[list[str], list[tuple[str, int | None]], list[str]]:
    """The value columns, the engine's ``(function, value index)`` specs and the result
    names of the aggregate list (:func:`floodmark.vocabulary.parse_aggs` checks it)."""
    parsed = parse_aggs(aggs)
    value_names = list(dict.fromkeys(a[1] for a in parsed if not isinstance(a, str)))
    specs: list[tuple[str, int | None]] = [
        ("count", None) if isinstance(a, str) else (a[0], value_names.index(a[1])) for a in parsed
    ]
    return value_names, specs, [agg_name(a) for a in parsed]


def _to_batches(batch: BatchLike) -> list[pa.RecordBatch]:
    """The input as record batches, in order: one, unless a Table needs several even
    with its chunks combined (a string column over 2 GiB)."""
    if isinstance(batch, pa.RecordBatch):
        return [batch]
    table = combined(as_table(batch, "batch"))
    return table.to_batches() or [no_rows(table.schema)]


def _key_column(arr: pa.Array, name: str) -> pa.Array:
    """A key column as the operator groups it (:func:`floodmark.column_kinds.key_type`)."""
    if pa.types.is_dictionary(arr.type):  # keyed by value, whatever the dictionary
        arr = arr.dictionary_decode()
    return arr.cast(key_type(arr.type, name, "key"))


def _value_column(arr: pa.Array, name: str) -> pa.Array:
    """A value column as the operator aggregates it
    (:func:`floodmark.column_kinds.value_type`)."""
    return arr.cast(value_type(arr.type, name, "aggs"))


def _column(batch: pa.RecordBatch, name: str) -> pa.Array:
    return batch.column(field_index(batch.schema, name))


def _concat(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    """The batches (of one schema) as one record batch (:func:`one_batch`)."""
    advice = "the state is unchanged: pass the input in smaller parts"
    whole = one_batch(pa.Table.from_batches(batches), "the outputs of this call", advice)
    return whole if whole is not None else batches[0].slice(0, 0)


def _ints(values: Any, column: str, *, nullable: bool = False) -> list[Any]:
    """``values`` (a sequence, numpy array or pyarrow array) as int64 ints (``None``
    kept if ``nullable``), naming ``column``; signed integer arrays (without nulls
    where none are allowed) skip the check of each value."""
    if type(values).__name__ == "ndarray" and values.ndim != 1:
        raise SchemaError(column, f"expected one value per advance, got a {values.ndim}-D array")
    if type(values).__name__ == "ndarray" and values.dtype.kind == "i":  # numpy
        return list(values.tolist())
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        if pa.types.is_signed_integer(values.type) and (nullable or values.null_count == 0):
            return list(values.to_pylist())
        values = values.to_pylist()
    return [None if v is None and nullable else check_int64(v, column, column=True) for v in values]


def _advances(watermarks: Any) -> tuple[list[int], list[int], list[int | None]]:
    if watermarks is None:
        return [], [], []
    cols: dict[str, Any]
    if isinstance(watermarks, (pa.RecordBatch, pa.Table)):
        cols = {n: watermarks.column(n) for n in watermarks.schema.names}
    elif isinstance(watermarks, Mapping):
        cols = {str(k): v for k, v in watermarks.items()}
    elif type(watermarks).__name__ == "DataFrame":
        cols = {str(k): watermarks[k] for k in watermarks.columns}
    else:
        raise SchemaError(
            "watermarks",
            "expected None, a mapping or a RecordBatch with "
            f"columns position, watermark[, time]; got {type(watermarks).__name__}",
        )
    for name in ("position", "watermark"):
        if name not in cols:
            raise SchemaError(name, "missing column in watermarks")
    for name, values in cols.items():
        if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
            raise SchemaError(
                name, f"watermarks' columns hold one value per advance, got {values!r}"
            )
    positions = _ints(cols["position"], "position")
    marks = _ints(cols["watermark"], "watermark")
    times = _ints(cols.get("time", [None] * len(positions)), "time", nullable=True)
    if not len(positions) == len(marks) == len(times):
        raise SchemaError("watermarks", "columns have different lengths")
    return positions, marks, times


#: The first bytes of a window operator's snapshot: the header (its tick unit) follows,
#: then the engine's own bytes (``FMK2...``, checksummed).
_SNAPSHOT_MAGIC = b"FMWO"


class WindowOperator:
    """Flink's keyed event-time ``WindowOperator`` with ``EventTimeTrigger``.

    Windows fire when the watermark reaches ``end - 1``; with ``allowed_lateness`` L
    a window stays alive until ``end - 1 + L`` and re-fires for each record that
    still joins it. Records in no live window go to ``late`` if ``ts + L <= wm``,
    else to ``dropped`` (reason ``"no_window"``). The watermark and the position
    counter persist across calls.

    Args:
        window: the window assigner.
        key: the key column(s) (integer or string; null is a key value).
        event_time: the event-time column (integer ticks of ``unit`` or timestamp).
        aggs: ``"count"`` or ``(fn, column)`` with fn in sum/min/max/mean/first/last;
            output columns are named ``count`` and ``f"{fn}_{column}"``.
        allowed_lateness: allowed lateness (``timedelta`` or ticks), ``>= 0``.
        unit: the tick unit (``"s"``, ``"ms"``, ``"us"``, ``"ns"``; default ``"ms"``)
            of integer and timestamp columns alike, fixed before any batch: for a
            timestamp column give its precision (``"us"``) to count it as
            :func:`floodmark.replay.replay` and the Spark functions do by default.
        arrival: optional arrival-time column: a late record's, reported as the
            ``trigger_time`` of the re-firing it causes (an advance's is its ``time``).

    Raises:
        InvalidParameterError: a parameter is invalid (the error names it).
    """

    def __init__(
        self,
        window: WindowAssigner,
        *,
        key: str | Sequence[str],
        event_time: str,
        aggs: Sequence[Agg] = ("count",),
        allowed_lateness: Duration = 0,
        unit: str = "ms",
        arrival: str | None = None,
    ) -> None:
        self._unit = check_unit(unit)
        kind, size, slide, offset, gap = window_params(window, self._unit)
        self._keys = window_keys(key)
        self._event_time = column_name(event_time, "event_time")
        self._arrival = None if arrival is None else column_name(arrival, "arrival")
        self._value_names, specs, self._agg_names = _parse_aggs(aggs)
        check_result_names(self._keys, self._agg_names)
        lateness = lateness_ticks(allowed_lateness, unit)
        self._window = window
        self._native = _core.WindowOperator(
            kind,
            size,
            slide,
            offset,
            gap,
            lateness,
            self._keys,
            event_time,
            self._value_names,
            specs,
            self._agg_names,
            arrival,
        )
        self._no_rows = no_rows(pa.schema([]))  # the input's columns, no rows
        self._key_types: list[pa.DataType] | None = None
        # The key types the outputs of `advance` and `finish` carry: the last batch with
        # rows' (`_key_types`, which a later batch must keep), else the types of a batch
        # without rows (an empty first batch names them too, without binding the next).
        self._named_key_types: list[pa.DataType] = []

    @property
    def watermark(self) -> int:
        """The current watermark (``-2**63`` before the first advance)."""
        return int(self._native.watermark)

    @property
    def position(self) -> int:
        """Number of records processed so far (across calls)."""
        return int(self._native.position)

    def _prepare(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, list[pa.DataType]]:
        """The engine's columns of ``batch``, and the key types its results take (fixed
        by the first batch with rows: an empty one, e.g. an empty pandas frame, has no
        key to say them)."""
        check_not_added(batch.schema.names, SIDE_OUTPUT_COLUMNS)
        check_takeable(batch)
        arrays: list[pa.Array] = []
        names: list[str] = []
        key_types = []
        for name in self._keys:
            col = _column(batch, name)
            # The results' type: the input's, a dictionary's values (keyed by value: a
            # pandas categorical's codes may widen from one batch to the next)
            t = col.type
            key_types.append(t.value_type if pa.types.is_dictionary(t) else t)
            arrays.append(_key_column(col, name))
            names.append(name)
        if self._key_types is not None and key_types != self._key_types and batch.num_rows:
            raise SchemaError(
                self._keys[0], f"key column types changed from {self._key_types} to {key_types}"
            )
        arrays.append(
            time_column(
                _column(batch, self._event_time), self._event_time, self._unit, "event_time"
            )
        )
        names.append(self._event_time)
        for name in self._value_names:
            value = _value_column(_column(batch, name), name)  # a key or time column too
            if name not in names:
                arrays.append(value)
                names.append(name)
        if self._arrival is not None and self._arrival not in names:
            arrays.append(
                time_column(_column(batch, self._arrival), self._arrival, self._unit, "arrival")
            )
            names.append(self._arrival)
        if not batch.num_rows and self._key_types is not None:
            key_types = self._key_types
        return pa.RecordBatch.from_arrays(arrays, names=names), key_types

    def _typed_keys(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` with its key columns of Arrow's null type in the key's type
        (:meth:`_typed_nulls`): the results, the late and the dropped rows all carry it."""
        for i, name in enumerate(self._keys):
            col = _column(batch, name)
            if pa.types.is_null(col.type):
                at = field_index(batch.schema, name)
                typed = self._typed_nulls(col, name, i)
                batch = batch.set_column(at, pa.field(name, typed.type), typed)
        return batch

    def _typed_nulls(self, col: pa.Array, name: str, i: int) -> pa.Array:
        """A key column of Arrow's null type (pandas makes one of an empty or all-``None``
        object column) in the key's type: the one earlier batches fixed, or, before any,
        :data:`~floodmark.arrays.NULLS_TYPE` for no rows (an empty batch fixes no type).
        Rows of nulls before any typed batch are refused: their type would fix the
        results' key type."""
        if self._key_types is not None:
            return col.cast(self._key_types[i])
        if not len(col):
            return col.cast(NULLS_TYPE)
        raise SchemaError(
            name,
            f"key= column {name!r} holds only nulls and has no type (pandas gives an "
            "all-None object column Arrow's null type), before any batch fixed the key's "
            "type; give it one, e.g. df[column].astype('string') or 'Int64'",
        )

    def _output(
        self, raw: tuple[Any, Any, Any, Any, Any], batch: pa.RecordBatch | None
    ) -> WindowOutput:
        results, late_rows, late_wm, dropped_rows, reasons = raw
        source = batch
        if source is None:
            source = self._no_rows
        late = take_rows(source, late_rows).append_column(LATE_WATERMARK, late_wm.cast(pa.int64()))
        dropped = take_rows(source, dropped_rows).append_column(
            DROP_REASON, reasons.cast(pa.string())
        )
        return WindowOutput(self._timing(results), late, dropped)

    def _timing(self, results: pa.RecordBatch) -> pa.RecordBatch:
        """The results with the engine's ``timing`` flag (true: a late firing) in
        words: ``"late"`` or ``"on_time"``."""
        i = results.schema.get_field_index("timing")
        words = pc.if_else(results.column(i), LATE, ON_TIME)
        return results.set_column(i, pa.field("timing", pa.string(), nullable=False), words)

    def process(self, batch: BatchLike, watermarks: Any = None) -> WindowOutput:
        """Processes a batch of records with watermark advances positioned inside it.

        Args:
            batch: a pyarrow ``RecordBatch`` or ``Table`` or a pandas ``DataFrame``.
            watermarks: ``None`` or a mapping / RecordBatch with columns ``position``
                (advance applies before record ``position``; non-decreasing,
                ``0..=len``), ``watermark`` and optional ``time``.

        Returns:
            The window results, late rows and dropped rows of this call.

        Raises:
            InvalidParameterError: ``batch`` is not a Table, RecordBatch or DataFrame.
            SchemaError: a column is missing or has an unsupported type.
            InvalidInputError: bad advance positions, or advance values that are not
                int64 (named by their column).
        """
        parts = _to_batches(batch)
        positions, marks, times = _advances(watermarks)
        if len(parts) == 1:
            return self._process_one(parts[0], positions, marks, times)
        return self._process_parts(parts, positions, marks, times)

    def _process_one(
        self, rb: pa.RecordBatch, positions: list[int], marks: list[int], times: list[int | None]
    ) -> WindowOutput:
        rb = self._typed_keys(rb)
        native_batch, key_types = self._prepare(rb)
        raw = self._native.process(native_batch, positions, marks, times, key_types)
        if rb.num_rows:
            self._key_types = key_types
        self._named_key_types = self._key_types or key_types
        self._no_rows = rb.slice(0, 0)
        return self._output(raw, rb)

    def _process_parts(
        self,
        parts: list[pa.RecordBatch],
        positions: list[int],
        marks: list[int],
        times: list[int | None],
    ) -> WindowOutput:
        """A table that is several record batches even with its chunks combined: each
        batch in order, with the advances positioned inside it (an advance at a
        boundary goes with the batch before), the outputs concatenated. The state is
        restored if they cannot be (late or dropped rows over 2 GiB of strings)."""
        total = sum(p.num_rows for p in parts)
        ordered = all(a <= b for a, b in itertools.pairwise(positions))
        if not ordered or any(not 0 <= p <= total for p in positions):
            raise InvalidInputError(
                "position",
                f"advance positions must be non-decreasing and within 0..={total}, got {positions}",
            )
        before = (self.snapshot(), self._key_types, self._no_rows, self._named_key_types)
        try:
            outputs = []
            base, a = 0, 0
            for i, rb in enumerate(parts):
                end = base + rb.num_rows
                b = a
                while b < len(positions) and (
                    positions[b] < end or (positions[b] == end and i == len(parts) - 1)
                ):
                    b += 1
                advances = ([p - base for p in positions[a:b]], marks[a:b], times[a:b])
                outputs.append(self._process_one(rb, *advances))
                base, a = end, b
            return WindowOutput(*(_concat([o[i] for o in outputs]) for i in range(3)))
        except Exception:
            self.restore(before[0])
            self._key_types, self._no_rows = before[1], before[2]
            self._named_key_types = before[3]
            raise

    def advance(self, watermark: int, time: int | None = None) -> WindowOutput:
        """A watermark advance after everything processed so far (ignored unless it
        is greater than the current watermark).

        Raises:
            InvalidParameterError: ``watermark`` or ``time`` is not an int64.
        """
        wm = check_int64(watermark, "watermark")
        t = None if time is None else check_int64(time, "time")
        return self._output(self._native.advance(wm, t, self._named_key_types), None)

    def finish(self, time: int | None = None) -> WindowOutput:
        """End of input: the watermark ``MAX`` fires every remaining window.

        Raises:
            InvalidParameterError: ``time`` is not an int64.
        """
        t = None if time is None else check_int64(time, "time")
        return self._output(self._native.finish(t, self._named_key_types), None)

    def snapshot(self) -> bytes:
        """The whole operator state (windows, accumulators, keys, watermark, position),
        after a header naming the tick ``unit`` (every stored time is in it)."""
        header = f"unit={self._unit}".encode()
        return _SNAPSHOT_MAGIC + bytes([len(header)]) + header + bytes(self._native.snapshot())

    def restore(self, data: bytes) -> None:
        """Restores a snapshot of an operator with the same configuration, tick unit
        included (a snapshot of an earlier floodmark has no unit: not checked).

        Raises:
            SnapshotError: corrupt data or another configuration.
        """
        native = snapshot_bytes(data)
        if native[: len(_SNAPSHOT_MAGIC)] == _SNAPSHOT_MAGIC:
            start = len(_SNAPSHOT_MAGIC) + 1
            size = native[start - 1] if len(native) >= start else 0
            header = native[start : start + size]
            if header != f"unit={self._unit}".encode():
                raise SnapshotError(
                    f"the snapshot is of a window operator with another configuration: "
                    f"{header.decode(errors='replace')!r} (this one has unit="
                    f"{self._unit!r}); every time it stores is in its unit"
                )
            native = native[start + size :]
        self._native.restore(native)
        # What this operator saw before is not the snapshot's: the next batch names the
        # key types (until then the results carry the engine's, int64 or string).
        self._key_types, self._no_rows = None, no_rows(pa.schema([]))
        self._named_key_types = []


__all__ = [
    "EventTimeSessionWindows",
    "SlidingEventTimeWindows",
    "TumblingEventTimeWindows",
    "WindowAssigner",
    "WindowOperator",
    "WindowOutput",
    "lateness_ticks",
    "merge_windows",
    "window_start_with_offset",
]
