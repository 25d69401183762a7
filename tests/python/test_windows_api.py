"""The Python API of the windows: errors naming the parameter/column, multiple and
string keys, float values, every aggregate, input kinds and output schemas."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import floodmark
from floodmark.exceptions import (
    InvalidInputError,
    InvalidParameterError,
    SchemaError,
    SnapshotError,
)
from floodmark.windows import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    WindowOperator,
    merge_windows,
    window_start_with_offset,
)

MIN = -(2**63)


def batch(**cols: Any) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(cols)


@pytest.mark.parametrize(
    ("make", "parameter"),
    [
        (lambda: TumblingEventTimeWindows.of(0), "size"),
        (lambda: TumblingEventTimeWindows.of(10, 10), "offset"),
        (lambda: SlidingEventTimeWindows.of(0, 5), "size"),
        (lambda: SlidingEventTimeWindows.of(10, 0), "slide"),
        (lambda: SlidingEventTimeWindows.of(10, 5, 5), "offset"),
        (lambda: SlidingEventTimeWindows.of(100_000_010, 10), "slide"),
        (lambda: EventTimeSessionWindows.with_gap(0), "gap"),
        (lambda: EventTimeSessionWindows.with_gap(-1), "gap"),
        # abs(Long.MIN_VALUE) is negative in Java: Flink accepts these, and every
        # record would then have windows without end (issue 18)
        (lambda: TumblingEventTimeWindows.of(-5, MIN), "size"),
        (lambda: SlidingEventTimeWindows.of(10, -1, MIN), "slide"),
        (lambda: SlidingEventTimeWindows.of(-10, -1, MIN), "size"),
        (lambda: SlidingEventTimeWindows.of(10, MIN, MIN), "slide"),
        (lambda: SlidingEventTimeWindows.of(timedelta(-1), timedelta(1)).params(), "size"),
        (lambda: SlidingEventTimeWindows.of(timedelta(1), timedelta(-1)).params(), "slide"),
    ],
)
def test_invalid_assigner_parameters_named(make: Any, parameter: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        make()
    assert info.value.parameter == parameter


def test_timedelta_parameters_checked_at_first_use() -> None:
    w = TumblingEventTimeWindows.of(timedelta(0))
    with pytest.raises(InvalidParameterError) as info:
        w.assign_windows(5)
    assert info.value.parameter == "size"
    ok = TumblingEventTimeWindows.of(timedelta(seconds=1))
    assert ok.assign_windows(1500, unit="ms") == [(1000, 2000)]
    assert ok.assign_windows(1, unit="s") == [(1, 2)]
    with pytest.raises(InvalidParameterError):
        ok.assign_windows(1, unit="fortnight")


def test_assign_helpers() -> None:
    assert SlidingEventTimeWindows.of(10, 3).assign_windows(0) == [
        (0, 10),
        (-3, 7),
        (-6, 4),
        (-9, 1),
    ]
    assert EventTimeSessionWindows.with_gap(5).assign_windows(MIN) == [(MIN, MIN + 5)]
    # a gapped sliding window within one slide of MIN: the record's grid cell begins
    # below MIN, so no window holds it (the start used to wrap and the windows to be
    # listed down to MIN, without bound)
    assert SlidingEventTimeWindows.of(3, 10).assign_windows(MIN + 5) == []
    with pytest.raises(InvalidInputError):
        TumblingEventTimeWindows.of(10).assign_windows(MIN)
    assert window_start_with_offset(-7, 0, 5) == -10
    with pytest.raises(InvalidParameterError):
        window_start_with_offset(1, 0, 0)
    assert merge_windows([(0, 5), (5, 10), (20, 25)]) == [([(0, 5), (5, 10)], (0, 10))]


def make(**kw: Any) -> WindowOperator:
    args: dict[str, Any] = {"key": "k", "event_time": "ts", "aggs": ["count"]}
    args.update(kw)
    return WindowOperator(TumblingEventTimeWindows.of(10), **args)


@pytest.mark.parametrize(
    ("kwargs", "parameter"),
    [
        ({"allowed_lateness": -1}, "allowed_lateness"),
        ({"aggs": ["median"]}, "aggs"),
        ({"aggs": [("median", "v")]}, "aggs"),
        ({"aggs": []}, "aggs"),
        ({"aggs": ["count", "count"]}, "aggs"),
        ({"key": []}, "key"),
        ({"unit": "weeks"}, "unit"),
    ],
)
def test_invalid_operator_parameters_named(kwargs: dict[str, Any], parameter: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        make(**kwargs)
    assert parameter in str(info.value)


def test_missing_or_bad_columns_named() -> None:
    op = make(aggs=["count", ("sum", "v")])
    good = {"k": [1], "ts": [1], "v": [1]}
    for missing in good:
        cols = {c: v for c, v in good.items() if c != missing}
        with pytest.raises(SchemaError, match=f"`{missing}`"):
            op.process(batch(**cols))
    with pytest.raises(SchemaError, match="`v`"):
        op.process(batch(k=[1], ts=[1], v=["x"]))
    with pytest.raises(SchemaError, match="`k`"):
        op.process(batch(k=[1.5], ts=[1], v=[1]))
    with pytest.raises(SchemaError, match="`ts`"):
        op.process(batch(k=[1], ts=[1.0], v=[1]))
    with pytest.raises(SchemaError, match="`position`"):
        op.process(batch(**good), {"watermark": [3]})
    with pytest.raises(InvalidInputError, match="position"):
        op.process(batch(**good), {"position": [2], "watermark": [3]})
    with pytest.raises(SchemaError, match=r"`watermark`.*2-D"):  # was a raw TypeError
        op.process(batch(**good), {"position": np.array([1]), "watermark": np.array([[3]])})
    assert op.position == 0  # nothing was processed by the failed calls


def test_multiple_string_and_int_keys_with_nulls_and_all_aggregates() -> None:
    aggs: list[Any] = [
        "count",
        ("sum", "x"),
        ("min", "x"),
        ("max", "x"),
        ("mean", "x"),
        ("first", "x"),
        ("last", "x"),
        ("sum", "n"),
    ]
    op = WindowOperator(TumblingEventTimeWindows.of(10), key=["s", "i"], event_time="ts", aggs=aggs)
    b = pa.RecordBatch.from_pydict(
        {
            "s": pa.array(["a", "a", None, "a", "a"], pa.large_string()),
            "i": pa.array([1, 1, 1, 2, 1], pa.int32()),
            "ts": pa.array([5, 3, 4, 1, 9], pa.int64()),
            "x": pa.array([1.5, None, 2.0, 4.0, -1.0], pa.float64()),
            "n": pa.array([1, 2, 3, 4, None], pa.int64()),
        }
    )
    out = op.process(b).results
    assert out.num_rows == 0
    res = op.finish().results
    assert res.schema.field("s").type == pa.large_string()
    assert res.schema.field("i").type == pa.int32()
    assert res.schema.field("mean_x").type == pa.float64()
    rows = {(r["s"], r["i"]): r for r in res.to_pylist()}
    a1 = rows[("a", 1)]
    assert (a1["count"], a1["sum_x"], a1["min_x"], a1["max_x"]) == (3, 0.5, -1.0, 1.5)
    assert a1["mean_x"] == pytest.approx(0.25)
    assert (a1["first_x"], a1["last_x"], a1["sum_n"]) == (1.5, -1.0, 3)
    assert rows[(None, 1)]["count"] == 1
    assert rows[("a", 2)]["sum_n"] == 4
    assert all(r["timing"] == "on_time" and r["watermark"] == 2**63 - 1 for r in res.to_pylist())


def test_late_dropped_outputs_keep_input_columns() -> None:
    op = WindowOperator(
        SlidingEventTimeWindows.of(5, 10),
        key="k",
        event_time="ts",
        aggs=[("sum", "v")],
        arrival="at",
    )
    b = batch(
        k=[1, 1, 1, 1],
        ts=[6, None, 3, 7],
        v=[1, 2, 3, 4],
        at=[100, 101, 102, 103],
        extra=["p", "q", "r", "s"],
    )
    out = op.process(b, {"position": [3], "watermark": [20], "time": [555]})
    assert out.dropped.to_pydict() == {
        "k": [1, 1],
        "ts": [6, None],
        "v": [1, 2],
        "at": [100, 101],
        "extra": ["p", "q"],
        "reason": ["no_window", "null_event_time"],
    }
    assert out.late.to_pydict() == {
        "k": [1],
        "ts": [7],
        "v": [4],
        "at": [103],
        "extra": ["s"],
        "watermark": [20],
    }
    r = out.results.to_pylist()
    assert r == [
        {
            "k": 1,
            "window_start": 0,
            "window_end": 5,
            "sum_v": 3,
            "watermark": 20,
            "timing": "on_time",
            "trigger_position": 3,
            "trigger_time": 555,
        }
    ]
    empty = op.finish()
    assert empty.results.num_rows == 0
    assert empty.late.schema.names == [*b.schema.names, "watermark"]
    assert empty.dropped.schema.names == [*b.schema.names, "reason"]


def test_table_pandas_timestamps_and_watermark_batch() -> None:
    op = WindowOperator(
        EventTimeSessionWindows.with_gap(timedelta(seconds=5)),
        key="user",
        event_time="t",
        unit="ms",
        allowed_lateness=timedelta(seconds=1),
    )
    df = pd.DataFrame(
        {
            "user": ["u", "u", "v"],
            "t": pd.to_datetime([1_000, 4_000, 2_000], unit="ms"),
        }
    )
    out = op.process(df, pa.record_batch({"position": [3], "watermark": [20_000]}))
    got = sorted(
        (r["user"], r["window_start"], r["window_end"], r["count"]) for r in out.results.to_pylist()
    )
    assert got == [("u", 1_000, 9_000, 2), ("v", 2_000, 7_000, 1)]
    assert op.watermark == 20_000
    table = pa.table({"user": ["u"], "t": pa.array([19_500], pa.int64())})
    assert op.process(table).late.num_rows == 0  # 19_500 + 1_000 > 20_000: a window
    assert op.advance(10).results.num_rows == 0  # not increasing: ignored
    assert op.watermark == 20_000


def test_snapshot_restore_and_errors() -> None:
    op = make(aggs=[("sum", "v")])
    op.process(batch(k=["x", "y"], ts=[1, 12], v=[5, 6]))
    snap = op.snapshot()
    other = make(aggs=[("sum", "v")])
    other.restore(snap)
    assert other.watermark == op.watermark and other.position == 2
    assert other.finish().results.to_pylist() == op.finish().results.to_pylist()
    with pytest.raises(SnapshotError):
        make(aggs=["count"]).restore(snap)
    with pytest.raises(SnapshotError):
        other.restore(snap[:-3])


def test_reexports() -> None:
    assert floodmark.WindowOperator is WindowOperator
    assert floodmark.TumblingEventTimeWindows is TumblingEventTimeWindows


@pytest.mark.parametrize("name", ["watermark", "reason"])
def test_input_column_clashing_with_an_output_column_is_refused(name: str) -> None:
    op = WindowOperator(TumblingEventTimeWindows.of(10), key="k", event_time="ts")
    batch = pa.record_batch({"k": [1], "ts": [1], name: [0]})
    with pytest.raises(SchemaError, match=name) as info:
        op.process(batch)
    assert info.value.column == name


def test_results_keep_the_key_columns_types_from_the_engine() -> None:
    """The engine builds the key columns in the input's types (no cast back in Python;
    a dictionary's value type: keys are values), the empty results too; a stored key
    that the input's type cannot hold comes back in the engine's type (its window has
    left the state: an error would lose it)."""
    keys = {
        "d": pa.array(["x", "y"]).dictionary_encode(),
        "u": pa.array([7, 8], pa.uint16()),
        "l": pa.array(["p", "q"], pa.large_string()),
    }
    op = WindowOperator(TumblingEventTimeWindows.of(10), key=list(keys), event_time="ts")
    b = pa.RecordBatch.from_pydict({**keys, "ts": pa.array([1, 2], pa.int64())})
    empty = op.process(b).results
    res = op.finish().results
    for name, values in keys.items():
        want = values.type.value_type if pa.types.is_dictionary(values.type) else values.type
        assert empty.schema.field(name).type == want
        assert res.schema.field(name).type == want
    assert sorted(res.column("u").to_pylist()) == [7, 8]

    wide = WindowOperator(TumblingEventTimeWindows.of(10), key="k", event_time="ts")
    wide.process(pa.RecordBatch.from_pydict({"k": [1000], "ts": [1]}))
    narrow = WindowOperator(TumblingEventTimeWindows.of(10), key="k", event_time="ts")
    narrow.restore(wide.snapshot())
    small = pa.RecordBatch.from_pydict({"k": pa.array([1], pa.int8()), "ts": [2]})
    fired = narrow.process(small, {"position": [1], "watermark": [100]}).results
    assert fired.schema.field("k").type == pa.int64()
    assert sorted(fired.column("k").to_pylist()) == [1, 1000]


def test_an_empty_first_batch_names_the_key_types_of_later_firings() -> None:
    """``advance`` and ``finish`` after a batch without rows carry its key types (they
    carried the engine's, int64, so their results could not be concatenated with the
    batch's); a later batch with rows may still bring other types."""
    aggs: list[Any] = ["count", ("sum", "v")]
    op = WindowOperator(TumblingEventTimeWindows.of(10), key="k", event_time="ts", aggs=aggs)
    schema = pa.schema([("k", pa.string()), ("ts", pa.int64()), ("v", pa.int64())])
    first = op.process(pa.RecordBatch.from_pylist([], schema))
    parts = [first.results, op.advance(5).results, op.finish().results]
    assert all(p.schema.field("k").type == pa.string() for p in parts)
    assert pa.Table.from_batches(parts).num_rows == 0

    op = WindowOperator(TumblingEventTimeWindows.of(10), key="k", event_time="ts")
    op.process(
        pa.RecordBatch.from_pydict({"k": pa.array([], pa.int32()), "ts": pa.array([], pa.int64())})
    )
    op.process(pa.RecordBatch.from_pydict({"k": pa.array(["a"]), "ts": pa.array([1])}))
    fired = op.finish().results
    assert fired.schema.field("k").type == pa.string() and fired.column("k").to_pylist() == ["a"]


def test_the_engine_flags_late_firings_and_python_words_them() -> None:
    native = floodmark._core.WindowOperator(
        "tumbling", 10, 0, 0, 0, 5, ["k"], "ts", [], [("count", None)], ["count"]
    )
    b = pa.RecordBatch.from_pydict({"k": [1, 1], "ts": [1, 2]})
    # the window [0, 10) fires at watermark 12 and lives until 14: ts 2 refires it
    results = native.process(b, [1], [12], [None], [])[0]
    assert results.column("timing").to_pylist() == [False, True]
    op = WindowOperator(
        TumblingEventTimeWindows.of(10), key="k", event_time="ts", allowed_lateness=5
    )
    out = op.process(b, {"position": [1], "watermark": [12]}).results
    assert out.column("timing").to_pylist() == ["on_time", "late"]


@pytest.mark.parametrize(
    ("key", "aggs", "parameter", "named"),
    [
        ("count", ["count"], "aggs", "'count'"),  # results had two count fields
        ("timing", ["count"], "key", "'timing'"),  # a raw ArrowNotImplementedError
        ("window_start", ["count"], "key", "'window_start'"),  # a raw KeyError
        ("sum_v", [("sum", "v")], "aggs", "'sum_v'"),
        ("trigger_time", ["count"], "key", "'trigger_time'"),
        ("k", ["count", "count"], "aggs", "'count'"),
    ],
)
def test_a_key_or_aggregate_named_like_a_result_column_is_refused_when_built(
    key: str, aggs: list[Any], parameter: str, named: str
) -> None:
    """Refused before any record: the operator used to fire the windows and then fail
    (or return a results table with two fields of one name)."""
    with pytest.raises(InvalidParameterError) as err:
        floodmark.WindowOperator(
            floodmark.TumblingEventTimeWindows.of(timedelta(seconds=1)),
            key=key,
            event_time="ts",
            aggs=aggs,
        )
    assert err.value.parameter == parameter and named in str(err.value)


def test_result_columns_are_the_operators() -> None:
    """The one list of result columns the checks use is the engine's schema."""
    from floodmark.vocabulary import result_columns

    op = floodmark.WindowOperator(
        floodmark.TumblingEventTimeWindows.of(timedelta(seconds=1)),
        key=["k", "j"],
        event_time="ts",
        aggs=["count", ("sum", "v"), ("max", "v")],
        arrival="arr",
    )
    batch = pa.table({"k": [1], "j": [2], "ts": [5], "v": [3], "arr": [5]})
    results = op.process(batch, {"position": [1], "watermark": [10_000]}).results
    assert results.schema.names == result_columns(["k", "j"], ["count", "sum_v", "max_v"])


def test_aggregates_over_nulls_nan_overflow_and_other_value_types() -> None:
    """What docs/spark.md ("Aggregates") says each aggregate does with nulls, NaN and
    an int64 overflow; decimal values are aggregated as doubles (they were refused
    here while the Spark functions took them), float16 values sort as floats (a raw
    ArrowTypeError in the tie order), and a uint64 column's refusal says why."""
    import decimal
    import functools

    from floodmark.replay import replay

    big = 2**63 - 1
    table = pa.table(
        {
            "ts": [1, 2, 3, 4, 11, 12],
            "at": [0, 0, 0, 0, 0, 300],
            "ch": [0] * 6,
            "k": [1, 1, 1, 1, 1, 1],
            "i": pa.array([None, big, 1, None, None, None], pa.int64()),
            "f": pa.array([2.0, float("nan"), None, -1.0, None, None], pa.float64()),
            "h": pa.array([1.5, None, 2.0, 0.5, None, None], pa.float16()),
            "d": pa.array([decimal.Decimal("1.25"), None, None, None, None, None]),
        }
    )
    aggs: list[Any] = ["count", ("sum", "i"), ("min", "i"), ("first", "i"), ("last", "i")]
    aggs += [("sum", "f"), ("mean", "f"), ("min", "f"), ("max", "f"), ("first", "f")]
    aggs += [("sum", "h"), ("max", "h"), ("sum", "d"), ("mean", "d")]
    run = functools.partial(
        replay,
        strategy=floodmark.WatermarkStrategy.for_bounded_out_of_orderness(0),
        channel="ch",
        arrival="at",
        event_time="ts",
        window=floodmark.TumblingEventTimeWindows.of(10),
        key="k",
    )
    out = run(table, aggs=aggs)
    first, second = out.results.to_pylist()
    assert first["count"] == 4 and second["count"] == 2  # null values counted
    assert first["sum_i"] == big + 1 - 2**64  # wraps like a Java long
    assert (first["min_i"], first["first_i"], first["last_i"]) == (1, big, 1)
    assert first["sum_f"] != first["sum_f"] and first["mean_f"] != first["mean_f"]  # NaN
    assert first["max_f"] != first["max_f"] and first["min_f"] == -1.0
    assert first["first_f"] == 2.0
    assert (first["sum_h"], first["max_h"]) == (4.0, 2.0)
    assert (first["sum_d"], first["mean_d"]) == (1.25, 1.25)
    assert all(second[c] is None for c in ("sum_i", "min_i", "first_i", "sum_f", "mean_d"))
    unsigned = table.append_column("u", pa.array([1] * 6, pa.uint64()))
    with pytest.raises(SchemaError, match=r"u.*uint64 \(values past 2\^63 - 1"):
        run(unsigned, aggs=[("sum", "u")])


def test_a_window_grid_steps_by_the_slide_or_the_size() -> None:
    """``(size, step, offset)``: the one rule the Spark window pass and the bound
    analysis read the grid by."""
    s = timedelta(seconds=1)
    assert TumblingEventTimeWindows.of(10 * s, 3 * s).grid() == (10_000, 10_000, 3_000)
    assert SlidingEventTimeWindows.of(10 * s, 5 * s).grid("s") == (10, 5, 0)
    assert EventTimeSessionWindows.with_gap(3 * s).grid() == (0, 0, 0)


def test_a_bad_window_is_refused_as_on_spark() -> None:
    """The window operator (and ``replay``) check a ``window`` argument with the Spark
    functions' check (``floodmark.windows.window_params``): the same words, naming
    ``window``, and a duration under one tick of the unit says it was truncated to 0."""
    from floodmark.replay import replay

    with pytest.raises(InvalidParameterError, match=r"`window`: expected Tumbling.*got str"):
        WindowOperator("tumbling", key="k", event_time="ts")
    tiny = TumblingEventTimeWindows.of(timedelta(microseconds=500))
    truncated = r"`window`: .*`size`: must be > 0, got 0 \(in whole ticks of the event-time"
    with pytest.raises(InvalidParameterError, match=truncated):
        WindowOperator(tiny, key="k", event_time="ts", unit="ms")
    table = pa.table({"ts": [1], "at": [0], "ch": [0], "k": ["a"]})
    bounded = floodmark.WatermarkStrategy.for_bounded_out_of_orderness(0)
    with pytest.raises(InvalidParameterError, match=truncated):
        replay(table, bounded, channel="ch", arrival="at", event_time="ts", key="k", window=tiny)
    assert WindowOperator(tiny, key="k", event_time="ts", unit="us").watermark == -(2**63)
