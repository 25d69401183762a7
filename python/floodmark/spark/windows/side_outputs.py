"""The side outputs (late and dropped rows, every input column) of both window paths,
and which input rows the keyed window operator can emit as late or dropped.

The keyed operator (:mod:`.keyed`) is sent only the columns it needs;
its late and dropped records are joined back to the input for every column. Joining
the whole input would shuffle every row (measured on 10M rows: 4 s for the late output
and 2.2 s for the dropped one, where the native path's filtered scan takes 0.4 s). So
the input is first narrowed to rows that *can* be emitted, by conditions that hold for
every emitted row (a superset: the join keeps exactly the emitted ones):

* **late**: the operator sends a record that went into no window to the side output
  iff ``ts + L <= W`` (Flink's ``isElementLate``: wrapping like a Java ``long``), with
  ``W`` the watermark in force at its arrival, the same for every record between two
  advances of the timeline (:func:`floodmark.spark.lookup.in_force_column`). The
  filter is that very test (:mod:`floodmark.spark.late`).
* **dropped**: ``min_event_time`` is a tumbling or sliding record at ``Long.MIN_VALUE``;
  ``no_window`` a record in no window that is not late. Every window a record is
  assigned contains or follows its event time (``max_ts >= ts``, also where Flink's
  negative-time arithmetic assigns a later window), so a record all of whose windows
  are late is element-late too (the cleanup time ``max_ts + L`` is capped at ``MAX``
  as in Flink). A record is therefore in ``no_window`` only if it was assigned no
  window at all: a sliding window with gaps (``(ts - offset) mod slide >= size``).
  The argument needs ``max_ts >= ts`` without overflow: records within ``2^62`` of the
  ``long`` range's ends, and window parameters of ``2^60`` ticks or more, are always
  candidates.

Where the watermark lookup does not fit (:func:`~floodmark.spark.lookup.in_force_column`
returns None),
or the window's parameters are that large, the whole input is joined, as before.
"""

from __future__ import annotations

import functools
import operator
from typing import TYPE_CHECKING

import pyarrow as pa

from floodmark.spark.columns import quote
from floodmark.spark.late import element_late
from floodmark.spark.local_frames import local_frame
from floodmark.spark.lookup import in_force_column
from floodmark.spark.plan import error_reason, valid_rows
from floodmark.spark.timeline import Timeline
from floodmark.spark.windows.plan import ARRIVAL, TS, WindowPlan
from floodmark.vocabulary import DROP_REASON, LATE_WATERMARK, SAFE, SAFE_PARAM

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


#: Emitted rows a join broadcasts when their number is known (a few MB of keys and times).
BROADCAST_ROWS = 100_000


def late_candidates(spark: SparkSession, plan: WindowPlan, timeline: Timeline) -> Column | None:
    """The rows (with ``TS`` and ``ARRIVAL`` in ticks) for which ``ts + L <= W`` holds,
    with Java's wrapping addition; None when the watermark in force cannot be looked
    up by a constant array."""
    from pyspark.sql import functions as F

    in_force = in_force_column(spark, timeline, ARRIVAL)
    if in_force is None:
        return None
    return element_late(F.col(TS), plan.lateness, in_force)


def dropped_candidates(plan: WindowPlan) -> Column | None:
    """The rows (with ``TS`` in ticks) that may be dropped as ``min_event_time`` or
    ``no_window``; None when the window's parameters are too large for the argument."""
    from pyspark.sql import functions as F

    kind, size, slide, offset, gap = plan.window.params(plan.wm.event_time.unit)
    if max(size, slide, gap, abs(offset)) >= SAFE_PARAM:
        return None
    ts = F.col(TS)
    extreme = ~ts.between(-SAFE, SAFE)
    if kind == "sliding" and slide > size:
        # in range (the CASE keeps the arithmetic from overflowing under ANSI mode)
        return F.when(extreme, F.lit(True)).otherwise(
            F.pmod(ts - F.lit(offset), F.lit(slide)) >= F.lit(size)
        )
    return extreme


