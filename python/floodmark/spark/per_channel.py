"""Stages 1-2 for the generators that emit on records: punctuated generators (a
watermark carried by a record) and user Python generators.

Why another route. The periodic generators' emissions depend only on the largest event
time per bucket of the emission grid, so Spark reduces the records to per-(channel,
bucket) rows first (:mod:`floodmark.spark.timeline`). A generator that emits on records
must see every record, in order. So the records go to the executors grouped by channel
(one shuffle of four columns: channel, arrival, event time, marker), sorted by arrival
(then event time and marker),
and each channel runs its generator through the engine's driver (:func:`floodmark.drive`,
fed chunk by chunk as Spark hands the batches over: the grid of a chunk stops before the
bucket of the next chunk's first arrival, and records of one arrival are never split, so
chunks give the output of the whole). Each channel's output stream comes back, and the
valve merges the streams (:class:`floodmark.timeline.TimelineBuilder` for emissions): on
the driver when they are few, in one Spark task otherwise. ``assign_watermarks`` also
needs each record's own channel watermark: then every column of the records travels
through that pass and comes back with it.

The combined watermark of such a generator changes at records' arrival times, not on a
grid: a record reads the last change strictly before its arrival from the timeline
itself (its advances shipped to the executors, at most
:data:`floodmark.spark.lookup.MAX_SHIPPED_TIMELINE`), and the
window stage runs the keyed operator with the timeline's advances.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from floodmark.exceptions import InvalidInputError, InvalidParameterError, SchemaError
from floodmark.spark.batches import runs
from floodmark.spark.columns import not_arrow, quote
from floodmark.spark.executors import require_floodmark
from floodmark.spark.packed import only, pack, packed_schema, unpack_local, unpacked
from floodmark.spark.plan import WatermarkPlan, valid_rows
from floodmark.spark.timeline import pack_error, raise_packed, task_errors
from floodmark.time import I64_MIN
from floodmark.timeline import TimelineBuilder, channel_index

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from floodmark.spark.timeline import Timeline

#: The per-channel streams come to the driver when they have at most this many rows.
MAX_DRIVER_EMISSIONS = 1 << 20
#: The most timeline rows shipped to the executors for records to read their watermark.
_CH, _ARR, _TS, _MARK = "__fm_pc_channel", "__fm_pc_arrival", "__fm_pc_ts", "__fm_pc_marker"
EMISSIONS_SCHEMA = pa.schema(
    [
        ("channel", pa.int64()),
        ("seq", pa.int64()),
        ("time", pa.int64()),
        ("kind", pa.string()),
        ("watermark", pa.int64()),
    ]
)


class ChannelFeeder:
    """One channel's records through the driver, chunk after chunk: each chunk's grid
    stops before the bucket of the next chunk's first arrival, and the records of the
    last bucket seen wait for the next chunk (no grid time may fall between them and
    the records that follow in the same bucket, and a record must not see the
    emissions of records of its own arrival)."""

    def __init__(self, plan: WatermarkPlan, start: int, until: int, schema: pa.Schema) -> None:
        self.strategy, self.interval = plan.strategy, plan.interval
        self.generator = plan.strategy.create_generator()
        self.start, self.until = start, until
        self.schema = schema
        self.held: pa.Table | None = None
        self.seq = 0

    def feed(
        self, rows: pa.Table | None, *, last: bool
    ) -> tuple[pa.Table | None, pa.RecordBatch | None]:
        """``(rows with channel_watermark, emissions)`` of what can be driven now
        (``rows``: more records of the channel, in arrival order; ``last``: the end)."""
        from floodmark.watermarks import drive

        fresh = rows if rows is not None else self.schema.empty_table()
        held, self.held = self.held, None
        rows = fresh if held is None else pa.concat_tables([held, fresh])
        until = self.until
        if rows.num_rows == 0:
            if not last:
                return None, None
        elif not last:
            # The last bucket waits: its grid time comes after records still to come.
            # Only the fresh rows are searched (the held ones, one bucket, are all before
            # or all in the last one), so a bucket spread over many chunks costs each
            # chunk its own rows.
            if fresh.num_rows == 0:
                self.held = rows
                return None, None
            arrivals = fresh.column(_ARR).to_numpy(zero_copy_only=False)
            before = grid_before(int(arrivals[-1]), self.interval)
            kept = 0
            if held is not None and held.column(_ARR)[0].as_py() <= before:
                kept = held.num_rows
            found = int(np.searchsorted(arrivals, before, "right"))
            cut = 0 if before < I64_MIN else kept + found
            self.held, rows = rows.slice(cut), rows.slice(0, cut)
            if rows.num_rows == 0:
                return None, None
            until = before  # at or after start: the held bucket's grid time was not run
        until = max(until, self.start)
        marker = rows.column(_MARK) if self.strategy.kind == "punctuated" else None
        res = drive(
            self.strategy,
            rows.column(_TS),
            rows.column(_ARR),
            emit_interval=self.interval,
            start=self.start,
            until=until,
            marker=marker,
            generator=self.generator,
        )
        self.start = until + self.interval
        em = res.emissions
        seq = pa.array(np.arange(self.seq, self.seq + em.num_rows, dtype=np.int64))
        self.seq += em.num_rows
        return rows.append_column("channel_watermark", res.record_watermark), pa.record_batch(
            [seq, *em.columns], names=["seq", *em.schema.names]
        )


def grid_before(arrival: int, interval: int) -> int:
    """The last grid time before ``arrival``'s own (the first at or after it): the
    grid time a chunk whose next record arrives at ``arrival`` is driven to."""
    return (-((-arrival) // interval) - 1) * interval


def channel_runner(
    plan: WatermarkPlan,
    channels: pa.Array,
    start: int,
    until: int,
    names: Sequence[str],
    keep_records: bool,
) -> Any:
    """The function each partition of the per-channel pass runs (channels contiguous,
    each in arrival order): every channel's stream (and its records with their channel
    watermark), packed."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        feeder: ChannelFeeder | None = None
        current, index, count = None, 0, 0

        def emit(rows: pa.Table | None, em: pa.RecordBatch | None) -> Iterator[pa.RecordBatch]:
            nonlocal count
            if em is not None and em.num_rows:
                count += em.num_rows
                channel = pa.array(np.full(em.num_rows, index, np.int64))
                yield from pack("emissions", em.add_column(0, "channel", channel))
            if keep_records and rows is not None and rows.num_rows:
                for batch in rows.drop_columns([_CH, _ARR, _TS, _MARK]).to_batches():
                    yield from pack("records", batch)

        caught: list[Exception] = []  # e.g. a user generator's watermark that is no
        with task_errors(caught):  # int64, or its own exception
            for raw in batches:
                table = pa.Table.from_batches([raw.rename_columns(names)])
                values = table.column(_CH).combine_chunks()
                for lo, hi in runs(values):
                    value = values[lo].as_py()
                    if feeder is not None and value != current:
                        yield from emit(*feeder.feed(None, last=True))
                        feeder = None
                    if feeder is None:
                        current = value
                        at = pc.index_in(pa.array([value], channels.type), value_set=channels)
                        index = at[0].as_py()
                        feeder = ChannelFeeder(plan, start, until, table.schema)
                    yield from emit(*feeder.feed(table.slice(lo, hi - lo), last=False))
            if feeder is not None:
                yield from emit(*feeder.feed(None, last=True))
        if caught:
            yield from pack_error(caught[0])
            return
        yield from pack("stats", pa.RecordBatch.from_pylist([{"emissions": count}]))

    return run


