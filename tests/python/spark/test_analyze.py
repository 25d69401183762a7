"""`analyze_bounds` (one pass for every candidate bound) agrees exactly with running the
full pipeline at each bound."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from spark_helpers import jobs

from floodmark import SlidingEventTimeWindows, TumblingEventTimeWindows, WatermarkStrategy
from floodmark.datagen import StreamSpec, generate
from floodmark.exceptions import InvalidParameterError
from floodmark.spark import assign_watermarks, window_aggregate
from floodmark.spark.analyze import analyze_bounds, nearest_rank

SPEC = StreamSpec(
    rows=8_000,
    partitions=5,
    keys=12,
    duration_ms=120_000,
    disorder_ms=3_000,
    lag_ms=8_000,
    quiet_partition=4,
    quiet_from_ms=40_000,
    quiet_for_ms=15_000,
    very_late_fraction=0.01,
    very_late_ms=10_000,
    seed=3,
)
BOUNDS = [timedelta(0), timedelta(seconds=1), timedelta(milliseconds=2500), timedelta(seconds=6)]
IDLE = [None, timedelta(seconds=3)]
COLS = {"event_time": "event_time", "channel": "partition", "arrival": "arrival"}


@pytest.fixture(scope="module")
def df(spark: Any) -> Any:
    return spark.createDataFrame(generate(SPEC)).cache()


@pytest.fixture(scope="module")
def late_by_strategy(df: Any) -> dict[tuple[Any, Any], int]:
    """``assign_watermarks``' late records per (bound, idle timeout), counted once for
    both windows' analyses (the late count does not depend on the window)."""
    return {}


@pytest.mark.parametrize(
    "window",
    [
        TumblingEventTimeWindows.of(timedelta(seconds=5)),
        SlidingEventTimeWindows.of(timedelta(seconds=6), timedelta(seconds=2)),
    ],
)
def test_analysis_equals_full_pipeline_at_each_bound(
    df: Any, window: Any, late_by_strategy: dict[tuple[Any, Any], int]
) -> None:
    table = analyze_bounds(
        df, bounds=BOUNDS, idle_timeouts=IDLE, window=window, key="key", **COLS
    ).to_pylist()
    assert len(table) == len(BOUNDS) * len(IDLE)
    for row in table:
        strategy = WatermarkStrategy.for_bounded_out_of_orderness(row["bound"])
        if row["idle_timeout"] is not None:
            strategy = strategy.with_idleness(row["idle_timeout"])
        candidate = (row["bound"], row["idle_timeout"])
        if candidate not in late_by_strategy:
            marked = assign_watermarks(df, strategy, **COLS).toArrow()
            late_by_strategy[candidate] = int(np.sum(marked["is_late"].to_numpy()))
        assert row["late"] == late_by_strategy[candidate], row
        assert row["records"] == SPEC.rows
        out = window_aggregate(df, strategy, window, key="key", **COLS)
        res = out.results.where("timing = 'on_time'").toArrow()
        out.unpersist()
        fired = res.filter(res["fired_at"].is_valid())
        assert row["windows"] == fired.num_rows, row
        assert row["fired_at_end"] == res.num_rows - fired.num_rows, row
        delay = (fired["fired_at"].to_numpy() - fired["window_end"].to_numpy()) / 1000
        ones = np.ones(len(delay), dtype=np.int64)
        assert row["delay_median_s"] == pytest.approx(nearest_rank(delay, ones, 0.5))
        assert row["delay_p99_s"] == pytest.approx(nearest_rank(delay, ones, 0.99))
    lates = [r["late_fraction"] for r in table if r["idle_timeout"] is None]
    assert lates == sorted(lates, reverse=True) and lates[0] > lates[-1]


def test_the_number_of_jobs_does_not_grow_with_the_bounds(df: Any) -> None:
    window = TumblingEventTimeWindows.of(timedelta(seconds=5))
    spark = df.sparkSession
    counts = []
    for bounds in ([timedelta(0)], [timedelta(milliseconds=250 * i) for i in range(12)]):
        before = jobs(spark)
        table = analyze_bounds(df, bounds=bounds, window=window, key="key", **COLS)
        assert table.num_rows == len(bounds)
        counts.append(jobs(spark) - before)
    assert counts[0] > 0 and counts[0] == counts[1], counts


def test_session_windows_are_refused(df: Any) -> None:
    from floodmark import EventTimeSessionWindows

    with pytest.raises(InvalidParameterError, match="window"):
        analyze_bounds(df, bounds=BOUNDS, window=EventTimeSessionWindows.with_gap(5000), **COLS)


def test_nearest_rank() -> None:
    v = np.array([3.0, 1.0, 2.0])
    assert nearest_rank(v, np.array([1, 1, 1]), 0.5) == 2.0
    assert nearest_rank(v, np.array([0, 5, 1]), 0.99) == 2.0
    assert np.isnan(nearest_rank(v, np.zeros(3, dtype=np.int64), 0.5))
    # With unit weights, numpy's nearest-rank (inverted CDF) percentile; a weight is
    # that many copies of its value.
    rng = np.random.default_rng(5)
    for n in (1, 2, 7, 100):
        values = rng.normal(size=n).round(2)
        weights = rng.integers(0, 4, size=n)
        for q in (0.0, 0.1, 0.5, 0.9, 0.99, 1.0):
            want = np.quantile(values, q, method="inverted_cdf")
            assert nearest_rank(values, np.ones(n, dtype=np.int64), q) == want, (n, q)
            if weights.sum():
                copies = np.repeat(values, weights)
                want = np.quantile(copies, q, method="inverted_cdf")
                assert nearest_rank(values, weights, q) == want, (n, q, weights)


