"""Charts that read the same at 16 partitions as at 1,000: the lag heatmap, the
partitions holding the watermark back, idle spans, and the combined watermark alone.

They draw the compact tables of :mod:`floodmark.report.partition_views` (and the
combined timeline), never one line per partition.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from matplotlib.colors import PowerNorm, to_rgba
from matplotlib.patches import Patch

from floodmark.report.charts import IDLE_COLOUR, _empty, _save, as_written, step_line
from floodmark.report.figures import downsample, seconds_between, seconds_per_tick, to_datetime
from floodmark.report.partition_views import ACTIVE, CATCHING_UP, IDLE, NONE, lag_matrix
from floodmark.time import I64_MAX, I64_MIN

NONE_COLOUR = "#e4e4e4"
#: A partition back from idle, behind the combined watermark and left out of it.
CATCHING_UP_COLOUR = "#8e44ad"
LAG_CMAP = "YlOrRd"
HOLD_COLOUR = "#c0392b"
#: Pixel rows of the heatmap at most; more partitions are grouped (the worst lag shown).
MAX_PIXEL_ROWS = 1_500
SECONDS_PER_DAY = 86_400.0


def _dates(ticks: np.ndarray | int, unit: str) -> np.ndarray:
    """Arrival ticks as matplotlib date numbers (days since its epoch, as ``date2num``)."""
    stamps = to_datetime(np.atleast_1d(np.asarray(ticks, np.int64)), unit)
    epoch = np.datetime64(plt.rcParams["date.epoch"]).astype(f"datetime64[{unit}]")
    return np.asarray((stamps - epoch) / np.timedelta64(1, "D"), np.float64)


def rank_by_lag(lag_ticks: np.ndarray) -> np.ndarray:
    """Row order, worst first: mean lag over the bins where the partition was active,
    descending; partitions never active last (stable otherwise)."""
    active = ~np.isnan(lag_ticks)
    count = active.sum(axis=1)
    mean = np.where(
        count > 0, np.where(active, lag_ticks, 0).sum(axis=1) / np.maximum(count, 1), -1
    )
    return np.lexsort((np.arange(len(mean)), -mean))


def _group_rows(state: np.ndarray, lag: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows taken ``size`` at a time: the highest lag; active if any is, else catching
    up if any is, else idle if any is, else none."""
    rows = math.ceil(len(state) / size)
    pad = rows * size - len(state)
    state = np.concatenate([state, np.full((pad, state.shape[1]), -1, state.dtype)])
    lag = np.concatenate([lag, np.full((pad, lag.shape[1]), np.nan)])
    state = state.reshape(rows, size, -1)
    lag = lag.reshape(rows, size, -1)
    grouped = np.select(
        [(state == s).any(axis=1) for s in (ACTIVE, CATCHING_UP, IDLE)],
        [ACTIVE, CATCHING_UP, IDLE],
        NONE,
    ).astype(np.int8)
    with np.errstate(invalid="ignore"):
        worst = np.where(
            np.isnan(lag).all(axis=1), np.nan, np.nan_to_num(lag, nan=-np.inf).max(axis=1)
        )
    return grouped, worst


def _colours(state: np.ndarray, seconds: np.ndarray, norm: PowerNorm, cmap: Any) -> np.ndarray:
    """RGBA pixels: the lag's colour where active, the other states' colours elsewhere."""
    rgba = np.asarray(cmap(norm(np.nan_to_num(seconds, nan=0.0))))
    rgba[state == IDLE] = to_rgba(IDLE_COLOUR)
    rgba[state == CATCHING_UP] = to_rgba(CATCHING_UP_COLOUR)
    rgba[~np.isin(state, (IDLE, ACTIVE, CATCHING_UP))] = to_rgba(NONE_COLOUR)
    return rgba


