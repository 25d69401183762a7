"""Stage 3's lookup reads each record's (channel, bucket) row, whichever way it is built:
constant arrays in the plan, a join on one bigint key, or a join on the pair."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from floodmark import WatermarkStrategy
from floodmark.spark import lookup
from floodmark.spark.plan import make_plan
from floodmark.time import I64_MAX, I64_MIN

# Arrival 150 is in bucket 1, 350 in bucket 2, 9_000 in bucket 45 (200 ms buckets);
# 2**62 is in a bucket whose slot would overflow an int (Spark's ANSI mode would fail).
RECORDS = pa.table(
    {
        "id": [0, 1, 2, 3, 4, 5, 6, 7],
        "ts": [10, 20, 30, 40, None, 60, 70, None],
        "arrival": [150, 150, 350, 350, 350, 9_000, 2**62, 150],
        "channel": [0, 1, 1, 3, 1, 1, 1, 0],
    }
)
# No row for (1, 2), for channel 3, or for bucket 45; I64_MAX is a value like any other.
TABLE = pa.table(
    {
        "channel": [0, 1, 0],
        "bucket": [1, 1, 2],
        "per_bucket": [I64_MIN, I64_MIN, 7],
        "per_slot": [I64_MAX, None, 5],
    }
)
WANT = {
    0: (I64_MIN, I64_MAX),
    1: (I64_MIN, None),  # the table's own null
    2: (7, None),  # slot (1, 2) missing: bucket 2's own value exists, the slot's does not
    3: (None, None),  # channel 3 outside the table's channels
    4: (None, None),  # null event time: not placeable
    5: (None, None),  # bucket 45 outside the table's range
    6: (None, None),  # far outside it
    7: (None, None),  # null event time in a slot the table has: still not placeable
}


def looked_up(records: Any) -> Any:
    """``records`` (RECORDS as a DataFrame) with the values of TABLE."""
    df, plan = make_plan(
        records,
        WatermarkStrategy.for_monotonous_timestamps(),
        event_time="ts",
        channel="channel",
        arrival="arrival",
        emit_interval=timedelta(milliseconds=200),
        event_time_unit=None,
        arrival_unit=None,
    )
    return lookup.join_buckets(df, plan, TABLE)


@pytest.mark.parametrize("layout", ["constant", "constant-lit", "key-join", "pair-join"])
def test_lookup_reads_each_records_row(
    spark: Any, layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if layout == "constant-lit":  # the fallback when Catalyst's classes are not there
        monkeypatch.setattr(lookup, "primitive_array_literal", lambda jvm, longs: None)
    elif layout != "constant":
        monkeypatch.setattr(lookup, "MAX_CONSTANT_SLOTS", 0)
    if layout == "pair-join":
        monkeypatch.setattr(lookup, "MAX_KEYS", 1)
    got = looked_up(spark.createDataFrame(RECORDS)).toArrow().sort_by("id")
    assert got.column_names == [*RECORDS.column_names, "per_bucket", "per_slot"]
    columns = (got[c].to_pylist() for c in ("id", "per_bucket", "per_slot"))
    rows = zip(*columns, strict=True)
    want = dict(WANT)
    if not layout.startswith("constant"):
        # A join finds no row for slot (1, 2), so no value at all. The constant arrays
        # read a column that is the same for every channel of a bucket by the bucket.
        # A record of a slot the table lacks exists only if the input changed between
        # the two passes; the per-bucket value is then still the one in force.
        want[2] = (None, None)
    assert {i: (b, s) for i, b, s in rows} == want


def test_constant_arrays_read_once_per_record(spark: Any, tmp_path: Path) -> None:
    # per_slot has empty slots (read back as null): the check for them must not read
    # the array a second time (Spark would evaluate nullif's argument twice). From
    # Parquet: Spark evaluates projections over in-memory rows while optimizing.
    pq.write_table(RECORDS, tmp_path / "records.parquet")
    joined = looked_up(spark.read.parquet(str(tmp_path / "records.parquet")))
    optimized = joined._jdf.queryExecution().optimizedPlan().toString()
    # One read per value column, of a contiguous array (not boxed longs). Relies on how
    # Spark prints a literal (its Java toString) indexed by an ordinal: `literal[index]`.
    assert len(re.findall(r"UnsafeArrayData@[0-9a-f]+\[cast\(", optimized)) == 2
    assert " null else per_slot" in optimized  # and the empty slots still read as null


def test_primitive_array_literal_falls_back_without_catalyst_classes() -> None:
    class Package:  # what py4j gives for a class the JVM does not have
        def __getattr__(self, name: str) -> Package:
            return self

        def __call__(self, *args: Any) -> Any:
            raise TypeError("'JavaPackage' object is not callable")

    assert lookup.primitive_array_literal(Package(), None) is None
