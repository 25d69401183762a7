"""The Spark bench scripts refuse options they cannot honour before they generate data
or start Spark, and the pipeline bench's generator writes the layouts it names."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

BENCHES = Path(__file__).resolve().parents[2] / "benches"


def run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCHES / script), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("script", "args", "message"),
    [
        ("spark_pipeline.py", ["--rows", "0"], "--rows and --repeat must be at least 1"),
        ("spark_pipeline.py", ["--repeat", "0"], "--rows and --repeat must be at least 1"),
        ("spark_pipeline.py", ["--span", "1h,2h"], "--span '2h': expected"),
        ("spark_pipeline.py", ["--partitions", "16,4"], "--partitions '4': expected counts"),
        ("spark_pipeline.py", ["--partitions", "x"], "--partitions 'x': expected counts"),
        ("spark_pipeline.py", ["--only", "assign", "--span", "1h"], "--only selects steps"),
        ("spark_pipeline.py", ["--layout", "channel"], "--layout applies to the grid mode"),
        ("spark_pipeline.py", ["--layout", "rows"], "invalid choice: 'rows'"),
        ("spark_streaming.py", ["--files", "0"], "must be at least 1"),
        ("spark_streaming.py", ["--per-trigger", "0"], "must be at least 1"),
        ("stream_sources.py", ["--partitions", "4"], "--partitions at least 8"),
        ("stream_sources.py", ["--batches", "0"], "--batches must be at least 1"),
    ],
)
def test_a_bad_option_is_refused_first(script: str, args: list[str], message: str) -> None:
    done = run(script, *args)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("layout", ["arrival", "channel"])
def test_the_pipeline_bench_writes_its_layouts(tmp_path: Path, layout: str) -> None:
    """``--layout arrival``: one file; ``channel``: 16 files, each partition whole in one
    of them, in arrival order (the layout the channel-pass experiment read)."""
    out = tmp_path / "rows"
    args = ["--generate", str(out), "--rows", "3000", "--partitions-one", "40", "--span", "1h"]
    done = run("spark_pipeline.py", *args, "--layout", layout)
    assert done.returncode == 0, done.stderr
    table = pq.read_table(out)
    assert table.num_rows == 3000
    assert pc.count_distinct(table["partition"]).as_py() == 40
    if layout == "arrival":
        assert out.is_file()
        return
    files = sorted(out.iterdir())
    assert len(files) == 16
    homes: dict[int, str] = {}
    for f in files:
        part = pq.read_table(f).combine_chunks()
        assert pc.all(pc.greater_equal(pc.pairwise_diff(part["arrival"].chunk(0))[1:], 0)).as_py()
        for p in set(part["partition"].to_pylist()):
            assert homes.setdefault(p, f.name) == f.name
