"""The combined watermark in force when each record arrives, as a Spark column.

The advances of the timeline happen on the emission grid, so a record of bucket ``k``
(arrival in ``((k - 1) * interval, k * interval]``) meets the last advance at or
before ``(k - 1) * interval``. One value per bucket, read from a constant array in the
plan (:func:`floodmark.spark.lookup.constant_array`): no join and no Python per record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from floodmark.spark.lookup import MAX_CONSTANT_SLOTS, constant_array
from floodmark.spark.timeline import Timeline, watermark_in_force
from floodmark.time import I64_MIN

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession


def bucket_watermarks(
    timeline: Timeline, times: np.ndarray, wms: np.ndarray
) -> tuple[int, np.ndarray] | None:
    """``(first bucket, watermark in force per bucket)``: the last advance at a time
    before the bucket's records arrive, i.e. at or before ``(bucket - 1) * interval``.
    The array runs one bucket past the table; a bucket before it has no watermark and
    one after it every advance's (None if the advances leave the table's range, or
    there is no bucket: no record to look up)."""
    interval = timeline.plan.interval
    buckets = timeline.buckets.column("bucket").to_numpy()
    if len(buckets) == 0:
        return None
    first, last = int(buckets.min()), int(buckets.max())
    if last - first + 2 > MAX_CONSTANT_SLOTS:
        return None
    if len(times) and (times[0] < (first - 1) * interval or times[-1] > (last + 1) * interval):
        return None
    ks = np.arange(first, last + 2, dtype=np.int64)
    return first, watermark_in_force(times, wms, ks, interval)


def in_force_column(
    spark: SparkSession, timeline: Timeline, times: np.ndarray, wms: np.ndarray, arrival: str
) -> Column | None:
    """The watermark (ticks) in force for each record, from the column ``arrival``
    holding its arrival in ticks; None when the table does not fit a constant array
    (a very long stream or a tiny interval) or the session has no JVM gateway."""
    from pyspark.sql import functions as F

    in_force = bucket_watermarks(timeline, times, wms)
    if in_force is None:
        return None
    first, per_bucket = in_force
    array = constant_array(spark, per_bucket)
    if array is None:
        return None
    bucket = timeline.plan.bucket(arrival)
    last = first + len(per_bucket) - 1
    return (
        F.when(bucket < first, F.lit(I64_MIN))
        .when(bucket > last, F.lit(int(wms[-1]) if len(wms) else I64_MIN))
        .otherwise(F.get(array, (bucket - F.lit(first)).cast("int")))
    )


__all__ = ["bucket_watermarks", "in_force_column"]
