"""PNG charts of a run, drawn with matplotlib's Agg backend (no display needed).

Each function takes the collected tables and a path, writes one PNG and returns the
path. Times are int64 ticks; ``unit`` arguments turn them into dates for the axes.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec

import matplotlib

matplotlib.use("Agg")  # headless: set before pyplot is imported

import matplotlib.pyplot as plt
import numpy as np
import pyarrow as pa

from floodmark.report.figures import (
    BEYOND_NOTE,
    beyond_chart,
    channel_series,
    delay_bars,
    delay_edges,
    delay_stats,
    downsample,
    label,
    min_channel_spans,
    to_datetime,
)
from floodmark.report.partition_views import idle_span_table, partition_values
from floodmark.time import I64_MIN, TICKS_PER_SECOND

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DPI = 100
#: The firing-delay chart draws one bar per delay up to this many distinct delays, a
#: histogram of this many bins beyond.
MAX_BARS = 80
_P = ParamSpec("_P")
#: Idle partitions, in every chart.
IDLE_COLOUR = "#4f7cc4"


def as_written(draw: Callable[_P, Path]) -> Callable[_P, Path]:
    """A chart drawn with matplotlib's mathtext off, so that labels made of the data
    (partition names, keys) are drawn as written: a partition named ``$\\foo$`` failed
    the whole report (mathtext has no such symbol), ``cost $5 and $6`` was drawn as
    a formula. A character the font lacks (CJK in DejaVu Sans) is drawn as a box
    without a warning on the terminal, which shows floodmark's own lines only."""

    @functools.wraps(draw)
    def drawn(*args: _P.args, **kwargs: _P.kwargs) -> Path:
        with plt.rc_context({"text.parse_math": False}), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font")
            # dates far from matplotlib's epoch (a sentinel time): drawn, at coarser ticks
            warnings.filterwarnings("ignore", message="Plotting microsecond time intervals")
            return draw(*args, **kwargs)

    return drawn


def _save(fig: Figure, path: str | Path) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return out


def _empty(fig: Figure, ax: Any, message: str, path: str | Path) -> Path:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()
    return _save(fig, path)


def _span_ticks(unit: str, ticks: int) -> Any:
    return np.array([int(ticks)], dtype=f"timedelta64[{unit}]")[0]


def _bar(start: int, end: int, unit: str, *, minimum: int) -> tuple[Any, Any]:
    """A ``broken_barh`` span ``(start, width)`` from ``start`` to ``end`` (ticks), both
    ends clipped to the chart's dates (a sentinel far in the future is drawn at the
    limit, not past year 9999), at least ``minimum`` ticks wide."""
    first, last = to_datetime(np.array([start, end]), unit)
    return first, max(last - first, _span_ticks(unit, minimum))


def step_line(
    ax: Any, times: np.ndarray, wms: np.ndarray, *, event_unit: str, arrival_unit: str, **style: Any
) -> None:
    """A watermark over arrival time as a step line, thinned to
    :data:`~floodmark.report.figures.MAX_POINTS`. Arrival and event time share the
    epoch; both become ``datetime64`` of their units."""
    x, y = downsample(times, wms)
    ax.step(to_datetime(x, arrival_unit), to_datetime(y, event_unit), where="post", **style)


