"""The window stage's resolved parameters: key, value and aggregate columns, the
assigner and lateness, and the names of the columns the stage adds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from floodmark.spark.plan import WatermarkPlan
from floodmark.vocabulary import processing_order, tie_values

TS, ARRIVAL, REFIRE = "__fm_ts", "__fm_arrival", "__fm_refire"


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


__all__ = ["ARRIVAL", "REFIRE", "TS", "WindowPlan"]
