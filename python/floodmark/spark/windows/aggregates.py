"""The native window path's aggregates, as the Rust operator computes them, as parts:
Spark aggregate expressions that serve both ``groupBy`` (on-time firings) and running
window functions (refirings), and the value computed from them.

* ``count``: a count;
* ``sum`` of a ``bigint`` column: the sums of its low and high 32-bit halves,
  recombined wrapping like a Java ``long``, so that Spark's ANSI mode cannot fail
  (exact below 2^31 values);
* ``min`` / ``max``;
* ``first`` / ``last``: the value at the smallest / largest ``(event time, arrival,
  channel, first/last values)`` among non-null values (the runner's order; see
  :meth:`WindowPlan.tie_values`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from floodmark.spark.columns import quote
from floodmark.spark.windows.plan import ARRIVAL, TS, WindowPlan, agg_name

if TYPE_CHECKING:
    from pyspark.sql import Column

Agg = str | tuple[str, str]
Parts = Callable[[str], "Column"]  # part name -> its column

#: Aggregates of a column whose result does not depend on the order of addition.
ORDER_FREE = ("sum", "min", "max", "first", "last")
_LOW32 = 0xFFFFFFFF


def part_names(i: int, agg: Agg) -> list[str]:
    """The part columns of the ``i``-th aggregate."""
    kind = agg if isinstance(agg, str) else agg[0]
    n = 2 if kind == "sum" else 1
    return [f"__fm_part{i}_{k}" for k in range(n)]


def parts(plan: WindowPlan, i: int, agg: Agg) -> list[tuple[str, Column]]:
    """The ``i``-th aggregate's parts: ``(name, aggregate expression)``, the expression
    unnamed so that it serves ``agg`` and ``over`` alike."""
    from pyspark.sql import functions as F

    if isinstance(agg, str):  # "count"
        return list(zip(part_names(i, agg), [F.count(F.lit(1))], strict=True))
    func, column = agg
    value = F.col(quote(column)).cast("bigint")
    if func == "sum":
        cols = [F.sum(value.bitwiseAND(F.lit(_LOW32))), F.sum(F.shiftright(value, 32))]
    elif func in ("min", "max"):
        cols = [F.min(value) if func == "min" else F.max(value)]
    else:  # first / last: by event time, ties by arrival, channel, first/last values
        ties = [F.col(quote(v)).cast("bigint") for v in plan.tie_values()]
        order = F.when(
            value.isNotNull(),
            F.struct(F.col(TS), F.col(ARRIVAL), F.col(quote(plan.wm.channel)), *ties),
        )
        cols = [F.min_by(value, order) if func == "first" else F.max_by(value, order)]
    return list(zip(part_names(i, agg), cols, strict=True))


def result(i: int, agg: Agg, p: Parts) -> Column:
    """The ``i``-th aggregate's value from its parts, named as the runner names it."""
    from pyspark.sql import functions as F

    names = part_names(i, agg)
    if isinstance(agg, str) or agg[0] != "sum":
        out = p(names[0])
    else:
        low, high = p(names[0]), p(names[1])
        carried = F.shiftleft(high + F.shiftright(low, 32), 32)
        out = carried.bitwiseOR(low.bitwiseAND(F.lit(_LOW32)))
    return out.alias(agg_name(agg))


__all__ = ["ORDER_FREE", "part_names", "parts", "result"]
