"""The words and rules every layer shares, each written once: the aggregate names and
the drop reasons (both from the engine, ``floodmark._core``), the order in which
records are processed, and the bound that keeps the Spark layer's window arithmetic in
range."""

from __future__ import annotations

from collections.abc import Sequence

from floodmark import _core

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
    "DROP_REASONS",
    "MIN_EVENT_TIME",
    "NO_WINDOW",
    "NULL_ARRIVAL",
    "NULL_CHANNEL",
    "NULL_EVENT_TIME",
    "NULL_REASONS",
    "PICKS",
    "SAFE",
    "SAFE_PARAM",
    "processing_order",
    "tie_values",
]
