"""Rows per second of floodmark's streaming sources on local Spark (docs/kafka.md).

    python benches/stream_sources.py [--rows N] [--partitions P] [--batches B]

* replay: ``replay_stream`` over a generated Kafka-like table (int64 ms times), one
  micro-batch per clock step, run to the end with ``Trigger.AvailableNow`` into the
  ``noop`` sink, with one task per channel and with ``max_partitions=2``; the
  preparation (one sorted Parquet file per channel) timed apart.
* kafka: the same rows produced into ``MockKafka`` (JSON values, CreateTime = arrival),
  then read by ``kafka_stream`` (one batch: every partition to its latest offset) into
  ``noop``, and by ``kafka_read`` (``count()``).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from floodmark.datagen import StreamSpec, generate
from floodmark.spark import local_session
from floodmark.spark.sources import MockKafka, kafka_read, kafka_stream, replay_stream


def _drain(df: Any, checkpoint: Path) -> tuple[float, int, int]:
    """Run a streaming DataFrame to the end into the noop sink: seconds, batches and
    the rows they read."""
    t0 = time.perf_counter()
    query = (
        df.writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
        progress = query.recentProgress
        return time.perf_counter() - t0, len(progress), sum(p.numInputRows for p in progress)
    finally:
        query.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument(
        "--batches",
        type=int,
        default=20,
        help="replay clock steps over the arrival span (the replay's clock starts on a "
        "multiple of the step, so one batch more may run)",
    )
    args = ap.parse_args()
    if min(args.rows, args.batches) < 1 or args.partitions < 8:
        ap.error("--rows and --batches must be at least 1, --partitions at least 8")
    spark = local_session()
    spec = StreamSpec(rows=args.rows, partitions=args.partitions, duration_ms=600_000)
    table = generate(spec)
    span = max(table["arrival"].to_pylist()) - min(table["arrival"].to_pylist())
    step = -(-span // args.batches)
    with tempfile.TemporaryDirectory() as tmp:
        # The first round pays the Python workers' start.
        for round_, tasks in enumerate((None, None, 2, 2), 1):
            t0 = time.perf_counter()
            df = replay_stream(
                spark,
                table,
                arrival="arrival",
                channel="partition",
                step=step,
                max_partitions=tasks,
            )
            prep = time.perf_counter() - t0
            secs, batches, rows = _drain(df, Path(tmp) / f"replay-{round_}")
            print(
                f"replay round {round_} (max_partitions={tasks}): {rows:,} rows in "
                f"{batches} batches: {secs:.1f} s, {rows / secs:,.0f} rows/s "
                f"(+ {prep:.1f} s to prepare"
                + (", the source's registration included)" if round_ == 1 else ")")
            )

        with MockKafka() as kafka:
            kafka.create_topic("events", args.partitions)
            t0 = time.perf_counter()
            kafka.produce_table(
                "events",
                table,
                partition="partition",
                timestamp="arrival",
                key="key",
                value_columns=["id", "event_time", "key", "value"],
            )
            kafka.flush()
            secs = time.perf_counter() - t0
            print(f"produce: {args.rows:,} rows in {secs:.1f} s, {args.rows / secs:,.0f} rows/s")
            for round_ in (1, 2):
                df = kafka_stream(spark, kafka.bootstrap_servers, "events")
                secs, batches, rows = _drain(df, Path(tmp) / f"kafka-{round_}")
                print(
                    f"kafka_stream round {round_}: {rows:,} rows in {batches} batch(es): "
                    f"{secs:.1f} s, {rows / secs:,.0f} rows/s"
                )
            t0 = time.perf_counter()
            n = kafka_read(spark, kafka.bootstrap_servers, "events").count()
            secs = time.perf_counter() - t0
            print(f"kafka_read: {n:,} rows in {secs:.1f} s, {n / secs:,.0f} rows/s")


if __name__ == "__main__":
    main()
