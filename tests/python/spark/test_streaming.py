"""floodmark inside real Structured Streaming queries (``foreachBatch``): the outputs of a
live query equal the batch functions' on the same rows, for every row and firing at or
before the final frontier, whatever the micro-batch size; restarts from the checkpoint
go on exactly; another query's state location, a changed configuration and missing
columns are refused."""

from __future__ import annotations

import dataclasses
import shutil
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from streaming_helpers import (
    before,
    names,
    read_output,
    run_query,
    write_files,
    write_parts,
)

from floodmark import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    WatermarkStrategy,
)
from floodmark.datagen import StreamSpec, generate
from floodmark.exceptions import InvalidParameterError, SchemaError
from floodmark.spark import assign_watermarks, window_aggregate
from floodmark.spark.streaming import (
    ParquetOutputs,
    StateError,
    StreamingWatermarks,
    StreamingWindows,
)
from floodmark.spark.streaming.windows import DEFAULT_KEY_GROUPS
from floodmark.time import I64_MIN

SPEC = StreamSpec(
    rows=6_000,
    partitions=5,
    keys=30,
    duration_ms=120_000,
    disorder_ms=2_000,
    lag_ms=8_000,
    quiet_partition=4,
    quiet_from_ms=40_000,
    quiet_for_ms=30_000,
    very_late_fraction=0.01,
    very_late_ms=20_000,
    timestamp_granularity_ms=10,
)
#: The columns of :func:`floodmark.datagen.generate`'s stream, as every call here names them.
COLUMNS = {"event_time": "event_time", "channel": "partition", "arrival": "arrival"}
STRATEGY = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=1)).with_idleness(
    timedelta(seconds=5)
)


@pytest.fixture(scope="module")
def stream() -> pa.Table:
    return generate(SPEC)


def watermarks_handler(folder: Path, **kwargs: Any) -> StreamingWatermarks:
    return StreamingWatermarks(
        STRATEGY,
        **COLUMNS,
        state_location=str(folder / "state"),
        outputs=ParquetOutputs(str(folder / "out")),
        **kwargs,
    )


def rows_of(table: pa.Table, columns: list[str]) -> Counter[tuple[Any, ...]]:
    return Counter(zip(*[table[c].to_pylist() for c in columns], strict=True))


@pytest.mark.parametrize("files", [1, 4, 13])
def test_streaming_watermarks_equal_assign_watermarks(
    spark: Any, stream: pa.Table, tmp_path: Path, files: int
) -> None:
    source = write_files(stream, tmp_path / "in", files)
    handler = watermarks_handler(tmp_path)
    run_query(spark, source, spark.createDataFrame(stream).schema, handler, tmp_path / "ck")
    assert len(handler.progress) == files
    frontier = handler.progress[-1]["frontier"]
    got = read_output(spark, tmp_path / "out", "records")
    want = assign_watermarks(
        spark.createDataFrame(stream),
        STRATEGY,
        **COLUMNS,
    ).toArrow()
    columns = [*stream.column_names, "channel_watermark", "watermark", "is_late", "error"]
    assert rows_of(got, columns) == rows_of(before(want, "arrival", frontier), columns)
    assert got.num_rows > stream.num_rows * 0.8
    assert sum(got["is_late"].to_pylist()) > 0
    # The timeline segments make up the batch timeline up to the frontier.
    timeline = read_output(spark, tmp_path / "out", "timeline").sort_by("time")
    from floodmark.spark import watermark_timeline

    whole = watermark_timeline(
        spark.createDataFrame(stream),
        STRATEGY,
        **COLUMNS,
    ).toArrow()
    cols = ["time", "watermark", "status", "min_channel"]
    assert (
        timeline.select(cols).to_pylist()
        == before(whole, "time", frontier).select(cols).to_pylist()
    )


def test_another_querys_state_is_refused(spark: Any, stream: pa.Table, tmp_path: Path) -> None:
    source = write_files(stream.slice(0, 1000), tmp_path / "in", 2)
    schema = spark.createDataFrame(stream).schema
    run_query(spark, source, schema, watermarks_handler(tmp_path), tmp_path / "ck1")
    before_files = sorted(p.name for p in (tmp_path / "state" / "commits").iterdir())
    with pytest.raises(Exception, match="belongs to streaming query"):
        run_query(spark, source, schema, watermarks_handler(tmp_path), tmp_path / "ck2")
    assert sorted(p.name for p in (tmp_path / "state" / "commits").iterdir()) == before_files


def test_outputs_ahead_of_a_restored_checkpoint_and_state_are_removed(
    spark: Any, stream: pa.Table, tmp_path: Path
) -> None:
    """A checkpoint and state restored together from a copy older than the outputs:
    the published batches above the state's newest are removed when the query starts
    (they were left until the restored run reached their ids: a reader saw rows of
    uncommitted batches, and the same rows again in the batch that ran them anew)."""
    source, schema = tmp_path / "in", spark.createDataFrame(stream).schema
    ordered = stream.slice(0, 1000).sort_by("arrival")
    parts = [ordered.slice(i * 200, 200) for i in range(5)]
    write_parts(parts[:2], source)
    run_query(spark, source, schema, watermarks_handler(tmp_path), tmp_path / "ck")
    for name in ("ck", "state"):
        shutil.copytree(tmp_path / name, tmp_path / f"{name}-copy")
    write_parts(parts, source)
    run_query(spark, source, schema, watermarks_handler(tmp_path), tmp_path / "ck")
    assert names(tmp_path / "out" / "records")[-1] == "batch=4"
    for name in ("ck", "state"):
        shutil.rmtree(tmp_path / name)
        shutil.copytree(tmp_path / f"{name}-copy", tmp_path / name)
    restored = watermarks_handler(tmp_path)  # the rest in one batch:
    run_query(spark, source, schema, restored, tmp_path / "ck", per_trigger=0)
    assert [p["batch_id"] for p in restored.progress] == [2]
    assert [n for n in names(tmp_path / "out" / "records") if n.startswith("batch=")] == [
        "batch=0",
        "batch=1",
        "batch=2",
    ]
    ids = read_output(spark, tmp_path / "out", "records")["id"].to_pylist()
    frontier = restored.progress[-1]["frontier"]
    assert sorted(ids) == sorted(
        before(stream.slice(0, 1000), "arrival", frontier)["id"].to_pylist()
    )


def test_two_handlers_of_a_query_share_an_outputs_path_across_a_restart(
    spark: Any, stream: pa.Table, tmp_path: Path
) -> None:
    """Two handlers of one query, each with its state, writing their own kinds to one
    path: after a restart the first publishes its batch before the second starts, and
    the second's removal of batches above its state's newest leaves that batch alone
    (it looks at its own kinds only)."""
    source, schema = tmp_path / "in", spark.createDataFrame(stream).schema
    ordered = stream.slice(0, 800).sort_by("arrival")
    parts = [ordered.slice(i * 200, 200) for i in range(4)]

    def both() -> Any:
        marks = watermarks_handler(tmp_path)
        windows = StreamingWindows(
            STRATEGY,
            TumblingEventTimeWindows.of(timedelta(seconds=5)),
            key="key",
            **COLUMNS,
            aggs="count",
            state_location=str(tmp_path / "windows-state"),
            outputs=ParquetOutputs(str(tmp_path / "out")),
        )
        return lambda df, batch_id: (marks(df, batch_id), windows(df, batch_id))

    write_parts(parts[:2], source)
    run_query(spark, source, schema, both(), tmp_path / "ck")
    write_parts(parts, source)
    run_query(spark, source, schema, both(), tmp_path / "ck")
    for kind in ("records", "results"):
        batches = [n for n in names(tmp_path / "out" / kind) if n.startswith("batch=")]
        assert batches == [f"batch={b}" for b in range(4)], kind


def test_a_changed_strategy_is_refused(spark: Any, stream: pa.Table, tmp_path: Path) -> None:
    source = write_files(stream.slice(0, 1000), tmp_path / "in", 2)
    schema = spark.createDataFrame(stream).schema
    run_query(spark, source, schema, watermarks_handler(tmp_path), tmp_path / "ck")
    (source / "part-00009.parquet").write_bytes((source / "part-00001.parquet").read_bytes())
    changed = StreamingWatermarks(
        WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=3)),
        **COLUMNS,
        state_location=str(tmp_path / "state"),
        outputs=ParquetOutputs(str(tmp_path / "out")),
    )
    with pytest.raises(Exception, match="configuration changed") as err:
        run_query(spark, source, schema, changed, tmp_path / "ck")
    assert f"{StateError.__module__}.StateError: " in str(err.value)


def test_a_configuration_spelled_differently_restarts(
    spark: Any, stream: pa.Table, tmp_path: Path
) -> None:
    """The fingerprint holds the configuration as resolved: ``aggs="count"`` and
    ``["count"]``, a lateness as a ``timedelta`` and in ticks, are one configuration
    (each was refused as changed)."""
    source = write_files(stream.slice(0, 1000), tmp_path / "in", 2)
    schema = spark.createDataFrame(stream).schema
    window = TumblingEventTimeWindows.of(timedelta(seconds=5))
    first = windows_handler(tmp_path, window, timedelta(seconds=2), "count")
    run_query(spark, source, schema, first, tmp_path / "ck")
    (source / "part-00009.parquet").write_bytes((source / "part-00001.parquet").read_bytes())
    again = windows_handler(tmp_path, window, 2000, ["count"])
    run_query(spark, source, schema, again, tmp_path / "ck")
    assert [p["batch_id"] for p in again.progress] == [2]


