"""Column types: string channels, several key columns, timestamp_ntz and integer units,
and the default arrival (row order) all give the engine's answer."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from functools import partial
from typing import Any

import pyarrow as pa

from floodmark import TumblingEventTimeWindows, WatermarkStrategy
from floodmark.datagen import StreamSpec, generate
from floodmark.exceptions import SchemaError
from floodmark.replay import replay
from floodmark.spark import assign_watermarks, window_aggregate

STRATEGY = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=1)).with_idleness(
    timedelta(seconds=4)
)


def plain_stream(**shape: int) -> Any:
    """A generated stream of few partitions, none of them lagging or quiet."""
    return generate(StreamSpec(**shape, lagging_partition=None, quiet_partition=None))


def test_string_channel_two_keys_seconds_unit(spark: Any) -> None:
    t = plain_stream(rows=3_000, partitions=3, keys=4, duration_ms=60_000)
    # Whole seconds, declared as unit "s"; string channels; a second key column.
    secs = pa.table(
        {
            "chan": pa.array([f"p{p}" for p in t["partition"].to_pylist()]),
            "ts": pa.array([v // 1000 for v in t["event_time"].to_pylist()]),
            "arr": pa.array([v // 1000 for v in t["arrival"].to_pylist()]),
            "k1": t["key"],
            "k2": pa.array([f"g{v % 2}" for v in t["value"].to_pylist()]),
            "value": t["value"],
        }
    )
    out = window_aggregate(
        spark.createDataFrame(secs),
        STRATEGY,
        TumblingEventTimeWindows.of(timedelta(seconds=10)),
        key=["k1", "k2"],
        event_time="ts",
        channel="chan",
        arrival="arr",
        event_time_unit="s",
        arrival_unit="s",
        aggs=["count", ("mean", "value")],
        emit_interval=timedelta(seconds=1),
    )
    want = replay(
        secs,
        STRATEGY,
        event_time="ts",
        channel="chan",
        arrival="arr",
        event_time_unit="s",
        arrival_unit="s",
        emit_interval=timedelta(seconds=1),
        window=TumblingEventTimeWindows.of(timedelta(seconds=10)),
        key=["k1", "k2"],
        aggs=["count", ("mean", "value")],
    )
    cols = ["k1", "k2", "window_start", "window_end", "count", "mean_value", "watermark"]
    got = out.results.toArrow()
    assert sorted(zip(*[got[c].to_pylist() for c in cols], strict=True)) == sorted(
        zip(*[want.results[c].to_pylist() for c in cols], strict=True)
    )
    out.unpersist()


def test_microsecond_timestamps_read_in_milliseconds_equal_replay(spark: Any) -> None:
    # Records whose times differ only below the unit tie and go in value order on both
    # window paths and in replay (replay sorted on the raw microseconds: first and last,
    # which go by event time, differed in many windows).
    import numpy as np

    t = plain_stream(rows=2_000, partitions=2, keys=3, duration_ms=20_000)
    jitter = np.random.default_rng(5).integers(0, 1_000, size=(2, t.num_rows))
    us = pa.timestamp("us", tz="UTC")
    stamps = t.set_column(
        t.schema.get_field_index("event_time"),
        "event_time",
        pa.array(t["event_time"].to_numpy() // 100 * 100_000 + jitter[0], us),  # ties: 100 ms
    ).set_column(
        t.schema.get_field_index("arrival"),
        "arrival",
        pa.array(t["arrival"].to_numpy() // 100 * 100_000 + jitter[1], us),
    )
    stamps = stamps.append_column("f", pa.array(jitter[0] * 0.5))
    kw: dict[str, Any] = {"event_time": "event_time", "channel": "partition"}
    kw |= {"arrival": "arrival", "key": "key", "event_time_unit": "ms", "arrival_unit": "ms"}
    window = TumblingEventTimeWindows.of(timedelta(seconds=1))
    for aggs in (
        ["count", ("first", "value"), ("last", "value")],  # the native path
        ["count", ("first", "f"), ("last", "f"), ("mean", "f")],  # the keyed one
    ):
        out = window_aggregate(spark.createDataFrame(stamps), STRATEGY, window, aggs=aggs, **kw)
        want = replay(stamps, STRATEGY, window=window, aggs=aggs, **kw).results
        got = out.results.toArrow()
        times = ("window_start", "window_end", "watermark", "fired_at")  # types differ
        cols = [c for c in want.column_names if c in got.column_names and c not in times]
        assert "first_value" in cols or "first_f" in cols
        assert sorted(zip(*[got[c].to_pylist() for c in cols], strict=True)) == sorted(
            zip(*[want[c].to_pylist() for c in cols], strict=True)
        )
        out.unpersist()


def test_a_timestamp_is_counted_in_its_precision_by_default_in_process_and_on_spark(
    spark: Any,
) -> None:
    """With no unit given, a timestamp column is counted in microseconds by the Spark
    functions and in its own precision by ``replay`` (one rule:
    ``floodmark.column_kinds.tick_unit``), so the two give the same watermarks for the
    same microsecond timestamps. ``replay`` counted them in milliseconds: Flink's ``-
    1`` was a millisecond there and a microsecond on Spark."""
    import numpy as np

    t = plain_stream(rows=500, partitions=2, keys=3, duration_ms=10_000)
    jitter = np.random.default_rng(7).integers(0, 1_000, size=(2, t.num_rows))
    us = pa.timestamp("us", tz="UTC")
    stamps = pa.table(
        {
            "id": pa.array(np.arange(t.num_rows)),
            "partition": t["partition"],
            "event_time": pa.array(t["event_time"].to_numpy() * 1_000 + jitter[0], us),
            "arrival": pa.array(t["arrival"].to_numpy() * 1_000 + jitter[1], us),
        }
    )
    kw: dict[str, Any] = {"event_time": "event_time", "channel": "partition", "arrival": "arrival"}
    want = replay(stamps, STRATEGY, **kw).records.sort_by("id")
    got = assign_watermarks(spark.createDataFrame(stamps), STRATEGY, **kw).toArrow().sort_by("id")
    for name in ("channel_watermark", "watermark"):
        ticks = got[name].cast(us).cast(pa.int64()).fill_null(-(2**63))
        assert ticks.to_pylist() == want[name].to_pylist(), name
    assert got["is_late"].to_pylist() == want["is_late"].to_pylist()
    assert set(want["watermark"].to_numpy() % 1_000) != {999}  # not on a ms boundary - 1


def test_timestamp_ntz_round_trips(spark: Any) -> None:
    t0 = datetime(2026, 3, 29, 0, 59, 58)  # near a DST change in Europe: NTZ must not care
    rows = [
        (p, t0 + timedelta(milliseconds=700 * i), t0 + timedelta(milliseconds=700 * i + 50))
        for p in range(2)
        for i in range(20)
    ]
    df = spark.createDataFrame(rows, "p int, ts timestamp_ntz, arr timestamp_ntz")
    # A DataFrame in, a DataFrame out: it composes with DataFrame.transform.
    out = df.transform(assign_watermarks, STRATEGY, event_time="ts", channel="p", arrival="arr")
    assert dict(out.dtypes)["watermark"] == "timestamp_ntz"
    got = out.orderBy("arr", "p").toArrow().to_pylist()
    last = got[-1]
    # The emission before the last arrival (13.35 s) saw event times up to 12.6 s.
    assert last["watermark"] == t0 + timedelta(milliseconds=12_600 - 1000, microseconds=-1)


def test_timestamp_ntz_watermark_far_from_the_epoch(spark: Any) -> None:
    # A 40,000-year bound puts the watermark beyond the ~31,700 years that
    # make_dt_interval's seconds (a decimal(18, 6)) reach: it failed with Spark's raw
    # ArithmeticException. The value must equal the timestamp column's, in every unit.
    t0 = datetime(2026, 3, 29, 0, 59, 58)
    rows = [(0, t0 + timedelta(seconds=i), t0 + timedelta(seconds=i)) for i in range(5)]
    far = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(days=365 * 40_000))
    for unit in ("us", "ms", "s"):
        got = {}
        for kind in ("timestamp", "timestamp_ntz"):
            df = spark.createDataFrame(rows, f"p int, ts {kind}, arr {kind}")
            out = assign_watermarks(
                df, far, event_time="ts", channel="p", arrival="arr", event_time_unit=unit
            )
            got[kind] = out.orderBy("arr").toArrow()["watermark"].cast(pa.int64()).to_pylist()
        assert got["timestamp_ntz"] == got["timestamp"]
        last = int((t0 + timedelta(seconds=3) - datetime(1970, 1, 1)) / timedelta(microseconds=1))
        per = {"us": 1, "ms": 1_000, "s": 1_000_000}[unit]
        bound = 365 * 40_000 * 86_400_000_000
        assert got["timestamp"][-1] == last - bound - per, unit


def test_timestamp_ntz_windows_keep_the_type(spark: Any) -> None:
    t0 = datetime(2026, 3, 29, 0, 59, 58)
    ms = timedelta(milliseconds=1)
    rows = [
        (p, t0 + 700 * i * ms, t0 + (700 * i + 50) * ms, i) for p in range(2) for i in range(20)
    ]
    rows += [(0, t0, t0 + 20_000 * ms, 100), (1, None, t0, 101)]  # one late, one without ts
    df = spark.createDataFrame(rows, "p int, ts timestamp_ntz, arr timestamp_ntz, v long")
    for aggs in (["count"], ["count", ("mean", "v")]):  # the native path, the keyed one
        out = window_aggregate(
            df,
            STRATEGY,
            TumblingEventTimeWindows.of(timedelta(seconds=2)),
            key="p",
            event_time="ts",
            channel="p",
            arrival="arr",
            aggs=aggs,
        )
        types = dict(out.results.dtypes)
        assert [types[c] for c in ("window_start", "window_end", "watermark", "fired_at")] == [
            "timestamp_ntz"
        ] * 4
        assert dict(out.late.dtypes) == {**dict(df.dtypes), "watermark": "timestamp_ntz"}
        assert [r["v"] for r in out.late.collect()] == [100]
        assert [(r["v"], r["reason"]) for r in out.dropped.collect()] == [(101, "null_event_time")]
        first = out.results.orderBy("p", "window_start").first()
        assert first is not None and first["window_start"] == datetime(2026, 3, 29, 0, 59, 58)
        out.unpersist()


def test_default_arrival_is_row_order(spark: Any) -> None:
    t = plain_stream(rows=2_000, partitions=2, keys=3, duration_ms=30_000)
    df = spark.createDataFrame(t.drop(["arrival"]).sort_by("id")).coalesce(1)
    out = assign_watermarks(df, STRATEGY, event_time="event_time", channel="partition")
    got = out.toArrow().sort_by("id")
    assert "arrival_index" in got.column_names
    per_channel: dict[int, list[int]] = {}
    for p, a in zip(got["partition"].to_pylist(), got["arrival_index"].to_pylist(), strict=True):
        per_channel.setdefault(p, []).append(a)
    for seq in per_channel.values():
        assert seq == list(range(len(seq)))  # the n-th row of a channel arrives at tick n
    want = replay(
        got.drop(["channel_watermark", "watermark", "is_late", "error"]),
        STRATEGY,
        event_time="event_time",
        channel="partition",
        arrival="arrival_index",
    )
    # Integer columns keep Flink's Long.MIN_VALUE for "no watermark yet".
    assert got["watermark"].to_pylist() == want.records.sort_by("id")["watermark"].to_pylist()


def test_interval_below_one_tick_is_a_clear_error(spark: Any) -> None:
    import pytest

    from floodmark.exceptions import InvalidParameterError

    df = spark.createDataFrame([(0, 1, 1)], "p int, ts long, arr long")
    with pytest.raises(InvalidParameterError, match="at least one tick"):
        assign_watermarks(
            df, STRATEGY, event_time="ts", channel="p", arrival="arr", arrival_unit="s"
        )


#: Spark column types, one value of each: what floodmark takes as a key or channel, an
#: aggregated value and an event time is one rule (``floodmark.column_kinds``) for both
#: layers.
COLUMN_TYPES = {
    "tinyint": 1,
    "smallint": 1,
    "int": 1,
    "bigint": 1,
    "float": 1.5,
    "double": 1.5,
    "decimal(10,2)": Decimal("1.25"),
    "string": "a",
    "boolean": True,
    "binary": b"a",
    "date": date(2026, 1, 1),
    "timestamp": datetime(2026, 1, 1, tzinfo=timezone.utc),
    "timestamp_ntz": datetime(2026, 1, 1),
    "array<bigint>": [1],
    "interval day to second": timedelta(seconds=1),
}


def _outcome(check: Callable[[], object]) -> str:
    """``ok``, or what a refusal says after the column's type (the type's name is the
    layer's own: Spark's or Arrow's), or else its last clause."""
    try:
        check()
    except SchemaError as err:
        text = str(err)
        return text.split("; ", 1)[1] if "; " in text else text.split(": ", 2)[-1]
    return "ok"


