"""Flink's element-late rule, as a Spark column: the one place the Spark layer tests it.

Flink's ``WindowOperator.isElementLate``: a record is late when
``timestamp + allowedLateness <= currentWatermark``, in Java ``long`` arithmetic, so the
sum wraps past ``Long.MAX_VALUE`` to a large negative number (and such a record is then
late for any watermark above it). Spark's ANSI mode fails on overflow instead of
wrapping, so the sum is computed in two parts that stay in range. The rule is defined
once, in the engine (``rust/window/late.rs``: the window operator applies it to the
records that land in no window, and the in-process replay reads ``is_late`` from it
through ``floodmark._core.element_late``). This is its SQL transcription (a Spark
column cannot call Rust without a Python crossing), used by ``assign_watermarks``
(``is_late``, lateness 0), the keyed path's late candidates (batch and live) and
``analyze_bounds``. The native path tests a window instead, with Flink's window-late
rule (open while its ``max_ts + allowedLateness`` is above the watermark; Flink caps
that sum at ``MAX`` instead of wrapping, and the native path runs only where it cannot
overflow). ``tests/python/spark/test_late.py`` checks this module against
the engine's function and Java arithmetic at the ends of the range.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from floodmark.time import I64_MAX, I64_MIN

if TYPE_CHECKING:
    from pyspark.sql import Column


def wrapping_add(ts: Column, lateness: int) -> Column:
    """``ts + lateness`` (``lateness >= 0``) wrapping like a Java ``long``: past
    ``MAX`` it continues from ``MIN``, as ``(ts - (MAX - lateness + 1)) + MIN``, both
    steps in range. Not as two constants added to ``ts``: Spark's optimizer reorders
    ``(ts + a) + b`` into ``ts + (a + b)`` on any input but a local relation, and ``a +
    b`` overflows."""
    from pyspark.sql import functions as F

    if lateness == 0:
        return ts
    return F.when(ts <= F.lit(I64_MAX - lateness), ts + F.lit(lateness)).otherwise(
        (ts - F.lit(I64_MAX - lateness + 1)) + F.lit(I64_MIN)
    )


def element_late(ts: Column, lateness: int, watermark: Column) -> Column:
    """Flink's ``isElementLate``: ``ts + lateness <= watermark`` (wrapping)."""
    return wrapping_add(ts, lateness) <= watermark


def behind_watermark(ts: Column, watermark: Column) -> Column:
    """``assign_watermarks``' ``is_late``: element-late with no lateness, against a
    watermark that exists (a record at ``Long.MIN_VALUE`` is not late before the first
    watermark, ``MIN`` meaning "none yet")."""
    from pyspark.sql import functions as F

    return (watermark > F.lit(I64_MIN)) & element_late(ts, 0, watermark)


__all__ = ["behind_watermark", "element_late", "wrapping_add"]