def test_a_configuration_changed_before_the_first_commit_is_taken(
    spark: Any, stream: pa.Table, tmp_path: Path
) -> None:
    """A first batch the native path refuses (an event time near the long range's end)
    commits nothing: the same checkpoint and state location then run it with
    ``path="keyed"``, as the refusal says. Once a batch is committed, a change is
    refused."""
    table = stream.slice(0, 200)
    far = pc.add(table["event_time"], pa.scalar(5 * 10**18, pa.int64()))
    table = table.set_column(table.schema.get_field_index("event_time"), "event_time", far)
    source = write_files(table, tmp_path / "in", 1)
    schema = spark.createDataFrame(table).schema
    window = TumblingEventTimeWindows.of(timedelta(seconds=5))
    native = windows_handler(tmp_path, window, timedelta(0), ["count"], path="native")
    with pytest.raises(Exception, match="path='keyed' \\(before the first committed batch"):
        run_query(spark, source, schema, native, tmp_path / "ck")
    assert not (tmp_path / "state" / "commits").exists() or not any(
        (tmp_path / "state" / "commits").iterdir()
    )
    keyed = windows_handler(tmp_path, window, timedelta(0), ["count"], path="keyed")
    run_query(spark, source, schema, keyed, tmp_path / "ck")
    assert [p["batch_id"] for p in keyed.progress] == [0]
    (source / "part-00009.parquet").write_bytes((source / "part-00000.parquet").read_bytes())
    native = windows_handler(tmp_path, window, timedelta(0), ["count"], path="native")
    with pytest.raises(Exception, match="configuration changed"):
        run_query(spark, source, schema, native, tmp_path / "ck")


@pytest.mark.parametrize(
    ("window", "aggs", "why"),
    [
        (EventTimeSessionWindows.with_gap(timedelta(seconds=1)), ["count"], "not session"),
        (
            SlidingEventTimeWindows.of(timedelta(seconds=1), timedelta(seconds=2)),
            ["count"],
            "without gaps, not a slide of 2000 over 1000 ticks",
        ),
        (
            SlidingEventTimeWindows.of(timedelta(seconds=2), timedelta(milliseconds=1)),
            ["count"],
            "at most 1,000 windows, not 2,000",
        ),
        (TumblingEventTimeWindows.of(timedelta(seconds=1)), [("mean", "value")], "mean_value"),
    ],
)
def test_path_native_is_refused_saying_what_it_does_not_run(
    spark: Any, stream: pa.Table, tmp_path: Path, window: Any, aggs: list, why: str
) -> None:
    """``path="native"`` where the native path does not apply is refused before the
    first batch, naming what stops it (the rule the path choice reads:
    ``spark.windows.native.not_native``); a window within every limit is taken."""
    events = spark.createDataFrame(stream.slice(0, 10))
    handler = windows_handler(tmp_path, window, timedelta(0), aggs, path="native")
    with pytest.raises(InvalidParameterError, match=f"`path`: not the native path: .*{why}"):
        handler.check(events)
    fine = SlidingEventTimeWindows.of(timedelta(seconds=1), timedelta(milliseconds=1))
    handler = windows_handler(tmp_path / "ok", fine, timedelta(0), ["count"], path="native")
    assert handler.fingerprint(handler.check(events))["path"] == "native"


def test_a_bad_window_key_or_lateness_is_refused_when_the_handler_is_made(
    tmp_path: Path,
) -> None:
    """Arguments whose check needs no column (the window's kind, the keys, a negative
    allowed lateness) are refused when the handler is made, by the checks every layer
    uses, not when the query starts."""
    tumbling = TumblingEventTimeWindows.of(timedelta(seconds=1))
    with pytest.raises(InvalidParameterError, match="`window`: expected Tumbling"):
        windows_handler(tmp_path, "tumbling", timedelta(0), ["count"])
    with pytest.raises(InvalidParameterError, match="`key`: a window needs at least one key"):
        windows_handler(tmp_path, tumbling, timedelta(0), ["count"], key=[])
    for negative in (timedelta(seconds=-1), -1):
        with pytest.raises(InvalidParameterError, match="`allowed_lateness`: must be >= 0"):
            windows_handler(tmp_path, tumbling, negative, ["count"])


