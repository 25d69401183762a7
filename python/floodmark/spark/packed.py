"""Several outputs from one pass: packed, cached, unpacked per kind.

The window stage's three outputs (results, late, dropped) and the timeline stage's
(the timeline, its statistics, the per-(channel, bucket) watermarks) each come out of
one ``mapInArrow`` pass.

``mapInArrow`` has one output schema, and the results, late and dropped rows must come
from one run of the window operators, so that run is cached. Spark caches a DataFrame
by copying every value into its own compressed columnar format, which cost more than the
whole window stage (JFR: 44% of the stage's samples for 3.4M results). So the stage
emits each output batch as one row instead: its kind and the batch as an Arrow IPC
stream. The cache holds a few large rows at the price of one copy, and each output
DataFrame unpacks its kind with a second ``mapInArrow`` that hands the stored batches
back as they are (zero-copy in Python).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from floodmark.spark.executors import require_floodmark

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

KIND, PAYLOAD = "__fm_output", "__fm_payload"
#: The kinds of output rows, stored as a byte: the window stage's three outputs, and
#: the timeline stage's (see :mod:`floodmark.spark.timeline`).
KINDS = {
    "result": 0,
    "late": 1,
    "dropped": 2,
    "timeline": 3,
    "stats": 4,
    "buckets": 5,
    "error": 6,
    "emissions": 7,
    "operators": 8,
    "records": 9,
}
_NAMES = {code: name for name, code in KINDS.items()}
#: Rows per packed batch, at most; fewer when the rows are wide, so that a payload
#: holds about :data:`BYTES_PER_PAYLOAD`: far below Arrow's and Spark's 2 GiB limit on
#: one binary value (100k late rows carrying 30 kB of columns each would pass it).
ROWS_PER_PAYLOAD = 100_000
BYTES_PER_PAYLOAD = 64 << 20


def packed_schema() -> StructType:
    """The schema of the packed rows: ``(kind byte, payload binary)``."""
    from pyspark.sql.types import BinaryType, ByteType, StructField, StructType

    return StructType([StructField(KIND, ByteType(), False), StructField(PAYLOAD, BinaryType())])


def pack(kind: str, batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
    """Packed rows holding ``batch`` (already in its kind's output schema), one per
    :data:`ROWS_PER_PAYLOAD` rows or :data:`BYTES_PER_PAYLOAD` bytes (at the batch's
    mean row width), whichever comes first."""
    width = batch.nbytes / max(batch.num_rows, 1)
    step = max(1, min(ROWS_PER_PAYLOAD, int(BYTES_PER_PAYLOAD / max(width, 1.0))))
    for at in range(0, batch.num_rows, step):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch.slice(at, step))
        data = sink.getvalue()
        offsets = pa.py_buffer(np.array([0, data.size], np.int32))
        payload = pa.Array.from_buffers(pa.binary(), 1, [None, offsets, data])  # no copy
        kinds = pa.array(np.array([KINDS[kind]], np.int8))
        yield pa.record_batch([kinds, payload], names=[KIND, PAYLOAD])


def unpack(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The stored batches of the packed rows ``batches`` (one payload column)."""
    for b in batches:
        for payload in b.column(0):
            yield from pa.ipc.open_stream(payload.as_buffer())


def unpack_local(table: pa.Table) -> Iterator[tuple[str, pa.RecordBatch]]:
    """``(kind, batch)`` of every packed row of ``table`` (collected to the driver)."""
    kinds = table.column(KIND).to_pylist()
    for code, payload in zip(kinds, table.column(PAYLOAD), strict=True):
        for batch in pa.ipc.open_stream(payload.as_buffer()):
            yield _NAMES[code], batch


def collected(cached: DataFrame, kind: str, schema: pa.Schema) -> pa.Table:
    """The rows of ``kind`` stored in ``cached``, collected to the driver (the caller
    knows they are few)."""
    found = unpack_local(cached.where(only(kind)).toArrow())
    return pa.Table.from_batches([b for k, b in found if k == kind], schema=schema)


def only(kind: str) -> Column:
    """The packed rows of ``kind``."""
    from pyspark.sql import functions as F

    return F.col(KIND) == F.lit(KINDS[kind]).cast("tinyint")


def unpacked(cached: DataFrame, kind: str, schema: StructType) -> DataFrame:
    """The rows of ``kind`` stored in ``cached``, as a DataFrame of ``schema``."""
    require_floodmark(cached.sparkSession)
    return cached.where(only(kind)).select(PAYLOAD).mapInArrow(unpack, schema)


__all__ = [
    "KINDS",
    "collected",
    "only",
    "pack",
    "packed_schema",
    "unpack",
    "unpack_local",
    "unpacked",
]
