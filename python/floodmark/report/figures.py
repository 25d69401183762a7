"""The numbers behind the charts and the summary, computed from the collected tables.

Times are int64 ticks. ``I64_MIN`` as a watermark means "no watermark yet" and is
skipped everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from floodmark.time import I64_MAX, I64_MIN, TICKS_PER_SECOND, format_duration

#: Most points drawn per line; longer series are thinned (the last point is kept).
MAX_POINTS = 4_000


def seconds_per_tick(unit: str) -> float:
    """Length of one tick of ``unit`` in seconds."""
    return 1.0 / TICKS_PER_SECOND[unit]


#: The dates a chart draws: matplotlib's end at years 1 and 9999, and an axis's margins
#: reach past its data, so a time outside these (a sentinel like 9999-12-31, a wrong
#: unit) is drawn at the nearer one. The CSV files keep every time as it is.
CHART_DATES = (np.datetime64("1000-01-01"), np.datetime64("9000-01-01"))


def to_datetime(ticks: np.ndarray, unit: str) -> np.ndarray:
    """Epoch ticks as ``datetime64`` values of the same unit (for readable axes),
    within :data:`CHART_DATES`."""
    per_second = TICKS_PER_SECOND[unit]
    low, high = (
        min(max(int(d.astype("datetime64[s]").astype(np.int64)) * per_second, I64_MIN + 1), I64_MAX)
        for d in CHART_DATES
    )
    clipped = np.clip(np.asarray(ticks, dtype=np.int64), low, high)
    return clipped.astype(f"datetime64[{unit}]")


def downsample(
    x: np.ndarray, y: np.ndarray, max_points: int = MAX_POINTS
) -> tuple[np.ndarray, np.ndarray]:
    """Keep at most ``max_points`` evenly spaced points, always the first and the last."""
    n = len(x)
    if n <= max_points:
        return x, y
    idx = np.unique(np.linspace(0, n - 1, max_points).astype(np.int64))
    return x[idx], y[idx]


def _ints(table: pa.Table, name: str) -> np.ndarray:
    return np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=np.int64)


def channel_series(emissions: pa.Table) -> dict[Any, tuple[np.ndarray, np.ndarray]]:
    """Each channel's watermark emissions ``(times, watermarks)``, "no watermark" skipped,
    channels in first-seen order."""
    wm = emissions.filter(pc.equal(emissions.column("kind"), "watermark"))
    channels = wm.column("channel").to_pylist()
    times, values = _ints(wm, "time"), _ints(wm, "watermark")
    out: dict[Any, tuple[np.ndarray, np.ndarray]] = {}
    order = list(dict.fromkeys(emissions.column("channel").to_pylist()))
    chan = np.asarray(channels, dtype=object)
    for c in order:
        mask = (chan == c) & (values != I64_MIN)
        if mask.any():
            out[c] = (times[mask], values[mask])
    return out


def min_channel_spans(timeline: pa.Table, end: int) -> list[tuple[Any, int, int]]:
    """``(channel, start, stop)`` spans during which ``channel`` held the combined
    minimum (the channel time waited for); consecutive rows are merged."""
    times = timeline.column("time").to_pylist()
    holders = timeline.column("min_channel").to_pylist()
    spans: list[tuple[Any, int, int]] = []
    for i, (t, c) in enumerate(zip(times, holders, strict=False)):
        stop = times[i + 1] if i + 1 < len(times) else max(t, end)
        if c is None or stop == t:  # held for no time
            continue
        if spans and spans[-1][0] == c and spans[-1][2] == t:
            spans[-1] = (c, spans[-1][1], stop)
        else:
            spans.append((c, t, stop))
    return spans


def firing_counts(firings: pa.Table) -> np.ndarray:
    """How many firings each row stands for: its ``firings`` column (rows grouped by
    window end, firing time and timing), else one each."""
    if "firings" in firings.column_names:
        return _ints(firings, "firings")
    return np.ones(firings.num_rows, dtype=np.int64)


def seconds_between(
    later: np.ndarray, later_unit: str, earlier: np.ndarray, earlier_unit: str
) -> np.ndarray:
    """``later - earlier`` in seconds, the two in different tick units (e.g. arrival
    and event time): subtracted exactly in the finer unit, then converted (epoch ticks
    lose digits as floats)."""
    fine = max(TICKS_PER_SECOND[later_unit], TICKS_PER_SECOND[earlier_unit])
    a = np.asarray(later, np.int64) * (fine // TICKS_PER_SECOND[later_unit])
    b = np.asarray(earlier, np.int64) * (fine // TICKS_PER_SECOND[earlier_unit])
    return np.asarray((a - b) / fine, dtype=np.float64)


def firing_delays(firings: pa.Table, event_unit: str, arrival_unit: str) -> np.ndarray:
    """Seconds from each on-time window's end (event time) to its firing (arrival
    time), one value per firing; firings at the end of input (``fired_at`` null) are
    left out."""
    on_time = firings.filter(
        pc.and_(pc.equal(firings.column("timing"), "on_time"), pc.is_valid(firings["fired_at"]))
    )
    delays = seconds_between(
        _ints(on_time, "fired_at"), arrival_unit, _ints(on_time, "window_end"), event_unit
    )
    return np.repeat(delays, firing_counts(on_time))


@dataclass(frozen=True)
class DelayStats:
    """Quantiles of the firing delay, in seconds (NaN when there are no firings)."""

    count: int
    median: float
    p90: float
    p99: float
    max: float

    def table(self) -> pa.Table:
        """The figures as a two-column table (``statistic``, ``seconds``)."""
        names = ["firings", "median", "p90", "p99", "max"]
        return pa.table(
            {
                "statistic": names,
                "seconds": [float(self.count), self.median, self.p90, self.p99, self.max],
            }
        )


def delay_stats(delays: np.ndarray) -> DelayStats:
    """Median, p90, p99 and max of ``delays``."""
    if len(delays) == 0:
        nan = float("nan")
        return DelayStats(0, nan, nan, nan, nan)
    q = np.quantile(delays, [0.5, 0.9, 0.99])
    return DelayStats(len(delays), float(q[0]), float(q[1]), float(q[2]), float(delays.max()))


def label(value: Any) -> str:
    """A table cell or legend label: durations spelled like ``5s``, floats shortened."""
    if value is None:
        return "-"
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, float):
        return "nan" if value != value else f"{value:.4g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def utc_strings(ticks: np.ndarray, unit: str) -> np.ndarray:
    """Epoch ticks as ISO dates (UTC, millisecond precision); ``I64_MIN`` reads "none
    yet" (no watermark) and ``I64_MAX`` "end of input"."""
    ticks = np.asarray(ticks, dtype=np.int64)
    low, high = ticks == I64_MIN, ticks == I64_MAX
    stamps = np.where(low | high, 0, ticks).astype(f"datetime64[{unit}]").astype("datetime64[ms]")
    out = np.datetime_as_string(stamps).astype(object)
    out[low] = "none yet"
    out[high] = "end of input"
    return out


