"""Inputs a user may well give: empty frames, no placeable row, a column in two roles,
arguments of the wrong kind. Each either works, with every row accounted for, or fails
with an error naming the parameter or column before any Spark job runs."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from spark_helpers import jobs

from floodmark import TumblingEventTimeWindows, WatermarkStrategy
from floodmark.exceptions import InvalidInputError, InvalidParameterError, SchemaError
from floodmark.spark import assign_watermarks, watermark_timeline, window_aggregate
from floodmark.spark.analyze import analyze_bounds
from floodmark.spark.assign import ADDED_COLUMNS

STRATEGY = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(milliseconds=3))
WINDOW = TumblingEventTimeWindows.of(timedelta(milliseconds=10))
SCHEMA = "ch int, ts long, arr long, k string, v long"
COLUMNS = {"event_time": "ts", "channel": "ch", "arrival": "arr"}


def windowed(df: Any, **kw: Any) -> Any:
    args = {"key": "k", "aggs": ["count", ("sum", "v")], **COLUMNS, **kw}
    return window_aggregate(df, STRATEGY, WINDOW, **args)


def accounted(out: Any) -> int:
    """Input rows in the three outputs (tumbling windows: one contribution each)."""
    on_time = sum(r["count"] for r in out.results.where("timing = 'on_time'").collect())
    return int(on_time) + out.late.count() + out.dropped.count()


@pytest.fixture(scope="module")
def frames(spark: Any) -> dict[str, Any]:
    return {
        "empty": spark.createDataFrame([], SCHEMA),
        "all null event times": spark.createDataFrame(
            [(1, None, i, "a", 1) for i in range(5)], SCHEMA
        ),
    }


@pytest.mark.parametrize("name", ["empty", "all null event times"])
def test_no_placeable_row_is_not_a_crash(frames: dict[str, Any], name: str) -> None:
    df = frames[name]
    n = df.count()
    marked = assign_watermarks(df, STRATEGY, **COLUMNS).toArrow()
    assert marked.num_rows == n
    assert set(marked["error"].to_pylist()) <= {"null_event_time"}
    assert marked["watermark"].null_count == n
    assert watermark_timeline(df, STRATEGY, **COLUMNS).count() == 0
    report = analyze_bounds(df, bounds=[timedelta(0)], window=WINDOW, key="k", **COLUMNS)
    assert report["records"].to_pylist() == [0]
    assert report["late"].to_pylist() == [0]
    out = windowed(df)
    assert out.dropped.count() == n
    assert accounted(out) == n


def test_each_null_is_reported_with_its_reason(spark: Any) -> None:
    rows = [(i % 2, 100 + i, 100 + i, "a", i) for i in range(20)]
    rows += [(0, None, 130, "a", 100), (1, 130, None, "a", 101), (None, 130, 130, "a", 102)]
    df = spark.createDataFrame(rows, SCHEMA)
    reasons = {100: "null_event_time", 101: "null_arrival", 102: "null_channel"}
    marked = assign_watermarks(df, STRATEGY, **COLUMNS).where("error is not null").collect()
    assert {r["v"]: r["error"] for r in marked} == reasons
    for aggs in (["count"], ["count", ("mean", "v")]):  # the native path, the keyed one
        out = windowed(df, aggs=aggs)
        assert {r["v"]: r["reason"] for r in out.dropped.collect()} == reasons
        assert accounted(out) == len(rows)
        out.unpersist()


def test_timeline_of_a_strategy_that_never_emits_is_empty(spark: Any) -> None:
    df = spark.createDataFrame([(i % 2, i, i, "a", i) for i in range(50)], SCHEMA)
    timeline = watermark_timeline(df, WatermarkStrategy.no_watermarks(), **COLUMNS)
    assert timeline.columns == ["time", "watermark", "status", "min_channel"]
    assert timeline.count() == 0


@pytest.fixture(scope="module")
def small(spark: Any) -> Any:
    return spark.createDataFrame(
        [(i % 2, 100 + i, 100 + i + i % 7, "ab"[i % 2], i) for i in range(60)], SCHEMA
    )


def keyed_as(df: Any, name: str) -> Any:
    """Windows over ``df`` with its key column renamed ``name``."""
    return windowed(df.withColumnRenamed("k", name), key=name)


def col(name: str) -> Any:
    from pyspark.sql import functions as F

    return F.col(name)


#: Each bad call on the small frame, with what its error message must name.
BAD_CALLS: dict[str, tuple[str, Callable[[Any], object]]] = {
    "aggregate twice": ("'count'", lambda df: windowed(df, aggs=["count", "count"])),
    "sum twice": ("sum_v", lambda df: windowed(df, aggs=[("sum", "v"), ("sum", "v")])),
    "key named like an output": ("'watermark'", lambda df: keyed_as(df, "watermark")),
    "key named like an output, other case": ("'Timing'", lambda df: keyed_as(df, "Timing")),
    "key given twice": ("'k'", lambda df: windowed(df, key=["k", "k"])),
    "no key": ("`key`: a window needs at least one key column", lambda df: windowed(df, key=[])),
    "an empty column name": (
        "`channel`: expected a column name (a non-empty str), got ''",
        lambda df: assign_watermarks(df, STRATEGY, **{**COLUMNS, "channel": ""}),
    ),
    "channel None": (
        "`channel`",
        lambda df: assign_watermarks(df, STRATEGY, **{**COLUMNS, "channel": None}),
    ),
    "idle timeout under one tick": (  # (the 200 ms emit interval would be refused first)
        "`idle_timeout`: datetime.timedelta(microseconds=100000) is less than one tick",
        lambda df: assign_watermarks(
            df,
            STRATEGY.with_idleness(timedelta(milliseconds=100)),
            **COLUMNS,
            arrival_unit="s",
            emit_interval=timedelta(seconds=1),
        ),
    ),
    "emit interval under one tick": (
        "`emit_interval`: must be at least one tick of the arrival's unit ('s')",
        lambda df: assign_watermarks(df, STRATEGY, **COLUMNS, arrival_unit="s"),
    ),
    "emit interval too coarse for any arrival": (  # was blamed on the arrival column
        "`emit_interval`: must be under 2^61 ticks of the arrival's unit ('ms')",
        lambda df: assign_watermarks(df, STRATEGY, **COLUMNS, emit_interval=2**62),
    ),
    "arrival unit without arrival": (
        "`arrival_unit`",
        lambda df: assign_watermarks(df, STRATEGY, event_time="ts", channel="ch", arrival_unit="s"),
    ),
    "key named like an inner column": (
        "'trigger_time': a key column named like a column the window operator adds "
        "(window_start, window_end, watermark, timing, fired_at, the aggregates' names; "
        "trigger_position, trigger_time on the way)",
        lambda df: keyed_as(df, "trigger_time"),
    ),
    "key named like fired_at": ("'fired_at'", lambda df: keyed_as(df, "fired_at")),
    "window under one tick": (
        "tick",
        lambda df: window_aggregate(
            df,
            STRATEGY,
            TumblingEventTimeWindows.of(timedelta(milliseconds=500)),
            key="k",
            event_time_unit="s",
            **COLUMNS,
        ),
    ),
    "negative allowed lateness": (
        "`allowed_lateness`: must be >= 0, got -1",
        lambda df: windowed(df, allowed_lateness=-1),
    ),
    "negative partitions": ("num_partitions", lambda df: windowed(df, num_partitions=-1)),
    "fractional partitions": ("num_partitions", lambda df: windowed(df, num_partitions=2.5)),
    "partitions as text": ("num_partitions", lambda df: windowed(df, num_partitions="4")),
    "emissions as text": ("`emissions`", lambda df: windowed(df, emissions="yes")),
    "key as a Column": ("`key`", lambda df: windowed(df, key=col("k"))),
    "channel as a Column": (
        "`channel`",
        lambda df: assign_watermarks(df, STRATEGY, **{**COLUMNS, "channel": col("ch")}),
    ),
    "event time as a Column": (
        "`event_time`",
        lambda df: assign_watermarks(df, STRATEGY, **{**COLUMNS, "event_time": col("ts")}),
    ),
    "a pandas frame": (
        "`df`: expected a pyspark DataFrame, got pandas.DataFrame",
        lambda df: assign_watermarks(df.toPandas(), STRATEGY, **COLUMNS),
    ),
    "no idle timeouts": (
        "idle_timeouts",
        lambda df: analyze_bounds(
            df, bounds=[timedelta(0)], window=WINDOW, idle_timeouts=[], **COLUMNS
        ),
    ),
    "bounds not a list": (
        "bounds",
        lambda df: analyze_bounds(df, bounds=5, window=WINDOW, **COLUMNS),  # type: ignore[arg-type]
    ),
    "idle timeout too large": (
        "idle_timeouts",
        lambda df: analyze_bounds(
            df, bounds=[timedelta(0)], window=WINDOW, idle_timeouts=[timedelta.max], **COLUMNS
        ),
    ),
    "the most negative idle timeout": (  # was called too large to report
        "`idle_timeouts`: must be greater than zero",
        lambda df: analyze_bounds(
            df, bounds=[timedelta(0)], window=WINDOW, idle_timeouts=[-(2**63)], **COLUMNS
        ),
    ),
    "zero idle timeout": (
        "`idle_timeouts`",
        lambda df: analyze_bounds(
            df, bounds=[timedelta(0)], window=WINDOW, idle_timeouts=[0], **COLUMNS
        ),
    ),
    "bound too large": (
        "bounds",
        lambda df: analyze_bounds(df, bounds=[timedelta.max], window=WINDOW, **COLUMNS),
    ),
}


@pytest.mark.parametrize("case", list(BAD_CALLS))
def test_bad_arguments_fail_before_any_job(small: Any, case: str) -> None:
    named, call = BAD_CALLS[case]
    pandas_input = case == "a pandas frame"  # making the pandas frame is a job itself
    before = jobs(small.sparkSession)
    with pytest.raises(InvalidParameterError, match=re.escape(named)):
        call(small)
    if not pandas_input:
        assert jobs(small.sparkSession) == before


@pytest.mark.parametrize("role", ["key", "channel"])
def test_a_string_column_with_a_collation_is_refused(small: Any, role: str) -> None:
    """Spark would group ``'a'`` and ``'A'`` of a ``UTF8_LCASE`` column as one value and
    the Rust engine as two: the two window paths would disagree. Refused before any
    job, naming the column; ``collate(..., 'UTF8_BINARY')`` makes it usable."""
    from pyspark.sql import functions as F

    from floodmark.exceptions import SchemaError

    df = small.withColumn("ch", F.col("ch").cast("string"))
    name = "k" if role == "key" else "ch"
    collated = df.withColumn(name, F.collate(F.col(name), "UTF8_LCASE"))
    calls: list[Callable[[Any], object]] = [windowed]
    if role == "channel":
        calls.append(lambda d: assign_watermarks(d, STRATEGY, **COLUMNS))
    before = jobs(small.sparkSession)
    for call in calls:
        with pytest.raises(SchemaError, match=f"'{name}' is a string with collation UTF8_LCASE"):
            call(collated)
    assert jobs(small.sparkSession) == before
    binary = collated.withColumn(name, F.collate(F.col(name), "UTF8_BINARY"))
    assert windowed(binary).results.count() > 0


def test_partitions_may_be_a_numpy_integer(small: Any) -> None:
    out = windowed(small, aggs=["count", ("mean", "v")], num_partitions=np.int64(3))
    assert out.cached is not None and out.cached.rdd.getNumPartitions() == 3
    out.unpersist()


@pytest.fixture(scope="module")
def with_late(spark: Any) -> Any:
    """The small stream plus one late record (v=1000) and one without event time (v=1001)."""
    rows = [(i % 2, 100 + i, 100 + i + i % 7, "ab"[i % 2], i) for i in range(60)]
    rows += [(0, 50, 300, "a", 1000), (1, None, 200, "b", 1001)]
    return spark.createDataFrame(rows, SCHEMA)


@pytest.mark.parametrize(
    "roles",
    [
        {"arrival": "ts"},  # ingestion time: one column is both clocks
        {"aggs": ["count", ("sum", "v"), ("max", "ts")]},  # the event time also aggregated
        {"key": "ch"},  # the channel as the key
        {"aggs": ["count", ("mean", "v"), ("sum", "ch")]},  # keyed operator; channel summed
    ],
)
def test_a_column_in_two_roles_appears_once(with_late: Any, tmp_path: Any, roles: dict) -> None:
    out = windowed(with_late, **roles)
    source = {r["v"]: r.asDict() for r in with_late.collect()}
    types = dict(with_late.dtypes)
    for name in ("results", "late", "dropped"):
        columns = getattr(out, name).columns
        assert len(columns) == len(set(columns)), (name, columns)
    assert accounted(out) == with_late.count()
    expected = {"dropped": {1001}, "late": set() if "arrival" in roles else {1000}}
    for name, values in expected.items():
        frame = getattr(out, name)
        assert all(t == types[c] for c, t in frame.dtypes if c in types), frame.dtypes
        rows = {r["v"]: r.asDict() for r in frame.collect()}
        assert set(rows) == values
        for v, row in rows.items():  # each input column the stage uses, with its value
            carried = [c for c in row if c in types]
            assert {"ch", "ts", "v"} <= set(carried)
            assert {c: row[c] for c in carried} == {c: source[v][c] for c in carried}
    out.late.write.parquet(str(tmp_path / "late"))  # a repeated name would fail here
    out.unpersist()


def test_a_column_name_the_frame_has_twice_is_named(small: Any) -> None:
    twice = small.select("ch", "ts", "arr", "k", "v", small["k"].alias("K"))
    before = jobs(small.sparkSession)
    with pytest.raises(SchemaError, match="2 columns named 'k'") as err:
        windowed(twice)
    assert err.value.column == "k"
    assert jobs(small.sparkSession) == before


def test_working_column_names_are_refused_by_every_function(small: Any) -> None:
    marked = small.withColumn("__fm_note", col("v"))  # not one of the stage's columns
    before = jobs(small.sparkSession)
    calls: list[Callable[[], object]] = [
        lambda: assign_watermarks(marked, STRATEGY, **COLUMNS),
        lambda: watermark_timeline(marked, STRATEGY, **COLUMNS),
        lambda: windowed(marked),
        lambda: analyze_bounds(marked, bounds=[timedelta(0)], window=WINDOW, key="k", **COLUMNS),
    ]
    for call in calls:
        with pytest.raises(SchemaError, match="__fm_ are floodmark's working columns") as err:
            call()
        assert err.value.column == "__fm_note"
    assert jobs(small.sparkSession) == before


@pytest.mark.parametrize(
    ("added", "call"),
    [
        ("Is_Late", lambda df: assign_watermarks(df, STRATEGY, **COLUMNS)),
        ("error", lambda df: assign_watermarks(df, STRATEGY, **COLUMNS)),
        ("reason", windowed),
        ("Watermark", windowed),
    ],
)
def test_a_column_floodmark_adds_is_refused_before_any_job(
    small: Any, added: str, call: Callable[[Any], object]
) -> None:
    """An input column named (in any case) like one floodmark adds to the records, the
    late rows or the dropped rows would be there twice: the same refusal as in-process
    (:func:`floodmark.vocabulary.check_not_added`), naming the column."""
    marked = small.withColumn(added, col("v"))
    before = jobs(small.sparkSession)
    with pytest.raises(SchemaError, match=f"already has a column '{added}', and floodmark adds"):
        call(marked)
    assert jobs(small.sparkSession) == before


@pytest.mark.parametrize("call", [lambda df: assign_watermarks(df, STRATEGY, **COLUMNS), windowed])
def test_a_column_the_frame_has_twice_is_refused_before_any_job(
    small: Any, call: Callable[[Any], object]
) -> None:
    """Frames made by joins can have ``x`` and ``X`` (one name to a session that ignores
    case), or ``x`` twice: assign_watermarks returns every column, so Spark failed with
    ``AMBIGUOUS_REFERENCE`` after the timeline's jobs had run; late and dropped rows
    carry every column too."""
    before = jobs(small.sparkSession)
    for second in ("X", "x"):  # a column the call does not name (those: below)
        twice = small.select("*", col("v").alias("x"), col("v").alias(second))
        with pytest.raises(SchemaError, match="two columns named") as err:
            call(twice)
        assert err.value.column == second and "'x'" in str(err.value)
    assert jobs(small.sparkSession) == before


@pytest.mark.parametrize("aggs", [["count", ("sum", "v")], ["count", ("mean", "d")]])
def test_late_and_dropped_rows_carry_every_input_column(with_late: Any, aggs: list) -> None:
    """Flink's side output is the whole record: every input column, with its type and
    value (decimals too, though the keyed operator, which ``mean`` runs, gets them as
    doubles), on both paths."""
    from pyspark.sql import functions as F

    df = with_late.select(
        "*",
        F.concat(F.lit("payload-"), col("v").cast("string")).alias("payload"),
        (col("v") / F.lit(3)).cast("decimal(20,10)").alias("d"),
    )
    out = windowed(df, aggs=aggs)
    assert (out.cached is None) == (aggs[1][0] == "sum")  # native path, or the keyed one
    source = {r["v"]: r.asDict() for r in df.collect()}
    for name, extra, values in (("late", "watermark", {1000}), ("dropped", "reason", {1001})):
        frame = getattr(out, name)
        assert frame.columns == [*df.columns, extra]
        assert frame.dtypes[:-1] == df.dtypes
        rows = {r["v"]: r.asDict() for r in frame.collect()}
        assert set(rows) == values
        for v, row in rows.items():
            assert {c: row[c] for c in df.columns} == source[v]
    assert accounted(out) == df.count()
    out.unpersist()


def test_a_name_in_another_case_is_answered_with_the_column(small: Any) -> None:
    with pytest.raises(SchemaError, match="did you mean 'k'") as err:
        windowed(small, key="K")
    assert err.value.column == "K"


@contextmanager
def case_sensitive(spark: Any) -> Iterator[None]:
    """``spark.sql.caseSensitive=true`` for the block (the session is shared)."""
    spark.conf.set("spark.sql.caseSensitive", "true")
    try:
        yield
    finally:
        spark.conf.unset("spark.sql.caseSensitive")


def rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.collect())


def test_names_differing_in_case_are_two_columns_when_spark_says_so(small: Any) -> None:
    """Under ``spark.sql.caseSensitive=true`` ``k`` and ``K`` are different columns and
    a key ``Timing`` does not clash with the results' ``timing``: floodmark compares
    names the way the session does. By default both are refused (as Spark would)."""
    spark = small.sparkSession
    twice = small.select("*", small["k"].alias("K"), small["v"].alias("Watermark"))
    timing = small.withColumnRenamed("k", "Timing")
    with pytest.raises(SchemaError, match="columns named 'k'"):
        windowed(twice)
    with pytest.raises(SchemaError, match="'Watermark'"):
        assign_watermarks(twice, STRATEGY, **COLUMNS)
    with pytest.raises(InvalidParameterError, match="'Timing'"):
        windowed(timing, key="Timing")
    expected = windowed(small)
    want = {kind: rows(getattr(expected, kind)) for kind in ("results", "late", "dropped")}
    want_assigned = rows(assign_watermarks(small, STRATEGY, **COLUMNS))
    expected.unpersist()
    with case_sensitive(spark):
        out = windowed(twice)
        assert {kind: rows(getattr(out, kind)) for kind in want} == want
        out.unpersist()
        renamed = windowed(timing, key="Timing")
        assert [r[1:] for r in rows(renamed.results)] == [r[1:] for r in want["results"]]
        renamed.unpersist()
        assigned = assign_watermarks(twice, STRATEGY, **COLUMNS)
        assert assigned.columns[-6:] == ["K", "Watermark", *ADDED_COLUMNS]
        assert [r[:5] + r[7:] for r in rows(assigned)] == want_assigned


@pytest.mark.parametrize("end", [-(2**63), 2**63 - 10])  # grid times past either end
def test_arrival_at_the_ends_of_the_long_range_is_named(spark: Any, end: int) -> None:
    df = spark.createDataFrame([(i % 2, i, end + i, "a", i) for i in range(10)], SCHEMA)
    with pytest.raises(InvalidInputError, match="arr") as err:
        assign_watermarks(df, STRATEGY, **COLUMNS)
    assert err.value.column == "arr"


@pytest.mark.parametrize("where", ["executors", "records"])
@pytest.mark.parametrize("end", [-(2**63), 2**63 - 10])
def test_arrival_at_the_ends_of_the_long_range_is_named_in_the_builder_task(
    spark: Any, end: int, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The builder's Spark task, over a bucket table kept on the executors or over the
    records themselves, reports the same error, naming the arrival column (the driver
    computed the report's bins from those grid times first, and overflowed)."""
    from floodmark.spark import timeline

    if where == "records":
        monkeypatch.setattr(timeline, "SAMPLE_RECORDS", 5)
        monkeypatch.setattr(timeline, "RECORDS_DENSITY", 0.0)
        monkeypatch.setattr(timeline, "bucket_aggregate", None)  # the records path only
    else:
        monkeypatch.setattr(timeline, "RECORDS_DENSITY", 2.0)
        monkeypatch.setattr(timeline, "MAX_DRIVER_BUCKET_ROWS", 1)
    df = spark.createDataFrame([(i % 2, i, end + i, "a", i) for i in range(10)], SCHEMA)
    with pytest.raises(InvalidInputError, match="arr") as err:
        watermark_timeline(df, STRATEGY, **COLUMNS)
    assert err.value.column == "arr"


