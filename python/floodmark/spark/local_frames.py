"""Driver-side Arrow tables made into DataFrames (the timeline, lookups, broadcasts).

PySpark 4's ``createDataFrame(pyarrow.Table)`` drops every row after an empty chunk in
the middle of a column (chunks of 2, 0 and 4 rows give 2 rows, with no error), and a
table concatenated from pieces (a builder's chunks, a stream's batches) can hold one.
So every table floodmark hands to Spark goes through :func:`local_frame`, which
combines the chunks first: one contiguous chunk per column, nothing dropped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def local_frame(spark: SparkSession, table: pa.Table, schema: Any = None) -> DataFrame:
    """``table`` as a DataFrame of ``spark`` (``schema``: as ``createDataFrame``'s),
    every row kept whatever its chunks."""
    whole = table.combine_chunks()
    if schema is None:
        return spark.createDataFrame(whole)
    return spark.createDataFrame(whole, schema=schema)


__all__ = ["local_frame"]
