"""The work behind ``floodmark demo``, ``run`` and ``analyze`` (starts Spark).

Each command checks what it can before Spark starts (the input, the output folder,
flags that go together), writes its outputs into a staging folder
(:mod:`floodmark.cli.outputs`) and moves them into place at the end. Only small tables
are collected to the driver: per-partition counts, window ends and firing times, the
timeline and the channels' emissions. Spark, the native engine and the report are
imported here, lazily, so that ``floodmark --help`` and argument errors stay instant.
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from floodmark.cli.args import DEFAULT_BOUND, DEFAULT_LATENESS, Agg, WindowSpec, resolve_aggs
from floodmark.cli.errors import SparkFailure, UsageError, fail
from floodmark.cli.inputs import InputFile, check_columns, check_input, read_input, typed_if_empty
from floodmark.cli.outputs import OutputFolder, active_spark_context
from floodmark.progress import QUIET_SPARK_CONF, SPARK_LOG, Progress
from floodmark.strategy import DEFAULT_EMIT_INTERVAL
from floodmark.time import format_duration, whole_ticks

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from floodmark.datagen import StreamSpec
    from floodmark.report import ReportInputs

#: How a null channel is shown in the summary and the report.
NULL_CHANNEL = "(null)"


def dispatch(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Run the chosen command; returns the exit code.

    Args:
        args: the parsed arguments.
        argv: the arguments as given (recorded in the output folder's marker).
    """
    handlers = {"demo": demo, "run": run, "analyze": analyze}
    return handlers[args.command](args, list(argv))


def keys_once(given: Sequence[str], names: Mapping[str, str]) -> None:
    """Each ``--key`` names a column of its own: ``names`` maps each flag's value to the
    column it names (itself while parsing; the input's spelling once it is read).

    Raises:
        UsageError: a key given twice, or two spellings of one column.
    """
    for column in sorted({names[k] for k in given}):
        flags = list(dict.fromkeys(k for k in given if names[k] == column))
        if len(flags) == 1 and [names[k] for k in given].count(column) > 1:
            raise UsageError(f"--key {flags[0]} is given more than once; name each key once")
        if len(flags) > 1:
            spelled = " and ".join(f"--key {k}" for k in flags)
            raise UsageError(f"{spelled} name one column, {column}; name each key once")


