"""The words and rules every layer shares, each written once: the aggregate names and
the drop reasons (both from the engine, ``floodmark._core``), the order in which
records are processed, and the bound that keeps the Spark layer's window arithmetic in
range."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from floodmark import _core
from floodmark.exceptions import InvalidParameterError, SchemaError

#: Every aggregate the window operator computes, as the engine names them.
AGGREGATES: tuple[str, ...] = tuple(_core.AGGREGATES)
#: The aggregates over a value column (``(function, column)``): all but ``count``.
AGG_FUNCTIONS: tuple[str, ...] = tuple(a for a in AGGREGATES if a != "count")
#: The aggregates whose value depends on the order of tied records.
PICKS: tuple[str, ...] = ("first", "last")

#: Every drop reason, as the engine words them: the watermark stages' (a null event
#: time, arrival or channel, in the order they are tested), then the window operator's.
DROP_REASONS: tuple[str, ...] = tuple(_core.DROP_REASONS)
NULL_EVENT_TIME, NULL_ARRIVAL, NULL_CHANNEL, MIN_EVENT_TIME, NO_WINDOW = DROP_REASONS
#: The reasons the watermark stages give, in the order they are tested.
NULL_REASONS: tuple[str, ...] = (NULL_EVENT_TIME, NULL_ARRIVAL, NULL_CHANNEL)

#: The window kinds a bound sweep (``analyze_bounds``, ``floodmark analyze``) takes,
#: and why not the others.
SWEPT_WINDOWS: tuple[str, ...] = ("tumbling", "sliding")
NOT_SWEPT = "session windows depend on which records are late"

#: Event times and watermarks within this bound of zero keep the Spark layer's window
#: arithmetic from overflowing.
SAFE = 1 << 62
#: Window parameters (size, slide, gap, ``|offset|``) below this keep it in range too.
SAFE_PARAM = 1 << 60


#: The window operator's result columns after the keys and the aggregates, as the
#: engine names them (``rust/python/window/arrow_out.rs``).
RESULT_TAIL: tuple[str, ...] = ("watermark", "timing", "trigger_position", "trigger_time")
#: The result columns between the keys and the aggregates.
RESULT_WINDOW: tuple[str, ...] = ("window_start", "window_end")
#: The result columns by name, for the layers that build them (the Spark paths).
FIRED_WATERMARK, TIMING, TRIGGER_POSITION, TRIGGER_TIME = RESULT_TAIL
WINDOW_START, WINDOW_END = RESULT_WINDOW
#: The Spark functions' result columns after the aggregates: the engine's trigger
#: position and time become when the window fired (``fired_at``, in the arrival
#: column's type; the engine's names stay reserved, used on the way).
SPARK_RESULT_TAIL: tuple[str, ...] = ("watermark", "timing", "fired_at")


def result_columns(
    keys: Sequence[str], agg_names: Sequence[str], tail: Sequence[str] = RESULT_TAIL
) -> list[str]:
    """The window operator's result columns, in order (``tail``: on Spark,
    :data:`SPARK_RESULT_TAIL`)."""
    return [*keys, *RESULT_WINDOW, *agg_names, *tail]


def first_repeat(names: Iterable[str], key: Callable[[str], str] = str) -> tuple[str, str] | None:
    """The first two of ``names`` equal under ``key`` (exact names, or the way a Spark
    session compares them), in order, or None: a table, or an output, cannot have both
    (a reference to either is ambiguous, and a write fails)."""
    seen: dict[str, str] = {}
    for name in names:
        if key(name) in seen:
            return seen[key(name)], name
        seen[key(name)] = name
    return None


def named_twice(first: str, name: str) -> str:
    """How an error names a repeat :func:`first_repeat` found: ``'x'``, or ``'x' and
    'X'`` when the session's comparison made two spellings one."""
    return repr(name) if first == name else f"{first!r} and {name!r}"


