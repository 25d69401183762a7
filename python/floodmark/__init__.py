"""floodmark: Apache Flink's event-time semantics for PySpark, exactly.

The engine is Rust (``floodmark._core``); this package is its Python face:

* watermarks: :class:`WatermarkStrategy`, :func:`drive`, :func:`combine`,
  :class:`Valve`, :class:`Multiplexer`;
* windows: :class:`TumblingEventTimeWindows`, :class:`SlidingEventTimeWindows`,
  :class:`EventTimeSessionWindows`, :class:`WindowOperator`;
* Spark: :mod:`floodmark.spark` (imported on demand, needs ``pyspark``).
"""

from floodmark import exceptions
from floodmark._core import __version__
from floodmark.generator import Emission, UserGenerator, WatermarkGenerator, WatermarkOutput
from floodmark.strategy import WatermarkStrategy
from floodmark.valve import ListenerEvent, Multiplexer, MultiplexerResult, Valve, combine
from floodmark.watermarks import DriveResult, drive
from floodmark.windows import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    WindowOperator,
    WindowOutput,
)

__all__ = [
    "DriveResult",
    "Emission",
    "EventTimeSessionWindows",
    "ListenerEvent",
    "Multiplexer",
    "MultiplexerResult",
    "SlidingEventTimeWindows",
    "TumblingEventTimeWindows",
    "UserGenerator",
    "Valve",
    "WatermarkGenerator",
    "WatermarkOutput",
    "WatermarkStrategy",
    "WindowOperator",
    "WindowOutput",
    "__version__",
    "combine",
    "drive",
    "exceptions",
]