@pytest.mark.parametrize("end", [-(2**63), 2**63 - 10])
def test_event_times_at_the_ends_of_the_long_range_are_refused_naming_the_column(
    spark: Any, end: int
) -> None:
    """The window arithmetic (``ts - offset``, ``start + size``) overflowed under ANSI
    mode with a bare ``ArithmeticException``; now refused, naming the column."""
    from floodmark.exceptions import InvalidInputError

    rows = [(i % 2, end + (i if end < 0 else -i), 1_000 + i, "a") for i in range(10)]
    frame = spark.createDataFrame(rows, "partition long, event_time long, arrival long, key string")
    window = TumblingEventTimeWindows.of(timedelta(seconds=5))
    with pytest.raises(InvalidInputError, match="within 2\\^62") as err:
        analyze_bounds(frame, bounds=BOUNDS, window=window, key="key", **COLS)
    assert err.value.column == "event_time"
    with pytest.raises(InvalidParameterError, match="under 2\\^60") as perr:
        analyze_bounds(
            frame, bounds=BOUNDS, window=TumblingEventTimeWindows.of(2**61), key="key", **COLS
        )
    assert perr.value.parameter == "window"


@pytest.mark.parametrize("names", [("end", "w0"), ("start", "m0")])
def test_the_inputs_column_names_do_not_change_the_analysis(df: Any, names: Any) -> None:
    """A key or channel named like a column the analysis works with (``start``, ``end``,
    ``w0``, ``m0``) gives the numbers it gives under other names."""
    window = SlidingEventTimeWindows.of(timedelta(seconds=6), timedelta(seconds=2))
    kw: dict[str, Any] = {"bounds": BOUNDS[1:2], "idle_timeouts": [None], "window": window}
    want = analyze_bounds(df, key="key", **kw, **COLS)
    key, channel = names
    renamed = df.withColumnRenamed("key", key).withColumnRenamed("partition", channel)
    cols = {**COLS, "channel": channel}
    assert analyze_bounds(renamed, key=key, **kw, **cols) == want


def test_row_order_has_no_firing_delay_and_no_records_no_late_fraction(df: Any) -> None:
    """Without an arrival column the arrivals are row positions, no clock: the delay
    columns are NaN (they were row ticks minus epoch window ends), the late counts
    still computed. An input with no records has no late fraction (NaN, not 0)."""
    window = TumblingEventTimeWindows.of(timedelta(seconds=5))
    kw = {"event_time": "event_time", "channel": "partition", "window": window}
    rows = analyze_bounds(df, bounds=BOUNDS[:2], **kw).to_pylist()
    assert all(np.isnan(r["delay_median_s"]) and np.isnan(r["delay_p99_s"]) for r in rows)
    assert all(r["records"] == SPEC.rows and r["windows"] > 0 for r in rows)
    timed = analyze_bounds(df, bounds=BOUNDS[:2], arrival="arrival", **kw).to_pylist()
    assert all(r["windows"] > 0 and not np.isnan(r["delay_median_s"]) for r in timed)
    empty = analyze_bounds(df.limit(0), bounds=BOUNDS[:1], arrival="arrival", **kw).to_pylist()
    assert empty[0]["records"] == 0 and np.isnan(empty[0]["late_fraction"])


def test_candidates_equal_in_ticks_are_one_row(df: Any) -> None:
    """A bound or idle timeout given twice (as a duration and as its ticks, or twice
    over) is one candidate: one row each, the rows of the list without repeats."""
    window = TumblingEventTimeWindows.of(timedelta(seconds=5))
    kw = {**COLS, "key": "key", "window": window}
    want = analyze_bounds(df, bounds=[timedelta(seconds=1)], idle_timeouts=[IDLE[1], None], **kw)
    got = analyze_bounds(
        df,
        bounds=[timedelta(seconds=1), 1000, timedelta(seconds=1)],
        idle_timeouts=[IDLE[1], None, 3000, None],
        **kw,
    )
    assert got == want


def test_a_bound_or_timeout_too_large_to_report_is_refused_before_any_job(df: Any) -> None:
    """A bound under 2^62 milliseconds but beyond 2^63 microseconds (the report's
    durations) ran every job and then failed with Arrow's ``Timedelta too large``;
    refused naming the parameter, before any job. Just under it, a bound is reported
    exactly (to the microsecond)."""
    window = TumblingEventTimeWindows.of(timedelta(seconds=5))
    kw = {**COLS, "key": "key", "window": window}
    spark = df.sparkSession
    before = jobs(spark)
    for parameter, value in (("bounds", [timedelta(days=200_000_000)]), ("idle_timeouts", [2**62])):
        with pytest.raises(InvalidParameterError, match="too large to report") as err:
            analyze_bounds(df, **{"bounds": BOUNDS, parameter: value, **kw})
        assert err.value.parameter == parameter
    assert jobs(spark) == before
    big = 2**63 // 1_000 - 1  # milliseconds: the largest that fits in microseconds
    table = analyze_bounds(df, bounds=[big], **kw)
    assert table["bound"].cast(pa.int64()).to_pylist() == [big * 1_000]