@dataclass(frozen=True)
class PipelineSpec:
    """What :func:`pipeline` computes: the columns, the watermarks and the windows."""

    event_time: str
    channel: str
    keys: tuple[str, ...]
    window: WindowSpec
    aggs: tuple[Agg, ...] = ("count",)
    arrival: str | None = None
    bound: timedelta = DEFAULT_BOUND
    idle: timedelta | None = None
    emit_interval: timedelta = DEFAULT_EMIT_INTERVAL
    allowed_lateness: timedelta = DEFAULT_LATENESS
    event_time_unit: str | None = None
    arrival_unit: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> PipelineSpec:
        """The spec of ``floodmark run``'s or ``analyze``'s arguments (for ``analyze``
        without the bound and idle timeout it sweeps).

        Raises:
            UsageError: ``--arrival-unit`` without ``--arrival``, ``--agg FUNCTION``
                without ``--value``, a ``--key`` named twice, or ``analyze`` with a
                session window (found here, before Spark starts).
        """
        keys_once(args.key, {k: k for k in args.key})
        from floodmark.vocabulary import NOT_SWEPT, SWEPT_WINDOWS

        if args.command == "analyze" and args.window.kind not in SWEPT_WINDOWS:
            raise UsageError(
                f"--window {args.window.describe()}: analyze needs a tumbling or sliding "
                f"window ({NOT_SWEPT})"
            )
        if args.arrival_unit is not None and args.arrival is None:
            raise UsageError(
                f"--arrival-unit {args.arrival_unit} is the unit of the --arrival column, "
                "and no --arrival was given (without it the row order within each channel "
                "is the arrival, one row per ms); add --arrival COL or drop --arrival-unit"
            )
        spec = cls(
            event_time=args.event_time,
            channel=args.channel,
            keys=tuple(args.key),
            window=args.window,
            arrival=args.arrival,
            emit_interval=args.emit_interval,
            event_time_unit=args.event_time_unit,
            arrival_unit=args.arrival_unit,
        )
        if args.command != "run":
            return spec
        try:
            aggs = resolve_aggs(args.agg, args.value)
        except ValueError as err:
            raise UsageError(str(err)) from None
        return replace(
            spec,
            aggs=tuple(aggs),
            bound=args.bound,
            idle=args.idle,
            allowed_lateness=args.allowed_lateness,
        )

    def strategy(self) -> Any:
        """Bounded out-of-orderness, with idleness if :attr:`idle` is set."""
        from floodmark import WatermarkStrategy  # type: ignore[attr-defined,unused-ignore]

        s = WatermarkStrategy.for_bounded_out_of_orderness(self.bound)
        return s.with_idleness(self.idle) if self.idle is not None else s

    def settings(self) -> dict[str, str]:
        """The parameters shown at the top of the summary and the report."""
        out = {
            "bound": format_duration(self.bound),
            "idle": format_duration(self.idle) if self.idle else "none",
            "emit interval": format_duration(self.emit_interval),
            "window": self.window.describe(),
        }
        if self.arrival is None:
            out["arrival"] = "row order"
        if self.allowed_lateness:
            out["allowed lateness"] = format_duration(self.allowed_lateness)
        return out

    def durations(self) -> list[tuple[str, timedelta | None, bool]]:
        """``(flag, duration, counted in event time)`` for every duration of the spec
        (event time: the bound, the window, the lateness; arrival time: the idle
        timeout, the emit interval)."""
        slide = [("--window", self.window.slide, True)] if self.window.slide else []
        return [
            ("--bound", self.bound, True),
            ("--window", self.window.size, True),
            *slide,
            ("--allowed-lateness", self.allowed_lateness, True),
            ("--idle", self.idle, False),
            ("--emit-interval", self.emit_interval, False),
        ]

    def named_columns(self) -> list[tuple[str, str | None]]:
        """``(flag, column)`` for every column the flags name."""
        return [
            ("--event-time", self.event_time),
            ("--channel", self.channel),
            ("--arrival", self.arrival),
            *[("--key", k) for k in self.keys],
            *[("--agg", a[1]) for a in self.aggs if isinstance(a, tuple)],
        ]

    def spelled(self, names: dict[str, str]) -> PipelineSpec:
        """This spec with its columns named as the input spells them (``names``, from
        :func:`floodmark.cli.inputs.check_columns`).

        Raises:
            UsageError: two ``--key`` flags name one column (``--key User --key user``).
        """
        keys_once(self.keys, names)
        return replace(
            self,
            event_time=names[self.event_time],
            channel=names[self.channel],
            arrival=None if self.arrival is None else names[self.arrival],
            keys=tuple(names[k] for k in self.keys),
            aggs=tuple(a if isinstance(a, str) else (a[0], names[a[1]]) for a in self.aggs),
        )

    def typed_columns(self) -> list[str]:
        """The columns that must be numbers or times (event time, arrival, values)."""
        values = [a[1] for a in self.aggs if isinstance(a, tuple)]
        return [self.event_time, *([self.arrival] if self.arrival else []), *values]


def check_whole_ticks(
    df: DataFrame, spec: PipelineSpec, swept: Sequence[tuple[str, timedelta | None, bool]] = ()
) -> None:
    """Refuse a duration that is not a whole number of its column's ticks (``--window
    tumbling:1500us`` over a column of ms): the library truncates it, as Flink's
    ``Duration.toMillis()`` does, and the run would silently use another value than
    the one typed (and shown in the report). ``swept``: ``analyze``'s candidates.

    Raises:
        UsageError: naming the flag, the value and the unit.
    """
    from floodmark.spark.arrival import ROW_ARRIVAL_UNIT
    from floodmark.spark.columns import time_column

    event = time_column(df, spec.event_time, spec.event_time_unit, "event_time").unit
    arrival = (
        time_column(df, spec.arrival, spec.arrival_unit, "arrival").unit
        if spec.arrival
        else ROW_ARRIVAL_UNIT
    )
    for flag, value, on_event in [*spec.durations(), *swept]:
        unit = event if on_event else arrival
        if value is not None and not whole_ticks(value, unit):
            column = (
                f"the --event-time column {spec.event_time}"
                if on_event
                else (f"the --arrival column {spec.arrival}" if spec.arrival else "row order")
            )
            raise UsageError(
                f"{flag} {format_duration(value)} is not a whole number of {unit}, the "
                f"ticks of {column}; give a multiple of 1{unit}"
            )


