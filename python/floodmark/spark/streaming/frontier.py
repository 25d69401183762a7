"""The watermark stages of one micro-batch: the frontier, the rows held back, the
timeline builder carried from batch to batch.

**The frontier** ``F_b`` is the arrival time up to which every channel is taken to be
complete after batch ``b``: with every Kafka partition read to its latest offset each
batch and the broker's ``LogAppendTime`` as arrival, a partition has no record left to
come with an arrival before the latest arrival seen, give or take the clocks of the
brokers (records of that same tick may still come: an ``allowance`` of 0 re-stamps
those the next batch reads when the latest arrival is on the grid). So ``F_b`` is the
latest arrival seen so far minus ``allowance`` (the skew allowed between partitions:
broker clocks, or partitions read behind others by a per-trigger limit), rounded down
to the emission grid, and never decreasing. Rows with
``arrival <= F_b`` are processed in batch ``b``; later ones wait in the state
(**pending**) for a later batch. A row that comes with an arrival at or before the
previous frontier ``F_{b-1}`` (a partition read late) would be behind emissions already
made: it is **re-stamped** to ``F_{b-1} + 1`` (processed with the first grid time after
the old frontier) and counted, never lost.

**The timeline** is the batch pipeline's: :class:`floodmark.timeline.TimelineBuilder`,
restored from the previous batch's snapshot, is given the batch's per-(channel, bucket)
rows up to the frontier and advanced to it; its timeline rows of the batch are the
segment ``(F_{b-1}, F_b]`` of the whole stream's. A channel first seen in a later batch
joins the valve then (:meth:`TimelineBuilder.insert_channels`, as Flink registers a new
split), at the previous frontier: when that happens depends on where the micro-batches
are cut. The channels named up front (the handlers' ``channels``: a topic's partitions)
join at the first batch, as Flink's source assigns a topic's splits when it starts, so a
partition that is only quiet is not taken for a new one. The driver holds the batch's
per-(channel, bucket) rows: bounded by the batch's size (use the source's per-trigger
limit to bound it).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from floodmark import _core
from floodmark.spark.columns import quote
from floodmark.spark.plan import WatermarkPlan, valid_rows
from floodmark.time import I64_MIN
from floodmark.timeline import TimelineBuilder

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

log = logging.getLogger(__name__)

#: The hidden columns a batch's rows carry: event time and (re-stamped) arrival in ticks.
TS, ARRIVAL, RESTAMPED = "__fm_st_ts", "__fm_st_arrival", "__fm_st_restamped"


@dataclass
class EngineState:
    """What the watermark stages carry from one batch to the next (JSON + the builder
    snapshot)."""

    channels: list[Any] = dataclasses.field(default_factory=list)
    frontier: int | None = None
    max_arrival: int | None = None
    restamped: int = 0
    late: int = 0
    dropped: int = 0
    #: How many rows wait past the frontier, held back in the version's ``pending``
    #: folder (a committed version without it, when this is above 0, is damaged; None:
    #: written by a version of floodmark that did not count them).
    held_back: int | None = None
    #: The batch's column types (``simpleString``) when the state was written: the rows
    #: held back and the operators' snapshots are in them (None: written by a version of
    #: floodmark that did not record them).
    columns: dict[str, str] | None = None
    builder: bytes | None = None

    def to_json(self) -> bytes:
        fields = dataclasses.asdict(self)
        fields.pop("builder")
        return json.dumps(fields, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes, builder: bytes | None) -> EngineState:
        return cls(**json.loads(data), builder=builder)


@dataclass
class Segment:
    """One batch's part of the watermark stages.

    Attributes:
        state: the state after the batch.
        previous: the frontier before the batch (None at first).
        buckets: the batch's processed ``(channel, bucket)`` rows with their
            ``channel_watermark`` and ``watermark`` in force.
        timeline: the combined timeline's rows of the batch (``time``, ``watermark``,
            ``status``, ``min_channel`` as a channel value, ``advance``).
        restamped: rows of this batch re-stamped to the previous frontier.
        start_watermark: the combined watermark at the previous frontier.
        watermark: the combined watermark at the frontier (``MIN``: none yet).
        min_channel: the channel value holding the combined watermark back at the
            frontier (None when none is aligned, or while no channel has a watermark).
        idle: the channel values idle at the frontier.
        emissions: every channel's own output rows of the batch (``channel`` as a
            channel value, ``time``, ``kind``, ``watermark``); empty unless the state's
            builder keeps them (the handler's ``emissions=True``).
        pending: how many rows wait past the new frontier (a bucket's rows are all on
            one side of it: the frontier is on the emission grid).
    """

    state: EngineState
    previous: int | None
    buckets: pa.Table
    timeline: pa.Table
    restamped: int
    start_watermark: int
    watermark: int
    min_channel: Any
    idle: list[Any]
    emissions: pa.Table
    pending: int

    def advances(self) -> tuple[np.ndarray, np.ndarray]:
        grew = self.timeline.column("advance").to_numpy(zero_copy_only=False)
        times = self.timeline.column("time").to_numpy(zero_copy_only=False)
        wms = self.timeline.column("watermark").to_numpy(zero_copy_only=False)
        return times[grew], wms[grew]


def with_ticks(df: DataFrame, plan: WatermarkPlan, frontier: int | None) -> DataFrame:
    """``df`` with its event time and arrival in ticks, the arrival re-stamped past
    ``frontier`` (the previous one) and flagged; null for the rows the watermark stages
    cannot place (:func:`~floodmark.spark.plan.valid_rows`), which stay."""
    from pyspark.sql import functions as F

    arrival = plan.arrival.ticks()
    if frontier is None:
        stamped: Column = arrival
        behind: Column = F.lit(False)
    else:
        stamped = F.greatest(arrival, F.lit(frontier + 1))
        behind = arrival <= F.lit(frontier)
    placed = valid_rows(plan)
    return df.select(
        "*",
        F.when(placed, plan.event_time.ticks()).alias(TS),
        F.when(placed, stamped).alias(ARRIVAL),
        F.when(placed, behind).alias(RESTAMPED),
    )


def processed_by(arrival: Any, frontier: Any) -> Any:
    """Whether rows arriving at ``arrival`` (re-stamped ticks) are processed by the
    batch whose frontier is ``frontier``; the others wait, held back, for a later batch.
    One rule for the bucket table (numpy) and the rows (Spark columns)."""
    return arrival <= frontier


def bucket_rows(rows: DataFrame, plan: WatermarkPlan) -> tuple[pa.Table, int]:
    """The batch's per-(channel, bucket) rows (``channel``, ``bucket``, ``arrival``
    (the latest), ``max_ts``, ``min_ts``, ``rows``, ``restamped``) over ``rows``'
    placeable ones, and how many of ``rows`` cannot be placed: one aggregation, in
    which those make the one group without a channel."""
    from pyspark.sql import functions as F

    placed = valid_rows(plan)
    table = (
        rows.groupBy(
            F.when(placed, F.col(quote(plan.channel))).alias("channel"),
            F.when(placed, plan.bucket(ARRIVAL)).alias("bucket"),
        )
        .agg(
            F.max(ARRIVAL).alias("arrival"),
            F.max(TS).alias("max_ts"),
            F.min(TS).alias("min_ts"),
            F.count(F.lit(1)).alias("rows"),
            F.sum(F.col(RESTAMPED).cast("long")).alias("restamped"),
        )
        .toArrow()
    )
    has_channel = pc.is_valid(table.column("channel"))
    unplaced = table.filter(pc.invert(has_channel)).column("rows")
    return table.filter(has_channel), pc.sum(unplaced).as_py() or 0


def advance(
    table: pa.Table,
    plan: WatermarkPlan,
    state: EngineState,
    allowance: int,
    emissions: bool = False,
    known: Sequence[Any] = (),
) -> Segment:
    """Runs the batch's per-(channel, bucket) rows ``table`` up to the new frontier;
    ``emissions``: keep every channel's own output rows (from the first batch on: the
    setting is part of the builder's snapshot); ``known``: channels that join the valve
    now even if the batch has no row of theirs."""
    interval = plan.interval
    latest = pc.max(table.column("arrival")).as_py() if table.num_rows else None
    candidates = [a for a in (state.max_arrival, latest) if a is not None]
    max_arrival = max(candidates) if candidates else None
    frontier = state.frontier
    if max_arrival is not None:
        # on the grid, within the buckets it can place: a row arriving at the 64-bit
        # range's bottom comes behind it (and is refused as the batch functions refuse
        # it, naming the arrival column), one within two intervals of its top waits
        first, last = _core.placeable_buckets(interval)
        reached = min(max((max_arrival - allowance) // interval, first), last) * interval
        frontier = reached if frontier is None else max(frontier, reached)
    channels = list(state.channels)
    builder = TimelineBuilder(
        plan.strategy, len(channels), emit_interval=interval, keep_emissions=emissions
    )
    if state.builder is not None:
        builder.restore(state.builder)
    start_watermark = builder.watermark
    seen = set(pc.unique(table.column("channel")).to_pylist()).union(known)
    joining = sorted(seen - set(channels))
    if joining:  # all at once: one pass over the valve's channels, however many join
        channels = sorted([*channels, *joining])
        at = {value: i for i, value in enumerate(channels)}
        builder.insert_channels([at[value] for value in joining])
    kind = table.schema.field("channel").type  # the column's, even without rows
    values = pa.array(channels, type=None if kind == pa.null() else kind)
    done = (
        table.filter(processed_by(table.column("arrival").to_numpy(), frontier))
        if frontier is not None
        else table.slice(0, 0)
    )
    done = done.sort_by([("bucket", "ascending"), ("channel", "ascending")])
    found = builder.push(
        pc.index_in(done.column("channel"), value_set=values),
        done.column("arrival"),
        done.column("max_ts"),
    )
    if frontier is not None:
        builder.advance_to(frontier // interval)
    tl = builder.take_timeline()
    em = builder.take_emissions()
    emitted = pa.table(
        {
            "channel": values.take(em.column("channel")),
            "time": em.column("time"),
            "kind": em.column("kind"),
            "watermark": em.column("watermark"),
        }
    )
    timeline = pa.table(
        {
            "time": tl.column("time"),
            "watermark": tl.column("watermark"),
            "status": tl.column("status"),
            "min_channel": values.take(tl.column("min_channel")),
            "advance": tl.column("advance"),
        }
    )
    buckets = pa.table(
        {
            "channel": done.column("channel"),
            "bucket": done.column("bucket"),
            "channel_watermark": found.channel_watermark,
            "watermark": found.watermark,
        }
    )
    restamped = int(pc.sum(table.column("restamped")).as_py() or 0) if table.num_rows else 0
    if restamped:
        log.warning(
            "floodmark: %d rows arrived at or before the frontier %s (latest arrival seen: "
            "%s); re-stamped to %s and counted in `restamped`, processed once the frontier "
            "passes them. A partition read behind the others does this (give a larger "
            "allowance); every batch re-stamping means an arrival far ahead of the stream "
            "(a bad timestamp) moved the frontier (docs/streaming.md, The frontier)",
            restamped,
            state.frontier,
            max_arrival,
            None if state.frontier is None else state.frontier + 1,
        )
    waiting = int(pc.sum(table.column("rows")).as_py() or 0) - int(
        pc.sum(done.column("rows")).as_py() or 0
    )
    holder = builder.min_channel
    if all(builder.channel_status(c)[0] == I64_MIN for c in range(len(channels))):
        holder = None  # no channel has a watermark yet: none holds it back more than another
    idle = [channels[c] for c in range(len(channels)) if builder.channel_status(c)[1]]
    new = dataclasses.replace(
        state,
        channels=channels,
        frontier=frontier,
        max_arrival=max_arrival,
        restamped=state.restamped + restamped,
        held_back=waiting,
        builder=builder.snapshot(),
    )
    return Segment(
        new,
        state.frontier,
        buckets,
        timeline,
        restamped,
        start_watermark,
        builder.watermark,
        None if holder is None else channels[holder],
        idle,
        emitted,
        waiting,
    )


__all__ = [
    "ARRIVAL",
    "RESTAMPED",
    "TS",
    "EngineState",
    "Segment",
    "advance",
    "bucket_rows",
    "processed_by",
    "with_ticks",
]
