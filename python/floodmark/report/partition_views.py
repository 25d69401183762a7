"""Compact per-partition views of a run: their size does not grow with partitions x time.

The report draws three small tables instead of every channel's emissions, so that it
reads (and renders) the same at 16 partitions as at 1,000. This module is their
reference computation, from the two tables a run has on the driver: the combined
``timeline`` (``time``, ``watermark``, ``status``, ``min_channel``) and the channels'
``emissions`` (``channel``, ``time``, ``kind`` in ``watermark``/``idle``/``active``,
``watermark``); see :class:`floodmark.spark.timeline.Timeline`. Times are int64 ticks:
``time`` columns in arrival ticks, watermarks and lags in event-time ticks.

**The run's span.** ``first`` and ``last`` are the smallest and largest ``time`` in
the timeline and the emissions together, unless the caller gives the span (the
pipeline gives its emission grid's first and last times, known before the emissions).

**Bins.** The span is cut into ``n = min(bins, last - first)`` bins (at least one).
Bin ``k`` (``0 <= k < n``) runs from ``start_k = first + (k * (last - first)) // n``
(exclusive, except for bin 0) to ``end_k = start_{k+1}`` (inclusive), so
``end_{n-1} = last``. An emission at time ``t`` belongs to the first bin whose end is
``>= t``. Everything in the lag table is read *at the bin's end*: what a channel had
emitted at or before ``end_k``.

**lag** (one row per partition and bin, every bin: ``partitions x n`` rows):

* ``partition``, ``bin``, ``start``, ``end`` (arrival ticks).
* ``watermark``: the partition's watermark at the bin's end, i.e. the highest
  ``watermark`` it emitted at or before ``end`` (a channel's emissions only rise, so
  this is also its latest); null when it had emitted none yet. ``I64_MIN`` ("no
  watermark") counts as none.
* ``state``: ``idle`` when the partition's latest ``idle``/``active`` mark at or
  before ``end`` is ``idle`` (rows of one time keep their order in ``emissions``);
  else ``none`` when ``watermark`` is null; else ``catching_up`` when ``watermark`` is
  below the combined watermark at ``end`` (the timeline's last row at or before it):
  a partition that came back from idle behind the others, which the valve leaves out
  of the minimum until it reaches the combined watermark (Flink's unaligned channel;
  its records meanwhile can be late); else ``active``.
* ``lag``: for ``active`` and ``catching_up`` rows (null otherwise, and null when no
  partition of the bin is ``active``), how far the partition's watermark trails the
  *lead*: the highest ``watermark`` among the ``active`` partitions of the same bin.
  ``lag = lead - watermark >= 0`` (saturating at ``I64_MAX``). The lag chart colours
  the ``active`` rows' lag (a partition catching up has a colour of its own); the
  per-partition figures count both, so a partition that came back from idle behind
  the others and stayed behind (the demo's lagging partition on a small input) shows
  how far behind it was, not "no lag".

  Why the lead and not the combined watermark: the combined watermark is the minimum
  over the active partitions the valve counts, so no ``active`` partition is behind it
  (one behind it is ``catching_up``); the one that sets it is the furthest behind the
  lead. Measured from the lead, the partition holding time
  back has the largest lag (``lead - combined``), a partition keeping up has about
  zero, and an idle partition is its own state, not a lag. (The per-partition
  ``lag_median_s``/``lag_max_s`` of the report are this lag's median and maximum over
  the bins.) A lag that lasts less than a bin can fall between two bin ends: the table
  samples, it does not take a maximum within the bin.

**holding** (one row per partition, ``holding`` descending, then partition):

* ``partition``.
* ``holding``: arrival ticks during which the timeline named it ``min_channel``: row
  ``i`` of the timeline counts ``time[i+1] - time[i]``, its last row ``last - time``;
  rows with a null ``min_channel`` (every channel idle) count for nobody.
* ``stints``: how many separate runs of consecutive timeline rows named it, rows that
  last no time (the next row, or ``last``, at the same time) left out.

Every partition of ``emissions`` (and any other ``min_channel``) has a row, zero when it
never held the combined watermark.

**idle_spans** (one row per idle span, by partition then start):

* ``partition``, ``start``: the time of an ``idle`` mark (a repeated ``idle`` with no
  ``active`` between counts once), ``end``: the time of the partition's next
  ``active`` mark, or ``last`` when none follows; ``open``: no ``active`` followed.

Partitions are sorted by value in every table (:func:`in_order`: integers written as
text as numbers). The three tables are
``O(partitions x bins)``, ``O(partitions)`` and ``O(idle transitions)`` rows.

**Compaction.** The tables read, of a partition's watermark emissions, only the last
one of each bin (they only rise), and every idle/active mark. So
:func:`compact_emissions` keeps just those, ``O(partitions x bins + idle transitions)``
rows, and the three tables of the compacted emissions are those of all of them: the
pipeline compacts chunk by chunk where the emissions are too many for the driver.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from floodmark.time import I64_MAX, I64_MIN

if TYPE_CHECKING:
    from floodmark.report.inputs import ReportInputs

#: Bins of the lag table over the run's span.
DEFAULT_BINS = 200

#: An integer written as text.
_INTEGER = re.compile(r"-?\d+\Z")

STATES = ("none", "idle", "active", "catching_up")
NONE, IDLE, ACTIVE, CATCHING_UP = range(4)


@dataclass(frozen=True)
class PartitionViews:
    """The three compact tables (see the module docstring for their definitions)."""

    lag: pa.Table
    holding: pa.Table
    idle_spans: pa.Table


def _ints(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.int64)


def _empty_emissions(channel_type: pa.DataType) -> pa.Table:
    return pa.table(
        {
            "channel": pa.array([], channel_type),
            "time": pa.array([], pa.int64()),
            "kind": pa.array([], pa.string()),
            "watermark": pa.array([], pa.int64()),
        }
    )


def run_span(timeline: pa.Table | None, emissions: pa.Table | None) -> tuple[int, int] | None:
    """``(first, last)``: the smallest and largest ``time`` of both tables (None if
    both are empty)."""
    times = [_ints(t.column("time")) for t in (timeline, emissions) if t is not None and t.num_rows]
    if not times:
        return None
    return min(int(t.min()) for t in times), max(int(t.max()) for t in times)


def bin_edges(first: int, last: int, bins: int = DEFAULT_BINS) -> np.ndarray:
    """The ``n + 1`` bin edges ``first + (k * (last - first)) // n`` (exact, in Python
    integers: ``k * span`` can exceed 64 bits)."""
    span = last - first
    n = max(1, min(bins, span))
    return np.array([first + (k * span) // n for k in range(n + 1)], dtype=np.int64)


def partition_values(timeline: pa.Table | None, emissions: pa.Table | None) -> pa.Array:
    """Every partition named by ``emissions`` or the timeline's ``min_channel``, sorted."""
    parts = []
    if emissions is not None:
        parts.append(emissions.column("channel").combine_chunks())
    if timeline is not None:
        parts.append(timeline.column("min_channel").drop_null().combine_chunks())
    parts = [p for p in parts if len(p)]
    if not parts:
        return pa.array([], pa.int64())
    if len(parts) == 2 and parts[0].type != parts[1].type:
        parts[1] = parts[1].cast(parts[0].type)
    return in_order(pc.unique(pa.concat_arrays(parts)))