@pytest.mark.parametrize("where", ["driver", "executors", "records"])
def test_too_much_processing_time_lag_work_names_emit_interval_on_every_path(
    spark: Any, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A processing-time lag calls every channel at every grid time; over a span that
    makes more calls than the core's bound the refusal names ``emit_interval`` wherever
    the builder runs (a Spark task raised it as a task failure, retried first)."""
    from floodmark.spark import timeline

    if where == "records":
        monkeypatch.setattr(timeline, "SAMPLE_RECORDS", 2)
        monkeypatch.setattr(timeline, "RECORDS_DENSITY", 0.0)
    elif where == "executors":
        monkeypatch.setattr(timeline, "RECORDS_DENSITY", 2.0)
        monkeypatch.setattr(timeline, "MAX_DRIVER_BUCKET_ROWS", 1)
    far = (1 << 28) * 200  # 2^28 grid times later: 2 channels x 2^28 calls
    df = spark.createDataFrame(
        [(0, 0, 0, "a", 1), (1, 0, 0, "a", 1), (0, far, far, "a", 1)], SCHEMA
    )
    lag = WatermarkStrategy.for_processing_time_lag(timedelta(seconds=1))
    with pytest.raises(InvalidParameterError, match="processing-time-lag") as err:
        watermark_timeline(df, lag, **COLUMNS)
    assert err.value.parameter == "emit_interval"


def persisted(spark: Any) -> int:
    return int(spark.sparkContext._jsc.getPersistentRDDs().size())


def test_a_refusal_in_the_builder_task_leaves_nothing_cached(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """assign_watermarks over a large bucket table caches the builder task's output for
    the result; when the task reports a refusal, that cache was left behind."""
    from floodmark.spark import timeline

    monkeypatch.setattr(timeline, "RECORDS_DENSITY", 2.0)
    monkeypatch.setattr(timeline, "MAX_DRIVER_BUCKET_ROWS", 1)
    far = (1 << 28) * 200
    df = spark.createDataFrame(
        [(0, 0, 0, "a", 1), (1, 0, 0, "a", 1), (0, far, far, "a", 1)], SCHEMA
    )
    lag = WatermarkStrategy.for_processing_time_lag(timedelta(seconds=1))
    before = persisted(spark)
    with pytest.raises(InvalidParameterError, match="processing-time-lag"):
        assign_watermarks(df, lag, **COLUMNS)
    assert persisted(spark) == before


def test_the_row_ordered_input_is_released(spark: Any, small: Any) -> None:
    """Without an arrival column each call caches the input with its row order for
    itself: the functions that finish their jobs release theirs, window_aggregate's
    unpersist() does, and none releases another call's."""
    columns = {"event_time": "ts", "channel": "ch"}
    before = persisted(spark)
    first = window_aggregate(small, STRATEGY, WINDOW, key="k", **columns)
    assert persisted(spark) == before + 1
    watermark_timeline(small, STRATEGY, **columns)
    assert persisted(spark) == before + 1
    analyze_bounds(small, bounds=[timedelta(0)], window=WINDOW, **columns)
    assert persisted(spark) == before + 1
    second = window_aggregate(small, STRATEGY, WINDOW, key="k", **columns)
    assert persisted(spark) == before + 2
    first.unpersist()
    assert persisted(spark) == before + 1
    assert accounted(second) == small.count()  # second's own cache (counted above) serves it
    second.unpersist()
    assert persisted(spark) == before


REJECTED_WITHOUT_ARRIVAL: dict[str, Callable[[Any], Any]] = {
    "an event-time column it lacks": lambda df: assign_watermarks(
        df, STRATEGY, event_time="nope", channel="ch"
    ),
    "a key it lacks": lambda df: window_aggregate(
        df, STRATEGY, WINDOW, key="nope", event_time="ts", channel="ch"
    ),
    "a bad num_partitions": lambda df: window_aggregate(
        df, STRATEGY, WINDOW, key="k", event_time="ts", channel="ch", num_partitions=0
    ),
    "a bound too large": lambda df: analyze_bounds(
        df, bounds=[timedelta.max], window=WINDOW, event_time="ts", channel="ch"
    ),
}


@pytest.mark.parametrize("case", list(REJECTED_WITHOUT_ARRIVAL))
def test_a_rejected_call_keeps_no_cache(small: Any, case: str, monkeypatch: Any) -> None:
    """Without an arrival column the row-ordered input is cached first; a call that then
    fails releases it."""
    from pyspark import StorageLevel

    from floodmark.spark import arrival

    made: list[Any] = []

    def recording(*args: Any) -> Any:
        out = with_default_arrival(*args)
        made.append(out[0])
        return out

    with_default_arrival = arrival.with_default_arrival
    monkeypatch.setattr(arrival, "with_default_arrival", recording)
    with pytest.raises((InvalidParameterError, SchemaError)):
        REJECTED_WITHOUT_ARRIVAL[case](small)
    assert len(made) == 1
    assert made[0].storageLevel == StorageLevel(False, False, False, False)


def test_names_and_durations_come_in_any_iterable() -> None:
    import pandas as pd

    from floodmark.spark.analyze import listed
    from floodmark.vocabulary import column_names

    assert column_names(pd.Index(["a", "b"]), "key") == ["a", "b"]
    assert column_names(np.array(["a"]), "key") == ["a"]
    assert column_names(("a", "b"), "key") == ["a", "b"]
    assert listed(np.array([1, 2]), "bounds") == [1, 2]
    assert listed((d for d in [timedelta(0)]), "bounds") == [timedelta(0)]
    with pytest.raises(InvalidParameterError, match="bounds"):
        listed("5s", "bounds")


@pytest.mark.parametrize("records_path", [False, True], ids=["aggregation", "records"])
def test_one_arrival_far_from_the_others_is_no_memory_error(
    spark: Any, records_path: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One arrival at 0 among epoch-millisecond ones spans 8.5e9 emission intervals: the
    per-bucket watermarks were built densely over it (a 63 GiB array, a numpy
    ``MemoryError``). ``window_aggregate`` now takes the keyed operator, as for any span
    wider than its lookup, and equals replay; ``assign_watermarks`` equals replay on
    either timeline path; ``analyze_bounds`` (which refused it, naming the arrival
    column, before the records read the watermark by arrival over such spans) equals
    replay's late counts."""
    from floodmark.spark import timeline

    if records_path:  # as a sample of many sparse channels would choose
        monkeypatch.setattr(timeline, "SAMPLE_RECORDS", 5)
        monkeypatch.setattr(timeline, "RECORDS_DENSITY", 0.0)
    import pyarrow as pa

    from floodmark.replay import replay

    t0 = 1_700_000_000_000
    n = 200
    table = pa.table(
        {
            "partition": pa.array([i % 4 for i in range(n)] + [0], pa.int64()),
            "event_time": pa.array([t0 + i * 37 - 20 for i in range(n)] + [t0], pa.int64()),
            "arrival": pa.array([t0 + i * 37 for i in range(n)] + [0], pa.int64()),
            "key": pa.array([f"k{i % 5}" for i in range(n)] + ["k0"]),
        }
    )
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(milliseconds=50))
    window = TumblingEventTimeWindows.of(timedelta(seconds=1))
    columns = {"event_time": "event_time", "channel": "partition", "arrival": "arrival"}
    out = window_aggregate(spark.createDataFrame(table), strategy, window, key="key", **columns)
    want = replay(table, strategy, window=window, key="key", **columns)
    cols = ["key", "window_start", "count"]
    got = out.results.select(*cols).toArrow().sort_by([(c, "ascending") for c in cols])
    assert (
        got.to_pylist()
        == want.results.select(cols).sort_by([(c, "ascending") for c in cols]).to_pylist()
    )
    assert out.late.count() == want.late.num_rows
    assert out.timeline.rows == table.num_rows
    out.unpersist()
    # Session windows need no statistics: the aggregation path counts no records.
    from floodmark import EventTimeSessionWindows

    gap = EventTimeSessionWindows.with_gap(timedelta(seconds=1))
    session = window_aggregate(spark.createDataFrame(table), strategy, gap, key="key", **columns)
    assert session.timeline.rows == (table.num_rows if records_path else None)
    session.unpersist()
    assigned = assign_watermarks(spark.createDataFrame(table), strategy, **columns).toArrow()
    order = [(c, "ascending") for c in ("arrival", "partition")]
    cols = ["arrival", "partition", "channel_watermark", "watermark", "is_late"]
    assert (
        assigned.sort_by(order).select(cols).to_pylist()
        == want.records.sort_by(order).select(cols).to_pylist()
    )
    analysis = analyze_bounds(
        spark.createDataFrame(table), bounds=[0, 100], window=window, **columns
    ).to_pylist()
    for row in analysis:
        bounded = WatermarkStrategy.for_bounded_out_of_orderness(row["bound"])
        marked = replay(table, bounded, **columns).records
        assert row["late"] == sum(marked["is_late"].to_pylist()), row
    assert [row["records"] for row in analysis] == [table.num_rows] * 2


def test_aggs_none_partitions_past_a_java_int_and_a_stream_are_refused_naming_them(
    spark: Any,
) -> None:
    """Each was a bare ``TypeError``, a Py4J error (``repartition`` takes a Java int) or
    Spark's ``AnalysisException`` about streaming sources."""
    df = spark.createDataFrame(
        [(0, 10, 10, "a")], "partition long, event_time long, arrival long, key string"
    )
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0)
    window = TumblingEventTimeWindows.of(timedelta(seconds=1))
    columns = {"event_time": "event_time", "channel": "partition", "arrival": "arrival"}
    with pytest.raises(InvalidParameterError) as err:
        window_aggregate(df, strategy, window, key="key", aggs=None, **columns)  # type: ignore[arg-type]
    assert err.value.parameter == "aggs"
    for n in (2**31, 0):
        with pytest.raises(InvalidParameterError, match="from 1 to 2,147,483,647") as err:
            window_aggregate(
                df,
                strategy,
                window,
                key="key",
                aggs=[("mean", "event_time")],
                num_partitions=n,
                **columns,
            )
        assert err.value.parameter == "num_partitions"
    stream = (
        spark.readStream.format("rate")
        .load()
        .selectExpr(
            "value % 2 AS partition", "value AS event_time", "value AS arrival", "'k' AS key"
        )
    )
    for call in (
        lambda: assign_watermarks(stream, strategy, **columns),
        lambda: watermark_timeline(stream, strategy, **columns),
        lambda: window_aggregate(stream, strategy, window, key="key", **columns),
        lambda: analyze_bounds(stream, bounds=[0], window=window, **columns),
    ):
        with pytest.raises(InvalidParameterError, match=r"floodmark\.spark\.streaming") as err:
            call()
        assert err.value.parameter == "df"


