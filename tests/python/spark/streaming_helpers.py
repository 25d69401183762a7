"""Helpers of the streaming tests: a stream cut into files that arrive one per trigger,
a query run to the end, outputs read back."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq


def write_files(table: pa.Table, folder: Path, files: int, arrival: str = "arrival") -> Path:
    """``table`` sorted by arrival, cut into ``files`` Parquet files by arrival, whose
    modification times are in arrival order (the file source takes the oldest first)."""
    table = table.sort_by([(arrival, "ascending")])
    cuts = np.linspace(0, table.num_rows, files + 1).astype(int)
    return write_parts([table.slice(cuts[i], cuts[i + 1] - cuts[i]) for i in range(files)], folder)


def write_parts(parts: list[pa.Table], folder: Path) -> Path:
    """Each of ``parts`` as a Parquet file, their modification times in list order."""
    folder.mkdir(parents=True, exist_ok=True)
    start = time.time() - 10 * len(parts)
    for i, part in enumerate(parts):
        path = folder / f"part-{i:05d}.parquet"
        pq.write_table(part, path)
        os.utime(path, (start + 10 * i, start + 10 * i))
    return folder


def run_query(
    spark: Any, source: Path, schema: Any, handler: Any, checkpoint: Path, per_trigger: int = 1
) -> Any:
    """Runs a file-source query with ``per_trigger`` files per trigger (0: all there
    are in one) through ``handler`` until the files are processed; returns the stopped
    query."""
    reader = spark.readStream.schema(schema)
    if per_trigger:
        reader = reader.option("maxFilesPerTrigger", per_trigger)
    events = reader.parquet(str(source))
    query = (
        events.writeStream.foreachBatch(handler)
        .option("checkpointLocation", str(checkpoint))
        .start()
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    return query


def read_output(spark: Any, folder: Path, kind: str) -> pa.Table:
    """A ParquetOutputs kind read back (without the ``batch`` column)."""
    path = folder / kind
    if not path.exists() or not any(p.name.startswith("batch=") for p in path.iterdir()):
        return pa.table({})
    table = spark.read.parquet(str(path)).toArrow()
    return table.drop(["batch"])


def before(table: pa.Table, column: str, frontier: int) -> pa.Table:
    """The rows of ``table`` whose ``column`` is at or before ``frontier``."""
    return table.filter(pc.less_equal(table[column], frontier))


def names(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))
