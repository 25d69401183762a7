"""Issue 18, the Python API at the edges: integers outside int64 and floats refused
by name, numpy integers accepted, snapshots refused when corrupt, truncated or taken
from another configuration, a continued ``drive`` that goes back, a table that needs
several record batches."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import floodmark.arrays
import floodmark.windows
from floodmark import Multiplexer, Valve, WatermarkStrategy, combine, drive
from floodmark.exceptions import (
    InvalidInputError,
    InvalidParameterError,
    SchemaError,
    SnapshotError,
)
from floodmark.generator import WatermarkOutput
from floodmark.replay import replay
from floodmark.timeline import TimelineBuilder
from floodmark.windows import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    WindowOperator,
    merge_windows,
    window_start_with_offset,
)

MIN, MAX = -(2**63), 2**63 - 1
BIG = 2**64


class Ascending:
    """A user generator: the largest timestamp so far, minus one."""

    def __init__(self) -> None:
        self.max_ts = MIN + 1

    def on_event(self, timestamp: int, output: WatermarkOutput) -> None:
        self.max_ts = max(self.max_ts, timestamp)

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        output.emit_watermark(self.max_ts - 1)


class Other(Ascending):
    pass


def operator(**kw: Any) -> WindowOperator:
    args: dict[str, Any] = {"key": "k", "event_time": "ts", "aggs": ["count", ("sum", "v")]}
    args.update(kw)
    window = args.pop("window", TumblingEventTimeWindows.of(10))
    return WindowOperator(window, **args)


def parameter_of(call: Callable[[], object]) -> str:
    with pytest.raises(InvalidParameterError) as info:
        call()
    return info.value.parameter


def column_of(call: Callable[[], object]) -> str:
    with pytest.raises(InvalidInputError) as info:
        call()
    return info.value.column


# --- integers: outside int64 and floats refused by name, numpy integers accepted ----


def test_ints_outside_int64_name_the_argument() -> None:
    gen = WatermarkStrategy.for_bounded_out_of_orderness(5).create_generator()
    assert parameter_of(lambda: gen.on_event(BIG)) == "timestamp"
    assert parameter_of(lambda: gen.on_event(1, marker=-BIG)) == "marker"
    assert parameter_of(lambda: gen.on_periodic_emit(MAX + 1)) == "now"
    v = Valve(2)
    assert parameter_of(lambda: v.input_watermark(0, BIG)) == "wm"
    assert parameter_of(lambda: v.input_watermark(BIG, 1)) == "channel"
    assert parameter_of(lambda: v.input_status(BIG, "idle")) == "channel"
    m = Multiplexer()
    m.register_output("a")
    assert parameter_of(lambda: m.emit_watermark("a", BIG)) == "wm"
    s = WatermarkStrategy.for_monotonous_timestamps()
    assert parameter_of(lambda: drive(s, [1], [1], start=BIG)) == "start"
    assert parameter_of(lambda: drive(s, [1], [1], until=MIN - 1)) == "until"
    assert column_of(lambda: drive(s, [BIG], [1])) == "event_time"
    w = TumblingEventTimeWindows.of(10)
    assert parameter_of(lambda: w.assign_windows(BIG)) == "timestamp"
    assert parameter_of(lambda: window_start_with_offset(BIG, 0, 5)) == "timestamp"
    assert parameter_of(lambda: window_start_with_offset(1, 0, BIG)) == "size"
    assert parameter_of(lambda: merge_windows([(0, BIG)])) == "windows"
    op = operator()
    assert parameter_of(lambda: op.advance(BIG)) == "watermark"
    assert parameter_of(lambda: op.advance(1, time=BIG)) == "time"
    assert parameter_of(lambda: op.finish(time=-BIG)) == "time"
    rb = pa.record_batch({"k": [1], "ts": [1], "v": [1]})
    assert column_of(lambda: op.process(rb, {"position": [0], "watermark": [BIG]})) == "watermark"
    assert column_of(lambda: op.process(rb, {"position": [BIG], "watermark": [1]})) == "position"


def test_floats_and_none_are_refused_not_truncated() -> None:
    s = WatermarkStrategy.for_monotonous_timestamps()
    assert column_of(lambda: drive(s, [1.5, 2.0], [0, 1])) == "event_time"
    assert column_of(lambda: drive(s, [1, 2], [0.0, 1.0])) == "arrival"
    assert column_of(lambda: drive(s, np.array([1.5]), [0])) == "event_time"
    op = operator()
    assert parameter_of(lambda: op.advance(5.7)) == "watermark"  # type: ignore[arg-type]
    assert parameter_of(lambda: op.advance(None)) == "watermark"  # type: ignore[arg-type]
    assert parameter_of(lambda: op.finish(time=1.5)) == "time"  # type: ignore[arg-type]
    rb = pa.record_batch({"k": [1], "ts": [1], "v": [1]})
    assert column_of(lambda: op.process(rb, {"position": [1], "watermark": [5.7]})) == "watermark"
    assert column_of(lambda: op.process(rb, {"position": [0.5], "watermark": [5]})) == "position"
    assert column_of(
        lambda: op.process(rb, {"position": [1], "watermark": [5], "time": [1.5]})
    ) == ("time")
    assert op.position == 0 and op.watermark == MIN  # nothing was processed
    assert parameter_of(lambda: merge_windows([(0.5, 3)])) == "windows"  # type: ignore[list-item]
    gen = WatermarkStrategy.for_monotonous_timestamps().create_generator()
    assert parameter_of(lambda: gen.on_event(2.0)) == "timestamp"  # type: ignore[arg-type]
    assert parameter_of(lambda: Valve(1).input_watermark(0, 1.5)) == "wm"  # type: ignore[arg-type]


def test_numpy_integers_are_ints() -> None:
    i = np.int64
    assert Valve(i(3)).num_channels == 3
    assert Valve(np.uint8(2)).input_watermark(i(0), i(5)) == []
    empty = pa.record_batch(
        {
            "channel": pa.array([], pa.int64()),
            "time": pa.array([], pa.int64()),
            "kind": pa.array([], pa.string()),
            "watermark": pa.array([], pa.int64()),
        }
    )
    assert combine(empty, num_channels=i(2)).num_rows == 0
    assert parameter_of(lambda: Valve(True)) == "num_channels"  # a bool is not a count
    assert parameter_of(lambda: Valve(BIG)) == "num_channels"
    assert repr(TumblingEventTimeWindows.of(i(10))) == "TumblingEventTimeWindows(size=10, offset=0)"
    s = WatermarkStrategy.for_bounded_out_of_orderness(i(5)).with_idleness(np.int32(100))
    assert s.bound == 5 and type(s.bound) is int
    gen = s.create_generator()
    gen.on_event(i(50))
    assert [e.watermark for e in gen.on_periodic_emit(i(1))] == [44]
    r = drive(s, [10], [0], start=i(0), until=np.int16(200), emit_interval=i(100))
    assert r.record_watermark.to_pylist() == [MIN]
    w = SlidingEventTimeWindows.of(i(10), i(5), np.int8(1))
    assert w.assign_windows(i(7)) == [(6, 16), (1, 11)]
    op = operator(window=w, allowed_lateness=i(2))
    op.process(
        pa.record_batch({"k": [1], "ts": [7], "v": [1]}), {"position": [i(1)], "watermark": [i(20)]}
    )
    assert op.advance(i(30)).results.num_rows == 0
    assert op.finish(time=i(9)).results.num_rows == 0


def test_user_generator_watermarks_must_be_int64() -> None:
    class Bad(Ascending):
        def on_periodic_emit(self, output: WatermarkOutput) -> None:
            output.emit_watermark(2.5)  # type: ignore[arg-type]

    gen = WatermarkStrategy.for_generator(Bad).create_generator()
    assert parameter_of(lambda: gen.on_periodic_emit()) == "emit_watermark"  # the call it made


# --- drive: errors name what the caller gave; a continued drive may not go back ----


def test_drive_names_what_the_caller_passed() -> None:
    s = WatermarkStrategy.for_monotonous_timestamps()
    # until defaults to the last arrival: the error names arrival, not until
    assert column_of(lambda: drive(s, [1, 2], [0, 50], start=100)) == "arrival"
    assert parameter_of(lambda: drive(s, [1, 2], [0, 50], start=100, until=60)) == "until"
    assert parameter_of(lambda: drive(s, [1, 2], [40, 50], until=30)) == "until"
    # the last grid time overflows: arrival (defaulted until) or until
    assert column_of(lambda: drive(s, [1], [MAX], emit_interval=10)) == "arrival"
    assert parameter_of(lambda: drive(s, [1], [1], until=MAX, emit_interval=10)) == "until"


@pytest.mark.parametrize(
    "strategy",
    [
        WatermarkStrategy.for_bounded_out_of_orderness(3),
        WatermarkStrategy.for_generator(Ascending),
    ],
)
def test_continued_drive_must_come_after_the_last_grid_time(strategy: WatermarkStrategy) -> None:
    gen = strategy.create_generator()
    drive(strategy, [10, 20], [10, 150], emit_interval=100, start=0, until=200, generator=gen)
    # the grid ran to 200: a record arriving at or before it, or a grid from it, goes back
    assert (
        column_of(lambda: drive(strategy, [5], [200], emit_interval=100, generator=gen))
        == "arrival"
    )
    assert (
        parameter_of(
            lambda: drive(strategy, [5], [300], emit_interval=100, start=150, generator=gen)
        )
        == "start"
    )
    # the last grid time travels with the snapshot
    again = strategy.create_generator()
    again.restore(gen.snapshot())
    assert (
        column_of(lambda: drive(strategy, [5], [120], emit_interval=100, generator=again))
        == "arrival"
    )
    ok = drive(strategy, [30], [201], emit_interval=100, generator=again)
    assert ok.record_watermark.to_pylist() == [16 if strategy.kind != "python" else 19]
    assert (
        column_of(lambda: drive(strategy, [5], [250], emit_interval=100, generator=again))
        == "arrival"
    )  # the grid of the last call ran to 300


# --- snapshots: another configuration, corruption, truncation --------------------


def test_generator_snapshot_of_another_configuration_is_refused() -> None:
    base = WatermarkStrategy.for_bounded_out_of_orderness(5)
    others = [
        WatermarkStrategy.for_bounded_out_of_orderness(10),
        base.with_idleness(100),
        WatermarkStrategy.for_processing_time_lag(5),
        WatermarkStrategy.no_watermarks(),
        WatermarkStrategy.for_punctuated("m"),
    ]
    gen = base.create_generator()
    for other in others:
        with pytest.raises(SnapshotError, match="bound=5") as info:
            gen.restore(other.create_generator().snapshot())
        assert "generator" in str(info.value)
    idle = base.with_idleness(100).create_generator()
    with pytest.raises(SnapshotError, match="with_idleness"):
        idle.restore(base.with_idleness(200).create_generator().snapshot())
    gen.restore(base.create_generator().snapshot())
    assert gen.strategy == base
    # user generators: the idle timeout and the generator's class must match
    py = WatermarkStrategy.for_generator(Ascending)
    pgen = py.create_generator()
    for other_py in (py.with_idleness(100), WatermarkStrategy.for_generator(Other)):
        with pytest.raises(SnapshotError, match="Ascending"):
            pgen.restore(other_py.create_generator().snapshot())
    pgen.restore(py.create_generator().snapshot())


def test_valve_snapshot_of_another_number_of_channels_is_refused() -> None:
    v = Valve(2)
    with pytest.raises(SnapshotError, match="4 channel"):
        v.restore(Valve(4).snapshot())
    assert v.num_channels == 2
    v.restore(Valve(2).snapshot())


@pytest.mark.parametrize(
    ("other", "what"),
    [
        ({"window": TumblingEventTimeWindows.of(20)}, "assigner"),
        ({"window": EventTimeSessionWindows.with_gap(10)}, "assigner"),
        ({"allowed_lateness": 5}, "allowed lateness"),
        ({"key": ["k", "v"]}, "key columns"),
        ({"aggs": ["count"]}, "aggregates"),
        ({"aggs": ["count", ("max", "v")]}, "aggregates"),
    ],
)
def test_operator_snapshot_of_another_configuration_is_refused(
    other: dict[str, Any], what: str
) -> None:
    op = operator()
    op.process(pa.record_batch({"k": [1], "ts": [3], "v": [4]}))
    with pytest.raises(SnapshotError, match=what):
        operator(**other).restore(op.snapshot())


def snapshots() -> list[tuple[str, bytes, Callable[[bytes], None]]]:
    gen = WatermarkStrategy.for_bounded_out_of_orderness(7).with_idleness(100)
    g = gen.create_generator()
    g.on_event(1234)
    g.on_periodic_emit(5000)
    drive(gen, [1300], [5100], emit_interval=100, generator=g)
    py = WatermarkStrategy.for_generator(Ascending).create_generator()
    py.on_event(99)
    v = Valve(3)
    v.input_watermark(0, 10)
    v.input_status(2, "idle")
    m = Multiplexer()
    m.register_output("a")
    m.register_output("bc")
    m.emit_watermark("a", 10)
    op = operator(window=EventTimeSessionWindows.with_gap(5), allowed_lateness=3)
    op.process(
        pa.record_batch({"k": ["x", "yy", "x"], "ts": [1, 7, 12], "v": [3, 4, 5]}),
        {"position": [2], "watermark": [9]},
    )
    return [
        ("generator", g.snapshot(), gen.create_generator().restore),
        ("user generator", py.snapshot(), py.restore),
        ("valve", v.snapshot(), Valve(3).restore),
        ("multiplexer", m.snapshot(), Multiplexer().restore),
        ("window operator", op.snapshot(), op.restore),
    ]


@pytest.mark.parametrize(
    ("name", "snap", "restore"), [pytest.param(*s, id=s[0]) for s in snapshots()]
)
def test_every_corrupted_byte_and_truncation_is_refused(
    name: str, snap: bytes, restore: Callable[[bytes], None]
) -> None:
    restore(snap)
    accepted = []
    for i in range(len(snap)):
        for flip in (0x01, 0xFF):
            bad = bytearray(snap)
            bad[i] ^= flip
            try:
                restore(bytes(bad))
                accepted.append(f"byte {i} ^ {flip:#x}")
            except SnapshotError:
                pass
    for n in range(len(snap)):
        try:
            restore(snap[:n])
            accepted.append(f"truncated to {n}")
        except SnapshotError:
            pass
    assert not accepted, f"{name}: {len(accepted)} accepted, e.g. {accepted[:5]}"


# --- a table that needs several record batches even with its chunks combined -------


def test_a_table_of_several_batches_is_processed_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    # A string column over 2 GiB stays several chunks after combine_chunks(); that is
    # simulated by leaving the chunks as they are (every row used to be skipped).
    monkeypatch.setattr(floodmark.windows, "combined", lambda table: table)
    rows = {
        "k": [1, 1, 2, 1, 2, 1, 1],
        "ts": [1, 4, 12, 3, 25, 2, 40],
        "v": [1, 2, 3, 4, 5, 6, 7],
        "payload": ["a", "b", "c", "d", "e", "f", "g"],
    }
    whole = pa.record_batch(rows)
    table = pa.Table.from_batches([whole.slice(0, 2), whole.slice(2, 3), whole.slice(5, 2)])
    assert len(floodmark.windows._to_batches(table)) == 3
    # advances inside a batch, at a boundary, at the start and at the end
    advances = {
        "position": [0, 2, 4, 5, 7],
        "watermark": [0, 9, 10, 19, 30],
        "time": [1, 2, 3, 4, 5],
    }
    outs = []
    for data in (whole, table):
        op = operator(allowed_lateness=3, arrival=None)
        out = op.process(data, advances)
        fin = op.finish()
        outs.append(
            (
                out.results.to_pylist(),
                out.late.to_pylist(),
                out.dropped.to_pylist(),
                fin.results.to_pylist(),
                op.position,
            )
        )
    assert outs[1] == outs[0]
    results, late, _, final, position = outs[0]
    assert position == 7
    assert sum(r["count"] for r in results + final if r["timing"] == "on_time") + len(late) >= 6
    # bad positions are refused before anything is processed
    op = operator()
    assert column_of(lambda: op.process(table, {"position": [8], "watermark": [1]})) == "position"
    assert op.position == 0


def test_what_cannot_be_one_record_batch_is_refused_and_nothing_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A column over 2 GiB (several chunks even combined, simulated as above; building
    # one costs ~5 s of copying) where a native call needs one batch: the valve's
    # emissions, a window call's outputs (floodmark.arrays.one_batch, the one check).
    emissions = pa.table(
        {"channel": [0, 1], "time": [1, 2], "kind": ["watermark"] * 2, "watermark": [5, 6]}
    )
    split = pa.Table.from_batches(emissions.to_batches(max_chunksize=1))
    whole = combine(split, num_channels=2)
    monkeypatch.setattr(floodmark.arrays, "combined", lambda table: table)
    assert combine(emissions, num_channels=2).equals(whole)  # one chunk: as before
    with pytest.raises(InvalidInputError, match=r"`emissions`: does not fit one record batch"):
        combine(split, num_channels=2)
    monkeypatch.setattr(floodmark.windows, "combined", lambda table: table)
    rows = pa.table({"k": [1, 2, 1], "ts": [1, 12, 30], "v": [1, 2, 3]})
    parts = pa.Table.from_batches(rows.to_batches(max_chunksize=1))
    op = operator()
    with pytest.raises(InvalidInputError, match=r"outputs of this call.*state is unchanged"):
        op.process(parts, {"position": [1, 2, 3], "watermark": [0, 20, 40]})
    assert op.position == 0
    out = op.process(rows, {"position": [1, 2, 3], "watermark": [0, 20, 40]})
    assert out.results["count"].to_pylist() == [1, 1, 1]  # as if nothing had been refused


# --- Arrow times: one rule (floodmark.arrays.time_ticks) -------------------------------


def test_arrow_times_become_ticks_of_the_unit_floored_and_range_checked() -> None:
    from floodmark.arrays import time_ticks

    us = pa.array([-10_500, -10_000, 10_500, None], pa.timestamp("us", tz="UTC"))
    assert time_ticks(us, "c", "ms").to_pylist() == [-11, -10, 10, None]  # floored
    assert time_ticks(us, "c", "ns").to_pylist() == [-10_500_000, -10_000_000, 10_500_000, None]
    year_9999 = pa.array([253_402_214_400], pa.timestamp("s"))
    with pytest.raises(InvalidInputError, match=r"`c`.*outside the int64 range.*'ns'"):
        time_ticks(year_9999, "c", "ns")


def test_drive_reads_timestamps_in_its_unit_and_refuses_columns_of_other_lengths() -> None:
    s = WatermarkStrategy.for_bounded_out_of_orderness(10)
    seconds = pa.array([1_000_000, 2_000_000], pa.timestamp("us"))  # 1 s and 2 s
    got = drive(s, seconds, pa.array([0, 200], pa.timestamp("ms")), unit="ms")
    want = drive(s, [1_000, 2_000], [0, 200], unit="ms")
    assert got.record_watermark == want.record_watermark
    assert got.record_watermark.to_pylist()[1] == 989
    with pytest.raises(InvalidInputError, match=r"`arrival`.*0 values but event_time has 3"):
        drive(s, [100, 200, 300], [])
    punctuated = WatermarkStrategy.for_punctuated("wm")
    with pytest.raises(InvalidInputError, match=r"`marker`.*2 values but event_time has 0"):
        drive(punctuated, [], [], marker=[1, 2])


def test_engines_without_a_unit_refuse_timestamps_naming_the_column() -> None:
    stamps = pa.array([1, 2], pa.timestamp("ms"))
    with pytest.raises(InvalidInputError, match=r"`watermark`.*integer ticks, got timestamp"):
        Valve(2).process([0, 1], ["watermark", "watermark"], stamps)


def test_low_level_arguments_of_the_wrong_type_are_refused_by_name() -> None:
    valve = Valve(2)
    with pytest.raises(InvalidInputError, match=r"`kind`: must be strings, got int64"):
        valve.process([0], [1], [5])
    with pytest.raises(InvalidInputError, match=r"`kind`: must be strings, got list"):
        valve.process([0], [[1]], [5])
    with pytest.raises(InvalidInputError, match=r"`kind`: .*got a null$"):
        valve.process([0], [None], [5])
    with pytest.raises(InvalidInputError, match=r"`kind`: .*got \"idel\"$"):
        valve.process([0], ["idel"], [5])
    assert valve.process(np.array([0]), np.array(["idle"]), [None]).num_rows == 0
    mux = Multiplexer()
    for call in (
        lambda: mux.register_output(5),  # type: ignore[arg-type]
        lambda: mux.emit_watermark(b"a", 1),  # type: ignore[arg-type]
        lambda: mux.mark_idle(None),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidParameterError, match="`output_id`: expected a str"):
            call()
    for windows in ([1, 2], [(1, 2, 3)], ["ab"]):
        with pytest.raises(InvalidParameterError, match=r"`windows`: expected \(start, end\)"):
            merge_windows(windows)  # type: ignore[arg-type]
    tumbling = TumblingEventTimeWindows.of(10)
    for name in ("event_time", "arrival"):
        with pytest.raises(InvalidParameterError, match=f"`{name}`: expected a column name"):
            WindowOperator(tumbling, key="k", **{"event_time": "ts", name: 5})  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [True, 1.5, "10", None])
def test_window_assigners_refuse_parameters_of_the_wrong_type_when_built(bad: Any) -> None:
    with pytest.raises(InvalidParameterError, match=r"`size`: expected a datetime\.timedelta"):
        TumblingEventTimeWindows.of(bad)
    with pytest.raises(InvalidParameterError, match=r"`slide`: expected a datetime\.timedelta"):
        SlidingEventTimeWindows.of(10, bad)
    with pytest.raises(InvalidParameterError, match=r"`offset`: expected a datetime\.timedelta"):
        TumblingEventTimeWindows.of(10, offset=bad)
    with pytest.raises(InvalidParameterError, match=r"`gap`: expected a datetime\.timedelta"):
        EventTimeSessionWindows.with_gap(bad)


def test_decreasing_arrivals_are_named_as_such() -> None:
    s = WatermarkStrategy.for_bounded_out_of_orderness(10)
    with pytest.raises(InvalidInputError, match=r"`arrival`: must be non-decreasing, but the last"):
        drive(s, [1, 2, 3], [3, 2, 1])
    with pytest.raises(
        InvalidInputError, match=r"`arrival`: the last arrival \(1\) is before start"
    ):
        drive(s, [1], [1], start=3)


@pytest.mark.parametrize(
    "keys",
    [
        pa.array(["a", "b", "a"]).cast(pa.string_view()),
        pa.array(["a", "b", "a"]).cast(pa.large_string()).dictionary_encode(),
        pa.array([7, 8, 7], pa.int16()).dictionary_encode(),
    ],
    ids=["string_view", "dictionary_of_large_string", "dictionary_of_int16"],
)
def test_view_and_dictionary_key_columns_window_by_value(keys: pa.Array) -> None:
    """Key columns of Arrow's view and dictionary types: windows keyed by value, the
    results' keys in the input's type (a dictionary's value type), a view-typed value
    column carried to the late rows."""
    op = WindowOperator(TumblingEventTimeWindows.of(10), key="k", event_time="ts")
    note = pa.array(["x", "y", "z"]).cast(pa.string_view())
    batch = pa.table({"k": keys, "ts": [1, 2, 3], "note": note})
    out = op.process(batch, {"position": [3], "watermark": [100]})
    plain = keys.dictionary_decode() if pa.types.is_dictionary(keys.type) else keys
    first, second = plain[0].as_py(), plain[1].as_py()
    assert [(r["k"], r["count"]) for r in out.results.to_pylist()] == [(first, 2), (second, 1)]
    assert out.results.schema.field("k").type == plain.type  # a dictionary's values
    late = op.process(batch.slice(0, 1), {"position": [0], "watermark": [200]}).late
    assert late.to_pylist() == [{"k": first, "ts": 1, "note": "x", "watermark": 200}]
    assert late.schema.field("note").type == pa.string_view()


def test_categorical_keys_whose_codes_widen_keep_every_window() -> None:
    """pandas categoricals reach Arrow as dictionaries whose index type widens with the
    categories (int8 codes, then int16): keyed by value, every window comes out. The
    results' keys were cast to the first batch's dictionary type after the windows had
    fired and left the state: an error, and the 200 windows lost."""
    import pandas as pd

    op = WindowOperator(TumblingEventTimeWindows.of(10), key="user", event_time="t")
    for b, n in ((0, 100), (1, 300)):
        users = pd.Categorical([f"u{b}_{i}" for i in range(n)])
        op.process(pd.DataFrame({"user": users, "t": [1] * n}))
    results = op.finish().results
    assert results.num_rows == 400
    assert results.schema.field("user").type == pa.string()


def test_a_restored_operator_forgets_what_it_saw_and_keeps_keys_that_do_not_fit() -> None:
    """restore() replaces the state: the key types an operator saw before are not the
    snapshot's. A restored key that the next batch's narrower type cannot hold comes
    back in the engine's type (int64), not as an error after its window left the
    state."""
    window = TumblingEventTimeWindows.of(10)
    ints = WindowOperator(window, key="k", event_time="t")
    ints.process(pa.table({"k": [1000, 1], "t": [1, 2]}))
    snapshot = ints.snapshot()
    used = WindowOperator(window, key="k", event_time="t")
    used.process(pa.table({"k": ["a"], "t": [1]}))
    used.restore(snapshot)
    assert [(r["k"], r["count"]) for r in used.finish().results.to_pylist()] == [
        (1000, 1),
        (1, 1),
    ]
    narrow = WindowOperator(window, key="k", event_time="t")
    narrow.restore(snapshot)
    batch = pa.table({"k": pa.array([1], pa.int8()), "t": [3]})
    out = narrow.process(batch, {"position": [1], "watermark": [100]})
    assert sorted((r["k"], r["count"]) for r in out.results.to_pylist()) == [(1, 2), (1000, 1)]


def test_key_types_are_fixed_by_a_processed_batch_with_rows_only() -> None:
    """A batch refused (a bad event-time column) or empty fixes no key or value type."""
    window = TumblingEventTimeWindows.of(10)
    op = WindowOperator(window, key="k", event_time="t", aggs=["count", ("sum", "v")])
    with pytest.raises(InvalidInputError):
        op.process(pa.table({"k": ["a"], "t": [1.5], "v": [1]}))
    op.process(
        pa.table(
            {
                "k": pa.array([], pa.int64()),
                "t": pa.array([], pa.int64()),
                "v": pa.array([], pa.int64()),
            }
        )
    )
    out = op.process(
        pa.table({"k": [7], "t": [1], "v": [2.5]}), {"position": [1], "watermark": [50]}
    )
    assert out.results.to_pylist()[0]["k"] == 7
    assert out.results.to_pylist()[0]["sum_v"] == 2.5


def test_key_and_channel_columns_of_only_nulls_and_no_type_are_taken() -> None:
    """pandas gives an empty or all-None object column Arrow's null type: an empty one
    fixes no key type, one of nulls after a typed batch is that type's nulls, and
    replay takes it as a key or channel of nulls; nulls before any typed batch are
    refused naming the column (their type would fix the results' key type)."""
    import pandas as pd

    window = TumblingEventTimeWindows.of(10)
    nothing = pd.DataFrame({"k": pd.Series([], dtype=object), "t": pd.Series([], dtype="int64")})
    nulls = pd.DataFrame({"k": [None, None], "t": [1, 2]})
    op = WindowOperator(window, key="k", event_time="t")
    assert op.process(nothing).results.num_rows == 0
    with pytest.raises(SchemaError, match="holds only nulls and has no type") as err:
        op.process(nulls)
    assert err.value.column == "k"
    op.process(pd.DataFrame({"k": ["a"], "t": [3]}))
    op.process(nulls)
    results = op.finish().results
    assert results.schema.field("k").type == pa.string()
    assert sorted(results.select(["k", "count"]).to_pylist(), key=str) == [
        {"k": "a", "count": 1},
        {"k": None, "count": 2},
    ]
    # The late and dropped rows of such a batch carry the key's type too.
    op = WindowOperator(window, key="k", event_time="t")
    op.process(pd.DataFrame({"k": ["a"], "t": [3]}))
    out = op.process(
        pd.DataFrame({"k": [None, None], "t": pd.Series([1, None], dtype="Int64")}),
        {"position": [0], "watermark": [100]},
    )
    assert out.late.column("k").to_pylist() == [None] and out.dropped.num_rows == 1
    assert out.late.schema.field("k").type == out.dropped.schema.field("k").type == pa.string()
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0)
    rows = pd.DataFrame({"c": [None, None], "k": [None, None], "t": [1, 2], "a": [1, 2]})
    empty = rows.iloc[:0].astype({"c": object, "k": object})
    assert replay(empty, strategy, channel="c", arrival="a", event_time="t").dropped.num_rows == 0
    dropped = replay(rows, strategy, channel="c", arrival="a", event_time="t").dropped
    assert dropped.column("reason").to_pylist() == ["null_channel"] * 2
    rows["c"] = 0
    out = replay(rows, strategy, channel="c", arrival="a", event_time="t", window=window, key="k")
    assert out.results.select(["k", "count"]).to_pylist() == [{"k": None, "count": 2}]


def test_a_window_operator_snapshot_of_another_unit_is_refused() -> None:
    """Every time an operator stores (watermark, window bounds) is in its unit: a
    snapshot of an ``ms`` operator restored into an ``s`` one read the watermark 1000x
    too far ahead and sent the next record to ``late``. The engine's bytes of an
    earlier floodmark (no unit header) still restore."""
    window = TumblingEventTimeWindows.of(1000)
    ms = WindowOperator(window, key="k", event_time="t", unit="ms")
    ms.process(pa.table({"k": [1], "t": [5]}), {"position": [1], "watermark": [10]})
    snapshot = ms.snapshot()
    seconds = WindowOperator(window, key="k", event_time="t", unit="s")
    with pytest.raises(SnapshotError, match=r"unit=ms.*this one has unit='s'"):
        seconds.restore(snapshot)
    again = WindowOperator(window, key="k", event_time="t", unit="ms")
    again.restore(snapshot)
    assert again.snapshot() == snapshot
    legacy = WindowOperator(window, key="k", event_time="t", unit="ms")
    legacy.restore(bytes(ms._native.snapshot()))
    assert legacy.watermark == 10 and legacy.snapshot() == snapshot


def _events(**extra: pa.Array) -> pa.Table:
    """Four records of two channels, and ``extra`` columns."""
    return pa.table(
        {
            "ts": pa.array([1, 5, 3, 9], pa.int64()),
            "at": pa.array([0, 1, 2, 3], pa.int64()),
            "ch": pa.array([0, 1, 0, 1], pa.int64()),
            "k": pa.array([1, 1, 2, 2], pa.int64()),
            **extra,
        }
    )


BOUNDED = WatermarkStrategy.for_bounded_out_of_orderness(2)
TUMBLING = TumblingEventTimeWindows.of(10)


@pytest.mark.parametrize(
    ("call", "parameter"),
    [
        (lambda t: replay(t, "bo", channel="ch", arrival="at"), "strategy"),  # type: ignore[arg-type]
        (lambda t: replay(t, BOUNDED, channel=None, arrival="at", event_time="ts"), "channel"),
        (lambda t: replay(t, BOUNDED, channel=2, arrival=1, event_time="ts"), "channel"),
        (lambda t: replay(t, BOUNDED, channel="ch", arrival="at", event_time=0), "event_time"),
        (
            lambda t: replay(
                t, BOUNDED, channel="ch", arrival="at", event_time="ts", window=TUMBLING, key=5
            ),
            "key",
        ),
        (
            lambda t: replay(t, BOUNDED, channel="ch", arrival="at", event_time="ts", aggs=None),
            "aggs",
        ),
        (
            lambda t: replay(
                t, BOUNDED, channel="ch", arrival="at", event_time="ts", event_time_unit="m"
            ),
            "event_time_unit",
        ),
        (
            lambda t: replay(
                t, BOUNDED, channel="ch", arrival="at", event_time="ts", arrival_unit="m"
            ),
            "arrival_unit",
        ),
        (
            lambda t: replay(
                t, BOUNDED, channel="ch", arrival="at", event_time="ts", source_parallelism=2**70
            ),
            "source_parallelism",
        ),
        (
            lambda t: replay(
                t,
                BOUNDED,
                channel="ch",
                arrival="at",
                event_time="ts",
                window=TUMBLING,
                key="k",
                allowed_lateness=-1,
            ),
            "allowed_lateness",
        ),
        (lambda t: WindowOperator(TUMBLING, key=None, event_time="ts"), "key"),  # type: ignore[arg-type]
        (lambda t: TimelineBuilder(BOUNDED, 2, subtasks=[0]), "subtasks"),
        (lambda t: TimelineBuilder(BOUNDED, 2, subtasks=[0, 2]), "subtasks"),
        (lambda t: TimelineBuilder(BOUNDED, 2, end_buckets=[0]), "end_buckets"),
        (lambda t: TimelineBuilder(BOUNDED, 2**63), "num_channels"),
        (lambda t: TimelineBuilder(BOUNDED, 2, keep_emissions="no"), "keep_emissions"),  # type: ignore[arg-type]
        (lambda t: TimelineBuilder.for_emissions(2, keep_emissions=1), "keep_emissions"),  # type: ignore[arg-type]
    ],
)
def test_replay_and_builders_name_the_bad_argument(
    call: Callable[[pa.Table], Any], parameter: str
) -> None:
    """Each was a raw AttributeError, TypeError, KeyError or OverflowError, named another
    parameter, or (channel=2) read the columns by position."""
    with pytest.raises(InvalidParameterError, match=f"`{parameter}`"):
        call(_events())


def test_replay_names_a_marker_column_that_is_not_integer() -> None:
    """A float marker column was blamed on ``marker`` (drive's parameter)."""
    punctuated = WatermarkStrategy.for_punctuated("m")
    table = _events(m=pa.array([1.0, 2.0, 3.0, 4.0]))
    with pytest.raises(InvalidInputError, match="`m`"):
        replay(table, punctuated, channel="ch", arrival="at", event_time="ts")


def test_a_column_named_twice_or_added_by_replay_is_a_schema_error() -> None:
    """Duplicate names gave raw KeyErrors (or "missing column"), and columns named like
    the ones replay adds came back twice in its output."""
    from floodmark.exceptions import SchemaError

    dup = _events().append_column("ts", pa.array([0, 0, 0, 0], pa.int64()))
    with pytest.raises(SchemaError, match="2 columns named 'ts'"):
        replay(dup, BOUNDED, channel="ch", arrival="at", event_time="ts")
    with pytest.raises(SchemaError, match="2 columns named 'ts'"):
        WindowOperator(TUMBLING, key="k", event_time="ts").process(dup.to_batches()[0])
    with pytest.raises(SchemaError, match="`nope`: missing column"):  # a raw KeyError
        replay(_events(), BOUNDED, channel="ch", arrival="at", event_time="ts", key="nope")
    adds = "and floodmark adds to the records: channel_watermark, watermark, is_late; "
    for added in ("channel_watermark", "watermark", "is_late", "reason"):
        table = _events(**{added: pa.array([0, 0, 0, 0])})
        for window in ({}, {"window": TUMBLING, "key": "k"}):  # the records gain them too
            with pytest.raises(SchemaError, match=f"`{added}`: .*{adds}"):
                replay(table, BOUNDED, channel="ch", arrival="at", event_time="ts", **window)
    for added in ("watermark", "reason"):  # the late and dropped rows gain these
        batch = _events(**{added: pa.array([0, 0, 0, 0])}).to_batches()[0]
        with pytest.raises(SchemaError, match=f"`{added}`: .*adds to the late rows: watermark"):
            WindowOperator(TUMBLING, key="k", event_time="ts").process(batch)


@pytest.mark.parametrize(
    "channels",
    [
        pa.array([[0], [1], [0], [1]]),
        pa.array([{"p": 0}, {"p": 1}, {"p": 0}, {"p": 1}]),
        pa.array([0.0, 1.0, 0.0, float("nan")]),  # as on Spark (floodmark.column_kinds)
        pa.array([True, False, True, False]),
    ],
)
def test_replay_refuses_channels_that_are_not_integers_or_strings(channels: pa.Array) -> None:
    from floodmark.exceptions import SchemaError

    table = _events().set_column(2, "ch", channels)
    with pytest.raises(SchemaError, match=r"`ch`.*integer or string"):
        replay(table, BOUNDED, channel="ch", arrival="at", event_time="ts")


def test_restore_of_what_is_not_a_snapshot_names_data() -> None:
    """A str or None given to restore: TypeErrors that named nothing."""
    restorable: list[Any] = [
        Valve(2),
        Multiplexer(),
        BOUNDED.create_generator("ms"),
        TimelineBuilder(BOUNDED, 2),
        WindowOperator(TUMBLING, key="k", event_time="ts"),
    ]
    for target in restorable:
        for bad in ("snapshot.bin", None):
            with pytest.raises(InvalidParameterError, match="`data`"):
                target.restore(bad)
        target.restore(bytearray(target.snapshot()))  # any bytes-like works


def test_scalar_advances_and_windows_are_named() -> None:
    from floodmark.exceptions import SchemaError

    op = WindowOperator(TUMBLING, key="k", event_time="ts")
    batch = _events().to_batches()[0]
    with pytest.raises(SchemaError, match="`position`: watermarks' columns hold one value"):
        op.process(batch, {"position": 1, "watermark": 10})
    with pytest.raises(InvalidParameterError, match="`windows`"):
        merge_windows(None)  # type: ignore[arg-type]


def test_replay_reads_aggregates_given_as_a_one_shot_iterable_once() -> None:
    """``aggs`` is read once (its checked form serves the tie order and the operator):
    a generator was consumed by the column check, and the windows got none."""
    table = _events(v=pa.array([1, 2, 3, 4]))
    kw: dict[str, Any] = {"channel": "ch", "arrival": "at", "event_time": "ts", "key": "k"}
    aggs: list[Any] = ["count", ("first", "v"), ("sum", "v")]
    want = replay(table, BOUNDED, window=TUMBLING, aggs=aggs, **kw).results
    got = replay(table, BOUNDED, window=TUMBLING, aggs=(a for a in aggs), **kw).results
    assert got.equals(want) and "first_v" in got.column_names


def test_a_pandas_frame_pyarrow_cannot_convert_is_refused_naming_the_column() -> None:
    """Mixed types in an ``object`` column, complex numbers, or a name given twice,
    were raw pyarrow or pandas errors."""
    import pandas as pd

    from floodmark.exceptions import SchemaError

    base = {"ts": [1, 5], "at": [0, 1], "ch": [0, 1], "k": [1, 2]}
    mixed = pd.DataFrame({**base, "ch": ["a", 1]})
    twice = pd.DataFrame([[1, 0, 0, 1, 0]], columns=["ts", "at", "ch", "k", "ch"])
    complex_values = pd.DataFrame({**base, "z": [1j, 2j]})  # pyarrow: not implemented
    for frame, named, says in (
        (mixed, "ch", "cannot convert this object column to Arrow"),
        (complex_values, "z", "cannot convert this complex128 column to Arrow"),
        (twice, "ch", "2 columns named 'ch'"),
    ):
        with pytest.raises(SchemaError, match=f"`{named}`: .*{says}"):
            replay(frame, BOUNDED, channel="ch", arrival="at", event_time="ts")
        with pytest.raises(SchemaError, match=f"`{named}`: .*{says}"):
            WindowOperator(TUMBLING, key="k", event_time="ts").process(frame)


def test_an_emission_interval_under_one_tick_or_too_coarse_is_refused_alike_everywhere() -> None:
    """One rule (``floodmark.time.interval_ticks``): the Spark layer said ``-5 is less
    than one tick``, ``drive`` ``must be > 0 ticks``, ``replay`` the engine's words; an
    interval on whose grid no arrival can be placed was blamed on the arrivals."""
    bounded = WatermarkStrategy.for_monotonous_timestamps()
    calls = (
        lambda iv: replay(_events(), bounded, channel="ch", arrival="at", event_time="ts", **iv),
        lambda iv: drive(bounded, [1], [1], **iv),
        lambda iv: TimelineBuilder(bounded, 1, **iv),
    )
    for call in calls:
        for interval in (0, -5):
            with pytest.raises(InvalidParameterError, match="at least one tick") as err:
                call({"emit_interval": interval})
            assert err.value.parameter == "emit_interval"
        for interval in (2**61, 2**63 - 1):
            with pytest.raises(InvalidParameterError, match="under 2\\^61 ticks") as err:
                call({"emit_interval": interval})
            assert err.value.parameter == "emit_interval"
        call({"emit_interval": 2**61 - 1})  # arrivals near zero are placed


def _odd_columns() -> dict[str, pa.Array]:
    """Four-row columns of types Arrow cannot take or build from Python lists: each
    failed the late/dropped rows (or the sort) after the engine had moved on."""
    import pandas as pd

    nulls = pd.Series(["x", None], dtype="category").iloc[[1] * 4]  # all null:
    empty_categories = nulls.cat.remove_unused_categories().values  # dictionary<values=null>
    return {
        "tag": pa.array(empty_categories),
        "run": pa.RunEndEncodedArray.from_arrays(pa.array([4], pa.int32()), pa.array(["web"])),
        "either": pa.UnionArray.from_dense(
            pa.array([0] * 4, pa.int8()), pa.array(range(4), pa.int32()), [pa.array([1, 2, 3, 4])]
        ),
        "view": pa.array(["p", "q", "r", "s"], pa.string_view()),
        "lists": pa.DictionaryArray.from_arrays(pa.array([0] * 4, pa.int8()), pa.array([[1]])),
    }


@pytest.mark.parametrize("column", list(_odd_columns()))
def test_an_input_column_of_any_type_is_carried_and_loses_no_result(column: str) -> None:
    """An input column floodmark does not read, of a type Arrow takes no rows of (run-end
    encoded, views) or builds no empty column of (a dictionary of nulls or lists, a
    dense union), made the window operator fail after the engine had fired the windows:
    the results were lost, every later call failed too. ``replay`` failed on it as well.
    Now the rows are taken by one rule (``floodmark.arrays.take_rows``) and the column
    comes back in the late and dropped rows."""
    odd = _odd_columns()[column]
    table = _events(**{column: odd})
    op = WindowOperator(TUMBLING, key="k", event_time="ts")
    op.process(table)
    fired = op.advance(100)
    assert sorted(fired.results["count"].to_pylist()) == [2, 2]
    late = op.process(table)
    assert late.late.num_rows == table.num_rows and late.late[column].type == odd.type
    assert late.late[column].to_pylist() == odd.to_pylist()
    got = replay(
        table, BOUNDED, channel="ch", arrival="at", event_time="ts", key="k", window=TUMBLING
    )
    assert got.records[column].to_pylist() == odd.to_pylist()
    assert sum(got.results["count"].to_pylist()) + got.late.num_rows == table.num_rows


def test_two_input_columns_of_one_name_that_no_call_reads_are_carried() -> None:
    """``replay`` with a window built its dropped rows by name: a raw KeyError when two
    columns it does not read share a name (without a window it worked)."""
    table = _events().append_column("note", pa.array([1, 2, 3, 4]))
    table = table.append_column("note", pa.array(["a", "b", "c", "d"]))
    table = table.set_column(0, "ts", pa.array([None, 1, 2, 3], pa.int64()))
    for window in ({}, {"window": TUMBLING, "key": "k"}):
        got = replay(table, BOUNDED, channel="ch", arrival="at", event_time="ts", **window)
        assert got.dropped.num_rows == 1 and got.dropped.column_names[-3:] == [
            "note",
            "note",
            "reason",
        ]


def test_a_sparse_pandas_column_is_refused_naming_it() -> None:
    import pandas as pd

    from floodmark.exceptions import SchemaError

    frame = _events().to_pandas().assign(sp=pd.arrays.SparseArray([0, 1, 0, 1]))
    with pytest.raises(SchemaError, match="`sp`: pyarrow cannot convert this column"):
        replay(frame, BOUNDED, channel="ch", arrival="at", event_time="ts")
    with pytest.raises(SchemaError, match="`sp`"):
        WindowOperator(TUMBLING, key="k", event_time="ts").process(frame)


def test_a_generator_factory_that_needs_arguments_is_refused_naming_it() -> None:
    """Its ``TypeError`` came from the first call into it, naming nothing of floodmark's."""

    class Bounded:
        def __init__(self, bound: int) -> None:
            self.bound = bound

    with pytest.raises(InvalidParameterError, match="`factory`: expected a zero-argument"):
        WatermarkStrategy.for_generator(Bounded)
    WatermarkStrategy.for_generator(lambda: Bounded(5))  # bound: taken


def test_a_time_column_aggregated_is_judged_as_a_value_column() -> None:
    """The window operator skipped the value rule for a column it already read as the
    event time: it summed a timestamp's ticks where ``replay`` refuses the column."""
    from floodmark.exceptions import SchemaError

    table = _events().set_column(0, "ts", pa.array([1, 2, 3, 4], pa.timestamp("ms")))
    aggs = {"key": "k", "aggs": [("sum", "ts")]}
    with pytest.raises(SchemaError, match="aggs= column 'ts' has type timestamp"):
        WindowOperator(TUMBLING, event_time="ts", **aggs).process(table)
    with pytest.raises(SchemaError, match="aggs= column 'ts' has type timestamp"):
        replay(table, BOUNDED, channel="ch", arrival="at", event_time="ts", window=TUMBLING, **aggs)


def test_a_column_whose_rows_arrow_cannot_take_is_refused_before_any_work() -> None:
    """A view nested in a struct has no take in Arrow: refused naming the column
    before the engine moves (``floodmark.arrays.check_takeable``), not after it fired
    windows whose results could not be returned."""
    from floodmark.exceptions import SchemaError

    nested = pa.array([{"a": "x"}] * 4, pa.struct([("a", pa.string_view())]))
    table = _events(nested=nested)
    op = WindowOperator(TUMBLING, key="k", event_time="ts")
    with pytest.raises(SchemaError, match="`nested`: has type struct<a: string_view>"):
        op.process(table, {"position": [4], "watermark": [100]})
    assert op.position == 0 and op.watermark == -(2**63)
    with pytest.raises(SchemaError, match="`nested`"):
        replay(table, BOUNDED, channel="ch", arrival="at", event_time="ts")


def test_a_column_name_and_a_windows_keys_are_checked_alike_everywhere() -> None:
    """One check of a name argument (``floodmark.vocabulary.column_name``) and of a
    window's keys (``window_keys``): ``""`` was refused by some calls and taken by others
    (then "missing column", or silently), and an empty key list got two wordings, one
    about a parameter ``replay``'s caller never gave."""
    strategy = WatermarkStrategy.for_monotonous_timestamps()
    calls: list[Callable[[], object]] = [
        lambda: replay(_events(), BOUNDED, channel="", arrival="at", event_time="ts"),
        lambda: replay(_events(), BOUNDED, channel="ch", arrival="at", event_time=""),
        lambda: WindowOperator(TUMBLING, key="k", event_time=""),
        lambda: WindowOperator(TUMBLING, key=["k", ""], event_time="ts"),
        lambda: WindowOperator(TUMBLING, key="", event_time="ts"),
        lambda: WatermarkStrategy.for_punctuated(""),
        lambda: strategy.with_timestamp_assigner(""),
    ]
    for call in calls:
        with pytest.raises(InvalidParameterError, match=r"expected a column name \(a non-empty"):
            call()
    no_key = "`key`: a window needs at least one key column"
    with pytest.raises(InvalidParameterError, match=no_key):
        WindowOperator(TUMBLING, key=[], event_time="ts")
    with pytest.raises(InvalidParameterError, match=no_key):
        replay(_events(), BOUNDED, channel="ch", arrival="at", event_time="ts", window=TUMBLING)


def test_string_view_channels_and_keys_replay_as_strings() -> None:
    """``column_kinds.key_type`` takes a string view as a key or channel, but ``replay``
    sorted and took its rows with Arrow, which has no kernels for views: Arrow's error.
    They replay as their values do."""
    strings = pa.table(
        {
            "ts": [1, 2, 3, 12],
            "at": [0, 1, 2, 3],
            "ch": ["b", "a", "b", "a"],
            "k": ["x", "y", "x", "x"],
        }
    )
    views = strings.set_column(2, "ch", strings["ch"].cast(pa.string_view()))
    views = views.set_column(3, "k", strings["k"].cast(pa.string_view()))
    kw: dict[str, Any] = {"channel": "ch", "arrival": "at", "event_time": "ts", "key": "k"}
    want = replay(strings, BOUNDED, window=TUMBLING, **kw)
    got = replay(views, BOUNDED, window=TUMBLING, **kw)
    assert got.records["k"].type == pa.string_view()
    assert got.records.cast(want.records.schema) == want.records
    assert got.results.to_pylist() == want.results.to_pylist()
    assert got.timeline.to_pylist() == want.timeline.to_pylist()


def test_an_empty_input_with_any_column_type_is_processed() -> None:
    """An empty table (an empty pandas frame, say) became an empty record batch through
    pyarrow's converters, which a dictionary of nulls lacks: Arrow's error."""
    odd = _odd_columns()["tag"]
    empty = _events(tag=odd).slice(0, 0)
    assert not empty.to_batches()  # no batch: the operator makes its own
    out = WindowOperator(TUMBLING, key="k", event_time="ts").process(
        empty, {"position": [0], "watermark": [5]}
    )
    assert out.results.num_rows == 0 and out.late.schema.field("tag").type == odd.type
