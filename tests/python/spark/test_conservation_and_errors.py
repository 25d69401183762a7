"""Nothing is lost: every input row is in exactly one of window contributions, the late
output, or the dropped output; bad input is reported, never a crash."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa
import pytest
from stream_helpers import start_spark_windowed_count

from floodmark import SlidingEventTimeWindows, TumblingEventTimeWindows, WatermarkStrategy
from floodmark.datagen import StreamSpec, generate
from floodmark.exceptions import InvalidParameterError, SchemaError
from floodmark.spark import assign_watermarks, watermark_timeline, window_aggregate

STRATEGY = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=1)).with_idleness(
    timedelta(seconds=5)
)
SPEC = StreamSpec(
    rows=10_000,
    partitions=4,
    keys=20,
    duration_ms=120_000,
    disorder_ms=2_000,
    lag_ms=10_000,
    quiet_partition=1,
    quiet_from_ms=40_000,
    quiet_for_ms=20_000,
    very_late_fraction=0.02,
    very_late_ms=20_000,
    null_event_times=37,
)


@pytest.fixture(scope="module")
def df(spark: Any) -> Any:
    return spark.createDataFrame(generate(SPEC))


def run(df: Any, window: Any, lateness: timedelta = timedelta(0), aggs: Any = None) -> Any:
    return window_aggregate(
        df,
        STRATEGY,
        window,
        key="key",
        event_time="event_time",
        channel="partition",
        arrival="arrival",
        aggs=aggs or ["count", ("sum", "value")],
        allowed_lateness=lateness,
    )


#: The native path (integer sums) and the keyed operator (``mean`` runs there), each
#: summing the row ids so that a row counted twice and another lost would show.
PATHS = {
    "native": ["count", ("sum", "id"), ("sum", "value")],
    "keyed": ["count", ("sum", "id"), ("mean", "value")],
}


def assert_each_row_once(out: Any, all_ids: list[int]) -> None:
    """Every input id is in exactly one place: the final firing of its window (counts
    and id sums), the late output or the dropped output (ids, no repeats)."""
    res = out.results.toArrow().to_pandas()
    final = res.sort_values("count").groupby(["key", "window_start"]).last()
    late = [r["id"] for r in out.late.select("id").collect()]
    dropped = [r["id"] for r in out.dropped.select("id").collect()]
    aside = late + dropped
    assert len(set(aside)) == len(aside)  # no repeats, late and dropped disjoint
    assert set(aside) <= set(all_ids)
    assert int(final["count"].sum()) == len(all_ids) - len(aside)
    assert int(final["sum_id"].sum()) == sum(all_ids) - sum(aside)


@pytest.mark.parametrize("path", list(PATHS))
def test_every_row_accounted_for_once_tumbling(df: Any, path: str) -> None:
    out = run(df, TumblingEventTimeWindows.of(timedelta(seconds=10)), aggs=PATHS[path])
    assert (out.cached is None) == (path == "native")
    results = out.results.toArrow()
    assert set(results["timing"].to_pylist()) == {"on_time"}
    assert out.late.count() > 0
    assert out.dropped.toArrow()["reason"].to_pylist().count("null_event_time") == 37
    assert_each_row_once(out, [r["id"] for r in df.select("id").collect()])
    out.unpersist()


@pytest.mark.parametrize("path", list(PATHS))
def test_every_row_accounted_for_once_with_lateness(df: Any, path: str) -> None:
    lateness = timedelta(seconds=10)
    out = run(df, TumblingEventTimeWindows.of(timedelta(seconds=10)), lateness, PATHS[path])
    assert (out.cached is None) == (path == "native")
    assert "late" in {r["timing"] for r in out.results.select("timing").distinct().collect()}
    assert_each_row_once(out, [r["id"] for r in df.select("id").collect()])
    out.unpersist()


def test_sliding_contributions_match_the_watermark_each_record_met(df: Any) -> None:
    """With lateness 0 a record joins exactly those of its 4 windows whose end - 1 is
    still ahead of the watermark in force when it arrived; each window fires once."""
    from pyspark.sql import functions as F

    out = run(df, SlidingEventTimeWindows.of(timedelta(seconds=20), timedelta(seconds=5)))
    marked = assign_watermarks(
        df, STRATEGY, event_time="event_time", channel="partition", arrival="arrival"
    ).where("error is null")
    ts, wm = F.col("event_time"), F.col("watermark")
    live = sum(
        F.when(wm.isNull() | (ts - ts % 5000 - k * 5000 + 20_000 - 1 > wm), 1).otherwise(0)
        for k in range(4)
    )
    expected = marked.agg(F.sum(live)).collect()[0][0]
    results = out.results.toArrow()
    assert set(results["timing"].to_pylist()) == {"on_time"}
    assert sum(results["count"].to_pylist()) == expected
    assert expected < 4 * marked.count()  # some records met a watermark past a window
    out.unpersist()


def test_assign_watermarks_reports_null_event_times(df: Any) -> None:
    out = assign_watermarks(
        df, STRATEGY, event_time="event_time", channel="partition", arrival="arrival"
    )
    errors = out.where("error is not null").toArrow()
    assert errors.num_rows == 37
    assert set(errors["error"].to_pylist()) == {"null_event_time"}
    assert out.count() == SPEC.rows


def test_missing_and_mistyped_columns_fail_before_any_job(spark: Any, df: Any) -> None:
    tracker, bus = spark.sparkContext.statusTracker(), spark.sparkContext._jsc.sc().listenerBus()
    bus.waitUntilEmpty()  # every job started so far is counted
    before = len(tracker.getJobIdsForGroup(None))
    with pytest.raises(SchemaError, match="nope"):
        assign_watermarks(df, STRATEGY, event_time="nope", channel="partition", arrival="arrival")
    with pytest.raises(SchemaError, match="channel"):
        assign_watermarks(
            df, STRATEGY, event_time="event_time", channel="missing", arrival="arrival"
        )
    bad = df.withColumn("arrival", df["arrival"].cast("string"))
    with pytest.raises(SchemaError, match="arrival"):
        assign_watermarks(
            bad, STRATEGY, event_time="event_time", channel="partition", arrival="arrival"
        )
    with pytest.raises(SchemaError, match="value"):
        window_aggregate(
            df.withColumn("value", df["value"].cast("string")),
            STRATEGY,
            TumblingEventTimeWindows.of(timedelta(seconds=1)),
            key="key",
            event_time="event_time",
            channel="partition",
            arrival="arrival",
            aggs=[("sum", "value")],
        )
    with pytest.raises(InvalidParameterError, match="aggs"):
        window_aggregate(
            df,
            STRATEGY,
            TumblingEventTimeWindows.of(timedelta(seconds=1)),
            key="key",
            event_time="event_time",
            channel="partition",
            arrival="arrival",
            aggs=[("median", "value")],
        )
    with pytest.raises(InvalidParameterError, match="unit"):
        assign_watermarks(
            df,
            STRATEGY,
            event_time="event_time",
            channel="partition",
            arrival="arrival",
            arrival_unit="minutes",
        )
    bus.waitUntilEmpty()
    assert len(tracker.getJobIdsForGroup(None)) == before


def test_timestamp_columns_give_timestamps_back(spark: Any) -> None:
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    data = [
        (p, t0 + timedelta(seconds=s), t0 + timedelta(seconds=s, milliseconds=300), 1)
        for p in range(2)
        for s in range(0, 30, 3)
    ]
    df = spark.createDataFrame(data, "p int, ts timestamp, arr timestamp, v int")
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=1))
    out = assign_watermarks(df, strategy, event_time="ts", channel="p", arrival="arr")
    assert dict(out.dtypes)["watermark"] == "timestamp"
    last = out.orderBy("arr").toArrow().to_pylist()[-1]
    # The last record arrives at 27.3 s; the emission at 27.2 s saw event times up to
    # 24 s, so the watermark in force is 24 s - 1 s - 1 tick (1 us).
    assert last["watermark"] == t0 + timedelta(seconds=23, microseconds=-1)
    res = window_aggregate(
        df,
        strategy,
        TumblingEventTimeWindows.of(timedelta(seconds=10)),
        key="p",
        event_time="ts",
        channel="p",
        arrival="arr",
    )
    types = dict(res.results.dtypes)
    assert types["window_start"] == "timestamp" and types["fired_at"] == "timestamp"
    assert res.results.count() == 6
    res.unpersist()


def test_timeline_names_the_channel_holding_time_back(spark: Any) -> None:
    table = generate(
        StreamSpec(
            rows=5_000,
            partitions=4,
            lagging_partition=2,
            lag_ms=30_000,
            quiet_partition=None,
            very_late_fraction=0.0,
            duration_ms=120_000,
        )
    )
    tl = watermark_timeline(
        spark.createDataFrame(table),
        STRATEGY.for_bounded_out_of_orderness(timedelta(seconds=1)),
        event_time="event_time",
        channel="partition",
        arrival="arrival",
    )
    rows = tl.toArrow()
    assert rows.column_names == ["time", "watermark", "status", "min_channel"]
    wms = rows["watermark"].to_pylist()
    assert wms == sorted(wms)
    holders = rows["min_channel"].to_pylist()
    assert holders.count(2) > len(holders) // 2  # the lagging partition holds time back


def test_streaming_withwatermark_drops_rows_floodmark_keeps(spark: Any, tmp_path: Any) -> None:
    """A real Structured Streaming query with Spark's own watermark (one global number
    per micro-batch) drops a lagging partition's rows; floodmark's per-partition
    watermark keeps them. Both counts are asserted per partition, and Spark's drops
    equal floodmark's model of them (`spark_global_watermark_late`, used by the demo)."""
    import pyarrow.parquet as pq

    from floodmark.spark.baseline import spark_global_watermark_late

    spec = StreamSpec(
        rows=6_000,
        partitions=4,
        keys=10,
        duration_ms=150_000,
        disorder_ms=1_500,
        lagging_partition=1,
        lag_ms=45_000,
        quiet_partition=None,
        very_late_fraction=0.01,
        very_late_ms=15_000,
        seed=11,
    )
    table = generate(spec)
    # Micro-batches: one parquet file per 10 s of arrival time, one file per trigger, in
    # arrival order (the file source orders files by modification time).
    src = tmp_path / "src"
    src.mkdir()
    arrivals = table["arrival"].to_numpy()
    bucket = arrivals // 10_000
    files = [table.filter(pa.array(bucket == b)) for b in sorted(set(bucket.tolist()))]
    # Then one flush record far in the future, like a bounded Flink source's final
    # watermark, so that Spark emits every window still pending (it is not counted).
    last = int(table["event_time"].to_numpy().max())
    flush = {
        "id": [-1],
        "partition": [0],
        "event_time": [last + 3_600_000],
        "arrival": [int(arrivals.max()) + 3_600_000],
        "key": [-1],
        "value": [0],
    }
    files.append(pa.table(flush, schema=table.schema))
    for i, part in enumerate(files):
        path = src / f"batch-{i:04d}.parquet"
        pq.write_table(part, path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    schema = spark.createDataFrame(table.slice(0, 1)).schema
    query, name = start_spark_windowed_count(
        spark, src, schema, "2 seconds", ["key", "partition"], tmp_path / "ckpt"
    )
    query.processAllAvailable()
    query.stop()
    kept_rows = spark.sql(
        f"select partition, sum(`count`) as n from {name} where key >= 0 group by partition"
    ).collect()
    spark_kept = {r["partition"]: r["n"] for r in kept_rows}
    parts = table["partition"].to_numpy()
    rows_per = {p: int((parts == p).sum()) for p in range(spec.partitions)}
    spark_dropped = {p: rows_per[p] - spark_kept.get(p, 0) for p in rows_per}

    df = spark.createDataFrame(table)
    # Every file is there from the start: Spark reads one per batch, back to back, and
    # never finds a trigger without new records (no no-data batch until the end).
    model = spark_global_watermark_late(
        df,
        event_time="event_time",
        arrival="arrival",
        channel="partition",
        delay=timedelta(seconds=2),
        trigger_interval=timedelta(seconds=10),
        window_size=timedelta(seconds=10),
        no_data_batches=False,
    ).toArrow()
    assert (
        dict(zip(model["channel"].to_pylist(), model["spark_dropped"].to_pylist(), strict=True))
        == spark_dropped
    )

    out = window_aggregate(
        df,
        WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=2)),
        TumblingEventTimeWindows.of(timedelta(seconds=10)),
        key="key",
        event_time="event_time",
        channel="partition",
        arrival="arrival",
    )
    late = out.late.groupBy("partition").count().collect()
    fm_late = {p: 0 for p in rows_per} | {r["partition"]: r["count"] for r in late}
    fm_kept = sum(out.results.toArrow()["count"].to_pylist())
    assert fm_kept + sum(fm_late.values()) + out.dropped.count() == spec.rows
    out.unpersist()
    # The lagging partition is 45 s behind: Spark's global watermark drops almost all of
    # it; floodmark's per-partition watermark keeps it (late there only what is late
    # within the partition itself, like everywhere else).
    assert spark_dropped[1] > 0.9 * rows_per[1], (spark_dropped, rows_per)
    assert fm_late[1] < 0.1 * spark_dropped[1], (fm_late, spark_dropped)
    # In floodmark the lagging partition is late no more often than a punctual one
    # (within 2x of their mean, plus a little slack for small counts).
    punctual_mean = sum(v for p, v in fm_late.items() if p != 1) / (spec.partitions - 1)
    assert fm_late[1] <= 2 * punctual_mean + 20, fm_late
