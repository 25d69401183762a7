"""``floodmark demo --live``: floodmark inside a running Structured Streaming query.

A simulated Kafka broker (librdkafka's mock cluster,
:class:`floodmark.spark.sources.MockKafka`) receives a generated stream: eight
partitions, partition 3 lagging 30 s behind the others, partition 6 going quiet for
50 s and coming back with a backlog, a trickle of very late records. It is produced
:data:`ROUND_MS` of broker time at a time (the record timestamps are the simulated
broker clock). After each round two live queries read the topic to its latest offsets,
one micro-batch each, as queries with a 10 s processing-time trigger would:

* floodmark's: :class:`floodmark.spark.streaming.StreamingWindows` in
  ``foreachBatch``, with the batch demo's pipeline (per-partition watermarks, 5 s
  bound, 30 s idle timeout, 10 s tumbling windows of ``count`` and ``sum``), writing
  ``results/``, ``late/``, ``dropped/``, ``timeline/`` and ``emissions/`` under the
  output folder;
* Spark's own: ``withWatermark("ts", "5 seconds")`` with the same 10 s windows. Its
  ``numRowsDroppedByWatermark`` counts the rows its late filter removes after the
  partial aggregation; grouping by the record as well (partition and offset) makes
  every such row one record, without changing which records are dropped (the filter
  reads only the window's end). Spark runs no extra no-data batch between rounds
  (``spark.sql.streaming.noDataMicroBatches.enabled=false``), as with a trigger that
  always finds new records.

Each micro-batch prints one line: the broker time read up to, floodmark's combined
watermark at its frontier, the partition holding it back, the idle ones, floodmark's
late records so far and the records Spark's own watermark dropped so far. The report is
then drawn from the live query's outputs, over the records up to its final frontier
(the last second of arrivals waits in floodmark's state for a next batch); its
``Spark drops`` column is :func:`floodmark.spark.spark_global_watermark_late` over the
same records, the model the live Spark query's total is checked against in the tests.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from floodmark.cli.commands import (
    DEMO_SPEC,
    QUIET_NOTE,
    add_spark_drops,
    firing_table,
    labelled,
    partition_counts,
    print_summary,
    spark_errors,
    start_spark,
    write_run_report,
)
from floodmark.cli.errors import UsageError
from floodmark.cli.outputs import OutputFolder
from floodmark.datagen import StreamSpec
from floodmark.progress import Progress
from floodmark.time import I64_MIN, format_duration

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from floodmark.report import ReportInputs
    from floodmark.spark.sources import MockKafka

#: Broker time produced per round: one micro-batch of each query (Spark's trigger).
ROUND_MS = 10_000
#: The topic the demo produces to, and its partitions.
TOPIC, PARTITIONS = "events", 8
#: How far the lagging partition's records arrive behind the others'.
LAG_MS = 30_000
#: The rows of ``floodmark demo --live`` without ``--rows``.
DEFAULT_LIVE_ROWS = 100_000
#: At most: the simulated broker keeps the last 5 MB of each partition (about 250,000
#: of the demo's records; its busiest partition holds an eighth of them).
MAX_LIVE_ROWS = 1_500_000


#: The columns of the lines: floodmark's batch, the broker time read up to, the combined
#: watermark at floodmark's frontier and the partition holding it back, the idle
#: partitions, floodmark's late records so far, Spark's drops so far, floodmark's
#: seconds for the batch.
LINE = (
    "{batch:>5}  {broker:<8}  {watermark:<12}  {holder:<7}  {idle:<5}  {late:>5}  "
    "{spark:>13}  {seconds:>4}"
)
HEADER = LINE.format(
    batch="batch",
    broker="broker",
    watermark="watermark",
    holder="held by",
    idle="idle",
    late="late",
    spark="Spark dropped",
    seconds="s",
)


def live_stream(rows: int) -> StreamSpec:
    """The live demo's stream: eight partitions over 150 s of event time, partition 3
    lagging 30 s, partition 6 silent for 50 s from 50 s on (then its backlog), 0.3 %
    of the records 30 s late."""
    return StreamSpec(
        rows=rows,
        partitions=PARTITIONS,
        keys=200,
        duration_ms=150_000,
        lagging_partition=3,
        lag_ms=LAG_MS,
        quiet_partition=6,
        quiet_from_ms=50_000,
        quiet_for_ms=50_000,
        quiet_is_silent=True,
        very_late_fraction=0.003,
        very_late_ms=30_000,
    )


def live_table(rows: int) -> pa.Table:
    """:func:`live_stream`'s records from :data:`LAG_MS` into the stream on (the query
    starts once every partition sends), ordered by arrival."""
    import pyarrow.compute as pc

    from floodmark.datagen import EPOCH_MS, generate

    table = generate(live_stream(rows)).drop(["id"])
    return table.filter(pc.greater_equal(table.column("arrival"), EPOCH_MS + LAG_MS))


def events(raw: DataFrame) -> DataFrame:
    """Spark's Kafka rows to the demo's columns: the JSON value's ``key``,
    ``event_time`` (epoch ms) and ``value``; the ``partition`` and ``offset``; the
    broker timestamp as ``arrival`` (epoch ms)."""
    from pyspark.sql import functions as F

    value = F.from_json(
        F.col("value").cast("string"), "key bigint, event_time bigint, value bigint"
    )
    return raw.select(
        value.alias("v"),
        F.col("partition"),
        F.col("offset"),
        F.unix_millis(F.col("timestamp")).alias("arrival"),
    ).select("v.key", "v.event_time", "v.value", "partition", "offset", "arrival")


def clock(ms: int | None) -> str:
    """Epoch milliseconds as a UTC time of day, ``00:01:40.000``."""
    if ms is None:
        return "none yet"
    when = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return when.strftime("%H:%M:%S.") + f"{ms % 1000:03d}"


@dataclass
class LiveRun:
    """What the lines and the report show, gathered as the queries run."""

    rounds: int
    summaries: list[dict[str, Any]] = field(default_factory=list)
    printed: int = 0
    spark_dropped: int = 0
    spark_batches: set[int] = field(default_factory=set)

    def on_batch(self, summary: dict[str, Any]) -> None:
        """floodmark's ``on_progress``: keeps each committed batch's summary."""
        self.summaries.append(summary)

    def count_spark_drops(self, query: StreamingQuery) -> None:
        """Adds the drops of Spark's micro-batches not yet counted."""
        for p in query.recentProgress:
            if p.batchId not in self.spark_batches:
                self.spark_batches.add(p.batchId)
                self.spark_dropped += sum(op.numRowsDroppedByWatermark for op in p.stateOperators)

    def print_new(self, broker_ms: int) -> None:
        """One line per floodmark batch committed since the last call."""
        for summary in self.summaries[self.printed :]:
            sys.stdout.write(self.line(summary, broker_ms) + "\n")
        self.printed = len(self.summaries)
        sys.stdout.flush()

    def line(self, summary: dict[str, Any], broker_ms: int) -> str:
        """One micro-batch's line, in the columns of :data:`HEADER`."""
        wm, holder = summary["watermark"], summary["min_channel"]
        idle = ",".join(f"p{c}" for c in summary["idle_channels"]) or "-"
        return LINE.format(
            batch=f"{summary['batch_id'] + 1}/{self.rounds}",
            broker=clock(broker_ms)[:8],
            watermark=clock(None if wm == I64_MIN else wm),
            holder="-" if holder is None else f"p{holder}",
            idle=idle,
            late=f"{summary['late_total']:,}",
            spark=f"{self.spark_dropped:,}",
            seconds=f"{summary['seconds']:.1f}",
        )

    @property
    def frontier(self) -> int | None:
        """floodmark's final frontier (arrival ms; None before the first batch)."""
        return self.summaries[-1]["frontier"] if self.summaries else None


