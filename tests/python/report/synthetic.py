"""Synthetic run tables shaped like a real run's (for report tests)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

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
    # The valve's minimum: channel 1's watermark (it lags 30 s), as emissions() has it.
    wms = [MIN if i < 3 else t - 35_010 for i, t in enumerate(times)]
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


LAGGING, IDLE = 1, 2


def many_emissions(n: int, steps: int = 300, seed: int = 7) -> pa.Table:
    """``n`` channels emitting every 200 ms (built with numpy): channel 1 lags 30 s,
    channel 2 is idle from step 100 to 200, every tenth channel from 10 on goes quiet
    (idle) for a while, the rest jitter within 2 s. The first 3 steps emit no watermark
    yet (``MIN``)."""
    rng = np.random.default_rng(seed)
    steps_idx = np.arange(steps)
    t = EPOCH + 200 * steps_idx
    jitter = rng.integers(0, 2_000, n)
    jitter[LAGGING] = 30_000
    wm = t[None, :] - 5_000 - jitter[:, None] - np.arange(n)[:, None] % 10
    wm[:, :3] = MIN
    idle = np.zeros((n, steps), dtype=bool)
    for c in range(10, n, 10):
        a = int(rng.integers(steps // 15, max(steps // 15 + 1, steps * 4 // 5)))
        idle[c, a : a + int(rng.integers(max(1, steps // 15), max(2, steps // 5)))] = True
    if n > IDLE:
        idle[IDLE, 100:200] = True
    chan = np.broadcast_to(np.arange(n)[:, None], (n, steps))
    times = np.broadcast_to(t[None, :], (n, steps))
    keep = ~idle
    # Marks: idle where a run of idle steps starts, active where it ends (before the
    # watermark of that step).
    before = np.concatenate([np.zeros((n, 1), bool), idle[:, :-1]], axis=1)
    starts, ends = idle & ~before, ~idle & before
    parts = [
        (chan[keep], times[keep], np.full(keep.sum(), 1), wm[keep]),
        (chan[starts], times[starts], np.full(starts.sum(), 2), np.full(starts.sum(), 0)),
        (chan[ends], times[ends], np.full(ends.sum(), 0), np.full(ends.sum(), 0)),
    ]
    c, tt, k, w = (np.concatenate([p[i] for p in parts]) for i in range(4))
    order = np.lexsort((k, tt, c))
    kinds = np.array(["active", "watermark", "idle"])[k[order]]
    watermarks = pa.array(w[order], pa.int64(), mask=kinds != "watermark")
    return pa.table(
        {
            "channel": pa.array(c[order], pa.int64()),
            "time": pa.array(tt[order], pa.int64()),
            "kind": pa.array(kinds, pa.string()),
            "watermark": watermarks,
        }
    )


def many_timeline(n: int, steps: int = 300, em: pa.Table | None = None) -> pa.Table:
    """The combined timeline of :func:`many_emissions` (``em``, made when not given):
    the minimum over the channels not idle, the lowest channel on ties, one row per
    change of the watermark."""
    em = many_emissions(n, steps) if em is None else em
    wm_rows = em.filter(pc.equal(em["kind"], "watermark"))
    c = wm_rows["channel"].to_numpy()
    i = (wm_rows["time"].to_numpy() - EPOCH) // 200
    grid = np.full((n, steps), np.iinfo(np.int64).max)
    grid[c, i] = wm_rows["watermark"].to_numpy()
    minimum = grid.min(axis=0)
    holder = grid.argmin(axis=0)
    change = np.concatenate([[True], minimum[1:] != minimum[:-1]])
    return pa.table(
        {
            "time": pa.array(EPOCH + 200 * np.arange(steps)[change], pa.int64()),
            "watermark": pa.array(minimum[change], pa.int64()),
            "status": pa.array(["active"] * int(change.sum())),
            "min_channel": pa.array(holder[change], pa.int64()),
        }
    )


def many_partitions(n: int, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    records = rng.integers(5_000, 6_000, n)
    late = rng.poisson(0.3, n)
    dropped = np.zeros(n, np.int64)
    spark = rng.poisson(2.0, n)
    late[LAGGING], spark[LAGGING] = 40, 2_500
    if n > IDLE:
        late[IDLE], dropped[IDLE], spark[IDLE] = 700, 3, 800
    return pa.table(
        {
            "partition": pa.array(range(n), pa.int64()),
            "records": pa.array(records, pa.int64()),
            "late": pa.array(late, pa.int64()),
            "dropped": pa.array(dropped, pa.int64()),
            "spark_dropped": pa.array(spark, pa.int64()),
        }
    )


def many_inputs(n: int, steps: int = 300) -> ReportInputs:
    """A run over ``n`` partitions: the lagging, idle and quiet ones above."""
    em = many_emissions(n, steps)
    return ReportInputs(
        title=f"synthetic run, {n:,} partitions",
        settings={"bound": "5s", "idle": "30s", "window": "tumbling:10s"},
        timeline=many_timeline(n, steps, em),
        emissions=em,
        partitions=many_partitions(n),
        firings=firings(),
    )
