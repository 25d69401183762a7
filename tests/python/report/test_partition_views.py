"""The compact per-partition views: exact values on hand-made runs, sizes and speed."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import pytest
import synthetic

from floodmark.report.partition_views import bin_edges, lag_matrix, lag_stats, partition_views
from floodmark.time import I64_MAX, I64_MIN


def emissions(rows: list[tuple[str, int, str, int | None]]) -> pa.Table:
    chan, times, kinds, wms = zip(*rows, strict=True)
    return pa.table(
        {
            "channel": pa.array(chan, pa.string()),
            "time": pa.array(times, pa.int64()),
            "kind": pa.array(kinds, pa.string()),
            "watermark": pa.array(wms, pa.int64()),
        }
    )


def timeline(times: list[int], holders: list[str | None]) -> pa.Table:
    return pa.table(
        {
            "time": pa.array(times, pa.int64()),
            "watermark": pa.array(times, pa.int64()),
            "status": pa.array(["active"] * len(times)),
            "min_channel": pa.array(holders, pa.string()),
        }
    )


# Three partitions over arrival 0..30, three bins (0, 10], (10, 20], (20, 30]:
# a keeps up; b has no watermark at first (MIN), then 90, idles at 20, rejoins at 30;
# c goes idle at 5 and never comes back (its repeated idle at 25 counts once).
EMISSIONS = emissions(
    [
        ("a", 0, "active", None),  # an active with no idle before it: no span
        ("a", 0, "watermark", 100),
        ("a", 10, "watermark", 110),
        ("a", 20, "watermark", 130),
        ("b", 0, "watermark", I64_MIN),
        ("b", 10, "watermark", 90),
        ("b", 20, "idle", None),
        ("b", 30, "active", None),
        ("b", 30, "watermark", 140),
        ("c", 5, "idle", None),
        ("c", 25, "idle", None),
    ]
)
TIMELINE = timeline([0, 10, 15, 20], ["a", "b", "a", None])


def column(table: pa.Table, name: str) -> list[object]:
    return table.column(name).to_pylist()


def test_lag_table_exact() -> None:
    lag = partition_views(TIMELINE, EMISSIONS, bins=3).lag
    assert lag.num_rows == 9
    assert column(lag, "partition") == ["a"] * 3 + ["b"] * 3 + ["c"] * 3
    assert column(lag, "bin") == [0, 1, 2] * 3
    assert column(lag, "start") == [0, 10, 20] * 3
    assert column(lag, "end") == [10, 20, 30] * 3
    assert column(lag, "watermark") == [110, 130, 130, 90, 90, 140, None, None, None]
    assert column(lag, "state") == ["active"] * 3 + ["active", "idle", "active"] + ["idle"] * 3
    # Lead: 110 (a, b), 130 (a alone, b idle), 140 (b).
    assert column(lag, "lag") == [0, 0, 10, 20, None, 0, None, None, None]


def test_back_from_idle_behind_the_combined_watermark_is_catching_up() -> None:
    """b goes idle at 10 and comes back at 20 with 105 while the combined watermark is
    130: the valve leaves it out until it reaches 130 (at 30, with 135). Meanwhile it
    is not active (no active partition is behind the combined watermark), and its lag
    says how far it trails the lead (130 - 105), as the per-partition figures count it
    (a partition catching up all run long read "nan" there)."""
    em = emissions(
        [
            ("a", 0, "watermark", 100),
            ("a", 10, "watermark", 110),
            ("a", 20, "watermark", 130),
            ("b", 0, "watermark", 100),
            ("b", 10, "idle", None),
            ("b", 20, "active", None),
            ("b", 20, "watermark", 105),
            ("b", 30, "watermark", 135),
        ]
    )
    tl = pa.table(
        {
            "time": pa.array([0, 10, 20], pa.int64()),
            "watermark": pa.array([100, 110, 130], pa.int64()),
            "status": pa.array(["active"] * 3),
            "min_channel": pa.array(["a", "a", "a"]),
        }
    )
    lag = partition_views(tl, em, bins=3).lag
    assert column(lag, "state") == ["active"] * 3 + ["idle", "catching_up", "active"]
    assert column(lag, "lag") == [0, 0, 5, None, 25, 0]
    stats = lag_stats(lag, 1.0)
    assert stats.column("lag_median_s").to_pylist() == [0.0, 12.5]
    assert stats.column("lag_max_s").to_pylist() == [5.0, 25.0]
    # The chart colours the active rows' lag only (catching up has its own colour).
    assert np.isnan(lag_matrix(lag).lag[1]).tolist() == [True, True, False]
    assert column(lag, "watermark") == [110, 130, 130, 100, 105, 135]
    # Without the timeline there is no combined watermark to be behind.
    alone = partition_views(None, em, bins=3).lag
    assert column(alone, "state")[3:] == ["idle", "active", "active"]


def test_no_watermark_yet_is_its_own_state() -> None:
    em = emissions([("a", 0, "watermark", I64_MIN), ("a", 10, "watermark", 7)])
    lag = partition_views(None, em, bins=2).lag
    assert column(lag, "state") == ["none", "active"]
    assert column(lag, "watermark") == [None, 7]
    assert column(lag, "lag") == [None, 0]


def test_lag_saturates() -> None:
    em = emissions([("a", 0, "watermark", I64_MAX - 1), ("b", 0, "watermark", I64_MIN + 1)])
    lag = partition_views(None, em, bins=4).lag
    assert column(lag, "lag") == [0, I64_MAX]
    # beyond 2^53 ticks (a sentinel far in the future) the chart's matrix holds it
    # rounded; the checked float cast refused it and failed the whole report
    matrix = lag_matrix(lag).lag
    assert np.nanmax(matrix) == float(I64_MAX)


def test_holding_table_exact() -> None:
    holding = partition_views(TIMELINE, EMISSIONS, bins=3).holding
    # a: [0, 10) and [15, 20); b: [10, 15); the last row (nobody) runs to 30.
    assert column(holding, "partition") == ["a", "b", "c"]
    assert column(holding, "holding") == [15, 5, 0]
    assert column(holding, "stints") == [2, 1, 0]


def test_a_holder_for_no_time_is_no_stint() -> None:
    """Rows at one time (c at 15 is followed at once by a), and a last row at the
    run's end, hold for nothing: no stint, no span in the chart."""
    from floodmark.report.figures import min_channel_spans

    tl = timeline([0, 10, 15, 15, 20, 30], ["a", "b", "c", "b", "a", "c"])
    holding = partition_views(tl, EMISSIONS, bins=3).holding
    assert column(holding, "partition") == ["a", "b", "c"]
    assert column(holding, "holding") == [20, 10, 0]
    assert column(holding, "stints") == [2, 1, 0]
    assert min_channel_spans(tl, 30) == [("a", 0, 10), ("b", 10, 20), ("a", 20, 30)]