#: Set by Ctrl-C while Spark runs (:func:`_on_ctrl_c`).
_CTRL_C = threading.Event()


def _on_ctrl_c(signum: int, frame: FrameType | None) -> None:
    """Ctrl-C once Spark runs: Python's own ``KeyboardInterrupt``, remembered.

    PySpark's handler cancels the jobs from inside the signal handler, while the main
    thread may be in a Py4J call (a page of reentrant-call tracebacks), and the job it
    cancels then fails as "Spark failed" (exit 1). Here :func:`spark_errors` cancels
    them after, and reads any Spark failure that follows an interrupt as the interrupt.
    """
    _CTRL_C.set()
    raise KeyboardInterrupt


def start_spark(master: str, progress: Progress) -> SparkSession:
    """The local (or ``master``'s) Spark session, started quietly
    (:func:`floodmark.cli.console.jvm_console_filtered`); the progress lines then
    follow its jobs."""
    from floodmark.cli.console import interrupts_logged_once, jvm_console_filtered, spark_watch
    from floodmark.spark import local_session

    with jvm_console_filtered():
        spark = local_session(master=master, conf=QUIET_SPARK_CONF)
    interrupts_logged_once()
    _CTRL_C.clear()
    with suppress(ValueError):  # not the main thread
        signal.signal(signal.SIGINT, _on_ctrl_c)
    progress.watch = spark_watch(spark)
    return spark


#: Spark error classes and Java exceptions that say the input could not be read.
_READ_ERRORS = (
    "FAILED_READ_FILE",
    "CANNOT_READ_FILE_FOOTER",
    "PATH_NOT_FOUND",
    "FileNotFoundException",
    "ParquetDecodingException",
    "MALFORMED_RECORD_IN_PARSING",
    "CANNOT_PARSE",
)


_ERROR_CLASS = re.compile(r"\[([A-Z_]+(?:\.[A-Z_]+)*)\] (.*)")


def spark_message(text: str) -> str:
    """The telling part of a Spark error's text, on one line: a Python worker's
    exception line; else Spark's error-class message with the first cause below it
    (``Encountered error while reading file ... (java.io.IOException: ...)``); else
    the first line that is not py4j's ``An error occurred while calling``."""
    lines = [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.strip().startswith(("at ", "..."))
    ]
    if "Traceback (most recent call last)" in text:
        python = text.split("JVM stacktrace:")[0].splitlines()
        raised = [line for line in python if re.match(r"^[\w.]+(Error|Exception): ", line)]
        if raised:
            return _short(raised[-1].strip())
    for i, line in enumerate(lines):
        found = _ERROR_CLASS.search(line)
        if found:
            message = re.sub(r"\s*SQLSTATE: \w+\s*$", "", found.group(2)).rstrip(" .")
            causes = [c for c in lines[i + 1 :] if c.startswith("Caused by: ")]
            if causes and not _ERROR_CLASS.search(causes[0]):
                message += f" ({causes[0].removeprefix('Caused by: ')})"
            return _short(message)
    useful = [line for line in lines if not line.startswith("An error occurred while calling")]
    return _short((useful or ["no message"])[0].lstrip(": "))


def _short(line: str, limit: int = 400) -> str:
    return line if len(line) <= limit else line[: limit - 3] + "..."


@contextmanager
def spark_errors(source: InputFile | None) -> Iterator[None]:
    """Turn a Spark failure into one line: a user error when the input could not be
    read (exit 2), :class:`SparkFailure` otherwise (exit 1), naming Spark's log if it
    wrote one; and cancel Spark's jobs when the block fails or is interrupted, so that
    nothing writes on."""
    try:
        yield
    except BaseException as err:
        _cancel_jobs()
        if _CTRL_C.is_set() and not isinstance(err, KeyboardInterrupt):
            raise KeyboardInterrupt from None  # a job failed because it was cancelled
        if not type(err).__module__.startswith(("pyspark", "py4j")):
            raise
        text = str(err)
        message = spark_message(text)
        if SPARK_LOG.is_file() and SPARK_LOG.stat().st_size:
            message += f" (Spark's log: {SPARK_LOG})"
        if source is not None and any(e in text for e in _READ_ERRORS):
            raise UsageError(f"cannot read the input {source.path}: {message}") from None
        raise SparkFailure(f"Spark failed: {message}") from None


#: How long a failed or interrupted command waits for its cancelled jobs to stop.
CANCEL_WAIT_S = 10.0


