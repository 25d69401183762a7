"""Every generator on Spark: punctuated generators and user Python generators run per
channel on the executors and equal the engine in one process (``floodmark.replay``),
row for row, with several channels and idleness on; fed in small Arrow batches (the
per-channel driver continues across chunks) and with the valve in one Spark task."""

from __future__ import annotations

import itertools
import sys
import threading
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from floodmark import (
    EventTimeSessionWindows,
    TumblingEventTimeWindows,
    WatermarkStrategy,
    drive,
)
from floodmark.datagen import StreamSpec, generate
from floodmark.exceptions import SchemaError
from floodmark.replay import replay
from floodmark.spark import (
    assign_watermarks,
    lookup,
    per_channel,
    watermark_timeline,
    window_aggregate,
)

SPEC = StreamSpec(
    rows=4_000,
    partitions=4,
    keys=20,
    duration_ms=90_000,
    disorder_ms=1_500,
    lag_ms=6_000,
    quiet_partition=1,
    quiet_from_ms=30_000,
    quiet_for_ms=20_000,
    very_late_fraction=0.01,
    very_late_ms=15_000,
    timestamp_granularity_ms=10,
)


class Bounded:
    """A user generator: bounded out-of-orderness (500 ms), written as Flink's
    ``WatermarkGenerator`` in Python."""

    def __init__(self) -> None:
        self.high = -(2**63) + 501

    def on_event(self, timestamp: int, output: Any) -> None:
        self.high = max(self.high, timestamp)

    def on_periodic_emit(self, output: Any) -> None:
        output.emit_watermark(self.high - 501)


def make_bounded() -> Bounded:
    return Bounded()


class FloatWatermarks(Bounded):
    """A user generator that emits a float: floodmark refuses it, naming ``ts``."""

    def on_periodic_emit(self, output: Any) -> None:
        output.emit_watermark(2.5)


class Refuses(Bounded):
    """A user generator whose own code raises on a record past ``LIMIT``."""

    LIMIT = 10_000

    def on_event(self, timestamp: int, output: Any) -> None:
        if timestamp > self.LIMIT:
            raise ArithmeticError(f"no watermark past {self.LIMIT}, got {timestamp}")
        super().on_event(timestamp, output)


class Unpicklable(Exception):
    """An exception that cannot travel back from the executor: it holds a lock."""

    def __init__(self) -> None:
        super().__init__("held a lock")
        self.lock = threading.Lock()


class RefusesUnpicklably(Bounded):
    def on_periodic_emit(self, output: Any) -> None:
        raise Unpicklable()


STRATEGIES = {
    "punctuated+idle": WatermarkStrategy.for_punctuated("marker").with_idleness(
        timedelta(seconds=2)
    ),
    "python+idle": WatermarkStrategy.for_generator(make_bounded).with_idleness(
        timedelta(seconds=3)
    ),
}