def check_result_names(
    keys: Sequence[str],
    agg_names: Sequence[str],
    *,
    key: Callable[[str], str] = str,
    tail: Sequence[str] = RESULT_TAIL,
) -> None:
    """The results' columns have distinct names: the keys, the window, the aggregates
    and ``tail``, the layer's columns after them (:data:`RESULT_TAIL` in-process,
    :data:`SPARK_RESULT_TAIL` on Spark, where the engine's stay reserved).

    Raises:
        InvalidParameterError: naming ``aggs`` or ``key``, whichever the repeat is.
    """
    reserved = [n for n in RESULT_TAIL if n not in tail]
    repeat = first_repeat([*result_columns(keys, agg_names, tail), *reserved], key)
    if repeat is None:
        return
    first, name = repeat
    same = named_twice(first, name)
    added = ", ".join([*RESULT_WINDOW, *tail])
    on_the_way = f"; {', '.join(reserved)} on the way" if reserved else ""
    raise InvalidParameterError(
        "aggs" if name in agg_names else "key",
        f"the results would have two columns named {same}: a key column named like a "
        f"column the window operator adds ({added}, the aggregates' names{on_the_way}) "
        "must be renamed first, and an aggregate or key given only once",
    )


#: The columns a watermark stage adds to each record, as every layer names them.
WATERMARK_COLUMNS: tuple[str, ...] = ("channel_watermark", "watermark", "is_late")
#: The column a window's late rows add to the input's: the watermark that found the
#: row late (in every layer, in-process and Spark, batch and live).
LATE_WATERMARK = "watermark"
#: The column a window's dropped rows add to the input's: why the row was dropped.
DROP_REASON = "reason"
#: The columns a window's side outputs add to the input's rows.
SIDE_OUTPUT_COLUMNS: dict[str, tuple[str, ...]] = {
    "late rows": (LATE_WATERMARK,),
    "dropped rows": (DROP_REASON,),
}


def check_not_added(
    columns: Sequence[str],
    outputs: dict[str, tuple[str, ...]],
    *,
    key: Callable[[str], str] = str,
) -> None:
    """No input column is named (compared by ``key``: exact names, or the way a Spark
    session compares them) like a column floodmark adds to the input's rows in one of
    ``outputs`` (output: the columns it adds): the output would have it twice.

    Raises:
        SchemaError: naming the input's column.
    """
    added = {key(name) for names in outputs.values() for name in names}
    for column in columns:
        if key(column) in added:
            adds = "; ".join(f"to the {output}: {', '.join(n)}" for output, n in outputs.items())
            raise SchemaError(
                column,
                f"the input already has a column {column!r}, and floodmark adds {adds}; "
                "rename it first",
            )


def flag(value: object, parameter: str) -> bool:
    """``value`` if it is a bool, else a clear error naming ``parameter``."""
    if not isinstance(value, bool):
        raise InvalidParameterError(parameter, f"expected True or False, got {value!r}")
    return value


def snapshot_bytes(data: object) -> bytes:
    """``data`` as the bytes of a snapshot (``bytes``, ``bytearray``, ``memoryview``);
    a clear error naming ``data`` for anything else (a path, a str, None)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidParameterError(
            "data", f"expected the bytes snapshot() returned, got {type(data).__name__}"
        )
    return bytes(data)


def column_name(value: object, parameter: str, needs: str = "") -> str:
    """A column name given as ``parameter``: a non-empty ``str``; a clear error for
    anything else (a position, a ``Column`` object, ``""``: floodmark takes names),
    the one check of a name argument in every layer. ``needs``: what the call needs
    the column for, added to the error.

    Raises:
        InvalidParameterError: naming ``parameter``.
    """
    if not isinstance(value, str) or not value:
        plain = isinstance(value, (str, int, float, type(None)))
        shown = repr(value) if plain else type(value).__name__
        raise InvalidParameterError(
            parameter, f"expected a column name (a non-empty str), got {shown}{needs}"
        )
    return value


def column_names(value: object, parameter: str) -> list[str]:
    """A column name or a list of them (e.g. ``key=``), as a list; a clear error for
    anything else (a ``Column`` object, say: floodmark takes names)."""
    if isinstance(value, str):
        return [column_name(value, parameter)]
    try:  # a list, tuple, pandas Index, numpy array of names...; a Column is not iterable
        names = list(value)  # type: ignore[call-overload]
    except TypeError:
        names = None
    if names is not None and all(isinstance(n, str) for n in names):
        return [column_name(n, parameter) for n in names]
    raise InvalidParameterError(
        parameter, f"expected a column name (str) or a list of them, got {type(value).__name__}"
    )


#: An aggregate as given: ``"count"`` or a ``(function, column)`` pair.
Agg = str | tuple[str, str]


def window_keys(value: object) -> list[str]:
    """A window's ``key=``: one column name or several, at least one (Flink's windows
    are keyed: ``keyBy`` before ``window``).

    Raises:
        InvalidParameterError: naming ``key``.
    """
    keys = column_names(value, "key")
    if not keys:
        raise InvalidParameterError(
            "key", "a window needs at least one key column: key='user' or key=['a', 'b']"
        )
    return keys


def parse_aggs(aggs: object) -> list[Agg]:
    """The aggregate list checked, each layer's one reading of it: ``"count"`` or
    ``(function, column)`` pairs (a tuple or a list), ``"count"`` alone for
    ``["count"]``; as ``"count"`` and tuples.

    Raises:
        InvalidParameterError: naming ``aggs``.
    """
    if isinstance(aggs, str):
        aggs = [aggs]
    if (
        isinstance(aggs, (tuple, list))
        and len(aggs) == 2
        and aggs[0] in AGG_FUNCTIONS
        and isinstance(aggs[1], str)
    ):
        pair = (aggs[0], aggs[1])
        raise InvalidParameterError(
            "aggs", f"give a list of aggregates: [{pair!r}] for the one pair {pair!r}"
        )
    if not isinstance(aggs, Iterable):
        raise InvalidParameterError(
            "aggs", f"expected a list of aggregates, e.g. ['count'], got {aggs!r}"
        )
    out: list[Agg] = []
    for agg in aggs:
        if agg == "count":
            out.append("count")
        elif (
            isinstance(agg, (tuple, list))
            and len(agg) == 2
            and agg[0] in AGG_FUNCTIONS
            and isinstance(agg[1], str)
        ):
            out.append((str(agg[0]), str(agg[1])))
        else:
            raise InvalidParameterError(
                "aggs",
                f"{agg!r} is not an aggregate; use 'count' or a (function, column) pair "
                f"with function one of {', '.join(AGG_FUNCTIONS)}",
            )
    if not out:
        raise InvalidParameterError("aggs", "give at least one aggregate")
    return out


def agg_name(agg: Agg) -> str:
    """An aggregate's result column: ``count``, or ``<function>_<column>``."""
    return "count" if isinstance(agg, str) else f"{agg[0]}_{agg[1]}"