def test_idle_span_table_exact() -> None:
    spans = partition_views(TIMELINE, EMISSIONS, bins=3).idle_spans
    assert spans.to_pylist() == [
        {"partition": "b", "start": 20, "end": 30, "open": False},
        {"partition": "c", "start": 5, "end": 30, "open": True},
    ]


def test_bin_edges_are_exact_and_never_empty() -> None:
    big = 2**62
    assert bin_edges(-big, big, 3).tolist() == [
        -big,
        -big + (2 * big) // 3,
        -big + (4 * big) // 3,
        big,
    ]
    assert bin_edges(0, 2, 200).tolist() == [0, 1, 2]
    assert bin_edges(5, 5, 200).tolist() == [5, 5]


def test_empty_run_gives_empty_tables() -> None:
    views = partition_views(None, None)
    assert views.lag.num_rows == views.holding.num_rows == views.idle_spans.num_rows == 0
    assert views.lag.column_names == [
        "partition",
        "bin",
        "start",
        "end",
        "state",
        "watermark",
        "lag",
    ]
    one = partition_views(timeline([3], ["a"]), None, bins=10)
    assert column(one.holding, "holding") == [0]
    assert column(one.lag, "state") == ["none"]


def test_synthetic_run_finds_the_laggard_and_the_idle_partition() -> None:
    views = partition_views(synthetic.many_timeline(50), synthetic.many_emissions(50), bins=120)
    assert views.lag.num_rows == 50 * 120
    assert column(views.holding, "partition")[0] == synthetic.LAGGING
    lag = views.lag.to_pandas()
    mean = lag.groupby("partition")["lag"].mean()
    assert mean.idxmax() == synthetic.LAGGING
    assert 29_000 < mean[synthetic.LAGGING] < 31_000
    spans = views.idle_spans.to_pandas()
    idle = spans[spans["partition"] == synthetic.IDLE]
    assert idle[["start", "end"]].values.tolist() == [
        [synthetic.EPOCH + 100 * 200, synthetic.EPOCH + 200 * 200]
    ]
    assert set(spans["partition"]) == {synthetic.IDLE, 10, 20, 30, 40}


def test_a_thousand_partitions_and_100k_emissions_in_well_under_a_second() -> None:
    em = synthetic.many_emissions(1_000, steps=100)
    tl = synthetic.many_timeline(1_000, steps=100)
    assert em.num_rows >= 95_000
    best = np.inf
    for _ in range(3):
        t0 = time.perf_counter()
        views = partition_views(tl, em)
        best = min(best, time.perf_counter() - t0)
    assert views.lag.num_rows == 1_000 * 200
    assert best < 0.5, best


@pytest.mark.parametrize("bins", [1, 7, 200])
def test_every_partition_has_every_bin(bins: int) -> None:
    views = partition_views(synthetic.many_timeline(16), synthetic.many_emissions(16), bins=bins)
    assert views.lag.num_rows == 16 * bins
    assert views.holding.num_rows == 16


def test_partitions_labelled_as_text_are_in_number_order() -> None:
    """The command line labels partitions as text; ``10`` came before ``2`` in every
    CSV. Integers come in number order, other labels (``(null)``) after them."""
    em = emissions([(c, 0, "watermark", 5) for c in ("10", "2", "(null)", "1")])
    views = partition_views(None, em, bins=1)
    assert column(views.lag, "partition") == ["1", "2", "10", "(null)"]
    assert column(views.idle_spans, "partition") == []
    assert column(views.holding, "partition") == ["1", "2", "10", "(null)"]