@pytest.fixture(scope="module", autouse=True)
def by_value() -> None:
    """The user generator's module is not importable on the executors: pickle it by
    value (as a generator defined in a notebook is)."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def table() -> pa.Table:
    t = generate(SPEC)
    ev = t["event_time"].to_numpy()
    rng = np.random.default_rng(5)
    marks = rng.random(t.num_rows) < 0.1  # one record in ten carries a watermark
    marker = pa.array(np.where(marks, ev - 700, 0), mask=~marks)
    return t.append_column("marker", marker)


@pytest.fixture(params=["driver", "small-batches-one-task"])
def layout(request: pytest.FixtureRequest, spark: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param != "driver":
        monkeypatch.setattr(per_channel, "MAX_DRIVER_EMISSIONS", 10)
        key = "spark.sql.execution.arrow.maxRecordsPerBatch"
        before = spark.conf.get(key)
        spark.conf.set(key, "37")
        request.addfinalizer(lambda: spark.conf.set(key, before))
    return str(request.param)


def engine(table: pa.Table, strategy: WatermarkStrategy, **kwargs: Any) -> Any:
    return replay(
        table, strategy, event_time="event_time", channel="partition", arrival="arrival", **kwargs
    )


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_assign_and_timeline_equal_the_engine(
    spark: Any, table: pa.Table, name: str, layout: str
) -> None:
    strategy = STRATEGIES[name]
    frame = spark.createDataFrame(table)
    args = {"event_time": "event_time", "channel": "partition", "arrival": "arrival"}
    got = assign_watermarks(frame, strategy, **args).toArrow().sort_by("id")
    want = engine(table, strategy)
    records = want.records.sort_by("id")
    minimum = -(2**63)
    for column in ("channel_watermark", "watermark"):
        values = [minimum if v is None else v for v in got[column].to_pylist()]
        assert values == records[column].to_pylist(), column
    assert got["is_late"].to_pylist() == records["is_late"].to_pylist()
    assert 0 < sum(records["is_late"].to_pylist()) < table.num_rows
    timeline = watermark_timeline(frame, strategy, **args).toArrow()
    cols = ["time", "watermark", "status", "min_channel"]
    assert timeline.select(cols).to_pylist() == want.timeline.select(cols).to_pylist()
    assert "idle" in timeline["status"].to_pylist()


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_emissions_asked_for_come_when_the_valve_runs_in_a_task(
    spark: Any, table: pa.Table, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``emissions=True`` with more channel emissions than the driver takes (the valve
    merged in a Spark task) returned none; they come compacted for the report's views,
    equal to the driver's whole streams compacted to the same bins."""
    from floodmark.report.partition_views import bin_edges, compact_emissions

    kw: dict[str, Any] = {"key": "key", "event_time": "event_time", "channel": "partition"}
    kw |= {"arrival": "arrival", "emissions": True}
    window = TumblingEventTimeWindows.of(timedelta(seconds=5))
    frame = spark.createDataFrame(table)
    whole = window_aggregate(frame, STRATEGIES[name], window, **kw).timeline.emissions
    monkeypatch.setattr(per_channel, "MAX_DRIVER_EMISSIONS", 10)
    got = window_aggregate(frame, STRATEGIES[name], window, **kw).timeline.emissions
    assert whole is not None and got is not None
    arrivals = table["arrival"].to_numpy()
    edges = bin_edges(-(-arrivals.min() // 200) * 200, -(-arrivals.max() // 200) * 200)
    want = compact_emissions(whole, edges)
    assert 0 < want.num_rows < whole.num_rows
    assert got.to_pylist() == want.to_pylist()


@pytest.mark.parametrize("name", list(STRATEGIES))
@pytest.mark.parametrize(
    "window",
    [TumblingEventTimeWindows.of(timedelta(seconds=5)), EventTimeSessionWindows.with_gap(1500)],
    ids=["tumbling", "session"],
)
def test_windows_equal_the_engine(
    spark: Any, table: pa.Table, name: str, window: Any, layout: str
) -> None:
    strategy = STRATEGIES[name]
    aggs = ["count", ("sum", "value")]
    out = window_aggregate(
        spark.createDataFrame(table),
        strategy,
        window,
        key="key",
        event_time="event_time",
        channel="partition",
        arrival="arrival",
        aggs=aggs,
        allowed_lateness=timedelta(seconds=2),
    )
    want = engine(table, strategy, window=window, key="key", aggs=aggs, allowed_lateness=2000)

    def rows(t: Any, cols: list[str]) -> Counter[tuple[Any, ...]]:
        t = t if isinstance(t, pa.Table) else t.toArrow()
        return Counter(zip(*[t[c].to_pylist() for c in cols], strict=True))

    res = ["key", "window_start", "window_end", "count", "sum_value", "watermark", "timing"]
    assert rows(out.results, [*res, "fired_at"]) == rows(want.results, [*res, "trigger_time"])
    late = [*table.column_names, "watermark"]
    assert rows(out.late, late) == rows(want.late, late)
    assert want.late.num_rows > 0
    out.unpersist()


def test_a_punctuated_marker_of_another_type_is_refused(spark: Any, table: pa.Table) -> None:
    frame = spark.createDataFrame(table.set_column(6, "marker", table["marker"].cast(pa.string())))
    with pytest.raises(SchemaError, match="marker") as err:
        assign_watermarks(
            frame,
            STRATEGIES["punctuated+idle"],
            event_time="event_time",
            channel="partition",
            arrival="arrival",
        )
    assert err.value.column == "marker"


def test_the_per_channel_pass_continues_a_bucket_across_chunks() -> None:
    """A channel's records cut into chunks anywhere (every way of cutting them: one
    bucket's records in two chunks, 210 in one and 220 in the next, or in many) give
    the output of one call over the whole channel (a chunk's grid must not pass
    records still to come in its last bucket)."""
    from types import SimpleNamespace

    from floodmark import drive
    from floodmark.spark.packed import unpack_local

    strategy = STRATEGIES["punctuated+idle"]
    plan = SimpleNamespace(strategy=strategy, interval=200)
    x = {
        "arrival": [50, 100, 150, 200, 210, 220, 230, 420, 430],
        "ts": [40, 90, 140, 150, 200, 215, 5, 400, 410],
    }
    marks = [None, 80, None, None, 190, 205, None, 390, None]
    n = len(marks)
    names = [per_channel._CH, per_channel._ARR, per_channel._TS, per_channel._MARK]
    whole = pa.table(
        [
            pa.array(["x"] * n),
            pa.array(x["arrival"]),
            pa.array(x["ts"]),
            pa.array(marks, pa.int64()),
        ],
        names=names,
    )
    tail = pa.table(
        [pa.array(["y"]), pa.array([600]), pa.array([599]), pa.array([None], pa.int64())],
        names=names,
    )
    want = drive(
        strategy, x["ts"], x["arrival"], emit_interval=200, start=50, until=600, marker=marks
    )
    wanted = want.emissions.select(["time", "kind", "watermark"]).to_pylist()
    for k in range(n):
        for cuts in itertools.combinations(range(1, n), k):
            edges = [0, *cuts, n]
            chunks = [whole.slice(a, b - a) for a, b in itertools.pairwise(edges)]
            chunks[-1] = pa.concat_tables([chunks[-1], tail])
            run = per_channel.channel_runner(plan, pa.array(["x", "y"]), 50, 600, names, True)
            task = run(iter([b for c in chunks for b in c.to_batches()]))  # one Spark task
            got = list(unpack_local(pa.Table.from_batches(list(task))))
            emitted = pa.Table.from_batches([b for kind, b in got if kind == "emissions"])
            mine = emitted.filter(pa.compute.equal(emitted["channel"], 0))
            assert mine.select(["time", "kind", "watermark"]).to_pylist() == wanted, cuts
            records = pa.Table.from_batches([b for kind, b in got if kind == "records"])
            assert records["channel_watermark"].to_pylist()[:n] == (
                want.record_watermark.to_pylist()
            ), cuts


def test_a_timeline_too_long_to_ship_is_refused_naming_the_marker(
    spark: Any, table: pa.Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The records read a punctuated generator's combined watermark from its timeline,
    shipped to the executors up to a bound; above it the error names the marker column
    (it named its own message as the column)."""
    from floodmark.exceptions import InvalidInputError

    monkeypatch.setattr(lookup, "MAX_SHIPPED_TIMELINE", 3)
    with pytest.raises(InvalidInputError, match=r"grew .* times") as err:
        assign_watermarks(
            spark.createDataFrame(table),
            STRATEGIES["punctuated+idle"],
            event_time="event_time",
            channel="partition",
            arrival="arrival",
        )
    assert err.value.column == "marker"
    kw: dict[str, Any] = {"event_time": "event_time", "channel": "partition", "arrival": "arrival"}
    window = TumblingEventTimeWindows.of(timedelta(seconds=5))
    with pytest.raises(InvalidInputError, match=r"grew .* times") as err:
        window_aggregate(  # the keyed operator's advances are the same timeline
            spark.createDataFrame(table), STRATEGIES["punctuated+idle"], window, key="key", **kw
        )
    assert err.value.column == "marker"
    periodic = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=1))
    out = window_aggregate(spark.createDataFrame(table), periodic, window, key="key", **kw)
    assert len(out.timeline.advances()[0]) > 3  # a grid timeline is not bounded so


def test_a_combined_watermark_that_never_changes_and_arrivals_off_the_grid(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The valve merged in a Spark task (many emissions) while a channel that never
    emits holds the combined watermark: an empty timeline, as replay gives (it failed:
    no batch to concatenate).
    Arrivals the emission grid cannot place are refused on the driver naming the
    arrival column, as the periodic route does (a task failed naming ``start``)."""
    from floodmark.exceptions import InvalidInputError

    monkeypatch.setattr(per_channel, "MAX_DRIVER_EMISSIONS", 0)
    n = 200
    table = pa.table(  # channel 0 carries watermarks, channel 1 none
        {
            "partition": [i % 2 for i in range(n)],
            "arrival": list(range(0, 3 * n, 3)),
            "event_time": list(range(n)),
            "marker": pa.array([i if i % 2 == 0 else None for i in range(n)], pa.int64()),
        }
    )
    strategy = WatermarkStrategy.for_punctuated("marker")
    kw: dict[str, Any] = {"event_time": "event_time", "channel": "partition", "arrival": "arrival"}
    got = watermark_timeline(spark.createDataFrame(table), strategy, **kw)
    assert got.count() == 0 == replay(table, strategy, **kw).timeline.num_rows
    top = 2**63 - 1
    edge = table.slice(0, 2).set_column(1, "arrival", pa.array([top - 300, top]))
    with pytest.raises(InvalidInputError, match="emission grid") as err:
        assign_watermarks(spark.createDataFrame(edge), strategy, **kw)
    assert err.value.column == "arrival"


def test_a_user_generators_bad_watermark_is_floodmarks_error_not_a_worker_traceback(
    spark: Any, table: pa.Table
) -> None:
    """floodmark's refusal of what a user generator emits, raised in a Spark task,
    reaches the caller as that error (it came wrapped in a PythonException, after the
    task's retries)."""
    from floodmark.exceptions import InvalidParameterError

    bad = WatermarkStrategy.for_generator(FloatWatermarks)
    with pytest.raises(InvalidParameterError, match=r"2\.5") as err:
        assign_watermarks(
            spark.createDataFrame(table),
            bad,
            event_time="event_time",
            channel="partition",
            arrival="arrival",
        )
    assert err.value.parameter == "emit_watermark"  # what the generator called


def test_a_user_generators_own_exception_reaches_the_caller_as_in_process(
    spark: Any, table: pa.Table
) -> None:
    """An exception a user generator's own code raises in a Spark task reaches the
    caller as itself (not a PythonException, after no retry), as the engine run
    in-process raises it; a note gives the method and the traceback on the executor.
    One that cannot be pickled back comes as a FloodmarkError with its text."""
    from floodmark.exceptions import FloodmarkError

    columns = {"event_time": "event_time", "channel": "partition", "arrival": "arrival"}
    strategy = WatermarkStrategy.for_generator(Refuses)
    assert pc.max(table["event_time"]).as_py() > Refuses.LIMIT
    with pytest.raises(ArithmeticError, match="no watermark past 10000") as err:
        replay(table, strategy, **columns)
    with pytest.raises(ArithmeticError, match="no watermark past 10000") as err:
        assign_watermarks(spark.createDataFrame(table), strategy, **columns)
    assert type(err.value) is ArithmeticError
    (note,) = err.value.__notes__
    assert "test_generators.Refuses.on_event in a Spark task" in note
    assert 'raise ArithmeticError(f"no watermark past' in note  # the executor's traceback
    unpicklable = WatermarkStrategy.for_generator(RefusesUnpicklably)
    with pytest.raises(FloodmarkError, match="raised Unpicklable: held a lock") as err:
        window_aggregate(
            spark.createDataFrame(table),
            unpicklable,
            TumblingEventTimeWindows.of(timedelta(seconds=1)),
            key="key",
            **columns,
        )
    assert "RefusesUnpicklably.on_periodic_emit in a Spark task" in err.value.__notes__[0]


class Noteless(ArithmeticError):
    """An exception without notes, as every exception is on Python 3.10."""

    add_note = None


def test_without_notes_the_executors_traceback_comes_as_the_cause() -> None:
    """On Python 3.10 (no ``add_note``) a user generator's exception raised back on the
    driver carries the note as its cause instead (the machine has 3.11 only: an
    exception class without ``add_note`` stands in)."""
    from floodmark import _core
    from floodmark.exceptions import FloodmarkError
    from floodmark.spark.packed import unpack_local
    from floodmark.spark.timeline import pack_error, raise_packed

    try:
        raise Noteless("no watermark here")
    except Noteless as err:
        setattr(err, _core.RAISED_BY, "test_generators.Refuses.on_event")
        packed = pa.Table.from_batches(list(pack_error(err)))
    ((kind, batch),) = list(unpack_local(packed))
    assert kind == "error"
    with pytest.raises(Noteless, match="no watermark here") as raised:
        raise_packed(None, batch)  # type: ignore[arg-type]  # a plan only names columns
    assert not hasattr(raised.value, "__notes__")
    cause = raised.value.__cause__
    assert isinstance(cause, FloodmarkError)
    assert "test_generators.Refuses.on_event in a Spark task" in str(cause)
    assert 'raise Noteless("no watermark here")' in str(cause)  # the traceback there


def test_a_channels_records_tied_in_arrival_and_event_time_reach_it_in_marker_order(
    spark: Any,
) -> None:
    """Records of one channel equal in arrival and event time but not in marker reach a
    punctuated generator in marker order, nulls first (Spark's shuffle delivered them in
    the input's order): the channel's own emissions are those of that order whatever
    the input's order, as the records' watermarks and the combined timeline are."""
    ties = {"arrival": [100, 100, 100, 300, 300], "ts": [10, 10, 10, 20, 20]}
    marks = [7, None, 5, 30, 25]
    in_order = sorted(
        zip(ties["arrival"], ties["ts"], marks, strict=True), key=lambda r: (r[0], r[1], r[2] or -1)
    )
    strategy = WatermarkStrategy.for_punctuated("marker")
    want = drive(
        strategy,
        [r[1] for r in in_order],
        [r[0] for r in in_order],
        emit_interval=200,
        start=100,
        until=300,
        marker=[r[2] for r in in_order],
    ).emissions.select(["kind", "watermark"])
    assert want.column("watermark").to_pylist() == [5, 7, 25, 30]  # nothing is skipped
    wanted = want.to_pylist()
    rows = [
        {"partition": 0, "arrival": a, "event_time": t, "marker": m, "key": 1}
        for a, t, m in zip(ties["arrival"], ties["ts"], marks, strict=True)
    ]
    for given in (rows, rows[::-1]):
        out = window_aggregate(
            spark.createDataFrame(
                given, "partition int, arrival long, event_time long, marker long, key int"
            ),
            strategy,
            TumblingEventTimeWindows.of(timedelta(seconds=10)),
            key="key",
            channel="partition",
            arrival="arrival",
            event_time="event_time",
            emissions=True,
        )
        got = out.timeline.emissions
        assert got.select(["kind", "watermark"]).to_pylist() == wanted, given


class CountedCalls(Bounded):
    """A user generator that stops the run after 100,000 periodic calls (a run the
    grid-span bound should have refused)."""

    calls = 0

    def on_periodic_emit(self, output: Any) -> None:
        CountedCalls.calls += 1
        if CountedCalls.calls > 100_000:
            raise RuntimeError("the run went ahead: the grid-span bound was not checked")
        super().on_periodic_emit(output)


def test_a_user_generator_over_too_many_grid_times_is_refused_before_the_pass(
    spark: Any,
) -> None:
    """The bound on a user generator's grid calls (2^28) was checked per chunk of a
    channel's records, so one split into several Arrow batches ran on, for hours, where
    ``replay`` refuses it; it is checked once for the whole span, on the driver."""
    from floodmark.exceptions import InvalidParameterError

    n = 2**28
    table = pa.table(
        {"ch": [0] * 4, "arrival": [0, n // 3, 2 * n // 3, n + 1000], "ev": [0, 1, 2, 3]}
    )
    strategy = WatermarkStrategy.for_generator(CountedCalls)
    kw: dict[str, Any] = {"channel": "ch", "arrival": "arrival", "event_time": "ev"}
    kw["emit_interval"] = 1
    message = r"`emit_interval`.*268436457 grid times over the arrival span"
    with pytest.raises(InvalidParameterError, match=message):
        replay(table, strategy, **kw)
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key)
    spark.conf.set(key, "1")
    try:
        with pytest.raises(InvalidParameterError, match=message):
            assign_watermarks(spark.createDataFrame(table), strategy, **kw)
    finally:
        spark.conf.set(key, before)


def test_a_generator_the_executors_cannot_receive_is_refused_before_any_job(
    spark: Any,
) -> None:
    """A user generator's factory that does not pickle (it holds a lock) failed with a
    raw ``PicklingError`` after two jobs; refused naming ``strategy``, before any."""
    import threading

    from spark_helpers import jobs

    from floodmark.exceptions import InvalidParameterError

    lock = threading.Lock()

    def locked() -> Bounded:
        with lock:
            return Bounded()

    table = pa.table({"ch": [0, 1], "arrival": [0, 10], "ev": [0, 1]})
    frame = spark.createDataFrame(table)
    before = jobs(spark)
    with pytest.raises(InvalidParameterError, match=r"`strategy`.*cannot be sent") as err:
        assign_watermarks(
            frame,
            WatermarkStrategy.for_generator(locked),
            channel="ch",
            arrival="arrival",
            event_time="ev",
        )
    assert "lock" in str(err.value)
    assert jobs(spark) == before


def test_a_generator_whose_module_the_executors_cannot_import_is_named(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user generator's class from a module only the driver imports (a script's
    neighbour, on a cluster) failed with the worker's traceback after Spark's retries;
    it names ``strategy`` and what to do. The Python workers here do not see the
    driver's ``sys.path`` addition, as a cluster's nodes do not see its files."""
    import importlib

    from floodmark.exceptions import InvalidParameterError

    (tmp_path / "fm_driver_only_gens.py").write_text(
        "class Ascending:\n"
        "    def __init__(self):\n"
        "        self.top = None\n"
        "    def on_event(self, event_time, timestamp, output):\n"
        "        self.top = event_time if self.top is None else max(self.top, event_time)\n"
        "    def on_periodic_emit(self, output):\n"
        "        if self.top is not None:\n"
        "            output.emit_watermark(self.top - 1)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("fm_driver_only_gens")
    table = pa.table({"ch": [0, 1], "arrival": [0, 10], "ev": [0, 1]})
    with pytest.raises(InvalidParameterError, match=r"`strategy`.*cannot unpickle") as err:
        assign_watermarks(
            spark.createDataFrame(table),
            WatermarkStrategy.for_generator(module.Ascending),
            channel="ch",
            arrival="arrival",
            event_time="ev",
        )
    assert "fm_driver_only_gens" in str(err.value) and "register_pickle_by_value" in str(err.value)
