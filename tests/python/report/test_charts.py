"""Charts handle empty and degenerate inputs and thin very long series."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.image as mpimg
import numpy as np
import pyarrow as pa
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