@as_written
def watermark_chart(
    timeline: pa.Table,
    emissions: pa.Table | None,
    path: str | Path,
    *,
    event_unit: str = "ms",
    arrival_unit: str = "ms",
    idle_spans: pa.Table | None = None,
) -> Path:
    """Watermarks over processing time: each channel's as a thin step line, the
    combined one as a thick line; below, one strip per channel showing when it was idle
    (blue, from ``idle_spans``, computed from ``emissions`` when not given) and when it
    held the combined minimum (red). One line per channel: for a few channels only."""
    series = channel_series(emissions) if emissions is not None else {}
    n_chan = max(len(series), 1)
    fig, (top, strip) = plt.subplots(
        2,
        1,
        figsize=(12, 7 + 0.15 * n_chan),
        sharex=True,
        gridspec_kw={"height_ratios": [3, 1 + 0.08 * n_chan]},
    )
    times = np.asarray(timeline.column("time").to_numpy(zero_copy_only=False), np.int64)
    wms = np.asarray(timeline.column("watermark").to_numpy(zero_copy_only=False), np.int64)
    ok = wms != I64_MIN
    if not ok.any() and not series:
        plt.close(fig)
        fig, ax = plt.subplots(figsize=(12, 3))
        return _empty(fig, ax, "no watermark was emitted", path)
    cmap = plt.get_cmap("tab20")
    units = {"event_unit": event_unit, "arrival_unit": arrival_unit}
    for i, (chan, (t, w)) in enumerate(series.items()):
        step_line(top, t, w, **units, lw=0.8, alpha=0.7, color=cmap(i % 20), label=f"{chan}")
    step_line(top, times[ok], wms[ok], **units, lw=3, color="black", label="combined")
    beyond = beyond_chart(times, arrival_unit) or beyond_chart(wms[ok], event_unit)
    if beyond or any(
        beyond_chart(t, arrival_unit) or beyond_chart(w[w != I64_MIN], event_unit)
        for t, w in series.values()
    ):
        top.annotate(BEYOND_NOTE, (0.01, 0.02), xycoords="axes fraction", fontsize=8)
    top.set_ylabel("watermark (event time)")
    top.set_title("Watermarks over arrival time")
    top.grid(alpha=0.3)
    top.legend(loc="upper left", fontsize=7, ncol=max(1, (n_chan + 1) // 9), title="channel")
    end = int(times.max()) if len(times) else 0
    if emissions is not None and emissions.num_rows:
        end = max(end, int(np.max(emissions.column("time").to_numpy(zero_copy_only=False))))
    if idle_spans is None and emissions is not None:
        parts = partition_values(None, emissions)
        idle_spans = idle_span_table(emissions, parts, end)
    _strips(strip, list(series) or [None], timeline, idle_spans, end, arrival_unit)
    strip.set_xlabel("arrival (processing) time")
    fig.autofmt_xdate()
    return _save(fig, path)


def _strips(
    ax: Any,
    channels: list[Any],
    timeline: pa.Table,
    idle_spans: pa.Table | None,
    end: int,
    unit: str,
) -> None:
    row = {c: i for i, c in enumerate(channels)}
    spans: dict[Any, list[tuple[Any, Any]]] = {}
    for c, s, e in (
        zip(*(idle_spans.column(n).to_pylist() for n in ("partition", "start", "end")), strict=True)
        if idle_spans is not None
        else ()
    ):
        spans.setdefault(c, []).append(_bar(s, e, unit, minimum=0))
    for c, items in spans.items():
        if c in row:
            ax.broken_barh(items, (row[c] - 0.4, 0.8), color=IDLE_COLOUR, label=None)
    holders: dict[Any, list[tuple[Any, Any]]] = {}
    for c, s, e in min_channel_spans(timeline, end):
        holders.setdefault(c, []).append(_bar(s, e, unit, minimum=1))
    for c, items in holders.items():
        if c in row:
            ax.broken_barh(items, (row[c] - 0.25, 0.5), color="tab:red")
    ax.set_yticks(range(len(channels)), [str(c) for c in channels], fontsize=7)
    ax.set_ylim(-0.6, len(channels) - 0.4)
    ax.invert_yaxis()
    ax.set_ylabel("channel")
    ax.set_title("blue: idle    red: holds the combined minimum", fontsize=9)


@as_written
def partition_chart(partitions: pa.Table, path: str | Path, *, title: str | None = None) -> Path:
    """Late and dropped records per partition (and what Spark's global watermark
    would have dropped, if the table has ``spark_dropped``), one group of bars per row
    of ``partitions`` (give it a few: the caller picks which)."""
    fig, ax = plt.subplots(figsize=(12, 4.5))
    if partitions.num_rows == 0:
        return _empty(fig, ax, "no partitions", path)
    names = [str(p) for p in partitions.column("partition").to_pylist()]
    bars = [("late", "tab:orange"), ("dropped", "tab:red"), ("spark_dropped", "tab:blue")]
    present = [(c, col) for c, col in bars if c in partitions.column_names]
    x = np.arange(len(names))
    width = 0.8 / len(present)
    for i, (col, colour) in enumerate(present):
        values = np.asarray(partitions.column(col).to_pylist(), dtype=np.float64)
        label = "dropped by Spark's watermark" if col == "spark_dropped" else col
        ax.bar(x + (i - (len(present) - 1) / 2) * width, values, width, color=colour, label=label)
    ax.set_xticks(x, names)
    ax.set_xlabel("partition")
    ax.set_ylabel("records")
    ax.set_title(title or "Late and dropped records per partition")
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


@as_written
def delay_chart(delays: np.ndarray, path: str | Path) -> Path:
    """On-time firing delays (seconds): a bar per delay (a histogram for many), median
    and p99 marked."""
    fig, ax = plt.subplots(figsize=(12, 4.5))
    if len(delays) == 0:
        return _empty(fig, ax, "no window fired on time before the end of input", path)
    stats = delay_stats(delays)
    bars = delay_bars(delays, MAX_BARS)
    if bars is not None:
        ax.bar(bars.values, bars.counts, width=bars.width, color="tab:green")
    else:
        ax.hist(delays, bins=list(delay_edges(delays, MAX_BARS)), color="tab:green")
    marks = ((stats.median, "median", "--", -14), (stats.p99, "p99", ":", -28))
    for value, name, style, below in marks:  # one line under the other: they can be close
        ax.axvline(value, color="black", ls=style)
        ax.annotate(
            f"{name} {value:.2f} s",
            (value, 1),
            xycoords=("data", "axes fraction"),
            xytext=(4, below),
            textcoords="offset points",
        )
    ax.set_xlabel("firing delay: fired at (arrival) - window end (event time), seconds")
    ax.set_ylabel("windows")
    ax.set_title(f"Window firing delay ({stats.count:,} on-time firings)")
    ax.grid(alpha=0.3)
    return _save(fig, path)


def _seconds(column: pa.ChunkedArray) -> np.ndarray:
    """A bound or timeout column in seconds: durations, or numbers of seconds."""
    if pa.types.is_duration(column.type):
        per_s = TICKS_PER_SECOND[column.type.unit]
        return (
            np.asarray(column.cast(pa.int64()).to_numpy(zero_copy_only=False), np.float64) / per_s
        )
    return np.asarray(column.to_pylist(), dtype=np.float64)


@as_written
def analysis_chart(analysis: pa.Table, path: str | Path, *, max_late: float | None = None) -> Path:
    """Late fraction (left panel) and firing delay median/p99 (right panel) against
    the candidate bound, one line per idle timeout."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    if analysis.num_rows == 0:
        plt.close(fig)
        fig, ax = plt.subplots(figsize=(12, 3))
        return _empty(fig, ax, "no bounds were analysed", path)
    bounds = _seconds(analysis.column("bound"))
    idle_col = analysis.column("idle_timeout")
    idles = [label(v) for v in idle_col.to_pylist()]
    late = np.asarray(analysis.column("late_fraction").to_pylist(), np.float64)
    med = np.asarray(analysis.column("delay_median_s").to_pylist(), np.float64)
    p99 = np.asarray(analysis.column("delay_p99_s").to_pylist(), np.float64)
    for i, idle in enumerate(dict.fromkeys(idles)):
        m = np.array([v == idle for v in idles])
        order = np.argsort(bounds[m])
        colour = plt.get_cmap("tab10")(i % 10)
        name = f"idle {idle}"
        left.plot(bounds[m][order], late[m][order], "o-", color=colour, label=name)
        right.plot(bounds[m][order], med[m][order], "o-", color=colour, label=f"{name} median")
        right.plot(bounds[m][order], p99[m][order], "s--", color=colour, label=f"{name} p99")
    if max_late is not None:
        left.axhline(max_late, color="tab:red", ls=":", label=f"max late {max_late:g}")
    left.set_xlabel("bound (seconds)")
    left.set_ylabel("late fraction")
    left.set_title("Late records against the bound")
    right.set_xlabel("bound (seconds)")
    right.set_ylabel("firing delay (seconds)")
    right.set_title("Firing delay against the bound")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return _save(fig, path)


__all__ = [
    "IDLE_COLOUR",
    "analysis_chart",
    "delay_chart",
    "partition_chart",
    "step_line",
    "watermark_chart",
]
