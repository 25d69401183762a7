"""Stages 1 and 2 of the pipeline: per-channel watermarks and the combined timeline.

Why this is exact and cheap. Periodic emission happens on a grid of processing time
(every ``emit_interval``, at multiples of it); the emission at grid time ``t`` sees every
record with ``arrival <= t`` (the documented tie rule). For the periodic generators
(bounded out-of-orderness, monotonous, processing-time lag, no watermarks, each with or
without idleness) what an emission at ``t`` says depends only on the maximum event time
seen so far and on whether anything arrived since the previous emission. So Spark
reduces each channel's records, natively and in parallel, to one row per non-empty grid
bucket ``(channel, bucket, max event time)``, and the Rust timeline builder
(:class:`floodmark.timeline.TimelineBuilder`) runs every channel's generator and the
valve over those rows in one pass, exactly as over every record (the equality tests
check it against ``floodmark.replay``).

Why the cost does not grow with channels x span. The bucket table has one row per
non-empty ``(channel, bucket)``: at most the number of records, but with many channels
or a long span it can be millions of rows (1,000 Kafka partitions over an hour at
200 ms: up to 18M). So it comes to the driver only when small
(:data:`MAX_DRIVER_BUCKET_ROWS`, one bounded collect that stops there); a larger one
stays on the executors, cached, and the builder runs over it in one Spark task, in
arrival order, with memory bounded by the channels. Where the aggregation would not
reduce the records (many channels, or a long span, for the rows: :func:`reduces` judges
from a fixed sample) it is skipped and the builder reads the records in that task
instead (it takes a bucket's records as it takes their summary). Either way the driver
receives only what does not grow with channels x buckets: the channel list (one value
per channel, for the valve's order), the combined timeline (one row per valve emission:
its watermark changes only at grid times, so O(span / emit_interval) in practice), a
few numbers (the event-time range, the records a window may find late) and, on the
records path, the fixed sample that chose it. The per-record
stages read the combined watermark by bucket (O(span / emit_interval) values); only
``assign_watermarks``' per-record *channel* watermark needs more: the per-(channel,
bucket) table, joined on the executors when it is large (see
:mod:`floodmark.spark.lookup`), or on the records path a per-channel pass
(:mod:`floodmark.spark.channel_pass`).
"""

from __future__ import annotations

