"""Stage 3's lookup: each record gets the values of its ``(channel, bucket)`` row.

A record's slot in the compact per-bucket table (channels x buckets) is one number,
``(bucket - first bucket) * channels + channel offset``. Three ways to look it up, the
cheapest that fits:

* At most :data:`MAX_CONSTANT_SLOTS` slots (a session with a JVM gateway, i.e. not
  Spark Connect): each value column is a constant ``array<bigint>`` literal in the plan,
  indexed by the slot, or by the bucket alone when the column is the same for every
  channel of a bucket (the combined watermark is). One array read per record: no
  join, and no table shipped from Python and broadcast, which alone cost 0.8-1.3 s
  for 288k rows. ``explain()`` shows each array as ``UnsafeArrayData@...`` (the values
  only with the ``lit`` fallback; :func:`floodmark.spark.watermark_timeline` shows
  them).
* Larger tables are broadcast and joined on the slot as one ``bigint`` key: Spark builds
  a long-keyed hash relation (an array lookup when the keys are dense) and probes it
  without hashing a row per record.
* Slots that would not fit in one ``bigint``: the join is on the pair.

Measured on 10M rows (docs/performance.md): the pair join 5.9 s, the one-key join 2.2 s;
``assign_watermarks`` with the one-key join 1.58x an identity pass, with the constant
arrays 1.20-1.33x, and 0.84-1.13x since they are contiguous ``UnsafeArrayData`` literals
read once per record.

The channel offset is ``channel - smallest channel`` for integer channels whose values
span a small range (Kafka partitions); other channels (strings, sparse integers) get
their offset from a second broadcast join against the distinct channels, tiny.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from floodmark.spark.columns import quote
from floodmark.spark.timeline import WatermarkPlan, valid_rows
from floodmark.time import I64_MAX

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

#: Integer channels whose values span at most this many are offset by arithmetic.
MAX_ARITHMETIC_SPAN = 1 << 20
#: Tables of at most this many (bucket, channel) slots are constant arrays in the plan.
MAX_CONSTANT_SLOTS = 1 << 19
#: One key holds at most this many (bucket, channel) slots; wider tables join on the pair.
MAX_KEYS = 1 << 62
_KEY, _ARRIVAL, _BUCKET = "__fm_lk_key", "__fm_lk_arrival", "__fm_lk_bucket"
_CHANNEL, _OFFSET = "__fm_lk_channel", "__fm_lk_offset"


def channel_offsets(
    df: DataFrame, plan: WatermarkPlan, channels: pa.Array
) -> tuple[DataFrame, Column, np.ndarray, int]:
    """``(df, the record's offset column, the table rows' offsets, number of offsets)``."""
    from pyspark.sql import functions as F

    if pa.types.is_integer(channels.type):
        values = channels.to_numpy(zero_copy_only=False).astype(np.int64)
        low, high = int(values.min()), int(values.max())
        if high - low < MAX_ARITHMETIC_SPAN:
            offset = F.col(quote(plan.channel)).cast("bigint") - F.lit(low)
            return df, offset, values - low, high - low + 1
    distinct = pc.unique(channels)
    offsets = pc.index_in(channels, value_set=distinct).to_numpy(zero_copy_only=False)
    names = df.sparkSession.createDataFrame(
        pa.table({_CHANNEL: distinct, _OFFSET: pa.array(np.arange(len(distinct)), pa.int64())}),
        schema=f"{_CHANNEL} {df.schema[plan.channel].dataType.simpleString()}, {_OFFSET} bigint",
    )
    joined = df.join(
        F.broadcast(names), on=F.col(quote(plan.channel)) == F.col(_CHANNEL), how="left"
    ).drop(_CHANNEL)
    return joined, F.col(_OFFSET), offsets.astype(np.int64), len(distinct)


def constant_array(spark: SparkSession, values: np.ndarray) -> Column | None:
    """``values`` as one constant ``array<bigint>`` literal, or None when the session has
    no JVM gateway (Spark Connect). The values cross py4j as one byte string and become
    a ``long[]`` in the JVM: a literal from the start, so Spark never evaluates an
    expression per row to build it (as it would for a small local relation)."""
    from pyspark.sql.column import Column

    jvm = getattr(spark, "_jvm", None)
    gateway = getattr(spark.sparkContext, "_gateway", None) if jvm is not None else None
    if jvm is None or gateway is None:
        return None
    buffer = jvm.java.nio.ByteBuffer.wrap(values.astype("<i8").tobytes())
    buffer.order(jvm.java.nio.ByteOrder.LITTLE_ENDIAN)
    longs = gateway.new_array(jvm.long, len(values))
    buffer.asLongBuffer().get(longs)
    literal = primitive_array_literal(jvm, longs)
    return literal if literal is not None else Column(jvm.org.apache.spark.sql.functions.lit(longs))


def primitive_array_literal(jvm: Any, longs: Any) -> Column | None:
    """The ``long[]`` as a literal of Spark's contiguous ``UnsafeArrayData``, elements
    not null: a read is one load, where ``functions.lit`` makes a ``GenericArrayData``
    of boxed, nullable longs (a null check and an unboxing per read; the constant-array
    lookups ran 0.82 -> 0.66 s in ``assign_watermarks``' output pass on 10M rows). The
    Catalyst classes used are not public API: None when they are missing or changed,
    and the caller falls back to ``lit``."""
    from py4j.protocol import Py4JError
    from pyspark.sql.column import Column

    try:
        data = jvm.org.apache.spark.sql.catalyst.expressions.UnsafeArrayData
        types = jvm.org.apache.spark.sql.types
        literal = jvm.org.apache.spark.sql.catalyst.expressions.Literal(
            data.fromPrimitiveArray(longs), types.ArrayType.apply(types.DataTypes.LongType, False)
        )
        node = jvm.org.apache.spark.sql.classic.ExpressionColumnNode.apply(literal)
        return Column(jvm.org.apache.spark.sql.Column(node))
    except (Py4JError, TypeError):  # py4j: a missing class is a package, not callable
        return None


def scatter(
    values: np.ndarray, present: np.ndarray, at: np.ndarray, size: int
) -> tuple[np.ndarray, np.ndarray]:
    """``values`` spread over ``size`` slots (row ``i`` at ``at[i]``), and which slots
    hold a value."""
    spread = np.zeros(size, np.int64)
    spread[at] = values
    known = np.zeros(size, bool)
    known[at] = present
    return spread, known


class ConstantLookup(NamedTuple):
    """How to read one value column from its constant array."""

    read: Callable[[Column], Column]  # index -> the stored value
    by_bucket: bool  # indexed by bucket (else by slot)
    empty_marker: int | None  # the stored value of empty slots; None: none is empty


def constant_lookup(
    spark: SparkSession,
    column: pa.ChunkedArray,
    row_bucket: np.ndarray,
    row_slot: np.ndarray,
    rows: int,
    span: int,
) -> ConstantLookup | None:
    """The lookup of one value column: by bucket when the column is the same for every
    channel of a bucket, else by slot. None without a JVM gateway."""
    from pyspark.sql import functions as F

    values = pc.fill_null(column, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    present = ~column.is_null().to_numpy(zero_copy_only=False)
    spread, known = scatter(values, present, row_bucket, rows)
    by_bucket = np.array_equal(spread[row_bucket], values) and np.array_equal(
        known[row_bucket], present
    )
    if not by_bucket:
        spread, known = scatter(values, present, row_slot, rows * span)
    # A value no slot holds marks the empty slots, read back as null.
    empty = I64_MAX
    while np.any(spread[known] == empty):
        empty -= 1
    array = constant_array(spark, np.where(known, spread, empty))
    if array is None:
        return None
    marker = None if known.all() else empty
    return ConstantLookup(lambda index: F.get(array, index), by_bucket, marker)


def constant_columns(
    recs: DataFrame,
    plan: WatermarkPlan,
    table: pa.Table,
    offset: Column,
    offsets: np.ndarray,
    first: int,
    rows: int,
    span: int,
) -> DataFrame | None:
    """``recs`` plus the value columns read from constant arrays (None without a JVM
    gateway)."""
    from pyspark.sql import functions as F

    bucket = F.col(_BUCKET) - F.lit(first)
    # Only a placeable record in the table's range has a slot: the CASE keeps the index
    # arithmetic in range (Spark's ANSI mode fails on overflow).
    inside = (
        valid_rows(plan)
        & F.col(_BUCKET).between(first, first + rows - 1)
        & offset.between(0, span - 1)
    )
    slot = (bucket * F.lit(span) + offset).cast("int")
    row_bucket = table.column("bucket").to_numpy().astype(np.int64) - first
    looked_up, markers = [], {}
    for v in table.column_names:
        if v in ("channel", "bucket"):
            continue
        found = constant_lookup(
            recs.sparkSession, table.column(v), row_bucket, row_bucket * span + offsets, rows, span
        )
        if found is None:
            return None
        index = bucket.cast("int") if found.by_bucket else slot
        looked_up.append(F.when(inside, found.read(index)).alias(v))
        markers[v] = found.empty_marker
    stored = recs.select("*", *looked_up).drop(_ARRIVAL, _BUCKET, _OFFSET)
    if all(m is None for m in markers.values()):
        return stored
    # Empty slots read back as null in a projection of their own: Spark does not merge
    # it into the one above (that would read each array twice per record, ~20% of
    # assign_watermarks' output pass on 10M rows).
    return stored.select(
        *[
            F.nullif(F.col(quote(c)), F.lit(markers[c])).alias(c)
            if markers.get(c) is not None
            else F.col(quote(c))
            for c in stored.columns
        ]
    )


def join_buckets(df: DataFrame, plan: WatermarkPlan, table: pa.Table) -> DataFrame:
    """``df`` plus the value columns of ``table`` (every column but ``channel`` and
    ``bucket``, all ``bigint``) for each record's channel and arrival bucket; null for
    rows the watermark stages cannot place (null event time, arrival or channel)."""
    from pyspark.sql import functions as F

    values = [c for c in table.column_names if c not in ("channel", "bucket")]
    if table.num_rows == 0:
        return df.select("*", *[F.lit(None).cast("bigint").alias(v) for v in values])
    recs = df.withColumn(_ARRIVAL, plan.arrival.ticks()).withColumn(_BUCKET, plan.bucket(_ARRIVAL))
    recs, offset, offsets, span = channel_offsets(recs, plan, table.column("channel"))
    buckets = table.column("bucket").to_numpy().astype(np.int64)
    first = int(buckets.min())
    rows = int(buckets.max()) - first + 1
    columns = {v: table.column(v) for v in values}
    bucket = F.col(_BUCKET) - F.lit(first)
    if rows * span <= MAX_CONSTANT_SLOTS:
        constant = constant_columns(recs, plan, table, offset, offsets, first, rows, span)
        if constant is not None:
            return constant
    if rows * span <= MAX_KEYS:
        lookup = pa.table({_KEY: (buckets - first) * span + offsets, **columns})
        key = bucket * F.lit(span) + offset
        # Only placeable rows have a key: they are the rows the table was built from,
        # so the arithmetic stays in range (Spark's ANSI mode would fail on overflow).
        recs = recs.withColumn(_KEY, F.when(valid_rows(plan), key))
        on = [_KEY]
    else:  # a bucket range too wide for one key: join on the pair
        lookup = pa.table({_OFFSET: offsets, _BUCKET: buckets, **columns})
        recs = recs.withColumn(_OFFSET, F.when(valid_rows(plan), offset))
        on = [_OFFSET, _BUCKET]
    frame = df.sparkSession.createDataFrame(lookup)
    joined = recs.join(F.broadcast(frame), on=on, how="left")
    return joined.drop(_KEY, _ARRIVAL, _BUCKET, _OFFSET)


__all__ = ["MAX_ARITHMETIC_SPAN", "MAX_CONSTANT_SLOTS", "MAX_KEYS", "join_buckets"]
