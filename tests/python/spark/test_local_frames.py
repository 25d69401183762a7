"""Driver tables made into DataFrames keep every row, whatever their chunks."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from floodmark.spark.local_frames import local_frame


def test_a_table_with_an_empty_chunk_in_the_middle_keeps_every_row(spark: Any) -> None:
    """PySpark's ``createDataFrame(pyarrow.Table)`` gave 2 of these 6 rows."""
    pieces = [[1, 2], [], [3, 4, 5, 6]]
    table = pa.Table.from_batches([pa.record_batch({"x": pa.array(p, pa.int64())}) for p in pieces])
    assert sorted(r.x for r in local_frame(spark, table).collect()) == [1, 2, 3, 4, 5, 6]
    typed = local_frame(spark, table, schema="x bigint")
    assert typed.count() == 6
