"""Stage 4 on the keyed Rust window operator: everything the native path does not do.

The records are shuffled once by key into ``num_partitions`` partitions, sorted by
arrival inside each, and streamed through one Rust window operator per partition
(``mapInArrow``): the operator is keyed, so one instance serves every key of its
partition, in arrival order, exactly as Flink's keyed WindowOperator does. The
timeline's advances travel with the function and are placed between the records by
arrival time (an advance at time ``t`` comes after every record with ``arrival <= t``).
Only the columns the stage needs cross into Python: keys, event time, arrival, channel
and the aggregated values. The three outputs come back packed and are cached once
(see :mod:`floodmark.spark.packed`); the late and dropped records are joined back to
the input for every column (:mod:`.side_outputs`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from floodmark.spark.columns import quote
from floodmark.spark.executors import require_floodmark
from floodmark.spark.packed import pack, packed_schema, unpacked
from floodmark.spark.plan import valid_rows
from floodmark.spark.windows.plan import ARRIVAL, REFIRE, TS, WindowPlan
from floodmark.vocabulary import (
    DROP_REASON,
    FIRED_WATERMARK,
    LATE_WATERMARK,
    RESULT_WINDOW,
    TIMING,
    TRIGGER_TIME,
    agg_name,
)
from floodmark.windows import WindowOperator

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType


@dataclass
class KeyedRun:
    """The keyed operator's three outputs (in ticks, only the columns it was sent),
    over one cached run."""

    results: DataFrame
    late: DataFrame
    dropped: DataFrame
    cached: DataFrame


def keyed_outputs(
    df: DataFrame,
    plan: WindowPlan,
    times: np.ndarray,
    wms: np.ndarray,
    num_partitions: int | None,
) -> KeyedRun:
    """Runs the keyed operator over ``df``'s placeable rows with the timeline's
    advances ``(times, wms)``."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema

    require_floodmark(df.sparkSession)
    wm_plan, keys, channel = plan.wm, plan.keys, plan.wm.channel
    sent = df.where(valid_rows(wm_plan)).select(
        *[F.col(quote(k)) for k in keys],
        wm_plan.event_time.ticks().alias(TS),
        wm_plan.arrival.ticks().alias(ARRIVAL),
        *([F.col(quote(channel))] if plan.send_channel else []),
        *[F.col(quote(v)).cast(t).alias(v) for v, t in plan.values.items() if v not in keys],
    )
    schemas = output_schemas(plan, sent.schema)
    arrow_schemas = {kind: to_arrow_schema(schema) for kind, schema in schemas.items()}
    parts = num_partitions or default_partitions(df.sparkSession)
    # The documented order (arrival, channel, event time, key, the aggregated values);
    # the channel is sent unless it is a key (as a value column, if it is one).
    ordered = sent.repartition(parts, *[F.col(quote(k)) for k in keys]).sortWithinPartitions(
        *map(quote, plan.processing_order())
    )
    # mapInArrow resolves every column by name, reading a dot as a struct field: the
    # runner gets positional names and restores the real ones.
    names = ordered.columns
    runner = make_runner(plan, times, wms, arrow_schemas, names)
    positional = ordered.toDF(*[f"__fm_c{i}" for i in range(len(names))])
    cached = positional.mapInArrow(runner, packed_schema()).persist()
    return KeyedRun(
        results=unpacked(cached, "result", schemas["result"]),
        late=unpacked(cached, "late", schemas["late"]),
        dropped=unpacked(cached, "dropped", schemas["dropped"]),
        cached=cached,
    )


