"""Stage lines while Spark works: ``[1/4] computing per-partition watermarks ... 3.2 s``.

On a terminal the line of the running stage is redrawn every second with the seconds
so far and, once Spark runs, how far its jobs have come (``Spark: 3 stages done,
120/400 tasks``); elsewhere (a file, a pipe) each stage is one line, written when it
ends. Spark's own console progress bar would interleave with these lines, so
:data:`QUIET_SPARK_CONF` turns it off (pass it to ``local_session(conf=...)``).
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO, TypeVar

#: The command line's log4j2 configuration: errors only, and none of the lines Spark
#: prints when PySpark's gateway starts it (see :mod:`floodmark.cli.console`).
_LOG4J = Path(__file__).resolve().parent / "cli" / "log4j2.properties"

#: Where that configuration writes Spark's errors: a file of this process, made only
#: when Spark logs an error.
SPARK_LOG = Path(tempfile.gettempdir()) / f"floodmark-spark-{os.getpid()}.log"

#: Spark settings for a quiet terminal: no console progress bar, only errors logged,
#: to :data:`SPARK_LOG` (takes effect when the command line starts the JVM).
QUIET_SPARK_CONF: dict[str, str] = {
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.extraJavaOptions": (
        f'-Dlog4j2.configurationFile={_LOG4J.as_uri()} "-Dfloodmark.spark.log={SPARK_LOG}"'
    ),
}


class Step:
    """The running stage: :meth:`note` adds a detail to its line (e.g. rows)."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    def note(self, text: str) -> None:
        """Show ``text`` after the stage's seconds: ``... 3.2 s (1,000 rows)``."""
        self.notes.append(text)


class Progress:
    """Numbered stages with elapsed seconds, written to ``stream`` (stderr).

    Args:
        total: the number of stages.
        stream: where the lines go (default: stderr).
        enabled: False writes nothing.
        live: redraw the running stage's line every ``interval`` seconds (default:
            when ``stream`` is a terminal).
        interval: seconds between redraws.

    Attributes:
        watch: called when a stage starts, returns a function saying how far that
            stage's work has come (e.g. :func:`floodmark.cli.console.spark_watch`),
            shown on live lines.

    Example:
        >>> p = Progress(2)
        >>> with p.stage("reading input"):
        ...     pass
    """

    def __init__(
        self,
        total: int,
        stream: TextIO | None = None,
        *,
        enabled: bool = True,
        live: bool | None = None,
        interval: float = 1.0,
    ):
        self.total = total
        self.done = 0
        self._stream = stream
        self.enabled = enabled
        isatty = getattr(self.stream, "isatty", None)
        self.live = bool(isatty and isatty()) if live is None else live
        self.interval = interval
        self.watch: Callable[[], Callable[[], str]] | None = None
        self.started = time.perf_counter()

    @property
    def stream(self) -> TextIO:
        """Where the lines go: the stream given, else the current ``sys.stderr``."""
        return self._stream if self._stream is not None else sys.stderr

    @contextmanager
    def stage(self, label: str) -> Iterator[Step]:
        """Print ``[i/n] label ...``, run the block, then its elapsed seconds (and the
        block's notes); on a terminal the line shows the progress meanwhile."""
        self.done += 1
        width = len(str(self.total))
        head = f"[{self.done:>{width}}/{self.total}] {label} ..."
        step = Step()
        if self.enabled:
            self.stream.write(head)
            self.stream.flush()
        start = time.perf_counter()
        stop = threading.Event()
        ticker = None
        if self.enabled and self.live:
            ticker = threading.Thread(
                target=self._tick, args=(head, start, stop), name="floodmark-progress", daemon=True
            )
            ticker.start()
        ok = False
        try:
            yield step
            ok = True
        finally:
            stop.set()
            if ticker is not None:
                ticker.join()
            if self.enabled:
                spent = time.perf_counter() - start
                end = f" {spent:.1f} s" if ok else f" failed after {spent:.1f} s"
                if ok and step.notes:
                    end += f" ({', '.join(step.notes)})"
                self.stream.write(f"\r\x1b[K{head}{end}\n" if self.live else f"{end}\n")
                self.stream.flush()

    def _tick(self, head: str, start: float, stop: threading.Event) -> None:
        status = _quietly(self.watch) if self.watch is not None else None
        while not stop.wait(self.interval):
            line = f"{head} {time.perf_counter() - start:.0f} s"
            said = _quietly(status) if status is not None else None
            if said:
                line += f", {said}"
            if not stop.is_set():
                try:
                    self.stream.write(f"\r\x1b[K{line}")
                    self.stream.flush()
                except (OSError, ValueError):  # stderr swapped or closed meanwhile
                    pass

    def elapsed(self) -> float:
        """Seconds since this object was made."""
        return time.perf_counter() - self.started


T = TypeVar("T")


def _quietly(function: Callable[[], T]) -> T | None:
    """``function()``, or None if it fails (the JVM going away must not break the
    command over a progress line)."""
    try:
        return function()
    except Exception:
        return None


__all__ = ["QUIET_SPARK_CONF", "SPARK_LOG", "Progress", "Step"]
