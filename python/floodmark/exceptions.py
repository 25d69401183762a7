"""Exceptions raised by floodmark.

Every error floodmark raises derives from :class:`FloodmarkError`. Each also derives
from the built-in exception a Python user would expect (``ValueError`` for a bad
parameter, ``IndexError`` for a channel out of range), so ``except ValueError`` works.
The native engine raises these same classes (``floodmark._core`` looks them up here).

The errors about a parameter or an input column format themselves, exactly as the
engine's Rust errors do: ``InvalidParameterError("bound", "must be >= 0, got -1")``
reads ``invalid parameter `bound`: must be >= 0, got -1`` and names the parameter in
``.parameter``; :class:`InvalidInputError` and :class:`SchemaError` name the column in
``.column``.
"""

from __future__ import annotations

import re


class FloodmarkError(Exception):
    """Base class of every floodmark error."""


def _named(prefix: str, name: str, message: str | None) -> tuple[str, str]:
    """``(name, text)`` of an error built as ``(name, message)``, or (older call sites)
    from one finished text, whose name is read back from the text's prefix."""
    if message is not None:
        return name, f"{prefix} `{name}`: {message}"
    found = re.match(rf"{prefix} `([^`]*)`: ", name)
    return (found.group(1) if found else ""), name


class InvalidParameterError(FloodmarkError, ValueError):
    """A parameter is out of range (Flink: ``IllegalArgumentException``).

    Args:
        parameter: the name of the offending parameter.
        message: what is wrong and what would be valid.

    Attributes:
        parameter: the name of the offending parameter.

    Example:
        >>> e = InvalidParameterError("bound", "must be >= 0, got -1")
        >>> str(e)
        'invalid parameter `bound`: must be >= 0, got -1'
        >>> e.parameter, isinstance(e, ValueError)
        ('bound', True)
    """

    def __init__(self, parameter: str, message: str | None = None) -> None:
        self.parameter, text = _named("invalid parameter", parameter, message)
        super().__init__(text)

    def renamed(self, parameter: str) -> InvalidParameterError:
        """The same error naming ``parameter`` (the command line names its flags).

        Example:
            >>> str(InvalidParameterError("bounds", "too large").renamed("--bounds"))
            'invalid parameter `--bounds`: too large'
        """
        rest = str(self).partition(f"`{self.parameter}`: ")[2]
        return InvalidParameterError(parameter, rest)


class ChannelOutOfRangeError(FloodmarkError, IndexError):
    """A channel index outside ``0..num_channels`` (Flink: ``IndexOutOfBoundsException``)."""


class IllegalStateError(FloodmarkError, RuntimeError):
    """An operation not allowed in the current state (Flink: ``IllegalStateException``),
    e.g. registering the same output id twice."""


class InvalidInputError(FloodmarkError, ValueError):
    """Input data that cannot be processed.

    Args:
        column: the column or argument holding the bad data.
        message: what is wrong.

    Attributes:
        column: the column or argument holding the bad data.

    Example:
        >>> e = InvalidInputError("arrival", "must be non-decreasing")
        >>> str(e), e.column
        ('invalid input `arrival`: must be non-decreasing', 'arrival')
    """

    def __init__(self, column: str, message: str | None = None) -> None:
        self.column, text = _named("invalid input", column, message)
        super().__init__(text)


class SchemaError(InvalidInputError):
    """A DataFrame column is missing or has a type floodmark cannot use.

    Example:
        >>> str(SchemaError("ts", "missing column"))
        'invalid input `ts`: missing column'
    """


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


class InternalError(FloodmarkError, RuntimeError):
    """A bug in floodmark, not in the caller's input (e.g. an output batch the engine
    built does not match its own schema). Please report it."""


__all__ = [
    "ChannelOutOfRangeError",
    "ExecutorEnvironmentError",
    "FloodmarkError",
    "IllegalStateError",
    "InternalError",
    "InvalidInputError",
    "InvalidParameterError",
    "SchemaError",
    "SnapshotError",
]