def output_schemas(plan: WindowPlan, sent: StructType) -> dict[str, StructType]:
    """The schema of each output kind as the runner emits it (ticks, not yet converted):
    results, and the late and dropped records with their watermark or reason."""
    from pyspark.sql.types import (
        BooleanType,
        DoubleType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    fields = {f.name: f.dataType for f in sent.fields}
    records = [StructField(c, fields[c]) for c in plan.sent_columns()]
    results = [StructField(k, fields[k]) for k in plan.keys]
    results += [StructField(c, LongType()) for c in RESULT_WINDOW]
    for agg in plan.aggs:
        dtype: DataType
        if agg == "count":
            dtype = LongType()
        elif agg[0] == "mean":
            dtype = DoubleType()
        else:
            dtype = LongType() if plan.values[agg[1]] == "bigint" else DoubleType()
        results.append(StructField(agg_name(agg), dtype))
    results += [
        StructField(FIRED_WATERMARK, LongType()),
        StructField(REFIRE, BooleanType()),
        StructField(TRIGGER_TIME, LongType()),
    ]
    return {
        "result": StructType(results),
        "late": StructType([*records, StructField(LATE_WATERMARK, LongType())]),
        "dropped": StructType([*records, StructField(DROP_REASON, StringType())]),
    }


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """The operator's output ``batch`` in its kind's output ``schema``; the results'
    ``timing`` flag is the ``REFIRE`` column."""
    cols = [batch.column(TIMING if f.name == REFIRE else f.name).cast(f.type) for f in schema]
    return pa.record_batch(cols, schema=schema)


class Feeder:
    """Feeds one keyed operator its records, in arrival order, batch after batch, with
    the timeline's advances ``(times, watermarks)`` placed between them: an advance at
    time ``t`` comes after every record with ``arrival <= t`` and before any later one
    (so an advance at a batch's last arrival waits: the next batch may hold more
    records of that time)."""

    def __init__(self, op: Any, times: np.ndarray, wms: np.ndarray) -> None:
        self.op, self.times, self.wms, self.next = op, times, wms, 0

    def feed(self, batch: pa.RecordBatch) -> Any:
        """The operator's output for ``batch`` (with its ``ARRIVAL`` column in ticks)."""
        arr = batch.column(ARRIVAL).to_numpy()
        j, times = self.next, self.times
        hi = int(np.searchsorted(times, arr[-1], side="left"))
        pos = np.searchsorted(arr, times[j:hi], side="right").astype(np.int64)
        self.next = hi
        return self.op.process(
            batch, {"position": pos, "watermark": self.wms[j:hi], "time": times[j:hi]}
        )

    def rest(self) -> list[Any]:
        """The operator's outputs for the advances after the last record."""
        outs = [
            self.op.advance(int(w), int(t))
            for t, w in zip(self.times[self.next :], self.wms[self.next :], strict=True)
        ]
        self.next = len(self.times)
        return outs


class KeyedOperator(WindowOperator):
    """The window operator as this stage runs it: its results keep the engine's
    ``timing`` flag (true: a late firing), which travels as ``REFIRE`` until
    :func:`~floodmark.spark.windows.results_frame` words it, once."""

    def _timing(self, results: pa.RecordBatch) -> pa.RecordBatch:
        return results


def new_operator(plan: WindowPlan) -> KeyedOperator:
    """The keyed Rust window operator of the plan, over the sent columns."""
    return KeyedOperator(
        plan.window,
        key=plan.keys,
        event_time=TS,
        aggs=plan.aggs,
        allowed_lateness=plan.lateness,
        unit=plan.wm.event_time.unit,
        arrival=ARRIVAL,
    )


def packed_outputs(out: Any, schemas: Mapping[str, pa.Schema]) -> Iterator[pa.RecordBatch]:
    """An operator output's three parts, packed in their output schemas."""
    for kind, b in (("result", out.results), ("late", out.late), ("dropped", out.dropped)):
        if b.num_rows:
            yield from pack(kind, conform(b, schemas[kind]))


def make_runner(
    plan: WindowPlan,
    times: np.ndarray,
    wms: np.ndarray,
    schemas: Mapping[str, pa.Schema],
    names: Sequence[str],
) -> Any:
    """The function each partition runs: records in arrival order through one keyed
    Rust window operator, timeline advances interleaved by arrival time, then the end
    of input. The batches come with positional column names; ``names`` are the real
    ones."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        feeder = Feeder(new_operator(plan), times, wms)
        seen = False
        for b in batches:
            if b.num_rows:
                seen = True
                yield from packed_outputs(feeder.feed(b.rename_columns(names)), schemas)
        if not seen:
            return
        for out in feeder.rest():
            yield from packed_outputs(out, schemas)
        yield from packed_outputs(feeder.op.finish(), schemas)

    return run


def default_partitions(spark: SparkSession) -> int:
    """Spark's default parallelism; a Spark Connect session has no ``SparkContext`` to
    ask (its attribute error is an ``AttributeError``), so there the SQL shuffle
    partitions."""
    context = getattr(spark, "sparkContext", None)
    if context is not None:
        return int(context.defaultParallelism)
    return int(spark.conf.get("spark.sql.shuffle.partitions") or 200)


__all__ = [
    "Feeder",
    "KeyedOperator",
    "KeyedRun",
    "default_partitions",
    "keyed_outputs",
    "new_operator",
    "packed_outputs",
]
