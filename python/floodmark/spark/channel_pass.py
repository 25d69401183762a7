"""Stage 1 for ``assign_watermarks`` on the records path: each record's own channel
watermark, computed per channel on the executors.

Why. A record's channel watermark is what its channel's generator had emitted when it
arrived: it depends on that channel's records alone (and on the emission grid, global,
at multiples of the interval). Where the per-(channel, bucket) aggregation would not
reduce the records (:func:`floodmark.spark.timeline.reduces`: many channels, or a long
span, for the rows), the bucket table is about as large as the input, and joining it
back to the records on ``(channel, bucket)`` shuffles both sides (10 s of a 19 s
``assign_watermarks`` at 1,000 partitions over an hour). Here the records are shuffled
once, by channel, sorted by arrival within each partition, and each task runs one Rust
:class:`floodmark.timeline.TimelineBuilder` over every channel, fed only its own
channels' records, its grid started at the whole input's first bucket
(:meth:`~floodmark.timeline.TimelineBuilder.start_at`): each channel's generator then
gets exactly the calls it gets in the timeline stage's builder (a property test checks
it), so the two agree by construction and no rule is restated. Its combined watermark
is not used: the records read the timeline's by bucket afterwards
(:mod:`floodmark.spark.lookup`).

Memory per task: one builder, bounded by the channels, whatever the rows. Where it does
not apply (:func:`takes`), ``assign_watermarks`` keeps the per-(channel, bucket) table.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from floodmark.spark.columns import not_arrow, quote
from floodmark.spark.executors import require_floodmark
from floodmark.spark.plan import WatermarkPlan, valid_rows
from floodmark.timeline import EVERY_GRID_KINDS, TimelineBuilder

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_CH, _ARR, _TS = "__fm_cp_channel", "__fm_cp_arrival", "__fm_cp_ts"


def takes(plan: WatermarkPlan, df: DataFrame) -> bool:
    """Whether this pass gives ``plan``'s records (``df``) their channel watermarks.
    Not when a column cannot cross into Python through Arrow (the pass carries every
    column; the aggregation's join keeps them in the JVM). Not with
    ``source_parallelism``: there a record's channel watermark is its source subtask's
    (Flink's multiplexer over the subtask's partitions). Not for a generator that emits
    at every grid time (processing-time lag): each task's builder would call every
    channel at every grid time (the timeline stage's work once per task, over the
    gaps between that task's own records, longer than the input's)."""
    return (
        plan.source_parallelism is None
        and plan.strategy.kind not in EVERY_GRID_KINDS
        and not_arrow(df) is None
    )


def channel_runner(plan: WatermarkPlan, channels: pa.Array, first_bucket: int) -> Any:
    """The function each partition runs: its records (channel, arrival ticks, event
    ticks, then the input columns; in arrival order, every record of a channel in the
    same partition) as the input columns and their ``channel_watermark`` (ticks)."""
    strategy, interval = plan.strategy, plan.interval

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        builder = TimelineBuilder(strategy, len(channels), emit_interval=interval)
        builder.start_at(first_bucket)
        for batch in batches:
            if batch.num_rows == 0:
                continue
            index = pc.index_in(batch.column(0), value_set=channels)
            found = builder.push(index, batch.column(1), batch.column(2))
            yield pa.RecordBatch.from_arrays(
                [*batch.columns[3:], found.channel_watermark],
                names=[*batch.schema.names[3:], "channel_watermark"],
            )

    return run


def with_channel_watermarks(
    df: DataFrame, plan: WatermarkPlan, channels: pa.Array, first_bucket: int
) -> DataFrame:
    """``df``'s placeable records (:func:`floodmark.spark.plan.valid_rows`) with their
    ``channel_watermark`` (ticks, ``MIN`` before the channel's first emission), given
    the timeline's channels (every placeable channel, in the valve's order) and first
    bucket. Lazy: the pass runs when the result is read."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StructField, StructType

    from floodmark.spark.windows.keyed import default_partitions

    require_floodmark(df.sparkSession)
    positional = [f"__fm_c{i}" for i in range(len(df.columns))]
    sent = df.where(valid_rows(plan)).select(
        F.col(quote(plan.channel)).alias(_CH),
        plan.arrival.ticks().alias(_ARR),
        plan.event_time.ticks().alias(_TS),
        *[F.col(quote(c)).alias(p) for c, p in zip(df.columns, positional, strict=True)],
    )
    # By arrival alone: one integral key, which Spark radix-sorts (sorting by channel,
    # then arrival, cost 2.2 s more for 10M records of 1,000 partitions).
    ordered = sent.repartition(default_partitions(df.sparkSession), _CH).sortWithinPartitions(_ARR)
    fields = zip(positional, df.schema.fields, strict=True)
    schema = StructType(
        [
            *[StructField(p, f.dataType, f.nullable) for p, f in fields],
            StructField("channel_watermark", LongType(), False),
        ]
    )
    out = ordered.mapInArrow(channel_runner(plan, channels, first_bucket), schema)
    return out.toDF(*df.columns, "channel_watermark")


__all__ = ["takes", "with_channel_watermarks"]
