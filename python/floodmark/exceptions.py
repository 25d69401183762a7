"""Exceptions raised by floodmark.

Every error floodmark raises derives from :class:`FloodmarkError`. Each also derives
from the built-in exception a Python user would expect (``ValueError`` for a bad
parameter, ``IndexError`` for a channel out of range), so ``except ValueError`` works.
The native engine raises these same classes (``floodmark._core`` looks them up here).
"""

from __future__ import annotations


class FloodmarkError(Exception):
    """Base class of every floodmark error."""


class InvalidParameterError(FloodmarkError, ValueError):
    """A parameter is out of range (Flink: ``IllegalArgumentException``).

    Attributes:
        parameter: the name of the offending parameter.
    """

    parameter: str = ""


class ChannelOutOfRangeError(FloodmarkError, IndexError):
    """A channel index outside ``0..num_channels`` (Flink: ``IndexOutOfBoundsException``)."""


class IllegalStateError(FloodmarkError, RuntimeError):
    """An operation not allowed in the current state (Flink: ``IllegalStateException``),
    e.g. registering the same output id twice."""


class InvalidInputError(FloodmarkError, ValueError):
    """Input data that cannot be processed.

    Attributes:
        column: the column or argument holding the bad data.
    """

    column: str = ""


class SchemaError(InvalidInputError):
    """A DataFrame column is missing or has a type floodmark cannot use."""


class ExecutorEnvironmentError(FloodmarkError, RuntimeError):
    """Spark's executors cannot run floodmark's Python tasks: their Python lacks
    floodmark, has another version of it than the driver, or does not start.

    Attributes:
        python: the executors' Python as Spark was told (``PYSPARK_PYTHON``).
    """

    python: str = ""

    def __init__(self, message: str, python: str = "") -> None:
        super().__init__(message)
        self.python = python


class SnapshotError(FloodmarkError, ValueError):
    """A snapshot that cannot be restored (corrupt, truncated, or of another object)."""


def param_error(parameter: str, message: str) -> InvalidParameterError:
    """An :class:`InvalidParameterError` with the message ``message`` whose
    ``parameter`` names the parameter."""
    e = InvalidParameterError(message)
    e.parameter = parameter
    return e


def input_error(column: str, message: str) -> InvalidInputError:
    """An :class:`InvalidInputError` whose ``column`` names the column or argument; the
    message is ``invalid input `column`: message``."""
    e = InvalidInputError(f"invalid input `{column}`: {message}")
    e.column = column
    return e


__all__ = [
    "ChannelOutOfRangeError",
    "ExecutorEnvironmentError",
    "FloodmarkError",
    "IllegalStateError",
    "InvalidInputError",
    "InvalidParameterError",
    "SchemaError",
    "SnapshotError",
]