def _cancel_jobs() -> None:
    """Cancel Spark's jobs and wait (up to :data:`CANCEL_WAIT_S`) until no job and no
    SQL command runs: a write whose Py4J call was interrupted goes on in the JVM (its
    job setup, its abort) and would recreate the staging folder the command removes
    next."""
    context = active_spark_context()
    if context is None:
        return
    with suppress(Exception):  # the JVM may be gone already
        context.cancelAllJobs()
        tracker = context.statusTracker()
        store = _sql_status(sys.modules["pyspark"])
        deadline = time.monotonic() + CANCEL_WAIT_S
        while time.monotonic() < deadline and (
            tracker.getActiveJobsIds() or (store is not None and _sql_running(store))
        ):
            time.sleep(0.05)


def _sql_status(pyspark: Any) -> Any:
    """The active session's SQL status store (its executions), None without one."""
    session = pyspark.sql.SparkSession.getActiveSession()
    return None if session is None else session._jsparkSession.sharedState().statusStore()


def _sql_running(store: Any) -> bool:
    """Whether an SQL execution has not completed (a write command included)."""
    executions = store.executionsList().iterator()
    while executions.hasNext():
        if not executions.next().completionTime().isDefined():
            return True
    return False


def pipeline(
    df: DataFrame, spec: PipelineSpec, progress: Progress, output: Path, title: str
) -> ReportInputs:
    """Windows over ``df``; results/, late/ and dropped/ written under ``output``;
    returns the report's data, counted from the outputs just written."""
    from floodmark.report import ReportInputs
    from floodmark.spark import window_aggregate

    with progress.stage("computing per-partition watermarks and windows"):
        out = window_aggregate(
            df,
            spec.strategy(),
            spec.window.build(),
            key=list(spec.keys),
            channel=spec.channel,
            arrival=spec.arrival,
            aggs=list(spec.aggs),
            allowed_lateness=spec.allowed_lateness,
            event_time=spec.event_time,
            emit_interval=spec.emit_interval,
            event_time_unit=spec.event_time_unit,
            arrival_unit=spec.arrival_unit,
            emissions=True,  # the report's per-partition views
        )
    with progress.stage("writing results/, late/, dropped/"):
        for name, frame in (("results", out.results), ("late", out.late), ("dropped", out.dropped)):
            frame.write.parquet(str(output / name))
    out.unpersist()
    with progress.stage("collecting report figures") as step:
        plan = out.timeline.plan
        ev, arr = plan.event_time, plan.arrival
        results, late, dropped = (
            df.sparkSession.read.parquet(str(output / name))
            for name in ("results", "late", "dropped")
        )
        firings = firing_table(results, ev, arr)
        parts = partition_counts(df, late, dropped, spec.channel)
        step.note(counted(parts, firings))
    from floodmark.report.partition_views import partition_views

    timeline = labelled(out.timeline.table, "min_channel", nulls=None)
    emissions = out.timeline.emissions
    if emissions is not None:  # all of them, or compacted where the input was large
        emissions = labelled(emissions, "channel", nulls=None)
    # The report's compact per-partition tables, over the run's emission grid.
    views = partition_views(timeline, emissions, span=out.timeline.span)
    return ReportInputs(
        title=title,
        settings=spec.settings(),
        timeline=timeline,
        emissions=emissions,
        lag=views.lag,
        holding=views.holding,
        idle_spans=views.idle_spans,
        partitions=labelled(parts, "partition"),
        firings=firings,
        event_unit=ev.unit,
        arrival_unit=arr.unit,
        arrival_clock=spec.arrival is not None,
    )


def firing_table(results: DataFrame, ev: Any, arr: Any) -> pa.Table:
    """One row per (window end, firing time, timing) with its number of firings,
    aggregated in Spark from the written results."""
    from pyspark.sql import functions as F

    return (
        results.select(_ticks(ev, "window_end"), _ticks(arr, "fired_at"), F.col("timing"))
        .groupBy("window_end", "fired_at", "timing")
        .agg(F.count(F.lit(1)).alias("firings"))
        .toArrow()
    )


