"""floodmark inside a running Structured Streaming query, exactly once across restarts.

No single streaming plan can give each record the watermark Flink would give it (see
``docs/streaming.md``): a record's combined watermark depends on every channel's data
up to its arrival, and Spark's own watermark is one number per micro-batch, a batch
late. So floodmark runs as a ``foreachBatch`` handler that carries the engine's state
from batch to batch, versioned by batch id next to the query's checkpoint::

    handler = StreamingWindows(strategy, TumblingEventTimeWindows.of(timedelta(seconds=10)),
                               key="user", channel="partition", arrival="timestamp",
                               state_location=".../floodmark-state",
                               outputs=ParquetOutputs(".../out"))
    query = events.writeStream.foreachBatch(handler).option("checkpointLocation", ck).start()

Module map: :mod:`.handler` (the per-batch commit protocol), :mod:`.state` (where the
state lives, the markers), :mod:`.frontier` (the frontier, held-back rows and the
timeline builder from batch to batch), :mod:`.outputs` (sinks, exactly once),
:mod:`.watermarks` (:class:`StreamingWatermarks`), :mod:`.windows`
(:class:`StreamingWindows`), :mod:`.native` (its native path: Spark aggregations, the
open windows carried from batch to batch).
"""

from floodmark.spark.streaming.outputs import ParquetOutputs
from floodmark.spark.streaming.state import StateError
from floodmark.spark.streaming.watermarks import StreamingWatermarks
from floodmark.spark.streaming.windows import StreamingWindows

__all__ = ["ParquetOutputs", "StateError", "StreamingWatermarks", "StreamingWindows"]