def summary(df: DataFrame, plan: WatermarkPlan) -> pa.Table:
    """One row per channel: ``channel``, first and last arrival, records, event-time
    range (a small job over the input)."""
    from pyspark.sql import functions as F

    arrival, ts = plan.arrival.ticks(), plan.event_time.ticks()
    return (
        df.where(valid_rows(plan))
        .groupBy(F.col(quote(plan.channel)).alias("channel"))
        .agg(
            F.min(arrival).alias("first"),
            F.max(arrival).alias("last"),
            F.count(F.lit(1)).alias("rows"),
            F.min(ts).alias("low"),
            F.max(ts).alias("high"),
        )
        .toArrow()
    )


def check_on_grid(plan: WatermarkPlan, start: int, until: int) -> None:
    """Refuses, on the driver, arrivals (first ``start``, last ``until``) that the
    emission grid cannot place (within two intervals of the ``int64`` range's ends):
    the periodic route's rule, applied by its builder to the two.

    Raises:
        InvalidInputError: naming the arrival column.
    """
    from floodmark.spark.timeline import input_error
    from floodmark.strategy import WatermarkStrategy

    probe = TimelineBuilder(
        WatermarkStrategy.for_monotonous_timestamps(), 1, emit_interval=plan.interval
    )
    try:
        probe.push([0, 0], [start, until], [0, 0])
    except InvalidInputError as err:
        raise input_error(plan, err.column or "arrival", str(err)) from None


