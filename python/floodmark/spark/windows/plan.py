"""The window stage's resolved parameters: key, value and aggregate columns, the
assigner and lateness, and the names of the columns the stage adds."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from floodmark.exceptions import InvalidParameterError
from floodmark.spark.plan import WatermarkPlan
from floodmark.vocabulary import AGG_FUNCTIONS, processing_order, tie_values

TS, ARRIVAL, REFIRE = "__fm_ts", "__fm_arrival", "__fm_refire"


def parse_aggs(aggs: Sequence[str | tuple[str, str]]) -> list[str | tuple[str, str]]:
    """Check the aggregate list: ``"count"`` or ``(function, column)`` pairs."""
    out: list[str | tuple[str, str]] = []
    if isinstance(aggs, str):
        aggs = [aggs]
    if not isinstance(aggs, Iterable):
        raise InvalidParameterError(
            "aggs", f"expected a list of aggregates, e.g. ['count'], got {aggs!r}"
        )
    for agg in aggs:
        if agg == "count":
            out.append("count")
        elif isinstance(agg, (tuple, list)) and len(agg) == 2 and agg[0] in AGG_FUNCTIONS:
            out.append((str(agg[0]), str(agg[1])))
        else:
            raise InvalidParameterError(
                "aggs",
                f"{agg!r} is not an aggregate; use 'count' or a "
                f"(function, column) pair with function one of {', '.join(AGG_FUNCTIONS)}",
            )
    if not out:
        raise InvalidParameterError("aggs", "give at least one aggregate")
    return out


def agg_name(agg: str | tuple[str, str]) -> str:
    return "count" if isinstance(agg, str) else f"{agg[0]}_{agg[1]}"


@dataclass(frozen=True)
class WindowPlan:
    """The resolved window stage."""

    wm: WatermarkPlan
    window: Any
    keys: list[str]
    values: Mapping[str, str]  # column -> "bigint" | "double"
    aggs: list[str | tuple[str, str]]
    lateness: int
    send_channel: bool

    def tie_values(self) -> list[str]:
        """The aggregated value columns, ``first``/``last``'s first
        (:func:`floodmark.vocabulary.tie_values`). Records equal in (arrival, channel,
        event time, key) are processed in the order of these (ascending, nulls first),
        so that no result depends on the order in which Spark delivers them."""
        return tie_values(self.aggs)

    def processing_order(self) -> list[str]:
        """The columns of the records sent to the window operator (``TS``, ``ARRIVAL``)
        that order them, as :func:`floodmark.vocabulary.processing_order`."""
        return processing_order(ARRIVAL, self.wm.channel, TS, self.keys, self.tie_values())

    def pick_order(self) -> list[str]:
        """The columns that decide which value is ``first``/``last`` in a window, as
        the engine decides it: the event time, then the position in the processing
        order, which within one key and event time is (arrival, channel, ties). The
        channel stays even when it is a key, so that the parts keep their shape."""
        return [TS, ARRIVAL, self.wm.channel, *self.tie_values()]

    def sent_columns(self) -> list[str]:
        chan = [self.wm.channel] if self.send_channel else []
        vals = [v for v in self.values if v not in self.keys]
        return [*self.keys, TS, ARRIVAL, *chan, *vals]


__all__ = ["ARRIVAL", "REFIRE", "TS", "WindowPlan", "agg_name", "parse_aggs"]
