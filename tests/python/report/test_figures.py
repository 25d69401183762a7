"""The numbers behind the charts: delays, quantiles, spans, lags, downsampling."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pyarrow as pa
import synthetic

from floodmark.report import figures
from floodmark.time import I64_MAX, I64_MIN, format_duration


def test_firing_delay_is_exact_on_time_only_and_mixed_units() -> None:
    table = pa.table(
        {
            "window_end": pa.array([10_000, 20_000, 30_000], pa.int64()),  # ms
            "fired_at": pa.array([15_200_000, None, 31_000_000], pa.int64()),  # us
            "timing": ["on_time", "on_time", "late"],
        }
    )
    assert figures.firing_delays(table, "ms", "us").tolist() == [5.2]


def test_delay_stats() -> None:
    stats = figures.delay_stats(np.arange(101, dtype=np.float64))
    assert (stats.count, stats.median, stats.p99, stats.max) == (101, 50.0, 99.0, 100.0)
    assert figures.delay_stats(np.array([])).count == 0


def test_channel_series_skips_min_watermark() -> None:
    series = figures.channel_series(synthetic.emissions())
    assert set(series) == {0, 1, 2, 3}
    assert all((w != I64_MIN).all() for _, w in series.values())


def test_min_channel_spans() -> None:
    holders = figures.min_channel_spans(synthetic.timeline(), end=0)
    assert [h[0] for h in holders] == [1, 3]


def test_timeline_csv_has_ticks_and_utc_dates() -> None:
    tl = pa.table(
        {
            "time": pa.array([1_000, 2_500, 4_000], pa.int64()),  # ms
            "watermark": pa.array([I64_MIN, 2_000_000, I64_MAX], pa.int64()),  # us
            "status": ["active", "idle", "active"],
            "min_channel": pa.array([0, None, 1], pa.int64()),
        }
    )
    out = figures.timeline_csv(tl, "us", "ms")
    assert out.column_names == [
        "time",
        "time_utc",
        "watermark",
        "watermark_utc",
        "status",
        "min_channel",
    ]
    assert out["time_utc"].to_pylist() == [
        "1970-01-01T00:00:01.000",
        "1970-01-01T00:00:02.500",
        "1970-01-01T00:00:04.000",
    ]
    assert out["watermark_utc"].to_pylist() == [
        "none yet",
        "1970-01-01T00:00:02.000",
        "end of input",
    ]
    assert out["watermark"].to_pylist() == tl["watermark"].to_pylist()


def test_seconds_between_is_exact_across_units() -> None:
    later = np.array([1_767_225_600_123], np.int64)  # ms
    earlier = np.array([1_767_225_600_000_001], np.int64)  # us
    assert figures.seconds_between(later, "ms", earlier, "us").tolist() == [0.122999]


def test_downsample_keeps_ends_and_caps_points() -> None:
    x = np.arange(100_000)
    dx, dy = figures.downsample(x, x * 2, 1000)
    assert len(dx) <= 1000 and dx[0] == 0 and dx[-1] == 99_999
    assert (dy == dx * 2).all()


def test_format_duration_and_label() -> None:
    assert format_duration(timedelta(seconds=5)) == "5s"
    assert format_duration(timedelta(milliseconds=200)) == "200ms"
    assert format_duration(timedelta(microseconds=1500)) == "1500us"
    assert format_duration(timedelta(minutes=1)) == "1m"
    assert format_duration(timedelta(0)) == "0s"
    assert figures.label(None) == "-" and figures.label(1234) == "1,234"


def test_seconds_between_far_apart_values_does_not_wrap() -> None:
    """Event times in s near year 9999 and arrivals in ns: scaled to ns first, they left
    the int64 range (a delay of +207 years for one of -7,977)."""
    later = np.array([1_700_000_000_000_000_000], np.int64)  # ns
    earlier = np.array([253_402_300_000], np.int64)  # s
    assert figures.seconds_between(later, "ns", earlier, "s").tolist() == [-251_702_300_000.0]


def test_equal_delays_are_one_float_whatever_their_ends() -> None:
    """35.2 s reached from different ends is one value (the chart draws a bar per value)."""
    later = np.array([35_200, 36_200, 1_700_000_035_200, 1_700_000_036_000, -800], np.int64)
    earlier = np.array([0, 1_000, 1_700_000_000_000, 1_700_000_000_800, -36_000], np.int64)
    assert set(figures.seconds_between(later, "ms", earlier, "ms").tolist()) == {35.2}


def test_utc_strings_of_coarse_and_fine_units_stay_in_range() -> None:
    """Seconds near the int64 top were scaled to ms and wrapped to 1969."""
    far = figures.utc_strings(np.array([I64_MAX - 1, -5], np.int64), "s").tolist()
    assert far == ["292277026596-12-04T15:30:06.000", "1969-12-31T23:59:55.000"]
    fine = figures.utc_strings(np.array([1_700_000_000_123_456_789], np.int64), "ns").tolist()
    assert fine == ["2023-11-14T22:13:20.123"]


def test_delays_on_a_grid_get_one_bar_each() -> None:
    """A histogram's edges fell on the 200 ms grid's values and split equal delays
    between two bins: the demo's chart showed 35.3 s and 35.7 s, which never occur."""
    delays = np.repeat([35.2, 35.4, 35.6, 35.8, 36.0, 36.2], [10, 20, 15, 8, 1, 1])
    bars = figures.delay_bars(delays, 80)
    assert bars is not None
    assert bars.values.tolist() == [35.2, 35.4, 35.6, 35.8, 36.0, 36.2]
    assert bars.counts.tolist() == [10, 20, 15, 8, 1, 1]
    assert 0 < bars.width < 0.2
    one = figures.delay_bars(np.array([9.2e15]), 80)
    assert one is not None and one.counts.tolist() == [1] and one.width == 0.8
    assert figures.delay_bars(np.arange(81, dtype=np.float64), 80) is None