def timeline_csv(timeline: pa.Table, event_unit: str, arrival_unit: str) -> pa.Table:
    """The whole timeline for its CSV file: ``time`` and ``watermark`` in ticks, each
    followed by its UTC date, then ``status`` and ``min_channel``."""
    times = _ints(timeline, "time")
    wms = _ints(timeline, "watermark")
    return pa.table(
        {
            "time": pa.array(times),
            "time_utc": pa.array(utc_strings(times, arrival_unit), pa.string()),
            "watermark": pa.array(wms),
            "watermark_utc": pa.array(utc_strings(wms, event_unit), pa.string()),
            "status": timeline.column("status"),
            "min_channel": timeline.column("min_channel"),
        }
    )


def column_sum(table: pa.Table | None, name: str) -> int | None:
    """Sum of an integer column, or None if the table or column is absent."""
    if table is None or name not in table.column_names:
        return None
    total = pc.sum(table.column(name)).as_py()
    return int(total or 0)


__all__ = [
    "MAX_POINTS",
    "DelayStats",
    "channel_series",
    "column_sum",
    "delay_stats",
    "downsample",
    "firing_delays",
    "label",
    "min_channel_spans",
    "seconds_between",
    "seconds_per_tick",
    "timeline_csv",
    "to_datetime",
    "utc_strings",
]
