"""The Spark pipeline equals the engine run in one process (floodmark.replay), row for
row, on multi-partition streams with skew, a lagging and a quiet partition, very late
events and duplicate timestamps."""

from __future__ import annotations

import dataclasses
from collections import Counter
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pytest

from floodmark import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    WatermarkStrategy,
)
from floodmark.datagen import StreamSpec, generate
from floodmark.replay import replay
from floodmark.spark import (
    assign_watermarks,
    lookup,
    timeline,
    watermark_timeline,
    window_aggregate,
    windows,
)

SPEC = StreamSpec(
    rows=20_000,
    partitions=6,
    keys=50,
    duration_ms=300_000,
    disorder_ms=3_000,
    lag_ms=20_000,
    quiet_partition=5,
    quiet_from_ms=100_000,
    quiet_for_ms=60_000,
    very_late_fraction=0.01,
    very_late_ms=30_000,
    skew=1.3,
    timestamp_granularity_ms=10,
)

STRATEGIES = {
    "bounded": WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=2)),
    "bounded+idle": WatermarkStrategy.for_bounded_out_of_orderness(
        timedelta(seconds=2)
    ).with_idleness(timedelta(seconds=5)),
    "monotonous+idle": WatermarkStrategy.for_monotonous_timestamps().with_idleness(
        timedelta(seconds=1)
    ),
    "lag": WatermarkStrategy.for_processing_time_lag(timedelta(seconds=3)),
}


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return generate(SPEC)


@pytest.fixture(scope="module")
def with_nulls() -> pa.Table:
    """The same stream with 25 event times null (they go to ``dropped``)."""
    return generate(dataclasses.replace(SPEC, null_event_times=25))


def frame(spark: Any, table: pa.Table) -> Any:
    return spark.createDataFrame(table)


def check_assign(spark: Any, table: pa.Table, strategy: WatermarkStrategy) -> None:
    got = (
        assign_watermarks(
            frame(spark, table),
            strategy,
            event_time="event_time",
            channel="partition",
            arrival="arrival",
        )
        .select("id", "channel_watermark", "watermark", "is_late", "error")
        .toArrow()
        .sort_by("id")
    )
    want = replay(
        table, strategy, event_time="event_time", channel="partition", arrival="arrival"
    ).records.sort_by("id")
    assert got.num_rows == want.num_rows == table.num_rows
    assert got["error"].null_count == got.num_rows
    min_ms = -(2**63)
    wm_got = [min_ms if v is None else v for v in got["watermark"].to_pylist()]
    assert wm_got == want["watermark"].to_pylist()
    cwm_got = [min_ms if v is None else v for v in got["channel_watermark"].to_pylist()]
    assert cwm_got == want["channel_watermark"].to_pylist()
    assert got["is_late"].to_pylist() == want["is_late"].to_pylist()
    # The stream is built so that the check means something.
    assert 0 < sum(want["is_late"].to_pylist()) < table.num_rows


def test_assign_watermarks_without_any_watermark(spark: Any, table: pa.Table) -> None:
    """No watermark ever (an empty timeline): nothing is late, no record has one."""
    got = assign_watermarks(
        frame(spark, table),
        WatermarkStrategy.no_watermarks(),
        event_time="event_time",
        channel="partition",
        arrival="arrival",
    ).toArrow()
    assert got.num_rows == table.num_rows
    # integer event times: "no watermark" is Long.MIN_VALUE (null for timestamp columns)
    for col in ("watermark", "channel_watermark"):
        assert set(got[col].to_pylist()) == {-(2**63)}
    assert not any(got["is_late"].to_pylist())


