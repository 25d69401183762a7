"""The watermark stage at scale: many channels, a per-(channel, bucket) table too large for
the driver, the builder fed in many small chunks.

* 1,000 channels (a few records each, most of them quiet for long stretches) equal the
  engine run in one process (``floodmark.replay``), on the driver path, on the
  executor path (the table forced to stay on the executors) and, for the windows, on
  the records path (no aggregation: the builder reads the records);
* the executor and records paths fed in chunks of a few rows give the very rows of one
  chunk;
* the records path is taken where the aggregation would not reduce the records, and
  only there;
* the driver never collects a table that grows with channels x buckets: every table it
  collects on the executor or records path stays within the number of channels, the
  grid or the records path's fixed sample.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from spark_helpers import judged_to_reduce

from floodmark import (
    EventTimeSessionWindows,
    TumblingEventTimeWindows,
    WatermarkStrategy,
)
from floodmark.replay import replay
from floodmark.spark import assign_watermarks, timeline, window_aggregate

STRATEGY = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(milliseconds=300))
STRATEGY = STRATEGY.with_idleness(timedelta(seconds=2))


def sparse_stream(channels: int = 1000, seed: int = 3) -> pa.Table:
    """``channels`` channels over ~20 s: most send 4-8 records in one short burst and
    go quiet; every tenth sends throughout; one lags 5 s behind."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in range(channels):
        n = 30 if c % 10 == 0 else int(rng.integers(4, 9))
        start = 0 if c % 10 == 0 else int(rng.integers(0, 18_000))
        span = 20_000 if c % 10 == 0 else 600
        arrival = np.sort(start + rng.integers(0, span, n))
        event = arrival - rng.integers(0, 800, n) - (5_000 if c == 7 else 0)
        rows += [(c, int(e), int(a)) for e, a in zip(event, arrival, strict=True)]
    part, event, arrival = map(np.array, zip(*rows, strict=True))
    return pa.table(
        {
            "id": pa.array(np.arange(len(part), dtype=np.int64)),
            "partition": pa.array(part, pa.int64()),
            "event_time": pa.array(event, pa.int64()),
            "arrival": pa.array(arrival, pa.int64()),
            "key": pa.array(rng.integers(0, 40, len(part)), pa.int64()),
        }
    )


@pytest.fixture(scope="module")
def stream() -> pa.Table:
    return sparse_stream()


