"""Tumbling and sliding windows (with or without allowed lateness) run as native Spark
aggregations (floodmark.spark.windows.native); everything else runs the keyed Rust
operator. Both must give the same three outputs, row for row, on the cases where the
native arithmetic could go wrong: wrapping sums, first/last ties and nulls, negative
event times, no watermark at all, late records, refirings, null and composite keys,
rows the table lacks."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from spark_helpers import outputs

from floodmark import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    WatermarkStrategy,
)
from floodmark.spark import window_aggregate, windows
from floodmark.spark.windows import native as native_windows
from floodmark.time import I64_MAX, I64_MIN
from floodmark.vocabulary import SAFE

MS10 = timedelta(milliseconds=10)
COLUMNS = ["partition", "event_time", "arrival", "key", "value"]
BOUNDED = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(milliseconds=5))
TUMBLING = TumblingEventTimeWindows.of(timedelta(milliseconds=10))
AGGS: list[Any] = [
    "count",
    ("sum", "value"),
    ("min", "value"),
    ("max", "value"),
    ("first", "value"),
    ("last", "value"),
]


def stream(rows: list[tuple[int, int | None, int, int, int | None]]) -> pa.Table:
    """``(channel, event_time, arrival, key, value)`` rows."""
    cols = list(zip(*rows, strict=True))
    return pa.table(
        {name: pa.array(col, pa.int64()) for name, col in zip(COLUMNS, cols, strict=True)}
    )


def run(spark: Any, table: pa.Table, **kw: Any) -> Any:
    args: dict[str, Any] = {
        "key": "key",
        "event_time": "event_time",
        "channel": "partition",
        "arrival": "arrival",
        "aggs": AGGS,
        "emit_interval": timedelta(milliseconds=10),
        **kw,
    }
    strategy, window = args.pop("strategy", BOUNDED), args.pop("window", TUMBLING)
    return window_aggregate(spark.createDataFrame(table), strategy, window, **args)


def both_paths(
    spark: Any, table: pa.Table, monkeypatch: pytest.MonkeyPatch, **kw: Any
) -> dict[str, Counter[tuple[Any, ...]]]:
    """The outputs of the native path, checked equal to the keyed operator's."""
    native = run(spark, table, **kw)
    assert native.cached is None, "expected the native path"
    got = outputs(native)
    with monkeypatch.context() as m:
        m.setattr(windows, "native_outputs", lambda *args: None)
        keyed = run(spark, table, **kw)
        assert keyed.cached is not None
        assert outputs(keyed) == got
    return got


