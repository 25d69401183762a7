"""Spark's own global watermark (the comparison baseline), on a hand-checked example."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from stream_helpers import start_spark_windowed_count

from floodmark.spark.baseline import spark_global_watermark_late

#: (partition, event time ms, arrival ms). Trigger 10 s, delay 2 s, tumbling 10 s
#: windows. Late input in batch i is filtered with max(event time over batches <= i - 2)
#: - delay (Spark >= 3.4).
#: batch 0 [0, 10 s):  p0 5 s, 12 s                   -> max 12 s
#: batch 1 [10, 20 s): no late filter yet
#:   p1 9.5 s kept (window [0,10) although 9.5 < 12 - 2); p0 30 s -> max 30 s
#: batch 2 [20, 30 s): filter at 12 - 2 = 10 s
#:   p1 9.9 s: window ends 10 s <= 10 s -> dropped;  p0 19 s: ends 20 s -> kept
#: batch 3 [30, 40 s): filter at 30 - 2 = 28 s
#:   p0 19.5 s: ends 20 s <= 28 s -> dropped;        p1 25 s: ends 30 s -> kept
EXAMPLE = [
    (0, 5_000, 1_000),
    (0, 12_000, 2_000),
    (1, 9_500, 10_000),
    (0, 30_000, 15_000),
    (1, 9_900, 20_000),
    (0, 19_000, 21_000),
    (0, 19_500, 30_000),
    (1, 25_000, 31_000),
]


def example(spark: Any, arrival_per_tick: int = 1) -> Any:
    """:data:`EXAMPLE` as a DataFrame, arrivals in ticks of ``arrival_per_tick`` ms."""
    table = pa.table(
        {
            "partition": [r[0] for r in EXAMPLE],
            "event_time": pa.array([r[1] for r in EXAMPLE], pa.int64()),
            "arrival": pa.array([r[2] // arrival_per_tick for r in EXAMPLE], pa.int64()),
        }
    )
    return spark.createDataFrame(table.to_pandas())


def drops(out: pa.Table) -> dict[int, tuple[int, int]]:
    """Per channel, (records, Spark's drops)."""
    return {
        c: (r, d)
        for c, r, d in zip(
            out["channel"].to_pylist(),
            out["records"].to_pylist(),
            out["spark_dropped"].to_pylist(),
            strict=True,
        )
    }


def test_global_watermark_drops_late_input_two_batches_behind(spark: Any) -> None:
    out = spark_global_watermark_late(
        example(spark),
        event_time="event_time",
        arrival="arrival",
        channel="partition",
        delay=timedelta(seconds=2),
        trigger_interval=timedelta(seconds=10),
        window_size=timedelta(seconds=10),
    ).toArrow()
    assert drops(out) == {0: (5, 1), 1: (3, 1)}


def test_integer_durations_count_ticks_of_their_columns_unit(spark: Any) -> None:
    """As in every Spark function of floodmark, an integer duration counts ticks of its
    column's unit: the delay and the window size the event time's (ms), the trigger the
    arrival's (s here). They were read as microseconds: a 10 us trigger, ms delays."""
    out = spark_global_watermark_late(
        example(spark, arrival_per_tick=1_000),
        event_time="event_time",
        arrival="arrival",
        channel="partition",
        arrival_unit="s",
        delay=2_000,
        trigger_interval=10,
        window_size=10_000,
    ).toArrow()
    assert drops(out) == {0: (5, 1), 1: (3, 1)}


def test_bad_arguments_are_named(spark: Any) -> None:
    """The baseline checks its arguments as the other functions do: a flag that is not
    a bool (``"false"`` was true), a missing column name, an event time that Spark's
    timestamps cannot hold (an ns column read as ms overflowed in the JVM)."""
    from pyspark.errors import SparkRuntimeException

    from floodmark.exceptions import InvalidParameterError

    df = example(spark)
    cols: dict[str, Any] = {
        "event_time": "event_time",
        "arrival": "arrival",
        "channel": "partition",
    }
    with pytest.raises(InvalidParameterError, match="`no_data_batches`"):
        spark_global_watermark_late(df, **cols, delay=0, no_data_batches="false")  # type: ignore[arg-type]
    for parameter in cols:
        with pytest.raises(InvalidParameterError, match=f"`{parameter}`"):
            spark_global_watermark_late(df, **{**cols, parameter: None}, delay=0)
    with pytest.raises(InvalidParameterError, match="`df`"):
        spark_global_watermark_late(df.toPandas(), **cols, delay=0)
    ns = df.selectExpr("partition", "event_time * 1000000000000 AS event_time", "arrival")
    with pytest.raises(SparkRuntimeException, match=r"`event_time`: \d{16} ms is beyond"):
        spark_global_watermark_late(ns.where("partition = 1"), **cols, delay=0).collect()


#: One row: (partition, event time ms, arrival ms, key). Key -1 marks the flush record.
Row = tuple[int, int, int, int]


def real_spark_drops(
    spark: Any, folder: Path, ticks: list[list[Row]], delay: str
) -> tuple[dict[int, int], list[int]]:
    """Per partition, the records a real Structured Streaming query drops: ``withWatermark``
    then 10 s tumbling windows, one micro-batch per tick with records (a file each), as a
    processing-time trigger that always finds new records runs them: back to back; at an
    empty tick, the no-data batch Spark runs by default. Grouping by the record too makes
    each dropped row one record. Also returns the rows each batch read, in batch order."""

    src, staged = folder / "src", folder / "staged"
    src.mkdir()
    staged.mkdir()
    names = ["partition", "event_time", "arrival", "key"]

    def write(i: int, rows: list[Row]) -> Path:
        table = pa.table(
            {n: pa.array([r[j] for r in rows], pa.int64()) for j, n in enumerate(names)}
        )
        path = staged / f"tick-{i:04d}.parquet"
        pq.write_table(table, path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
        return path

    previous = spark.conf.get("spark.sql.streaming.noDataMicroBatches.enabled", "true")
    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "true")
    try:
        schema = ", ".join(f"{n} long" for n in names)
        by = ["key", "partition", "event_time"]
        query, name = start_spark_windowed_count(spark, src, schema, delay, by, folder / "ckpt")

        def done() -> dict[int, int]:  # rows read per batch id (idle reports repeat one)
            return {p["batchId"]: p["numInputRows"] for p in query.recentProgress}

        run: list[Path] = []
        for i, rows in enumerate([*ticks, []]):
            if rows:
                run.append(write(i, rows))
                continue
            for path in run:  # a run of ticks with records: their batches back to back
                path.rename(src / path.name)
            run = []
            query.processAllAvailable()
            if i < len(ticks):  # an empty tick: wait for Spark's no-data batch
                deadline = time.monotonic() + 60
                while len(done()) <= i:
                    assert time.monotonic() < deadline, "no no-data batch ran"
                    time.sleep(0.1)
        read = [n for _, n in sorted(done().items())]
        query.stop()
    finally:
        spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", previous)
    kept = spark.sql(f"select partition, count(*) as n from {name} where key >= 0 group by 1")
    kept_per = {r["partition"]: r["n"] for r in kept.collect()}
    rows = [r for tick in ticks for r in tick if r[3] >= 0]
    return {
        p: sum(r[0] == p for r in rows) - kept_per.get(p, 0) for p in {r[0] for r in rows}
    }, read


def model_drops(spark: Any, ticks: list[list[Row]], delay: timedelta) -> dict[int, int]:
    rows = [r for tick in ticks for r in tick if r[3] >= 0]
    table = pa.table(
        {
            "partition": pa.array([r[0] for r in rows], pa.int64()),
            "event_time": pa.array([r[1] for r in rows], pa.int64()),
            "arrival": pa.array([r[2] for r in rows], pa.int64()),
        }
    )
    out = spark_global_watermark_late(
        spark.createDataFrame(table),
        event_time="event_time",
        arrival="arrival",
        channel="partition",
        delay=delay,
    ).toArrow()
    return dict(zip(out["channel"].to_pylist(), out["spark_dropped"].to_pylist(), strict=True))


#: The record that moves Spark's watermark past every window (not counted).
FLUSH: list[Row] = [(0, 10_000_000, 10_000_000, -1)]


@pytest.mark.parametrize(
    ("ticks", "delay", "want"),
    [
        pytest.param(
            # An empty tick: Spark's no-data batch moves the late filter's watermark to
            # 25 - 2 s, and the next batch drops p1's 15 s (window ends 20 s <= 23 s). The
            # model counted batches with records only, and kept it.
            [[(0, 5_000, 1_000, 1)], [(0, 25_000, 11_000, 1)], [], [(1, 15_000, 31_000, 1)]],
            "2 seconds",
            {0: 0, 1: 1},
            id="empty-trigger",
        ),
        pytest.param(
            # Spark's watermark starts at 0 (1970) and never goes below: windows ending
            # before it are dropped from the first batch on. The model kept all three.
            [[(0, -15_000, 1_000, 1)], [(0, -14_000, 11_000, 1)], [(1, -16_000, 21_000, 1)]],
            "2 seconds",
            {0: 2, 1: 1},
            id="before-1970",
        ),
        pytest.param(
            # Whole milliseconds: 10.001 s - 1 ms (the 1.5 ms delay truncated) = 10 s,
            # which ends p1's window [0, 10 s). The model took 10.001 - 1.5 ms and kept it.
            [[(0, 10_001, 1_000, 1)], [(0, 10_002, 11_000, 1)], [(1, 9_000, 21_000, 1)]],
            "1500 microseconds",
            {0: 0, 1: 1},
            id="sub-millisecond-delay",
        ),
    ],
)
def test_model_equals_a_real_query(
    spark: Any, tmp_path: Path, ticks: list[list[Row]], delay: str, want: dict[int, int]
) -> None:
    real, read = real_spark_drops(spark, tmp_path, [*ticks, FLUSH], delay)
    assert real == want
    # one batch per tick, the empty one a no-data batch, none between the others
    assert read[: len(ticks)] == [len(t) for t in ticks], read
    amount, unit = delay.split()
    assert model_drops(spark, ticks, timedelta(**{unit: int(amount)})) == want