def in_order(values: pa.Array) -> pa.Array:
    """``values`` sorted as the report shows partitions: integers written as text (the
    command line labels partitions as text) as numbers, 2 before 10, and before any
    other text (``(null)``); other values by value."""
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        return values.take(pc.sort_indices(values))
    texts = values.to_pylist()

    def key(i: int) -> tuple[int, int, str]:
        text = texts[i]
        if text is not None and _INTEGER.match(text):
            return (0, int(text), "")
        return (1, 0, "" if text is None else text)

    return values.take(pa.array(sorted(range(len(texts)), key=key), pa.int64()))


def _index(values: pa.ChunkedArray | pa.Array, partitions: pa.Array) -> np.ndarray:
    """Position of each value in ``partitions`` (-1 for null)."""
    idx = pc.index_in(values.cast(partitions.type), value_set=partitions)
    return np.asarray(idx.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)


def lag_table(
    emissions: pa.Table, partitions: pa.Array, edges: np.ndarray, timeline: pa.Table | None = None
) -> pa.Table:
    """The lag table over the bins ``edges`` (see the module docstring); without a
    ``timeline`` no partition reads ``catching_up``."""
    n_part, n_bins = len(partitions), len(edges) - 1
    ends = edges[1:]
    chan = _index(emissions.column("channel"), partitions)
    times = _ints(emissions.column("time"))
    kinds = emissions.column("kind").combine_chunks()
    wms = np.asarray(
        emissions.column("watermark").fill_null(I64_MIN).to_numpy(zero_copy_only=False), np.int64
    )
    bin_of = np.minimum(np.searchsorted(ends, times, side="left"), n_bins - 1)
    # Watermark at each bin end: the highest emitted at or before it (a running maximum).
    is_wm = np.asarray(pc.equal(kinds, "watermark").to_numpy(zero_copy_only=False), bool)
    is_wm &= wms != I64_MIN
    wm = np.full((n_part, n_bins), I64_MIN, dtype=np.int64)
    np.maximum.at(wm, (chan[is_wm], bin_of[is_wm]), wms[is_wm])
    wm = np.maximum.accumulate(wm, axis=1)
    # Idle or active at each bin end: the latest mark at or before it. Marks are ranked
    # by (time, row) and the rank's running maximum finds the latest one.
    idle = np.asarray(pc.equal(kinds, "idle").to_numpy(zero_copy_only=False), bool)
    active = np.asarray(pc.equal(kinds, "active").to_numpy(zero_copy_only=False), bool)
    marks = np.flatnonzero(idle | active)
    marks = marks[np.argsort(times[marks], kind="stable")]
    latest = np.full((n_part, n_bins), -1, dtype=np.int64)
    np.maximum.at(latest, (chan[marks], bin_of[marks]), np.arange(len(marks)))
    latest = np.maximum.accumulate(latest, axis=1)
    mark_idle = np.append(idle[marks], False)  # rank -1 (no mark yet) reads as not idle
    state = np.where(wm == I64_MIN, NONE, ACTIVE).astype(np.int8)
    state[mark_idle[latest]] = IDLE
    combined = combined_at(timeline, ends)
    state[(state == ACTIVE) & (wm < combined[None, :])] = CATCHING_UP
    lead = np.max(np.where(state == ACTIVE, wm, I64_MIN), axis=0, initial=I64_MIN)[None, :]
    counted = ((state == ACTIVE) | (state == CATCHING_UP)) & (lead != I64_MIN)
    with np.errstate(over="ignore"):
        diff = lead - wm
    lag = np.where((wm < 0) & (lead > wm + I64_MAX), I64_MAX, diff)
    rows = np.arange(n_part * n_bins)
    part_idx = rows // n_bins
    bin_idx = rows % n_bins
    flat_wm = wm.ravel()
    return pa.table(
        {
            "partition": partitions.take(pa.array(part_idx)),
            "bin": pa.array(bin_idx.astype(np.int32)),
            "start": pa.array(edges[:-1][bin_idx]),
            "end": pa.array(ends[bin_idx]),
            "state": pa.array(STATES).take(pa.array(state.ravel())),
            "watermark": pa.array(flat_wm, mask=flat_wm == I64_MIN),
            "lag": pa.array(lag.ravel(), mask=~counted.ravel()),
        }
    )


