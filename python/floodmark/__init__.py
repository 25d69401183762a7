"""floodmark: Apache Flink's event-time semantics for PySpark, exactly."""

from floodmark import exceptions
from floodmark._core import __version__

__all__ = ["__version__", "exceptions"]
