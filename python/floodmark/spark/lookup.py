"""Stage 3's lookups: every way a record reads the values of its bucket.

Two kinds of values, read from what the timeline stage left:

* **Per bucket**: the combined watermark in force for records of bucket ``k`` (arrival
  in ``((k - 1) * interval, k * interval]``) is the last advance at or before
  ``(k - 1) * interval`` (advances happen on the emission grid), the same for every
  channel: O(span / emit_interval) values. :func:`in_force_by_bucket` gives them,
  :func:`in_force_column` reads them from one constant array in the plan (at most
  :data:`MAX_CONSTANT_SLOTS` buckets). Over a longer span (or for a generator that
  emits on records, whose watermark changes between grid times)
  :func:`with_in_force` reads it by arrival instead, on the executors, from the
  timeline's advances (:func:`floodmark.timeline.in_force_at`: the last strictly
  before the arrival, which on the grid is the bucket's value): no value per bucket is
  built, so the cost follows the records whatever the span (a table of every bucket,
  broadcast, took 39 s for 3,000 records over 30 days and ran out of memory over 150).
* **Per (channel, bucket)**: the channel watermark (``assign_watermarks``). When the
  per-(channel, bucket) table came to the driver (small), its slot is one number,
  ``(bucket - first bucket) * channels + channel offset``, looked up the cheapest way
  that fits (:func:`join_buckets`): at most :data:`MAX_CONSTANT_SLOTS` slots (a session
  with a JVM gateway, i.e. not Spark Connect): each value column is a constant
  ``array<bigint>`` literal in the plan, indexed by the slot, or by the bucket alone
  when the column is the same for every channel of a bucket (the combined watermark
  is); larger tables are broadcast and joined on the slot as one ``bigint`` key (a
  long-keyed hash relation, probed without hashing a row per record); slots that would
  not fit in one ``bigint``: the pair. When the table stayed on the executors (large:
  many channels or a long span), it is joined to the records there, on ``(channel,
  bucket)``, by :func:`join_bucket_frame`: a shuffle, but nothing through the driver.

Constant arrays: one array read per record, no join, and no table shipped from Python
and broadcast, which alone cost 0.8-1.3 s for 288k rows. ``explain()`` shows each as
``UnsafeArrayData@...`` (the values only with the ``lit`` fallback;
:func:`floodmark.spark.watermark_timeline` shows them). Measured on 10M rows
(docs/performance.md): the pair join 5.9 s, the one-key join 2.2 s;
``assign_watermarks`` with the one-key join 1.58x an identity pass, with the constant
arrays 0.84-1.13x.

The channel offset is ``channel - smallest channel`` for integer channels whose values
span a small range (Kafka partitions); other channels (strings, sparse integers) get
their offset from a second broadcast join against the distinct channels, tiny.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from floodmark.exceptions import InvalidInputError
from floodmark.spark.columns import quote
from floodmark.spark.local_frames import local_frame
from floodmark.spark.plan import WatermarkPlan, valid_rows
from floodmark.time import I64_MAX, I64_MIN
from floodmark.timeline import in_force_at

if TYPE_CHECKING:
    from floodmark.spark.timeline import Timeline

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

#: Integer channels whose values span at most this many are offset by arithmetic.
MAX_ARITHMETIC_SPAN = 1 << 20
#: Tables of at most this many (bucket, channel) slots are constant arrays in the plan.
MAX_CONSTANT_SLOTS = 1 << 19

#: The most changes of a record-driven generator's combined watermark shipped to the
#: executors (every Python worker holds them); a periodic generator's advances are at
#: most one per emission interval of the span and are not capped.
MAX_SHIPPED_TIMELINE = 1 << 22
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
    names = local_frame(
        df.sparkSession,
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
    frame = local_frame(df.sparkSession, lookup)
    joined = recs.join(F.broadcast(frame), on=on, how="left")
    return joined.drop(_KEY, _ARRIVAL, _BUCKET, _OFFSET)


def watermark_in_force(
    times: np.ndarray, wms: np.ndarray, buckets: np.ndarray, interval: int
) -> np.ndarray:
    """The watermark in force for a record of each bucket (arrival in ``((bucket - 1)
    * interval, bucket * interval]``): :func:`in_force_at` the bucket's first tick. As
    advances happen on the grid, that is the last at or before ``(bucket - 1) *
    interval``, the same for every record of the bucket."""
    return in_force_at(times, wms, (buckets - 1) * interval + 1)


def bucket_slots(timeline: Timeline) -> int:
    """How many values :func:`in_force_by_bucket` gives: the buckets from the first to
    one past the last (0 when there is no bucket)."""
    first, last = timeline.first_bucket, timeline.last_bucket
    return 0 if first is None or last is None else last - first + 2


def in_force_by_bucket(timeline: Timeline) -> tuple[int, np.ndarray] | None:
    """``(first bucket, the combined watermark in force per bucket)`` from the first
    bucket to one past the last (a bucket before has no watermark, one after every
    advance's); None when there is no bucket (no record to look up). O(span /
    emit_interval) values: the callers ask only for spans that fit a constant array."""
    if timeline.first_bucket is None or timeline.last_bucket is None or timeline.record_driven:
        return None  # (a generator emitting on records changes it between grid times)
    times, wms = timeline.advances()
    first, last = timeline.first_bucket, timeline.last_bucket
    ks = np.arange(first, last + 2, dtype=np.int64)
    return first, watermark_in_force(times, wms, ks, timeline.plan.interval)


def bucket_array_column(
    spark: SparkSession, plan: WatermarkPlan, first: int, values: np.ndarray, arrival: str
) -> Column | None:
    """A per-bucket value for each record, from ``values`` (buckets ``first`` to one
    past the last, as :func:`in_force_by_bucket` gives them: ``MIN`` before them, the
    last value after them), read from one constant array by the bucket of the column
    ``arrival`` (ticks); None when the array is too long or the session has no JVM
    gateway."""
    from pyspark.sql import functions as F

    if len(values) == 0 or len(values) > MAX_CONSTANT_SLOTS:
        return None
    array = constant_array(spark, values)
    if array is None:
        return None
    bucket = plan.bucket(arrival)
    last = first + len(values) - 1
    return (
        F.when(bucket < first, F.lit(I64_MIN))
        .when(bucket > last, F.lit(int(values[-1])))
        .otherwise(F.get(array, (bucket - F.lit(first)).cast("int")))
    )


def in_force_column(spark: SparkSession, timeline: Timeline, arrival: str) -> Column | None:
    """The combined watermark (ticks) in force for each record, from the column
    ``arrival`` holding its arrival in ticks: one constant array read (None when the
    span has more than :data:`MAX_CONSTANT_SLOTS` buckets or the session has no JVM
    gateway)."""
    if bucket_slots(timeline) > MAX_CONSTANT_SLOTS:
        return None  # before the values are built: the span may not fit in memory
    found = in_force_by_bucket(timeline)
    if found is None:
        return None
    return bucket_array_column(spark, timeline.plan, found[0], found[1], arrival)


def shipped_advances(timeline: Timeline) -> tuple[np.ndarray, np.ndarray]:
    """``timeline``'s advances, to be shipped to the executors (the records' watermarks
    in force, the keyed operator's advances): a periodic generator's are at most one
    per emission interval; a record-driven one's at most :data:`MAX_SHIPPED_TIMELINE`.

    Raises:
        InvalidInputError: a record-driven timeline with more advances, naming the
            punctuated strategy's marker column, or ``strategy`` for a user generator.
    """
    times, wms = timeline.advances()
    if timeline.record_driven and len(times) > MAX_SHIPPED_TIMELINE:
        marker = timeline.plan.marker
        raise InvalidInputError(
            marker.name if marker is not None else "strategy",
            f"the combined watermark of this generator grew {len(times):,} times, more "
            f"than the {MAX_SHIPPED_TIMELINE:,} the records can read it from on the "
            "executors; a periodic strategy changes it at most once per emission interval",
        )
    return times, wms


def with_in_force(recs: DataFrame, timelines: dict[str, Timeline], arrival: str) -> DataFrame:
    """``recs`` plus one column per entry of ``timelines``: that timeline's combined
    watermark in force at each record's arrival (the column ``arrival``, ticks).

    From constant arrays by bucket (:func:`in_force_column`) when every timeline is
    periodic and its span fits; otherwise read on the executors by arrival
    (:func:`in_force_at`) from the advances shipped to each Python worker
    (:func:`shipped_advances`): the cost then follows the records, not the span.
    """
    from pyspark.sql import functions as F

    spark = recs.sparkSession
    columns = {
        name: F.lit(I64_MIN)  # no bucket: no placeable record, no watermark
        if bucket_slots(tl) == 0 and not tl.record_driven
        else in_force_column(spark, tl, arrival)
        for name, tl in timelines.items()
    }
    if all(c is not None for c in columns.values()):
        return recs.select("*", *[c.alias(n) for n, c in columns.items() if c is not None])
    return in_force_on_executors(
        recs, {name: shipped_advances(tl) for name, tl in timelines.items()}, arrival
    )


def in_force_on_executors(
    recs: DataFrame, advances: dict[str, tuple[np.ndarray, np.ndarray]], arrival: str
) -> DataFrame:
    """``recs`` plus one column per entry of ``advances`` (``(times, watermarks)``):
    :func:`in_force_at` the column ``arrival``, in one pass over the records in
    Python (:func:`computed_on_executors`)."""
    return computed_on_executors(
        recs,
        arrival,
        {
            name: functools.partial(in_force_at, times, wms)
            for name, (times, wms) in advances.items()
        },
    )


def computed_on_executors(
    df: DataFrame, source: str, computed: dict[str, Callable[[np.ndarray], np.ndarray]]
) -> DataFrame:
    """``df`` plus one ``long`` column per entry of ``computed``: its function of the
    column ``source`` (a numpy array per Arrow batch), in one pass over the rows in
    Python on the executors (which need floodmark: checked first, as for every such
    pass; the functions travel with the task)."""
    from pyspark.sql.types import LongType, StructField, StructType

    from floodmark.spark.executors import require_floodmark

    require_floodmark(df.sparkSession)
    names = df.columns
    at = names.index(source)

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            values = b.column(at).to_numpy(zero_copy_only=False)
            for fn in computed.values():
                b = b.append_column(f"__fm_c{b.num_columns}", pa.array(fn(values), pa.int64()))
            yield b

    positional = df.toDF(*[f"__fm_c{i}" for i in range(len(names))])
    schema = StructType(
        [
            *[StructField(f"__fm_c{i}", f.dataType) for i, f in enumerate(df.schema.fields)],
            *[
                StructField(f"__fm_c{len(names) + j}", LongType(), False)
                for j in range(len(computed))
            ],
        ]
    )
    return positional.mapInArrow(read, schema).toDF(*names, *computed)


def join_bucket_frame(df: DataFrame, plan: WatermarkPlan, frame: DataFrame) -> DataFrame:
    """``df`` plus the value columns of ``frame`` (every column but ``channel`` and
    ``bucket``) for each record's channel and bucket, joined on the executors (the
    large-table path); null for rows the watermark stages cannot place."""
    from pyspark.sql import functions as F

    values = [c for c in frame.columns if c not in ("channel", "bucket")]
    right = frame.select(F.col("channel").alias(_CHANNEL), F.col("bucket").alias(_BUCKET), *values)
    recs = df.withColumn(_ARRIVAL, plan.arrival.ticks()).withColumn(
        _BUCKET, F.when(valid_rows(plan), plan.bucket(_ARRIVAL))
    )
    same = (F.col(quote(plan.channel)) == F.col(_CHANNEL)) & (recs[_BUCKET] == right[_BUCKET])
    joined = recs.join(right, same, how="left")
    return joined.select(*[recs[quote(c)] for c in df.columns], *[right[v] for v in values])


__all__ = [
    "MAX_ARITHMETIC_SPAN",
    "MAX_CONSTANT_SLOTS",
    "MAX_KEYS",
    "MAX_SHIPPED_TIMELINE",
    "computed_on_executors",
    "in_force_by_bucket",
    "in_force_column",
    "in_force_on_executors",
    "join_bucket_frame",
    "join_buckets",
    "shipped_advances",
    "watermark_in_force",
    "with_in_force",
]
