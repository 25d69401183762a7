"""The README's Spark and live examples, and docs/streaming.md's progress listener, run
as written, one after the other as a reader pastes them, on a generated topic's Parquet
files: only the data locations are replaced (``events/`` and ``/data/job``). The
engine example before them is tests/python/test_readme.py's."""

from __future__ import annotations

import logging
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from doc_blocks import python_blocks

from floodmark.datagen import StreamSpec, generate


def test_the_readme_spark_and_live_examples_and_the_progress_listener_run(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    engine, batch, live = python_blocks("README.md")[:3]
    (listener,) = [b for b in python_blocks("docs/streaming.md") if "QueryListener" in b]
    events = tmp_path / "events"
    events.mkdir()
    table = generate(StreamSpec(rows=20_000, partitions=16, keys=50, duration_ms=120_000))
    pq.write_table(table, events / "part-0.parquet")
    job = tmp_path / "job"

    def located(code: str) -> str:
        assert '"events/"' in code or "/data/job" in code, code
        return code.replace('"events/"', repr(str(events))).replace("/data/job", str(job))

    names: dict[str, Any] = {}
    caplog.set_level(logging.INFO, logger="clicks")
    # The listener is registered before the live block starts its query; it reads
    # `handler` when Spark reports a batch.
    for code in (engine, located(batch), listener, located(live)):
        exec(compile(code, "example", "exec"), names)
    query = names["query"]
    try:
        query.processAllAvailable()
        batches = [p["batchId"] for p in query.recentProgress]
        # Spark's listener bus reports each batch after it ends, from another thread.
        deadline = time.monotonic() + 60
        while len(caplog.records) < len(batches) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        query.stop()
        spark.streams.removeListener(names["listener"])
    assert query.exception() is None

    # What the README says `marked` holds.
    added = ["channel_watermark", "watermark", "is_late", "error"]
    assert names["marked"].columns == [*table.column_names, *added]

    # The live query's committed results are rows of the batch function's results on
    # the same rows (the windows it fired up to its frontier), and there are some.
    out, handler = names["out"], names["handler"]
    got = spark.read.parquet(str(job / "out" / "results"))
    columns = [c for c in out.results.columns if c in got.columns]
    assert {"key", "window_start", "window_end", "count", "sum_value"} <= set(columns)
    live_rows = Counter(tuple(r) for r in got.select(columns).collect())
    batch_rows = Counter(tuple(r) for r in out.results.select(columns).collect())
    assert sum(live_rows.values()) > 100
    assert live_rows <= batch_rows, live_rows - batch_rows
    assert sum(p["results"] for p in handler.progress) == sum(live_rows.values())

    # The listener logged each batch Spark reported, from floodmark's summary of it.
    assert batches and [p["batch_id"] for p in handler.progress] == batches
    want = [
        f"batch {p['batch_id']}: watermark {p['watermark']} held by {p['min_channel']}"
        for p in handler.progress
    ]
    assert [r.getMessage() for r in caplog.records if r.name == "clicks"] == want


def test_the_spark_page_example_runs(spark: Any, tmp_path: Path) -> None:
    """docs/spark.md's first example, as written, on a generated topic's files."""
    (example,) = python_blocks("docs/spark.md")[:1]
    events = tmp_path / "events"
    events.mkdir()
    table = generate(StreamSpec(rows=5_000, keys=10, duration_ms=60_000))
    pq.write_table(table, events / "part-0.parquet")
    assert '"events/"' in example
    names: dict[str, Any] = {}
    exec(compile(example.replace('"events/"', repr(str(events))), "example", "exec"), names)
    out = names["out"]
    assert out.results.count() > 0
    assert set(table.column_names) <= set(out.late.columns) & set(out.dropped.columns)
    assert names["marked"].count() == table.num_rows
