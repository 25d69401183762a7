"""The numbers behind the charts: delays, quantiles, spans, lags, downsampling."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pyarrow as pa
import synthetic

from floodmark.report import figures
from floodmark.time import I64_MIN


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


def test_idle_and_min_channel_spans() -> None:
    em = synthetic.emissions()
    spans = figures.idle_spans(em, end=0)
    assert list(spans) == [2]
    start, stop = spans[2][0]
    assert stop - start == 100 * 200
    holders = figures.min_channel_spans(synthetic.timeline(), end=0)
    assert [h[0] for h in holders] == [1, 3]


def test_partition_lag_finds_the_lagging_partition() -> None:
    lag = figures.partition_lag(synthetic.emissions(), "ms")
    medians = dict(zip(lag["channel"].to_pylist(), lag["lag_median_s"].to_pylist(), strict=False))
    assert max(medians, key=lambda c: medians[c]) == 1
    assert abs(medians[1] - 30.01) < 1e-9


def test_downsample_keeps_ends_and_caps_points() -> None:
    x = np.arange(100_000)
    dx, dy = figures.downsample(x, x * 2, 1000)
    assert len(dx) <= 1000 and dx[0] == 0 and dx[-1] == 99_999
    assert (dy == dx * 2).all()


def test_format_duration_and_label() -> None:
    assert figures.format_duration(timedelta(seconds=5)) == "5s"
    assert figures.format_duration(timedelta(milliseconds=200)) == "200ms"
    assert figures.format_duration(timedelta(microseconds=1500)) == "1500us"
    assert figures.format_duration(timedelta(minutes=1)) == "1m"
    assert figures.format_duration(timedelta(0)) == "0s"
    assert figures.label(None) == "-" and figures.label(1234) == "1,234"