def take_path(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Forces the timeline stage's path: the bucket table on the ``driver``, on the
    ``executors``, or the builder over the ``records`` themselves."""
    if name == "records":
        monkeypatch.setattr(timeline, "SAMPLE_RECORDS", 100)
        monkeypatch.setattr(timeline, "RECORDS_DENSITY", 0.0)
        return
    monkeypatch.setattr(timeline, "RECORDS_DENSITY", 2.0)  # never: at most 1 per record
    if name == "executors":
        monkeypatch.setattr(timeline, "MAX_DRIVER_BUCKET_ROWS", 50)


@pytest.fixture(params=["driver", "executors", "records"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    take_path(request.param, monkeypatch)
    return str(request.param)


def engine(stream: pa.Table, window: Any = None) -> Any:
    return replay(
        stream,
        STRATEGY,
        event_time="event_time",
        channel="partition",
        arrival="arrival",
        window=window,
        key="key",
    )


def test_a_thousand_channels_assign_equals_the_engine(
    spark: Any, stream: pa.Table, path: str
) -> None:
    got = (
        assign_watermarks(
            spark.createDataFrame(stream),
            STRATEGY,
            event_time="event_time",
            channel="partition",
            arrival="arrival",
        )
        .select("id", "channel_watermark", "watermark", "is_late")
        .toArrow()
        .sort_by("id")
    )
    want = engine(stream).records.sort_by("id")
    for column in ("channel_watermark", "watermark", "is_late"):
        assert got[column].to_pylist() == want[column].to_pylist(), column
    assert 0 < sum(want["is_late"].to_pylist()) < stream.num_rows


def counted(table: pa.Table | Any, columns: list[str]) -> Counter[tuple[Any, ...]]:
    t = table if isinstance(table, pa.Table) else table.toArrow()
    return Counter(zip(*[t[c].to_pylist() for c in columns], strict=True))


@pytest.mark.parametrize(
    "window",
    [TumblingEventTimeWindows.of(timedelta(seconds=1)), EventTimeSessionWindows.with_gap(300)],
    ids=["tumbling-native", "session-keyed"],
)
def test_a_thousand_channels_windows_equal_the_engine(
    spark: Any, stream: pa.Table, path: str, window: Any
) -> None:
    out = window_aggregate(
        spark.createDataFrame(stream),
        STRATEGY,
        window,
        key="key",
        event_time="event_time",
        channel="partition",
        arrival="arrival",
    )
    assert (out.timeline.buckets is None) is (path != "driver")
    want = engine(stream, window)
    columns = ["key", "window_start", "window_end", "count", "watermark", "timing"]
    assert counted(out.results, [*columns, "fired_at"]) == counted(
        want.results, [*columns, "trigger_time"]
    )
    late = [*stream.column_names, "watermark"]
    assert counted(out.late, late) == counted(want.late, late)
    assert want.late.num_rows > 0
    out.unpersist()


@pytest.mark.parametrize("where", ["executors", "records"])
def test_assign_in_small_chunks_equals_one_chunk(
    spark: Any, stream: pa.Table, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The builder task (and on the records path each channel's builder in the
    per-channel pass, its records cut across batches) fed 7 rows at a time (Arrow
    batches of 7) gives the rows of the driver path, which feeds it the whole table at
    once."""

    def run() -> pa.Table:
        return (
            assign_watermarks(
                spark.createDataFrame(stream),
                STRATEGY,
                event_time="event_time",
                channel="partition",
                arrival="arrival",
            )
            .toArrow()
            .sort_by("id")
        )

    whole = run()
    take_path(where, monkeypatch)
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key)
    spark.conf.set(key, "7")
    try:
        chunked = run()
    finally:
        spark.conf.set(key, before)
    assert chunked.equals(whole)


def dense_stream(channels: int = 200, seconds: int = 300, seed: int = 5) -> pa.Table:
    """Every channel sends a record every ~200 ms for ``seconds``; a tenth of them stop
    half way (and go idle)."""
    rng = np.random.default_rng(seed)
    n = seconds * 5
    part = np.repeat(np.arange(channels), n)
    arrival = np.tile(np.arange(n) * 200, channels) + rng.integers(0, 200, channels * n)
    event = arrival - rng.integers(0, 500, channels * n)
    keep = ~((part % 10 == 3) & (arrival > seconds * 500))
    return pa.table(
        {
            "partition": pa.array(part[keep], pa.int64()),
            "event_time": pa.array(event[keep], pa.int64()),
            "arrival": pa.array(arrival[keep], pa.int64()),
            "key": pa.array(rng.integers(0, 40, int(keep.sum())), pa.int64()),
        }
    )


def tumbling(frame: Any, emissions: bool) -> Any:
    """1 s tumbling counts per key of a stream of :func:`dense_stream`'s columns."""
    return window_aggregate(
        frame,
        STRATEGY,
        TumblingEventTimeWindows.of(timedelta(seconds=1)),
        key="key",
        event_time="event_time",
        channel="partition",
        arrival="arrival",
        emissions=emissions,
    )


