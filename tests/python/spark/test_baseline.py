"""Spark's own global watermark (the comparison baseline), on a hand-checked example."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pyarrow as pa

from floodmark.spark.baseline import spark_global_watermark_late


def test_global_watermark_drops_late_input_two_batches_behind(spark: Any) -> None:
    # Times in ms. Trigger 10 s, delay 2 s, tumbling 10 s windows. Late input in batch i
    # is filtered with max(event time over batches <= i - 2) - delay (Spark >= 3.4).
    # batch 0 [0, 10 s):  p0 5 s, 12 s                   -> max 12 s
    # batch 1 [10, 20 s): no late filter yet
    #   p1 9.5 s kept (window [0,10) although 9.5 < 12 - 2); p0 30 s -> max 30 s
    # batch 2 [20, 30 s): filter at 12 - 2 = 10 s
    #   p1 9.9 s: window ends 10 s <= 10 s -> dropped;  p0 19 s: ends 20 s -> kept
    # batch 3 [30, 40 s): filter at 30 - 2 = 28 s
    #   p0 19.5 s: ends 20 s <= 28 s -> dropped;        p1 25 s: ends 30 s -> kept
    rows = [
        (0, 5_000, 1_000),
        (0, 12_000, 2_000),
        (1, 9_500, 10_000),
        (0, 30_000, 15_000),
        (1, 9_900, 20_000),
        (0, 19_000, 21_000),
        (0, 19_500, 30_000),
        (1, 25_000, 31_000),
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
    assert got == {0: (5, 1), 1: (3, 1)}
