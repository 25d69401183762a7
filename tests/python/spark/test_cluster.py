"""floodmark on a real Spark standalone cluster (two workers on 127.0.0.1, each with its
own executor JVM and Python workers; see ``spark_cluster``): its outputs equal the
local session's, and executors whose Python lacks floodmark fail with a message saying
what to install, before any task of floodmark's runs.

The equality and conservation tests run on the cluster too (the conftest's
``ON_CLUSTER``); this module adds what only a cluster shows."""

from __future__ import annotations

import builtins
import dataclasses
import os
import time
import types
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pytest
from spark_cluster import listening
from spark_helpers import jobs, judged_to_reduce
from test_equality import SPEC, STRATEGIES, WINDOWS, check_assign

from floodmark import TumblingEventTimeWindows
from floodmark.datagen import generate
from floodmark.exceptions import ExecutorEnvironmentError
from floodmark.replay import replay
from floodmark.spark import (
    analyze_bounds,
    assign_watermarks,
    watermark_timeline,
    window_aggregate,
    windows,
)
from floodmark.spark.executors import DOCS, check, floodmark_on_executors, require_floodmark

COLS = {"event_time": "event_time", "channel": "partition", "arrival": "arrival"}
STRATEGY = STRATEGIES["bounded+idle"]
AGGS = ["count", ("sum", "value"), ("max", "value"), ("first", "value"), ("last", "value")]
#: Window kinds and paths whose outputs are compared (the keyed ones with the native
#: path turned off, as test_equality does).
RUNS = [
    ("tumbling+lateness", "native"),
    ("sliding", "native"),
    ("sliding", "keyed"),
    ("session", "keyed"),
]


def by_value(function: Callable[..., Any]) -> Any:
    """``function`` as Spark's cloudpickle ships it by value: the executors cannot import
    the test modules."""
    return types.FunctionType(function.__code__, {"__builtins__": builtins}, function.__name__)


@pytest.fixture(scope="module")
def table() -> pa.Table:
    """test_equality's stream, shorter, with 25 event times null."""
    return generate(dataclasses.replace(SPEC, rows=6_000, null_event_times=25))


@pytest.fixture(scope="session")
def recorded() -> dict[str, dict[str, pa.Table]]:
    """The outputs of each kind of session, as the tests record them."""
    return {}


def canonical(t: pa.Table) -> pa.Table:
    return t.sort_by([(c, "ascending") for c in t.column_names])


def every_output(spark: Any, table: pa.Table, monkeypatch: pytest.MonkeyPatch) -> dict:
    """Each function's output on ``table``, as sorted Arrow tables."""
    df = spark.createDataFrame(table)
    got = {
        "assign_watermarks": assign_watermarks(df, STRATEGY, **COLS).toArrow(),
        "watermark_timeline": watermark_timeline(df, STRATEGY, **COLS).toArrow(),
        "analyze_bounds": analyze_bounds(
            df,
            bounds=[timedelta(0), timedelta(seconds=1), timedelta(seconds=5)],
            idle_timeouts=[None, timedelta(seconds=5)],
            window=TumblingEventTimeWindows.of(timedelta(seconds=10)),
            key="key",
            **COLS,
        ),
    }
    for name, path in RUNS:
        window, lateness = WINDOWS[name]
        with monkeypatch.context() as patch:
            if path == "keyed":
                patch.setattr(windows, "native_outputs", lambda *args: None)
            out = window_aggregate(
                df, STRATEGY, window, key="key", aggs=AGGS, allowed_lateness=lateness, **COLS
            )
        assert (out.cached is None) is (path == "native")
        for kind in ("results", "late", "dropped"):
            got[f"{name} {path} {kind}"] = getattr(out, kind).toArrow()
        out.unpersist()
    return {name: canonical(t) for name, t in got.items()}