def combined_at(timeline: pa.Table | None, ends: np.ndarray) -> np.ndarray:
    """The combined watermark at each of ``ends``: the timeline's last row at or before
    it (``I64_MIN`` before the first, or without a timeline)."""
    if timeline is None or timeline.num_rows == 0:
        return np.full(len(ends), I64_MIN, np.int64)
    times = _ints(timeline.column("time"))
    wms = np.asarray(
        timeline.column("watermark").fill_null(I64_MIN).to_numpy(zero_copy_only=False), np.int64
    )
    order = np.argsort(times, kind="stable")
    at = np.searchsorted(times[order], ends, side="right") - 1
    return np.where(at >= 0, wms[order][np.maximum(at, 0)], I64_MIN)


def holding_table(timeline: pa.Table, partitions: pa.Array, last: int) -> pa.Table:
    """The holding table (see the module docstring)."""
    times = _ints(timeline.column("time"))
    who = _index(timeline.column("min_channel"), partitions)
    hold = np.zeros(len(partitions), dtype=np.int64)
    stints = np.zeros(len(partitions), dtype=np.int64)
    if len(times):
        durations = np.diff(times, append=max(last, int(times[-1])))
        # A row that lasts no time (the next one, or the end, at the same time) is
        # no stint: who held the watermark then held it for nothing.
        lasting = durations > 0
        who, durations = who[lasting], durations[lasting]
        some = who >= 0
        np.add.at(hold, who[some], durations[some])
        starts = some & np.concatenate([[True], who[1:] != who[:-1]])
        np.add.at(stints, who[starts], 1)
    order = np.lexsort((np.arange(len(partitions)), -hold))
    return pa.table(
        {
            "partition": partitions.take(pa.array(order)),
            "holding": pa.array(hold[order]),
            "stints": pa.array(stints[order]),
        }
    )