#: What a Python worker's traceback holds when it could not unpickle the generator's
#: class or factory: the module is not importable there, or lacks the name.
_UNPICKLING = re.compile(
    r"(ModuleNotFoundError: No module named [^\n]*|AttributeError: Can't get attribute [^\n]*)"
)


@contextmanager
def unpicklable_on_executors(plan: WatermarkPlan, out: DataFrame) -> Iterator[None]:
    """Name ``strategy`` when the executors cannot unpickle a user generator (its class
    in a module only the driver imports, as a script's neighbour on a cluster), instead
    of the worker's traceback after Spark's retries.

    Raises:
        InvalidParameterError: naming ``strategy``, with what to do.
    """
    from pyspark.errors import PythonException

    try:
        yield
    except PythonException as err:
        found = _UNPICKLING.search(str(err))
        if plan.strategy.kind != "python" or found is None or "loads" not in str(err):
            raise
        out.unpersist()
        raise InvalidParameterError(
            "strategy",
            f"the executors cannot unpickle the user generator ({found.group(1).strip()}): "
            "its module must be importable there (SparkContext.addPyFile, "
            "spark.submit.pyFiles, installed on the nodes), or pickled by value "
            "(cloudpickle.register_pickle_by_value(module))",
        ) from None


def check_picklable(plan: WatermarkPlan) -> None:
    """Refuses, before any job, a strategy the executors cannot receive (a user
    generator's factory holding a lock or an open file, say).

    Raises:
        InvalidParameterError: naming ``strategy``.
    """
    from pyspark import cloudpickle

    try:
        cloudpickle.dumps(plan.strategy)  # type: ignore[no-untyped-call]
    except Exception as err:  # pickling raises many kinds (TypeError, PicklingError...)
        raise InvalidParameterError(
            "strategy",
            f"its generator factory cannot be sent to the executors ({err}); give one that "
            "pickles: a module-level class or function, holding no lock or open file",
        ) from None


