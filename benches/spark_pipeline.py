"""Spark pipeline benchmark: floodmark's stages next to baselines from the same run.

    python benches/spark_pipeline.py [--rows 10000000] [--master local[2]]
    python benches/spark_pipeline.py --partitions 16,1000,10000 --span 1h,24h

Data: a generated Kafka-like stream (by default 16 partitions over one hour, 10,000
keys, a lagging and a quiet partition), written once to Parquet and scanned natively by
every step. Each step writes to Spark's "noop" sink so that everything is computed and
nothing is collected. Printed: seconds per step and ratios to one identity
``mapInArrow`` pass over the same five columns (the cost of one JVM <-> Python
crossing), to Spark's native windowed count, and to a native floor: the three Spark
jobs an exact pipeline runs, without floodmark (the same windowed aggregation, the
per-(channel, 200 ms) maximum that the watermarks come from, collected, and one
filtered scan of every column for a side output). Each ratio is taken within one round
of all steps run back to back (median over the rounds). The first jobs of a session are
~2x slower (JIT), so a warm-up round runs first. The last step runs the same windows
with `mean`, which only the keyed Rust operator computes (session windows and float
values take that path too).

With ``--partitions`` or ``--span`` (comma-separated lists), the grid mode runs every
combination in a process of its own (a fresh Spark session, so that the driver's peak
memory is that configuration's): the identity pass, ``assign_watermarks`` and
``window_aggregate``, and prints each one's ratio to the identity pass and the
driver's peak Python memory (RSS). Data generation runs in yet another process.
``--layout channel`` writes the same rows as 16 files that each hold whole partitions
in arrival order (a Kafka topic dumped per partition) instead of one file in the
generator's order, where every Spark partition holds every channel.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute

IDENTITY = "identity mapInArrow (5 columns)"
COUNT = "native windowed count (10 s, key)"
FLOOR = "native floor (3 jobs, see above)"
ASSIGN = "floodmark assign_watermarks"
PIPELINE = "floodmark window_aggregate (all outputs)"
KEYED = "floodmark keyed operator (count, mean)"
SPANS = {"1h": 3_600_000, "24h": 86_400_000}


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def data_path(root: str, rows: int, partitions: int, span: str, layout: str = "arrival") -> Path:
    """The Parquet file (``layout="channel"``: folder) of one configuration, generated
    in a child process if missing."""
    name = (
        f"rows-{rows}.parquet"
        if (partitions, span) == (16, "1h")
        else (f"rows-{rows}-p{partitions}-{span}.parquet")
    )
    if layout == "channel":
        name = name.replace(".parquet", "-by-channel")
    path = Path(root) / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        print(f"generating {rows:,} rows, {partitions} partitions, {span} -> {path}", flush=True)
        # Written under a temporary name and renamed when complete: an interrupted
        # generation leaves nothing that a later run would take for the data.
        partial = path.with_name(path.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.unlink(missing_ok=True)
        subprocess.run(
            [
                sys.executable,
                __file__,
                "--generate",
                str(partial),
                "--rows",
                str(rows),
                "--partitions-one",
                str(partitions),
                "--span",
                span,
                "--layout",
                layout,
            ],
            check=True,
        )
        partial.rename(path)
    return path


#: Files of ``--layout channel``, each holding the partitions ``p % CHANNEL_FILES``.
CHANNEL_FILES = 16


def generate(path: str, rows: int, partitions: int, span: str, layout: str) -> None:
    import pyarrow.parquet as pq

    from floodmark.datagen import StreamSpec, generate

    spec = StreamSpec(
        rows=rows,
        partitions=partitions,
        keys=10_000,
        duration_ms=SPANS[span],
        quiet_from_ms=SPANS[span] // 18,
        quiet_for_ms=SPANS[span] // 30,
    )
    table = generate(spec).drop(["id"])
    if layout != "channel":
        pq.write_table(table, path, row_group_size=1_000_000)
        return
    folder = Path(path)
    folder.mkdir(parents=True)
    home = pa.compute.bit_wise_and(table["partition"], CHANNEL_FILES - 1)
    for f in range(CHANNEL_FILES):
        part = table.filter(pa.compute.equal(home, f)).sort_by("arrival")
        pq.write_table(part, folder / f"part-{f:02d}.parquet", row_group_size=1_000_000)


def session(master: str) -> Any:
    from floodmark.progress import QUIET_SPARK_CONF
    from floodmark.spark import local_session

    return local_session(master=master, conf=QUIET_SPARK_CONF)


def make_steps(df: Any) -> dict[str, Callable[[], object]]:
    from pyspark.sql import functions as F

    from floodmark import TumblingEventTimeWindows, WatermarkStrategy
    from floodmark.spark import assign_watermarks, window_aggregate

    strategy = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=5)).with_idleness(
        timedelta(seconds=30)
    )
    window = TumblingEventTimeWindows.of(timedelta(seconds=10))

    def noop(frame: Any) -> None:
        frame.write.format("noop").mode("overwrite").save()

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

    return {
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


def rounds_of(chosen: dict[str, Callable[[], object]], repeat: int) -> list[dict[str, float]]:
    for fn in chosen.values():  # warm-up
        fn()
    # Rounds of every step back to back: the machine's speed drifts (shared VMs swing
    # by tens of percent), so each ratio is taken within a round, then the median.
    return [{label: timed(fn) for label, fn in chosen.items()} for _ in range(repeat)]


def ratio(rounds: list[dict[str, float]], label: str, base: str) -> tuple[float, float, float]:
    q = [r[label] / r[base] for r in rounds]
    return statistics.median(q), min(q), max(q)


def one_config(args: argparse.Namespace) -> None:
    """Grid mode child: one configuration in a fresh session; prints one JSON line."""
    spark = session(args.master)
    df = spark.read.parquet(args.path)
    steps = make_steps(df)
    chosen = {k: steps[k] for k in (IDENTITY, ASSIGN, PIPELINE)}
    rounds = rounds_of(chosen, args.repeat)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result = {
        "identity_s": statistics.median(r[IDENTITY] for r in rounds),
        "assign": ratio(rounds, ASSIGN, IDENTITY),
        "pipeline": ratio(rounds, PIPELINE, IDENTITY),
        "peak_mb": peak_mb,
    }
    spark.stop()
    print("RESULT " + json.dumps(result), flush=True)


def grid(args: argparse.Namespace) -> None:
    parts = [int(p) for p in (args.partitions or "16").split(",")]
    spans = (args.span or "1h").split(",")
    print(
        f"{args.rows:,} rows ({args.layout} layout), master {args.master}, "
        f"{args.repeat} rounds per configuration"
    )
    print(
        f"{'partitions':>10} {'span':>5} {'identity':>9} {'assign_watermarks':>24} "
        f"{'window_aggregate':>24} {'driver peak':>12}"
    )
    for p in parts:
        for span in spans:
            path = data_path(args.data, args.rows, p, span, args.layout)
            proc = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--one",
                    "--path",
                    str(path),
                    "--master",
                    args.master,
                    "--repeat",
                    str(args.repeat),
                ],
                capture_output=True,
                text=True,
            )
            line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
            if line is None:
                print(f"{p:>10} {span:>5} failed:\n{proc.stderr[-3000:]}", flush=True)
                continue
            r = json.loads(line[len("RESULT ") :])
            a, w = r["assign"], r["pipeline"]
            print(
                f"{p:>10} {span:>5} {r['identity_s']:8.2f}s "
                f"{a[0]:8.2f}x ({a[1]:.2f}-{a[2]:.2f})      "
                f"{w[0]:8.2f}x ({w[1]:.2f}-{w[2]:.2f})      {r['peak_mb']:8.0f} MB",
                flush=True,
            )


def classic(args: argparse.Namespace) -> None:
    path = data_path(args.data, args.rows, 16, "1h")
    spark = session(args.master)
    df = spark.read.parquet(str(path))
    steps = make_steps(df)
    print(
        f"{args.rows:,} rows x {len(df.columns)} columns, master {args.master}; warming up",
        flush=True,
    )
    baselines = ("identity", "native")
    chosen = {k: f for k, f in steps.items() if k.startswith(baselines) or args.only in k}
    rounds = rounds_of(chosen, args.repeat)
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
        for base in (b for b in bases if b in chosen):
            m, lo, hi = ratio(rounds, label, base)
            print(f"  {label:<44} {m:5.2f}x {base} ({lo:.2f}-{hi:.2f})")
    spark.stop()


def check(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuses options the runs cannot honour, before any data is generated."""
    if args.rows < 1 or args.repeat < 1:
        ap.error("--rows and --repeat must be at least 1")
    for span in (args.span or "1h").split(","):
        if span not in SPANS:
            ap.error(f"--span {span!r}: expected a comma-separated list of {', '.join(SPANS)}")
    for p in (args.partitions or "16").split(","):
        if not p.isdigit() or int(p) < 8:
            ap.error(
                f"--partitions {p!r}: expected counts of at least 8 (the stream's lagging "
                "partition is 3, its quiet one 7)"
            )
    if args.only and (args.partitions or args.span):
        ap.error("--only selects steps of the classic run; the grid mode runs them all")
    if args.layout != "arrival" and not (args.partitions or args.span or args.generate):
        ap.error("--layout applies to the grid mode (--partitions, --span)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of every step")
    ap.add_argument(
        "--only", default="", help="run only the floodmark steps whose name contains this"
    )
    ap.add_argument("--data", default=str(Path(tempfile.gettempdir()) / "floodmark-bench"))
    ap.add_argument("--partitions", help="grid mode: comma-separated partition counts")
    ap.add_argument("--span", help="grid mode: comma-separated spans (1h, 24h)")
    ap.add_argument(
        "--layout",
        choices=("arrival", "channel"),
        default="arrival",
        help="grid mode: one file in arrival order, or 16 files of whole partitions",
    )
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--generate", help=argparse.SUPPRESS)
    ap.add_argument("--partitions-one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    check(ap, args)
    if args.generate:
        generate(args.generate, args.rows, args.partitions_one, args.span, args.layout)
    elif args.one:
        one_config(args)
    elif args.partitions or args.span:
        grid(args)
    else:
        classic(args)


if __name__ == "__main__":
    main()
