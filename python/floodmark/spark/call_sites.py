"""PySpark's call-site capture, off while a floodmark function runs.

PySpark 4 wraps every function of ``pyspark.sql.functions`` and every DataFrame method
so that it records its caller's file and line for error messages: a walk up the stack,
an attempted ``import IPython`` and several calls into the JVM each time, ~2.5 ms per
``F.col`` against ~0.4 ms without. floodmark builds a few hundred expressions per call,
and the call site recorded for them (at PySpark's default depth,
``spark.sql.stackTracesInDataFrameContext=1``) would be floodmark's own code, not the
user's. So while a floodmark function runs (building its plans, and running the
timeline job where it has one) the capture is off; the user's own DataFrame code keeps
it (``spark.python.sql.dataFrameDebugging.enabled`` is left as the user set it).
Measured on the benchmark's ``window_aggregate``: building the native plan takes ~0.1 s
instead of ~0.2 s.

The switch is PySpark's cached value of that setting (a module global). Where that is
missing (another PySpark version), nothing changes. While one thread is inside a
floodmark function, other threads of the process build their DataFrames without the
capture too (for seconds, on large inputs, while the timeline job runs); they lose
only the call site in their error messages.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

_SWITCH = "_enable_debugging_cache"
_lock = threading.Lock()
_depth = 0
_saved: object = None


@contextmanager
def call_sites_off() -> Iterator[None]:
    """Within this block, PySpark records no call sites (nesting and threads: the
    setting comes back when the last block ends)."""
    global _depth, _saved
    try:
        from pyspark.errors import utils
    except ImportError:  # pragma: no cover - pyspark is a dependency of floodmark.spark
        yield
        return
    if not hasattr(utils, _SWITCH):
        yield
        return
    with _lock:
        if _depth == 0:
            _saved = getattr(utils, _SWITCH)
            setattr(utils, _SWITCH, False)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                setattr(utils, _SWITCH, _saved)


def without_call_sites(func: Callable[P, R]) -> Callable[P, R]:
    """``func`` run inside :func:`call_sites_off`."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with call_sites_off():
            return func(*args, **kwargs)

    return wrapper


__all__ = ["call_sites_off", "without_call_sites"]