def test_columns_arrow_cannot_carry_keep_assign_watermarks_on_the_jvm_or_are_named(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A year-month interval column cannot cross into Python through Arrow: where the
    sample would choose the records path (which carries every column through
    mapInArrow), the aggregation's join serves instead, the same rows out (it failed
    with PySpark's NOT_IMPLEMENTED); a punctuated strategy's pass, which must carry
    them, refuses naming the column before any job (a KeyError in a worker)."""
    from pyspark.sql import functions as F

    from floodmark.spark import timeline

    monkeypatch.setattr(timeline, "SAMPLE_RECORDS", 5)
    monkeypatch.setattr(timeline, "RECORDS_DENSITY", 0.0)
    df = spark.createDataFrame([(i % 2, i, i * 10, "a", i) for i in range(300)], SCHEMA)
    odd = df.withColumn("span", F.expr("interval '1' year"))
    out = assign_watermarks(odd, STRATEGY, **COLUMNS)
    want = assign_watermarks(df, STRATEGY, **COLUMNS)
    assert sorted(out.select(want.columns).collect()) == sorted(want.collect())
    punctuated = WatermarkStrategy.for_punctuated("v")
    before = jobs(spark)
    with pytest.raises(SchemaError, match="cannot go through Arrow") as err:
        assign_watermarks(odd, punctuated, **COLUMNS)
    assert err.value.column == "span" and jobs(spark) == before
