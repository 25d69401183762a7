"""Synthetic run tables shaped like a real run's (for report tests)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from floodmark.report import ReportInputs
from floodmark.time import I64_MIN

EPOCH = 1_767_225_600_000
MIN = I64_MIN


def emissions(channels: int = 4, steps: int = 300) -> pa.Table:
    """Every channel emits every 200 ms; channel 1 lags 30 s, channel 2 goes idle."""
    rows: dict[str, list[object]] = {"channel": [], "time": [], "kind": [], "watermark": []}
    for c in range(channels):
        for i in range(steps):
            t = EPOCH + i * 200
            if c == 2 and i == 100:
                rows["channel"].append(c)
                rows["time"].append(t)
                rows["kind"].append("idle")
                rows["watermark"].append(None)
            if c == 2 and i == 200:
                rows["channel"].append(c)
                rows["time"].append(t)
                rows["kind"].append("active")
                rows["watermark"].append(None)
            if c == 2 and 100 <= i < 200:
                continue
            wm = MIN if i < 3 else t - 5_000 - (30_000 if c == 1 else 0) - c * 10
            rows["channel"].append(c)
            rows["time"].append(t)
            rows["kind"].append("watermark")
            rows["watermark"].append(wm)
    return pa.table(
        {
            "channel": pa.array(rows["channel"], pa.int64()),
            "time": pa.array(rows["time"], pa.int64()),
            "kind": pa.array(rows["kind"], pa.string()),
            "watermark": pa.array(rows["watermark"], pa.int64()),
        }
    )


def timeline(steps: int = 300) -> pa.Table:
    times = [EPOCH + i * 200 for i in range(steps)]
    wms = [MIN if i < 3 else t - 35_000 for i, t in enumerate(times)]
    holder = [1 if i < 250 else 3 for i in range(steps)]
    return pa.table(
        {
            "time": pa.array(times, pa.int64()),
            "watermark": pa.array(wms, pa.int64()),
            "status": pa.array(["active"] * steps),
            "min_channel": pa.array(holder, pa.int64()),
        }
    )


def partitions(channels: int = 4) -> pa.Table:
    return pa.table(
        {
            "partition": pa.array(range(channels), pa.int64()),
            "records": pa.array([1000 + 10 * c for c in range(channels)], pa.int64()),
            "late": pa.array([3, 40, 7, 0][:channels], pa.int64()),
            "dropped": pa.array([0, 1, 0, 0][:channels], pa.int64()),
            "spark_dropped": pa.array([12, 500, 30, 2][:channels], pa.int64()),
        }
    )


def firings(n: int = 500, seed: int = 1) -> pa.Table:
    rng = np.random.default_rng(seed)
    ends = EPOCH + 10_000 * rng.integers(1, 60, n)
    fired = ends + rng.gamma(3.0, 2_000.0, n).astype(np.int64)
    fired_list: list[int | None] = [int(v) for v in fired]
    fired_list[0] = None
    timing = ["on_time"] * n
    timing[1] = "late"
    return pa.table(
        {
            "window_end": pa.array(ends, pa.int64()),
            "fired_at": pa.array(fired_list, pa.int64()),
            "timing": pa.array(timing),
        }
    )


def analysis() -> pa.Table:
    from datetime import timedelta

    bounds = [timedelta(seconds=s) for s in (0, 1, 2, 5, 10, 30)]
    rows = []
    for idle in (timedelta(seconds=30), timedelta(minutes=1)):
        for b in bounds:
            s = b.total_seconds()
            rows.append((idle, b, 0.2 / (1 + s), 0.5 + s, 2 + s * 1.5, 600))
    cols = list(zip(*rows, strict=False))
    return pa.table(
        {
            "idle_timeout": pa.array(cols[0], pa.duration("us")),
            "bound": pa.array(cols[1], pa.duration("us")),
            "late_fraction": pa.array(cols[2], pa.float64()),
            "delay_median_s": pa.array(cols[3], pa.float64()),
            "delay_p99_s": pa.array(cols[4], pa.float64()),
            "windows": pa.array(cols[5], pa.int64()),
        }
    )


def inputs() -> ReportInputs:
    return ReportInputs(
        title="synthetic run",
        settings={"bound": "5s", "idle": "1m", "window": "tumbling:10s"},
        timeline=timeline(),
        emissions=emissions(),
        partitions=partitions(),
        firings=firings(),
        analysis=analysis(),
    )