def test_auto_takes_the_native_path_where_the_executors_lack_floodmark(
    spark: Any, stream: pa.Table, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The keyed path needs floodmark on the executors, the native one does not: a
    choice made for speed (``auto``) takes the native path there where it applies,
    rather than fail a query that Spark SQL alone completes."""
    from floodmark.spark.streaming import windows

    monkeypatch.setattr(windows, "floodmark_on_executors", lambda spark: False)
    source = write_files(stream.slice(0, 400), tmp_path / "in", 2)
    window = TumblingEventTimeWindows.of(timedelta(seconds=5))
    handler = windows_handler(tmp_path, window, timedelta(0), ["count"])
    run_query(spark, source, spark.createDataFrame(stream).schema, handler, tmp_path / "ck")
    assert [p["path"] for p in handler.progress] == ["native", "native"]
    gap = EventTimeSessionWindows.with_gap(timedelta(seconds=1))
    sessions = windows_handler(tmp_path / "s", gap, timedelta(0), ["count"])
    plan = sessions.check(spark.createDataFrame(stream.slice(0, 10)))
    assert sessions.fingerprint(plan)["path"] == "keyed"  # where the native one cannot


def test_auto_keeps_the_path_of_the_committed_state(
    spark: Any, stream: pa.Table, tmp_path: Path
) -> None:
    """A state committed on the native path (``auto`` of an earlier floodmark, or
    executors without floodmark then) goes on natively under ``auto``, instead of being
    refused as a changed configuration; a fresh state takes the keyed path."""
    source = write_files(stream.slice(0, 1000), tmp_path / "in", 2)
    schema = spark.createDataFrame(stream).schema
    window = TumblingEventTimeWindows.of(timedelta(seconds=5))
    native = windows_handler(tmp_path, window, timedelta(0), ["count"], path="native")
    run_query(spark, source, schema, native, tmp_path / "ck")
    (source / "part-00009.parquet").write_bytes((source / "part-00001.parquet").read_bytes())
    auto = windows_handler(tmp_path, window, timedelta(0), ["count"])
    run_query(spark, source, schema, auto, tmp_path / "ck")
    assert [p["path"] for p in auto.progress] == ["native"]
    fresh = windows_handler(tmp_path / "fresh", window, timedelta(0), ["count"])
    run_query(spark, source, schema, fresh, tmp_path / "fresh" / "ck")
    assert {p["path"] for p in fresh.progress} == {"keyed"}


def test_a_source_without_the_columns_is_refused(
    spark: Any, stream: pa.Table, tmp_path: Path
) -> None:
    source = write_files(
        stream.slice(0, 100).drop(["arrival"]), tmp_path / "in", 1, arrival="event_time"
    )
    schema = spark.createDataFrame(stream.drop(["arrival"])).schema
    handler = watermarks_handler(tmp_path)
    with pytest.raises(SchemaError, match="no column 'arrival'") as err:
        handler.check(spark.readStream.schema(schema).parquet(str(source)))
    assert err.value.column == "arrival"
    with pytest.raises(Exception, match="no column 'arrival'"):
        run_query(spark, source, schema, handler, tmp_path / "ck")
    assert not (tmp_path / "state").exists()


def test_aggregates_and_keys_given_as_one_shot_iterables_serve_every_batch(
    spark: Any, stream: pa.Table, tmp_path: Path
) -> None:
    """The handler reads ``aggs`` and ``key`` once: given as generators they passed
    ``check()`` and the first batch failed with "give at least one aggregate". A bad
    list is refused when the handler is made."""
    source = write_files(stream.slice(0, 1000), tmp_path / "in", 2)
    schema = spark.createDataFrame(stream).schema
    window = TumblingEventTimeWindows.of(timedelta(seconds=5))
    handler = StreamingWindows(
        STRATEGY,
        window,
        key=iter(["key"]),
        **COLUMNS,
        aggs=(a for a in ["count", ("sum", "value")]),
        state_location=str(tmp_path / "state"),
        outputs=ParquetOutputs(str(tmp_path / "out")),
    )
    handler.check(spark.readStream.schema(schema).parquet(str(source)))
    run_query(spark, source, schema, handler, tmp_path / "ck")
    assert [p["results"] > 0 for p in handler.progress] == [True, True]
    with pytest.raises(InvalidParameterError, match=r"give a list of aggregates: \[\('sum'"):
        windows_handler(tmp_path, window, timedelta(0), ("sum", "value"))


@pytest.mark.parametrize("change", [{"timeline": True}, {"emissions": True}, {"path": "native"}])
def test_a_changed_window_output_option_is_refused(
    spark: Any, stream: pa.Table, tmp_path: Path, change: dict[str, Any]
) -> None:
    """``timeline``, ``emissions`` and ``path`` are part of the state's fingerprint: a
    restart that turns one on would write outputs that lack the earlier batches (or
    read state of another layout), so it is refused and nothing is written."""
    source = write_files(stream.slice(0, 1000), tmp_path / "in", 2)
    schema = spark.createDataFrame(stream).schema
    window = TumblingEventTimeWindows.of(timedelta(seconds=5))
    run_query(
        spark,
        source,
        schema,
        windows_handler(tmp_path, window, timedelta(0), ["count"]),
        tmp_path / "ck",
    )
    (source / "part-00009.parquet").write_bytes((source / "part-00001.parquet").read_bytes())
    versions = sorted(p.name for p in (tmp_path / "state" / "versions").iterdir())
    changed = windows_handler(tmp_path, window, timedelta(0), ["count"], **change)
    hint = (
        "pass path='keyed' or 'auto' to continue" if "path" in change else "configuration changed"
    )
    with pytest.raises(Exception, match=hint):
        run_query(spark, source, schema, changed, tmp_path / "ck")
    assert sorted(p.name for p in (tmp_path / "state" / "versions").iterdir()) == versions


def test_an_input_column_named_batch_is_refused_with_parquet_outputs(
    spark: Any, stream: pa.Table, tmp_path: Path
) -> None:
    """ParquetOutputs partitions by ``batch`` and the outputs keep the input's columns:
    an input column of that name (any case) would read back as batch ids. Refused
    before the first batch, naming it; another sink takes it."""
    from floodmark.exceptions import SchemaError

    table = stream.slice(0, 200).append_column("Batch", pa.array(["order-7"] * 200))
    source = write_files(table, tmp_path / "in", 1)
    schema = spark.createDataFrame(table).schema
    handler = watermarks_handler(tmp_path)
    with pytest.raises(SchemaError, match="'Batch'") as refused:
        handler.check(spark.readStream.schema(schema).parquet(str(source)))
    assert refused.value.column == "Batch"
    with pytest.raises(Exception, match="partitions its outputs by 'batch'"):
        run_query(spark, source, schema, handler, tmp_path / "ck")
    assert not (tmp_path / "state").exists()
    written: list[str] = []
    other = StreamingWatermarks(
        STRATEGY,
        **COLUMNS,
        state_location=str(tmp_path / "state2"),
        outputs=lambda kind, df, batch_id: written.append(kind),
    )
    run_query(spark, source, schema, other, tmp_path / "ck2")
    assert "records" in written


def test_a_string_channel_starts_with_an_empty_batch(spark: Any, tmp_path: Path) -> None:
    """A first micro-batch without a placeable row (an empty file, then one of null
    event times) and a string channel column: the valve starts empty with the column's
    type, and the query goes on to the batch function's results."""
    data = generate(dataclasses.replace(SPEC, rows=1_500))
    data = data.set_column(
        data.schema.get_field_index("partition"),
        "partition",
        pc.binary_join_element_wise("p", data["partition"].cast(pa.string()), ""),
    )
    nulls = data.slice(0, 5).set_column(
        data.schema.get_field_index("event_time"), "event_time", pa.nulls(5, pa.int64())
    )
    write_parts(
        [data.slice(0, 0), nulls, *[data.slice(i, 500) for i in range(0, 1_500, 500)]],
        tmp_path / "in",
    )
    table = pa.concat_tables([nulls, data])
    window, lateness = TumblingEventTimeWindows.of(timedelta(seconds=5)), timedelta(0)
    handler = windows_handler(tmp_path, window, lateness, ["count"])
    run_query(spark, tmp_path / "in", spark.createDataFrame(table).schema, handler, tmp_path / "ck")
    assert [p["channels"] for p in handler.progress][:2] == [0, 0]
    frontier = handler.progress[-1]["frontier"]
    want = batch_windows(spark, table, window, lateness, ["count"])
    cols = result_columns(["count"])
    got = read_output(spark, tmp_path / "out", "results")
    assert got.num_rows > 10
    assert rows_of(got, cols) == rows_of(before(want.results.toArrow(), "fired_at", frontier), cols)
    assert read_output(spark, tmp_path / "out", "dropped").num_rows == 5
    # Outputs known empty (every output of the first two batches but batch 1's dropped
    # rows) are staged from a kept empty file, after the first by a copy, not a job.
    batches = len(handler.progress)
    for kind in ("results", "late", "dropped"):
        assert len([n for n in names(tmp_path / "out" / kind) if n.startswith("batch=")]) == batches
    assert "part-00000-empty.parquet" in names(tmp_path / "out" / "results" / "batch=1")
    assert "part-00000-empty.parquet" in names(tmp_path / "out" / "late" / "batch=1")
    want.unpersist()


WINDOWS = {
    "tumbling": (TumblingEventTimeWindows.of(timedelta(seconds=5)), timedelta(0)),
    "tumbling+lateness": (TumblingEventTimeWindows.of(timedelta(seconds=5)), timedelta(seconds=8)),
    "sliding": (
        SlidingEventTimeWindows.of(timedelta(seconds=6), timedelta(seconds=2)),
        timedelta(seconds=3),
    ),
    "sliding+gaps": (  # records between windows: dropped as no_window
        SlidingEventTimeWindows.of(timedelta(seconds=2), timedelta(seconds=3)),
        timedelta(seconds=1),
    ),
    "session": (EventTimeSessionWindows.with_gap(timedelta(seconds=2)), timedelta(seconds=4)),
}
AGGS = ["count", ("sum", "value"), ("max", "value"), ("first", "value"), ("last", "value")]
KEYED_AGGS = [*AGGS, ("mean", "value")]


def windows_handler(
    folder: Path, window: Any, lateness: Any, aggs: Any, **kwargs: Any
) -> StreamingWindows:
    return StreamingWindows(
        STRATEGY,
        window,
        **{"key": "key", **kwargs},
        **COLUMNS,
        aggs=aggs,
        allowed_lateness=lateness,
        state_location=str(folder / "state"),
        outputs=ParquetOutputs(str(folder / "out")),
    )


def batch_windows(spark: Any, table: pa.Table, window: Any, lateness: Any, aggs: Any) -> Any:
    """``window_aggregate`` on ``table`` at rest, as the live handlers are configured."""
    return window_aggregate(
        spark.createDataFrame(table),
        STRATEGY,
        window,
        key="key",
        **COLUMNS,
        aggs=aggs,
        allowed_lateness=lateness,
    )


def result_columns(aggs: Any) -> list[str]:
    values = [a if isinstance(a, str) else f"{a[0]}_{a[1]}" for a in aggs]
    return ["key", "window_start", "window_end", *values, "watermark", "timing", "fired_at"]


@pytest.mark.parametrize(
    ("name", "files", "path"),
    [
        ("tumbling", 1, "native"),
        ("tumbling", 4, "native"),
        ("tumbling", 4, "keyed"),
        ("tumbling", 4, "auto"),
        ("tumbling+lateness", 5, "native"),
        ("tumbling+lateness", 5, "keyed"),
        ("sliding", 4, "native"),
        ("sliding", 4, "keyed"),
        ("sliding+gaps", 4, "keyed"),
        ("session", 5, "keyed"),
    ],
)
def test_streaming_windows_equal_window_aggregate(
    spark: Any, stream: pa.Table, tmp_path: Path, name: str, files: int, path: str
) -> None:
    """Every firing at or before the final frontier (its ``fired_at``), every late and
    dropped row of those records, as the batch function gives them; on the native path
    (Spark aggregations, open windows carried) and the keyed one (Rust operators
    carried). ``auto`` takes the keyed path, also where the native one applies (the
    faster of the two in a live query, unlike the batch functions)."""
    window, lateness = WINDOWS[name]
    aggs = KEYED_AGGS if path == "keyed" else AGGS
    table = generate(dataclasses.replace(SPEC, null_event_times=7))
    source = write_files(table, tmp_path / "in", files)
    handler = windows_handler(tmp_path, window, lateness, aggs, path=path)
    run_query(spark, source, spark.createDataFrame(table).schema, handler, tmp_path / "ck")
    assert {p["path"] for p in handler.progress} == {"keyed" if path == "auto" else path}
    frontier = handler.progress[-1]["frontier"]
    want = batch_windows(spark, table, window, lateness, aggs)
    result_cols = result_columns(aggs)
    got_results = read_output(spark, tmp_path / "out", "results")
    want_results = before(want.results.toArrow(), "fired_at", frontier)
    assert rows_of(got_results, result_cols) == rows_of(want_results, result_cols)
    assert got_results.num_rows > 20
    late_cols = [*table.column_names, "watermark"]
    got_late = read_output(spark, tmp_path / "out", "late")
    assert rows_of(got_late, late_cols) == rows_of(
        before(want.late.toArrow(), "arrival", frontier), late_cols
    )
    drop_cols = [*table.column_names, "reason"]
    want_dropped = want.dropped.toArrow()
    placed = before(want_dropped.filter(pc.is_valid(want_dropped["arrival"])), "arrival", frontier)
    got_dropped = read_output(spark, tmp_path / "out", "dropped")
    assert rows_of(got_dropped, drop_cols) == rows_of(placed, drop_cols)
    assert got_dropped.num_rows >= 7
    if name == "sliding+gaps":  # the operator's own dropped rows, joined back whole
        assert "no_window" in got_dropped.column("reason").to_pylist()
    # The progress summaries count what was written, and what waits past the frontier.
    for kind, got in (("results", got_results), ("late", got_late), ("dropped", got_dropped)):
        assert sum(p[kind] for p in handler.progress) == got.num_rows, kind
    placeable = pc.and_(pc.is_valid(table["event_time"]), pc.is_valid(table["arrival"]))
    waiting = pc.and_(placeable, pc.greater(table["arrival"], frontier))
    assert handler.progress[-1]["pending"] == pc.sum(waiting.cast("int64")).as_py() > 0
    want.unpersist()


def test_the_native_path_fires_across_a_topic_quiet_for_hours(spark: Any, tmp_path: Path) -> None:
    """A topic quiet for 15 hours between two segments, 100 ms windows: the batch where
    it wakes up spans ~540,000 windows between its advances, more than the constant
    arrays of the firings hold; the query failed there for good (smaller batches
    cannot help: that batch also holds the old segment's tail). The firings are now
    looked up on the executors by each window's end, and equal the batch function's."""
    hour = 3_600_000

    def segment(start: int, ids: int) -> pa.Table:
        return pa.table(
            {
                "id": range(ids, ids + 60),
                "partition": [i % 2 for i in range(60)],
                "event_time": [start + 100 * i - 40 * (i % 3) for i in range(60)],
                "arrival": [start + 100 * i + 50 for i in range(60)],
                "key": [i % 2 for i in range(60)],
                "value": list(range(60)),
            }
        )

    parts = [segment(1_767_225_600_000, 0), segment(1_767_225_600_000 + 15 * hour, 60)]
    table = pa.concat_tables(parts)
    window = TumblingEventTimeWindows.of(timedelta(milliseconds=100))
    handler = windows_handler(tmp_path, window, timedelta(0), AGGS, path="native")
    source = write_parts(parts, tmp_path / "in")
    run_query(spark, source, spark.createDataFrame(table).schema, handler, tmp_path / "ck")
    assert [p["batch_id"] for p in handler.progress] == [0, 1]
    frontier = handler.progress[-1]["frontier"]
    want = batch_windows(spark, table, window, timedelta(0), AGGS)
    cols = result_columns(AGGS)
    got = read_output(spark, tmp_path / "out", "results")
    assert rows_of(got, cols) == rows_of(before(want.results.toArrow(), "fired_at", frontier), cols)
    assert pc.min(got["window_start"]).as_py() < 1_767_225_600_000 + hour
    assert pc.max(got["window_start"]).as_py() > 1_767_225_600_000 + 15 * hour
    want.unpersist()


def test_arrivals_at_the_ends_of_the_long_range(spark: Any, tmp_path: Path) -> None:
    """The frontier stays within the buckets the emission grid can place: a first batch
    of one row arriving at ``Long.MIN_VALUE`` put it below the ``long`` range (a Py4J
    NumberFormatException killed the query); now the row is refused as the batch
    functions refuse it, naming the arrival column. A row at ``Long.MAX_VALUE`` with
    no allowance moved it within two intervals of the top (an error naming an internal
    ``bucket``); now it waits there, counted as pending."""
    row = {"id": 0, "partition": 0, "event_time": 1_767_225_600_000, "key": 0, "value": 1}
    low = pa.Table.from_pylist([{**row, "arrival": -(2**63)}])
    source = write_parts([low], tmp_path / "low" / "in")
    with pytest.raises(Exception, match="`arrival`: arrival times within two emission"):
        run_query(
            spark,
            source,
            spark.createDataFrame(low).schema,
            watermarks_handler(tmp_path / "low"),
            tmp_path / "low" / "ck",
        )
    normal = pa.Table.from_pylist(
        [{**row, "id": i, "arrival": 1_767_225_600_000 + i} for i in range(3)]
    )
    high = pa.Table.from_pylist([{**row, "id": 9, "arrival": 2**63 - 1}])
    source = write_parts([normal, high], tmp_path / "high" / "in")
    handler = watermarks_handler(tmp_path / "high", allowance=timedelta(0))
    run_query(
        spark, source, spark.createDataFrame(normal).schema, handler, tmp_path / "high" / "ck"
    )
    assert [p["batch_id"] for p in handler.progress] == [0, 1]
    assert handler.progress[-1]["pending"] == 1
    assert read_output(spark, tmp_path / "high" / "out", "records").num_rows == 3


def test_no_partition_holds_the_watermark_before_any_has_one(spark: Any, tmp_path: Path) -> None:
    """While no partition has a watermark (the first batch's rows all wait past the
    frontier), the progress names no holder: it named partition 0, the valve's tie
    order among channels all at ``Long.MIN_VALUE`` (``floodmark demo --live`` printed
    "none yet  p0"). Once they have one, the one behind holds it."""
    t = 1_767_225_600_000

    def rows(first_id: int, arrivals: list[int], partitions: list[int]) -> pa.Table:
        return pa.table(
            {
                "id": range(first_id, first_id + len(arrivals)),
                "partition": partitions,
                "event_time": [a - 50 * p for a, p in zip(arrivals, partitions, strict=True)],
                "arrival": arrivals,
                "key": [0] * len(arrivals),
                "value": [1] * len(arrivals),
            }
        )

    parts = [rows(0, [t + 100, t + 200, t + 300], [0, 1, 0]), rows(10, [t + 5_000], [0])]
    source = write_parts(parts, tmp_path / "in")
    handler = watermarks_handler(tmp_path)
    run_query(spark, source, spark.createDataFrame(parts[0]).schema, handler, tmp_path / "ck")
    first, second = handler.progress
    assert (first["watermark"], first["min_channel"], first["pending"]) == (I64_MIN, None, 3)
    assert second["watermark"] > I64_MIN and second["min_channel"] == 1


def one_key_stream(ticks: range, arrival_offset: int = 0, first_id: int = 0) -> pa.Table:
    """Key 0 on partition 0, one record per tick, arriving ``arrival_offset`` later."""
    return pa.table(
        {
            "id": range(first_id, first_id + len(ticks)),
            "partition": [0] * len(ticks),
            "event_time": list(ticks),
            "arrival": [t + arrival_offset for t in ticks],
            "key": [0] * len(ticks),
            "value": [1] * len(ticks),
        }
    )


def test_a_restamped_row_held_back_is_counted_once(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A row arriving behind the frontier is re-stamped just past it; when the frontier
    does not move in that batch, the row waits for the next one, and the progress counts
    it once, in the batch that re-stamped it, and a warning says so (a bad arrival far
    ahead of the stream stalls the query this way: every later row re-stamped)."""
    first = one_key_stream(range(0, 10_000, 10))  # frontier 8,800 ms
    behind = one_key_stream(range(5_000, 5_010, 10), first_id=20_000)  # arrival 5,000 ms
    third = one_key_stream(range(10_000, 20_000, 10), first_id=30_000)
    write_parts([first, behind, third], tmp_path / "in")
    table = pa.concat_tables([first, behind, third])
    handler = windows_handler(
        tmp_path, TumblingEventTimeWindows.of(timedelta(seconds=5)), timedelta(0), ["count"]
    )
    run_query(spark, tmp_path / "in", spark.createDataFrame(table).schema, handler, tmp_path / "ck")
    summaries = [(p["frontier"], p["restamped"], p["pending"]) for p in handler.progress]
    assert summaries[:2] == [(8_800, 0, 119), (8_800, 1, 120)]
    assert sum(p["restamped"] for p in handler.progress) == 1
    warned = [r.getMessage() for r in caplog.records if "re-stamped" in r.getMessage()]
    assert len(warned) == 1 and "1 rows arrived at or before the frontier 8800" in warned[0]


def test_a_key_first_seen_in_a_later_batch_meets_the_watermark_in_force(
    spark: Any, tmp_path: Path
) -> None:
    """A key group without operator state yet (its first records in the second batch)
    starts at the watermark in force, not at ``Long.MIN_VALUE``: its records arriving
    before the batch's first advance, in windows already closed, are late, as the batch
    function has them (keyed path)."""
    from pyspark.sql import functions as F

    steady = one_key_stream(range(0, 20_000, 10))
    # Keys 1-8 first appear in the second file, at arrival 8,850 ms: past the first
    # batch's frontier (8,800 ms: 9,990 ms less the 1 s allowance, on the grid) and
    # before the second batch's first advance (9,000 ms), with event times in the
    # window [0, 5 s), closed at the watermark in force (7,799 ms).
    newcomers = pa.table(
        {
            "id": range(10_000, 10_008),
            "partition": [0] * 8,
            "event_time": [1_000] * 8,
            "arrival": [8_850] * 8,
            "key": range(1, 9),
            "value": [1] * 8,
        }
    )
    first = steady.slice(0, 1_000)
    second = pa.concat_tables([steady.slice(1_000), newcomers]).sort_by("arrival")
    write_parts([first, second], tmp_path / "in")
    table = pa.concat_tables([first, second])
    window, lateness = TumblingEventTimeWindows.of(timedelta(seconds=5)), timedelta(0)
    handler = windows_handler(tmp_path, window, lateness, ["count"], path="keyed")
    frame = spark.createDataFrame(table)
    group = F.pmod(F.hash("key"), F.lit(DEFAULT_KEY_GROUPS))
    groups = dict(frame.select("key", group).distinct().collect())
    assert any(groups[k] != groups[0] for k in range(1, 9))  # a group new in batch 2
    run_query(spark, tmp_path / "in", frame.schema, handler, tmp_path / "ck")
    assert [p["frontier"] for p in handler.progress][:1] == [8_800]
    frontier = handler.progress[-1]["frontier"]
    want = batch_windows(spark, table, window, lateness, ["count"])
    late_cols = [*table.column_names, "watermark"]
    got_late = read_output(spark, tmp_path / "out", "late")
    want_late = before(want.late.toArrow(), "arrival", frontier)
    assert sorted(want_late["key"].to_pylist()) == list(range(1, 9))
    assert rows_of(got_late, late_cols) == rows_of(want_late, late_cols)
    result_cols = result_columns(["count"])
    got_results = read_output(spark, tmp_path / "out", "results")
    want_results = before(want.results.toArrow(), "fired_at", frontier)
    assert rows_of(got_results, result_cols) == rows_of(want_results, result_cols)
    want.unpersist()


@pytest.mark.parametrize(
    ("keys", "kind"),
    [([5, 5, 6, 5], pa.int64()), (["a", None, "a", None, "b"], pa.string())],
    ids=["integers", "strings and nulls"],
)
def test_identical_late_records_are_each_written_once(
    spark: Any, tmp_path: Path, keys: list[Any], kind: pa.DataType
) -> None:
    """Late records equal in what the keyed operator is sent (key, event time, arrival,
    partition) are each written once, with every column, as the batch function writes
    them: the operator's late rows are collected and deduplicated before the join
    (null keys too: the join is null-safe)."""
    steady = one_key_stream(range(0, 20_000, 10))
    steady = (
        steady.set_column(
            steady.schema.get_field_index("key"), "key", steady["key"].cast(pa.string())
        )
        if kind == pa.string()
        else steady
    )
    late = pa.table(
        {
            "id": range(50_000, 50_000 + len(keys)),
            "partition": [0] * len(keys),
            "event_time": [1_000] * len(keys),
            "arrival": [12_000] * len(keys),
            "key": pa.array(keys, kind),
            "value": range(len(keys)),
        }
    )
    first = steady.slice(0, 1_000)
    second = pa.concat_tables([steady.slice(1_000), late]).sort_by("arrival")
    write_parts([first, second], tmp_path / "in")
    table = pa.concat_tables([first, second])
    window, lateness = TumblingEventTimeWindows.of(timedelta(seconds=5)), timedelta(0)
    handler = windows_handler(tmp_path, window, lateness, ["count", ("mean", "value")])
    run_query(spark, tmp_path / "in", spark.createDataFrame(table).schema, handler, tmp_path / "ck")
    got = read_output(spark, tmp_path / "out", "late")
    assert sorted(got["id"].to_pylist()) == list(range(50_000, 50_000 + len(keys)))
    want = batch_windows(spark, table, window, lateness, ["count", ("mean", "value")])
    cols = ["id", "partition", "event_time", "arrival", "value", "watermark"]
    assert rows_of(got, cols) == rows_of(want.late.toArrow(), cols)
    want.unpersist()


def test_the_timeline_and_every_channels_emissions_of_a_live_query(
    spark: Any, stream: pa.Table, tmp_path: Path
) -> None:
    """``timeline=True, emissions=True``: the batches' timeline segments and channel
    emissions make up the batch pipeline's up to the final frontier (what the report
    draws); the window outputs are unchanged by them."""
    from floodmark.spark.plan import make_plan
    from floodmark.spark.timeline import compute_timeline
    from floodmark.timeline import in_emission_order

    window, lateness = WINDOWS["tumbling"]
    source = write_files(stream, tmp_path / "in", 5)
    handler = windows_handler(tmp_path, window, lateness, AGGS, timeline=True, emissions=True)
    run_query(spark, source, spark.createDataFrame(stream).schema, handler, tmp_path / "ck")
    frontier = handler.progress[-1]["frontier"]
    df, plan = make_plan(
        spark.createDataFrame(stream),
        STRATEGY,
        **COLUMNS,
        emit_interval=timedelta(milliseconds=200),
        event_time_unit=None,
        arrival_unit=None,
    )
    whole = compute_timeline(df, plan, emissions=True)
    assert whole.emissions is not None
    # The input's integer times are milliseconds: ticks as they are.
    got = read_output(spark, tmp_path / "out", "emissions")
    cols = ["channel", "time", "kind", "watermark"]
    want = before(whole.emissions, "time", frontier).select(cols)
    # Read back from Parquet, in the builder's order again.
    assert in_emission_order(got).select(cols).to_pylist() == want.to_pylist()
    assert set(want["kind"].to_pylist()) == {"watermark", "idle", "active"}
    timeline = read_output(spark, tmp_path / "out", "timeline").sort_by("time")
    tcols = ["time", "watermark", "status", "min_channel"]
    assert (
        timeline.select(tcols).to_pylist()
        == before(whole.table, "time", frontier).select(tcols).to_pylist()
    )
    with pytest.raises(InvalidParameterError, match="`timeline`"):
        windows_handler(tmp_path, window, lateness, AGGS, timeline="yes")


def test_a_file_batch_is_read_again_and_others_are_cached(
    spark: Any, stream: pa.Table, tmp_path: Path
) -> None:
    """A micro-batch of the file source is not cached (each pass reads its files again);
    one of another source (a Python data source here, Kafka alike) is, and
    ``cache_batch`` decides when given; the outputs are the same either way."""
    from floodmark.spark.sources import replay_stream
    from floodmark.spark.streaming.handler import reads_only_files

    table = stream.slice(0, 2_000)
    source = write_files(table, tmp_path / "in", 2)
    schema = spark.createDataFrame(table).schema
    records: dict[str, pa.Table] = {}
    for cache in (None, True):
        folder = tmp_path / f"files-{cache}"
        handler = watermarks_handler(folder, cache_batch=cache)
        run_query(spark, source, schema, handler, folder / "ck")
        assert [p["batch_cached"] for p in handler.progress] == [cache is True] * 2
        records[str(cache)] = read_output(spark, folder / "out", "records")
    assert records["None"].num_rows > 1_000
    assert rows_of(records["None"], records["None"].column_names) == rows_of(
        records["True"], records["None"].column_names
    )
    seen: list[bool] = []
    replayed = replay_stream(spark, table, arrival="arrival", channel="partition", step=60_000)
    query = (
        replayed.writeStream.foreachBatch(lambda df, _: seen.append(reads_only_files(df)))
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "ck-replay"))
        .start()
    )
    query.awaitTermination()
    assert seen and not any(seen)
    folder = tmp_path / "replayed"
    handler = watermarks_handler(folder)
    query = (
        replay_stream(spark, table, arrival="arrival", channel="partition", step=60_000)
        .writeStream.foreachBatch(handler)
        .trigger(availableNow=True)
        .option("checkpointLocation", str(folder / "ck"))
        .start()
    )
    query.awaitTermination()
    assert handler.progress and all(p["batch_cached"] for p in handler.progress)
    with pytest.raises(InvalidParameterError, match="`cache_batch`"):
        watermarks_handler(tmp_path, cache_batch="yes")


@pytest.mark.parametrize("step", [400, 3_000, 10**9], ids=["1-row-per-partition", "3s", "all"])
def test_micro_batch_size_changes_nothing(spark: Any, tmp_path: Path, step: int) -> None:
    """From about one row per partition per micro-batch (a 400 ms clock over four
    partitions sending one record per ~400 ms, ~13 micro-batches) to everything in one:
    the native path's outputs up to the final frontier are the batch function's."""
    from floodmark.spark.sources import replay_stream

    spec = dataclasses.replace(
        SPEC,
        rows=50,
        partitions=4,
        keys=3,
        duration_ms=5_000,
        disorder_ms=600,
        lag_ms=1_500,
        quiet_partition=None,
        very_late_fraction=0.0,
    )
    table = generate(spec)
    window, lateness = TumblingEventTimeWindows.of(timedelta(seconds=1)), timedelta(seconds=1)
    events = replay_stream(
        spark,
        table,
        arrival="arrival",
        channel="partition",
        step=step,
        first_batch_all_channels=True,
        max_partitions=1,
    )
    handler = windows_handler(tmp_path, window, lateness, AGGS, path="native")
    query = (
        events.writeStream.foreachBatch(handler)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    frontier = handler.progress[-1]["frontier"]
    if step == 400:
        assert len(handler.progress) > 10
    want = batch_windows(spark, table, window, lateness, AGGS)
    cols = result_columns(AGGS)
    got = read_output(spark, tmp_path / "out", "results")
    assert rows_of(got, cols) == rows_of(before(want.results.toArrow(), "fired_at", frontier), cols)
    assert got.num_rows > 5
    want.unpersist()


def test_a_thousand_partitions_live_equal_the_batch_functions(spark: Any, tmp_path: Path) -> None:
    """A topic of 1,000 partitions, each sending about five records in a minute (idle
    most of the time; ~200 of them have no record in the first micro-batch), read in
    three micro-batches with the topic's partitions named up front (``channels``):
    every record's channel and combined watermark, and both window paths' firings and
    late rows, up to the final frontier, are the batch functions'. Without
    ``channels``, the partitions first seen in the second batch join the valve at its
    start and hold the combined watermark until they go idle (docs/streaming.md)."""
    table = generate(dataclasses.replace(SPEC, rows=5_000, partitions=1_000, duration_ms=60_000))
    source = write_files(table, tmp_path / "in", 3)
    partitions = sorted(set(table["partition"].to_pylist()))
    first = set(pq.read_table(source / "part-00000.parquet")["partition"].to_pylist())
    assert len(set(partitions) - first) > 100
    schema = spark.createDataFrame(table).schema

    marks = watermarks_handler(tmp_path / "marks", channels=partitions)
    run_query(spark, source, schema, marks, tmp_path / "marks" / "ck")
    assert marks.progress[0]["channels"] == len(partitions)
    frontier = marks.progress[-1]["frontier"]
    got = read_output(spark, tmp_path / "marks" / "out", "records")
    want = assign_watermarks(spark.createDataFrame(table), STRATEGY, **COLUMNS).toArrow()
    columns = [*table.column_names, "channel_watermark", "watermark", "is_late", "error"]
    assert rows_of(got, columns) == rows_of(before(want, "arrival", frontier), columns)
    assert got.num_rows > table.num_rows * 0.8 and sum(got["is_late"].to_pylist()) > 0

    window, lateness = WINDOWS["tumbling+lateness"]
    for path, aggs in (("native", AGGS), ("keyed", KEYED_AGGS)):
        folder = tmp_path / path
        handler = windows_handler(folder, window, lateness, aggs, path=path, channels=partitions)
        run_query(spark, source, schema, handler, folder / "ck")
        frontier = handler.progress[-1]["frontier"]
        out = batch_windows(spark, table, window, lateness, aggs)
        result_cols = result_columns(aggs)
        got_results = read_output(spark, folder / "out", "results")
        want_results = before(out.results.toArrow(), "fired_at", frontier)
        assert rows_of(got_results, result_cols) == rows_of(want_results, result_cols), path
        late_cols = [*table.column_names, "watermark"]
        got_late = read_output(spark, folder / "out", "late")
        want_late = before(out.late.toArrow(), "arrival", frontier)
        assert rows_of(got_late, late_cols) == rows_of(want_late, late_cols), path
        assert got_results.num_rows > 100 and got_late.num_rows > 0
        out.unpersist()

    # Not named up front, the partitions first seen in the second batch hold it back.
    unnamed = watermarks_handler(tmp_path / "unnamed")
    run_query(spark, source, schema, unnamed, tmp_path / "unnamed" / "ck")
    held = read_output(spark, tmp_path / "unnamed" / "out", "records")
    assert rows_of(held, columns) != rows_of(before(want, "arrival", frontier), columns)
    assert unnamed.progress[0]["channels"] == len(first)


@pytest.mark.parametrize(
    ("channels", "message"),
    [
        ("0,1,2", "expected the channel values"),
        (5, "expected the channel values"),
        ([0, "1"], "all of one kind"),
        ([0, None], "all of one kind"),
        ([True], "all of one kind"),
        (range(10**12), "at most 16,777,216 channels"),
    ],
)
def test_channels_that_are_not_channel_values_are_refused(
    tmp_path: Path, channels: Any, message: str
) -> None:
    with pytest.raises(InvalidParameterError, match=f"`channels`.*{message}"):
        watermarks_handler(tmp_path, channels=channels)


def test_channels_are_integers_of_any_kind_or_strings(tmp_path: Path) -> None:
    import numpy as np

    assert watermarks_handler(tmp_path, channels=np.arange(3, dtype=np.int32)).channels == [0, 1, 2]
    assert watermarks_handler(tmp_path, channels=[2, 0, 2]).channels == [0, 2]
    assert watermarks_handler(tmp_path, channels=("b", "a")).channels == ["a", "b"]
    assert watermarks_handler(tmp_path, channels=np.array(["a"])).channels == ["a"]
    assert type(watermarks_handler(tmp_path, channels=np.arange(1)).channels[0]) is int


def test_channels_of_another_type_than_the_column_are_refused(
    spark: Any, stream: pa.Table, tmp_path: Path
) -> None:
    schema = spark.createDataFrame(stream).schema
    events = spark.readStream.schema(schema).parquet(str(tmp_path))
    with pytest.raises(InvalidParameterError, match=r"`channels`.*'partition' is bigint"):
        watermarks_handler(tmp_path, channels=["p0", "p1"]).check(events)
    with pytest.raises(
        InvalidParameterError, match=r"`channels`.*9223372036854775808 is out of its range"
    ):
        watermarks_handler(tmp_path, channels=[0, 2**63]).check(events)
    assert watermarks_handler(tmp_path, channels=range(3)).check(events).channel == "partition"


def two_arguments(kind: str, df: Any) -> None:
    raise AssertionError("never called")


@pytest.mark.parametrize(
    "outputs",
    [two_arguments, lambda kind, df, batch_id, extra: None, lambda *, kind, df, batch_id: None],
)
def test_a_sink_that_cannot_take_kind_df_and_batch_id_is_refused(
    tmp_path: Path, outputs: Any
) -> None:
    """Checked from its signature when the handler is made (it failed with a bare
    ``TypeError`` inside the first batch, after the watermark stages had run)."""
    with pytest.raises(InvalidParameterError, match=r"`outputs`.*callable \(kind, df, batch_id\)"):
        StreamingWatermarks(
            STRATEGY, **COLUMNS, state_location=str(tmp_path / "state"), outputs=outputs
        )


def test_sinks_that_can_take_kind_df_and_batch_id_are_taken(tmp_path: Path) -> None:
    import functools

    def four(kind: str, df: Any, batch_id: int, mode: str = "append") -> None: ...

    for outputs in (four, functools.partial(four, mode="x"), lambda *a: None, print):
        StreamingWatermarks(
            STRATEGY, **COLUMNS, state_location=str(tmp_path / "state"), outputs=outputs
        )


@pytest.mark.parametrize("parameter", ["channel", "arrival"])
def test_a_missing_column_name_is_named_for_what_it_is(tmp_path: Path, parameter: str) -> None:
    what = {"channel": "the Kafka partition", "arrival": "the Kafka record timestamp"}
    with pytest.raises(InvalidParameterError, match=f"`{parameter}`.*{what[parameter]}"):
        StreamingWatermarks(
            STRATEGY,
            **{**COLUMNS, parameter: ""},
            state_location=str(tmp_path / "state"),
            outputs=ParquetOutputs(str(tmp_path / "out")),
        )


def test_check_refuses_a_bad_allowance_and_a_record_driven_strategy_first(
    spark: Any, stream: pa.Table, tmp_path: Path
) -> None:
    """``check`` refuses before the query starts what the first batch would: a bad
    ``allowance`` (it was refused only inside the running query); a punctuated
    strategy is refused as such before its marker column is looked at (no marker type
    makes it run live)."""
    schema = spark.createDataFrame(stream).schema
    events = spark.readStream.schema(schema).parquet(str(tmp_path))
    for allowance in ("1s", None, 1.5, timedelta(seconds=-1)):
        with pytest.raises(InvalidParameterError, match="`allowance`"):
            watermarks_handler(tmp_path, allowance=allowance).check(events)
    punctuated = WatermarkStrategy.for_punctuated("key")  # a bigint column, not a marker
    handler = StreamingWatermarks(
        punctuated,
        **COLUMNS,
        state_location=str(tmp_path / "state"),
        outputs=ParquetOutputs(str(tmp_path / "out")),
    )
    with pytest.raises(InvalidParameterError, match=r"`strategy`.*not 'punctuated'"):
        handler.check(events.withColumn("key", events["key"].cast("boolean")))


def markers(folder: Path) -> list[str]:
    """The batch ids with a floodmark marker under ``folder/state``."""
    return [n for n in names(folder / "state" / "commits") if n.isdigit()]


def test_a_state_restored_apart_from_its_checkpoint_is_refused(
    spark: Any, stream: pa.Table, tmp_path: Path
) -> None:
    """The checkpoint and the state parted (the state restored from an older copy, or
    the checkpoint from an older one): refused, naming the batches, nothing written;
    restored together, the query goes on."""
    schema = spark.createDataFrame(stream).schema
    parts = [stream.slice(i, 500) for i in range(0, 2_000, 500)]
    source = write_parts(parts[:1], tmp_path / "in")
    run_query(spark, source, schema, watermarks_handler(tmp_path), tmp_path / "ck")
    shutil.copytree(tmp_path / "state", tmp_path / "state-after-0")
    shutil.copytree(tmp_path / "ck", tmp_path / "ck-after-0")
    write_parts(parts[:3], source)  # the same first file, two new ones
    run_query(spark, source, schema, watermarks_handler(tmp_path), tmp_path / "ck")
    assert markers(tmp_path) == ["1", "2"]
    write_parts(parts, source)
    newer_state = tmp_path / "state-after-2"
    shutil.copytree(tmp_path / "state", newer_state)
    # The state behind the checkpoint: batch 3 would miss the rows of batches 1 and 2.
    shutil.rmtree(tmp_path / "state")
    shutil.copytree(tmp_path / "state-after-0", tmp_path / "state")
    with pytest.raises(Exception, match=r"newest batch committed .* is 0.*batches 1-2 are not"):
        run_query(spark, source, schema, watermarks_handler(tmp_path), tmp_path / "ck")
    assert markers(tmp_path) == ["0"]
    # The checkpoint behind the state: batch 1 again would replace committed outputs.
    shutil.rmtree(tmp_path / "state")
    shutil.copytree(newer_state, tmp_path / "state")
    with pytest.raises(Exception, match=r"batch 2 is committed .* the checkpoint is behind"):
        run_query(spark, source, schema, watermarks_handler(tmp_path), tmp_path / "ck-after-0")
    assert markers(tmp_path) == ["1", "2"]
    # The state lost (or at another path): batch 3 would start the valve afresh and
    # lose the rows batch 2 held back.
    shutil.rmtree(tmp_path / "state")
    with pytest.raises(Exception, match=r"Spark runs batch 3, but .* holds no committed batch"):
        run_query(spark, source, schema, watermarks_handler(tmp_path), tmp_path / "ck")
    assert not (tmp_path / "state" / "commits").exists()
    assert not (tmp_path / "state").exists()  # nothing at all
    # Together, they go on.
    shutil.copytree(newer_state, tmp_path / "state")
    handler = watermarks_handler(tmp_path)
    run_query(spark, source, schema, handler, tmp_path / "ck")
    assert [p["batch_id"] for p in handler.progress] == [3]


@pytest.mark.parametrize(
    ("handler", "lost"),
    [
        ("watermarks", "builder.bin"),
        ("watermarks", "pending"),
        ("keyed", "operators"),
        ("native", "open"),
    ],
)
def test_a_damaged_committed_state_is_refused(
    spark: Any, stream: pa.Table, tmp_path: Path, handler: str, lost: str
) -> None:
    """A committed version missing a file: refused, naming it (the windows' state
    started afresh, the valve too, or the rows held back were lost)."""

    def make() -> Any:
        if handler == "watermarks":
            return watermarks_handler(tmp_path)
        window = TumblingEventTimeWindows.of(timedelta(seconds=5))
        return windows_handler(tmp_path, window, timedelta(0), ["count"], path=handler)

    schema = spark.createDataFrame(stream).schema
    parts = [stream.slice(i, 500) for i in range(0, 1_000, 500)]
    source = write_parts(parts[:1], tmp_path / "in")
    run_query(spark, source, schema, make(), tmp_path / "ck")
    damaged = tmp_path / "state" / "versions" / "0" / lost
    shutil.rmtree(damaged) if damaged.is_dir() else damaged.unlink()
    write_parts(parts, source)
    with pytest.raises(Exception, match=rf"state of batch 0 is damaged: .*{lost} is missing"):
        run_query(spark, source, schema, make(), tmp_path / "ck")


def test_publishing_replaces_another_runs_batch_and_finishes_its_own(
    spark: Any, tmp_path: Path
) -> None:
    """A batch id's folder left by another run (outputs not restored with the checkpoint
    and state) is replaced on the first move; a move of this run cut short is finished,
    keeping what it moved."""
    from floodmark.spark.streaming.state import StateStore

    store = StateStore(spark, str(tmp_path / "state"))
    outputs = ParquetOutputs(str(tmp_path / "out"))
    staged, final = Path(outputs.staging("late", 3)), Path(outputs.final("late", 3))
    final.mkdir(parents=True)
    (final / "part-old.parquet").write_text("another run")
    staged.mkdir()
    (staged / "part-a.parquet").write_text("a")
    (staged / "part-b.parquet").write_text("b")
    (staged / "part-b.parquet").rename(tmp_path / "aside")
    outputs.publish(store, 3, ["late"])  # the first move
    assert names(final) == ["part-a.parquet"]
    staged.mkdir()  # as if that move had stopped before b
    (tmp_path / "aside").rename(staged / "part-b.parquet")
    outputs.publish(store, 3, ["late"])  # run again after the crash: finishes it
    assert names(final) == ["part-a.parquet", "part-b.parquet"]
    assert not staged.exists()
    outputs.publish(store, 3, ["late"])  # published: nothing to do
    assert names(final) == ["part-a.parquet", "part-b.parquet"]


def test_an_empty_output_is_staged_without_a_job_after_the_first(
    spark: Any, tmp_path: Path
) -> None:
    """A batch known to have none of an output: ParquetOutputs stages an empty Parquet
    file of the output's schema, by a Spark job the first time and by a copy of it
    after (no job); each published batch reads back with the schema, and another
    schema gets a file of its own."""
    from pyspark.sql import functions as F
    from spark_helpers import jobs

    from floodmark.spark.streaming.state import StateStore

    store = StateStore(spark, str(tmp_path / "state"))
    outputs = ParquetOutputs(str(tmp_path / "out"))
    frame = spark.range(3).select(F.col("id"), F.lit("x").alias("s"))
    for batch_id in range(3):
        before_jobs = jobs(spark)
        outputs.write_empty("late", frame, batch_id)
        assert (jobs(spark) - before_jobs > 0) == (batch_id == 0), batch_id
        outputs.publish(store, batch_id, ["late"])
    assert names(tmp_path / "out" / "late") == ["batch=0", "batch=1", "batch=2"]
    assert "_SUCCESS" in names(tmp_path / "out" / "late" / "batch=2")
    back = spark.read.parquet(str(tmp_path / "out" / "late"))
    assert back.columns == ["id", "s", "batch"] and back.count() == 0
    assert dict(back.dtypes)["s"] == "string"
    other = frame.withColumn("extra", F.lit(1.5))
    outputs.write_empty("late", other, 3)  # another schema: written by a job again
    staged = pq.read_table(outputs.staging("late", 3))
    assert staged.num_rows == 0 and staged.column_names == ["id", "s", "extra"]
    kept = [n for n in names(tmp_path / "out" / "_empty") if not n.startswith(".")]  # .crc
    assert len(kept) == 2 and all(n.startswith("late-") for n in kept)


def test_an_empty_output_is_built_once_per_input_schema(
    spark: Any, stream: pa.Table, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches with no late rows stage the late output from its schema: the keyed
    path builds the late rows' frame (a join) for the first such batch only, and again
    when the input's schema changes (a column added at a restart); every batch's late
    folder reads back, with no rows."""
    from floodmark.spark.streaming.windows import KeyedOutputs

    built: list[int] = []
    late = KeyedOutputs.late

    def counted(self: KeyedOutputs) -> Any:
        built.append(len(self.batch.columns))
        return late(self)

    monkeypatch.setattr(KeyedOutputs, "late", counted)
    parts = [stream.slice(i, 300) for i in range(0, 1_200, 300)]
    source = write_parts(parts[:2], tmp_path / "in")
    window = TumblingEventTimeWindows.of(timedelta(seconds=1))
    handler = windows_handler(tmp_path, window, timedelta(days=1), ["count"], path="keyed")
    run_query(spark, source, spark.createDataFrame(stream).schema, handler, tmp_path / "ck")
    wider = [p.append_column("extra", pa.array([1.5] * p.num_rows)) for p in parts[2:]]
    shutil.rmtree(source)
    write_parts([*parts[:2], *wider], source)  # the first two are seen already
    schema = spark.createDataFrame(wider[0]).schema
    run_query(spark, source, schema, handler, tmp_path / "ck")
    assert [p["late"] for p in handler.progress] == [0, 0, 0, 0]
    assert built == [len(stream.column_names), len(stream.column_names) + 1]
    assert names(tmp_path / "out" / "late") == [f"batch={b}" for b in range(4)]
    assert spark.read.parquet(str(tmp_path / "out" / "late")).count() == 0


