"""floodmark: Apache Flink's event-time semantics for PySpark, exactly."""

from floodmark import exceptions
from floodmark._core import __version__
from floodmark.strategy import Emission, WatermarkGenerator, WatermarkStrategy
from floodmark.watermarks import (
    DriveResult,
    ListenerEvent,
    Multiplexer,
    MultiplexerResult,
    Valve,
    combine,
    drive,
)

__all__ = [
    "DriveResult",
    "Emission",
    "ListenerEvent",
    "Multiplexer",
    "MultiplexerResult",
    "Valve",
    "WatermarkGenerator",
    "WatermarkStrategy",
    "__version__",
    "combine",
    "drive",
    "exceptions",
]
