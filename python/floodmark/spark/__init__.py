"""floodmark on Spark: Flink-exact watermarks and windows over a PySpark DataFrame.

``assign_watermarks`` and ``watermark_timeline`` take a DataFrame and return one, so they
compose with ``DataFrame.transform``; ``window_aggregate`` returns its three outputs
(results, late, dropped) as a :class:`WindowedOutput` of DataFrames; ``analyze_bounds``
reports what each candidate out-of-orderness bound costs; ``spark_global_watermark_late``
shows what Spark's own single watermark would drop. See ``docs/spark.md`` for the
outputs, the stages and their costs.

Module map (the pipeline's stages, one question per file):

* :mod:`.plan`: arguments checked against the schema before any job; the resolved
  plan, which rows can be placed and why not (drop reasons), a record's grid bucket.
* :mod:`.columns`, :mod:`.arrival`: time columns and units; the default arrival
  (row order) when there is no arrival column.
* :mod:`.timeline`: stages 1-2, per-(channel, bucket) maxima (native) and the Rust
  timeline builder, on the driver for a small table, in one task otherwise.
* :mod:`.lookup`: stage 3, every way a record reads its bucket's values.
* :mod:`.channel_pass`: stage 1 for ``assign_watermarks`` on the records path: each
  record's channel watermark from its channel's own builder, on the executors.
* :mod:`.per_channel`: stages 1-2 for generators that emit on records.
* :mod:`.late`: Flink's element-late rule as a Spark column (the SQL transcription of
  the engine's, ``rust/window/late.rs``).
* :mod:`.assign`: ``assign_watermarks``, ``watermark_timeline``.
* :mod:`.windows`: stage 4, ``window_aggregate``: the native path, the keyed Rust
  operator, and the side outputs.
* :mod:`.analyze`: ``analyze_bounds``. :mod:`.baseline`: Spark's own watermark.
* :mod:`.packed`: several outputs from one ``mapInArrow`` pass. :mod:`.session`:
  ``local_session`` and the Arrow settings. :mod:`.call_sites`: PySpark's call-site
  capture, off while floodmark builds its plans. :mod:`.local_frames`: driver tables
  made into DataFrames (around PySpark's dropping of rows after an empty chunk).
  :mod:`.batches`: a ``mapInArrow`` function's batches cut into runs of one key.
  :mod:`.executors`: whether the executors' Python can import floodmark, asked once.
* :mod:`.streaming`: live queries (``foreachBatch`` handlers, exactly once across
  restarts). :mod:`.sources`: deterministic, restartable streaming sources for tests,
  demos and benchmarks (a table replayed, Kafka through ``confluent_kafka``).
"""

from floodmark.spark.analyze import analyze_bounds
from floodmark.spark.assign import assign_watermarks, watermark_timeline
from floodmark.spark.baseline import spark_global_watermark_late
from floodmark.spark.session import ARROW_CONF, local_session
from floodmark.spark.windows import WindowedOutput, window_aggregate

__all__ = [
    "ARROW_CONF",
    "WindowedOutput",
    "analyze_bounds",
    "assign_watermarks",
    "local_session",
    "spark_global_watermark_late",
    "watermark_timeline",
    "window_aggregate",
]