def idle_span_table(emissions: pa.Table, partitions: pa.Array, last: int) -> pa.Table:
    """The idle-spans table (see the module docstring)."""
    kinds = emissions.column("kind").combine_chunks()
    marks = emissions.filter(pc.is_in(kinds, pa.array(["idle", "active"])))
    chan = _index(marks.column("channel"), partitions)
    times = _ints(marks.column("time"))
    idle = np.asarray(pc.equal(marks.column("kind"), "idle").to_numpy(zero_copy_only=False), bool)
    order = np.lexsort((np.arange(len(chan)), times, chan))  # by partition, time, row
    chan, times, idle = chan[order], times[order], idle[order]
    # A mark counts when its partition's previous mark was of the other kind (the first
    # mark of a partition counts only if it is idle): idle and active then alternate.
    first = np.concatenate([[True], chan[1:] != chan[:-1]])
    prev_idle = np.concatenate([[False], idle[:-1]])
    keep = np.where(first, idle, idle != prev_idle)
    chan, times, idle = chan[keep], times[keep], idle[keep]
    starts = np.flatnonzero(idle)
    nxt = starts + 1
    closed = nxt < len(chan)
    closed[closed] &= chan[nxt[closed]] == chan[starts[closed]]
    ends = np.full(len(starts), last, dtype=np.int64)
    ends[closed] = times[nxt[closed]]
    begin = times[starts]
    return pa.table(
        {
            "partition": partitions.take(pa.array(chan[starts])),
            "start": pa.array(begin),
            "end": pa.array(np.maximum(ends, begin)),
            "open": pa.array(~closed),
        }
    )


def compact_emissions(emissions: pa.Table | pa.RecordBatch, edges: np.ndarray) -> pa.Table:
    """``emissions`` without the watermark rows the views do not read: of each
    channel's watermark rows in one bin of ``edges``, only the last (the highest); every
    idle/active mark stays. Rows keep their order (see the module docstring)."""
    table = emissions if isinstance(emissions, pa.Table) else pa.Table.from_batches([emissions])
    if table.num_rows == 0:
        return table
    ends = edges[1:]
    n_bins = max(len(ends), 1)
    times = _ints(table.column("time"))
    bin_of = np.minimum(np.searchsorted(ends, times, side="left"), n_bins - 1)
    kinds = table.column("kind").combine_chunks()
    is_wm = np.asarray(pc.equal(kinds, "watermark").to_numpy(zero_copy_only=False), bool)
    channel = pc.dictionary_encode(table.column("channel").combine_chunks()).indices
    chan = np.asarray(channel.to_numpy(zero_copy_only=False), np.int64)
    rows = np.flatnonzero(is_wm)
    # The last watermark row of each (channel, bin): a row whose successor among the
    # watermark rows, ordered by (channel, bin, row), is of another (channel, bin).
    order = rows[np.lexsort((rows, bin_of[rows], chan[rows]))]
    group = chan[order] * n_bins + bin_of[order]
    last = np.append(group[1:] != group[:-1], True) if len(order) else np.zeros(0, bool)
    keep = ~is_wm
    keep[order[last]] = True
    return table.filter(pa.array(keep))


def partition_views(
    timeline: pa.Table | None,
    emissions: pa.Table | None,
    *,
    bins: int = DEFAULT_BINS,
    span: tuple[int, int] | None = None,
) -> PartitionViews:
    """The lag, holding and idle-spans tables of a run (see the module docstring).

    Args:
        timeline: the combined timeline (``time``, ``watermark``, ``status``,
            ``min_channel``), or None.
        emissions: every channel's emissions (``channel``, ``time``, ``kind``,
            ``watermark``), or None.
        bins: how many bins of arrival time the lag table has at most.
        span: the run's ``(first, last)`` arrival times; by default the smallest and
            largest ``time`` of both tables.

    Returns:
        The three tables; empty ones (with their columns) when there is nothing to show.
    """
    if bins < 1:
        raise ValueError(f"bins must be at least 1, got {bins}")
    partitions = partition_values(timeline, emissions)
    if emissions is None:
        emissions = _empty_emissions(partitions.type)
    span = span if span is not None else run_span(timeline, emissions)
    first, last = span if span is not None else (0, 0)
    edges = bin_edges(first, last, bins)
    if span is None:
        edges = edges[:1]  # no bins at all
    holding = (
        holding_table(timeline, partitions, last)
        if timeline is not None
        else holding_table(_no_timeline(partitions.type), partitions, last)
    )
    return PartitionViews(
        lag=lag_table(emissions, partitions, edges, timeline),
        holding=holding,
        idle_spans=idle_span_table(emissions, partitions, last),
    )


