"""The Spark layer's one transcription of Flink's element-late rule (``ts + L <= W``,
wrapping like a Java ``long``; defined in rust/window/late.rs, ``_core.element_late``)
and of the emission grid's bucket (``ceil(arrival / interval)``) agree with the engine's
definitions at the ends of the ``long`` range, where Spark's ANSI mode would fail on an
overflow instead of wrapping."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from floodmark import _core
from floodmark.spark.late import behind_watermark, element_late, wrapping_add
from floodmark.spark.plan import WatermarkPlan
from floodmark.time import I64_MAX, I64_MIN

EDGES = [I64_MIN, I64_MIN + 1, -(2**62), -5, 0, 7, 2**62, I64_MAX - 10, I64_MAX - 1, I64_MAX]
LATENESS = [0, 1, 9, 10, 11, 2**62, I64_MAX]


def element_late_in_engine(ts: Any, wm: Any, lateness: list[int]) -> list[bool]:
    """The engine's rule, record by record (its lateness is one number per call)."""
    return [
        _core.element_late(pa.array([t]), pa.array([w]), lat)[0].as_py()
        for t, w, lat in zip(ts.to_pylist(), wm.to_pylist(), lateness, strict=True)
    ]


def java_add(a: int, b: int) -> int:
    """Java ``long`` addition."""
    return (a + b + 2**63) % 2**64 - 2**63


@pytest.mark.parametrize("source", ["local", "cached", "parquet"])
def test_element_late_wraps_like_java(spark: Any, source: str, tmp_path: Path) -> None:
    """On a local relation, and on inputs whose plans Spark's optimizer rewrites (a
    cache, a file): it reordered ``(ts + a) + b`` into ``ts + (a + b)``, and ``a + b``
    overflowed (ARITHMETIC_OVERFLOW on every record near ``MAX``)."""
    from pyspark.sql import functions as F

    cases = [(ts, lateness, wm) for ts in EDGES for lateness in LATENESS for wm in EDGES]
    table = pa.table(
        {
            "ts": pa.array([c[0] for c in cases], pa.int64()),
            "lateness": pa.array([c[1] for c in cases], pa.int64()),
            "wm": pa.array([c[2] for c in cases], pa.int64()),
        }
    )
    frame = spark.createDataFrame(table)
    if source == "cached":
        frame = frame.cache()
    elif source == "parquet":
        pq.write_table(table, tmp_path / "cases.parquet")
        frame = spark.read.parquet(str(tmp_path / "cases.parquet"))
    got, sums = [], []
    for lateness in LATENESS:
        rows = (
            frame.where(F.col("lateness") == lateness)
            .select(
                "ts",
                "wm",
                element_late(F.col("ts"), lateness, F.col("wm")).alias("late"),
                wrapping_add(F.col("ts"), lateness).alias("sum"),
            )
            .collect()
        )
        got += [(r.ts, lateness, r.wm, r.late) for r in rows]
        sums += [(r.ts, lateness, r.sum) for r in rows]
    if source == "cached":
        frame.unpersist()
    engine = element_late_in_engine(
        table["ts"], table["wm"], table["lateness"].to_pylist()
    )  # the one definition (rust/window/late.rs), which Java arithmetic confirms:
    want = [(ts, lat, wm, java_add(ts, lat) <= wm) for ts, lat, wm in cases]
    assert [w[3] for w in want] == engine
    assert sorted(got) == sorted(want)
    assert sorted(set(sums)) == sorted({(ts, lat, java_add(ts, lat)) for ts, lat, _ in cases})
    # It means something: wrapping makes a record near MAX late for a watermark below it.
    assert (I64_MAX - 1, 9, -5, True) in got


def test_behind_watermark_needs_a_watermark(spark: Any) -> None:
    from pyspark.sql import functions as F

    frame = spark.createDataFrame(
        pa.table({"ts": pa.array([I64_MIN, I64_MIN, 5, 5]), "wm": pa.array([I64_MIN, 0, 5, 4])})
    )
    got = frame.select(behind_watermark(F.col("ts"), F.col("wm")).alias("x")).toArrow()
    assert got["x"].to_pylist() == [False, True, True, False]
    cases = pa.table(
        {"ts": pa.array(EDGES * len(EDGES)), "wm": pa.array(sorted(EDGES * len(EDGES)))}
    )
    got = spark.createDataFrame(cases).select(behind_watermark(F.col("ts"), F.col("wm")).alias("x"))
    engine = _core.element_late(cases["ts"].combine_chunks(), cases["wm"].combine_chunks())
    assert got.toArrow()["x"].to_pylist() == engine.to_pylist()


@pytest.mark.parametrize("interval", [1, 7, 200, 2**40])
def test_the_sql_bucket_is_the_builders(spark: Any, interval: int) -> None:
    from floodmark import WatermarkStrategy
    from floodmark.spark.columns import TimeColumn
    from floodmark.timeline import TimelineBuilder

    arrivals = [a for a in EDGES if a - interval >= I64_MIN] + [-interval, interval, 1, -1]
    plan = WatermarkPlan(
        TimeColumn("a", "integer", "ms"),
        TimeColumn("a", "integer", "ms"),
        "c",
        interval,
        WatermarkStrategy.no_watermarks(),
    )
    got = (
        spark.createDataFrame(pa.table({"a": pa.array(arrivals, pa.int64())}))
        .select(plan.bucket("a").alias("b"))
        .toArrow()["b"]
        .to_pylist()
    )
    builder = TimelineBuilder(WatermarkStrategy.no_watermarks(), 1, emit_interval=interval)
    assert got == [builder.bucket_of(a) for a in arrivals]