def partition_counts(df: DataFrame, late: DataFrame, dropped: DataFrame, channel: str) -> pa.Table:
    """``partition``, ``records``, ``late``, ``dropped`` per channel value, a null
    channel its own row (last): one aggregation over the input and the two written
    side outputs, so that the totals are their row counts."""
    from pyspark.sql import functions as F

    from floodmark.spark.columns import quote

    def tagged(frame: DataFrame, kind: str) -> DataFrame:
        return frame.select(
            F.col(quote(channel)).alias("partition"),
            *[
                F.lit(int(k == kind)).cast("bigint").alias(k)
                for k in ("records", "late", "dropped")
            ],
        )

    both = tagged(df, "records").unionByName(tagged(late, "late"))
    return (
        both.unionByName(tagged(dropped, "dropped"))
        .groupBy("partition")
        .agg(*[F.sum(k).alias(k) for k in ("records", "late", "dropped")])
        .orderBy(F.col("partition").asc_nulls_last())
        .toArrow()
    )


def labelled(table: pa.Table, column: str, nulls: str | None = NULL_CHANNEL) -> pa.Table:
    """``table`` with the channel ``column`` as text (a null as ``nulls``): so that a
    null channel is a row of its own in the summary and the report, not a number."""
    import pyarrow.compute as pc

    index = table.schema.get_field_index(column)
    text = pc.cast(table.column(column), "string")
    if nulls is not None:
        text = pc.fill_null(text, nulls)
    return table.set_column(index, column, text)


def counted(parts: pa.Table, firings: pa.Table) -> str:
    """``1,000 records: 12 late, 3 dropped; 420 window results`` for a progress line."""
    import pyarrow.compute as pc

    def total(table: pa.Table, name: str) -> int:
        return int(pc.sum(table.column(name)).as_py() or 0)

    return (
        f"{total(parts, 'records'):,} records: {total(parts, 'late'):,} late, "
        f"{total(parts, 'dropped'):,} dropped; {total(firings, 'firings'):,} window results"
    )


def _ticks(column: Any, name: str) -> Any:
    """Output column ``name`` (in the input's time type) back as int64 ticks of
    ``column``'s unit, by the conversion the pipeline read its input with."""
    import dataclasses

    return dataclasses.replace(column, name=name).ticks().alias(name)


def write_report(folder: Path, inputs: ReportInputs, max_late: float | None = None) -> Path:
    """Draw the charts and write the page (``floodmark.report.html``)."""
    from floodmark.report import html

    return html.write_report(folder, inputs, max_late=max_late)


def write_run_report(folder: Path, inputs: ReportInputs) -> str | None:
    """Write a run's report into ``folder``, beside the run's outputs.

    The report is drawn from the run's own tables, so a failure here is a bug in
    floodmark, not a fault of the input, and it must not cost the outputs already
    computed (a day's backfill): the report's folder is removed, the run is moved into
    place without it, and the failure is returned for :func:`print_summary` to print
    (exit code 1, so that the bug stays visible). Ctrl-C is not caught."""
    try:
        write_report(folder, inputs)
    except Exception as err:
        shutil.rmtree(folder, ignore_errors=True)
        return f"{type(err).__name__}: {err}"
    return None


def print_summary(
    inputs: ReportInputs, target: Path, progress: Progress, report_failure: str | None = None
) -> int:
    """The terminal summary and where the report is (``target/report/index.html``);
    exit code 0, or 1 after a report that could not be drawn
    (:func:`write_run_report`)."""
    from floodmark.report.summary import render_summary

    sys.stdout.write(render_summary(inputs))
    if report_failure is not None:
        return fail(
            f"the report could not be drawn ({report_failure}); the run's other outputs "
            f"are in {target}. This is a bug in floodmark: please report it with the "
            "command line",
            code=1,
        )
    page = target / "report" / "index.html"
    sys.stdout.write(f"\nreport: {page}\n(total {progress.elapsed():.1f} s)\n")
    return 0


def checked(
    args: argparse.Namespace, argv: list[str]
) -> tuple[PipelineSpec, InputFile, OutputFolder]:
    """``run``'s or ``analyze``'s spec, input and output folder, checked before Spark
    starts (the output's staging folder made)."""
    spec = PipelineSpec.from_args(args)
    source = check_input(args.input, args.format)
    folder = OutputFolder.prepare(
        args.output, overwrite=args.overwrite, inputs=[args.input], command=argv
    )
    return spec, source, folder


