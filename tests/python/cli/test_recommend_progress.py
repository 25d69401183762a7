"""Choosing the bound, and the progress lines."""

from __future__ import annotations

import io
import math
import shlex
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from floodmark.progress import QUIET_SPARK_CONF, SPARK_LOG, Progress
from floodmark.report.recommend import recommend_bound

S = timedelta(seconds=1)


def sweep(rows: list[tuple[timedelta, timedelta, float, float]]) -> pa.Table:
    return pa.table(
        {
            "idle_timeout": pa.array([r[0] for r in rows], pa.duration("us")),
            "bound": pa.array([r[1] for r in rows], pa.duration("us")),
            "late_fraction": [r[2] for r in rows],
            "delay_median_s": [1.0] * len(rows),
            "delay_p99_s": [r[3] for r in rows],
            "windows": [10] * len(rows),
        }
    )


def test_smallest_bound_meeting_target() -> None:
    t = sweep(
        [
            (30 * S, 0 * S, 0.2, 1.0),
            (30 * S, 2 * S, 0.02, 3.0),
            (30 * S, 5 * S, 0.005, 6.0),
            (30 * S, 10 * S, 0.001, 11.0),
        ]
    )
    rec = recommend_bound(t, 0.01)
    assert rec is not None and rec.bound == 5 * S
    assert "--bound 5s" in rec.sentence(0.01)
    assert recommend_bound(t, 0.0001) is None
    assert recommend_bound(t, 0.2) is not None and recommend_bound(t, 0.2).bound == 0 * S  # type: ignore[union-attr]


def test_ties_prefer_fewer_late_then_lower_delay() -> None:
    t = sweep(
        [
            (60 * S, 5 * S, 0.004, 9.0),
            (30 * S, 5 * S, 0.004, 6.0),
            (10 * S, 5 * S, 0.009, 5.0),
            (30 * S, 10 * S, 0.0, 1.0),
        ]
    )
    rec = recommend_bound(t, 0.01)
    assert rec is not None and (rec.bound, rec.idle_timeout) == (5 * S, 30 * S)


def test_nan_never_qualifies_and_numeric_bounds() -> None:
    t = pa.table(
        {
            "idle_timeout": [None, None],
            "bound": [0.0, 2.0],
            "late_fraction": [math.nan, 0.0],
            "delay_median_s": [1.0, 2.0],
            "delay_p99_s": [1.0, 2.0],
            "windows": [1, 1],
        }
    )
    rec = recommend_bound(t, 0.01)
    assert rec is not None and rec.bound == 2.0


def test_progress_lines() -> None:
    out = io.StringIO()
    p = Progress(2, out)
    with p.stage("computing per-partition watermarks"):
        pass
    with pytest.raises(RuntimeError), p.stage("windows"):
        raise RuntimeError
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("[1/2] computing per-partition watermarks ... ")
    assert lines[0].endswith(" s") and "failed after" in lines[1]
    assert QUIET_SPARK_CONF["spark.ui.showConsoleProgress"] == "false"
    options = shlex.split(QUIET_SPARK_CONF["spark.driver.extraJavaOptions"])
    log4j = next(o for o in options if o.startswith("-Dlog4j2.configurationFile="))
    config = Path(log4j.split("=", 1)[1].removeprefix("file:"))
    assert config.is_file() and "PythonGatewayServer" in config.read_text()
    assert f"-Dfloodmark.spark.log={SPARK_LOG}" in options


def test_a_sweep_without_delays_recommends_without_them() -> None:
    """Without an arrival column the sweep has no firing delay (NaN): the sentence
    says so instead of printing "nan s"."""
    from floodmark.report.recommend import Recommendation

    line = Recommendation(5 * S, None, 0.001, math.nan, math.nan).sentence(0.01)
    assert line == "recommended: --bound 5s (late 0.1 % <= 1 %; no firing delay without --arrival)"


def test_a_bound_at_which_no_window_fires_before_the_end_says_so() -> None:
    """With --arrival given, the delay is NaN also when no window fired before the end
    of the input: the sentence names that, not a missing --arrival."""
    t = sweep([(30 * S, 30 * S, 0.0, math.nan)])
    t = t.set_column(3, "delay_median_s", pa.array([math.nan]))
    t = t.set_column(5, "windows", pa.array([0]))
    rec = recommend_bound(t, 0.001)
    assert rec is not None and rec.windows == 0
    assert rec.sentence(0.001) == (
        "recommended: --bound 30s --idle 30s (late 0 % <= 0.1 %; no window fired before "
        "the end of the input at this bound)"
    )