def test_a_columns_type_is_judged_alike_in_process_and_on_spark(spark: Any) -> None:
    from floodmark.spark.columns import key_column, marker_column, time_column, value_column

    names = {t: f"c{i}" for i, t in enumerate(COLUMN_TYPES)}
    schema = ", ".join(f"{names[t]} {t}" for t in COLUMN_TYPES) + ", ch int, arr bigint, ts bigint"
    df = spark.createDataFrame([(*COLUMN_TYPES.values(), 0, 0, 0)], schema)
    table = df.toArrow()  # in the Arrow types Spark's batches cross to Python in
    window = TumblingEventTimeWindows.of(timedelta(seconds=1))

    def in_process(c: str, role: str) -> None:
        given = {"key": {"key": c}, "channel": {"channel": c}, "event_time": {"event_time": c}}
        kw = {"channel": "ch", "event_time": "ts", "key": "ch", **given.get(role, {})}
        if role == "marker":  # a punctuated strategy's watermarks, of integer event times
            replay(table, WatermarkStrategy.for_punctuated(c), arrival="arr", **kw)
            return
        aggs = [("sum", c)] if role == "value" else ["count"]
        replay(table, STRATEGY, arrival="arr", window=window, aggs=aggs, **kw)

    def on_spark(c: str, role: str) -> None:
        if role in ("key", "channel"):
            key_column(df, c, role)
        elif role == "value":
            value_column(df, c, "aggs")
        elif role == "marker":
            marker_column(df, c, time_column(df, "ts", None, "event_time"))
        else:
            time_column(df, c, None, "event_time")

    seen = set()
    for spark_type, c in names.items():
        for role in ("key", "channel", "value", "event_time", "marker"):
            got = (_outcome(partial(on_spark, c, role)), _outcome(partial(in_process, c, role)))
            assert got[0] == got[1], (spark_type, role, got)
            seen.add(got[0])
    assert seen == {
        "ok",
        "use an integer or string column",
        "aggregates need an integer, float or decimal column",
        "use a timestamp or integer epoch column",
        "it needs the event-time column's type and unit (integer, ms)",
    }