@pytest.mark.parametrize("where", ["executors", "records"])
def test_the_driver_collects_nothing_that_grows_with_channels_x_buckets(
    spark: Any, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """On the executor and records paths, every table the driver collects holds at most
    one row per channel, per grid bucket, the records path's fixed sample or (the
    report's compacted emissions) per channel and report bin plus idle marks: never the
    per-(channel, bucket) table of a stream with 200 channels over 1,500 buckets
    (~280,000 rows), which the records path takes by itself (one record per bucket:
    the aggregation would not reduce them)."""
    from floodmark.report.partition_views import DEFAULT_BINS
    from floodmark.spark.packed import unpack_local

    limit = 50
    collected: list[int] = []
    emitted: list[int] = []
    stream = dense_stream()
    frame = spark.createDataFrame(stream)
    cls = type(frame)  # Spark's classic DataFrame, where toArrow is defined
    to_arrow = cls.toArrow

    def counting(self: Any) -> pa.Table:
        table = to_arrow(self)
        if "__fm_payload" in table.column_names:  # packed: count the rows inside
            for kind, batch in unpack_local(table):
                (emitted if kind == "emissions" else collected).append(batch.num_rows)
        else:
            collected.append(table.num_rows)
        return table

    def aggregate(emissions: bool) -> Any:
        if where == "executors":
            take_path("executors", monkeypatch)
            monkeypatch.setattr(timeline, "MAX_DRIVER_BUCKET_ROWS", limit)
        else:  # by itself: no table ever came to the driver
            monkeypatch.setattr(timeline, "bucket_aggregate", refused)
        monkeypatch.setattr(cls, "toArrow", counting)
        out = tumbling(frame, emissions)
        monkeypatch.undo()
        return out

    out = aggregate(emissions=True)
    tl = out.timeline
    assert tl.first_bucket is not None and tl.last_bucket is not None and tl.emissions is not None
    grid, channels = tl.last_bucket - tl.first_bucket + 1, len(tl.channels)
    pairs = frame.selectExpr("partition", "ceil(arrival / 200) AS bucket").distinct().count()
    assert pairs > 10 * max(grid, channels, limit, timeline.SAMPLE_RECORDS)  # must not come
    assert collected and emitted
    assert max(collected) <= max(grid, channels, limit + 1, timeline.SAMPLE_RECORDS), collected
    marks = tl.emissions.filter(pc.field("kind") != "watermark").num_rows
    assert sum(emitted) <= channels * DEFAULT_BINS + marks < pairs / 4
    out.unpersist()
    # Not asked for (the default), the channels' emissions do not come at all: they
    # grow with the channels and their idle transitions.
    emitted.clear()
    out = aggregate(emissions=False)
    assert out.timeline.emissions is None and not emitted
    out.unpersist()


def test_assign_on_the_records_path_collects_only_the_sample_and_the_timeline(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``assign_watermarks`` where the aggregation would not reduce: no per-(channel,
    bucket) table is made, the driver collects the sample, the channel list and the
    timeline (at most one row per grid bucket), and the records get their channel
    watermarks on the executors, as from the table."""
    stream = dense_stream()
    frame = spark.createDataFrame(stream)
    cls = type(frame)
    to_arrow = cls.toArrow
    collected: list[int] = []

    def counting(self: Any) -> pa.Table:
        table = to_arrow(self)
        collected.append(table.num_rows)
        return table

    def run() -> Any:
        return assign_watermarks(
            frame, STRATEGY, event_time="event_time", channel="partition", arrival="arrival"
        )

    with monkeypatch.context() as m:  # from the per-(channel, bucket) table
        take_path("driver", m)
        want = in_order(run().toArrow())
    monkeypatch.setattr(timeline, "bucket_aggregate", refused)
    monkeypatch.setattr(cls, "toArrow", counting)
    out = run()
    monkeypatch.undo()
    grid = stream["arrival"].to_numpy().max() // 200 + 1
    assert collected and max(collected) <= max(grid, timeline.SAMPLE_RECORDS), collected
    assert in_order(out.toArrow()).equals(want)


def in_order(t: pa.Table) -> pa.Table:
    return t.sort_by([(c, "ascending") for c in t.column_names])


def refused(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the records path aggregates nothing")


def test_the_report_views_are_the_same_from_compacted_emissions(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the executor and records paths the channels' emissions come back compacted
    (the last watermark of each bin, every idle/active mark); the report's
    per-partition views of them equal those of every emission, which the driver path
    keeps."""
    from floodmark.report.partition_views import partition_views

    stream = dense_stream()

    def views(where: str) -> tuple[Any, int]:
        with monkeypatch.context() as m:
            take_path(where, m)
            out = tumbling(spark.createDataFrame(stream), emissions=True)
        tl = out.timeline
        assert tl.emissions is not None and (tl.buckets is None) is (where != "driver")
        got = partition_views(tl.table, tl.emissions, span=tl.span)
        out.unpersist()
        return got, tl.emissions.num_rows

    whole, all_rows = views("driver")
    # From the driver path too, the emissions are kept only when asked for.
    with monkeypatch.context() as m:
        take_path("driver", m)
        unasked = tumbling(spark.createDataFrame(stream), emissions=False)
    assert unasked.timeline.buckets is not None and unasked.timeline.emissions is None
    unasked.unpersist()
    assert whole.idle_spans.num_rows >= 20  # the channels that stop half way
    for where in ("executors", "records"):
        compacted, kept_rows = views(where)
        assert kept_rows < all_rows / 2
        for name in ("lag", "holding", "idle_spans"):
            assert getattr(compacted, name).equals(getattr(whole, name)), (where, name)


def test_the_records_path_is_taken_where_the_aggregation_would_not_reduce(spark: Any) -> None:
    """:func:`timeline.reduces` judges from the input's first records: one record per
    ``(channel, bucket)`` (:func:`dense_stream`) takes the records path, ten per
    bucket, or an input smaller than the sample, the aggregation."""

    def reduces(table: pa.Table) -> bool:
        return judged_to_reduce(spark.createDataFrame(table), STRATEGY)

    sparse = dense_stream(channels=50, seconds=100)
    assert sparse.num_rows > timeline.SAMPLE_RECORDS
    assert not reduces(sparse)
    # Ten records per (channel, bucket): the same arrivals, each ten times.
    crowded = pa.concat_tables([sparse] * 10).sort_by("arrival")
    assert reduces(crowded)
    assert reduces(sparse.slice(0, timeline.SAMPLE_RECORDS - 1))


def test_the_records_path_in_small_chunks_equals_the_driver_path(
    spark: Any, stream: pa.Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The records path's builder task fed 7 records at a time gives the outputs and
    the timeline of the driver path, which feeds the builder the whole bucket table at
    once."""

    def run(where: str) -> tuple[Counter[tuple[Any, ...]], Counter[tuple[Any, ...]], pa.Table]:
        with monkeypatch.context() as m:
            take_path(where, m)
            out = tumbling(spark.createDataFrame(stream), emissions=False)
        got = (
            counted(out.results, ["key", "window_start", "count", "fired_at", "timing"]),
            counted(out.late, ["id", "watermark"]),
            out.timeline.table,
        )
        out.unpersist()
        return got

    whole = run("driver")
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key)
    spark.conf.set(key, "7")
    try:
        chunked = run("records")
    finally:
        spark.conf.set(key, before)
    assert chunked[0] == whole[0] and chunked[1] == whole[1]
    assert chunked[2].equals(whole[2])


def test_one_partition_shuffles_only_what_already_shuffles(spark: Any) -> None:
    """The records path reads its input in one task: a scan is coalesced into it (no
    shuffle), an input that shuffles is repartitioned (its stages keep their tasks)."""

    def physical(frame: Any) -> str:
        return str(frame._jdf.queryExecution().executedPlan().toString())

    scan = spark.range(1000).selectExpr("id % 7 AS channel", "id AS arrival")
    assert "Exchange" not in physical(timeline.one_partition(scan))
    assert "Coalesce" in physical(timeline.one_partition(scan))
    grouped = scan.groupBy("channel").count()
    assert "SinglePartition" in physical(timeline.one_partition(grouped))


def long_sparse_stream(days: int = 60, rows: int = 3_000, seed: int = 5) -> pa.Table:
    """Four channels over ``days`` days (~26M buckets of 200 ms at 60), a few thousand
    records: the records path's input (about one (channel, bucket) per record)."""
    rng = np.random.default_rng(seed)
    arrival = np.sort(rng.integers(0, days * 86_400_000, rows))
    behind = np.where(np.arange(rows) % 10 == 9, 86_400_000, 0)  # every tenth a day late
    return pa.table(
        {
            "id": pa.array(np.arange(rows, dtype=np.int64)),
            "partition": pa.array(rng.integers(0, 4, rows), pa.int64()),
            "event_time": pa.array(arrival - behind - rng.integers(0, 2_000, rows), pa.int64()),
            "arrival": pa.array(arrival, pa.int64()),
            "key": pa.array(rng.integers(0, 3, rows), pa.int64()),
        }
    )


@pytest.mark.parametrize("lookup_by", ["constant arrays", "arrival on the executors"])
def test_a_long_sparse_span_reads_the_watermark_by_arrival(
    spark: Any, lookup_by: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over a span too long for a constant array per bucket (2^19: ~29 h at 200 ms) the
    records read the combined watermark by arrival from the timeline's advances, on the
    executors: equal to the engine, and nothing per bucket of the span is built or
    shipped (a table of every bucket was broadcast: 39 s for 3,000 records over 30
    days, out of memory over 150). Forced on a short input too, where the constant
    arrays give the same rows."""
    from floodmark.spark import lookup
    from floodmark.spark.analyze import analyze_bounds

    take_path("records", monkeypatch)
    if lookup_by == "constant arrays":
        stream = sparse_stream(channels=50)
    else:
        stream = long_sparse_stream()

        def per_bucket(*args: Any) -> Any:
            raise AssertionError("no value per bucket over this span")

        monkeypatch.setattr(lookup, "in_force_by_bucket", per_bucket)
    frame = spark.createDataFrame(stream)
    cols = {"event_time": "event_time", "channel": "partition", "arrival": "arrival"}
    got = assign_watermarks(frame, STRATEGY, **cols).toArrow().sort_by("id")
    want = engine(stream).records.sort_by("id")
    for name in ("channel_watermark", "watermark", "is_late"):
        assert got[name].to_pylist() == want[name].to_pylist(), name
    assert 0 < sum(want["is_late"].to_pylist()) < stream.num_rows
    bounds = [timedelta(0), timedelta(milliseconds=300), timedelta(seconds=1)]

    def analyzed() -> pa.Table:
        return analyze_bounds(
            frame,
            bounds=bounds,
            idle_timeouts=[None, timedelta(seconds=2)],
            window=TumblingEventTimeWindows.of(timedelta(seconds=10)),
            key="key",
            **cols,
        )

    table = analyzed()
    for row in table.to_pylist():
        strategy = WatermarkStrategy.for_bounded_out_of_orderness(row["bound"])
        if row["idle_timeout"] is not None:
            strategy = strategy.with_idleness(row["idle_timeout"])
        marked = replay(stream, strategy, **cols).records
        assert row["late"] == sum(marked["is_late"].to_pylist()), row
    if lookup_by == "constant arrays":  # the executors' lookup, forced, agrees
        monkeypatch.setattr(lookup, "MAX_CONSTANT_SLOTS", 0)
        forced = assign_watermarks(frame, STRATEGY, **cols).toArrow().sort_by("id")
        assert forced.equals(got)
        again = analyzed()
        for name in table.column_names:  # (NaN delays where no window fired)
            np.testing.assert_array_equal(again[name].to_numpy(), table[name].to_numpy())