def test_a_channel_column_of_another_type_after_a_restart_is_refused(
    spark: Any, stream: pa.Table, tmp_path: Path
) -> None:
    parts = [stream.slice(i, 500) for i in range(0, 1_000, 500)]
    source = write_parts(parts[:1], tmp_path / "in")
    run_query(
        spark,
        source,
        spark.createDataFrame(stream).schema,
        watermarks_handler(tmp_path),
        tmp_path / "ck",
    )
    index = stream.schema.get_field_index("partition")
    text = [p.set_column(index, "partition", p["partition"].cast(pa.string())) for p in parts]
    shutil.rmtree(source)
    write_parts(text, source)
    schema = spark.createDataFrame(text[0]).schema
    with pytest.raises(Exception, match=r"channel column 'partition' is string, but the state"):
        run_query(spark, source, schema, watermarks_handler(tmp_path), tmp_path / "ck")
    assert markers(tmp_path) == ["0"]


def test_a_key_or_value_column_of_another_type_after_a_restart_is_refused(
    spark: Any, stream: pa.Table, tmp_path: Path
) -> None:
    """The rows held back and the windows kept are in the types of the first run: a
    column whose type changed is refused naming it, before anything is written; a
    column added is taken (the held-back rows read it as null)."""
    parts = [stream.slice(i, 500) for i in range(0, 1_500, 500)]
    source = write_parts(parts[:1], tmp_path / "in")

    def run(table: pa.Table) -> None:
        handler = windows_handler(
            tmp_path, TumblingEventTimeWindows.of(timedelta(seconds=10)), 0, ["count"]
        )
        run_query(spark, source, spark.createDataFrame(table).schema, handler, tmp_path / "ck")

    run(parts[0])
    added = [p.append_column("note", pa.array(["x"] * p.num_rows)) for p in parts]
    shutil.rmtree(source)
    write_parts(added[:2], source)  # the first file is seen already: the second is read
    run(added[1])  # a column added: taken
    assert markers(tmp_path) == ["0", "1"]
    index = stream.schema.get_field_index("key")
    text = [p.set_column(index, "key", p["key"].cast(pa.string())) for p in added]
    shutil.rmtree(source)
    write_parts(text, source)
    with pytest.raises(Exception, match=r"column .key. is string, but it was bigint when"):
        run(text[2])
    assert markers(tmp_path) == ["0", "1"]


