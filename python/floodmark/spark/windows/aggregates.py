"""The native window path's aggregates, as the Rust operator computes them, as
mergeable **parts**: a value per record (:func:`row_parts`) and how two parts combine
(:data:`MERGE`: a sum, a minimum or a maximum), so the same definition serves
``groupBy`` (on-time firings), running window functions (refirings) and, in a live
query, the partial aggregates of windows still open carried from batch to batch.

* ``count``: a count (the sum of ones);
* ``sum`` of a ``bigint`` column: the sums of its low and high 32-bit halves,
  recombined wrapping like a Java ``long``, so that Spark's ANSI mode cannot fail
  (exact below 2^31 values);
* ``min`` / ``max``;
* ``first`` / ``last``: the value at the smallest / largest ``(event time, arrival,
  channel, the aggregated values)`` among non-null values (the runner's order; see
  :meth:`WindowPlan.pick_order`): the minimum / maximum of that struct with the value
  last.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from floodmark.spark.columns import quote
from floodmark.spark.windows.plan import WindowPlan
from floodmark.vocabulary import PICKS, agg_name

if TYPE_CHECKING:
    from pyspark.sql import Column

Agg = str | tuple[str, str]
Parts = Callable[[str], "Column"]  # part name -> its column

#: The aggregates of a column (of :data:`floodmark.vocabulary.AGG_FUNCTIONS`) this
#: path has Spark forms for (:func:`parts`, :func:`merge`, :func:`result`): each gives
#: the engine's value whatever order Spark adds the records in (``first``/``last`` by
#: the tie order carried in their parts). ``mean`` is not one: the engine's float sum
#: depends on the order of addition, so it takes the keyed path.
NATIVE_AGGREGATES = ("sum", "min", "max", "first", "last")
_LOW32 = 0xFFFFFFFF


def part_names(i: int, agg: Agg) -> list[str]:
    """The part columns of the ``i``-th aggregate."""
    kind = agg if isinstance(agg, str) else agg[0]
    n = 2 if kind == "sum" else 1
    return [f"__fm_part{i}_{k}" for k in range(n)]


def row_parts(plan: WindowPlan, i: int, agg: Agg) -> list[tuple[str, Column]]:
    """The ``i``-th aggregate's parts for one record: ``(name, value)``."""
    from pyspark.sql import functions as F

    names = part_names(i, agg)
    if isinstance(agg, str):  # "count"
        return [(names[0], F.lit(1).cast("bigint"))]
    func, column = agg
    value = F.col(quote(column)).cast("bigint")
    if func == "sum":
        cols = [value.bitwiseAND(F.lit(_LOW32)), F.shiftright(value, 32)]
    elif func in ("min", "max"):
        cols = [value]
    else:  # first / last: by event time, then processing order
        by = [F.col(quote(c)) for c in plan.pick_order()]  # the ties (after 3) as bigint
        order = F.struct(*by[:3], *[c.cast("bigint") for c in by[3:]], value.alias("value"))
        cols = [F.when(value.isNotNull(), order)]
    return list(zip(names, cols, strict=True))


def merge(agg: Agg) -> Callable[[Column], Column]:
    """How the parts of an aggregate combine: every part of one aggregate the same way
    (nulls ignored)."""
    from pyspark.sql import functions as F

    kind = agg if isinstance(agg, str) else agg[0]
    if kind in ("count", "sum"):
        return F.sum
    if kind in ("min", "first"):
        return F.min
    return F.max


def parts(plan: WindowPlan, i: int, agg: Agg) -> list[tuple[str, Column]]:
    """The ``i``-th aggregate's parts over records: ``(name, aggregate expression)``,
    the expression unnamed so that it serves ``agg`` and ``over`` alike."""
    combine = merge(agg)
    return [(name, combine(value)) for name, value in row_parts(plan, i, agg)]


def merged(i: int, agg: Agg) -> list[tuple[str, Column]]:
    """The ``i``-th aggregate's parts over rows that hold parts: ``(name, expression)``."""
    from pyspark.sql import functions as F

    combine = merge(agg)
    return [(name, combine(F.col(name))) for name in part_names(i, agg)]


def result(i: int, agg: Agg, p: Parts) -> Column:
    """The ``i``-th aggregate's value from its parts, named as the runner names it."""
    from pyspark.sql import functions as F

    names = part_names(i, agg)
    if isinstance(agg, str) or agg[0] in ("min", "max"):
        out = p(names[0])
    elif agg[0] in PICKS:
        out = p(names[0]).getField("value")
    else:
        low, high = p(names[0]), p(names[1])
        carried = F.shiftleft(high + F.shiftright(low, 32), 32)
        out = carried.bitwiseOR(low.bitwiseAND(F.lit(_LOW32)))
    return out.alias(agg_name(agg))


__all__ = ["NATIVE_AGGREGATES", "merge", "merged", "part_names", "parts", "result", "row_parts"]
