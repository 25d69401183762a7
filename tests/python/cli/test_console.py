"""The terminal: the JVM's start-up lines filtered out, live progress."""

from __future__ import annotations

import io
import subprocess
import sys
import time

import pytest

from floodmark.cli.console import JVM_NOISE, jvm_console_filtered
from floodmark.progress import Progress

NOISE = [
    "WARNING: Using incubator modules: jdk.incubator.vector",
    'Setting default log level to "WARN".',
    "To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel(newLevel).",
    "Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties",
    "26/11/23 16:50:14 WARN NativeCodeLoader: Unable to load native-hadoop library for your "
    "platform... using builtin-java classes where applicable",
]


def test_noise_patterns() -> None:
    assert all(JVM_NOISE.match(line) for line in NOISE)
    for kept in ("17:00:50 ERROR Executor: Exception in task 0.0", "java.lang.OutOfMemoryError"):
        assert not JVM_NOISE.match(kept)


def test_a_child_started_in_the_block_is_filtered(capfd: pytest.CaptureFixture[str]) -> None:
    script = "import sys\nfor line in sys.argv[1:]:\n    print(line, file=sys.stderr)\n"
    lines = [*NOISE, "a real error"]
    with jvm_console_filtered():
        child = subprocess.Popen([sys.executable, "-c", script, *lines])
        print("python's own line", file=sys.stderr)
    child.wait()
    time.sleep(0.5)  # the forwarding thread
    err = capfd.readouterr().err
    assert "a real error" in err and "python's own line" in err
    assert not any(n in err for n in NOISE), err
    # Python's stderr is back on fd 2, unfiltered.
    print(NOISE[0], file=sys.stderr)
    assert NOISE[0] in capfd.readouterr().err


def test_live_progress_lines() -> None:
    out = io.StringIO()
    p = Progress(2, out, live=True, interval=0.05)
    p.watch = lambda: lambda: "Spark: 1 stage done"
    with p.stage("computing") as step:
        time.sleep(0.3)
        step.note("1,000 rows")
    text = out.getvalue()
    assert "\r\x1b[K[1/2] computing ... 0 s, Spark: 1 stage done" in text
    assert text.endswith(" s (1,000 rows)\n")


def test_failing_watch_is_ignored() -> None:
    out = io.StringIO()
    p = Progress(1, out, live=True, interval=0.05)

    def broken() -> str:
        raise RuntimeError("JVM gone")

    p.watch = lambda: broken
    with p.stage("computing"):
        time.sleep(0.2)
    assert out.getvalue().endswith(" s\n")