def _heat_axes(
    ax: Any, rgba: np.ndarray, x: tuple[float, float], names: list[str], height_px: int
) -> int:
    """Draw ``rgba`` (one row per name) on ``ax``; label as many rows as fit (about
    one per 14 pixels, the top row always). Returns the labelling step."""
    rows = len(rgba)
    ax.imshow(rgba, aspect="auto", interpolation="nearest", extent=(x[0], x[1], rows, 0))
    ax.xaxis_date()
    step = max(1, math.ceil(rows / max(1, height_px // 14)))
    at = np.arange(0, rows, step)
    ax.set_yticks(at + 0.5, [names[i] for i in at], fontsize=7)
    return step


@as_written
def lag_heatmap(
    lag: pa.Table,
    path: str | Path,
    *,
    event_unit: str = "ms",
    arrival_unit: str = "ms",
    worst: int = 15,
    max_pixel_rows: int = MAX_PIXEL_ROWS,
) -> Path:
    """One row per partition, worst laggard on top, one column per bin of arrival time:
    the colour is how far the partition's watermark trailed the leading active
    partition's; idle, catching up (back from idle behind the combined watermark, left
    out of it) and "no watermark yet" have colours of their own.

    With many partitions each is one pixel row (rows are grouped beyond
    ``max_pixel_rows``, each showing its group's worst lag) and only every few rows are
    labelled; the ``worst`` partitions are then drawn again above, one labelled row
    each."""
    m = lag_matrix(lag)
    n_part, n_bins = m.state.shape
    if n_part == 0 or n_bins == 0:
        fig, ax = plt.subplots(figsize=(12, 3))
        return _empty(fig, ax, "no partition emitted anything", path)
    order = rank_by_lag(m.lag)
    state, seconds = m.state[order], m.lag[order] * seconds_per_tick(event_unit)
    names = [str(m.partitions[i]) for i in order]
    finite = seconds[~np.isnan(seconds)]
    vmax = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    norm = PowerNorm(0.5, vmin=0.0, vmax=vmax)
    cmap = plt.get_cmap(LAG_CMAP)
    x0, x1 = (float(v) for v in _dates(np.array([m.starts[0], m.ends[-1]]), arrival_unit))
    x = (x0, max(x1, x0 + 1 / SECONDS_PER_DAY))
    group = math.ceil(n_part / max_pixel_rows)
    all_state, all_seconds, all_names = state, seconds, names
    if group > 1:
        all_state, all_seconds = _group_rows(state, seconds, group)
        all_names = names[::group]
    rows = len(all_state)
    px_row = max(1, min(22, 600 // rows))
    zoom = worst if px_row < 12 and n_part > worst else 0
    # Layout in pixels (DPI 100): margins, the zoomed panel, a gap, the full panel.
    left, right, top, gap, bottom, width = 110, 150, 50, 60 if zoom else 0, 75, 1200
    zoom_px, all_px = zoom * 16, max(rows * px_row, 160)
    height = top + zoom_px + gap + all_px + bottom
    fig = plt.figure(figsize=(width / 100, height / 100))

    def box(y_px: int, h_px: int) -> tuple[float, float, float, float]:
        return (left / width, y_px / height, 1 - (left + right) / width, h_px / height)

    ax = fig.add_axes(box(bottom, all_px))
    step = _heat_axes(ax, _colours(all_state, all_seconds, norm, cmap), x, all_names, all_px)
    ax.set_xlabel("arrival (processing) time")
    per_row = f", {group} per row" if group > 1 else ""
    ax.set_ylabel(f"partition, worst first{per_row}")
    title = f"Lag behind the leading partition: all {n_part:,} partitions"
    if step > 1:
        title += f" (a label every {step} rows)"
    ax.set_title(title, fontsize=10, loc="left")
    first_ax = ax
    if zoom:
        ax = fig.add_axes(box(bottom + all_px + gap, zoom_px), sharex=first_ax)
        _heat_axes(ax, _colours(state[:zoom], seconds[:zoom], norm, cmap), x, names, zoom_px)
        ax.set_title(f"the {zoom} partitions with the most lag", fontsize=10, loc="left")
        ax.tick_params(labelbottom=False)
    ax.legend(
        handles=[
            Patch(color=IDLE_COLOUR, label="idle"),
            Patch(color=CATCHING_UP_COLOUR, label="back from idle, catching up (left out)"),
            Patch(color=NONE_COLOUR, label="no watermark yet"),
        ],
        loc="lower right",
        bbox_to_anchor=(1.0, 1.0),
        ncol=3,
        fontsize=8,
        frameon=False,
    )
    bar = fig.add_axes(
        (
            (width - right + 20) / width,
            bottom / height,
            14 / width,
            (height - top - bottom) / height,
        )
    )
    fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), cax=bar, label="lag (seconds)")
    for label in first_ax.get_xticklabels():
        label.set_rotation(20)
        label.set_horizontalalignment("right")
    return _save(fig, path)


@as_written
def holding_chart(
    holding: pa.Table,
    path: str | Path,
    *,
    span: int,
    arrival_unit: str = "ms",
    top: int = 20,
) -> Path:
    """The ``top`` partitions by arrival time spent holding the combined watermark back
    (horizontal bars, seconds, share of the run)."""
    hold = np.asarray(holding.column("holding").to_numpy(zero_copy_only=False), np.int64)
    names = [str(p) for p in holding.column("partition").to_pylist()]
    held = int((hold > 0).sum())
    order = np.lexsort((np.arange(len(hold)), -hold))[: min(top, held)]
    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.28 * max(len(order), 4)))
    if len(order) == 0:
        return _empty(fig, ax, "no partition held the combined watermark back", path)
    seconds = hold[order] * seconds_per_tick(arrival_unit)
    y = np.arange(len(order))
    ax.barh(y, seconds, color=HOLD_COLOUR)
    ax.set_yticks(y, [names[i] for i in order], fontsize=8)
    ax.invert_yaxis()
    for yi, s in zip(y, seconds, strict=True):
        share = f"  {100 * s / (span * seconds_per_tick(arrival_unit)):.1f} %" if span > 0 else ""
        ax.annotate(
            f"{s:,.1f} s{share}",
            (s, yi),
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
        )
    ax.set_xlim(0, seconds.max() * 1.18)
    ax.set_xlabel("arrival time holding the combined watermark (seconds)")
    ax.set_ylabel("partition")
    shown = f"; the {len(order)} longest" if held > len(order) else ""
    ax.set_title(
        f"Time holding the combined watermark back: {held:,} of {len(hold):,} partitions "
        f"ever did{shown}",
        fontsize=11,
    )
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, path)


