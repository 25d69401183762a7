"""The Spark sessions of the tests (Spark tests are marked `spark`).

Every test gets one local session (`local[2]`) through the `spark` fixture. The tests of
:data:`ON_CLUSTER` that use it run twice, on that session and (marked `cluster`) on a
Spark standalone cluster of two workers on 127.0.0.1, started from the installed
pyspark (``spark_cluster``): the same test bodies, the same assertions. One process
holds one SparkContext at a time, so the cluster's tests run after every other test
(`pytest_collection_modifyitems`), and the session switches once: local, then the
cluster, then the cluster whose executors lack floodmark (`bare_spark`). The cluster
starts once per test session, when the first test needs it, and stops at its end;
the teardown fails if any of its processes had to be killed.
`pytest -m "not cluster"` leaves the cluster out.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jvm_archive import make_archive, submit_options
from spark_cluster import Sessions

#: The modules whose Spark tests also run on the cluster. `analyze_bounds` runs there
#: in test_cluster.py, whose outputs equal the local session's table for table; its
#: equality with the full pipeline at each bound is checked locally (test_analyze.py).
ON_CLUSTER = {
    "test_equality.py",
    "test_conservation_and_errors.py",
    "test_cluster.py",
}
#: The modules that run in `make pytest-side` (marker `side`) with the cluster's tests:
#: the crash tests (live queries killed in subprocesses), test_cluster.py whole (its
#: local case is what the cluster's outputs are compared with), and the command line's
#: Spark runs and the Kafka ones, which balance the two processes (side by side in CI,
#: 2026-11-26: 18.5 and 16.5 minutes with the Kafka ones in the main process).
SIDE = {
    "test_cluster.py",
    "test_streaming_crash.py",
    "test_cli_spark.py",
    "test_cli_live.py",
    "test_streaming_kafka.py",
    "test_kafka.py",
}
#: The order in which the kinds of session start (each once).
ORDER = {"local": 0, "cluster": 1, "bare": 2}
TIMINGS: dict[str, float] = {}


@pytest.fixture(scope="session")
def spark_sessions() -> Iterator[Sessions]:
    sessions = Sessions()
    try:
        yield sessions
    finally:
        left = sessions.close()
        TIMINGS.update(sessions.timings)
        assert not left, f"the cluster's processes did not stop by themselves: {left}"


@pytest.fixture(scope="session")
def spark(request: pytest.FixtureRequest, spark_sessions: Sessions) -> Any:
    """The local session, or (``[cluster]``) a session on the cluster."""
    return spark_sessions.get(getattr(request, "param", "local"))


@pytest.fixture
def cluster_spark(spark_sessions: Sessions) -> Any:
    """A session on the cluster, its executors running the shipped environment."""
    return spark_sessions.get("cluster")


@pytest.fixture
def bare_spark(spark_sessions: Sessions) -> Any:
    """A session on the cluster whose executors' Python lacks floodmark."""
    return spark_sessions.get("bare")


@pytest.fixture(scope="session")
def jvm_archive(tmp_path_factory: pytest.TempPathFactory) -> str | None:
    """The JVM options that map the class-data archive (jvm_archive.py), made on first
    use; None where it could not be made."""
    return make_archive(tmp_path_factory.mktemp("jvm-archive"))


@pytest.fixture
def spark_subprocesses(jvm_archive: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Spark driver JVMs this test starts in subprocesses map the archive (they
    start seconds faster; nothing else changes)."""
    if jvm_archive:
        monkeypatch.setenv("SPARK_SUBMIT_OPTS", submit_options(jvm_archive))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "spark" in metafunc.fixturenames and Path(str(metafunc.definition.path)).name in ON_CLUSTER:
        metafunc.parametrize("spark", ["local", "cluster"], indirect=True, scope="session")


def session_kind(item: pytest.Item) -> str:
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "spark" in callspec.params:
        return str(callspec.params["spark"])
    names = getattr(item, "fixturenames", ())
    return "bare" if "bare_spark" in names else "cluster" if "cluster_spark" in names else "local"


def pytest_itemcollected(item: pytest.Item) -> None:
    if "tests/python/spark" in str(item.fspath):
        item.add_marker(pytest.mark.spark)
    if session_kind(item) != "local":
        item.add_marker(pytest.mark.cluster)
    if session_kind(item) != "local" or Path(str(item.fspath)).name in SIDE:
        item.add_marker(pytest.mark.side)


@pytest.hookimpl(trylast=True)  # after pytest's own reordering
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: ORDER[session_kind(item)])  # stable: each kind starts once


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if TIMINGS:
        spent = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in TIMINGS.items())
        terminalreporter.write_line(f"spark sessions: {spent}")
