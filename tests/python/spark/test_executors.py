"""The check that the executors' Python has floodmark (``floodmark.spark.executors``)
on the local session; test_cluster.py runs it on a cluster whose executors lack it."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from spark_helpers import jobs

from floodmark.spark import executors
from floodmark.spark.executors import probe_function, require_floodmark


def test_a_local_master_running_the_drivers_python_is_not_probed(
    spark: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(spark.sparkContext, "pythonExec", sys.executable)  # local_session's
    before = jobs(spark)
    require_floodmark(spark)
    assert jobs(spark) == before


def test_any_other_python_is_probed_once(spark: Any, monkeypatch: Any) -> None:
    """The same interpreter spelled another way is probed (one job), then remembered."""
    sc = spark.sparkContext
    python = os.path.join(os.path.dirname(sys.executable), ".", os.path.basename(sys.executable))
    assert python != sys.executable
    monkeypatch.setattr(sc, "pythonExec", python)
    before = jobs(spark)
    require_floodmark(spark)
    assert jobs(spark) == before + 1
    assert (sc.applicationId, python) in executors._checked
    require_floodmark(spark)
    assert jobs(spark) == before + 1


def test_the_probe_unpickles_without_floodmark() -> None:
    """Spark pickles the probe by value: a Python that cannot import floodmark
    unpickles and runs it, and it reports the ImportError."""
    from pyspark import cloudpickle

    import floodmark

    assert next(iter(probe_function()([0])))[2:] == ("ok", floodmark.__version__)
    payload = cloudpickle.dumps(probe_function())
    script = (
        "import pickle, sys; sys.modules['floodmark'] = None; "
        "print(*list(pickle.loads(sys.stdin.buffer.read())([0]))[0][2:])"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], input=payload, capture_output=True, check=True
    )
    status, detail = done.stdout.decode().strip().split(" ", 1)
    assert status == "error" and detail.startswith("ModuleNotFoundError:") and "floodmark" in detail