def matched(
    df: DataFrame,
    plan: WindowPlan,
    rows: DataFrame | pa.Table,
    extra: str,
    candidates: Column | None,
    emitted_rows: int | None = None,
) -> DataFrame:
    """The input rows, every column, that the keyed operator emitted in ``rows`` (its
    late or dropped records, carrying only the columns it was sent), with ``extra``
    (the watermark they met, or the reason). A record's fate depends only on its keys,
    event time, arrival and channel: records equal in those are adjacent in the
    runner's order (arrival, channel, event time, key), meet the same watermark, and a
    late one leaves the window state as it was; so joining the input on them (keys
    null-safe), once each, finds exactly the rows the operator emitted, each once.
    ``candidates`` (over ``TS`` and ``ARRIVAL``) narrows the input first to rows that
    can be emitted (:func:`late_candidates`, :func:`dropped_candidates`), so that only
    those are shuffled for the join; ``emitted_rows``, when the caller knows how many
    rows ``rows`` holds: up to :data:`BROADCAST_ROWS` of them are broadcast, and nothing
    is shuffled. ``rows``
    collected to the driver (at most :data:`BROADCAST_ROWS`) are broadcast from there,
    without a job (:func:`distinct_local`)."""
    from pyspark.sql import functions as F

    wm = plan.wm
    names = [*plan.keys, TS, ARRIVAL, *([wm.channel] if wm.channel not in plan.keys else [])]
    aliases = [*[f"__fm_m{i}" for i in range(len(names))], "__fm_extra"]
    if isinstance(rows, pa.Table):
        emitted = F.broadcast(
            distinct_local(df.sparkSession, rows.select([*names, extra]), aliases)
        )
    else:
        emitted = rows.select(
            *[F.col(quote(n)).alias(a) for n, a in zip([*names, extra], aliases, strict=True)]
        ).distinct()
        if emitted_rows is not None and emitted_rows <= BROADCAST_ROWS:
            emitted = F.broadcast(emitted)
    types = {f.name: f.dataType for f in emitted.schema.fields}
    records = df.where(valid_rows(wm)).select(
        "*", wm.event_time.ticks().alias(TS), wm.arrival.ticks().alias(ARRIVAL)
    )
    if candidates is not None:
        records = records.where(candidates)
    same = [
        F.col(quote(n)).cast(types[a]).eqNullSafe(F.col(a))
        for n, a in zip(names, aliases[:-1], strict=True)
    ]
    joined = records.join(emitted, functools.reduce(operator.and_, same), "inner")
    return joined.select(*[F.col(quote(c)) for c in df.columns], F.col("__fm_extra").alias(extra))


def distinct_local(spark: SparkSession, table: pa.Table, names: list[str]) -> DataFrame:
    """``table``'s distinct rows, columns renamed to ``names``, as a local DataFrame:
    deduplicated here, so that its broadcast runs no job. Its columns are keys, times,
    the channel and the watermark or reason: integers and strings (keys and channels
    of another type are refused by the plans), which Arrow groups as Spark's join
    matches them (nulls one group: the join is null-safe)."""
    table = table.rename_columns(names)
    return local_frame(spark, table.group_by(names, use_threads=False).aggregate([]))


def side_frame(rows: DataFrame, plan: WindowPlan, df: DataFrame, kind: str) -> DataFrame:
    """Late or dropped rows: every input column, in the input's order and types, and
    the watermark they met (``late``, from ticks) or the reason (``dropped``)."""
    from pyspark.sql import functions as F

    extra = (
        plan.wm.event_time.from_ticks(F.col(LATE_WATERMARK)).alias(LATE_WATERMARK)
        if kind == "late"
        else F.col(DROP_REASON)
    )
    return rows.select(*[F.col(quote(c)) for c in df.columns], extra)


def errors_frame(df: DataFrame, plan: WindowPlan) -> DataFrame:
    """Rows the watermark stages cannot place, every column, with the reason (never
    lost)."""
    from pyspark.sql import functions as F

    cols = [F.col(quote(c)) for c in df.columns]
    return df.where(~valid_rows(plan.wm)).select(*cols, error_reason(plan.wm).alias(DROP_REASON))


__all__ = [
    "distinct_local",
    "dropped_candidates",
    "errors_frame",
    "late_candidates",
    "matched",
    "side_frame",
]