@as_written
def idle_chart(
    idle_spans: pa.Table,
    path: str | Path,
    *,
    first: int,
    last: int,
    arrival_unit: str = "ms",
    max_rows: int = 40,
) -> Path:
    """When partitions were idle: one row per partition that ever was, the longest idle
    first, at most ``max_rows`` (the rest counted in the title); a span still open at the
    end of the run is hatched (a very short span is drawn 1/300 of the run wide)."""
    parts = idle_spans.column("partition").to_pylist()
    starts = np.asarray(idle_spans.column("start").to_numpy(zero_copy_only=False), np.int64)
    ends = np.asarray(idle_spans.column("end").to_numpy(zero_copy_only=False), np.int64)
    still = np.asarray(idle_spans.column("open").to_numpy(zero_copy_only=False), bool)
    keys = list(dict.fromkeys(parts))
    index = {k: i for i, k in enumerate(keys)}
    who = np.array([index[p] for p in parts], np.int64)
    total = np.zeros(len(keys), np.int64)
    np.add.at(total, who, ends - starts)
    drawn = np.lexsort((np.arange(len(keys)), -total))[:max_rows]
    row = np.full(len(keys), -1)
    row[drawn] = np.arange(len(drawn))
    fig, ax = plt.subplots(figsize=(12, 1.4 + 0.22 * max(len(drawn), 4)))
    if len(keys) == 0:
        return _empty(fig, ax, "no partition went idle", path)
    per_day = seconds_per_tick(arrival_unit) / SECONDS_PER_DAY
    # A span shorter than 1/300 of the run is drawn that wide, so that it shows.
    width = np.maximum(ends - starts, (max(last, first + 1) - first) / 300) * per_day
    x = _dates(starts, arrival_unit)
    for r in range(len(drawn)):
        for hatched in (False, True):
            sel = (row[who] == r) & (still == hatched)
            if sel.any():
                ax.broken_barh(
                    list(zip(x[sel], width[sel], strict=True)),
                    (r - 0.4, 0.8),
                    facecolor=IDLE_COLOUR,
                    hatch="//" if hatched else None,
                    edgecolor="white" if hatched else IDLE_COLOUR,
                )
    ax.set_xlim(*_dates(np.array([first, max(last, first + 1)]), arrival_unit))
    ax.xaxis_date()
    ax.set_yticks(range(len(drawn)), [str(keys[i]) for i in drawn], fontsize=7)
    ax.set_ylim(len(drawn) - 0.5, -0.5)
    ax.set_ylabel("partition, longest idle first")
    ax.set_xlabel("arrival (processing) time")
    left_out = len(keys) - len(drawn)
    title = f"Idle spans: {len(keys):,} partition{'' if len(keys) == 1 else 's'} went idle"
    if left_out:
        title += f"; {left_out:,} more not drawn (all in idle_spans.csv)"
    if still.any():
        title += ". Hatched: still idle at the end"
    ax.set_title(title, fontsize=11)
    ax.grid(axis="x", alpha=0.3)
    fig.autofmt_xdate()
    return _save(fig, path)