import contextlib
import pickle
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from floodmark import _core
from floodmark.exceptions import FloodmarkError, InvalidInputError, InvalidParameterError
from floodmark.spark import channel_pass
from floodmark.spark.columns import quote
from floodmark.spark.executors import floodmark_on_executors, require_floodmark
from floodmark.spark.local_frames import local_frame
from floodmark.spark.packed import only, pack, packed_schema, unpack_local, unpacked
from floodmark.spark.plan import WatermarkPlan, valid_rows
from floodmark.strategy import WatermarkStrategy
from floodmark.timeline import (
    EVERY_GRID_KINDS,
    PERIODIC_KINDS,
    TimelineBuilder,
    channel_index,
    subtasks_of,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: The per-(channel, bucket) table comes to the driver when it has at most this many
#: rows (a collect that stops at one more); a larger one stays on the executors.
MAX_DRIVER_BUCKET_ROWS = 1 << 19

#: The driver's builder takes a small table in chunks of this many rows, as a Spark
#: task takes a large one (Spark's default ``arrow.maxRecordsPerBatch``). The core's
#: bound on a processing-time lag's calls applies between two buckets with records,
#: so how the rows are cut never decides whether an input is refused.
DRIVER_CHUNK_ROWS = 10_000

#: How many placeable records from the input's start :func:`reduces` reads to judge
#: whether the per-(channel, bucket) aggregation would reduce the records; an input
#: with fewer goes through the aggregation.
SAMPLE_RECORDS = 20_000

#: At or above this many distinct ``(channel, bucket)`` per record in the sample, the
#: aggregation is skipped and the builder reads the records themselves (measured: 1,000
#: partitions over an hour 0.78, 16 over a day 0.53, 16 over an hour 0.03).
RECORDS_DENSITY = 0.25

#: A function of one chunk of bucket rows (``bucket``, ``min_ts``, ``rows`` columns) and
#: the combined watermark in force for each row: how many of their records may be late
#: for a window (an upper bound). Run where the builder runs, so it must be picklable.
LateProbe = Callable[[pa.RecordBatch, np.ndarray], int]


@dataclass
class Timeline:
    """The combined watermark timeline of one input, and what the later stages read.

    Attributes:
        plan: the resolved plan.
        table: one row per change of the combined watermark or status: ``time``
            (arrival ticks), ``watermark`` (event-time ticks), ``status``
            (``active``/``idle``), ``min_channel`` (the channel value holding the
            minimum) and ``advance`` (the watermark grew).
        channels: the channel values, in the valve's order.
        first_bucket, last_bucket: the grid buckets of the first and last arrival
            (None for no placeable record).
        rows: the number of placeable records (None where no pass counted them: the
            aggregation without ``stats``, whose rows are ``(channel, bucket)`` pairs).
        event_range: smallest and largest event time (ticks) of the placeable records,
            when the aggregation gave ``min_ts`` (``stats``); None otherwise or for no
            records.
        maybe_late: what the late probe counted (None without one).
        buckets: when the per-(channel, bucket) table came to the driver: one row per
            non-empty ``(channel, bucket)`` with ``channel``, ``bucket``,
            ``channel_watermark`` and ``watermark`` in force for its records (and
            ``min_ts``, ``rows`` with ``stats``). None when it stayed on the executors.
        bucket_frame: when it stayed on the executors and the channel watermarks were
            asked for: the same as a DataFrame (``channel``, ``bucket``,
            ``channel_watermark``, ``watermark``), cached until :meth:`unpersist`.
        emissions: every channel's own output (``channel`` value, ``time``, ``kind``,
            ``watermark``) when asked for: all of it when the table came to the
            driver, else compacted for the report's per-partition views
            (:func:`floodmark.report.partition_views.compact_emissions`).
        record_driven: the generator emits on records (punctuated, user generators,
            :mod:`floodmark.spark.per_channel`): the combined watermark changes at
            records' arrivals, not on the grid, so no per-bucket lookup applies.
        records: when the channel watermarks were asked for and no per-(channel,
            bucket) table was made (a generator emitting on records, or the records
            path): the placeable records with their ``channel_watermark`` (ticks).
    """

    plan: WatermarkPlan
    table: pa.Table
    channels: pa.Array
    first_bucket: int | None
    last_bucket: int | None
    rows: int | None
    event_range: tuple[int, int] | None = None
    maybe_late: int | None = None
    buckets: pa.Table | None = None
    bucket_frame: DataFrame | None = None
    emissions: pa.Table | None = None
    cached: list[DataFrame] = field(default_factory=list)
    record_driven: bool = False
    records: DataFrame | None = None

    def advances(self) -> tuple[np.ndarray, np.ndarray]:
        """``(times, watermarks)`` of the rows where the combined watermark grew."""
        grew = self.table.column("advance").to_numpy(zero_copy_only=False)
        times = self.table.column("time").to_numpy(zero_copy_only=False)
        wms = self.table.column("watermark").to_numpy(zero_copy_only=False)
        return times[grew], wms[grew]

    @property
    def span(self) -> tuple[int, int] | None:
        """The first and last grid times (arrival ticks), None for no record."""
        if self.first_bucket is None or self.last_bucket is None:
            return None
        return self.first_bucket * self.plan.interval, self.last_bucket * self.plan.interval

    def to_dataframe(self, spark: SparkSession) -> DataFrame:
        """The timeline as a DataFrame, times and watermarks in the input's types."""
        return ticks_frame(spark, self.plan, self.table.drop(["advance"]))

    def unpersist(self) -> None:
        """Release what the stage cached on the executors."""
        for frame in self.cached:
            frame.unpersist()
        self.cached.clear()


def ticks_frame(spark: SparkSession, plan: WatermarkPlan, table: pa.Table) -> DataFrame:
    """A driver table as a DataFrame, its ``time`` column (arrival ticks) and
    ``watermark`` column (event-time ticks) in the input's types, the others as they
    are. Made from the Arrow table itself: its schema holds with no rows (an empty
    input, a strategy that never emits) and keeps an integer channel integer when it
    is null (every channel idle), which pandas would turn into a float."""
    from pyspark.sql import functions as F

    converted = {
        "time": plan.arrival.from_ticks(F.col("time")).alias("time"),
        "watermark": plan.event_time.from_ticks(F.col("watermark")).alias("watermark"),
    }
    return local_frame(spark, table).select(
        *[converted.get(name, F.col(name)) for name in table.column_names]
    )


def bucket_aggregate(df: DataFrame, plan: WatermarkPlan, stats: bool = False) -> DataFrame:
    """Stage 1, native: one row per non-empty ``(channel, bucket)`` with ``arrival``
    (the latest arrival, in ticks), ``max_ts``, and ``min_ts`` and ``rows`` with
    ``stats`` (the window stage needs the event-time range and which buckets can hold
    late records)."""
    from pyspark.sql import functions as F

    return (
        placeable(df, plan, "ts")
        .groupBy("channel", plan.bucket("arrival").alias("bucket"))
        .agg(
            F.max("arrival").alias("arrival"),
            F.max("ts").alias("max_ts"),
            *([F.min("ts").alias("min_ts"), F.count("*").alias("rows")] if stats else []),
        )
    )


def placeable(df: DataFrame, plan: WatermarkPlan, ts: str) -> DataFrame:
    """The placeable records as the builder reads them: ``channel``, ``arrival`` (ticks)
    and their event time (ticks) named ``ts``."""
    from pyspark.sql import functions as F

    return df.where(valid_rows(plan)).select(
        F.col(quote(plan.channel)).alias("channel"),
        plan.arrival.ticks().alias("arrival"),
        plan.event_time.ticks().alias(ts),
    )


def reduces(df: DataFrame, plan: WatermarkPlan) -> bool:
    """Whether the per-(channel, bucket) aggregation would reduce ``df``'s records, judged
    from its first :data:`SAMPLE_RECORDS` placeable records (one small job): False when
    they hold at least :data:`RECORDS_DENSITY` distinct ``(channel, bucket)`` per record
    (many channels, or a long span, for the rows: each channel's records fall in
    buckets of their own). Only the speed depends on it: both paths give the same
    timeline."""
    head = (
        placeable(df, plan, "ts")
        .select("channel", plan.bucket("arrival").alias("bucket"))
        .limit(SAMPLE_RECORDS)
        .toArrow()
    )
    if head.num_rows < SAMPLE_RECORDS:
        return True
    _, index = channel_index(head.column("channel"))
    cells = pa.table({"channel": index, "bucket": head.column("bucket")})
    distinct = cells.group_by(["channel", "bucket"]).aggregate([]).num_rows
    return bool(distinct < RECORDS_DENSITY * head.num_rows)


def one_partition(frame: DataFrame) -> DataFrame:
    """``frame`` in one partition: coalesced when nothing in its plan shuffles (a scan,
    which then runs in that one task: no shuffle of the rows), else through a shuffle,
    so that the stages before it keep their parallelism."""
    try:
        physical = str(frame._jdf.queryExecution().executedPlan().toString())
    except Exception:  # no JVM plan to read (Spark Connect): the safe form
        return frame.repartition(1)
    return frame.repartition(1) if "Exchange" in physical else frame.coalesce(1)


@dataclass
class Run:
    """What one pass of the builders over the bucket rows gathers: per strategy, its
    timeline (and channel emissions) and late count; for all, the grid range, the
    records and the event-time range."""

    timelines: list[list[pa.RecordBatch]]
    emissions: list[list[pa.RecordBatch]]
    maybe_late: list[int]
    first: int | None = None
    last: int | None = None
    rows: int = 0
    counted: bool = True
    low: int | None = None
    high: int | None = None

    def note(self, batch: pa.RecordBatch, bucket_of: Callable[[int], int]) -> None:
        """Counts a chunk of bucket rows or records (in arrival order); ``bucket_of``
        places an arrival on the grid (for records, which have no ``bucket``)."""
        names = batch.schema.names
        if "bucket" in names:
            first, last = batch.column("bucket")[0].as_py(), batch.column("bucket")[-1].as_py()
        else:
            arrivals = batch.column("arrival")
            first, last = bucket_of(arrivals[0].as_py()), bucket_of(arrivals[-1].as_py())
        if self.first is None:
            self.first = first
        self.last = last
        if "rows" in names:
            self.rows += int(pc.sum(batch.column("rows")).as_py())
        elif "bucket" in names:  # bucket rows without their records' count
            self.counted = False
        else:
            self.rows += batch.num_rows
        high = pc.max(batch.column("max_ts")).as_py()
        self.high = high if self.high is None else max(self.high, high)
        if "min_ts" in names:
            low = pc.min(batch.column("min_ts")).as_py()
            self.low = low if self.low is None else min(self.low, low)

    def numbers(self) -> dict[str, Any]:
        return {
            "first": self.first,
            "last": self.last,
            "rows": self.rows if self.counted else None,
            "low": self.low,
            "high": self.high,
            "maybe_late": self.maybe_late,
        }


def run_builders(
    batches: Iterator[pa.RecordBatch],
    channels: pa.Array,
    strategies: Sequence[WatermarkStrategy],
    interval: int,
    run: Run,
    *,
    keep_emissions: bool = False,
    probe: LateProbe | None = None,
    topology: Topology | None = None,
) -> Iterator[pa.RecordBatch]:
    """Stage 2 over bucket rows in arrival order: one builder per strategy (in ticks),
    all in one pass, gathering into ``run``. Yields each chunk of rows with the first
    strategy's ``channel_watermark`` and ``watermark`` in force; when the batches end,
    every builder has finished and ``run`` holds the whole timelines."""
    topo = topology or Topology()
    builders = [
        TimelineBuilder(
            s,
            len(channels),
            emit_interval=interval,
            keep_emissions=keep_emissions,
            subtasks=topo.subtasks,
            source_parallelism=topo.source_parallelism,
            end_buckets=topo.end_buckets,
        )
        for s in strategies
    ]
    for batch in batches:
        if batch.num_rows == 0:
            continue
        run.note(batch, builders[0].bucket_of)
        index = pc.index_in(batch.column("channel"), value_set=channels)
        for j, builder in enumerate(builders):
            found = builder.push(index, batch.column("arrival"), batch.column("max_ts"))
            if probe is not None:
                run.maybe_late[j] += probe(batch, found.watermark.to_numpy(zero_copy_only=False))
            run.timelines[j].append(builder.take_timeline())
            if keep_emissions:
                run.emissions[j].append(builder.take_emissions())
            if j == 0:
                yield batch.append_column(
                    "channel_watermark", found.channel_watermark
                ).append_column("watermark", found.watermark)
    for j, builder in enumerate(builders):
        builder.finish()
        run.timelines[j].append(builder.take_timeline())
        if keep_emissions:
            run.emissions[j].append(builder.take_emissions())


@dataclass(frozen=True)
class Topology:
    """The builder's topology options, resolved for the channels in the valve's order:
    each channel's source subtask and, for ``end_of_input="per_channel"``, its last
    bucket (picklable: the executors' task takes it)."""

    subtasks: list[int] | None = None
    source_parallelism: int | None = None
    end_buckets: list[int] | None = None


def topology_of(plan: WatermarkPlan, channels: pa.Array, last: pa.Array) -> Topology:
    """The :class:`Topology` of ``plan`` for ``channels`` (in the valve's order), whose
    last buckets are ``last`` (in the same order)."""
    subtasks = subtasks_of(channels, plan.source_parallelism, plan.topic, plan.channel)
    ends = last.to_pylist() if plan.end_of_input == "per_channel" else None
    topology = Topology(subtasks, plan.source_parallelism, ends)
    if subtasks is not None:  # refused here, not in a Spark task (e.g. an empty subtask)
        TimelineBuilder(
            plan.strategy,
            len(channels),
            emit_interval=plan.interval,
            subtasks=subtasks,
            source_parallelism=plan.source_parallelism,
        )
    return topology


def last_buckets(table: pa.Table, channels: pa.Array) -> pa.Array:
    """Each channel's last bucket in a bucket table, in the order of ``channels``."""
    last = table.group_by("channel").aggregate([("bucket", "max")])
    at = pc.index_in(channels, value_set=last.column("channel"))
    return last.column("bucket_max").combine_chunks().take(at)


def new_run(strategies: int) -> Run:
    return Run([[] for _ in range(strategies)], [[] for _ in range(strategies)], [0] * strategies)


def compute_timelines(
    df: DataFrame,
    plan: WatermarkPlan,
    strategies: Sequence[WatermarkStrategy] | None = None,
    *,
    stats: bool = False,
    channel_watermarks: bool = False,
    emissions: bool = False,
    probe: LateProbe | None = None,
) -> list[Timeline]:
    """Stages 1-2: the timelines of ``df`` under each strategy (in ticks; default the
    plan's), from one aggregation pass over three columns and one builder pass.

    Args:
        df: the input.
        plan: the resolved plan.
        strategies: several strategies to run in the same pass (``analyze_bounds``).
        stats: aggregate ``min_ts`` and ``rows`` per bucket too (the event-time range
            and the late probe need them).
        channel_watermarks: keep each ``(channel, bucket)``'s channel watermark
            (``assign_watermarks``); from a large table, as a cached DataFrame.
        emissions: keep every channel's own output stream (the report): all of it when
            the table comes to the driver, compacted for the report's views when it
            stays on the executors, unless a generator emits at every grid time
            (processing-time lag). Off unless asked for: even compacted, it grows with
            the channels and their idle transitions (one per quiet spell of a sparse
            channel: about one per record of 10,000 partitions over a day).
        probe: counts the records a window may find late (see :data:`LateProbe`).

    Raises:
        InvalidInputError: arrival times too close to the ends of the ``int64`` range
            for the emission grid (naming the arrival column).
    """
    from pyspark import StorageLevel

    chosen = list(strategies) if strategies is not None else [plan.strategy]
    if record_driven(plan):
        from floodmark.spark.per_channel import per_channel_timeline

        return [per_channel_timeline(df, plan, records=channel_watermarks, emissions=emissions)]
    stats = stats or probe is not None
    # A generator that emits at every grid time (processing-time lag) has channel
    # streams of channels x grid rows: those are left out.
    keep = emissions and all(s.kind not in EVERY_GRID_KINDS for s in chosen)
    # The records path is a choice for speed: executors without floodmark (which its
    # tasks need) take the aggregation, which stays Spark SQL while its table is small.
    if (
        (not channel_watermarks or channel_pass.takes(plan, df))
        and not reduces(df, plan)
        and floodmark_on_executors(df.sparkSession)
    ):
        records = placeable(df, plan, "max_ts")
        found = on_executors(records, plan, chosen, False, keep, probe, records=True, stats=stats)
        tl = found[0]
        if channel_watermarks and tl.first_bucket is not None:
            tl.records = channel_pass.with_channel_watermarks(
                df, plan, tl.channels, tl.first_bucket
            )
        return found
    agg = bucket_aggregate(df, plan, stats)
    agg.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        head = agg.limit(MAX_DRIVER_BUCKET_ROWS + 1).toArrow()
        if head.num_rows <= MAX_DRIVER_BUCKET_ROWS:
            return on_driver(head, plan, chosen, keep, probe)
        return on_executors(agg, plan, chosen, channel_watermarks, keep, probe)
    finally:
        agg.unpersist()


def record_driven(plan: WatermarkPlan) -> bool:
    """Whether the plan's generator emits on records (it cannot take bucket rows)."""
    return plan.strategy.kind not in PERIODIC_KINDS


def compute_timeline(
    df: DataFrame,
    plan: WatermarkPlan,
    *,
    stats: bool = False,
    channel_watermarks: bool = False,
    emissions: bool = False,
    probe: LateProbe | None = None,
) -> Timeline:
    """:func:`compute_timelines` for the plan's own strategy."""
    return compute_timelines(
        df,
        plan,
        stats=stats,
        channel_watermarks=channel_watermarks,
        emissions=emissions,
        probe=probe,
    )[0]


def input_error(plan: WatermarkPlan, column: str, text: str) -> InvalidInputError:
    """The builder's error about its ``column`` (rendered as ``text``), naming the user's
    column: the builder calls the arrivals ``arrival``."""
    name = plan.arrival.name if column == "arrival" else column
    return InvalidInputError(name, text.split("`: ", 1)[-1])


def on_driver(
    table: pa.Table,
    plan: WatermarkPlan,
    strategies: Sequence[WatermarkStrategy],
    keep_emissions: bool,
    probe: LateProbe | None,
) -> list[Timeline]:
    """Stage 2 on the driver, over a small bucket table."""
    table = table.sort_by([("bucket", "ascending"), ("channel", "ascending")])
    channels, _ = channel_index(table.column("channel"))
    topology = topology_of(plan, channels, last_buckets(table, channels))
    run = new_run(len(strategies))
    try:
        rows = list(
            run_builders(
                iter(table.combine_chunks().to_batches(max_chunksize=DRIVER_CHUNK_ROWS)),
                channels,
                strategies,
                plan.interval,
                run,
                keep_emissions=keep_emissions,
                probe=probe,
                topology=topology,
            )
        )
    except InvalidInputError as err:
        raise input_error(plan, err.column, str(err)) from None
    buckets = (
        pa.Table.from_batches(rows)
        if rows
        else table.append_column("channel_watermark", pa.array([], pa.int64())).append_column(
            "watermark", pa.array([], pa.int64())
        )
    ).drop_columns(["arrival", "max_ts"])
    return [
        timeline_of(plan, run, j, channels, probe, buckets=buckets if j == 0 else None)
        for j in range(len(strategies))
    ]


def timeline_of(
    plan: WatermarkPlan,
    run: Run,
    j: int,
    channels: pa.Array,
    probe: LateProbe | None,
    *,
    buckets: pa.Table | None = None,
    bucket_frame: DataFrame | None = None,
) -> Timeline:
    """The :class:`Timeline` of strategy ``j`` of a run."""
    parts = [b for b in run.timelines[j] if b.num_rows]
    tl = pa.Table.from_batches(parts) if parts else EMPTY_TIMELINE
    table = pa.table(
        {
            "time": tl.column("time"),
            "watermark": tl.column("watermark"),
            "status": tl.column("status"),
            "min_channel": channels.take(tl.column("min_channel")),
            "advance": tl.column("advance"),
        }
    )
    emitted = None
    if run.emissions[j]:
        em = pa.Table.from_batches(run.emissions[j])
        emitted = pa.table(
            {
                "channel": channels.take(em.column("channel")),
                "time": em.column("time"),
                "kind": em.column("kind"),
                "watermark": em.column("watermark"),
            }
        )
    event_range = None
    if run.low is not None and run.high is not None:
        event_range = (run.low, run.high)
    return Timeline(
        plan,
        table,
        channels,
        run.first,
        run.last,
        run.rows if run.counted else None,
        event_range=event_range,
        maybe_late=run.maybe_late[j] if probe is not None else None,
        buckets=buckets,
        bucket_frame=bucket_frame,
        emissions=emitted,
    )


EMPTY_TIMELINE = pa.table(
    {
        "time": pa.array([], pa.int64()),
        "watermark": pa.array([], pa.int64()),
        "status": pa.array([], pa.string()),
        "min_channel": pa.array([], pa.int64()),
        "advance": pa.array([], pa.bool_()),
    }
)


def on_executors(
    agg: DataFrame,
    plan: WatermarkPlan,
    strategies: Sequence[WatermarkStrategy],
    channel_watermarks: bool,
    keep_emissions: bool,
    probe: LateProbe | None,
    *,
    records: bool = False,
    stats: bool = False,
) -> list[Timeline]:
    """Stage 2 in one Spark task, in arrival order, over a large (cached) bucket table,
    or, with ``records``, over the records themselves (:func:`placeable`'s
    ``channel``, ``arrival``, ``max_ts``; ``stats``: with the statistics a bucket row
    carries for the late probe and the event-time range):
    the driver gets the channel list, the timelines, the run's numbers and, with
    ``keep_emissions``, the channels' emissions compacted; the per-(channel, bucket)
    channel watermarks (from a bucket table only) stay on the executors."""
    from pyspark.sql import functions as F

    from floodmark.report.partition_views import bin_edges, compact_emissions

    require_floodmark(agg.sparkSession)
    if not records:
        ranges = agg.groupBy("channel").agg(
            F.min("bucket").alias("lo"), F.max("bucket").alias("hi")
        )
    else:
        ranges = (
            agg.groupBy("channel")
            .agg(F.min("arrival").alias("lo"), F.max("arrival").alias("hi"))
            .select("channel", plan.bucket("lo").alias("lo"), plan.bucket("hi").alias("hi"))
        )
    summary = ranges.toArrow()
    channels, _ = channel_index(summary.column("channel"))
    at = pc.index_in(channels, value_set=summary.column("channel"))
    topology = topology_of(plan, channels, summary.column("hi").combine_chunks().take(at))
    interval, chosen = plan.interval, list(strategies)
    first, last = pc.min(summary.column("lo")).as_py(), pc.max(summary.column("hi")).as_py()
    # The report's bins need only lie in the long range: the builder refuses grid times
    # outside it (naming the arrival column), in the task.
    low, high = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)
    edges = bin_edges(max(first * interval, low), min(last * interval, high))

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        run = new_run(len(chosen))
        caught: list[Exception] = []
        with task_errors(caught):
            for rows in run_builders(
                as_bucket_rows(batches) if records and stats else batches,
                channels,
                chosen,
                interval,
                run,
                keep_emissions=keep_emissions,
                probe=probe,
                topology=topology,
            ):
                if channel_watermarks:
                    kept = rows.select(["channel", "bucket", "channel_watermark", "watermark"])
                    yield from pack("buckets", kept)
                yield from drain(run, edges)
        if caught:  # raised by the builder
            yield from pack_error(caught[0])
            return
        yield from drain(run, edges)
        numbers = [
            {"strategy": j, **run.numbers(), "maybe_late": n} for j, n in enumerate(run.maybe_late)
        ]
        yield from pack("stats", pa.RecordBatch.from_pylist(numbers, schema=STATS_SCHEMA))

    if not records:
        columns = ["channel", "bucket", "arrival", "max_ts"]
        columns += [c for c in ("min_ts", "rows") if c in agg.columns]
        # By bucket alone: the builder takes a bucket's rows in any channel order, and
        # one integral sort key lets Spark radix-sort (1.8-2.1 s against 4.5-4.8 s for
        # the 7.7M bucket rows of 1,000 partitions over an hour).
        ordered = agg.select(*columns).coalesce(1).sortWithinPartitions("bucket")
    else:  # arrival order is bucket order
        ordered = one_partition(agg.select("channel", "arrival", "max_ts"))
        ordered = ordered.sortWithinPartitions("arrival")
    out = ordered.mapInArrow(task, packed_schema())
    if channel_watermarks:
        out = out.persist()
    try:
        run = gather(plan, out.where(~only("buckets")).toArrow(), len(chosen))
    except BaseException:  # the task's refusal (or Spark's failure): nothing stays cached
        out.unpersist()
        raise
    for j, parts in enumerate(run.emissions):  # compacted per chunk: once more, whole
        if parts:
            run.emissions[j] = compact_emissions(pa.Table.from_batches(parts), edges).to_batches()
    frame = unpacked(out, "buckets", bucket_schema(agg)) if channel_watermarks else None
    result = [
        timeline_of(plan, run, j, channels, probe, bucket_frame=frame if j == 0 else None)
        for j in range(len(chosen))
    ]
    if channel_watermarks:
        result[0].cached.append(out)
    return result