def test_a_nested_column_may_evolve_but_not_change_kind(spark: Any) -> None:
    """A struct, array or map column that stays one is left to Parquet's evolution of
    nested fields; one that becomes another kind (a struct read as a string) is refused
    naming it: the rows held back could not be read (a raw ClassCastException on a state
    file, at every restart)."""
    from floodmark.spark.streaming.handler import check_column_types
    from floodmark.spark.streaming.state import StateError

    recorded = {"p": "struct<a:bigint>", "q": "array<bigint>", "r": "map<string,bigint>"}
    same = "p struct<a:bigint, b:string>, q array<string>, r map<string,string>, s bigint"
    check_column_types(recorded, spark.createDataFrame([], same), "here")
    for changed, now in (("p", "string"), ("q", "bigint"), ("r", "struct<a:bigint>")):
        columns = {**recorded, changed: now}
        df = spark.createDataFrame([], ", ".join(f"{k} {v}" for k, v in columns.items()))
        with pytest.raises(StateError, match=rf"column '{changed}' is {now[:6]}.*but it was"):
            check_column_types(recorded, df, "here")


def test_one_store_lists_its_commits_once_and_again_after_each_commit(
    spark: Any, tmp_path: Path
) -> None:
    """``committed()`` is listed once per store (a marker written by someone else is
    not seen), and again after :meth:`commit`: the new marker counts, pruning sees it
    (only the newest two versions stay) and the pruned markers are gone."""
    from floodmark.spark.streaming.state import KEEP_VERSIONS, StateStore

    store = StateStore(spark, str(tmp_path))
    assert store.committed() == []
    (tmp_path / "commits").mkdir()
    (tmp_path / "commits" / "9").write_text("{}")  # behind the store's back
    assert store.committed() == [] and store.last_before(10) is None
    (tmp_path / "commits" / "9").unlink()
    for b in range(4):
        (tmp_path / "versions" / str(b)).mkdir(parents=True)
        store.commit(b, {"batch_id": b})
        kept = list(range(max(0, b + 1 - KEEP_VERSIONS), b + 1))
        assert store.committed() == kept
        for folder in ("versions", "commits"):
            assert sorted(int(n) for n in names(tmp_path / folder) if n.isdigit()) == kept
    assert store.last_before(4) == 3 and store.last_before(3) == 2


