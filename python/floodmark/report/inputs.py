"""What a report is made of: the tables collected from one run and how to read them."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa


@dataclass
class ReportInputs:
    """The collected figures of one run (every table optional).

    ``lag``, ``holding`` and ``idle_spans`` stay small however many partitions and
    however long the run (their definitions: :mod:`floodmark.report.partition_views`,
    which computes them from ``timeline`` and ``emissions`` when they are not given).
    The report draws the partitions from them, and reads ``emissions`` only for the
    per-partition line chart of a run with few partitions.

    Attributes:
        title: the page and summary title.
        settings: parameters shown at the top (``{"bound": "5s", ...}``), in order.
        timeline: the combined watermark: ``time`` (arrival ticks), ``watermark``
            (event-time ticks), ``status`` (``active``/``idle``), ``min_channel``.
        emissions: every channel's output: ``channel``, ``time``, ``kind``
            (``watermark``/``idle``/``active``), ``watermark``.
        partitions: one row per partition: ``partition``, ``records``, ``late``,
            ``dropped`` and, optionally, ``spark_dropped`` (what Spark's own global
            watermark would have dropped).
        firings: window firings: ``window_end`` (event-time ticks), ``fired_at``
            (arrival ticks, null if the end of input fired it), ``timing``
            (``on_time``/``late``), and optionally ``firings``: how many firings (keys)
            the row stands for (one each without it). Every key's window fires at the
            same watermark advance, so grouped rows stay few however many keys there are.
        analysis: the bound sweep of ``floodmark analyze``: ``idle_timeout``,
            ``bound``, ``late_fraction``, ``delay_median_s``, ``delay_p99_s``,
            ``windows``.
        lag: one row per partition and bin of arrival time (a fixed number of bins):
            ``partition``, ``bin``, ``start``, ``end``, ``state``
            (``none``/``idle``/``active``), ``watermark``, ``lag`` (event-time ticks
            behind the leading active partition, at the bin's end).
        holding: one row per partition: ``partition``, ``holding`` (arrival ticks it
            held the combined watermark back, as ``min_channel``), ``stints``.
        idle_spans: one row per idle span: ``partition``, ``start``, ``end``, ``open``.
        event_unit: tick unit of event times (``s``, ``ms``, ``us``, ``ns``).
        arrival_unit: tick unit of arrival times.
        arrival_clock: the arrival times are a clock that event times can be compared
            with (False: positions in row order, when no arrival column was given):
            without it the report shows no firing delay and no watermark lag behind
            the arrival clock.
        notes: free sentences shown under the summary (e.g. a recommendation).
    """

    title: str = "floodmark report"
    settings: dict[str, str] = field(default_factory=dict)
    timeline: pa.Table | None = None
    emissions: pa.Table | None = None
    partitions: pa.Table | None = None
    firings: pa.Table | None = None
    analysis: pa.Table | None = None
    lag: pa.Table | None = None
    holding: pa.Table | None = None
    idle_spans: pa.Table | None = None
    event_unit: str = "ms"
    arrival_unit: str = "ms"
    arrival_clock: bool = True
    notes: list[str] = field(default_factory=list)


__all__ = ["ReportInputs"]