def as_bucket_rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Records (``channel``, ``arrival``, ``max_ts``) with the statistics a bucket row
    carries: each is one record (``rows``) whose smallest event time is its own."""
    for batch in batches:
        ones = pa.array(np.ones(batch.num_rows, np.int64))
        yield batch.append_column("min_ts", batch.column("max_ts")).append_column("rows", ones)


def gather(plan: WatermarkPlan, packed: pa.Table, strategies: int) -> Run:
    """The run :func:`on_executors`' task sent back (``packed``: its timelines,
    emissions and numbers, no buckets); raises the error it reported, if any."""
    run = new_run(strategies)
    for kind, batch in unpack_local(packed):
        if kind == "error":
            raise_packed(plan, batch)
        if kind in ("timeline", "emissions"):
            j = batch.column("strategy")[0].as_py()
            parts = run.timelines if kind == "timeline" else run.emissions
            parts[j].append(batch.drop_columns(["strategy"]))
        elif kind == "stats":
            for n in batch.to_pylist():
                j = n.pop("strategy")
                run.maybe_late[j] = n.pop("maybe_late") or 0
                for name, value in n.items():
                    setattr(run, name, value)
                if n["rows"] is None:
                    run.rows, run.counted = 0, False
    return run


def pack_error(err: Exception) -> Iterator[pa.RecordBatch]:
    """A task's error, packed for the driver to raise (:func:`raise_packed`): a task
    failure would be retried first (on a cluster, four times, each running the pass
    again), and reach the caller as a worker's traceback. floodmark's errors go as
    their column or parameter and text; an exception a user generator's own code
    raised goes whole (pickled, with its traceback on the executor)."""
    user = user_generator_error(err)
    error = {
        "column": getattr(err, "column", None),
        "parameter": getattr(err, "parameter", None),
        "message": f"{type(err).__name__}: {err}" if user else str(err),
        "raised_by": getattr(err, _core.RAISED_BY) if user else None,
        "pickled": _pickled(err) if user else None,
        "trace": "".join(traceback.format_exception(err)) if user else None,
    }
    yield from pack("error", pa.RecordBatch.from_pylist([error]))


#: floodmark's refusals a task sends back by their column or parameter.
_REFUSALS = (InvalidInputError, InvalidParameterError)


@contextlib.contextmanager
def task_errors(caught: list[Exception]) -> Iterator[None]:
    """Within this block (a task's work), the errors the task sends back to the driver
    (:func:`pack_error`) are caught into ``caught``: floodmark's refusals and a user
    generator's own exceptions. Anything else fails the task (a bug)."""
    try:
        yield
    except Exception as err:
        if not (isinstance(err, _REFUSALS) or user_generator_error(err)):
            raise
        caught.append(err)


def user_generator_error(err: BaseException) -> bool:
    """Whether ``err`` is a user generator's own exception (the engine marks what its
    methods raise), not floodmark's refusal of what it emitted."""
    return not isinstance(err, _REFUSALS) and isinstance(getattr(err, _core.RAISED_BY, None), str)


def _pickled(err: Exception) -> bytes | None:
    from pyspark import cloudpickle

    try:
        return bytes(cloudpickle.dumps(err))  # type: ignore[no-untyped-call]
    except Exception:  # an exception holding what does not pickle: its text goes
        return None


def raise_packed(plan: WatermarkPlan, batch: pa.RecordBatch) -> NoReturn:
    """Raises the error a task packed (:func:`pack_error`): floodmark's naming the
    user's column; a user generator's own exception as it was raised (a note gives its
    traceback on the executor), as in the engine run in-process."""
    error = batch.to_pylist()[0]
    if error.get("raised_by") is not None:
        raised: BaseException | None = None
        if error["pickled"] is not None:
            with contextlib.suppress(Exception):  # its class not importable here
                raised = pickle.loads(error["pickled"])
        if not isinstance(raised, BaseException):
            raised = FloodmarkError(f"the user generator raised {error['message']}")
        note = (
            f"raised by the user generator's {error['raised_by']} in a Spark task; "
            f"its traceback there:\n{error['trace']}"
        )
        add_note = getattr(raised, "add_note", None)  # Python 3.11+
        if add_note is None:
            raise raised from FloodmarkError(note)
        add_note(note)
        raise raised
    if error["parameter"] is not None:
        text = error["message"].split("`: ", 1)[-1]
        raise InvalidParameterError(error["parameter"], text)
    raise input_error(plan, error["column"], error["message"])


def drain(run: Run, edges: np.ndarray) -> Iterator[pa.RecordBatch]:
    """The timeline rows gathered so far, and the channels' emissions compacted over the
    bins ``edges``, packed (tagged with their strategy)."""
    from floodmark.report.partition_views import compact_emissions

    for kind, gathered in (("timeline", run.timelines), ("emissions", run.emissions)):
        for j, parts in enumerate(gathered):
            batches = [b for b in parts if b.num_rows]
            if kind == "emissions" and batches:
                batches = compact_emissions(pa.Table.from_batches(batches), edges).to_batches()
            for batch in batches:
                tag = pa.array(np.full(batch.num_rows, j, np.int64))
                yield from pack(kind, batch.append_column("strategy", tag))
            parts.clear()


STATS_SCHEMA = pa.schema(
    [
        ("strategy", pa.int64()),
        ("first", pa.int64()),
        ("last", pa.int64()),
        ("rows", pa.int64()),
        ("low", pa.int64()),
        ("high", pa.int64()),
        ("maybe_late", pa.int64()),
    ]
)


def bucket_schema(agg: DataFrame) -> Any:
    """The Spark schema of the per-(channel, bucket) watermarks."""
    from pyspark.sql.types import LongType, StructField, StructType

    return StructType(
        [
            StructField("channel", agg.schema["channel"].dataType),
            StructField("bucket", LongType()),
            StructField("channel_watermark", LongType()),
            StructField("watermark", LongType()),
        ]
    )


__all__ = [
    "MAX_DRIVER_BUCKET_ROWS",
    "Timeline",
    "bucket_aggregate",
    "compute_timeline",
    "compute_timelines",
]