def test_another_querys_outputs_and_a_checkpoint_as_state_are_refused(
    spark: Any, stream: pa.Table, tmp_path: Path
) -> None:
    """A second query (another checkpoint and state) writing to the first one's
    ParquetOutputs would replace its batches of the same ids: refused, nothing written.
    A state location that is a query's checkpoint (their commits/ folders would
    collide), its own or another's with committed batches, is refused naming
    state_location."""
    schema = spark.createDataFrame(stream).schema
    source = write_files(stream.slice(0, 1000), tmp_path / "in", 2)

    def handler(state: Path) -> StreamingWatermarks:
        outputs = ParquetOutputs(str(tmp_path / "out"))
        return StreamingWatermarks(STRATEGY, **COLUMNS, state_location=str(state), outputs=outputs)

    run_query(spark, source, schema, handler(tmp_path / "state1"), tmp_path / "ck1")
    written = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "out").rglob("*"))
    with pytest.raises(Exception, match=r"outputs in .*out belong to streaming query"):
        run_query(spark, source, schema, handler(tmp_path / "state2"), tmp_path / "ck2")
    assert sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "out").rglob("*")) == written
    assert not (tmp_path / "state2" / "commits").exists()
    with pytest.raises(Exception, match=r"state_location.*is a streaming query's checkpoint"):
        run_query(spark, source, schema, handler(tmp_path / "ck3"), tmp_path / "ck3")
    # A checkpoint with committed batches (another query's, ck1) is named as such too,
    # not as state of another floodmark version (its commits/ were checked first).
    with pytest.raises(Exception, match=r"state_location.*is a streaming query's checkpoint"):
        run_query(spark, source, schema, handler(tmp_path / "ck1"), tmp_path / "ck4")