def open_input(
    master: str,
    source: InputFile,
    spec: PipelineSpec,
    progress: Progress,
    swept: Sequence[tuple[str, timedelta | None, bool]] = (),
) -> tuple[DataFrame, PipelineSpec]:
    """Start Spark and read ``source``, its columns checked against ``spec`` and the
    durations against their columns' ticks (:func:`check_whole_ticks`); the spec
    returned names the columns as the input spells them."""
    with progress.stage(f"starting Spark and reading {source.describe()}"):
        spark = start_spark(master, progress)
        df = read_input(spark, source)
        spec = spec.spelled(check_columns(df, spec.named_columns()))
        df = typed_if_empty(df, source, spec.typed_columns())
        check_whole_ticks(df, spec, swept)
        return df, spec


def run(args: argparse.Namespace, argv: list[str]) -> int:
    """``floodmark run``."""
    spec, source, folder = checked(args, argv)
    progress = Progress(5, enabled=not args.quiet)
    with folder.staged() as staging, spark_errors(source):
        df, spec = open_input(args.master, source, spec, progress)
        inputs = pipeline(df, spec, progress, staging, f"floodmark run: {args.input}")
        with progress.stage("writing the report"):
            failure = write_run_report(staging / "report", inputs)
    return print_summary(inputs, folder.target, progress, failure)


#: The rows of ``floodmark demo`` without ``--rows``.
DEFAULT_ROWS = 1_000_000

#: The demo's idle timeout (the quiet partition's story depends on it).
DEMO_IDLE = timedelta(seconds=30)
#: The demo's pipeline over the generated stream.
DEMO_SPEC = PipelineSpec(
    event_time="event_time",
    channel="partition",
    arrival="arrival",
    keys=("key",),
    aggs=("count", ("sum", "value")),
    window=WindowSpec("tumbling", timedelta(seconds=10)),
    idle=DEMO_IDLE,
)


def demo(args: argparse.Namespace, argv: list[str]) -> int:
    """``floodmark demo``: generated stream, pipeline, report, Spark comparison
    (``--live`` is :func:`floodmark.cli.live.demo_live`, called by
    :func:`floodmark.cli.main`)."""
    import pyarrow.parquet as pq

    from floodmark.datagen import StreamSpec, generate

    rows = args.rows if args.rows is not None else DEFAULT_ROWS

    folder = OutputFolder.prepare(args.output, overwrite=args.overwrite, inputs=[], command=argv)
    progress = Progress(7, enabled=not args.quiet)
    with folder.staged() as staging, spark_errors(None):
        data = staging / "input.parquet"
        with progress.stage(f"generating {rows:,} rows"):
            spec = StreamSpec(rows=rows, partitions=16, keys=1_000, duration_ms=600_000)
            pq.write_table(generate(spec).drop(["id"]), data)
        with progress.stage("starting Spark"):
            spark = start_spark(args.master, progress)
            df = spark.read.parquet(str(data))
        title = f"floodmark demo: {rows:,} generated rows"
        inputs = pipeline(df, DEMO_SPEC, progress, staging, title)
        with progress.stage("what Spark's own watermark would drop"):
            add_spark_drops(inputs, df)
            inputs.notes.append(spark_drops_note(inputs, spec))
            inputs.notes.append(QUIET_NOTE)
        with progress.stage("writing the report"):
            failure = write_run_report(staging / "report", inputs)
    return print_summary(inputs, folder.target, progress, failure)


#: The micro-batches of Spark's own query in the demo's comparison: arrivals of this span.
DEMO_TRIGGER = timedelta(seconds=10)


def add_spark_drops(
    inputs: ReportInputs,
    df: DataFrame,
    trigger_interval: timedelta = DEMO_TRIGGER,
    no_data_batches: bool = True,
) -> None:
    """Add what Spark's own global watermark would drop from the demo's stream ``df``
    (``withWatermark`` of the demo's bound, the demo's windows, micro-batches of
    ``trigger_interval`` of arrivals, a batch at an empty trigger when
    ``no_data_batches``): a ``spark_dropped`` column per partition."""
    import pyarrow as pa

    from floodmark.spark.baseline import spark_global_watermark_late

    base = spark_global_watermark_late(
        df,
        event_time=DEMO_SPEC.event_time,
        arrival="arrival",
        channel=DEMO_SPEC.channel,
        delay=DEMO_SPEC.bound,
        trigger_interval=trigger_interval,
        window_size=DEMO_SPEC.window.size,
        no_data_batches=no_data_batches,
    ).toArrow()
    base = labelled(base, "channel")
    drops = dict(zip(base["channel"].to_pylist(), base["spark_dropped"].to_pylist(), strict=True))
    assert inputs.partitions is not None, "the pipeline counts every partition"
    keys = inputs.partitions["partition"].to_pylist()
    inputs.partitions = inputs.partitions.append_column(
        "spark_dropped", pa.array([drops.get(k, 0) for k in keys], pa.int64())
    )


