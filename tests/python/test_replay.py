"""floodmark.replay: streams whose combined timeline is empty, rows it cannot place."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pytest

from floodmark import TumblingEventTimeWindows, WatermarkStrategy
from floodmark.exceptions import SchemaError
from floodmark.replay import processing_order, replay

I64_MIN, I64_MAX = -(2**63), 2**63 - 1


MONOTONOUS = WatermarkStrategy.for_monotonous_timestamps()


def tumbling(
    table: pa.Table,
    aggs: Sequence[Any] = ("count",),
    lateness: int = 0,
    strategy: WatermarkStrategy = MONOTONOUS,
) -> Any:
    """10 ms tumbling windows of key ``k`` over ``table``."""
    return replay(
        table,
        strategy,
        channel="chan",
        arrival="arr",
        event_time="ev",
        window=TumblingEventTimeWindows.of(10),
        key="k",
        aggs=aggs,
        allowed_lateness=lateness,
    )


def test_a_strategy_that_never_emits_leaves_every_record_before_any_watermark() -> None:
    table = pa.table({"chan": [0, 0, 1], "ev": [1, 2, 15], "arr": [1, 2, 3], "k": [0, 0, 0]})
    out = tumbling(table, strategy=WatermarkStrategy.no_watermarks())
    assert out.timeline.num_rows == 0
    assert out.records["watermark"].to_pylist() == [I64_MIN] * 3
    assert out.records["is_late"].to_pylist() == [False] * 3
    assert out.late.num_rows == 0
    fired = [(r["window_start"], r["count"], r["watermark"]) for r in out.results.to_pylist()]
    assert fired == [(0, 2, I64_MAX), (10, 1, I64_MAX)]  # at the end of input


def test_rows_it_cannot_place_are_dropped_with_a_reason() -> None:
    """As the Spark functions report them, with or without windows; never lost."""
    table = pa.table(
        {
            "chan": [0, 0, None, 1, 0],
            "ev": [1, None, 3, 4, 5],
            "arr": [1, 2, 3, None, 5],
            "k": [0, 0, 0, 0, 0],
        }
    )
    for window in (None, TumblingEventTimeWindows.of(10)):
        out = replay(
            table,
            WatermarkStrategy.for_monotonous_timestamps(),
            channel="chan",
            arrival="arr",
            event_time="ev",
            window=window,
            key="k",
        )
        assert out.dropped.select(["ev", "arr", "reason"]).to_pylist() == [
            {"ev": None, "arr": 2, "reason": "null_event_time"},
            {"ev": 3, "arr": 3, "reason": "null_channel"},
            {"ev": 4, "arr": None, "reason": "null_arrival"},
        ]
        assert out.records.num_rows == 2


def test_records_tied_but_for_their_values_give_one_result_in_any_input_order() -> None:
    """Two records equal in arrival, channel, event time and key refire a closed window
    one after the other: ordered by their values (the tie rule), each refiring's sum
    and the float mean come out the same whatever order the rows are given in."""
    table = pa.table(
        {
            "chan": [0, 0, 0, 0],
            "ev": [1, 20, 2, 2],
            "arr": [1, 200, 300, 300],
            "k": [0, 0, 0, 0],
            "v": [0.1, 5.0, 100.0, 0.2],
        }
    )
    outs = []
    for order in ([0, 1, 2, 3], [0, 1, 3, 2]):
        out = tumbling(table.take(order), ["count", ("sum", "v"), ("mean", "v")], 1_000)
        outs.append(
            [
                (r["window_start"], r["count"], r["sum_v"], r["mean_v"], r["timing"])
                for r in out.results.to_pylist()
            ]
        )
    assert outs[0] == outs[1]
    refirings = [r for r in outs[0] if r[0] == 0 and r[4] == "late"]
    assert [r[1:3] for r in refirings] == [(2, 0.1 + 0.2), (3, 0.1 + 0.2 + 100.0)]


def test_a_nan_value_sorts_after_every_number_as_spark_sorts_it() -> None:
    """Tied records are ordered by their values with NaN last (Spark's order, which the
    keyed path sorts by): the operator meets 1.0 before NaN, so ``first`` is 1.0; min
    and max order NaN above every number (as Spark's do): 1.0 and NaN, in any row
    order (a NaN met first stayed both)."""
    table = pa.table(
        {"chan": [0, 0], "ev": [1, 1], "arr": [1, 1], "k": [0, 0], "v": [float("nan"), 1.0]}
    )
    for order in ([0, 1], [1, 0]):
        out = tumbling(table.take(order), [("min", "v"), ("max", "v"), ("first", "v")])
        got = [(r["min_v"], r["max_v"], r["first_v"]) for r in out.results.to_pylist()]
        assert len(got) == 1 and got[0][0] == 1.0 and got[0][2] == 1.0
        assert got[0][1] != got[0][1]  # NaN


def test_a_timestamp_event_time_is_read_in_its_unit_by_both_stages() -> None:
    """The watermark stage and the window stage read a timestamp column as ticks of
    ``event_time_unit`` alike; a float time column is refused naming it."""
    from floodmark.exceptions import SchemaError

    ints = pa.table(
        {"ts": [100, 95, 130, 20], "at": [0, 200, 200, 400], "ch": ["a", "a", "b", "a"]}
    ).append_column("k", pa.array(["x"] * 4))
    stamps = ints.set_column(
        0, "ts", pa.array([100_000, 95_000, 130_000, 20_000], pa.timestamp("us"))
    )
    kw = {
        "strategy": WatermarkStrategy.for_bounded_out_of_orderness(10),
        "channel": "ch",
        "arrival": "at",
        "event_time": "ts",
        "key": "k",
        "window": TumblingEventTimeWindows.of(100),
    }
    want, got = replay(ints, **kw), replay(stamps, event_time_unit="ms", **kw)
    assert got.records["watermark"] == want.records["watermark"]
    assert got.records["is_late"] == want.records["is_late"]
    assert got.results["count"] == want.results["count"]
    assert got.late.num_rows == want.late.num_rows
    # By default a timestamp is counted in its own precision, as on Spark (there: us),
    # and an integer in ms (floodmark.column_kinds.tick_unit)
    micros = ints.set_column(0, "ts", pa.array([100, 95, 130, 20], pa.timestamp("us")))
    by_default = replay(micros, **kw).records["watermark"]
    assert by_default == want.records["watermark"]
    assert by_default == replay(micros, event_time_unit="us", **kw).records["watermark"]
    assert by_default != replay(micros, event_time_unit="ms", **kw).records["watermark"]
    floats = ints.set_column(0, "ts", pa.array([100.0, 95.0, 130.0, 20.0]))
    with pytest.raises(
        SchemaError,
        match=r"`ts`: event_time= column .ts. has type double; use a timestamp or integer",
    ):
        replay(floats, **kw)


def test_digits_below_the_unit_do_not_order_the_records() -> None:
    """Timestamps read in whole milliseconds tie when they differ only in microseconds,
    and tied records go in value order, as the Spark stages sort them: the result equals
    the same records given as millisecond ticks. Sorting on the raw microseconds put
    9.0 first (first 9.0, last 1.0)."""
    us = pa.timestamp("us", tz="UTC")
    stamps = pa.table(
        {
            "chan": [0, 0],
            "arr": pa.array([5_100, 5_900], us),  # the same millisecond, 5
            "ev": pa.array([1_900, 1_100], us),  # the same millisecond, 1
            "k": ["k", "k"],
            "v": [9.0, 1.0],
        }
    )
    ticks = stamps.set_column(1, "arr", pa.array([5, 5])).set_column(2, "ev", pa.array([1, 1]))
    aggs = ["count", ("first", "v"), ("last", "v")]
    kw: dict[str, Any] = {"strategy": MONOTONOUS, "channel": "chan", "aggs": aggs}
    kw |= {"window": TumblingEventTimeWindows.of(1_000), "key": "k", "arrival": "arr"}
    units = {"event_time_unit": "ms", "arrival_unit": "ms"}
    want = replay(ticks, event_time="ev", **kw).results.select(["count", "first_v", "last_v"])
    got = replay(stamps, event_time="ev", **kw, **units).results
    assert got.select(["count", "first_v", "last_v"]) == want
    assert want.to_pylist() == [{"count": 2, "first_v": 1.0, "last_v": 9.0}]


def test_a_missing_column_is_named_and_pandas_and_numpy_inputs_are_read() -> None:
    import numpy as np

    from floodmark.exceptions import InvalidParameterError, SchemaError

    table = pa.table({"ev": [5, 15], "arr": [0, 200], "chan": [0, 1], "k": ["a", "b"]})
    for name in ("ev", "arr", "chan", "k"):
        with pytest.raises(SchemaError, match=f"`{name}`: missing column"):
            tumbling(table.drop_columns([name]))
    with pytest.raises(SchemaError, match="`v`: missing column"):
        tumbling(table, aggs=["count", ("sum", "v")])
    with pytest.raises(SchemaError, match="`wm`: missing column"):
        replay(
            table,
            WatermarkStrategy.for_punctuated("wm"),
            channel="chan",
            arrival="arr",
            event_time="ev",
        )
    want = tumbling(table)
    assert tumbling(table.to_pandas()).results == want.results
    assert tumbling(table.to_batches()[0]).results == want.results
    with pytest.raises(InvalidParameterError, match=r"`table`: expected a pyarrow Table"):
        tumbling(table.to_pylist())  # type: ignore[arg-type]
    kw: dict[str, Any] = {"channel": "chan", "arrival": "arr", "event_time": "ev"}
    numpy = replay(table, MONOTONOUS, source_parallelism=np.int64(2), **kw)
    assert numpy.timeline == replay(table, MONOTONOUS, source_parallelism=2, **kw).timeline


def test_a_timestamp_marker_is_read_in_the_event_time_unit() -> None:
    """A punctuated strategy's marker column holds event times: with timestamp event
    times, timestamps read in ``event_time_unit``; with integer event times, integers.
    A marker of the other kind is refused naming it, as the Spark layer refuses it (one
    rule: ``floodmark.column_kinds.marker_kind``)."""
    ints = pa.table(
        {"ev": [5, 15, 25], "arr": [0, 200, 400], "chan": [0, 0, 0], "wm": [None, 10, 20]}
    )
    us = pa.timestamp("us")
    stamps = ints.set_column(3, "wm", pa.array([None, 10_000, 20_000], us))
    stamps = stamps.set_column(0, "ev", pa.array([5_000, 15_000, 25_000], us))
    kw: dict[str, Any] = {"channel": "chan", "arrival": "arr", "event_time": "ev"}
    strategy = WatermarkStrategy.for_punctuated("wm")
    want = replay(ints, strategy, **kw)
    got = replay(stamps, strategy, event_time_unit="ms", **kw)
    assert got.timeline == want.timeline and got.timeline.num_rows > 0
    mixed = ints.set_column(3, "wm", stamps["wm"])
    with pytest.raises(SchemaError, match=r"`wm`.*needs the event-time column's type"):
        replay(mixed, strategy, **kw)


def test_a_categorical_channel_or_key_replays_as_its_values() -> None:
    """pandas' categorical columns (Arrow dictionaries) failed the sort with a raw
    ArrowTypeError; they replay as their values do."""
    import pandas as pd

    from floodmark import TumblingEventTimeWindows
    from floodmark import WatermarkStrategy as WS

    plain = pd.DataFrame(
        {
            "ts": [100, 95, 130, 20, 240, 210],
            "at": [0, 200, 200, 400, 600, 600],
            "ch": ["b", "a", "b", "a", "b", "a"],
            "k": ["x", "y", "x", "x", "y", "x"],
        }
    )
    categorical = plain.assign(ch=pd.Categorical(plain.ch), k=pd.Categorical(plain.k))

    def run(frame: pd.DataFrame) -> Any:
        return replay(
            frame,
            WS.for_bounded_out_of_orderness(10),
            channel="ch",
            arrival="at",
            event_time="ts",
            key="k",
            window=TumblingEventTimeWindows.of(100),
        )

    want, got = run(plain), run(categorical)
    assert got.results.num_rows > 0
    for kind in ("results", "late", "dropped"):
        a, b = getattr(want, kind), getattr(got, kind)
        assert b.to_pydict() == a.to_pydict(), kind


@pytest.mark.parametrize("kind", ["punctuated", "bounded"])
def test_an_arrival_at_the_top_of_the_range_is_refused_naming_arrival(kind: str) -> None:
    """The record-driven route blamed ``until``, a parameter replay does not have."""
    from floodmark.exceptions import InvalidInputError

    strategy = (
        WatermarkStrategy.for_punctuated("m")
        if kind == "punctuated"
        else WatermarkStrategy.for_bounded_out_of_orderness(0)
    )
    table = pa.table({"ch": [0], "at": [2**63 - 6], "ts": [1], "m": [1]})
    with pytest.raises(InvalidInputError) as err:
        replay(table, strategy, channel="ch", arrival="at", event_time="ts", emit_interval=200)
    assert err.value.column == "arrival"


def test_processing_order_names_a_missing_or_doubled_column_and_takes_pandas() -> None:
    """``processing_order`` (the sort of every stage) refuses a column that is missing
    or named twice by name (was a raw ``KeyError``), and sorts a pandas frame as the
    table it holds (was an ``AttributeError``)."""
    table = pa.table({"a": [2, 1], "c": [0, 0], "e": [5, 6]})
    want = {"a": [1, 2], "c": [0, 0], "e": [6, 5]}
    assert processing_order(table, "a", "c", "e").to_pydict() == want
    assert processing_order(table.to_pandas(), "a", "c", "e").to_pydict() == want
    with pytest.raises(SchemaError, match="arrival"):
        processing_order(table, "arrival", "c", "e")
    doubled = pa.table([[1], [2], [3], [4]], names=["a", "a", "c", "e"])
    with pytest.raises(SchemaError, match="named 'a'"):
        processing_order(doubled, "a", "c", "e")
