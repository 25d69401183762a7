"""Which column types floodmark takes, and as what the engine reads them: the one rule
for every entry point.

The in-process API checks the Arrow types of its tables; the Spark layer reads each
Spark type as the Arrow type its batches cross in (``floodmark.spark.columns.as_arrow``)
and asks the same functions, so that a column refused by one is refused by the other,
with the same message (the Spark layer shows its own type name). Spark-only conditions
(a string column's collation, a timestamp's tick unit) stay in
``floodmark.spark.columns``.
"""

from __future__ import annotations

from typing import Literal

import pyarrow as pa

from floodmark.exceptions import SchemaError
from floodmark.time import check_unit

#: How a time column's values become ticks: a timestamp (an instant), a timestamp
#: without a time zone (its wall time read as UTC) or integer epoch values.
TimeKind = Literal["timestamp", "timestamp_ntz", "integer"]


def _signed(t: pa.DataType) -> bool:
    """An integer type whose every value fits the engine's ``int64``."""
    return bool(pa.types.is_integer(t)) and t != pa.uint64()


def _refuse(name: str, parameter: str, t: pa.DataType, shown: str | None, use: str) -> SchemaError:
    hint = (
        " (values past 2^63 - 1 do not fit the engine's int64: cast to int64 if they do not occur)"
        if t == pa.uint64()
        else ""
    )
    return SchemaError(name, f"{parameter}= column {name!r} has type {shown or t}{hint}; {use}")


def key_type(t: pa.DataType, name: str, parameter: str, shown: str | None = None) -> pa.DataType:
    """The type a key or channel column of Arrow type ``t`` goes to the engine as:
    integers as ``int64``, strings as they are (a string view as ``large_string``, the
    engine's strings being offsets-based), a dictionary as its values (keyed by value).

    Raises:
        SchemaError: any other type, naming column ``name``, the API's ``parameter``
            and the type (``shown``, else ``t``).
    """
    if pa.types.is_dictionary(t):
        return key_type(t.value_type, name, parameter, shown)
    if _signed(t):
        return pa.int64()
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return t
    if pa.types.is_string_view(t):
        return pa.large_string()
    raise _refuse(name, parameter, t, shown, "use an integer or string column")


def value_type(t: pa.DataType, name: str, parameter: str, shown: str | None = None) -> pa.DataType:
    """The type an aggregated value column of Arrow type ``t`` goes to the engine as:
    integers as ``int64``, floats and decimals as ``float64`` (as Spark's functions take
    a decimal: ~15-16 significant digits).

    Raises:
        SchemaError: any other type (named as by :func:`key_type`).
    """
    if _signed(t):
        return pa.int64()
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return pa.float64()
    raise _refuse(name, parameter, t, shown, "aggregates need an integer, float or decimal column")


def time_kind(t: pa.DataType, name: str, parameter: str, shown: str | None = None) -> TimeKind:
    """How an event-time or arrival column of Arrow type ``t`` becomes ticks.

    Raises:
        SchemaError: neither a timestamp nor an integer (named as by :func:`key_type`).
    """
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz is not None else "timestamp_ntz"
    if _signed(t):
        return "integer"
    raise _refuse(name, parameter, t, shown, "use a timestamp or integer epoch column")


def tick_unit(t: pa.DataType, unit: str | None, parameter: str) -> str:
    """The tick an event-time or arrival column of Arrow type ``t`` is counted in:
    ``unit`` when given, else, for a timestamp, the column's own precision (on Spark
    ``us``: a Spark timestamp crosses to Python as ``timestamp[us]``), and for
    integers (or a type :func:`time_kind` refuses) ``ms``, Flink's epoch milliseconds.

    Raises:
        InvalidParameterError: ``unit`` is not a time unit, naming ``parameter``.
    """
    default = t.unit if pa.types.is_timestamp(t) else "ms"
    return check_unit(default if unit is None else unit, parameter)


def marker_kind(
    t: pa.DataType, name: str, event: tuple[TimeKind, str], shown: str | None = None
) -> TimeKind:
    """The kind of the punctuated strategy's marker column of Arrow type ``t``: it holds
    watermarks of the event time, so it is read in the unit of the event time
    (``event``: its kind and unit) and must be of its kind (integer or timestamp).

    Raises:
        SchemaError: not a time column, or not of the event time's kind.
    """
    kind = time_kind(t, name, "marker_column", shown)
    if (kind == "integer") != (event[0] == "integer"):
        raise SchemaError(
            name,
            f"the punctuated strategy's marker column {name!r} holds watermarks of the "
            f"event time: it needs the event-time column's type and unit ({event[0]}, "
            f"{event[1]})",
        )
    return kind


__all__ = ["TimeKind", "key_type", "marker_kind", "tick_unit", "time_kind", "value_type"]
