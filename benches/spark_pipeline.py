"""Spark pipeline benchmark: floodmark's stages next to baselines from the same run.

    python benches/spark_pipeline.py [--rows 10000000] [--master local[2]]

Data: a generated Kafka-like stream (16 partitions, 10,000 keys, a lagging and a quiet
partition), written once to Parquet and scanned natively by every step. Each step
writes to Spark's "noop" sink so that everything is computed and nothing is collected.
Printed: seconds per step and ratios to one identity ``mapInArrow`` pass over the same
five columns (the cost of one JVM <-> Python crossing) and to Spark's native windowed
count. The first Arrow job of a session is ~2x slower, so everything is warmed up once.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def timed(label: str, fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    print(f"  {label:<44} {best:7.2f} s", flush=True)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument(
        "--only", default="", help="run only the floodmark steps whose name contains this"
    )
    ap.add_argument("--data", default=str(Path(tempfile.gettempdir()) / "floodmark-bench"))
    args = ap.parse_args()

    from pyspark.sql import functions as F

    from floodmark import TumblingEventTimeWindows, WatermarkStrategy
    from floodmark.datagen import StreamSpec, generate
    from floodmark.spark import assign_watermarks, local_session, window_aggregate

    path = Path(args.data) / f"rows-{args.rows}.parquet"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        print(f"generating {args.rows:,} rows -> {path}", flush=True)
        spec = StreamSpec(rows=args.rows, partitions=16, keys=10_000, duration_ms=3_600_000)
        table = generate(spec).drop(["id"])
        pq.write_table(table, path, row_group_size=1_000_000)
    spark = local_session(master=args.master)
    df = spark.read.parquet(str(path))
    cols = df.columns
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=5)).with_idleness(
        timedelta(seconds=30)
    )
    window = TumblingEventTimeWindows.of(timedelta(seconds=10))

    def noop(frame: object) -> None:
        frame.write.format("noop").mode("overwrite").save()  # type: ignore[attr-defined]

    def identity(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from it

    steps: dict[str, Callable[[], object]] = {
        "native scan + max(event_time)": lambda: df.agg(F.max("event_time")).collect(),
        "identity mapInArrow (5 columns)": lambda: noop(df.mapInArrow(identity, df.schema)),
        "native windowed count (10 s, key)": lambda: noop(
            df.groupBy(F.window(F.timestamp_millis("event_time"), "10 seconds"), "key").count()
        ),
        "floodmark assign_watermarks": lambda: noop(
            assign_watermarks(
                df, strategy, event_time="event_time", channel="partition", arrival="arrival"
            )
        ),
        "floodmark window_aggregate (all outputs)": lambda: run_pipeline(),
    }

    def run_pipeline() -> None:
        out = window_aggregate(
            df,
            strategy,
            window,
            key="key",
            event_time="event_time",
            channel="partition",
            arrival="arrival",
            aggs=["count", ("sum", "value")],
        )
        noop(out.results)
        noop(out.late)
        noop(out.dropped)
        out.unpersist()

    print(f"{args.rows:,} rows x {len(cols)} columns, master {args.master}; warming up", flush=True)
    noop(df.mapInArrow(identity, df.schema))
    print("best of", args.repeat)
    baselines = ("identity", "native")
    secs = {
        label: timed(label, fn, args.repeat)
        for label, fn in steps.items()
        if label.startswith(baselines) or args.only in label
    }
    ident = secs["identity mapInArrow (5 columns)"]
    native = secs["native windowed count (10 s, key)"]
    print("\nratios (same run):")
    for label in ("floodmark assign_watermarks", "floodmark window_aggregate (all outputs)"):
        if label not in secs:
            continue
        print(
            f"  {label:<44} {secs[label] / ident:5.2f}x identity pass, "
            f"{secs[label] / native:5.2f}x native window count"
        )
    spark.stop()


if __name__ == "__main__":
    main()
