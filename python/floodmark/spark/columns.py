"""Column checks and time conversions between Spark types and engine ticks.

Event time and arrival may each be ``TimestampType`` (ticks are microseconds since the
epoch), ``TimestampNTZType`` (the wall time read as UTC, microseconds) or an integer
column of epoch values in a declared unit (``s``, ``ms``, ``us``, ``ns``). A timestamp
column given a unit coarser than microseconds (``ms``, ``s``) is read in ticks of that
unit, sub-unit digits truncated toward negative infinity (as Flink's
``Instant.toEpochMilli()``), and written back on a boundary of that unit. Outputs go
back to the input's type. All checks run on the schema, before any job starts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import pyarrow as pa

from floodmark.column_kinds import (
    TimeKind,
    key_type,
    marker_kind,
    tick_unit,
    time_kind,
    value_type,
)
from floodmark.exceptions import InvalidParameterError, SchemaError
from floodmark.time import TICKS_PER_SECOND
from floodmark.vocabulary import SAFE, first_repeat, named_twice

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

Kind = TimeKind  # as the core names it

_NTZ_TO_MICROS = (
    "cast(datediff(cast({c} as date), date'1970-01-01') as bigint) * 86400000000"
    " + cast(hour({c}) as bigint) * 3600000000 + cast(minute({c}) as bigint) * 60000000"
    " + cast(date_part('SECOND', {c}) * 1000000 as bigint)"
)


@dataclass(frozen=True)
class TimeColumn:
    """A resolved time column: its name, Spark kind and tick unit."""

    name: str
    kind: Kind
    unit: str

    @property
    def _micros_per_tick(self) -> int:
        """For timestamp kinds: microseconds per tick (1 unless a coarser unit)."""
        return _MICROS_PER_TICK[self.unit]

    def ticks(self) -> Column:
        """The column as ``bigint`` ticks of :attr:`unit`."""
        from pyspark.sql import functions as F

        if self.kind == "integer":
            return F.col(quote(self.name)).cast("bigint")
        if self.kind == "timestamp":
            micros = f"unix_micros({quote(self.name)})"
        else:
            micros = _NTZ_TO_MICROS.format(c=quote(self.name))
        per = self._micros_per_tick
        if per == 1:
            return F.expr(micros)
        # exact integer floor division: sub-unit digits truncated toward negative infinity
        return F.expr(f"(({micros}) - pmod(({micros}), {per})) div {per}")

    def from_ticks(self, ticks: Column) -> Column:
        """Ticks back to this column's type; the ``i64`` extremes (no watermark yet,
        end of input) become null for timestamp columns."""
        from pyspark.sql import functions as F

        if self.kind == "integer":
            return ticks
        per = self._micros_per_tick
        bounded = F.when((ticks > F.lit(-SAFE // per)) & (ticks < F.lit(SAFE // per)), ticks)
        if self.kind == "timestamp":
            return F.timestamp_micros(bounded if per == 1 else bounded * F.lit(per))
        # whole days and the seconds left: ``make_dt_interval``'s seconds are a
        # decimal(18, 6), which ends ~31,700 years from the epoch; days reach far beyond
        # (decimal division: exact, as the ticks are a multiple of a day)
        per_day = 86_400_000_000 // per
        rest = F.pmod(bounded, F.lit(per_day))
        days = (bounded - rest).cast("decimal(20,0)") / F.lit(per_day)
        return F.expr("make_timestamp_ntz(1970, 1, 1, 0, 0, 0)") + F.make_dt_interval(
            days=days.cast("int"), secs=rest.cast("decimal(20,0)") / F.lit(1_000_000 // per)
        )


#: The tick units a timestamp column can be read in, as microseconds per tick.
_MICROS_PER_TICK = {u: TICKS_PER_SECOND["us"] // TICKS_PER_SECOND[u] for u in ("us", "ms", "s")}


def quote(name: str) -> str:
    """Backtick-quote a column name for Spark expressions."""
    return "`" + name.replace("`", "``") + "`"


def name_key(df: DataFrame) -> Callable[[str], str]:
    """How ``df``'s session tells column names apart: ignoring case (Spark's default)
    or, under ``spark.sql.caseSensitive=true``, exactly. Two names clash when their keys
    are equal."""
    sensitive = str(df.sparkSession.conf.get("spark.sql.caseSensitive", "false"))
    return str if sensitive.strip().lower() == "true" else str.lower


def clashing(df: DataFrame, names: Iterable[str]) -> list[str]:
    """``df``'s columns named like one of ``names``, the way its session compares names
    (:func:`name_key`)."""
    key = name_key(df)
    taken = {key(n) for n in names}
    return [c for c in df.columns if key(c) in taken]


def check_distinct_columns(df: DataFrame, returned: str) -> None:
    """``df`` has no column twice, the way its session compares names (frames made by
    joins can have ``x`` and ``X``, or ``x`` twice), since ``returned`` carries every
    input column: before any job (Spark would fail with ``AMBIGUOUS_REFERENCE`` later).

    Raises:
        SchemaError: naming the repeated column.
    """
    repeat = first_repeat(df.columns, name_key(df))
    if repeat is not None:
        first, name = repeat
        raise SchemaError(
            name,
            f"the DataFrame has two columns named {named_twice(first, name)} (the session "
            f"compares names ignoring case unless spark.sql.caseSensitive is true), and "
            f"{returned}: rename or drop one first",
        )


def not_arrow(df: DataFrame) -> str | None:
    """The first column of ``df`` that Spark cannot send through Arrow (a year-month
    or calendar interval), or None: the passes that carry every column through
    ``mapInArrow`` cannot take it."""
    from pyspark.sql.pandas.types import to_arrow_type

    for f in df.schema.fields:
        try:
            to_arrow_type(f.dataType, timezone="UTC")  # any zone: only the type counts
        except TypeError:  # PySparkTypeError: UNSUPPORTED_DATA_TYPE_FOR_ARROW_CONVERSION
            return f.name
    return None


def field_type(df: DataFrame, name: str, parameter: str) -> DataType:
    """The Spark type of column ``name``; a clear error if it does not exist."""
    fields = {f.name: f.dataType for f in df.schema.fields}
    key = name_key(df)
    same = [f.name for f in df.schema.fields if key(f.name) == key(name)]
    if len(same) > 1:  # Spark would fail later: the reference is ambiguous
        raise SchemaError(
            name,
            f"the DataFrame has {len(same)} columns named {name!r} (given as {parameter}=: "
            f"{same}); rename or drop all but one",
        )
    if name not in fields:
        hint = f"; names are matched exactly: did you mean {same[0]!r}?" if same else ""
        raise SchemaError(
            name,
            f"the DataFrame has no column {name!r} (given as {parameter}=); "
            f"its columns are {sorted(fields)}{hint}",
        )
    return fields[name]


def time_column(df: DataFrame, name: str, unit: str | None, parameter: str) -> TimeColumn:
    """Resolve a time column: Timestamp, TimestampNTZ, or integer epoch values.

    Args:
        df: the input DataFrame.
        name: the column's name.
        unit: the unit of an integer column (``s``, ``ms``, ``us``, ``ns``; default
            ``ms``). For a timestamp column the tick unit (default ``us``, the column's
            precision): ``ms`` or ``s`` read it in those ticks (truncated toward negative
            infinity) and write watermarks back on that unit's boundaries; ``ns`` is
            refused (finer than the column).
        parameter: the API parameter that named the column, for error messages.
    """
    dtype = field_type(df, name, parameter)
    arrow = as_arrow(dtype)
    kind = time_kind(arrow, name, parameter, dtype.simpleString())
    tick = tick_unit(arrow, unit, f"{parameter}_unit")
    if kind != "integer" and tick not in _MICROS_PER_TICK:
        raise InvalidParameterError(
            f"{parameter}_unit",
            f"{tick!r} is finer than the {dtype.simpleString()} column {name!r} "
            "(microseconds); use 'us' (the default), 'ms' or 's'",
        )
    return TimeColumn(name, kind, tick)


def marker_column(df: DataFrame, name: str, event_time: TimeColumn) -> TimeColumn:
    """Resolve the punctuated strategy's marker column: watermarks of ``event_time``, of
    its kind and read in its unit (:func:`floodmark.column_kinds.marker_kind`)."""
    dtype = field_type(df, name, "marker_column")
    event = (event_time.kind, event_time.unit)
    kind = marker_kind(as_arrow(dtype), name, event, dtype.simpleString())
    return TimeColumn(name, kind, event_time.unit)


def as_arrow(dtype: DataType) -> pa.DataType:
    """The Arrow type Spark sends a column of type ``dtype`` to Python in, which
    :mod:`floodmark.column_kinds` judges (``null`` for a type PySpark has no Arrow form
    for: every rule refuses it)."""
    from pyspark.sql.pandas.types import to_arrow_type

    try:
        return to_arrow_type(dtype, timezone="UTC")
    except Exception:  # PySpark raises several kinds for a type it cannot send
        return pa.null()


#: Spark's default string collation: values compared byte for byte.
BINARY_COLLATION = "UTF8_BINARY"


def key_column(df: DataFrame, name: str, parameter: str) -> DataType:
    """Check a key or channel column: integer, or string compared byte for byte.

    A string column with another collation (Spark 4's ``UTF8_LCASE``, ``UNICODE_CI``,
    ...) is refused: Spark's grouping and joins would follow it ('a' and 'A' one key)
    while the Rust engine compares bytes, so the two window paths and the timeline
    would tell the values apart differently."""
    from pyspark.sql.types import StringType

    dtype = field_type(df, name, parameter)
    key_type(as_arrow(dtype), name, parameter, dtype.simpleString())
    collation = getattr(dtype, "collation", BINARY_COLLATION)
    if isinstance(dtype, StringType) and collation != BINARY_COLLATION:
        raise SchemaError(
            name,
            f"{parameter}= column {name!r} is a string with collation {collation}; "
            f"floodmark compares keys and channels byte for byte: use "
            f"collate({name!r}, {BINARY_COLLATION!r}) (or lower() to make case not count)",
        )
    return dtype


def value_column(df: DataFrame, name: str, parameter: str) -> Literal["bigint", "double"]:
    """Check an aggregated value column; returns the type it is sent to the engine as
    (:func:`floodmark.column_kinds.value_type`)."""
    dtype = field_type(df, name, parameter)
    sent = value_type(as_arrow(dtype), name, parameter, dtype.simpleString())
    return "bigint" if sent == pa.int64() else "double"
