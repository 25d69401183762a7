"""floodmark builds its plans without PySpark's call-site capture and leaves the
user's setting as it found it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from pyspark.errors import utils
from pyspark.sql import functions as F

from floodmark import TumblingEventTimeWindows, WatermarkStrategy
from floodmark.spark import assign_watermarks, watermark_timeline, window_aggregate
from floodmark.spark.analyze import analyze_bounds
from floodmark.spark.baseline import spark_global_watermark_late
from floodmark.spark.call_sites import call_sites_off

STRATEGY = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(milliseconds=5))
WINDOW = TumblingEventTimeWindows.of(timedelta(milliseconds=50))
COLS = {"event_time": "ts", "channel": "partition", "arrival": "arrival"}

PUBLIC: dict[str, Callable[[Any], object]] = {
    "window_aggregate": lambda df: window_aggregate(df, STRATEGY, WINDOW, key="key", **COLS),
    "assign_watermarks": lambda df: assign_watermarks(df, STRATEGY, **COLS),
    "watermark_timeline": lambda df: watermark_timeline(df, STRATEGY, **COLS),
    "analyze_bounds": lambda df: analyze_bounds(
        df, bounds=[timedelta(milliseconds=5)], window=WINDOW, **COLS
    ),
    "spark_global_watermark_late": lambda df: spark_global_watermark_late(
        df, delay=timedelta(milliseconds=5), **COLS
    ),
}


@pytest.fixture
def debugging_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """PySpark's call-site capture on, whatever the session says."""
    monkeypatch.setattr(utils, "_enable_debugging_cache", True)


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch, debugging_on: None) -> list[str]:
    """The call sites PySpark captures."""
    calls: list[str] = []
    original = utils._capture_call_site

    def spy(depth: int) -> str:
        calls.append("captured")
        return original(depth)

    monkeypatch.setattr(utils, "_capture_call_site", spy)
    return calls


def events(spark: Any) -> Any:
    rows = [(0, t, t, t % 3, 1) for t in range(0, 200, 7)]
    return spark.createDataFrame(rows, "partition long, ts long, arrival long, key long, v long")


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_functions_capture_no_call_site(spark: Any, captured: list[str], name: str) -> None:
    df = events(spark)
    captured.clear()
    PUBLIC[name](df)
    assert captured == []
    assert utils._enable_debugging_cache is True


def test_setting_restored_when_a_public_function_rejects_its_input(
    spark: Any, captured: list[str]
) -> None:
    with pytest.raises(Exception, match="no_such_column"):
        window_aggregate(events(spark), STRATEGY, WINDOW, key="no_such_column", **COLS)
    assert utils._enable_debugging_cache is True


def test_user_code_keeps_its_call_sites(spark: Any, captured: list[str]) -> None:
    out = PUBLIC["window_aggregate"](events(spark))
    captured.clear()
    assert out.results.where(F.col("count") > 0).count() > 0  # type: ignore[attr-defined]
    assert captured


def test_setting_restored_after_an_error(debugging_on: None) -> None:
    with pytest.raises(ValueError), call_sites_off():
        assert utils._enable_debugging_cache is False
        raise ValueError("boom")
    assert utils._enable_debugging_cache is True


def test_nested_and_concurrent_blocks_restore_once(debugging_on: None) -> None:
    inner_started, release = threading.Event(), threading.Event()

    def other() -> None:
        with call_sites_off():
            inner_started.set()
            release.wait(5)

    thread = threading.Thread(target=other)
    try:
        with call_sites_off():
            thread.start()
            assert inner_started.wait(5)
            with call_sites_off():
                assert utils._enable_debugging_cache is False
            assert utils._enable_debugging_cache is False  # the other block is open
        assert utils._enable_debugging_cache is False  # ... and still is
    finally:
        release.set()
        thread.join(5)
    assert utils._enable_debugging_cache is True
