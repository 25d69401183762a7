"""Flink's window assignment in Spark SQL, for every stage that assigns windows in
Spark (the native window path, batch and live, and ``analyze_bounds``): a record at
event time ``ts`` is in the windows starting at ``ts - ((ts - offset) mod step)``
(``TimeWindow.getWindowStartWithOffset``, Java's remainder made non-negative) and back
from there ``step`` by ``step`` while ``start > ts - size``. With gaps
(``step > size``) a record may be in none."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column


def windows_per_record(size: int, step: int) -> int:
    """The most windows one record falls in (``ceil(size / step)``)."""
    return -(-size // step)


def last_start(ts: Column, step: int, offset: int) -> Column:
    """The latest window start at or before ``ts`` on the grid ``offset + k * step``."""
    from pyspark.sql import functions as F

    return ts - F.pmod(ts - F.lit(offset), F.lit(step))


def starts_back(last: Column, size: int, step: int) -> Column:
    """The window starts a record whose latest start is ``last`` may be in, latest
    first, as an array column: ``explode`` it, then keep the rows :func:`holds` (a
    filter after the explode, not an array ``filter``, whose lambda Spark does not
    compile)."""
    from pyspark.sql import functions as F

    back = (windows_per_record(size, step) - 1) * step
    return F.sequence(last, last - F.lit(back), F.lit(-step))


def holds(start: Column, ts: Column, size: int) -> Column:
    """The window starting at ``start`` holds event time ``ts`` (``start <= ts`` given)."""
    from pyspark.sql import functions as F

    return start > ts - F.lit(size)


__all__ = ["holds", "last_start", "starts_back", "windows_per_record"]
