"""Spark's own global watermark (the comparison baseline), on a hand-checked example."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pyarrow as pa

from floodmark.spark.baseline import spark_global_watermark_late


def test_global_watermark_drops_by_previous_batches(spark: Any) -> None:
    # Times in ms. Trigger 10 s, delay 2 s, tumbling 10 s windows.
    # batch 0 (arrival 0-9.999 s): ts 5 s, 12 s (p0)     -> max 12 s; no watermark yet
    # batch 1 (arrival 10-19.999 s): wm = 12 - 2 = 10 s
    #   p1 ts 9.5 s: window [0,10) ends 10 s <= 10 s -> dropped
    #   p1 ts 10 s:  window [10,20) ends 20 s        -> kept
    #   p0 ts 30 s: kept (max becomes 30 s)
    # batch 2 (arrival 20-29.999 s): wm = 30 - 2 = 28 s
    #   p0 ts 19 s: window ends 20 s <= 28 s -> dropped
    #   p1 ts 25 s: window ends 30 s         -> kept
    # batch 0 again in arrival order: the record with ts 1 s in batch 0 is never dropped.
    rows = [
        (0, 5_000, 1_000),
        (0, 12_000, 2_000),
        (1, 1_000, 9_999),
        (1, 9_500, 10_000),
        (1, 10_000, 11_000),
        (0, 30_000, 15_000),
        (0, 19_000, 20_000),
        (1, 25_000, 29_999),
    ]
    table = pa.table(
        {
            "partition": [r[0] for r in rows],
            "event_time": pa.array([r[1] for r in rows], pa.int64()),
            "arrival": pa.array([r[2] for r in rows], pa.int64()),
        }
    )
    df = spark.createDataFrame(table.to_pandas())
    out = spark_global_watermark_late(
        df,
        event_time="event_time",
        arrival="arrival",
        channel="partition",
        delay=timedelta(seconds=2),
        trigger_interval=timedelta(seconds=10),
        window_size=timedelta(seconds=10),
    ).toArrow()
    got = {
        c: (r, d)
        for c, r, d in zip(
            out["channel"].to_pylist(),
            out["records"].to_pylist(),
            out["spark_dropped"].to_pylist(),
            strict=True,
        )
    }
    assert got == {0: (4, 1), 1: (4, 1)}