def test_outputs_are_identical_on_local_and_cluster(
    spark: Any, table: pa.Table, recorded: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every output (both window paths, late and dropped rows, assign, the timeline,
    the analysis) is the same table, types included, on the cluster as on local."""
    kind = "local" if spark.sparkContext.master.startswith("local") else "cluster"
    if kind == "cluster" and "local" not in recorded:
        if os.environ.get("FLOODMARK_TEST_SHARD") == "side":  # make test: must compare
            pytest.fail("the [local] case did not run before the [cluster] one")
        pytest.skip("compares with the [local] case, which did not run")
    recorded[kind] = every_output(spark, table, monkeypatch)
    assert recorded[kind]["session keyed results"].num_rows > 0
    assert recorded[kind]["tumbling+lateness native late"].num_rows > 0
    assert recorded[kind]["sliding keyed results"]["timing"].to_pylist().count("late") > 0
    if kind == "local":
        return
    local, cluster = recorded["local"], recorded["cluster"]
    assert local.keys() == cluster.keys()
    for name in local:
        assert cluster[name].schema == local[name].schema, name
        assert cluster[name].equals(local[name]), name


def test_executors_are_processes_of_their_own(cluster_spark: Any) -> None:
    """Two executors, each a JVM of its own (not the driver's), each running Python
    workers from the environment shipped with spark.archives."""
    sc = cluster_spark.sparkContext
    assert sc.master.startswith("spark://127.0.0.1:")

    def where(_: Any) -> Any:
        import os
        import sys
        from pathlib import Path

        daemon = Path(f"/proc/{os.getppid()}/stat").read_text()
        executor = int(daemon[daemon.rindex(")") + 2 :].split()[1])  # the daemon's parent
        yield (executor, os.getpid(), sys.executable, os.path.realpath(os.getcwd()))

    found = set(sc.parallelize(range(8), 8).mapPartitions(by_value(where)).collect())
    executors = {row[0] for row in found}
    driver_jvm = sc._gateway.proc.pid
    assert len(executors) == 2 and driver_jvm not in executors, (found, driver_jvm)
    assert not {row[1] for row in found} & {os.getpid(), driver_jvm}
    for _, _, python, cwd in found:
        assert python == os.path.join(cwd, "environment", "bin", "python"), (python, cwd)
        assert "/worker-" in cwd  # a worker's work dir, not the driver's
    assert len({row[3] for row in found}) == 2


def test_the_cluster_listens_on_127_0_0_1_only(cluster_spark: Any, spark_sessions: Any) -> None:
    """Master, workers, executors, their Python workers and the driver: every listening
    socket is on 127.0.0.1."""
    cluster_spark.sparkContext.parallelize(range(2), 2).count()  # Python workers up
    driver_jvm = cluster_spark.sparkContext._gateway.proc.pid
    sockets = listening(spark_sessions.cluster.pids() | {driver_jvm})
    kinds = {pid for pid, _ in sockets}
    assert len(kinds) >= 6, sockets  # master, 2 workers, 2 executors, the driver
    assert all(address.startswith("127.0.0.1:") for _, address in sockets), sockets


def test_the_check_runs_once_per_context(cluster_spark: Any) -> None:
    require_floodmark(cluster_spark)  # if no test has run a Python task yet
    before = jobs(cluster_spark)
    require_floodmark(cluster_spark)
    assert jobs(cluster_spark) == before


def test_another_floodmark_version_on_the_executors_is_refused(
    cluster_spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import floodmark

    sc = cluster_spark.sparkContext
    shipped = floodmark.__version__
    monkeypatch.setattr(floodmark, "__version__", "0.0.0-driver")
    with pytest.raises(ExecutorEnvironmentError) as err:
        check(sc, sc.pythonExec)
    assert f"has floodmark {shipped}, the driver 0.0.0-driver" in str(err.value)
    assert "/environment/bin/python on " in str(err.value)


def settled_job_statuses(sc: Any, timeout: float = 30.0) -> set[str]:
    """The statuses of the session's jobs once none is RUNNING any more: the status
    tracker learns of a job's end through the listener bus, a moment after the action
    returned."""
    tracker = sc.statusTracker()
    deadline = time.monotonic() + timeout
    while True:
        statuses = {tracker.getJobInfo(j).status for j in tracker.getJobIdsForGroup(None)}
        if "RUNNING" not in statuses or time.monotonic() > deadline:
            return statuses
        time.sleep(0.1)


def test_executors_without_floodmark_fail_with_what_to_install(
    bare_spark: Any, table: pa.Table
) -> None:
    """The keyed operator needs floodmark on the executors: the call fails on the
    driver, naming the executors' Python and what to install, and no task failed. The
    native Spark SQL path needs nothing there."""
    sc = bare_spark.sparkContext
    python = sc.pythonExec
    assert python.endswith("/bin/python") and not python.startswith(".")
    df = bare_spark.createDataFrame(table)
    window, lateness = WINDOWS["session"]
    for _ in range(2):  # a failure is not remembered: asked again
        with pytest.raises(ExecutorEnvironmentError) as err:
            window_aggregate(df, STRATEGY, window, key="key", allowed_lateness=lateness, **COLS)
        message = str(err.value)
        assert message.startswith(f"the executors' Python (PYSPARK_PYTHON={python} on "), message
        assert "cannot import floodmark (ModuleNotFoundError: No module named 'floodmark')" in (
            message
        )
        assert "install the floodmark wheel" in message and "spark.archives" in message
        assert message.endswith(f"see {DOCS}")
        assert err.value.python == python
    assert settled_job_statuses(sc) == {"SUCCEEDED"}
    # The input is sparse enough for the records path (its tasks need floodmark): the
    # choice, made for speed, falls back to the aggregation, Spark SQL here.
    # So do the native window path and the timeline (the records path came with no
    # such fallback: they failed here).
    stream = generate(SPEC)
    sparse = bare_spark.createDataFrame(stream)
    assert not judged_to_reduce(sparse, STRATEGY)
    assert not floodmark_on_executors(bare_spark)
    check_assign(bare_spark, stream, STRATEGY)
    window = TumblingEventTimeWindows.of(timedelta(seconds=10))
    out = window_aggregate(sparse, STRATEGY, window, key="key", aggs=["count"], **COLS)
    want = replay(stream, STRATEGY, window=window, key="key", **COLS)  # type: ignore[arg-type]
    assert sum(out.results.toArrow()["count"].to_pylist()) == sum(want.results["count"].to_pylist())
    assert watermark_timeline(sparse, STRATEGY, **COLS).count() == want.timeline.num_rows
    assert settled_job_statuses(sc) == {"SUCCEEDED"}


def test_executors_whose_python_does_not_start(
    bare_spark: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = str(tmp_path / "no-such-python")
    monkeypatch.setattr(bare_spark.sparkContext, "pythonExec", missing)
    with pytest.raises(ExecutorEnvironmentError) as err:
        require_floodmark(bare_spark)
    message = str(err.value)
    assert message.startswith(
        f"the executors could not run their Python (PYSPARK_PYTHON={missing})"
    )
    assert "No such file or directory" in message and message.endswith(f"see {DOCS}")
    assert len(message) < 600, message  # one line, not a Java stack trace
