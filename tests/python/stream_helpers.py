"""Helpers of the streaming-source tests: run a query to the end of its data, collecting
each micro-batch's rows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


class Batches:
    """A ``foreachBatch`` handler: each batch's rows (sorted tuples) by batch id, and the
    batch ids in the order Spark ran them (a re-run batch appears again)."""

    def __init__(self, select: Callable[[Any], Any] | None = None) -> None:
        self.select = select
        self.batches: dict[int, list[tuple[Any, ...]]] = {}
        self.calls: list[int] = []

    def __call__(self, df: Any, batch_id: int) -> None:
        rows = (self.select(df) if self.select else df).collect()
        self.batches[batch_id] = sorted(tuple(r) for r in rows)
        self.calls.append(batch_id)


def run_available_now(
    df: Any, checkpoint: Path, select: Callable[[Any], Any] | None = None, timeout: float = 120
) -> tuple[Batches, Any]:
    """Run the streaming ``df`` with ``Trigger.AvailableNow`` from ``checkpoint`` until it
    has read all there is; the batches and the query's last progress. Always stopped."""
    got = Batches(select)
    query = (
        df.writeStream.foreachBatch(got)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(timeout), "the streaming query did not finish"
        assert query.exception() is None, query.exception()
        return got, query.lastProgress
    finally:
        query.stop()


def uncommit(checkpoint: Path, batch_id: int) -> None:
    """Remove a batch's commit from a checkpoint, as a crash after its offsets were
    logged and before Spark committed it would leave it: a restart re-runs the batch."""
    for name in (str(batch_id), f".{batch_id}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)


def start_spark_windowed_count(
    spark: Any, src: Path, schema: Any, delay: str, by: list[str], checkpoint: Path
) -> tuple[Any, str]:
    """Spark's own watermark at work (what ``spark_global_watermark_late`` models): the
    Parquet files of ``src`` one per micro-batch, ``withWatermark`` of ``delay`` on the
    millisecond ``event_time``, a 10 s tumbling window count by ``by``, appended to a
    memory table. The started query and the table's name."""
    import time

    from pyspark.sql import functions as F

    stream = (
        spark.readStream.schema(schema)
        .option("maxFilesPerTrigger", 1)
        .parquet(str(src))
        .withColumn("ts", F.timestamp_millis("event_time"))
        .withWatermark("ts", delay)
        .groupBy(F.window("ts", "10 seconds"), *by)
        .count()
    )
    name = f"fm_spark_{time.time_ns()}"
    query = (
        stream.writeStream.outputMode("append")
        .format("memory")
        .queryName(name)
        .option("checkpointLocation", str(checkpoint))
        .start()
    )
    return query, name
