"""Charts handle empty and degenerate inputs and thin very long series."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.image as mpimg
import numpy as np
import pyarrow as pa
import pytest
import synthetic

from floodmark.report import charts


def test_backend_is_agg() -> None:
    assert matplotlib.get_backend().lower() == "agg"


def test_empty_inputs_draw_a_message(tmp_path: Path) -> None:
    empty_tl = synthetic.timeline().slice(0, 0)
    assert charts.watermark_chart(empty_tl, None, tmp_path / "a.png").stat().st_size > 0
    assert charts.delay_chart(np.array([]), tmp_path / "b.png").stat().st_size > 0
    assert (
        charts.partition_chart(synthetic.partitions().slice(0, 0), tmp_path / "c.png")
        .stat()
        .st_size
        > 0
    )
    assert (
        charts.analysis_chart(synthetic.analysis().slice(0, 0), tmp_path / "d.png").stat().st_size
        > 0
    )


def test_long_series_and_numeric_bounds(tmp_path: Path) -> None:
    n = 200_000
    times = np.arange(n, dtype=np.int64) * 200
    tl = pa.table(
        {
            "time": times,
            "watermark": times - 5000,
            "status": ["active"] * n,
            "min_channel": pa.array(np.zeros(n, np.int64)),
        }
    )
    path = charts.watermark_chart(tl, None, tmp_path / "long.png")
    assert mpimg.imread(path).shape[1] > 400
    analysis = synthetic.analysis()
    seconds = pa.array([b.total_seconds() for b in analysis["bound"].to_pylist()])
    analysis = analysis.set_column(1, "bound", seconds)
    assert charts.analysis_chart(analysis, tmp_path / "n.png").stat().st_size > 0


def test_partition_charts_of_empty_and_degenerate_inputs(tmp_path: Path) -> None:
    from floodmark.report import partition_charts as pc
    from floodmark.report.partition_views import partition_views

    empty = partition_views(None, None)
    assert pc.lag_heatmap(empty.lag, tmp_path / "a.png").stat().st_size > 0
    assert pc.holding_chart(empty.holding, tmp_path / "b.png", span=0).stat().st_size > 0
    assert pc.idle_chart(empty.idle_spans, tmp_path / "c.png", first=0, last=0).exists()
    no_wm = synthetic.timeline().slice(0, 3)  # every watermark MIN
    assert pc.combined_chart(no_wm, tmp_path / "d.png").stat().st_size > 0
    # One tick of arrival time: a single bin.
    one = partition_views(synthetic.timeline().slice(3, 1), synthetic.emissions().slice(3, 1))
    assert one.lag.num_rows == 2  # partitions 0 (emitted) and 1 (held the minimum)
    assert pc.lag_heatmap(one.lag, tmp_path / "e.png").stat().st_size > 0


def test_heatmap_groups_rows_beyond_its_pixel_budget(tmp_path: Path) -> None:
    from floodmark.report import partition_charts as pc
    from floodmark.report.partition_views import partition_views

    em = synthetic.many_emissions(1_000, steps=60)
    views = partition_views(synthetic.many_timeline(1_000, 60, em), em, bins=50)
    full = mpimg.imread(pc.lag_heatmap(views.lag, tmp_path / "full.png"))
    grouped = mpimg.imread(pc.lag_heatmap(views.lag, tmp_path / "g.png", max_pixel_rows=250))
    assert full.shape[0] > 1_000 + 240  # a pixel row each, and the worst 15 above
    assert grouped.shape[0] < full.shape[0] - 400  # 250 rows of 2 pixels


def test_rank_by_lag_puts_the_worst_first_and_the_never_active_last() -> None:
    from floodmark.report.partition_charts import rank_by_lag

    nan = np.nan
    lag = np.array([[1.0, 1.0], [nan, nan], [5.0, nan], [0.0, 3.0]])
    assert rank_by_lag(lag).tolist() == [2, 3, 0, 1]


def test_combined_chart_shades_idle_status(tmp_path: Path) -> None:
    from floodmark.report import partition_charts as pc

    tl = synthetic.timeline()
    status = ["idle" if 100 <= i < 150 else "active" for i in range(tl.num_rows)]
    tl = tl.set_column(2, "status", pa.array(status))
    image = mpimg.imread(pc.combined_chart(tl, tmp_path / "idle.png"))
    blue = (image[..., 2] > 0.8) & (image[..., 0] < 0.85) & (image[..., 0] > 0.6)
    assert blue.sum() > 1_000  # the shaded span (IDLE_COLOUR at alpha 0.25 on white)


@pytest.mark.parametrize("unit", ["us", "ms"])
def test_spans_reaching_a_sentinel_arrival_are_drawn_to_the_limit(
    unit: str, tmp_path: Path
) -> None:
    """An arrival at 9999-12-31 (or at the int64 end) made the idle and holder strips
    run past matplotlib's last date: the spans' ends are clipped like their starts."""
    per_s = {"us": 10**6, "ms": 10**3}[unit]
    t0, t9 = 1_767_225_600 * per_s, 253_402_300_799 * per_s  # 2026-01-01, 9999-12-31
    for end in (t9, 2**62):
        timeline = pa.table(
            {
                "time": pa.array([t0, end], pa.int64()),
                "watermark": pa.array([t0, t0 + 1], pa.int64()),
                "status": ["active", "active"],
                "min_channel": ["0", "0"],
            }
        )
        emissions = pa.table(
            {
                "channel": ["0", "1", "1"],
                "time": pa.array([t0, t0, end], pa.int64()),
                "kind": ["watermark", "idle", "active"],
                "watermark": pa.array([t0, None, None], pa.int64()),
            }
        )
        path = charts.watermark_chart(
            timeline, emissions, tmp_path / f"far-{end}.png", event_unit=unit, arrival_unit=unit
        )
        assert mpimg.imread(path).size > 0


def test_the_watermark_chart_says_when_it_draws_times_at_its_date_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A watermark at a far sentinel time is drawn at 9000-01-01; the chart says so (it
    drew a flat line there with no sign of the clipping), and only then."""
    from matplotlib.axes import Axes

    from floodmark.report.figures import BEYOND_NOTE

    notes: list[str] = []
    annotate = Axes.annotate

    def noted(self: Axes, text: str, *args: object, **kwargs: object) -> object:
        notes.append(text)
        return annotate(self, text, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Axes, "annotate", noted)
    t0 = 1_767_225_600_000  # 2026-01-01 in ms
    for far, noted_beyond in ((2**62, True), (t0 + 5_000, False)):
        notes.clear()
        timeline = pa.table(
            {
                "time": pa.array([t0, t0 + 1_000], pa.int64()),
                "watermark": pa.array([t0, far], pa.int64()),
                "status": ["active", "active"],
                "min_channel": ["0", "0"],
            }
        )
        charts.watermark_chart(timeline, None, tmp_path / "wm.png")
        assert (BEYOND_NOTE in notes) is noted_beyond


def test_times_all_at_a_far_sentinel_warn_nothing(tmp_path: Path) -> None:
    """Every arrival at a far sentinel (drawn at one date): matplotlib warned about
    microsecond ticks far from its epoch, which reached the terminal."""
    import warnings

    far = 2**62
    timeline = pa.table(
        {
            "time": pa.array([far, far + 1_000], pa.int64()),
            "watermark": pa.array([far, far + 1_000], pa.int64()),
            "status": ["active", "active"],
            "min_channel": ["0", "0"],
        }
    )
    emissions = pa.table(
        {
            "channel": ["0"],
            "time": pa.array([far], pa.int64()),
            "kind": ["watermark"],
            "watermark": pa.array([far], pa.int64()),
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        charts.watermark_chart(timeline, emissions, tmp_path / "wm.png")
