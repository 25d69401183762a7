"""floodmark on Spark: Flink-exact watermarks and windows over a PySpark DataFrame.

``assign_watermarks`` and ``watermark_timeline`` take a DataFrame and return one, so they
compose with ``DataFrame.transform``; ``window_aggregate`` returns its three outputs
(results, late, dropped) as a :class:`WindowedOutput` of DataFrames. See
``docs/spark.md`` for the outputs, the stages and their costs.
"""

from floodmark.spark.assign import assign_watermarks, watermark_timeline
from floodmark.spark.session import ARROW_CONF, local_session
from floodmark.spark.windows import WindowedOutput, window_aggregate

__all__ = [
    "ARROW_CONF",
    "WindowedOutput",
    "assign_watermarks",
    "local_session",
    "watermark_timeline",
    "window_aggregate",
]
