"""Stage lines while Spark works: ``[1/4] computing per-partition watermarks ... 3.2 s``.

Spark's own console progress bar would interleave with these lines, so
:data:`QUIET_SPARK_CONF` turns it off (pass it to ``local_session(conf=...)``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

#: Spark settings that keep the console to floodmark's own lines.
_LOG4J = Path(__file__).resolve().parent / "spark" / "log4j2.properties"

#: Spark settings for a quiet terminal: no console progress bar, only errors logged
#: (takes effect when the command line starts the JVM).
QUIET_SPARK_CONF: dict[str, str] = {
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={_LOG4J.as_uri()}",
}


class Progress:
    """Numbered stages with elapsed seconds, written to ``stream`` (stderr).

    Example:
        >>> p = Progress(2)
        >>> with p.stage("reading input"):
        ...     pass
    """

    def __init__(self, total: int, stream: TextIO | None = None, *, enabled: bool = True):
        self.total = total
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.started = time.perf_counter()

    @contextmanager
    def stage(self, label: str) -> Iterator[None]:
        """Print ``[i/n] label ...``, run the block, then print its elapsed seconds."""
        self.done += 1
        width = len(str(self.total))
        if self.enabled:
            self.stream.write(f"[{self.done:>{width}}/{self.total}] {label} ...")
            self.stream.flush()
        start = time.perf_counter()
        ok = False
        try:
            yield
            ok = True
        finally:
            if self.enabled:
                spent = time.perf_counter() - start
                self.stream.write(f" {spent:.1f} s\n" if ok else f" failed after {spent:.1f} s\n")
                self.stream.flush()

    def elapsed(self) -> float:
        """Seconds since this object was made."""
        return time.perf_counter() - self.started


__all__ = ["QUIET_SPARK_CONF", "Progress"]
