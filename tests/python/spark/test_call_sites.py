"""floodmark builds its plans without PySpark's call-site capture and leaves the
user's setting as it found it."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from pyspark.errors import utils
from pyspark.sql import functions as F

from floodmark import TumblingEventTimeWindows, WatermarkStrategy
from floodmark.spark import assign_watermarks, window_aggregate
from floodmark.spark.call_sites import call_sites_off

STRATEGY = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(milliseconds=5))


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The call sites PySpark captures, with the capture on."""
    calls: list[str] = []
    original = utils._capture_call_site

    def spy(depth: int) -> str:
        calls.append("captured")
        return original(depth)

    monkeypatch.setattr(utils, "_capture_call_site", spy)
    monkeypatch.setattr(utils, "_enable_debugging_cache", True)
    return calls


def events(spark: Any) -> Any:
    rows = [(0, t, t, t % 3, 1) for t in range(0, 200, 7)]
    return spark.createDataFrame(rows, "partition long, ts long, arrival long, key long, v long")


def test_floodmark_functions_capture_no_call_site(spark: Any, captured: list[str]) -> None:
    df = events(spark)
    captured.clear()
    window = TumblingEventTimeWindows.of(timedelta(milliseconds=50))
    out = window_aggregate(
        df, STRATEGY, window, key="key", event_time="ts", channel="partition", arrival="arrival"
    )
    assign_watermarks(df, STRATEGY, event_time="ts", channel="partition", arrival="arrival")
    assert captured == []
    # The user's own DataFrame code still records its call site, and the outputs work.
    assert out.results.where(F.col("count") > 0).count() > 0
    assert captured


def test_setting_restored_after_an_error(spark: Any, captured: list[str]) -> None:
    with pytest.raises(ValueError), call_sites_off():
        assert utils._enable_debugging_cache is False
        raise ValueError("boom")
    assert utils._enable_debugging_cache is True


def test_nested_and_concurrent_blocks_restore_once(captured: list[str]) -> None:
    inner_started, release = threading.Event(), threading.Event()

    def other() -> None:
        with call_sites_off():
            inner_started.set()
            release.wait(5)

    with call_sites_off():
        thread = threading.Thread(target=other)
        thread.start()
        inner_started.wait(5)
        with call_sites_off():
            assert utils._enable_debugging_cache is False
        assert utils._enable_debugging_cache is False  # the other block is still open
    assert utils._enable_debugging_cache is False  # ... and still is
    release.set()
    thread.join(5)
    assert utils._enable_debugging_cache is True