class Queries:
    """floodmark's query (its outputs into ``outputs``, its state and checkpoint in
    ``work``) and Spark's own over the demo's topic, run once per round with an
    ``availableNow`` trigger: each reads the topic to its latest offsets in one
    micro-batch, as after a 10 s trigger, whatever the time the producer took."""

    def __init__(
        self, spark: SparkSession, kafka: MockKafka, work: Path, outputs: Path, run: LiveRun
    ):
        from pyspark.sql import functions as F

        from floodmark.spark.sources import kafka_stream
        from floodmark.spark.streaming import ParquetOutputs, StreamingWindows

        self.work = work
        self.handler = StreamingWindows(
            DEMO_SPEC.strategy(),
            DEMO_SPEC.window.build(),
            key=list(DEMO_SPEC.keys),
            event_time=DEMO_SPEC.event_time,
            channel=DEMO_SPEC.channel,
            arrival="arrival",
            aggs=list(DEMO_SPEC.aggs),
            state_location=str(work / "state"),
            outputs=ParquetOutputs(str(outputs)),
            timeline=True,
            emissions=True,
            channels=range(PARTITIONS),  # the topic's partitions join at the first batch
            on_progress=run.on_batch,
        )
        self.stream = events(kafka_stream(spark, kafka.bootstrap_servers, [TOPIC]))
        delay = f"{int(DEMO_SPEC.bound.total_seconds())} seconds"
        size = f"{int(DEMO_SPEC.window.size.total_seconds())} seconds"
        self.spark_own = (
            self.stream.withColumn("ts", F.timestamp_millis("event_time"))
            .withWatermark("ts", delay)
            .groupBy(F.window("ts", size), "key", "partition", "offset")
            .agg(F.count(F.lit(1)).alias("count"), F.sum("value").alias("sum_value"))
        )

    def run_round(self, run: LiveRun) -> None:
        """Both queries to the latest offsets (together), Spark's drops counted."""
        ours = (
            self.stream.writeStream.foreachBatch(self.handler)
            .option("checkpointLocation", str(self.work / "floodmark-checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            theirs = (
                self.spark_own.writeStream.outputMode("append")
                .format("noop")
                .option("checkpointLocation", str(self.work / "spark-checkpoint"))
                .trigger(availableNow=True)
                .start()
            )
            theirs.awaitTermination()
            run.count_spark_drops(theirs)
        finally:
            ours.awaitTermination()


def run_live(
    spark: SparkSession, kafka: MockKafka, table: pa.Table, work: Path, outputs: Path
) -> LiveRun:
    """Produces ``table`` round by round and runs both queries after each round."""
    import numpy as np

    arrival = table.column("arrival").to_numpy()
    first = int(arrival[0]) // ROUND_MS * ROUND_MS
    run = LiveRun(rounds=int(arrival[-1] - first) // ROUND_MS + 1)
    sys.stdout.write(
        f"A live query over a simulated Kafka broker: {run.rounds} micro-batches,\n"
        f"{ROUND_MS // 1000} s of broker time each. floodmark and Spark's own watermark\n"
        "read the same topic; p3 lags 30 s, p6 goes quiet.\n\n" + HEADER + "\n"
    )
    kafka.create_topic(TOPIC, partitions=PARTITIONS)
    queries = Queries(spark, kafka, work, outputs, run)
    for r in range(run.rounds):
        end = first + (r + 1) * ROUND_MS
        lo, hi = np.searchsorted(arrival, [end - ROUND_MS, end], side="left")
        kafka.produce_table(
            TOPIC,
            table.slice(lo, hi - lo),
            partition="partition",
            timestamp="arrival",
            value_columns=["key", "event_time", "value"],
        )
        kafka.flush()
        queries.run_round(run)
        run.print_new(end - 1)
    return run


def live_report(
    spark: SparkSession, records: DataFrame, outputs: Path, run: LiveRun
) -> ReportInputs:
    """The report's data from the live outputs in ``outputs``, over the records up to
    floodmark's final frontier."""
    from pyspark.sql import functions as F

    from floodmark.report import ReportInputs
    from floodmark.report.partition_views import partition_views
    from floodmark.spark.columns import TimeColumn
    from floodmark.timeline import in_emission_order

    def read(kind: str) -> DataFrame:
        return spark.read.parquet(str(outputs / kind)).drop("batch")

    frontier = run.frontier
    done = records.where(F.col("arrival") <= F.lit(frontier)) if frontier is not None else records
    done = done.persist()
    results, late, dropped = read("results"), read("late"), read("dropped")
    ms = (TimeColumn(DEMO_SPEC.event_time, "integer", "ms"), TimeColumn("arrival", "integer", "ms"))
    firings = firing_table(results, *ms)
    parts = partition_counts(done, late, dropped, DEMO_SPEC.channel)
    timeline = read("timeline").toArrow().sort_by("time")
    timeline = labelled(timeline, "min_channel", nulls=None)
    emissions = labelled(in_emission_order(read("emissions").toArrow()), "channel", nulls=None)
    views = partition_views(timeline, emissions)
    inputs = ReportInputs(
        title=f"floodmark demo --live: {run.rounds} micro-batches over a simulated Kafka broker",
        settings={**DEMO_SPEC.settings(), "micro-batch": f"{ROUND_MS // 1000} s of broker time"},
        timeline=timeline,
        emissions=emissions,
        lag=views.lag,
        holding=views.holding,
        idle_spans=views.idle_spans,
        partitions=labelled(parts, "partition"),
        firings=firings,
    )
    # the live Spark query runs no batch without new records (see demo_live)
    add_spark_drops(
        inputs, done, trigger_interval=timedelta(milliseconds=ROUND_MS), no_data_batches=False
    )
    total, kept = records.count(), done.count()
    done.unpersist()
    inputs.notes.append(
        f"A live query: {run.rounds} micro-batches of floodmark's StreamingWindows over a "
        f"simulated Kafka broker. This report covers the {kept:,} records up to its final "
        f"frontier ({clock(frontier)}); the last {total - kept:,} wait in its state for a "
        "next batch."
    )
    inputs.notes.append(
        "Spark drops: what Spark's own global watermark (withWatermark "
        f"{format_duration(DEMO_SPEC.bound)}, one micro-batch per {ROUND_MS // 1000} s of "
        f"arrivals) drops of these records from the same "
        f"{format_duration(DEMO_SPEC.window.size)} windows; the live Spark query next to "
        f"floodmark's dropped {run.spark_dropped:,} "
        "records in all."
    )
    inputs.notes.append(QUIET_NOTE)
    return inputs


def demo_live(args: argparse.Namespace, argv: list[str]) -> int:
    """``floodmark demo --live``."""
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        raise UsageError(
            "floodmark demo --live runs a simulated Kafka broker from the confluent-kafka "
            "package: pip install 'floodmark[kafka]'"
        ) from None
    rows = args.rows if args.rows is not None else DEFAULT_LIVE_ROWS
    if rows > MAX_LIVE_ROWS:
        raise UsageError(
            f"--rows {rows:,} with --live: the simulated Kafka broker keeps about 250,000 "
            f"records per partition; give --rows {MAX_LIVE_ROWS:,} or fewer (floodmark "
            "demo without --live takes any number)"
        )
    folder = OutputFolder.prepare(args.output, overwrite=args.overwrite, inputs=[], command=argv)
    progress = Progress(4, enabled=not args.quiet)
    work = Path(tempfile.mkdtemp(prefix="floodmark-live-"))
    try:
        with folder.staged() as staging, spark_errors(None):
            with progress.stage(f"generating {rows:,} records of {PARTITIONS} Kafka partitions"):
                table = live_table(rows)
            with progress.stage("starting Spark and a simulated Kafka broker"):
                spark = start_spark(args.master, progress)
                # As a trigger that always finds new records: no extra batch between rounds.
                spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
                from floodmark.spark.sources import MockKafka, kafka_read

                kafka = MockKafka()
                kafka.start()
            try:
                run = run_live(spark, kafka, table, work, staging)
                with progress.stage("collecting report figures"):
                    raw = kafka_read(spark, kafka.bootstrap_servers, [TOPIC])
                    inputs = live_report(spark, events(raw).drop("offset"), staging, run)
            finally:
                kafka.stop()
            with progress.stage("writing the report"):
                failure = write_run_report(staging / "report", inputs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return print_summary(inputs, folder.target, progress, failure)


__all__ = ["DEFAULT_LIVE_ROWS", "ROUND_MS", "LiveRun", "demo_live", "live_stream", "live_table"]
