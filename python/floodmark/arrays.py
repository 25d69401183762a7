"""Python values as the engine's Arrow arrays: the conversions every native call's
columns go through, each error naming the column."""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa

from floodmark.column_kinds import time_kind
from floodmark.exceptions import InvalidInputError, InvalidParameterError, SchemaError


def time_ticks(arr: pa.Array, column: str, unit: str) -> pa.Array:
    """A timestamp or duration array as ``int64`` ticks of ``unit``, the one rule for
    Arrow times: digits finer than ``unit`` are floored (toward negative infinity, as
    the Spark layer's columns are), a value whose ticks leave the ``int64`` range is
    refused naming ``column``. Any other array is returned as it is."""
    import pyarrow.compute as pc

    from floodmark.time import TICKS_PER_SECOND

    t = arr.type
    if not (pa.types.is_timestamp(t) or pa.types.is_duration(t)):
        return arr
    have, want = TICKS_PER_SECOND[t.unit], TICKS_PER_SECOND[unit]
    raw = arr.cast(pa.int64())
    if want >= have:
        try:
            return pc.multiply_checked(raw, want // have)
        except pa.ArrowInvalid:
            raise InvalidInputError(
                column, f"holds a time outside the int64 range in ticks of {unit!r}"
            ) from None
    per = have // want
    quotient = pc.divide(raw, per)  # toward zero
    below = pc.less(pc.subtract(raw, pc.multiply(quotient, per)), 0)
    return pc.if_else(below, pc.subtract(quotient, 1), quotient)


def time_column(arr: pa.Array, column: str, unit: str, parameter: str) -> pa.Array:
    """An event-time or arrival column as ``int64`` ticks of ``unit``: integers as they
    are, timestamps by :func:`time_ticks`; any other type refused naming ``column`` and
    the API's ``parameter`` (:func:`floodmark.column_kinds.time_kind`)."""
    if time_kind(arr.type, column, parameter) == "integer":
        return arr.cast(pa.int64())
    return time_ticks(arr, column, unit)


#: Arrow types without a take kernel, taken as these and cast back.
_VIEWS = {pa.string_view(): pa.large_string(), pa.binary_view(): pa.large_binary()}


def without_view(arr: Any) -> Any:
    """A string or binary view array as its large type (the same values and order:
    Arrow neither takes nor sorts views); any other array as it is."""
    return arr.cast(_VIEWS[arr.type]) if arr.type in _VIEWS else arr


def take_column(arr: pa.Array | pa.ChunkedArray, rows: pa.Array) -> pa.Array | pa.ChunkedArray:
    """``arr.take(rows)`` for any column a table can hold: a view type (Arrow has no
    take for them) as its large type cast back, a run-end encoded one decoded and
    encoded again."""
    import pyarrow.compute as pc

    t = arr.type
    if t in _VIEWS:
        return without_view(arr).take(rows).cast(t)
    if pa.types.is_run_end_encoded(t):
        taken = pc.run_end_decode(arr).take(rows)
        return pc.run_end_encode(taken, run_end_type=t.run_end_type)
    return arr.take(rows)


def _takeable(schema: pa.Schema) -> bool:
    """Whether Arrow's own take and filter take every column of ``schema``."""
    return not any(t in _VIEWS or pa.types.is_run_end_encoded(t) for t in schema.types)


def take_rows(data: Any, rows: pa.Array) -> Any:
    """``data.take(rows)`` (a table or record batch), every column taken by
    :func:`take_column`: the one way floodmark takes input rows (the records it sorts,
    the late and dropped rows), which carry every input column whatever its type."""
    if _takeable(data.schema):
        return data.take(rows)
    arrays = [take_column(c, rows) for c in data.columns]
    return type(data).from_arrays(arrays, schema=data.schema)


def check_takeable(data: Any) -> None:
    """Every column of ``data`` (a table or record batch) can be taken by
    :func:`take_rows`, as the records, late and dropped rows carry every input column:
    checked before any work, so that a call never fails after the engine moved on.

    Raises:
        SchemaError: naming the first column that cannot be.
    """
    none = pa.array([], pa.int64())
    for name, column in zip(data.schema.names, data.columns, strict=True):
        try:
            take_column(column, none)
        except pa.ArrowException as err:
            raise SchemaError(
                name,
                f"has type {column.type}, whose rows floodmark cannot carry into its "
                f"outputs (pyarrow: {err}); cast or drop the column first",
            ) from None


def filter_rows(data: Any, mask: Any) -> Any:
    """``data.filter(mask)`` (a table or record batch; a null in ``mask`` drops its row),
    by :func:`take_rows` where a column needs it."""
    import pyarrow.compute as pc

    if _takeable(data.schema):
        return data.filter(mask)
    return take_rows(data, pc.indices_nonzero(pc.fill_null(mask, False)))


def no_rows(schema: pa.Schema) -> pa.RecordBatch:
    """A record batch of ``schema`` with no rows, whatever its column types (pyarrow's
    own ways build empty columns through converters some types lack: a dictionary of
    nulls, a dense union)."""
    return pa.RecordBatch.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)


#: The type a key or channel column of Arrow's null type goes to the engine as.
NULLS_TYPE = pa.int64()


def typed_nulls(table: pa.Table, names: Any) -> pa.Table:
    """``table`` with its columns ``names`` of Arrow's null type (pandas makes one of an
    empty or all-``None`` object column) as ``int64`` nulls: a key or channel column
    whose every value is null, in a type the engine takes (an integer key's)."""
    for name in dict.fromkeys(names):
        i = table.schema.get_field_index(name)
        if i >= 0 and pa.types.is_null(table.schema.field(i).type):
            field = table.schema.field(i).with_type(NULLS_TYPE)
            table = table.set_column(i, field, table.column(i).cast(NULLS_TYPE))
    return table


