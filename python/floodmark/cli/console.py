"""The terminal while Spark runs: the JVM's start-up lines kept out, Spark's progress in.

Where the lines a bare ``SparkSession`` start prints come from (PySpark 4.3, Java 17):

* ``WARNING: Using incubator modules: jdk.incubator.vector``: the JVM itself, at
  launch (Spark adds ``--add-modules=jdk.incubator.vector``); no JVM option turns it
  off. PySpark launches the JVM with ``spark-submit`` (``pyspark/java_gateway.py``),
  which inherits the Python process's stderr: :func:`jvm_console_filtered` gives it a
  pipe instead, read by a thread that passes every other line on.
* ``Setting default log level to "WARN"`` and ``To adjust logging level use
  sc.setLogLevel(newLevel)``: Spark's ``Logging``, when ``PythonGatewayServer`` starts
  it as a shell; it also lowers the root level to WARN. The command line's log4j2
  configuration (:data:`floodmark.progress.QUIET_SPARK_CONF`) gives that logger a level
  of its own, which keeps both.
* ``WARN NativeCodeLoader: Unable to load native-hadoop library``: a log4j warning,
  below the configuration's ERROR level.

Errors the JVM logs still reach the terminal.

After Ctrl-C, Py4J logs the ``KeyboardInterrupt`` that reached its socket read (and
the broken pipe of the connection it then shuts down), each with its traceback:
:func:`interrupts_logged_once` keeps those out, so that the command says
``interrupted`` once.
"""

from __future__ import annotations

import functools
import io
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Start-up lines of the JVM and Spark that say nothing to a floodmark user.
JVM_NOISE = re.compile(
    r"^(WARNING: Using incubator modules: "
    r"|Setting default log level to "
    r"|To adjust logging level use sc\.setLogLevel"
    r"|Using Spark's default log4j profile: "
    r"|.*NativeCodeLoader: Unable to load native-hadoop library)"
)


def _forward(source: int, target: int) -> None:
    """Copy lines from fd ``source`` to fd ``target`` until EOF, leaving out
    :data:`JVM_NOISE`."""
    pending = b""
    with os.fdopen(source, "rb", buffering=0) as pipe:
        while True:
            try:
                chunk = pipe.read(65536)
            except OSError:
                break
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            _write(target, lines)
    _write(target, [pending] if pending else [])
    os.close(target)


def _write(target: int, lines: list[bytes]) -> None:
    kept = [line for line in lines if not JVM_NOISE.match(line.decode(errors="replace"))]
    if kept:
        with suppress(OSError):
            os.write(target, b"".join(line + b"\n" for line in kept))


def _writes_to_fd2(stream: Any) -> bool:
    try:
        return bool(stream.fileno() == 2)
    except (AttributeError, OSError, ValueError):
        return False


@contextmanager
def jvm_console_filtered() -> Iterator[None]:
    """Run the block (the session's start) with the process's stderr (fd 2) pointed
    at a pipe, so that a JVM launched in it writes there for the rest of its life; a
    daemon thread passes its lines on to the real stderr, minus :data:`JVM_NOISE`.

    Meanwhile Python's ``sys.stderr``, if it is fd 2, writes to the real stderr
    directly (progress lines must not wait for a newline in the pipe); both are
    restored when the block ends."""
    if os.name != "posix":
        yield
        return
    sys.stderr.flush()
    try:
        saved = os.dup(2)
        target = os.dup(2)
        read_end, write_end = os.pipe()
    except OSError:
        yield
        return
    threading.Thread(
        target=_forward, args=(read_end, target), name="floodmark-jvm-stderr", daemon=True
    ).start()
    python_stderr = sys.stderr
    direct = None
    if _writes_to_fd2(python_stderr):
        direct = io.TextIOWrapper(
            io.FileIO(saved, "w", closefd=False),
            encoding=getattr(python_stderr, "encoding", None) or "utf-8",
            errors="backslashreplace",
            line_buffering=True,
        )
        sys.stderr = direct
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        if direct is not None:
            direct.flush()
            sys.stderr = python_stderr
        os.dup2(saved, 2)
        os.close(saved)


def spark_watch(spark: SparkSession) -> Callable[[], Callable[[], str]]:
    """For :attr:`floodmark.progress.Progress.watch`: called when a stage starts, it
    returns a function saying how far the Spark jobs started since have come:
    ``"Spark: 3 stages done, 120/400 tasks"`` (empty before the first job)."""
    tracker = spark.sparkContext.statusTracker()

    def watch() -> Callable[[], str]:
        before = set(tracker.getJobIdsForGroup())
        return functools.partial(_status, tracker, before)

    return watch


def _status(tracker: Any, before: set[int]) -> str:
    done = tasks = total = 0
    for job in tracker.getJobIdsForGroup():
        info = None if job in before else tracker.getJobInfo(job)
        for stage in info.stageIds if info is not None else []:
            s = tracker.getStageInfo(stage)
            if s is None:
                continue
            if s.numTasks and s.numCompletedTasks >= s.numTasks:
                done += 1
            elif s.numActiveTasks:
                tasks += s.numCompletedTasks
                total += s.numTasks
    if not done and not total:
        return ""
    running = f", {tasks:,}/{total:,} tasks" if total else ""
    return f"Spark: {done} stage{'s' if done != 1 else ''} done{running}"


class _NotAnInterrupt(logging.Filter):
    """Drops the records about an exception that Ctrl-C caused."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        while error is not None:
            if isinstance(error, KeyboardInterrupt):
                return False
            error = error.__context__
        return True


def interrupts_logged_once() -> None:
    """Keep Py4J's logs of a Ctrl-C out of the terminal (see the module); other
    records are printed as Python's logging prints them by default."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig()
    for handler in root.handlers:
        if not any(isinstance(f, _NotAnInterrupt) for f in handler.filters):
            handler.addFilter(_NotAnInterrupt())


__all__ = ["JVM_NOISE", "interrupts_logged_once", "jvm_console_filtered", "spark_watch"]
