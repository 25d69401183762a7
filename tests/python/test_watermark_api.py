"""The watermark Python API: errors name the parameter, input types, the user
Python generator path against the native one, snapshot/restore."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from user_generators import BoundedPy

from floodmark import Emission, Multiplexer, Valve, WatermarkStrategy, combine, drive
from floodmark._core import element_late
from floodmark.exceptions import (
    ChannelOutOfRangeError,
    IllegalStateError,
    InvalidInputError,
    InvalidParameterError,
    SnapshotError,
)

MIN = -(2**63)


@pytest.mark.parametrize(
    ("make", "parameter"),
    [
        (lambda: WatermarkStrategy.for_bounded_out_of_orderness(-1), "bound"),
        (
            lambda: WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=-1)),
            "bound",
        ),
        (lambda: WatermarkStrategy.for_bounded_out_of_orderness("5"), "bound"),
        (lambda: WatermarkStrategy.for_monotonous_timestamps().with_idleness(0), "idle_timeout"),
        (
            lambda: WatermarkStrategy.no_watermarks().with_idleness(timedelta(seconds=-2)),
            "idle_timeout",
        ),
        (lambda: WatermarkStrategy.for_processing_time_lag(-3), "lag"),
        (lambda: WatermarkStrategy.for_punctuated(""), "marker_column"),
        (lambda: WatermarkStrategy.for_generator(42), "factory"),  # type: ignore[arg-type]
        (lambda: WatermarkStrategy.no_watermarks().create_generator("weeks"), "unit"),
        (
            lambda: (
                WatermarkStrategy.for_monotonous_timestamps()
                .with_idleness(timedelta(microseconds=10))
                .create_generator("ms")
            ),
            "idle_timeout",
        ),
        (lambda: Valve(-1), "num_channels"),
        (lambda: Valve(10**12), "num_channels"),
    ],
)
def test_errors_name_the_parameter(make: object, parameter: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        make()  # type: ignore[operator]
    assert info.value.parameter == parameter
    assert parameter in str(info.value)


def test_strategy_is_immutable_and_described() -> None:
    base = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=5))
    idle = base.with_idleness(timedelta(minutes=1)).with_timestamp_assigner("ts")
    assert base.idle_timeout is None and base.timestamp_column is None
    assert idle.idle_timeout == timedelta(minutes=1) and idle.timestamp_column == "ts"
    assert idle.kind == "bounded_out_of_orderness" and idle.bound == timedelta(seconds=5)
    assert (
        idle.is_shift_invariant and WatermarkStrategy.for_monotonous_timestamps().is_shift_invariant
    )
    assert not WatermarkStrategy.for_processing_time_lag(5).is_shift_invariant
    assert WatermarkStrategy.for_punctuated("m").marker_column == "m"
    assert "with_idleness" in repr(idle) and "for_bounded_out_of_orderness" in repr(idle)
    assert idle == base.with_idleness(timedelta(minutes=1)).with_timestamp_assigner("ts")


def test_generator_object_and_snapshot() -> None:
    gen = WatermarkStrategy.for_bounded_out_of_orderness(
        timedelta(milliseconds=10)
    ).create_generator()
    assert gen.on_event(100) == []
    assert gen.on_periodic_emit() == [Emission("watermark", 89)]
    snap = gen.snapshot()
    gen.on_event(500)
    assert gen.on_periodic_emit() == [Emission("watermark", 489)]
    gen.restore(snap)
    assert gen.on_periodic_emit() == [Emission("watermark", 89)]
    with pytest.raises(SnapshotError):
        gen.restore(Valve(2).snapshot())
    idle = WatermarkStrategy.for_monotonous_timestamps().with_idleness(100).create_generator()
    with pytest.raises(InvalidParameterError) as info:
        idle.on_periodic_emit()
    assert info.value.parameter == "now"


@pytest.mark.parametrize(
    "convert",
    [
        lambda xs: xs,
        lambda xs: np.array(xs, dtype=np.int64),
        lambda xs: pd.Series(xs, dtype="int64"),
        lambda xs: pa.array(xs, pa.int64()),
        lambda xs: pa.chunked_array([xs[:2], xs[2:]], pa.int64()),
    ],
)
def test_drive_accepts_numpy_pandas_lists(convert: object) -> None:
    ts, arrival = [100, 95, 130, 500], [0, 200, 200, 5000]
    s = WatermarkStrategy.for_bounded_out_of_orderness(10)
    r = drive(s, convert(ts), convert(arrival), emit_interval=200, start=0, until=6000)  # type: ignore[operator]
    assert r.record_watermark.to_pylist() == [MIN, 89, 89, 119]
    assert r.emissions.column("time").to_pylist() == [0, 200, 5000]
    assert r.emissions.column("kind").to_pylist() == ["watermark"] * 3
    assert r.emissions.schema.field("watermark").type == pa.int64()


def test_drive_input_errors() -> None:
    s = WatermarkStrategy.for_monotonous_timestamps()
    with pytest.raises(InvalidInputError) as info:
        drive(s, pa.array([1, None], pa.int64()), [1, 2])
    assert info.value.column == "event_time"
    with pytest.raises(InvalidInputError) as info:
        drive(s, [1, 2], [2, 1])
    assert info.value.column == "arrival"
    with pytest.raises(InvalidInputError, match="has 3 values but event_time has 2") as info:
        drive(s, [1, 2], [1, 2, 3])
    assert info.value.column == "arrival"
    with pytest.raises(InvalidInputError, match="has 1 values but event_time has 2") as info:
        drive(WatermarkStrategy.for_punctuated("m"), [1, 2], [1, 2], marker=[5])
    assert info.value.column == "marker"
    with pytest.raises(InvalidParameterError) as pinfo:
        drive(s, [1], [1], emit_interval=0)
    assert pinfo.value.parameter == "emit_interval"
    with pytest.raises(InvalidParameterError) as pinfo:
        drive(WatermarkStrategy.for_punctuated("m"), [1], [1])
    assert pinfo.value.parameter == "marker"


def test_punctuated_drive() -> None:
    s = WatermarkStrategy.for_punctuated("m")
    r = drive(s, [1, 2, 3, 4], [5, 5, 6, 6], marker=[10, 20, None, 15], emit_interval=100)
    assert r.record_watermark.to_pylist() == [MIN, MIN, 20, 20]
    assert r.emissions.to_pylist() == [
        {"time": 5, "kind": "watermark", "watermark": 10},
        {"time": 5, "kind": "watermark", "watermark": 20},
    ]


def test_valve_api() -> None:
    v = Valve(2)
    assert v.input_watermark(0, 10) == []
    assert v.input_watermark(1, 5) == [Emission("watermark", 5)]
    assert v.min_channel == 1
    snap = v.snapshot()
    assert v.input_status(1, "idle") == [Emission("watermark", 10)]
    with pytest.raises(ChannelOutOfRangeError):
        v.input_watermark(2, 1)
    with pytest.raises(InvalidParameterError):
        v.input_status(0, "sleepy")  # type: ignore[arg-type]
    v.restore(snap)
    assert v.watermark == 5 and v.min_channel == 1
    out = Valve(2).process(
        [0, 1, 1, 0], ["watermark", "watermark", "idle", "idle"], [10, 5, None, None]
    )
    assert out.to_pylist() == [
        {"step": 1, "kind": "watermark", "watermark": 5},
        {"step": 2, "kind": "watermark", "watermark": 10},
        {"step": 3, "kind": "idle", "watermark": None},
    ]
    # A channel out of range anywhere in the batch: refused, nothing changed (the
    # rows before it moved the valve, and their emissions were lost with the error).
    v = Valve(1)
    with pytest.raises(ChannelOutOfRangeError):
        v.process([0, 3], ["watermark", "watermark"], [10, 1])
    assert v.watermark == Valve(1).watermark
    assert v.process([0], ["watermark"], [10]).to_pylist() == [
        {"step": 0, "kind": "watermark", "watermark": 10}
    ]


def test_multiplexer_api() -> None:
    m = Multiplexer()
    m.register_output("a")
    with pytest.raises(IllegalStateError):
        m.register_output("a")
    with pytest.raises(InvalidParameterError):
        m.emit_watermark("zz", 1)
    r = m.emit_watermark("a", 4)
    assert r.emitted == [Emission("watermark", 4)]
    assert [e.type for e in r.listener] == ["idle", "watermark"]
    snap = m.snapshot()
    m.mark_idle("a", via="deferred")
    assert m.on_periodic_emit().emitted == [Emission("idle")]
    m.restore(snap)
    assert m.on_periodic_emit().emitted == []
    assert m.unregister_output("a") and not m.unregister_output("a")


def test_combine_timeline() -> None:
    batch = pa.RecordBatch.from_pydict(
        {
            "channel": pa.array([1, 0, 0, 1, 0], pa.int64()),
            "time": pa.array([10, 10, 20, 30, 40], pa.int64()),
            "kind": ["watermark", "watermark", "watermark", "idle", "idle"],
            "watermark": pa.array([20, 5, 30, None, None], pa.int64()),
        }
    )
    t = combine(batch, num_channels=2)
    assert t.to_pylist() == [
        {"time": 10, "watermark": 5, "status": "active", "min_channel": 0, "advance": True},
        {"time": 20, "watermark": 20, "status": "active", "min_channel": 1, "advance": True},
        {"time": 30, "watermark": 30, "status": "active", "min_channel": 0, "advance": True},
        {"time": 40, "watermark": 30, "status": "idle", "min_channel": None, "advance": False},
    ]
    with pytest.raises(ChannelOutOfRangeError):
        combine(batch, num_channels=1)


@pytest.mark.parametrize(
    "strategy",
    [
        WatermarkStrategy.for_bounded_out_of_orderness(3).with_idleness(500),
        WatermarkStrategy.for_generator(lambda: BoundedPy(3)).with_idleness(500),
    ],
)
def test_drive_in_batches_with_snapshot(strategy: WatermarkStrategy) -> None:
    ts, arrival = [10, 7, 40, 45, 2000, 1990], [10, 20, 150, 200, 1900, 2000]
    whole = drive(strategy, ts, arrival, emit_interval=100, start=0, until=2500)
    gen = strategy.create_generator()
    a = drive(strategy, ts[:4], arrival[:4], emit_interval=100, start=0, until=200, generator=gen)
    again = strategy.create_generator()
    again.restore(gen.snapshot())
    b = drive(
        strategy, ts[4:], arrival[4:], emit_interval=100, start=201, until=2500, generator=again
    )
    assert a.record_watermark.to_pylist() + b.record_watermark.to_pylist() == (
        whole.record_watermark.to_pylist()
    )
    assert a.emissions.to_pylist() + b.emissions.to_pylist() == whole.emissions.to_pylist()
    with pytest.raises(InvalidParameterError) as info:
        drive(WatermarkStrategy.no_watermarks(), [1], [1], generator=gen)
    assert info.value.parameter == "generator"


I64 = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=300, derandomize=True)
@given(ts=I64, wm=I64, lateness=st.integers(0, 2**63 - 1))
def test_element_late_is_flinks_rule_in_java_arithmetic(ts: int, wm: int, lateness: int) -> None:
    """``_core.element_late``, the one definition the replay and the Spark layer's SQL
    transcription are checked against: ``ts + L <= W`` with the sum wrapping like a Java
    ``long``; without a lateness, ``assign_watermarks``' ``is_late`` (not before the
    first watermark)."""
    java_sum = (ts + lateness + 2**63) % 2**64 - 2**63
    got = element_late(pa.array([ts]), pa.array([wm]), lateness)
    assert got.to_pylist() == [java_sum <= wm]
    assert element_late(pa.array([ts]), pa.array([wm])).to_pylist() == [wm > MIN and ts <= wm]


def test_element_late_names_bad_input() -> None:
    ts, wm = pa.array([1, 2]), pa.array([2, 2])
    assert element_late(ts, wm, 0).to_pylist() == [True, True]
    with pytest.raises(InvalidParameterError, match="allowed_lateness"):
        element_late(ts, wm, -1)
    with pytest.raises(InvalidParameterError, match="watermark"):
        element_late(ts, pa.array([2]))
    with pytest.raises(InvalidInputError, match=r"event_time.*null"):
        element_late(pa.array([1, None]), wm)
    with pytest.raises(InvalidInputError, match=r"watermark.*int64"):
        element_late(ts, pa.array([1.0, 2.0]))


def test_a_generator_is_not_fed_records_after_the_grid_it_ran() -> None:
    """With ``generator=``, records past this call's grid (``until`` earlier than the
    last arrival) would reach the generator before the emissions between, which the
    next call makes: a punctuated record then saw its sibling's watermark of the same
    arrival, and a later call could go back in time. Refused, naming ``arrival``;
    ``until`` at the last arrival gives what one call gives."""
    punctuated = WatermarkStrategy.for_punctuated("m")
    g = punctuated.create_generator()
    with pytest.raises(InvalidInputError, match="arrival"):
        drive(punctuated, [1, 60], [0, 500], marker=[None, 50], until=100, generator=g)
    whole = drive(punctuated, [1, 60, 70], [0, 500, 500], marker=[None, 50, None])
    g = punctuated.create_generator()
    first = drive(punctuated, [1, 60], [0, 500], marker=[None, 50], until=500, generator=g)
    with pytest.raises(InvalidInputError, match="arrival"):  # the grid ran to 600
        drive(punctuated, [70], [500], marker=[None], generator=g)
    assert first.record_watermark.to_pylist() == whole.record_watermark.to_pylist()[:2]