def test_a_handler_keeps_the_newest_summaries(
    spark: Any, stream: pa.Table, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``progress`` keeps the newest ``KEEP_PROGRESS`` summaries (a query runs for
    months); every batch's is in its marker."""
    from floodmark.spark.streaming import handler as handler_module

    monkeypatch.setattr(handler_module, "KEEP_PROGRESS", 2)
    source = write_files(stream.slice(0, 1500), tmp_path / "in", 3)
    handler = watermarks_handler(tmp_path)
    run_query(spark, source, spark.createDataFrame(stream).schema, handler, tmp_path / "ck")
    assert [p["batch_id"] for p in handler.progress] == [1, 2]
    assert handler.last_progress is not None and handler.last_progress["batch_id"] == 2


def test_publishing_goes_on_where_an_interrupted_move_stopped(spark: Any, tmp_path: Path) -> None:
    """A move of a staged batch cut short (a file system that renames a folder file by
    file, as S3A does) is finished by the next attempt, nothing lost; a whole folder
    moves in one rename."""
    from floodmark.spark.streaming.state import StateStore

    files = StateStore(spark, str(tmp_path))
    staged, final = tmp_path / "_staging-7", tmp_path / "batch=7"
    staged.mkdir()
    for name in ("a.parquet", "b.parquet", "c.parquet", "_SUCCESS"):
        (staged / name).write_text(name)
    final.mkdir()  # the interrupted move: a moved, b copied but not yet deleted
    (staged / "a.parquet").rename(final / "a.parquet")
    (final / "b.parquet").write_text("b.parquet")
    files.move_into(str(staged), str(final))
    assert names(final) == ["_SUCCESS", "a.parquet", "b.parquet", "c.parquet"]
    assert all((final / n).read_text() == n for n in names(final))
    assert not staged.exists()
    again = tmp_path / "_staging-8"
    again.mkdir()
    (again / "x.parquet").write_text("x")
    files.move_into(str(again), str(tmp_path / "batch=8"))
    assert names(tmp_path / "batch=8") == ["x.parquet"] and not again.exists()


def test_a_background_state_write_that_fails_fails_the_batch(spark: Any) -> None:
    """The state writes that run beside the outputs are waited for, and their error is
    raised in the batch's thread (never lost with the thread); while another error is on
    its way, waiting does not replace it."""
    from floodmark.spark.streaming.handler import Background

    done: list[int] = []
    background = Background()
    background.start(lambda: done.append(spark.range(3).count()))

    def fails() -> None:
        raise OSError("disk full")

    background.start(fails)
    with pytest.raises(OSError, match="disk full"):
        background.wait()
    assert done == [3]
    background.start(fails)
    background.wait(raise_errors=False)
    background.wait()  # nothing left


def test_a_restart_with_other_outputs_before_a_committed_batch_is_published_is_refused(
    spark: Any, stream: pa.Table, tmp_path: Path
) -> None:
    """The query stops between floodmark's marker and the publication of a batch's
    staged outputs. Restarted with another ParquetOutputs folder, the batch (run again
    by Spark: only published) would be in neither folder: refused, naming the first;
    restarted once with the first, it is published, and the outputs are complete."""
    from floodmark.spark.streaming import handler as handler_module

    schema = spark.createDataFrame(stream).schema
    source = write_files(stream.slice(0, 1500), tmp_path / "in", 3)
    first, other = tmp_path / "out", tmp_path / "other"

    def handler(out: Path) -> StreamingWatermarks:
        outputs = ParquetOutputs(str(out))
        return StreamingWatermarks(
            STRATEGY, **COLUMNS, state_location=str(tmp_path / "state"), outputs=outputs
        )

    stopping = handler(first)
    publish = handler_module.BatchHandler.publish

    def stop_before_publishing(store: Any, batch_id: int, kinds: list[str]) -> None:
        if batch_id == 1:
            raise RuntimeError("stopped after the marker")
        publish(stopping, store, batch_id, kinds)

    stopping.publish = stop_before_publishing  # type: ignore[method-assign]
    with pytest.raises(Exception, match="stopped after the marker"):
        run_query(spark, source, schema, stopping, tmp_path / "ck")
    assert (first / "records" / "_staging-1").exists()
    with pytest.raises(Exception, match=r"batch 1 was committed with its outputs staged in"):
        run_query(spark, source, schema, handler(other), tmp_path / "ck")
    assert not (other / "records").exists()
    run_query(spark, source, schema, handler(first), tmp_path / "ck")
    assert names(first / "records") == ["batch=0", "batch=1", "batch=2"]
    whole = tmp_path / "whole"
    run_query(spark, source, schema, watermarks_handler(whole), whole / "ck")
    columns = ["id", "watermark", "channel_watermark", "is_late"]
    got, want = read_output(spark, first, "records"), read_output(spark, whole / "out", "records")
    assert rows_of(got, columns) == rows_of(want, columns)
