"""The watermark stage at scale: many channels, a per-(channel, bucket) table too large for
the driver, the builder fed in many small chunks.

* 1,000 channels (a few records each, most of them quiet for long stretches) equal the
  engine run in one process (``floodmark.replay``), on the driver path and on the
  executor path (the table forced to stay on the executors);
* the executor path fed in chunks of a few rows gives the very rows of one chunk;
* the driver never collects a table that grows with channels x buckets: every table it
  collects on the executor path stays within the number of channels or the grid.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

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


@pytest.fixture(params=["driver", "executors"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "executors":
        monkeypatch.setattr(timeline, "MAX_DRIVER_BUCKET_ROWS", 50)
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
    assert (out.timeline.buckets is None) is (path == "executors")
    want = engine(stream, window)
    columns = ["key", "window_start", "window_end", "count", "watermark", "timing"]
    assert counted(out.results, [*columns, "fired_at"]) == counted(
        want.results, [*columns, "trigger_time"]
    )
    late = [*stream.column_names, "watermark"]
    assert counted(out.late, late) == counted(want.late, late)
    assert want.late.num_rows > 0
    out.unpersist()


def test_the_executor_path_in_small_chunks_equals_one_chunk(
    spark: Any, stream: pa.Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The builder task fed 7 rows at a time (Arrow batches of 7) gives the rows of
    the driver path, which feeds it the whole table at once."""

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
    monkeypatch.setattr(timeline, "MAX_DRIVER_BUCKET_ROWS", 10)
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key)
    spark.conf.set(key, "7")
    try:
        chunked = run()
    finally:
        spark.conf.set(key, before)
    assert chunked.equals(whole)


def test_the_driver_collects_nothing_that_grows_with_channels_x_buckets(
    spark: Any, stream: pa.Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the executor path, every table the driver collects holds at most one row per
    channel, per grid bucket, or the driver path's bounded probe: never the
    per-(channel, bucket) table of this sparse 1,000-channel stream (~6,000 rows)."""
    from floodmark.spark.packed import unpack_local

    limit = 50
    monkeypatch.setattr(timeline, "MAX_DRIVER_BUCKET_ROWS", limit)
    collected: list[int] = []
    frame = spark.createDataFrame(stream)
    cls = type(frame)  # Spark's classic DataFrame, where toArrow is defined
    to_arrow = cls.toArrow

    def counting(self: Any) -> pa.Table:
        table = to_arrow(self)
        if "__fm_payload" in table.column_names:  # packed: count the rows inside
            collected.append(sum(b.num_rows for _, b in unpack_local(table)))
        else:
            collected.append(table.num_rows)
        return table

    monkeypatch.setattr(cls, "toArrow", counting)
    out = window_aggregate(
        frame,
        STRATEGY,
        TumblingEventTimeWindows.of(timedelta(seconds=1)),
        key="key",
        event_time="event_time",
        channel="partition",
        arrival="arrival",
    )
    monkeypatch.undo()
    tl = out.timeline
    assert tl.first_bucket is not None and tl.last_bucket is not None
    grid = tl.last_bucket - tl.first_bucket + 1
    pairs = (
        spark.createDataFrame(stream)
        .selectExpr("partition", "ceil(arrival / 200) AS bucket")
        .distinct()
        .count()
    )
    assert pairs > 4 * max(grid, len(tl.channels))  # what the driver must not collect
    assert collected
    assert max(collected) <= max(grid, len(tl.channels), limit + 1), collected
    out.unpersist()
