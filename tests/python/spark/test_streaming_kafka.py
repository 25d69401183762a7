"""A live query over the Kafka protocol: Spark's Kafka rows (from librdkafka's mock
cluster, no broker) through ``StreamingWindows``, partition by partition, batch after
batch as records are produced; the outputs up to the final frontier equal the batch
function's over the same rows. Skips only when the ``confluent-kafka`` wheel is missing
(``pip install 'floodmark[kafka]'``; CI installs it)."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

pytest.importorskip("confluent_kafka")

from streaming_helpers import read_output

from floodmark import TumblingEventTimeWindows, WatermarkStrategy
from floodmark.spark import window_aggregate
from floodmark.spark.sources import MockKafka, kafka_read, kafka_stream
from floodmark.spark.streaming import ParquetOutputs, StreamingWindows

T = 1_767_225_600_000
STRATEGY = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(milliseconds=500))
STRATEGY = STRATEGY.with_idleness(timedelta(seconds=3))
WINDOW = TumblingEventTimeWindows.of(timedelta(seconds=1))


def events(raw: Any) -> Any:
    """Kafka rows to floodmark's columns: the JSON value's event time, the broker
    timestamp as arrival, the partition as channel."""
    from pyspark.sql import functions as F

    value = F.from_json(F.col("value").cast("string"), "user string, ts bigint, amount bigint")
    return raw.select(
        value.alias("v"), F.col("partition"), F.col("timestamp").alias("arrival")
    ).select("v.user", F.timestamp_millis("v.ts").alias("ts"), "v.amount", "partition", "arrival")


def produce_round(kafka: MockKafka, start: int, seconds: int) -> None:
    """Four partitions, one record per 100 ms each; partition 1 lags 2 s; partition 3
    goes quiet in the second round; every 50th record of partition 0 is 8 s late."""
    for i in range(start * 10, (start + seconds) * 10):
        for p in range(4):
            if p == 3 and 20 <= i < 60:
                continue
            event = (
                T + 100 * i - (2_000 if p == 1 else 0) - (8_000 if p == 0 and i % 50 == 7 else 0)
            )
            kafka.produce(
                "events",
                {"user": f"u{i % 3}", "ts": event, "amount": i},
                partition=p,
                timestamp=T + 100 * i,
            )
    kafka.flush()


@pytest.mark.parametrize("path", ["auto", "native"])
def test_a_live_query_over_kafka_equals_the_batch_function(
    spark: Any, tmp_path: Path, path: str
) -> None:
    """On the default path (keyed) and the native one (timestamp event times, string
    keys)."""
    handler = StreamingWindows(
        STRATEGY,
        WINDOW,
        key="user",
        event_time="ts",
        channel="partition",
        arrival="arrival",
        aggs=["count", ("sum", "amount")],
        allowed_lateness=timedelta(seconds=2),
        event_time_unit="ms",
        arrival_unit="ms",
        state_location=str(tmp_path / "state"),
        outputs=ParquetOutputs(str(tmp_path / "out")),
        path=path,
    )
    with MockKafka() as kafka:
        kafka.create_topic("events", partitions=4)
        produce_round(kafka, 0, 2)
        stream = events(kafka_stream(spark, kafka.bootstrap_servers, ["events"]))
        query = (
            stream.writeStream.foreachBatch(handler)
            .option("checkpointLocation", str(tmp_path / "ck"))
            .start()
        )
        try:
            query.processAllAvailable()
            for start in (2, 4, 6):  # records keep coming: more micro-batches
                produce_round(kafka, start, 2)
                query.processAllAvailable()
        finally:
            query.stop()
        rows = events(kafka_read(spark, kafka.bootstrap_servers, ["events"])).toArrow()
    assert len(handler.progress) >= 4
    assert {p["channels"] for p in handler.progress[-1:]} == {4}
    assert {p["path"] for p in handler.progress} == {"keyed" if path == "auto" else path}
    frontier = handler.progress[-1]["frontier"]
    want = window_aggregate(
        spark.createDataFrame(rows),
        STRATEGY,
        WINDOW,
        key="user",
        event_time="ts",
        channel="partition",
        arrival="arrival",
        aggs=["count", ("sum", "amount")],
        allowed_lateness=timedelta(seconds=2),
        event_time_unit="ms",
        arrival_unit="ms",
    ).results.toArrow()
    fired = pc.cast(want["fired_at"], "int64")  # timestamps: microseconds
    want = want.filter(pc.less_equal(fired, frontier * 1000))
    cols = ["user", "window_start", "window_end", "count", "sum_amount", "watermark", "timing"]
    got = read_output(spark, tmp_path / "out", "results")

    def counted(t: Any) -> Counter[tuple[Any, ...]]:
        return Counter(zip(*[t[c].to_pylist() for c in [*cols, "fired_at"]], strict=True))

    assert counted(got) == counted(want)
    assert got.num_rows >= 15
    assert sum(p["late"] for p in handler.progress) > 0