def tie_values(aggs: Sequence[str | tuple[str, str]]) -> list[str]:
    """The value columns that order records tied in everything else, each once: those
    of the ``first``/``last`` aggregates (which value is first or last), then every
    other aggregated column, each in the order given. With all of them the order is
    total over what the window operator sees, so a refiring's intermediate ``sum`` or
    ``min``, and a float ``mean``'s last bit, do not depend on the order in which Spark
    delivers records that tie in arrival, channel, event time and key."""
    values = [a for a in aggs if not isinstance(a, str)]
    picks = [a[1] for a in values if a[0] in PICKS]
    return list(dict.fromkeys([*picks, *(a[1] for a in values)]))


def processing_order(
    arrival: str, channel: str, event_time: str, keys: Sequence[str], ties: Sequence[str]
) -> list[str]:
    """The columns that order the records, each once: ``(arrival, channel, event
    time, keys..., ties...)``, the channel in its place among the keys if it is one.
    ``ties`` (:func:`tie_values`: the aggregated values, ``first``/``last``'s first)
    make the order independent of the order in which Spark delivers the records:
    records equal in all of them are equal in every column the operator reads (but for
    the sign of a float zero: ``-0.0`` and ``0.0`` sort as equal)."""
    chan = [] if channel in keys else [channel]
    return list(dict.fromkeys([arrival, *chan, event_time, *keys, *ties]))


__all__ = [
    "AGGREGATES",
    "AGG_FUNCTIONS",
    "DROP_REASON",
    "DROP_REASONS",
    "FIRED_WATERMARK",
    "LATE_WATERMARK",
    "MIN_EVENT_TIME",
    "NO_WINDOW",
    "NULL_ARRIVAL",
    "NULL_CHANNEL",
    "NULL_EVENT_TIME",
    "NULL_REASONS",
    "PICKS",
    "RESULT_TAIL",
    "RESULT_WINDOW",
    "SAFE",
    "SAFE_PARAM",
    "SIDE_OUTPUT_COLUMNS",
    "SPARK_RESULT_TAIL",
    "TIMING",
    "TRIGGER_POSITION",
    "TRIGGER_TIME",
    "WINDOW_END",
    "WINDOW_START",
    "Agg",
    "agg_name",
    "check_not_added",
    "check_result_names",
    "first_repeat",
    "named_twice",
    "parse_aggs",
    "processing_order",
    "result_columns",
    "tie_values",
    "window_keys",
]
