"""Spark pipeline benchmark: floodmark's stages next to baselines from the same run.

    python benches/spark_pipeline.py [--rows 10000000] [--master local[2]]

Data: a generated Kafka-like stream (16 partitions, 10,000 keys, a lagging and a quiet
partition), written once to Parquet and scanned natively by every step. Each step
writes to Spark's "noop" sink so that everything is computed and nothing is collected.
Printed: seconds per step and ratios to one identity ``mapInArrow`` pass over the same
five columns (the cost of one JVM <-> Python crossing), to Spark's native windowed
count, and to a native floor: the three Spark jobs an exact pipeline runs, without
floodmark (the same windowed aggregation, the per-(channel, 200 ms) maximum that the
watermarks come from, collected, and one filtered scan of every column for a side
output). Each ratio is taken within one round of all steps run back to back (median over
the rounds). The first jobs of a session are ~2x slower (JIT), so a warm-up round runs
first. The last step runs the same windows with `mean`, which only the keyed Rust
operator computes (session windows and float values take that path too).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

IDENTITY = "identity mapInArrow (5 columns)"
COUNT = "native windowed count (10 s, key)"
FLOOR = "native floor (3 jobs, see above)"
ASSIGN = "floodmark assign_watermarks"
PIPELINE = "floodmark window_aggregate (all outputs)"
KEYED = "floodmark keyed operator (count, mean)"


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of every step")
    ap.add_argument(
        "--only", default="", help="run only the floodmark steps whose name contains this"
    )
    ap.add_argument("--data", default=str(Path(tempfile.gettempdir()) / "floodmark-bench"))
    args = ap.parse_args()

    from pyspark.sql import functions as F

    from floodmark import TumblingEventTimeWindows, WatermarkStrategy
    from floodmark.datagen import StreamSpec, generate
    from floodmark.progress import QUIET_SPARK_CONF
    from floodmark.spark import assign_watermarks, local_session, window_aggregate

    path = Path(args.data) / f"rows-{args.rows}.parquet"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        print(f"generating {args.rows:,} rows -> {path}", flush=True)
        spec = StreamSpec(rows=args.rows, partitions=16, keys=10_000, duration_ms=3_600_000)
        table = generate(spec).drop(["id"])
        pq.write_table(table, path, row_group_size=1_000_000)
    spark = local_session(master=args.master, conf=QUIET_SPARK_CONF)
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

    def floor() -> None:
        ts = F.col("event_time")
        noop(
            df.groupBy("key", (ts - F.pmod(ts, F.lit(10_000))).alias("window")).agg(
                F.count(F.lit(1)), F.sum("value")
            )
        )
        bucket = F.ceil(F.col("arrival") / F.lit(200))
        df.groupBy("partition", bucket.alias("bucket")).agg(F.max(ts)).toArrow()
        noop(df.where(ts < F.col("arrival") - F.lit(35_000)))

    steps: dict[str, Callable[[], object]] = {
        "native scan + max(event_time)": lambda: df.agg(F.max("event_time")).collect(),
        IDENTITY: lambda: noop(df.mapInArrow(identity, df.schema)),
        COUNT: lambda: noop(
            df.groupBy(F.window(F.timestamp_millis("event_time"), "10 seconds"), "key").count()
        ),
        FLOOR: floor,
        ASSIGN: lambda: noop(
            assign_watermarks(
                df, strategy, event_time="event_time", channel="partition", arrival="arrival"
            )
        ),
        PIPELINE: lambda: run_pipeline(["count", ("sum", "value")]),
        # `mean` has no native form: the same windows through the keyed Rust operator
        KEYED: lambda: run_pipeline(["count", ("mean", "value")]),
    }

    def run_pipeline(aggs: list[str | tuple[str, str]]) -> None:
        out = window_aggregate(
            df,
            strategy,
            window,
            key="key",
            event_time="event_time",
            channel="partition",
            arrival="arrival",
            aggs=aggs,
        )
        noop(out.results)
        noop(out.late)
        noop(out.dropped)
        out.unpersist()

    print(f"{args.rows:,} rows x {len(cols)} columns, master {args.master}; warming up", flush=True)
    baselines = ("identity", "native")
    chosen = {k: f for k, f in steps.items() if k.startswith(baselines) or args.only in k}
    for fn in chosen.values():
        fn()
    # Rounds of every step back to back: the machine's speed drifts (shared VMs swing
    # by tens of percent), so each ratio is taken within a round, then the median.
    rounds = [{label: timed(fn) for label, fn in chosen.items()} for _ in range(args.repeat)]
    print(f"seconds: median (min-max) of {args.repeat} rounds")
    for label in chosen:
        s = [r[label] for r in rounds]
        print(f"  {label:<44} {statistics.median(s):7.2f} s  ({min(s):.2f}-{max(s):.2f})")
    print("\nratios within a round: median (min-max)")
    comparisons = {
        FLOOR: (IDENTITY, COUNT),
        ASSIGN: (IDENTITY,),
        PIPELINE: (IDENTITY, COUNT, FLOOR),
        KEYED: (IDENTITY, PIPELINE),
    }
    for label, bases in comparisons.items():
        if label not in chosen:
            continue
        for base in bases:
            q = [r[label] / r[base] for r in rounds]
            print(f"  {label:<44} {statistics.median(q):5.2f}x {base} ({min(q):.2f}-{max(q):.2f})")
    spark.stop()


if __name__ == "__main__":
    main()