def _status_spans(times: np.ndarray, idle: np.ndarray, end: int) -> list[tuple[int, int]]:
    """``[start, stop)`` runs of timeline rows whose status is idle."""
    if not idle.any():
        return []
    edges = np.diff(np.concatenate([[0], idle.astype(np.int8), [0]]))
    begin, stop = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    bounds = np.append(times, max(end, int(times[-1])))
    return list(zip(bounds[begin].tolist(), bounds[stop].tolist(), strict=True))


@as_written
def combined_chart(
    timeline: pa.Table,
    path: str | Path,
    *,
    end: int | None = None,
    event_unit: str = "ms",
    arrival_unit: str = "ms",
    arrival_clock: bool = True,
) -> Path:
    """The combined watermark over arrival time (top) and how far it trailed the
    arrival clock (bottom, seconds; left out without ``arrival_clock``: arrival times
    that are row positions are no clock), the spans when every partition was idle
    shaded."""
    times = np.asarray(timeline.column("time").to_numpy(zero_copy_only=False), np.int64)
    wms = np.asarray(timeline.column("watermark").to_numpy(zero_copy_only=False), np.int64)
    idle = np.asarray(pc.equal(timeline.column("status"), "idle").fill_null(False).to_numpy(), bool)
    ok = (wms != I64_MIN) & (wms != I64_MAX)
    if not ok.any():
        fig, ax = plt.subplots(figsize=(12, 3))
        return _empty(fig, ax, "no combined watermark was emitted", path)
    if arrival_clock:
        fig, (top, below) = plt.subplots(
            2, 1, figsize=(12, 6.5), sharex=True, gridspec_kw={"height_ratios": [3, 2]}
        )
        panels: list[Any] = [top, below]
    else:
        fig, top = plt.subplots(figsize=(12, 4))
        panels = [top]
    units = {"event_unit": event_unit, "arrival_unit": arrival_unit}
    step_line(top, times[ok], wms[ok], **units, lw=2, color="black", label="combined watermark")
    last = int(times.max()) if end is None else max(end, int(times.max()))
    spans = _status_spans(times, idle, last)
    for ax in panels:
        for s, e in spans[:500]:
            ax.axvspan(
                *to_datetime(np.array([s, e]), arrival_unit), color=IDLE_COLOUR, alpha=0.25, lw=0
            )
        ax.grid(alpha=0.3)
    top.set_ylabel("combined watermark (event time)")
    handles = [top.get_lines()[0]]
    if spans:
        handles.append(Patch(color=IDLE_COLOUR, alpha=0.25, label="every partition idle"))
    top.legend(handles=handles, loc="upper left", fontsize=8)
    top.set_title("Combined watermark over arrival time", fontsize=11)
    if arrival_clock:
        x, y = downsample(times[ok], wms[ok])
        behind = seconds_between(x, arrival_unit, y, event_unit)
        below.step(to_datetime(x, arrival_unit), behind, where="post", lw=1.2, color="tab:purple")
        below.set_ylabel("arrival - watermark (s)")
        below.ticklabel_format(axis="y", useOffset=False)
        below.set_ylim(min(0.0, float(behind.min())), max(1.0, float(behind.max())) * 1.1)
        below.set_xlabel("arrival (processing) time")
    else:
        top.set_xlabel("arrival: position in row order")
    fig.autofmt_xdate()
    return _save(fig, path)


__all__ = [
    "NONE_COLOUR",
    "combined_chart",
    "holding_chart",
    "idle_chart",
    "lag_heatmap",
    "rank_by_lag",
]