def test_a_count_in_a_float_column_reads_as_a_count() -> None:
    """The delay table's ``firings`` row (in its column of seconds) read 5.685e+04."""
    assert figures.label(56_849.0) == "56,849"
    assert figures.label(35.2) == "35.2" and figures.label(float("nan")) == "nan"


def test_times_beyond_the_chart_dates_are_found() -> None:
    assert figures.beyond_chart(np.array([0, I64_MAX - 1]), "ms")
    assert not figures.beyond_chart(np.array([0, 1_700_000_000_000]), "ms")
    assert not figures.beyond_chart(np.array([], np.int64), "ms")


def test_many_delays_are_binned_without_splitting_equal_ones() -> None:
    """More distinct delays than bars: a histogram's edges on the even split fell on the
    200 ms grid's values and put some of a delay's windows in one bin, some in the next."""
    rng = np.random.default_rng(7)
    grid = np.round(np.arange(401) * 0.2, 1)  # an even split of 80 bins: whole seconds
    delays = np.repeat(grid, rng.integers(1, 50, len(grid)))
    edges = figures.delay_edges(delays, 80)
    assert len(edges) - 1 <= 80 and np.all(np.diff(edges) > 0)
    assert edges[0] == delays.min() and edges[-1] == delays.max()
    assert not np.isin(edges[1:-1], grid).any()
    counts, _ = np.histogram(delays, edges)
    assert counts.sum() == len(delays)
    bins = np.searchsorted(edges, grid, side="right")  # each value's bin, one per value
    per_bin = np.bincount(np.minimum(bins, len(edges) - 1) - 1, minlength=len(counts))
    assert (per_bin > 0).sum() == len(counts)  # no empty bin: edges sit between values
    near_end = np.array([9.2e15, 9.2e15 + 2048, 9.2e15 + 4096] * 30 + list(range(100)), float)
    coarse = figures.delay_edges(near_end, 80)
    assert np.all(np.diff(coarse) > 0)
    assert np.histogram(near_end, coarse)[0].sum() == len(near_end)
    assert figures.delay_edges(np.array([3.0, 3.0]), 80).tolist() == [3.0, 4.0]
