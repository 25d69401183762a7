"""Can the executors' Python import floodmark? Asked once per SparkContext, before
floodmark's first Python task.

floodmark's Python tasks (the keyed window operator, the timeline builder over a large
bucket table, unpacking the cached outputs) are functions of floodmark's own modules,
which Spark pickles by reference: an executor whose Python lacks floodmark fails while
unpickling them, inside a task, with ``ModuleNotFoundError: No module named
'floodmark'`` after the task's retries, in a Java stack trace. So before the first of
them :func:`require_floodmark` runs one small job of its own: a probe function that
unpickles without floodmark (it is built from a code object, so Spark's cloudpickle
ships it by value, and it imports floodmark only when it runs) tries ``import
floodmark._core`` on ``defaultParallelism`` tasks and returns the host, the Python and
the version it found, or the error. A failure, or another floodmark version than the
driver's, raises :class:`~floodmark.exceptions.ExecutorEnvironmentError` on the driver
naming the executors' Python and what to install (docs/spark.md, "Running on a
cluster"). A success is remembered per SparkContext and Python (``PYSPARK_PYTHON``),
so later calls cost nothing; a failure is not, so the check runs again once the nodes
are fixed.

A ``local`` master whose executors run the driver's own interpreter
(``PYSPARK_PYTHON`` is ``sys.executable``, as :func:`~floodmark.spark.local_session`
sets it by default) is not probed: its Python workers are that interpreter, started
from the driver's environment, and import what the driver imported. The job costs
~0.2 s in a warm local session, but as a fresh session's first job on Spark's RDD
path it took 5-6 s, ~4 s more than the first floodmark job alone (2-core machine
under load; every run of the command line would pay it). Any other local Python is
probed. On a cluster it took 0.4-0.6 s once the executors had run Python, up to ~4 s
as an application's first RDD job. Spark Connect sessions have no ``SparkContext`` to
run the probe on: they are not checked.
"""

from __future__ import annotations

import builtins
import sys
import threading
import types
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from floodmark.exceptions import ExecutorEnvironmentError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Where the error messages send the user.
DOCS = "docs/spark.md#running-on-a-cluster"

_lock = threading.Lock()
#: (application id, executors' Python) pairs that passed the check.
_checked: set[tuple[str, str]] = set()


def _probe(_: Iterable[object]) -> Iterator[tuple[str, str, str, str]]:
    """What one executor's Python finds: ``(host, sys.executable, "ok" | "error",
    version | error)``. Runs on the executors; its code is shipped by value."""
    import socket
    import sys

    try:
        import floodmark._core

        found = ("ok", str(floodmark._core.__version__))
    except BaseException as err:  # reported on the driver, whatever it is
        found = ("error", f"{type(err).__name__}: {err}")
    yield (socket.gethostname(), sys.executable, *found)


def probe_function() -> Any:
    """:func:`_probe` as a function of no module: cloudpickle pickles a function by
    reference when it can find it in an importable module (here ``floodmark``, which
    the executor may lack), by value otherwise."""
    return types.FunctionType(_probe.__code__, {"__builtins__": builtins}, "floodmark_probe")


def require_floodmark(spark: SparkSession) -> None:
    """Raises :class:`~floodmark.exceptions.ExecutorEnvironmentError` unless the
    executors' Python imports the driver's floodmark version; runs one small Spark job
    the first time for each SparkContext (see the module's docstring)."""
    try:
        context = spark.sparkContext
    except Exception:  # Spark Connect: no SparkContext to run the probe on
        return
    python = str(context.pythonExec)
    if python == sys.executable and str(context.master).startswith("local"):
        return
    key = (str(context.applicationId), python)
    if key in _checked:
        return
    with _lock:
        if key in _checked:
            return
        check(context, python)
        _checked.add(key)


def floodmark_on_executors(spark: SparkSession) -> bool:
    """Whether :func:`require_floodmark` passes: for a choice made for speed alone
    (the records path), which must not make a call fail that a path running only
    Spark SQL would complete."""
    try:
        require_floodmark(spark)
    except ExecutorEnvironmentError:
        return False
    return True


def check(context: Any, python: str) -> None:
    """Runs the probe on ``context`` and raises if an executor lacks floodmark."""
    from floodmark import __version__

    where = f"PYSPARK_PYTHON={python}"
    tasks = max(1, int(context.defaultParallelism))
    description = context.getLocalProperty("spark.job.description")
    context.setJobDescription("floodmark: can the executors' Python import floodmark?")
    try:
        found = context.parallelize(range(tasks), tasks).mapPartitions(probe_function()).collect()
    except Exception as err:
        raise ExecutorEnvironmentError(
            f"the executors could not run their Python ({where}): {task_error(err)}; set "
            "PYSPARK_PYTHON to a Python with floodmark on every node, or ship a packed "
            f"environment with spark.archives: see {DOCS}",
            python=python,
        ) from err
    finally:
        context.setJobDescription(description)
    # Import errors first, then other versions; each names one executor's Python.
    for host, executable, status, detail in sorted(set(found), key=lambda r: (r[2], r)):
        at = f"{where}{'' if executable == python else ', ' + executable} on {host}"
        if status != "ok":
            raise ExecutorEnvironmentError(
                f"the executors' Python ({at}) cannot import floodmark ({detail}); install "
                f"the floodmark wheel ({__version__}, as on the driver) on every node, or "
                f"ship a packed environment with spark.archives: see {DOCS}",
                python=python,
            )
        if detail != __version__:
            raise ExecutorEnvironmentError(
                f"the executors' Python ({at}) has floodmark {detail}, the driver "
                f"{__version__}: install the same floodmark wheel on the driver and every "
                f"node, or ship it in a packed environment with spark.archives: see {DOCS}",
                python=python,
            )


def task_error(err: BaseException) -> str:
    """The first line of the Java exception that failed the probe's job (a Python that
    does not exist, say), without Spark's stage and task prefix."""
    text = str(getattr(err, "java_exception", None) or err)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if "Cannot run program" in line or "Exception:" in line or "Error:" in line:
            return line.split("): ", 1)[-1] if "Lost task" in line else line
    return lines[0] if lines else type(err).__name__


__all__ = ["DOCS", "probe_function", "require_floodmark"]
