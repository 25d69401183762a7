"""A class-data-sharing archive for the JVMs the tests start in subprocesses.

The crash tests and the command line's process tests start a fresh Spark driver JVM
for every run (about 25 in all), and each spends seconds loading and verifying the
same classes before its first batch. HotSpot's dynamic CDS (JDK 13 and later) dumps the
classes a run loaded into an archive when that JVM exits
(``-XX:ArchiveClassesAtExit``); later JVMs on the same class path map it instead
(``-XX:SharedArchiveFile``). Measured here (2026-11-26, the crash tests' job, six
micro-batches): 20.3 -> 15.8 s a run; one batch: 11.5 -> 7.6 s; making the archive
costs one small run and its dump, 35-39 s (the run with the dump option took 25.7 s,
the dump after it ~13 s), so it pays from about the tenth run.

Only the tests' subprocesses get it, through ``SPARK_SUBMIT_OPTS`` (which the launcher
adds to the driver's JVM options; floodmark's code is the same either way). A JVM
whose class path or build does not match the archive ignores it (``-Xshare:auto``, the
default, with its CDS logging off so that nothing reaches a test's output), and where
the archive cannot be made the runs go without it: the tests do not depend on it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

#: How long the dump may take after the run's Python exits (the JVM dumps as it leaves).
DUMP_TIMEOUT_S = 180
JOB = Path(__file__).with_name("streaming_job.py")
#: CDS's own log lines (a skipped signed jar, a class path that does not match) off.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def submit_options(*options: str) -> str:
    """``SPARK_SUBMIT_OPTS`` (as this process has it) with ``options`` added."""
    return " ".join([os.environ.get("SPARK_SUBMIT_OPTS", ""), *options]).strip()


def gone(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return True
    return False


def make_archive(folder: Path) -> str | None:
    """Runs one small live query (the crash tests' job) in a JVM that dumps the classes
    it loaded into ``folder/spark.jsa``; the JVM options that make later JVMs map it,
    or None when no whole archive came out."""
    from streaming_helpers import write_files

    from floodmark.datagen import StreamSpec, generate

    archive = folder / "spark.jsa"
    write_files(generate(StreamSpec(rows=300, keys=20)), folder / "in", 1)
    args = [str(folder / name) for name in ("in", "ck", "state", "out")]
    env = dict(os.environ)
    env["SPARK_SUBMIT_OPTS"] = submit_options(f"-XX:ArchiveClassesAtExit={archive}", QUIET)
    env["PYTHONPATH"] = os.pathsep.join([str(JOB.parent), env.get("PYTHONPATH", "")])
    proc = subprocess.Popen(
        [sys.executable, str(JOB), *args, "keyed"],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    dumped = False
    try:
        proc.wait(timeout=DUMP_TIMEOUT_S)
        # The JVM outlives its Python for the dump: wait for the run's process group
        # (led by the job's pid) to empty.
        deadline = time.monotonic() + DUMP_TIMEOUT_S
        while not (dumped := gone(proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.2)
    except subprocess.TimeoutExpired:
        pass
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    if not dumped or proc.returncode != 0 or not archive.exists():
        return None
    return f"-XX:SharedArchiveFile={archive} {QUIET}"
