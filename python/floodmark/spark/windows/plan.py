"""The window stage's resolved parameters: key, value and aggregate columns, the
assigner and lateness, and the names of the columns the stage adds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from floodmark.exceptions import InvalidParameterError
from floodmark.spark.plan import WatermarkPlan

TS, ARRIVAL, REFIRE = "__fm_ts", "__fm_arrival", "__fm_refire"
AGG_FUNCTIONS = ("sum", "min", "max", "mean", "first", "last")


def parse_aggs(aggs: Sequence[str | tuple[str, str]]) -> list[str | tuple[str, str]]:
    """Check the aggregate list: ``"count"`` or ``(function, column)`` pairs."""
    out: list[str | tuple[str, str]] = []
    if isinstance(aggs, str):
        aggs = [aggs]
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
        """The value columns of the ``first``/``last`` aggregates, in the order given.
        Records equal in (arrival, channel, event time, key) are processed in the order
        of these (ascending, nulls first), so that which value is first or last does
        not depend on the order in which Spark delivers them."""
        picks = [a[1] for a in self.aggs if not isinstance(a, str) and a[0] in ("first", "last")]
        return list(dict.fromkeys(picks))

    def sent_columns(self) -> list[str]:
        chan = [self.wm.channel] if self.send_channel else []
        vals = [v for v in self.values if v not in self.keys]
        return [*self.keys, TS, ARRIVAL, *chan, *vals]


__all__ = ["AGG_FUNCTIONS", "ARRIVAL", "REFIRE", "TS", "WindowPlan", "agg_name", "parse_aggs"]