def combined(table: pa.Table) -> pa.Table:
    """``table.combine_chunks()``: one chunk per column, unless a column does not fit
    one (strings or bytes over 2 GiB, past Arrow's 32-bit offsets)."""
    return table.combine_chunks()


def one_batch(table: pa.Table, parameter: str, advice: str) -> pa.RecordBatch | None:
    """``table`` as one record batch (None if it has no chunks), as every native call
    that takes one whole needs it.

    Raises:
        InvalidInputError: a column does not fit one (over 2 GiB), naming
            ``parameter`` and saying what to do (``advice``).
    """
    batches = combined(table).to_batches()
    if len(batches) > 1:
        raise InvalidInputError(
            parameter, f"does not fit one record batch (a column over 2 GiB); {advice}"
        )
    return batches[0] if batches else None


def _arrow(values: Any) -> pa.Array:
    """A pyarrow array/chunked array, numpy array, pandas Series or list as one Arrow
    array, its type inferred (so that a float is seen as one, never truncated)."""
    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks()
    if isinstance(values, pa.Array):
        return values
    if type(values).__module__.startswith("pandas"):
        return pa.Array.from_pandas(values)
    if type(values).__module__.startswith("numpy"):
        return pa.array(values)
    return pa.array(list(values))


def to_int64_array(
    values: Any, column: str, *, nullable: bool = False, unit: str | None = None
) -> pa.Array:
    """Converts a pyarrow array/chunked array, numpy array, pandas Series or list of
    ints to a ``pyarrow.int64`` array; with ``unit``, timestamps and durations too
    (:func:`time_ticks`).

    Raises:
        InvalidInputError: the values are not integers (floats are refused, even whole
            ones, rather than truncated), do not fit an int64, hold nulls when not
            allowed, or are timestamps or durations and no ``unit`` says their ticks.
    """
    try:
        arr = _arrow(values)
        if pa.types.is_timestamp(arr.type) or pa.types.is_duration(arr.type):
            if unit is None:
                raise InvalidInputError(
                    column, f"must hold integer ticks, got {arr.type}: convert it to ticks"
                )
            arr = time_ticks(arr, column, unit)
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


def field_index(schema: pa.Schema, name: str) -> int:
    """The position of input column ``name``: every native call's one lookup of a
    column by name.

    Raises:
        SchemaError: no column, or more than one, has that name (naming it).
    """
    found = schema.get_all_field_indices(name)
    if not found:
        raise SchemaError(name, f"missing column (the table has {schema.names})")
    if len(found) > 1:
        raise _named_twice(name, len(found))
    return int(found[0])


def _named_twice(name: str, times: int) -> SchemaError:
    return SchemaError(name, f"the table has {times} columns named {name!r}; rename all but one")


def as_table(value: Any, parameter: str) -> pa.Table:
    """A pyarrow ``Table``, ``RecordBatch`` or pandas ``DataFrame`` as a ``Table``.

    Raises:
        InvalidParameterError: ``value`` is none of these (named ``parameter``).
    """
    if isinstance(value, pa.Table):
        return value
    if isinstance(value, pa.RecordBatch):
        return pa.Table.from_batches([value])
    if type(value).__module__.startswith("pandas") and type(value).__name__ == "DataFrame":
        return _from_pandas(value, parameter)
    raise InvalidParameterError(
        parameter,
        f"expected a pyarrow Table or RecordBatch or a pandas DataFrame, got "
        f"{type(value).__name__}",
    )


def _from_pandas(frame: Any, parameter: str) -> pa.Table:
    """A pandas DataFrame as an Arrow table; a column pyarrow cannot convert (mixed
    types in an ``object`` column, complex numbers, say) or a name given twice is
    refused naming it (naming ``parameter`` if pyarrow does not say which column)."""
    from collections import Counter

    for name, times in Counter(str(c) for c in frame.columns).items():
        if times > 1:
            raise _named_twice(name, times)
    try:
        return pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowException, TypeError) as err:  # TypeError: sparse data
        text = str(err.args[-1]) if err.args else str(err)
        # "Conversion failed for column x with type object", "... (column x) ..."
        where = re.search(r"Conversion failed for column (.+) with type (\S+)", text)
        where = where or re.search(r"\(column (.+)\)", text)
        if where is None:
            raise InvalidParameterError(
                parameter, f"pyarrow cannot convert this pandas DataFrame to Arrow: {err}"
            ) from None
        kind = f"{where.group(2)} " if where.re.groups > 1 else ""
        said = err.args[0] if err.args else err
        raise SchemaError(
            where.group(1), f"pyarrow cannot convert this {kind}column to Arrow: {said}"
        ) from None


def to_string_array(values: Any, column: str) -> pa.Array:
    """Converts a pyarrow array/chunked array, numpy array, pandas Series or list of
    strings to a ``pyarrow.string`` array.

    Raises:
        InvalidInputError: the values are not strings (named by ``column``).
    """
    try:
        arr = _arrow(values)
        if pa.types.is_null(arr.type):
            arr = arr.cast(pa.string())
        if not (
            pa.types.is_string(arr.type)
            or pa.types.is_large_string(arr.type)
            or pa.types.is_string_view(arr.type)
        ):
            raise InvalidInputError(column, f"must be strings, got {arr.type}")
        return arr.cast(pa.string())
    except InvalidInputError:
        raise
    except (pa.ArrowException, TypeError, ValueError) as e:
        raise InvalidInputError(column, f"must be strings: {e}") from e


__all__ = [
    "NULLS_TYPE",
    "as_table",
    "field_index",
    "time_column",
    "time_ticks",
    "to_int64_array",
    "to_string_array",
    "typed_nulls",
]