def per_channel_timeline(
    df: DataFrame, plan: WatermarkPlan, *, records: bool, emissions: bool = False
) -> Timeline:
    """Stages 1-2 for a generator that emits on records (see the module docstring);
    with ``records``, the timeline keeps the records with their channel watermark;
    with ``emissions``, every channel's own output (compacted for the report's views
    when the valve runs on the executors, as :func:`floodmark.spark.timeline.on_executors`
    does; all of it when few come to the driver, asked for or not)."""
    from pyspark.sql import functions as F

    from floodmark.spark.timeline import Run, new_run, timeline_of
    from floodmark.spark.windows.keyed import default_partitions

    odd = not_arrow(df) if records else None
    if odd is not None:  # every column travels through the generators' pass
        raise SchemaError(
            odd,
            f"a {df.schema[odd].dataType.simpleString()} column cannot go through Arrow to "
            "the generator's pass, which carries every column with a punctuated or user "
            "generator; cast it (e.g. to a string) or drop it first",
        )
    check_picklable(plan)
    table = summary(df, plan)
    channels, _ = channel_index(table.column("channel"))
    run: Run = new_run(1)
    if table.num_rows == 0:
        return timeline_of(plan, run, 0, channels, None)
    start, until = pc.min(table.column("first")).as_py(), pc.max(table.column("last")).as_py()
    interval = plan.interval
    check_on_grid(plan, start, until)
    run.first, run.last = -((-start) // interval), -((-until) // interval)
    # Each channel is driven over the whole grid, chunk by chunk (no chunk is over the
    # bound): the bound is checked once, here, before the generators' pass.
    plan.strategy.create_generator().check_grid_span(run.first, run.last)
    run.rows = int(pc.sum(table.column("rows")).as_py())
    run.low, run.high = pc.min(table.column("low")).as_py(), pc.max(table.column("high")).as_py()
    marker = plan.marker.ticks() if plan.marker is not None else F.lit(None).cast("bigint")
    kept = [F.col(quote(c)) for c in df.columns] if records else []
    sent = df.where(valid_rows(plan)).select(
        F.col(quote(plan.channel)).alias(_CH),
        plan.arrival.ticks().alias(_ARR),
        plan.event_time.ticks().alias(_TS),
        marker.alias(_MARK),
        *kept,
    )
    # A channel's records tied in arrival and event time reach its generator in marker
    # order (nulls first): its own emissions then do not depend on the shuffle's order.
    ordered = sent.repartition(default_partitions(df.sparkSession), _CH).sortWithinPartitions(
        _CH, _ARR, _TS, _MARK
    )
    names = ordered.columns
    runner = channel_runner(plan, channels, start, until, names, records)
    positional = ordered.toDF(*[f"__fm_c{i}" for i in range(len(names))])
    require_floodmark(df.sparkSession)
    out = positional.mapInArrow(runner, packed_schema()).persist()
    counted = 0
    with unpicklable_on_executors(plan, out):
        reports = out.where(only("stats") | only("error")).toArrow()
    for kind, b in unpack_local(reports):
        if kind == "error":
            out.unpersist()
            raise_packed(plan, b)
        counted += b.column("emissions")[0].as_py()
    if counted <= MAX_DRIVER_EMISSIONS:  # few: the valve on the driver
        parts = [b for _, b in unpack_local(out.where(only("emissions")).toArrow())]
        streams = pa.Table.from_batches(parts, schema=EMISSIONS_SCHEMA)
        order = [("time", "ascending"), ("channel", "ascending"), ("seq", "ascending")]
        builder = TimelineBuilder.for_emissions(len(channels), keep_emissions=True)
        builder.push_emissions(streams.sort_by(order).drop_columns(["seq"]))
        builder.finish()
        run.timelines[0].append(builder.take_timeline())
        run.emissions[0].append(builder.take_emissions())
    else:  # many: the valve in one task, over the streams sorted by time
        from floodmark.report.partition_views import bin_edges, compact_emissions

        edges = bin_edges(run.first * interval, run.last * interval) if emissions else None
        timeline, kept = merge_on_executors(out, channels, edges)
        run.timelines[0].append(timeline)
        if kept:  # compacted per chunk: once more, whole
            assert edges is not None
            run.emissions[0] = compact_emissions(pa.Table.from_batches(kept), edges).to_batches()
    tl = timeline_of(plan, run, 0, channels, None)
    tl.record_driven = True
    if records:
        tl.records = unpacked(out, "records", records_schema(df))
    tl.cached.append(out)
    return tl


def merge_on_executors(
    out: DataFrame, channels: pa.Array, edges: np.ndarray | None = None
) -> tuple[pa.RecordBatch, list[pa.RecordBatch]]:
    """The valve over many channel streams, in one Spark task: the timeline, and with
    the report's bin ``edges`` the channels' emissions compacted to them."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType(
        [
            StructField("channel", LongType()),
            StructField("seq", LongType()),
            StructField("time", LongType()),
            StructField("kind", StringType()),
            StructField("watermark", LongType()),
        ]
    )
    n = len(channels)

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from floodmark.report.partition_views import compact_emissions

        builder = TimelineBuilder.for_emissions(n, keep_emissions=edges is not None)

        def drained() -> Iterator[pa.RecordBatch]:
            part = builder.take_timeline()
            if part.num_rows:
                yield from pack("timeline", part)
            if edges is not None:
                for kept in compact_emissions(builder.take_emissions(), edges).to_batches():
                    yield from pack("emissions", kept)

        for b in batches:
            builder.push_emissions(b.drop_columns(["seq"]))
            yield from drained()
        builder.finish()
        yield from drained()

    streams = unpacked(out, "emissions", schema)
    merged = (
        streams.coalesce(1)
        .sortWithinPartitions("time", "channel", "seq")
        .mapInArrow(task, packed_schema())
        .toArrow()
    )
    found = list(unpack_local(merged))
    parts = [b for kind, b in found if kind == "timeline"]
    kept = [b for kind, b in found if kind == "emissions"]
    if not parts:  # the combined watermark never changed (pack() sends no empty batch)
        return TimelineBuilder.for_emissions(len(channels)).take_timeline(), kept
    return pa.concat_batches(parts), kept


def records_schema(df: DataFrame) -> Any:
    """``df``'s schema plus ``channel_watermark`` (ticks)."""
    from pyspark.sql.types import LongType, StructField, StructType

    return StructType([*df.schema.fields, StructField("channel_watermark", LongType())])


__all__ = [
    "MAX_DRIVER_EMISSIONS",
    "per_channel_timeline",
]
