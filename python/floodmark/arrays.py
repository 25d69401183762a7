"""Python values as the engine's Arrow arrays: the conversions every native call's
columns go through, each error naming the column."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from floodmark.exceptions import InvalidInputError


def to_int64_array(values: Any, column: str, *, nullable: bool = False) -> pa.Array:
    """Converts a pyarrow array/chunked array, numpy array, pandas Series or list of
    ints to a ``pyarrow.int64`` array.

    Raises:
        InvalidInputError: the values are not integers (floats are refused, even whole
            ones, rather than truncated), do not fit an int64, or hold nulls when not
            allowed.
    """
    try:
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if isinstance(values, pa.Array):
            arr = values
        elif type(values).__module__.startswith("pandas"):
            arr = pa.Array.from_pandas(values)
        elif type(values).__module__.startswith("numpy"):
            arr = pa.array(values)
        else:
            # the type is inferred, so that floats are refused below, not truncated
            arr = pa.array(list(values))
        if pa.types.is_timestamp(arr.type) or pa.types.is_duration(arr.type):
            arr = arr.cast(pa.int64())
        if not (pa.types.is_integer(arr.type) or pa.types.is_null(arr.type)):
            raise InvalidInputError(column, f"must hold integers (int64 ticks), got {arr.type}")
        arr = arr.cast(pa.int64())
    except InvalidInputError:
        raise
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
        raise InvalidInputError(column, f"cannot be read as int64 ticks: {e}") from e
    if not nullable and arr.null_count:
        raise InvalidInputError(column, f"holds {arr.null_count} null value(s); filter nulls first")
    return arr


def to_string_array(values: Any, column: str) -> pa.Array:
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if not isinstance(arr, pa.Array):
        arr = pa.array(list(arr), pa.string())
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        raise InvalidInputError(column, f"must be strings, got {arr.type}")
    return arr.cast(pa.string())


__all__ = ["to_int64_array", "to_string_array"]
