"""The topology options (several partitions per source subtask, end of input per
channel) on Spark equal floodmark.replay, on the driver and on the executors."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pytest
from spark_helpers import jobs

from floodmark import TumblingEventTimeWindows, WatermarkStrategy
from floodmark.datagen import StreamSpec, generate
from floodmark.exceptions import InvalidParameterError, SchemaError
from floodmark.replay import replay
from floodmark.spark import assign_watermarks, timeline, window_aggregate

SPEC = StreamSpec(
    rows=4_000,
    partitions=6,
    keys=20,
    duration_ms=120_000,
    disorder_ms=2_000,
    lag_ms=10_000,
    quiet_partition=5,
    quiet_from_ms=40_000,
    quiet_for_ms=30_000,
    very_late_fraction=0.01,
    very_late_ms=20_000,
    skew=1.3,
    timestamp_granularity_ms=10,
)
STRATEGY = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=1)).with_idleness(
    timedelta(seconds=3)
)
TOPOLOGY = {"source_parallelism": 4, "topic": "events", "end_of_input": "per_channel"}
COLUMNS = {"event_time": "event_time", "channel": "partition", "arrival": "arrival"}


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return generate(SPEC)


def rows(t: Any, cols: list[str]) -> Counter[tuple[Any, ...]]:
    tbl = t if isinstance(t, pa.Table) else t.toArrow()
    return Counter(zip(*[tbl[c].to_pylist() for c in cols], strict=True))


@pytest.mark.parametrize("where", ["driver", "executors", "records"])
def test_assign_and_windows_equal_replay(
    spark: Any, table: pa.Table, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the records path the windows read the records; ``assign_watermarks`` keeps
    the per-(channel, bucket) table: a record's channel watermark is its subtask's."""
    if where == "executors":
        monkeypatch.setattr(timeline, "MAX_DRIVER_BUCKET_ROWS", 50)
    if where == "records":
        monkeypatch.setattr(timeline, "SAMPLE_RECORDS", 100)
        monkeypatch.setattr(timeline, "RECORDS_DENSITY", 0.0)
    df = spark.createDataFrame(table)
    want = replay(table, STRATEGY, **COLUMNS, **TOPOLOGY)  # type: ignore[arg-type]
    default = replay(table, STRATEGY, **COLUMNS)  # type: ignore[arg-type]
    got = (
        assign_watermarks(df, STRATEGY, **COLUMNS, **TOPOLOGY)  # type: ignore[arg-type]
        .select("id", "channel_watermark", "watermark", "is_late")
        .toArrow()
        .sort_by("id")
    )
    want_rec = want.records.sort_by("id")
    mn = -(2**63)
    assert [mn if v is None else v for v in got["watermark"].to_pylist()] == want_rec[
        "watermark"
    ].to_pylist()
    assert [mn if v is None else v for v in got["channel_watermark"].to_pylist()] == want_rec[
        "channel_watermark"
    ].to_pylist()
    assert got["is_late"].to_pylist() == want_rec["is_late"].to_pylist()
    # The options change the result on this stream (a quiet partition shares a subtask).
    assert want.timeline.to_pylist() != default.timeline.to_pylist()

    window = TumblingEventTimeWindows.of(timedelta(seconds=10))
    out = window_aggregate(df, STRATEGY, window, key="key", **COLUMNS, **TOPOLOGY)  # type: ignore[arg-type]
    want_w = replay(table, STRATEGY, window=window, key="key", **COLUMNS, **TOPOLOGY)  # type: ignore[arg-type]
    cols = ["key", "window_start", "count", "watermark", "timing"]
    assert rows(out.results, [*cols, "fired_at"]) == rows(want_w.results, [*cols, "trigger_time"])
    late_cols = [*table.column_names, "watermark"]
    assert rows(out.late, late_cols) == rows(want_w.late, late_cols)
    out.unpersist()


def test_assign_ending_per_channel_on_the_records_path_equals_replay(
    spark: Any, table: pa.Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``end_of_input="per_channel"`` alone: ``assign_watermarks`` runs the per-channel
    pass (no per-(channel, bucket) table), whose builders know no channel ends (a
    channel's end comes after its last record, so no record's watermark in force
    depends on it)."""
    monkeypatch.setattr(timeline, "SAMPLE_RECORDS", 100)
    monkeypatch.setattr(timeline, "RECORDS_DENSITY", 0.0)
    monkeypatch.setattr(timeline, "bucket_aggregate", refused)
    ends = {"end_of_input": "per_channel"}
    got = (
        assign_watermarks(spark.createDataFrame(table), STRATEGY, **COLUMNS, **ends)  # type: ignore[arg-type]
        .select("id", "channel_watermark", "watermark", "is_late")
        .toArrow()
        .sort_by("id")
    )
    want = replay(table, STRATEGY, **COLUMNS, **ends).records.sort_by("id")  # type: ignore[arg-type]
    mn = -(2**63)
    for column in ("channel_watermark", "watermark"):
        values = [mn if v is None else v for v in got[column].to_pylist()]
        assert values == want[column].to_pylist(), column
    assert got["is_late"].to_pylist() == want["is_late"].to_pylist()


def refused(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the records path aggregates nothing")


def test_refused_before_any_job(spark: Any, table: pa.Table) -> None:
    df = spark.createDataFrame(
        table.set_column(
            table.schema.get_field_index("partition"),
            "partition",
            pa.array([f"p{p}" for p in table["partition"].to_pylist()]),
        )
    )
    plain = spark.createDataFrame(table)
    before = jobs(spark)
    with pytest.raises(SchemaError) as err:
        assign_watermarks(df, STRATEGY, **COLUMNS, source_parallelism=2)  # type: ignore[arg-type]
    assert err.value.column == "partition"
    with pytest.raises(InvalidParameterError) as perr:
        assign_watermarks(
            plain,
            STRATEGY,
            **COLUMNS,
            end_of_input="last",  # type: ignore[arg-type]
        )
    assert perr.value.parameter == "end_of_input"
    assert jobs(spark) == before
    # This one is found once the channels are listed (a job).
    with pytest.raises(InvalidParameterError) as perr:
        assign_watermarks(
            plain,
            STRATEGY,
            **COLUMNS,
            source_parallelism=7,  # type: ignore[arg-type]
        )
    assert perr.value.parameter == "source_parallelism"


def test_analyze_bounds_runs_on_the_topology(spark: Any, table: pa.Table) -> None:
    """Every candidate runs on the subtasks; the late records (``ts <= watermark``)
    are those of replay's."""
    from floodmark.spark import analyze_bounds

    df = spark.createDataFrame(table)
    window = TumblingEventTimeWindows.of(timedelta(seconds=10))
    kw = {"bounds": [timedelta(seconds=1)], "window": window, "key": "key"}
    topo = {"source_parallelism": 4, "topic": "events"}
    got = analyze_bounds(df, idle_timeouts=[timedelta(seconds=3)], **COLUMNS, **kw, **topo)  # type: ignore[arg-type]
    want = replay(table, STRATEGY, window=window, key="key", **COLUMNS, **topo)  # type: ignore[arg-type]
    assert got["late"].to_pylist() == [sum(want.records["is_late"].to_pylist())]
    # The option reaches the builder: a subtask reading none of the 6 partitions.
    with pytest.raises(InvalidParameterError) as err:
        analyze_bounds(df, **COLUMNS, **kw, source_parallelism=7)  # type: ignore[arg-type]
    assert err.value.parameter == "source_parallelism"
