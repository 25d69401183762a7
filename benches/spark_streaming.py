"""Live-query benchmark: floodmark's streaming handler next to Spark's own streaming
windowed count, on the same files, in one session.

    python benches/spark_streaming.py [--rows 10000000] [--files 20] [--per-trigger 2]

Data: the Spark bench's generated stream (16 partitions, an hour, 10,000 keys, a lagging
and a quiet partition), sorted by arrival and written as ``--files`` Parquet files whose
modification times follow arrival; each query reads ``--per-trigger`` files per
micro-batch (``maxFilesPerTrigger``) until all are read (``availableNow``).

Printed: seconds per query and ratios to Spark's own query (``withWatermark(5 s)`` +
``window(10 s)`` count per key, 4 shuffle partitions, the default state store, the
``noop`` sink), for floodmark's tumbling windows with ``count`` and ``sum`` on the
native path (``path="native"``) and on the keyed path (``auto``, the default), and
with ``count`` and ``mean`` (which only the keyed Rust operator computes), each writing
its outputs to the ``noop`` sink; and floodmark's own bookkeeping per
micro-batch (state read and written, the driver's work), in ms, and the state's bytes.
The first queries of a session are slower (JIT): a warm-up round on two files runs
first.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq


def write_files(rows: int, files: int, folder: Path) -> Path:
    from floodmark.datagen import StreamSpec, generate

    marker = folder / f".complete-{rows}-{files}"
    if marker.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    print(f"generating {rows:,} rows as {files} files -> {folder}", flush=True)
    spec = StreamSpec(rows=rows, partitions=16, keys=10_000, duration_ms=3_600_000)
    table = generate(spec).drop(["id"]).sort_by("arrival")
    cuts = np.linspace(0, table.num_rows, files + 1).astype(int)
    start = time.time() - 10 * files
    for i in range(files):
        path = folder / f"part-{i:05d}.parquet"
        pq.write_table(table.slice(cuts[i], cuts[i + 1] - cuts[i]), path)
        os.utime(path, (start + 10 * i, start + 10 * i))
    marker.touch()
    return folder


def noop(kind: str, df: Any, batch_id: int) -> None:
    df.write.format("noop").mode("overwrite").save()


def run_query(spark: Any, source: Path, per_trigger: int, sink: Any, work: Path) -> float:
    events = (
        spark.readStream.schema(
            "partition bigint, event_time bigint, arrival bigint, key bigint, value bigint"
        )
        .option("maxFilesPerTrigger", per_trigger)
        .parquet(str(source))
    )
    started = time.perf_counter()
    query = (
        sink(events)
        .trigger(availableNow=True)
        .option("checkpointLocation", str(work / "checkpoint"))
        .start()
    )
    query.awaitTermination()
    return time.perf_counter() - started


def spark_own(events: Any) -> Any:
    from pyspark.sql import functions as F

    counted = (
        events.withColumn("ts", F.timestamp_millis("event_time"))
        .withWatermark("ts", "5 seconds")
        .groupBy(F.window("ts", "10 seconds"), "key")
        .count()
    )
    return counted.writeStream.format("noop").outputMode("append")


def floodmark_query(
    aggs: list[Any], work: Path, progress: list[dict[str, Any]], path: str = "auto"
) -> Any:
    from floodmark import TumblingEventTimeWindows, WatermarkStrategy
    from floodmark.spark.streaming import StreamingWindows

    strategy = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=5)).with_idleness(
        timedelta(seconds=30)
    )
    handler = StreamingWindows(
        strategy,
        TumblingEventTimeWindows.of(timedelta(seconds=10)),
        key="key",
        event_time="event_time",
        channel="partition",
        arrival="arrival",
        aggs=aggs,
        state_location=str(work / "state"),
        outputs=noop,
        on_progress=progress.append,
        path=path,
    )
    return lambda events: events.writeStream.foreachBatch(handler)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--per-trigger", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--data", default=str(Path(tempfile.gettempdir()) / "floodmark-bench-stream"))
    args = ap.parse_args()
    if min(args.rows, args.files, args.per_trigger, args.repeat) < 1:
        ap.error("--rows, --files, --per-trigger and --repeat must be at least 1")

    from floodmark.progress import QUIET_SPARK_CONF
    from floodmark.spark import local_session

    source = write_files(args.rows, args.files, Path(args.data))
    spark = local_session(master=args.master, conf=QUIET_SPARK_CONF)
    queries = {
        "spark withWatermark + window count": lambda work, prog: spark_own,
        "floodmark native (count, sum)": lambda work, prog: floodmark_query(
            ["count", ("sum", "value")], work, prog, "native"
        ),
        "floodmark auto = keyed (count, sum)": lambda work, prog: floodmark_query(
            ["count", ("sum", "value")], work, prog
        ),
        "floodmark keyed (count, mean)": lambda work, prog: floodmark_query(
            ["count", ("mean", "value")], work, prog
        ),
    }
    print(
        f"{args.rows:,} rows in {args.files} files, {args.per_trigger} per trigger, "
        f"master {args.master}; warming up",
        flush=True,
    )
    rounds: list[dict[str, float]] = []
    progress: dict[str, list[dict[str, Any]]] = {}
    # Every checkpoint, state folder and the warm-up's copied files live in here,
    # removed at the end however the run ends.
    with tempfile.TemporaryDirectory() as scratch:
        small = Path(scratch) / "warm-up-input"
        small.mkdir()
        for f in sorted(p for p in source.iterdir() if p.suffix == ".parquet")[:2]:
            shutil.copy2(f, small / f.name)
        for make in queries.values():
            work = Path(tempfile.mkdtemp(dir=scratch))
            run_query(spark, small, 1, make(work, []), work)
        for _ in range(args.repeat):
            row = {}
            for name, make in queries.items():
                work = Path(tempfile.mkdtemp(dir=scratch))
                prog: list[dict[str, Any]] = []
                row[name] = run_query(spark, source, args.per_trigger, make(work, prog), work)
                progress[name] = prog
                shutil.rmtree(work, ignore_errors=True)
            rounds.append(row)
    base = "spark withWatermark + window count"
    print(f"seconds: median (min-max) of {args.repeat} rounds; ratio to Spark's own query")
    for name in queries:
        s = [r[name] for r in rounds]
        q = [r[name] / r[base] for r in rounds]
        print(
            f"  {name:<38} {statistics.median(s):7.2f} s ({min(s):.2f}-{max(s):.2f})  "
            f"{statistics.median(q):5.2f}x"
        )
    for name, prog in progress.items():
        if not prog:
            continue
        keys = ("state_ms", "driver_ms", "state_bytes", "seconds")
        med = {k: statistics.median(p.get(k, 0) for p in prog) for k in keys}
        print(
            f"  {name:<38} per batch ({len(prog)} batches): state {med['state_ms']:.0f} ms, "
            f"driver {med['driver_ms']:.0f} ms, state {med['state_bytes'] / 1024:.0f} KiB, "
            f"batch {med['seconds']:.2f} s"
        )
    spark.stop()


if __name__ == "__main__":
    main()