def spark_drops_note(inputs: ReportInputs, spec: StreamSpec) -> str:
    """The demo's note on Spark's drops, with the lagging partition's own numbers (a
    small demo's lagging partition can go idle before its first record and come back
    behind the others: then floodmark finds its records late too, as Flink would)."""
    assert inputs.partitions is not None and spec.lagging_partition is not None
    rows = {r["partition"]: r for r in inputs.partitions.to_pylist()}
    lagging = rows.get(str(spec.lagging_partition), {})  # labelled: text
    records, late = lagging.get("records", 0), lagging.get("late", 0)
    dropped = lagging.get("spark_dropped", 0)
    return (
        "Spark drops: records Spark Structured Streaming's single global watermark "
        f"(withWatermark {format_duration(DEMO_SPEC.bound)}, "
        f"{format_duration(DEMO_TRIGGER)} micro-batches) would have dropped from the same "
        f"{format_duration(DEMO_SPEC.window.size)} windows. Of the {records:,} records of "
        f"partition {spec.lagging_partition}, "
        f"which lags {spec.lag_ms // 1000} s, Spark would drop {dropped:,}; floodmark's "
        f"per-partition watermarks find {late:,} late."
    )


#: The demos' note on the partition that goes quiet.
QUIET_NOTE = (
    "The quiet partition went silent and came back with a backlog. After the "
    f"{format_duration(DEMO_IDLE)} idle "
    "timeout the others moved time on without it, so its backlog arrives late, in "
    "floodmark as in Flink: that is the price of not waiting. `floodmark analyze` shows "
    "what each idle timeout and bound costs."
)


def analyze(args: argparse.Namespace, argv: list[str]) -> int:
    """``floodmark analyze``: sweep bounds, print the table, recommend one."""
    spec, source, folder = checked(args, argv)
    progress = Progress(3, enabled=not args.quiet)
    swept = [("--bounds", b, True) for b in args.bounds]
    swept += [("--idle", i, False) for i in args.idle or []]
    with folder.staged() as staging, spark_errors(source):
        df, spec = open_input(args.master, source, spec, progress, swept)
        with progress.stage(f"replaying {len(args.bounds)} bounds"):
            from floodmark.spark.analyze import (  # type: ignore[import-not-found,unused-ignore]
                analyze_bounds,
            )

            table: pa.Table = analyze_bounds(
                df,
                bounds=list(args.bounds),
                idle_timeouts=list(args.idle or [None]),
                window=spec.window.build(),
                key=list(spec.keys),
                channel=spec.channel,
                arrival=spec.arrival,
                event_time=spec.event_time,
                emit_interval=spec.emit_interval,
                event_time_unit=spec.event_time_unit,
                arrival_unit=spec.arrival_unit,
            )
        with progress.stage("writing the report"):
            from floodmark.report import ReportInputs
            from floodmark.report.recommend import recommend_bound

            rec = recommend_bound(table, args.max_late)
            if rec:
                line = rec.sentence(args.max_late)
            elif not any(table.column("records").to_pylist()):
                line = "the input has no record to place: nothing to recommend"
            else:
                line = f"no bound meets --max-late {args.max_late:g}; try larger --bounds"
            shown = ("emit interval", "window", "arrival")  # not the run's bound and idle
            settings = {k: v for k, v in spec.settings().items() if k in shown}
            settings["max late"] = f"{args.max_late:g}"
            inputs = ReportInputs(
                title=f"floodmark analyze: {args.input}",
                analysis=table,
                notes=[line],
                settings=settings,
                arrival_clock=spec.arrival is not None,
            )
            write_report(staging, inputs, max_late=args.max_late)
    from floodmark.report.summary import text_table

    page = folder.target / "index.html"
    sys.stdout.write(text_table(table) + "\n\n" + line + f"\nreport: {page}\n")
    return 0


__all__ = [
    "DEMO_SPEC",
    "PipelineSpec",
    "analyze",
    "demo",
    "dispatch",
    "pipeline",
    "run",
]
