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
from floodmark.windows import ON_TIME

#: Most points drawn per line; longer series are thinned (the last point is kept).
MAX_POINTS = 4_000


def seconds_per_tick(unit: str) -> float:
    """Length of one tick of ``unit`` in seconds."""
    return 1.0 / TICKS_PER_SECOND[unit]


#: The dates a chart draws: matplotlib's end at years 1 and 9999, and an axis's margins
#: reach past its data, so a time outside these (a sentinel like 9999-12-31, a wrong
#: unit) is drawn at the nearer one. The CSV files keep every time as it is.
CHART_DATES = (np.datetime64("1000-01-01"), np.datetime64("9000-01-01"))


def _chart_limits(unit: str) -> tuple[int, int]:
    """:data:`CHART_DATES` in epoch ticks of ``unit``."""
    per_second = TICKS_PER_SECOND[unit]
    low, high = (
        min(max(int(d.astype("datetime64[s]").astype(np.int64)) * per_second, I64_MIN + 1), I64_MAX)
        for d in CHART_DATES
    )
    return low, high


def to_datetime(ticks: np.ndarray, unit: str) -> np.ndarray:
    """Epoch ticks as ``datetime64`` values of the same unit (for readable axes),
    within :data:`CHART_DATES`."""
    low, high = _chart_limits(unit)
    clipped = np.clip(np.asarray(ticks, dtype=np.int64), low, high)
    return clipped.astype(f"datetime64[{unit}]")


def beyond_chart(ticks: np.ndarray, unit: str) -> bool:
    """Whether any of ``ticks`` is drawn at an end of :data:`CHART_DATES` rather than
    where it is (the chart then says so)."""
    low, high = _chart_limits(unit)
    values = np.asarray(ticks, dtype=np.int64)
    return bool(values.size) and bool(((values < low) | (values > high)).any())


#: What a chart says when :func:`beyond_chart`.
BEYOND_NOTE = (
    f"times before {CHART_DATES[0]} or after {CHART_DATES[1]} are drawn there "
    "(the CSV files have them as they are)"
)


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
    and event time): whole seconds and fractions subtracted apart (epoch ticks lose
    digits as floats, and scaled to the finer unit they can leave the ``int64``
    range)."""
    fine = max(TICKS_PER_SECOND[later_unit], TICKS_PER_SECOND[earlier_unit])
    parts = []
    for ticks, unit in ((later, later_unit), (earlier, earlier_unit)):
        per = TICKS_PER_SECOND[unit]  # whole seconds, and the rest in ticks of `fine`
        whole, rest = np.divmod(np.asarray(ticks, np.int64), per)
        parts.append((whole.astype(np.float64), rest * (fine // per)))
    (a, a_rest), (b, b_rest) = parts
    borrow, rest = np.divmod(a_rest - b_rest, fine)  # one form per value: equal delays equal
    return np.asarray((a - b + borrow) + rest / fine, dtype=np.float64)


def firing_delays(firings: pa.Table, event_unit: str, arrival_unit: str) -> np.ndarray:
    """Seconds from each on-time window's end (event time) to its firing (arrival
    time), one value per firing; firings at the end of input (``fired_at`` null) are
    left out."""
    on_time = firings.filter(
        pc.and_(pc.equal(firings.column("timing"), ON_TIME), pc.is_valid(firings["fired_at"]))
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
        names = ["on-time firings (end of input left out)", "median", "p90", "p99", "max"]
        return pa.table(
            {
                "statistic": names,
                "seconds": [float(self.count), self.median, self.p90, self.p99, self.max],
            }
        )


@dataclass(frozen=True)
class Bars:
    """One bar per distinct value: where, how many, how wide."""

    values: np.ndarray
    counts: np.ndarray
    width: float


def delay_bars(delays: np.ndarray, most: int) -> Bars | None:
    """The firing delays as one bar per distinct delay, if there are at most ``most``
    (they sit on the emission grid: a histogram's edges fell on them and split equal
    delays between two bins); None for more. Bars are 0.8 of the closest two values'
    gap wide, and at least 0.8 of the spread over ``most`` (else too thin to see)."""
    values, counts = np.unique(delays, return_counts=True)
    if len(values) > most:
        return None
    spread = float(values[-1] - values[0]) if len(values) else 0.0
    gap = max(float(np.diff(values).min()), spread / most) if spread else 1.0
    return Bars(values, counts, 0.8 * gap)


def delay_edges(delays: np.ndarray, most: int) -> np.ndarray:
    """Edges of at most ``most`` histogram bins over ``delays`` (non-empty) that never
    fall on a delay but the outer two: each inner edge is the midpoint between two
    neighbouring distinct delays nearest an even split, so equal delays (on the
    emission grid) share one bin, as :func:`delay_bars` keeps them for fewer."""
    values = np.unique(delays)
    if len(values) < 2:
        return np.array([values[0], values[0] + 1.0]) if len(values) else np.array([0.0, 1.0])
    mids = values[:-1] + np.diff(values) / 2
    between = mids[(mids > values[:-1]) & (mids < values[1:])]  # floats near int64 ends
    targets = np.linspace(values[0], values[-1], most + 1)[1:-1]
    at = np.clip(np.searchsorted(between, targets), 0, max(len(between) - 1, 0))
    if len(between) > 1:  # the nearer of the two midpoints around each target
        left = np.maximum(at - 1, 0)
        at = np.where(targets - between[left] < between[at] - targets, left, at)
    inner = np.unique(between[at]) if len(between) else between
    return np.concatenate([[values[0]], inner, [values[-1]]])


def delay_stats(delays: np.ndarray) -> DelayStats:
    """Median, p90, p99 and max of ``delays``."""
    if len(delays) == 0:
        nan = float("nan")
        return DelayStats(0, nan, nan, nan, nan)
    q = np.quantile(delays, [0.5, 0.9, 0.99])
    return DelayStats(len(delays), float(q[0]), float(q[1]), float(q[2]), float(delays.max()))


def label(value: Any) -> str:
    """A table cell or legend label: durations spelled like ``5s``, whole numbers with
    thousands separators (a count in a column of seconds too), other floats shortened."""
    if value is None:
        return "-"
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, float):
        if value != value:
            return "nan"
        if value.is_integer() and abs(value) < 2**53:  # a count in a float column
            return f"{int(value):,}"
        return f"{value:.4g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def utc_strings(ticks: np.ndarray, unit: str) -> np.ndarray:
    """Epoch ticks as ISO dates (UTC, millisecond precision); ``I64_MIN`` reads "none
    yet" (no watermark) and ``I64_MAX`` "end of input"."""
    ticks = np.asarray(ticks, dtype=np.int64)
    low, high = ticks == I64_MIN, ticks == I64_MAX
    plain = np.where(low | high, 0, ticks)
    per_ms = TICKS_PER_SECOND[unit] // 1_000
    if per_ms:  # floored to ms (ticks scaled up to ms can leave the int64 range)
        text = np.datetime_as_string(np.floor_divide(plain, per_ms).astype("datetime64[ms]"))
    else:  # whole seconds: no digits below them
        text = np.char.add(np.datetime_as_string(plain.astype("datetime64[s]")), ".000")
    out = np.asarray(text).astype(object)
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