def with_views(inputs: ReportInputs, *, bins: int = DEFAULT_BINS) -> ReportInputs:
    """``inputs`` with ``lag``, ``holding`` and ``idle_spans`` computed from its timeline
    and emissions where they are missing (the same object when nothing is missing or
    there is nothing to compute them from)."""
    missing = inputs.lag is None or inputs.holding is None or inputs.idle_spans is None
    if not missing or (inputs.timeline is None and inputs.emissions is None):
        return inputs
    views = partition_views(inputs.timeline, inputs.emissions, bins=bins)
    return dataclasses.replace(
        inputs,
        lag=views.lag if inputs.lag is None else inputs.lag,
        holding=views.holding if inputs.holding is None else inputs.holding,
        idle_spans=views.idle_spans if inputs.idle_spans is None else inputs.idle_spans,
    )


@dataclass(frozen=True)
class LagMatrix:
    """The lag table as matrices, one row per partition (sorted), one column per bin.

    Attributes:
        partitions: the partition values.
        starts: each bin's start (arrival ticks).
        ends: each bin's end.
        state: index into :data:`STATES` (a missing row reads as ``none``).
        lag: lag in event-time ticks, NaN where the state is not ``active``.
    """

    partitions: list[object]
    starts: np.ndarray
    ends: np.ndarray
    state: np.ndarray
    lag: np.ndarray


def lag_matrix(lag: pa.Table, counted: tuple[int, ...] = (ACTIVE,)) -> LagMatrix:
    """Pivot a lag table (in any row order, rows may be missing) into matrices; the lag
    of rows in the ``counted`` states (the chart's: ``active``), NaN elsewhere."""
    parts = pc.unique(lag.column("partition").combine_chunks())
    parts = in_order(parts)
    row = _index(lag.column("partition"), parts)
    col = _ints(lag.column("bin"))
    n_bins = int(col.max()) + 1 if len(col) else 0
    starts = np.zeros(n_bins, np.int64)
    ends = np.zeros(n_bins, np.int64)
    starts[col] = _ints(lag.column("start"))
    ends[col] = _ints(lag.column("end"))
    state = np.full((len(parts), n_bins), NONE, np.int8)
    codes = _index(lag.column("state"), pa.array(STATES))
    state[row, col] = np.where(codes < 0, NONE, codes)
    values = np.full((len(parts), n_bins), np.nan)
    ticks = lag.column("lag")
    # An unchecked cast: a lag beyond 2^53 ticks (a sentinel far in the future) is
    # charted rounded, where the checked one refuses it.
    values[row, col] = np.asarray(
        ticks.cast(pa.float64(), safe=False).fill_null(np.nan).to_numpy(zero_copy_only=False),
        np.float64,
    )
    values[~np.isin(state, counted)] = np.nan
    return LagMatrix(parts.to_pylist(), starts, ends, state, values)


def lag_stats(lag: pa.Table, seconds_per_tick: float) -> pa.Table:
    """Each partition's lag over the bins where it was ``active`` or ``catching_up``:
    ``partition``, ``lag_median_s``, ``lag_max_s`` (NaN for a partition never either,
    or only in bins without an ``active`` partition)."""
    m = lag_matrix(lag, (ACTIVE, CATCHING_UP))
    seconds = m.lag * seconds_per_tick
    some = ~np.isnan(seconds).all(axis=1) if seconds.size else np.zeros(len(m.partitions), bool)
    median = np.full(len(m.partitions), np.nan)
    maximum = np.full(len(m.partitions), np.nan)
    if some.any():
        median[some] = np.nanmedian(seconds[some], axis=1)
        maximum[some] = np.nanmax(seconds[some], axis=1)
    return pa.table(
        {
            "partition": pa.array(m.partitions, lag.schema.field("partition").type),
            "lag_median_s": pa.array(median),
            "lag_max_s": pa.array(maximum),
        }
    )


def _no_timeline(channel_type: pa.DataType) -> pa.Table:
    return pa.table(
        {
            "time": pa.array([], pa.int64()),
            "watermark": pa.array([], pa.int64()),
            "status": pa.array([], pa.string()),
            "min_channel": pa.array([], channel_type),
        }
    )


__all__ = [
    "DEFAULT_BINS",
    "STATES",
    "LagMatrix",
    "PartitionViews",
    "bin_edges",
    "combined_at",
    "compact_emissions",
    "holding_table",
    "idle_span_table",
    "in_order",
    "lag_matrix",
    "lag_stats",
    "lag_table",
    "partition_values",
    "partition_views",
    "run_span",
    "with_views",
]