def take_records_path(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The timeline stage judges the aggregation not to reduce: the builder reads the
    records and ``assign_watermarks`` runs its per-channel pass where it applies. The
    list returned grows each time the per-(channel, bucket) table is made anyway."""
    monkeypatch.setattr(timeline, "SAMPLE_RECORDS", 100)
    monkeypatch.setattr(timeline, "RECORDS_DENSITY", 0.0)
    made: list[int] = []
    aggregate = timeline.bucket_aggregate

    def counted(*args: Any, **kwargs: Any) -> Any:
        made.append(1)
        return aggregate(*args, **kwargs)

    monkeypatch.setattr(timeline, "bucket_aggregate", counted)
    return made


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_assign_watermarks_equals_engine(spark: Any, table: pa.Table, name: str) -> None:
    check_assign(spark, table, STRATEGIES[name])


@pytest.mark.parametrize("name", ["bounded+idle", "lag"])
def test_assign_watermarks_on_the_records_path_equals_engine(
    spark: Any, table: pa.Table, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-channel pass; a processing-time lag (emitted at every grid time, each
    task's builder would call every channel at each) keeps the per-(channel, bucket)
    table."""
    made = take_records_path(monkeypatch)
    check_assign(spark, table, STRATEGIES[name])
    assert bool(made) is (name == "lag")


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_watermark_timeline_equals_engine(spark: Any, table: pa.Table, name: str) -> None:
    """The combined timeline itself, every change with its status and the channel that
    held the minimum, from bucket rows in Spark as from every record in one process."""
    got = watermark_timeline(
        frame(spark, table),
        STRATEGIES[name],
        event_time="event_time",
        channel="partition",
        arrival="arrival",
    ).toArrow()
    want = replay(
        table, STRATEGIES[name], event_time="event_time", channel="partition", arrival="arrival"
    ).timeline
    cols = ["time", "watermark", "status", "min_channel"]
    assert got.select(cols).to_pylist() == want.select(cols).to_pylist()
    assert got.num_rows > 10


@pytest.mark.parametrize("layout", ["arrival", "row-order", "timestamps"])
def test_assign_watermarks_on_the_records_path_equals_the_aggregation(
    spark: Any, table: pa.Table, layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """String channels, rows that cannot be placed (a null channel, arrival or event
    time: their ``error``), the row order as the arrival, timestamp columns: the
    per-channel pass gives every row, whole, as the per-(channel, bucket) table does."""
    arrival = None if layout == "row-order" else "arrival"
    channel = pa.array([f"topic-{p}" for p in table["partition"].to_pylist()])
    t = table.set_column(table.schema.get_field_index("partition"), "partition", channel)
    t = t.slice(0, 6_000)
    nulls = {"partition": 5, "arrival": 17, "event_time": 29}
    for name, every in nulls.items():
        if name == "arrival" and arrival is None:
            continue
        at = t.schema.get_field_index(name)
        values = t[name].to_pylist()
        t = t.set_column(
            at,
            name,
            pa.array(
                [None if i % 97 == every else v for i, v in enumerate(values)],
                t.schema.field(name).type,
            ),
        )
    if arrival is None:
        t = t.sort_by("arrival").drop_columns(["arrival"])
    if layout == "timestamps":
        for name in ("event_time", "arrival"):
            at = t.schema.get_field_index(name)
            t = t.set_column(at, name, t[name].cast(pa.timestamp("ms", tz="UTC")))

    def run() -> Counter[tuple[Any, ...]]:
        out = assign_watermarks(
            frame(spark, t),
            STRATEGIES["bounded+idle"],
            event_time="event_time",
            channel="partition",
            arrival=arrival,
        )
        return Counter(map(tuple, (r.asDict().items() for r in out.collect())))

    whole = run()
    made = take_records_path(monkeypatch)
    got = run()
    assert got == whole and not made
    errors = Counter(dict(row)["error"] for row in whole.elements())
    assert errors["null_channel"] > 0 and errors["null_event_time"] > 0
    assert (errors["null_arrival"] > 0) is (arrival is not None)


@pytest.mark.parametrize("layout", ["string", "sparse", "no-gateway", "key-join", "pair-join"])
def test_assign_watermarks_every_lookup_key(
    spark: Any, table: pa.Table, layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Integer channels in a small range are offset by arithmetic (the tests above);
    # string and sparse integer channels get offsets from a join. Small tables are
    # constant arrays in the plan (the tests above); without a JVM gateway (Spark
    # Connect) and for larger tables they are joined on one bigint key, and a key range
    # too wide for one bigint joins on (offset, bucket).
    partitions = table["partition"].to_pylist()
    channel = table["partition"]
    if layout == "string":
        channel = pa.array([f"topic-{p}" for p in partitions])
    elif layout == "sparse":
        channel = pa.array([p * 10**15 - 7 for p in partitions], pa.int64())
    elif layout == "no-gateway":
        monkeypatch.setattr(lookup, "constant_array", lambda spark, values: None)
    else:
        monkeypatch.setattr(lookup, "MAX_CONSTANT_SLOTS", 0)
        if layout == "pair-join":
            monkeypatch.setattr(lookup, "MAX_KEYS", 1)
    at = table.schema.get_field_index("partition")
    check_assign(spark, table.set_column(at, "partition", channel), STRATEGIES["bounded+idle"])


@pytest.mark.parametrize("constant", [True, False])
def test_assign_watermarks_joins_only_when_the_table_is_large(
    spark: Any, table: pa.Table, constant: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the bucket table's paths (the records path reads the combined watermark by
    arrival on the executors where the constant arrays do not fit: no join either)."""
    from floodmark.spark import timeline

    monkeypatch.setattr(timeline, "RECORDS_DENSITY", 2.0)  # never the records path
    if not constant:
        monkeypatch.setattr(lookup, "MAX_CONSTANT_SLOTS", 0)
    out = assign_watermarks(
        frame(spark, table),
        STRATEGIES["bounded"],
        event_time="event_time",
        channel="partition",
        arrival="arrival",
    )
    plan = out._jdf.queryExecution().optimizedPlan().toString()
    assert ("Join" in plan) is not constant


def rows(t: pa.Table | Any, cols: list[str]) -> Counter[tuple[Any, ...]]:
    tbl = t if isinstance(t, pa.Table) else t.toArrow()
    return Counter(zip(*[tbl[c].to_pylist() for c in cols], strict=False))


WINDOWS = {
    "tumbling": (TumblingEventTimeWindows.of(timedelta(seconds=10)), timedelta(0)),
    "tumbling+lateness": (
        TumblingEventTimeWindows.of(timedelta(seconds=10)),
        timedelta(seconds=15),
    ),
    "sliding": (
        SlidingEventTimeWindows.of(timedelta(seconds=20), timedelta(seconds=5)),
        timedelta(seconds=3),
    ),
    "session": (EventTimeSessionWindows.with_gap(timedelta(seconds=4)), timedelta(seconds=5)),
}


@pytest.mark.parametrize(
    ("name", "keyed"),
    [(name, False) for name in WINDOWS] + [(name, True) for name in WINDOWS if name != "session"],
)
def test_window_aggregate_equals_engine(
    spark: Any, with_nulls: pa.Table, name: str, keyed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every window kind against the engine; tumbling and sliding windows take the
    native aggregations, and (``keyed``) the keyed Rust operator when that is off. Each
    firing is compared with its time; late and dropped rows whole."""
    table = with_nulls
    window, lateness = WINDOWS[name]
    if keyed:
        monkeypatch.setattr(windows, "native_outputs", lambda *args: None)
    strategy = STRATEGIES["bounded+idle"]
    aggs = ["count", ("sum", "value"), ("max", "value"), ("first", "value")]
    out = window_aggregate(
        frame(spark, table),
        strategy,
        window,
        key="key",
        event_time="event_time",
        channel="partition",
        arrival="arrival",
        aggs=aggs,
        allowed_lateness=lateness,
    )
    want = replay(
        table,
        strategy,
        event_time="event_time",
        channel="partition",
        arrival="arrival",
        window=window,
        key="key",
        aggs=aggs,
        allowed_lateness=lateness,
    )
    res_cols = [
        "key",
        "window_start",
        "window_end",
        "count",
        "sum_value",
        "max_value",
        "first_value",
        "watermark",
        "timing",
    ]
    assert (out.cached is None) is (name != "session" and not keyed)
    got_res = out.results.toArrow()
    assert got_res.num_rows > 0
    assert rows(got_res, [*res_cols, "fired_at"]) == rows(want.results, [*res_cols, "trigger_time"])
    late_cols = [*table.column_names, "watermark"]
    assert rows(out.late, late_cols) == rows(want.late, late_cols)
    assert want.late.num_rows > 0
    drop_cols = [*table.column_names, "reason"]
    assert rows(out.dropped, drop_cols) == rows(want.dropped, drop_cols)
    assert want.dropped["reason"].to_pylist().count("null_event_time") == 25
    out.unpersist()


def test_records_tied_but_for_a_nan_value_meet_the_operator_as_replay_has_them(
    spark: Any,
) -> None:
    """Spark's sort (the keyed path's) puts a float NaN after every number, and so does
    replay: records tied in everything but their values give the same min, max, first
    and last on both, in any row order; min and max order NaN above every number, as
    Spark's own min and max (the native path's) do."""
    table = pa.table(
        {
            "partition": [0, 0, 0],
            "event_time": [1, 1, 20],
            "arrival": [1, 1, 200],
            "key": [0, 0, 0],
            "value": [float("nan"), 1.0, 2.0],
        }
    )
    window = TumblingEventTimeWindows.of(timedelta(milliseconds=10))
    aggs = ["count", ("min", "value"), ("max", "value"), ("first", "value"), ("last", "value")]
    cols = ["window_start", "count", "min_value", "max_value", "first_value", "last_value"]
    strategy = WatermarkStrategy.for_monotonous_timestamps()
    names = {"event_time": "event_time", "channel": "partition", "arrival": "arrival"}

    def shown(t: pa.Table) -> list[tuple[Any, ...]]:
        return sorted(
            tuple("nan" if v != v else v for v in r.values()) for r in t.select(cols).to_pylist()
        )

    for order in ([0, 1, 2], [1, 0, 2]):
        rows_in = table.take(order)
        got = window_aggregate(
            frame(spark, rows_in), strategy, window, key="key", aggs=aggs, **names
        )
        want = replay(rows_in, strategy, window=window, key="key", aggs=aggs, **names)
        assert shown(got.results.toArrow()) == shown(want.results)
        assert shown(want.results)[0] == (0, 2, 1.0, "nan", 1.0, "nan")
        got.unpersist()
