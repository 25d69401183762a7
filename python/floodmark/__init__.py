"""floodmark: Apache Flink's event-time semantics for PySpark, exactly."""

from floodmark import exceptions
from floodmark._core import __version__
from floodmark.windows import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    WindowOperator,
    WindowOutput,
)

__all__ = [
    "EventTimeSessionWindows",
    "SlidingEventTimeWindows",
    "TumblingEventTimeWindows",
    "WindowOperator",
    "WindowOutput",
    "__version__",
    "exceptions",
]
