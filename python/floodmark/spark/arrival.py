"""The default arrival column: row order within each channel.

Flink's periodic emission and idleness run on processing time. When a DataFrame has no
column saying when each record arrived, floodmark uses the order of the rows: the
``n``-th row of a channel (in the DataFrame's order) arrives at tick ``n``, and one
tick counts as one millisecond. The channels are read side by side, one record each per
tick, like a source reading its partitions round-robin; the default 200 ms emission
interval emits a watermark every 200 records per channel, and an idle timeout of one
minute means 60,000 records without news from a channel.

The row order must be stable across the jobs a pipeline runs, which holds for files
and tables; the ordered frame is cached so that it is computed once, by each call for
itself.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from floodmark.exceptions import SchemaError
from floodmark.spark.columns import clashing, key_column, quote

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: Name of the column holding the default arrival (row index within the channel).
ROW_ARRIVAL = "arrival_index"
#: The unit of :data:`ROW_ARRIVAL`: one row is one tick of it.
ROW_ARRIVAL_UNIT = "ms"
#: Numbers each call, so that each has a cache entry of its own (Spark shares one
#: between equal plans, and a function releasing its own must not release another's).
_CALLS = itertools.count()


def with_default_arrival(
    df: DataFrame, arrival: str | None, channel: str, arrival_unit: str | None
) -> tuple[DataFrame, str, str | None]:
    """``(df, arrival column, arrival unit)``, adding :data:`ROW_ARRIVAL` if needed."""
    if arrival is not None:
        return df, arrival, arrival_unit
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    key_column(df, channel, "channel")
    taken = clashing(df, [ROW_ARRIVAL])
    if taken:
        raise SchemaError(
            taken[0],
            f"arrival= was not given and the default arrival column {ROW_ARRIVAL!r} "
            "already exists; pass arrival= or rename it",
        )
    order = Window.partitionBy(F.col(quote(channel))).orderBy("__fm_row")
    ordered = (
        df.withColumn("__fm_row", F.monotonically_increasing_id())
        .withColumn(ROW_ARRIVAL, F.row_number().over(order) - 1)
        .withColumn("__fm_call", F.lit(next(_CALLS)))
        .drop("__fm_row", "__fm_call")
        .persist()
    )
    return ordered, ROW_ARRIVAL, ROW_ARRIVAL_UNIT


@contextmanager
def ordered_input_released(
    df: DataFrame, arrival: str | None, *, on_success: bool = False
) -> Iterator[None]:
    """Release the row-ordered input :func:`with_default_arrival` cached (``arrival`` is
    the caller's: None when it did) if the block fails, and when it ends with
    ``on_success``; so that a rejected call leaves no cache behind."""
    try:
        yield
    except BaseException:
        if arrival is None:
            df.unpersist()
        raise
    if on_success and arrival is None:
        df.unpersist()