def test_sums_wrap_like_a_java_long(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    big = I64_MAX - 1
    table = stream(
        [
            (0, 1, 1, 7, big),
            (0, 2, 2, 7, big),
            (0, 3, 3, 7, 5),
            (1, 4, 4, 7, None),
            (1, 5, 5, 7, I64_MIN),
            (1, 6, 6, 7, I64_MIN),
            (0, 40, 40, 7, 1),
            (1, 41, 41, 7, 1),
        ]
    )
    got = both_paths(spark, table, monkeypatch)
    # (key, window_start, window_end, count, sum, min, max, first, last, ...)
    sums = {r[1]: r[4] for r in got["results"]}
    wrapped = (2 * big + 5 + 2 * I64_MIN + 2**63) % 2**64 - 2**63
    assert sums[0] == wrapped
    counts = {r[1]: r[3] for r in got["results"]}
    assert counts[0] == 6


def test_first_and_last_by_event_time_then_arrival_then_channel_skipping_nulls(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = stream(
        [
            (0, 2, 10, 1, None),  # earliest event time, but null: skipped
            (1, 3, 12, 1, 30),
            (0, 3, 12, 1, 20),  # same time and arrival: channel 0 comes first
            (0, 3, 11, 1, 10),  # same time, earlier arrival: first
            (0, 8, 13, 1, 40),
            (1, 8, 13, 1, 50),  # latest event time, arrival tie, channel 1: last
            (0, 9, 14, 1, None),  # latest event time, but null: skipped
            (0, 60, 60, 1, 1),
            (1, 61, 61, 1, 1),
        ]
    )
    got = both_paths(spark, table, monkeypatch)
    first_window = next(r for r in got["results"] if r[1] == 0)
    assert first_window[7:9] == (10, 50)


@pytest.mark.parametrize("lateness", [timedelta(0), timedelta(milliseconds=30)])
def test_first_and_last_of_records_tied_in_time_arrival_and_channel(
    spark: Any, monkeypatch: pytest.MonkeyPatch, lateness: timedelta
) -> None:
    """Records equal in (arrival, channel, event time, key) are processed by their
    first/last values, ascending: first and last come from one order, whatever order
    Spark delivers them in (the native path once took both from one record), and equal
    floodmark.replay's. The second window refires with two more tied records."""
    from floodmark.replay import replay

    on_time = [(0, 5, 5, 0, 2), (0, 5, 5, 0, 1), (0, 5, 5, 0, 3)]
    closing = [(0, 40, 40, 0, 0)]
    refiring = [(0, 6, 41, 0, 9), (0, 6, 41, 0, 7)]
    for rows in (on_time + closing + refiring, on_time[::-1] + closing + refiring[::-1]):
        table = stream(rows)
        got = both_paths(spark, table, monkeypatch, allowed_lateness=lateness)
        # (key, window_start, window_end, count, sum, min, max, first, last, watermark, ...)
        fired = sorted((r[3], r[7], r[8]) for r in got["results"] if r[1] == 0)
        late = lateness > timedelta(0)
        assert fired == ([(3, 1, 3), (4, 1, 7), (5, 1, 9)] if late else [(3, 1, 3)])
        want = replay(
            table,
            BOUNDED,
            channel="partition",
            arrival="arrival",
            event_time="event_time",
            emit_interval=timedelta(milliseconds=10),
            window=TUMBLING,
            key="key",
            aggs=AGGS,
            allowed_lateness=lateness,
        ).results
        expected = [
            (r["count"], r["first_value"], r["last_value"])
            for r in want.to_pylist()
            if r["window_start"] == 0
        ]
        assert sorted(expected) == fired


def test_negative_event_times_on_flinks_floor_grid(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [(i % 2, ts, 100 + i, i % 3, ts) for i, ts in enumerate(range(-95, 30, 7))]
    rows += [(0, 200, 300, 0, 0), (1, 200, 300, 0, 0)]
    got = both_paths(spark, stream(rows), monkeypatch)
    starts = {r[1] for r in got["results"]}
    # Flink 2.x floors (1.x's formula put -95 in [-90, -80), which does not hold it)
    assert min(starts) == -100


def test_late_records_and_the_watermark_they_met(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [(c, t, t, t % 4, t) for t in range(0, 300, 3) for c in (0, 1)]
    rows += [(0, 5, 400, 1, -1), (1, 15, 410, 2, -2), (0, 295, 420, 3, -3)]
    got = both_paths(spark, stream(rows), monkeypatch)
    assert {r[2] for r in got["late"]} == {400, 410}
    assert all(r[-1] > 15 for r in got["late"])


def test_without_watermarks_every_window_fires_at_the_end(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [(c, t, t, t % 3, t) for t in range(0, 100, 5) for c in (0, 1)]
    got = both_paths(spark, stream(rows), monkeypatch, strategy=WatermarkStrategy.no_watermarks())
    assert {(r[-3], r[-1]) for r in got["results"]} == {(I64_MAX, None)}
    assert not got["late"]


def test_null_event_times_and_string_keys(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [(c, t, t, t % 3, t) for t in range(0, 100, 5) for c in (0, 1)]
    rows += [(0, None, 50, 1, 1)]
    table = stream(rows)
    table = table.set_column(3, "key", pa.array([f"k{k}" for k in table["key"].to_pylist()]))
    got = both_paths(spark, table, monkeypatch)
    assert [r[-1] for r in got["dropped"]] == ["null_event_time"]


@pytest.mark.parametrize(
    "kw",
    [
        {"aggs": ["count", ("mean", "value")]},
        {"window": EventTimeSessionWindows.with_gap(MS10)},
        {"window": SlidingEventTimeWindows.of(MS10, timedelta(milliseconds=20))},
    ],
    ids=["mean", "sessions", "sliding-with-gaps"],
)
def test_other_stages_run_the_keyed_operator(spark: Any, kw: dict[str, Any]) -> None:
    rows = [(c, t, t, t % 3, t) for t in range(0, 100, 5) for c in (0, 1)]
    out = run(spark, stream(rows), **kw)
    assert out.cached is not None
    # known from the parameters: the timeline skips what only the native path needs
    assert out.timeline.event_range is None and "rows" not in out.timeline.buckets.column_names
    out.unpersist()


def test_event_times_near_the_ends_of_long_run_the_keyed_operator(spark: Any) -> None:
    rows = [(c, t, t, 0, t) for t in range(0, 100, 5) for c in (0, 1)]
    rows.append((0, SAFE, 100, 0, 0))
    out = run(spark, stream(rows))
    assert out.cached is not None
    assert out.results.count() > 0
    out.unpersist()


def test_float_values_run_the_keyed_operator(spark: Any) -> None:
    rows = [(c, t, t, 0, t) for t in range(0, 100, 5) for c in (0, 1)]
    table = stream(rows)
    table = table.set_column(4, "value", pa.array([float(v) for v in table["value"].to_pylist()]))
    out = run(spark, table, aggs=[("min", "value")])
    assert out.cached is not None
    out.unpersist()


@pytest.mark.parametrize("seed", range(6))
def test_random_streams_give_the_keyed_operators_rows(
    spark: Any, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """Random disorder, duplicates, nulls, negative times, a window offset, big values:
    the native path and the keyed operator agree on all three outputs."""
    import random

    rng = random.Random(seed)
    rows: list[tuple[int, int | None, int, int, int | None]] = []
    for arrival in range(0, 600, 2):
        channel = rng.randrange(3)
        ts = arrival - 300 - rng.randrange(40 if rng.random() < 0.9 else 200)
        value = rng.choice([None, rng.randrange(-(2**63), 2**63), rng.randrange(-9, 9)])
        rows.append(
            (channel, None if rng.random() < 0.01 else ts, arrival, rng.randrange(4), value)
        )
    size = timedelta(milliseconds=rng.choice([7, 10, 25]))
    offset = timedelta(milliseconds=rng.choice([0, 3]))
    if seed % 2:  # slide 5 ms: 2-5 windows per record (1-2 for size 7), partly late ones
        window = SlidingEventTimeWindows.of(size, timedelta(milliseconds=5), offset)
    else:
        window = TumblingEventTimeWindows.of(size, offset)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(
        timedelta(milliseconds=rng.choice([0, 5, 30]))
    ).with_idleness(timedelta(milliseconds=50))
    lateness = timedelta(milliseconds=rng.choice([0, 7, 40]))
    got = both_paths(
        spark,
        stream(rows),
        monkeypatch,
        window=window,
        strategy=strategy,
        allowed_lateness=lateness,
    )
    assert got["results"] and got["late"] and got["dropped"]
    if lateness:  # refirings: results with timing "late"
        assert any(r[-2] == "late" for r in got["results"])


def test_a_row_without_channel_never_reaches_the_window_arithmetic(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its event time would overflow the window start (Spark's ANSI mode fails): the
    row must go to `dropped`, whatever order Spark tests the filter's conditions in."""
    rows: list[Any] = [(c, t, t, 0, t) for t in range(0, 100, 5) for c in (0, 1)]
    rows += [(None, I64_MAX, 50, 0, 1), (None, I64_MIN, 60, 0, 1)]
    got = both_paths(spark, stream(rows), monkeypatch)
    assert sorted(r[-1] for r in got["dropped"]) == ["null_channel", "null_channel"]


def test_the_channel_as_a_value_breaks_ties_in_both_paths(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [(c, t, t, 0, t) for t in range(0, 100, 5) for c in (1, 0)]
    got = both_paths(
        spark, stream(rows), monkeypatch, aggs=[("first", "partition"), ("last", "partition")]
    )
    assert {r[3:5] for r in got["results"]} == {(0, 1)}


def test_a_window_ending_at_the_watermark_in_force_is_late(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both channels reach event time 305: the watermark in force from arrival 310 on is
    # 305 - 5 - 1 = 299, the last timestamp of [290, 300).
    rows = [(c, t, t, t % 4, t) for t in range(0, 300, 3) for c in (0, 1)]
    rows += [(0, 305, 305, 0, 0), (1, 305, 305, 0, 0)]
    rows += [(0, 295, 400, 1, -1), (1, 300, 400, 2, -2)]
    got = both_paths(spark, stream(rows), monkeypatch)
    assert [(r[1], r[2], r[-1]) for r in got["late"]] == [(295, 400, 299)]
    late_window = [r for r in got["results"] if r[:2] == (2, 300)]
    assert [r[3] for r in late_window] == [1]


def test_a_stream_without_late_records_skips_the_late_scan(
    spark: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    rows = [(c, t, t, t % 4, t) for t in range(0, 300, 3) for c in (0, 1)]
    got = both_paths(spark, stream(rows), monkeypatch)
    assert not got["late"] and sum(r[3] for r in got["results"]) == len(rows)
    # From a file (Spark evaluates filters over in-memory rows while optimizing).
    pq.write_table(stream(rows), tmp_path / "rows.parquet")
    df = spark.read.parquet(str(tmp_path / "rows.parquet"))
    out = window_aggregate(
        df,
        BOUNDED,
        TUMBLING,
        key="key",
        event_time="event_time",
        channel="partition",
        arrival="arrival",
        emit_interval=MS10,
    )
    assert out.cached is None
    plans = {
        kind: getattr(out, kind)._jdf.queryExecution().optimizedPlan().toString()
        for kind in ("late", "results")
    }
    assert "LocalRelation <empty>" in plans["late"], plans["late"]
    assert "parquet" in plans["results"] and "__fm_watermark" not in plans["results"]


@pytest.mark.parametrize("fully_late", [True, False], ids=["a-late-record", "none-late"])
def test_sliding_windows_late_only_where_every_window_is(
    spark: Any, monkeypatch: pytest.MonkeyPatch, fully_late: bool
) -> None:
    """Windows of 25 ms every 10 ms (a record is in 2 or 3). A record whose earlier
    windows are late still counts in its later ones and is not late itself; one whose
    every window is late goes to the late output. Without that one, only the first
    window of a bucket's earliest record tells that a window can be late."""
    rows = [(c, t, t, t % 4, t) for t in range(0, 300, 3) for c in (0, 1)]
    rows += [(0, 305, 305, 0, 0), (1, 305, 305, 0, 0)]  # watermark 299 from arrival 310
    rows += [(0, 282, 400, 1, -1), (0, 300, 400, 3, -3)]
    rows += [(1, 270, 400, 2, -2)] if fully_late else []
    window = SlidingEventTimeWindows.of(timedelta(milliseconds=25), MS10)
    got = both_paths(spark, stream(rows), monkeypatch, window=window)
    # 282 is in [260, 285), [270, 295), [280, 305): only the last one is open.
    assert [(r[1], r[-1]) for r in got["late"]] == ([(270, 299)] if fully_late else [])
    late_in = {r[:2]: r[3] for r in got["results"] if r[0] in (1, 3)}
    assert late_in[(1, 280)] == sum(1 for r in rows if r[3] == 1 and 280 <= r[1] < 305)
    assert late_in[(1, 260)] == sum(
        1 for r in rows if r[3] == 1 and 260 <= r[1] < 285 and r[2] < 400
    )


@pytest.mark.parametrize("window", [TUMBLING, SlidingEventTimeWindows.of(MS10 * 2, MS10)])
def test_column_names_with_dots(spark: Any, monkeypatch: pytest.MonkeyPatch, window: Any) -> None:
    rows = [(c, t, t, t % 3, t) for t in range(0, 100, 5) for c in (0, 1)]
    table = stream(rows).rename_columns(["partition", "event_time", "arrival", "user.id", "a.v"])
    got = both_paths(
        spark, table, monkeypatch, key="user.id", aggs=["count", ("sum", "a.v")], window=window
    )
    assert sum(r[3] for r in got["results"]) == len(rows) * (2 if window != TUMBLING else 1)


def test_allowed_lateness_refires_with_everything_so_far(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lateness 20 ms on 10 ms windows: records arriving after their window fired, but
    before the watermark passes its end + 20 ms, refire it with every record so far
    (on time and refired), in arrival order; later ones are late."""
    rows = [(c, t, t, t % 2, t) for t in range(0, 300, 3) for c in (0, 1)]
    rows += [(0, 305, 305, 0, 0), (1, 305, 305, 0, 0)]  # watermark 299 from arrival 310
    rows += [
        (0, 281, 400, 1, 7),  # [280, 290): refires with its on-time records
        (1, 283, 401, 1, None),  # null value: count grows, sum/min/max/first/last skip it
        (0, 280, 402, 1, -5),  # new first
        (1, 287, 403, 0, 11),  # other key
        (0, 291, 404, 5, 3),  # [290, 300), a key without on-time records: a new window
        (0, 275, 405, 1, 1),  # [270, 280) closed at 279 + 20 = 299: late
    ]
    got = both_paths(spark, stream(rows), monkeypatch, allowed_lateness=timedelta(milliseconds=20))
    refired = sorted(r for r in got["results"] if r[-2] == "late")
    # (key, start, count, sum, min, max, first, last, watermark, fired_at)
    assert [(*r[:2], *r[3:9], r[-3], r[-1]) for r in refired] == [
        (0, 280, 5, 4 * 285 + 11, 11, 288, 282, 288, 299, 403),
        (1, 280, 3, 2 * 285 + 7, 7, 285, 7, 285, 299, 400),
        (1, 280, 4, 2 * 285 + 7, 7, 285, 7, 285, 299, 401),
        (1, 280, 5, 2 * 285 + 2, -5, 285, -5, 285, 299, 402),
        (5, 290, 1, 3, 3, 3, 3, 3, 299, 404),
    ]
    assert [(r[1], r[-1]) for r in got["late"]] == [(275, 299)]


def test_refirings_with_null_and_composite_keys_and_the_channel_as_a_key(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows: list[Any] = [(c, t, t, t % 2 or None, t) for t in range(0, 300, 3) for c in (0, 1)]
    rows += [(0, 305, 305, 0, 0), (1, 305, 305, 0, 0)]  # watermark 299 from arrival 310
    rows += [(0, 281, 400, None, 7), (1, 283, 401, None, 8), (0, 284, 402, 1, 9)]
    got = both_paths(
        spark,
        stream(rows),
        monkeypatch,
        key=["key", "partition"],
        allowed_lateness=timedelta(milliseconds=20),
    )
    # (key, partition, window start) -> count: [280, 290) holds 282 and 288 (null key)
    # and 285 (key 1) from each channel on time
    refired = {r[:3]: r[4] for r in got["results"] if r[-2] == "late"}
    assert refired == {(None, 0, 280): 3, (None, 1, 280): 3, (1, 0, 280): 2}


def test_the_refiring_cap_counts_windows_not_records(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The (key, window) pairs broadcast for refirings are bounded by the records that
    may refire times the windows each falls in (4 here), not by the records alone."""
    rows = [(c, t, t, t % 3, t) for t in range(0, 100, 5) for c in (0, 1)]
    rows += [(0, 10, 150, 1, 1), (1, 20, 160, 2, 2)]
    kw: dict[str, Any] = {
        "allowed_lateness": timedelta(milliseconds=60),
        "window": SlidingEventTimeWindows.of(timedelta(milliseconds=40), MS10),
    }
    seen: list[int | None] = []
    suitable = native_windows.suitable

    def spy(plan: Any, timeline: Any) -> bool:
        seen.append(timeline.maybe_late)
        return bool(suitable(plan, timeline))

    monkeypatch.setattr(native_windows, "suitable", spy)
    assert run(spark, stream(rows), **kw).cached is None
    records = seen[-1]
    assert records
    monkeypatch.setattr(native_windows, "MAX_REFIRINGS", 4 * records)
    assert run(spark, stream(rows), **kw).cached is None
    monkeypatch.setattr(native_windows, "MAX_REFIRINGS", 4 * records - 1)
    out = run(spark, stream(rows), **kw)
    assert out.cached is not None, "expected the keyed operator"
    out.unpersist()


@pytest.mark.parametrize("case", ["huge-lateness", "many-refirings"])
def test_lateness_falls_back_to_the_keyed_operator(
    spark: Any, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    rows = [(c, t, t, t % 3, t) for t in range(0, 100, 5) for c in (0, 1)]
    rows += [(0, 10, 150, 1, 1)]
    kw: dict[str, Any] = {"allowed_lateness": timedelta(milliseconds=20)}
    if case == "huge-lateness":  # 2^61 ns: max timestamp + lateness could overflow
        kw = {"allowed_lateness": timedelta(microseconds=2**61 // 1000 + 1)}
        kw["event_time_unit"] = "ns"
    else:
        monkeypatch.setattr(native_windows, "MAX_REFIRINGS", 0)
    out = run(spark, stream(rows), **kw)
    assert out.cached is not None
    out.unpersist()
