"""``StreamingWindows``: Flink's event-time windows inside a live query, batch after
batch, exactly once.

The keyed path (every window kind and aggregate): the records of a batch up to the
frontier are hashed into a fixed number of **key groups** (Flink's max-parallelism idea),
and each group's keyed Rust window operator is carried from batch to batch as a
snapshot. Per batch, one shuffle brings each group's records together with its
snapshot (one row: restore first), the operator takes the records in the documented
order (arrival, channel, event time, key, the aggregated values) with the segment's
advances between them, and emits the results, late and dropped rows and its new
snapshot. A group with windows open but no record in a batch still gets its snapshot
row, so the watermark fires its windows. The order is total (every column sent is in
the sort), so a batch run again after a crash gives the same rows, the same sums of
floats and the same snapshots.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from floodmark.exceptions import InvalidParameterError
from floodmark.spark.batches import runs
from floodmark.spark.columns import quote
from floodmark.spark.executors import floodmark_on_executors, require_floodmark
from floodmark.spark.late import element_late
from floodmark.spark.packed import (
    collected,
    only,
    pack,
    packed_schema,
    unpack_local,
    unpacked,
)
from floodmark.spark.plan import WatermarkPlan
from floodmark.spark.streaming import frontier as st
from floodmark.spark.streaming.frontier import EngineState
from floodmark.spark.streaming.handler import (
    DEFAULT_ALLOWANCE,
    BatchHandler,
    BatchResult,
    save_engine,
)
from floodmark.spark.streaming.native import carried_windows, check_range, native_batch
from floodmark.spark.streaming.state import StateStore
from floodmark.spark.streaming.watermarks import (
    Advanced,
    advance_batch,
    in_force,
    processed,
    progress,
    stamped_plan,
    write_segment,
)
from floodmark.spark.windows import make_window_plan, results_frame
from floodmark.spark.windows.keyed import (
    Feeder,
    default_partitions,
    new_operator,
    output_schemas,
    packed_outputs,
)
from floodmark.spark.windows.native import not_native
from floodmark.spark.windows.plan import ARRIVAL, TS, WindowPlan
from floodmark.spark.windows.side_outputs import (
    BROADCAST_ROWS,
    dropped_candidates,
    errors_frame,
    matched,
    side_frame,
)
from floodmark.strategy import DEFAULT_EMIT_INTERVAL, WatermarkStrategy
from floodmark.time import I64_MIN, Duration
from floodmark.vocabulary import DROP_REASON, LATE_WATERMARK, flag, parse_aggs, window_keys
from floodmark.windows import check_assigner, lateness_ticks

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: Key groups by default: how finely the keys' operator state is cut.
DEFAULT_KEY_GROUPS = 64
_GROUP, _KIND, _SNAPSHOT = "__fm_st_group", "__fm_st_kind", "__fm_st_snapshot"
_IN_FORCE = "__fm_st_in_force"
OPERATORS_SCHEMA = pa.schema([(_GROUP, pa.int32()), (_SNAPSHOT, pa.binary())])
COUNTS_SCHEMA = pa.schema([("result", pa.int64()), ("late", pa.int64()), ("dropped", pa.int64())])


def operators_type() -> Any:
    """The Spark schema of the key groups' snapshots (``OPERATORS_SCHEMA``)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(OPERATORS_SCHEMA)


def open_group(feeder: Feeder, part: pa.RecordBatch, kinds: np.ndarray, start: Any) -> Any:
    """Restores a key group's operator from its snapshot row (the first of the group's
    rows), or starts a new group's at ``start`` (see :func:`group_runner`); returns the
    operator's output (none: a new operator holds no window)."""
    snapshots = np.flatnonzero(kinds == 0)
    for row in snapshots:
        feeder.op.restore(part.column(_SNAPSHOT)[int(row)].as_py())
    if start is None or len(snapshots):
        return None
    return feeder.op.advance(start[1], start[0])


def group_runner(
    plan: WindowPlan,
    times: np.ndarray,
    wms: np.ndarray,
    start: tuple[int, int] | None,
    schemas: dict[str, pa.Schema],
    names: Sequence[str],
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function each partition of the keyed pass runs: per key group (contiguous,
    its snapshot row first), the operator restored, fed its records with the segment's
    advances, then the rest of the advances; its outputs and new snapshot packed.

    ``start`` is ``(time, watermark)`` of the previous frontier, once a watermark was
    emitted: a group without a snapshot (its first records) starts there, as a restored
    one does, not at ``Long.MIN_VALUE``, so its records before the batch's first
    advance meet the watermark in force, as every other key's do."""
    records = [n for n in names if n not in (_GROUP, _KIND, _SNAPSHOT)]

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        counts = {"result": 0, "late": 0, "dropped": 0}
        group: int | None = None
        feeder: Feeder | None = None

        def emit(out: Any) -> Iterator[pa.RecordBatch]:
            if out is None:
                return
            for kind, part in (
                ("result", out.results),
                ("late", out.late),
                ("dropped", out.dropped),
            ):
                counts[kind] += part.num_rows
            yield from packed_outputs(out, schemas)

        def close() -> Iterator[pa.RecordBatch]:
            if group is None or feeder is None:
                return
            for out in feeder.rest():
                yield from emit(out)
            snap = pa.record_batch(
                [pa.array([group], pa.int32()), pa.array([feeder.op.snapshot()], pa.binary())],
                schema=OPERATORS_SCHEMA,
            )
            yield from pack("operators", snap)

        for raw in batches:
            batch = raw.rename_columns(names)
            groups = batch.column(_GROUP).to_numpy(zero_copy_only=False)
            for lo, hi in runs(batch.column(_GROUP)):
                part = batch.slice(lo, hi - lo)
                g = int(groups[lo])
                kinds = part.column(_KIND).to_numpy(zero_copy_only=False)
                if g != group:
                    yield from close()
                    group, feeder = g, Feeder(new_operator(plan), times, wms)
                    yield from emit(open_group(feeder, part, kinds, start))
                assert feeder is not None
                rows = part.filter(pa.array(kinds == 1)).select(records)
                if rows.num_rows:
                    yield from emit(feeder.feed(rows))
        yield from close()
        yield from pack("stats", pa.RecordBatch.from_pylist([counts], schema=COUNTS_SCHEMA))

    return run


class StreamingWindows(BatchHandler):
    """Flink's keyed event-time windows inside a live query (``foreachBatch``).

    Each micro-batch writes, through ``outputs``, the window firings whose advance
    came at or before its frontier (kind ``results``: the columns of
    :func:`floodmark.spark.window_aggregate`'s results), the late records (``late``) and
    the records no window took (``dropped``), every input column kept; for every firing
    at or before the final frontier, exactly the rows the batch function gives for the
    same records at rest.

    Args:
        strategy: a periodic watermark strategy.
        window: ``TumblingEventTimeWindows.of(...)``, ``SlidingEventTimeWindows.of(...)``
            or ``EventTimeSessionWindows.with_gap(...)``.
        key: the key column(s).
        channel: the input-channel column (Kafka ``partition``).
        arrival: the arrival column (the Kafka record ``timestamp``).
        state_location: a folder for floodmark's state, one per query, next to its
            checkpoint (any Hadoop file system path).
        outputs: :class:`~floodmark.spark.streaming.ParquetOutputs` or a callable
            ``(kind, df, batch_id)``.
        aggs: ``"count"`` and ``(function, column)`` pairs, as in ``window_aggregate``.
        allowed_lateness: Flink's ``allowedLateness``.
        event_time: the event-time column (default: the strategy's timestamp column).
        emit_interval: periodic emission interval (200 ms).
        event_time_unit, arrival_unit: units of integer time columns (``ms``), or the
            ticks timestamp ones are read in (``us``; docs/spark.md, "Columns and units").
        allowance: how far behind the latest arrival the frontier stays (1 s).
        channels: the channel values known up front (a topic's partitions, e.g.
            ``range(1000)``): they join the valve at the first batch, as Flink's source
            assigns a topic's splits when it starts. A channel not named joins when a
            batch first has a row of it (docs/streaming.md, "New partitions").
        key_groups: how many groups the keys' operator state is cut into (64); part of
            the state's layout, so it cannot change between restarts.
        num_partitions: partitions of the keyed shuffle (Spark's default parallelism).
        path: ``auto`` (the keyed path: in a live query it measured faster than the
            native one for every window it runs, docs/performance.md; the native one
            where it applies if the executors lack floodmark; on a state with committed
            batches, the path they were written with), ``keyed`` or
            ``native`` (tumbling windows and sliding windows without gaps, order-free
            aggregates of integers: :mod:`floodmark.spark.streaming.native`); part of
            the state's layout, so it cannot change between restarts.
        timeline: also write each batch's segment of the combined timeline (kind
            ``timeline``: ``time``, ``watermark``, ``status``, ``min_channel``).
        emissions: also write every channel's own watermark output of each batch (kind
            ``emissions``: ``channel``, ``time``, ``kind``, ``watermark``); part of the
            state's layout.
        cache_batch: cache each micro-batch while its passes read it (None: unless it
            comes from files, which each pass reads again for less; see
            docs/streaming.md, "Reading the batch").
        on_progress: called with the progress summary of each batch this handler
            commits (a batch committed before a crash, which Spark runs again, only
            publishes its outputs: it is not reported again).
    """

    def __init__(
        self,
        strategy: WatermarkStrategy,
        window: Any,
        *,
        key: str | Sequence[str],
        channel: str,
        arrival: str,
        state_location: str,
        outputs: Any,
        aggs: Sequence[str | tuple[str, str]] = ("count",),
        allowed_lateness: Duration = timedelta(0),
        event_time: str | None = None,
        emit_interval: Duration = DEFAULT_EMIT_INTERVAL,
        event_time_unit: str | None = None,
        arrival_unit: str | None = None,
        allowance: Duration = DEFAULT_ALLOWANCE,
        key_groups: int = DEFAULT_KEY_GROUPS,
        num_partitions: int | None = None,
        path: str = "auto",
        timeline: bool = False,
        emissions: bool = False,
        channels: Iterable[Any] | None = None,
        cache_batch: bool | None = None,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        super().__init__(
            strategy,
            channel=channel,
            arrival=arrival,
            event_time=event_time,
            state_location=state_location,
            outputs=outputs,
            emit_interval=emit_interval,
            event_time_unit=event_time_unit,
            arrival_unit=arrival_unit,
            allowance=allowance,
            on_progress=on_progress,
            channels=channels,
            emissions=emissions,
            cache_batch=cache_batch,
        )
        from floodmark.spark.windows import positive_int

        self.timeline = flag(timeline, "timeline")

        # parsed once (a one-shot iterable would be empty at the next batch's plan)
        self.window, self.key, self.aggs = (
            check_assigner(window),
            window_keys(key),
            parse_aggs(aggs),
        )
        lateness_ticks(allowed_lateness, "s")  # refused now if negative in every unit
        self.allowed_lateness = allowed_lateness
        self.key_groups = positive_int(key_groups, "key_groups")
        self.num_partitions = (
            None if num_partitions is None else positive_int(num_partitions, "num_partitions")
        )
        if path not in ("auto", "native", "keyed"):
            raise InvalidParameterError(
                "path", f"expected 'auto', 'native' or 'keyed', got {path!r}"
            )
        self.path = path
        self._executors: bool | None = None  # floodmark on the executors, for auto
        self._resumed: str | None = None  # the path auto took in the committed state

    def chosen_path(self, wplan: WindowPlan) -> str:
        """``native`` when asked for (refused where it does not apply), ``keyed`` when
        asked for. ``auto``, unlike the batch functions', takes the keyed path, the
        faster of the two in a live query (a batch's few hundred thousand windows
        aggregated by Spark, with the open ones carried as a table, cost more than the
        keyed operators' shuffle and snapshots), unless the executors lack floodmark
        (:meth:`check` asks), which the keyed path needs and the native one does not:
        then the native path where it applies. A choice made for speed does not make a
        query fail that a path running only Spark SQL completes. On a state with
        committed batches ``auto`` keeps the path they were written with
        (:meth:`resume`): a state written by an earlier floodmark, whose ``auto``
        preferred the native path, or before floodmark reached the executors, goes on
        as it was."""
        why_not = not_native(wplan)
        native = why_not is None
        if self.path == "native" and why_not is not None:
            raise InvalidParameterError(
                "path", f"not the native path: {why_not}; use path='auto' or 'keyed'"
            )
        if self.path == "auto":
            if self._resumed == "keyed" or (self._resumed == "native" and native):
                return self._resumed
            return "keyed" if self._executors or not native else "native"
        return self.path

    def resume(self, store: StateStore) -> None:
        if self.path == "auto":
            self._resumed = store.committed_setting("path")

    def window_plan(self, events: DataFrame, plan: WatermarkPlan) -> WindowPlan:
        return make_window_plan(
            events, plan, self.window, self.key, self.aggs, self.allowed_lateness
        )

    def settings(self, plan: WatermarkPlan) -> dict[str, Any]:
        """As the window plan resolves them (:meth:`check` made it), so that equal
        configurations spelled differently (``aggs="count"`` and ``["count"]``, a
        lateness as a ``timedelta`` or in ticks) are equal."""
        wplan: WindowPlan | None = getattr(self, "_plan", None)
        if wplan is None:
            raise RuntimeError("settings() needs the window plan that check() makes")
        kind, size, slide, offset, gap = self.window.params(plan.event_time.unit)
        return {
            "window": [kind, size, slide, offset, gap],
            "key": list(wplan.keys),
            "aggs": [a if isinstance(a, str) else list(a) for a in wplan.aggs],
            "allowed_lateness": wplan.lateness,
            "key_groups": self.key_groups,
            "path": self.chosen_path(wplan),
            "timeline": self.timeline,
        }

    def check(self, events: DataFrame) -> WatermarkPlan:
        plan = self.watermark_plan(events)
        self._plan = self.window_plan(events, plan)
        if self.path == "auto" and self._executors is None:  # asked once per handler
            self._executors = floodmark_on_executors(events.sparkSession)
        self.chosen_path(self._plan)
        return plan

    def run(
        self,
        batch: DataFrame,
        batch_id: int,
        plan: WatermarkPlan,
        state: EngineState,
        store: StateStore,
    ) -> BatchResult:
        result = BatchResult({})
        wplan = self.window_plan(batch, plan)
        native = self.chosen_path(wplan) == "native"
        inspect = (lambda table: check_range(table, wplan)) if native else None
        advanced = advance_batch(self, batch, batch_id, plan, state, store, inspect)
        segment = advanced.segment
        step = self.native if native else self.keyed
        counts = step(batch, batch_id, wplan, advanced, store, result)
        write_segment(self, batch, plan, segment, batch_id, result, timeline=self.timeline)
        self.kill("after_outputs", batch_id)
        new = dataclasses.replace(
            segment.state,
            late=state.late + counts["late"],
            dropped=state.dropped + counts["dropped"],
        )
        with self.clock("state"):
            save_engine(store, batch_id, new, batch)
        result.summary = {
            **progress(segment, plan),
            "path": "native" if native else "keyed",
            "results": counts["result"],
            "late": counts["late"],
            "dropped": counts["dropped"],
            "late_total": new.late,
            "dropped_total": new.dropped,
        }
        return result

    def native(
        self,
        batch: DataFrame,
        batch_id: int,
        wplan: WindowPlan,
        advanced: Advanced,
        store: StateStore,
        result: BatchResult,
    ) -> dict[str, int]:
        """The native pass of one batch: outputs written, open windows saved; returns
        the counts of results, late and dropped rows."""
        spark = batch.sparkSession
        rows, segment = advanced.rows, advanced.segment
        previous = store.last_before(batch_id)
        out = native_batch(rows, wplan, segment, carried_windows(store, previous, spark))
        groups = out.groups.persist()
        results = results_frame(out.results, wplan)
        if wplan.lateness:  # with the refirings: counted, then written from the cache
            results = results.persist()

        def open_windows() -> None:
            with self.clock("state"):
                out.open.write.mode("overwrite").parquet(store.version(batch_id, "open"))

        try:
            fired, late = out.counts()
            self.background.start(open_windows)  # from the cache, beside the outputs
            counts = {
                "result": results.count() if wplan.lateness else fired,
                "late": late,
                "dropped": advanced.unplaced,
            }
            for kind, frame in (
                ("results", lambda: results),
                ("late", lambda: side_frame(out.late, wplan, batch, "late")),
                ("dropped", lambda: errors_frame(batch, wplan)),
            ):  # an empty output reads nothing (and is built once: write())
                empty = not counts["result" if kind == "results" else kind]
                self.write(kind, frame, batch_id, result, empty=empty)
            self.background.wait()
        finally:
            self.background.wait(raise_errors=False)  # the open windows are read from the cache
            results.unpersist()
            groups.unpersist()
        return counts

    def keyed(
        self,
        batch: DataFrame,
        batch_id: int,
        wplan: WindowPlan,
        advanced: Advanced,
        store: StateStore,
        result: BatchResult,
    ) -> dict[str, int]:
        """The keyed pass of one batch: outputs written, operators' snapshots saved;
        returns the counts of results, late and dropped rows."""
        from pyspark.sql import functions as F
        from pyspark.sql.pandas.types import to_arrow_schema

        spark = batch.sparkSession
        rows, segment, unplaced = advanced.rows, advanced.segment, advanced.unplaced
        done = processed(rows, segment)
        keys, channel = wplan.keys, wplan.wm.channel
        sent = done.select(
            *[F.col(quote(k)) for k in keys],
            F.col(st.TS).alias(TS),
            F.col(st.ARRIVAL).alias(ARRIVAL),
            *([F.col(quote(channel))] if wplan.send_channel else []),
            *[F.col(quote(v)).cast(t).alias(v) for v, t in wplan.values.items() if v not in keys],
        )
        schemas = output_schemas(wplan, sent.schema)
        arrow_schemas = {kind: to_arrow_schema(schema) for kind, schema in schemas.items()}
        group = F.pmod(F.hash(*[F.col(quote(k)) for k in keys]), F.lit(self.key_groups))
        records = sent.select(
            "*",
            group.cast("int").alias(_GROUP),
            F.lit(1).cast("int").alias(_KIND),
            F.lit(None).cast("binary").alias(_SNAPSHOT),
        )
        previous = store.last_before(batch_id)
        if previous is not None:
            saved = store.committed_file(previous, "operators")
            states = (
                spark.read.schema(operators_type())
                .parquet(saved)
                .select(F.col(_GROUP), F.lit(0).cast("int").alias(_KIND), F.col(_SNAPSHOT))
            )
            records = records.unionByName(states, allowMissingColumns=True)
        parts = self.num_partitions or default_partitions(spark)
        order = [_GROUP, _KIND, *map(quote, wplan.processing_order())]
        ordered = records.repartition(parts, _GROUP).sortWithinPartitions(*order)
        names = ordered.columns
        times, wms = segment.advances()
        start = None
        if segment.previous is not None and segment.start_watermark > I64_MIN:
            start = (segment.previous, segment.start_watermark)
        runner = group_runner(wplan, times, wms, start, arrow_schemas, names)
        positional = ordered.toDF(*[f"__fm_c{i}" for i in range(len(names))])
        require_floodmark(spark)
        out = positional.mapInArrow(runner, packed_schema()).persist()

        def operators() -> None:
            with self.clock("state"):
                snapshots = unpacked(out, "operators", operators_type())
                snapshots.write.mode("overwrite").parquet(store.version(batch_id, "operators"))

        try:
            totals = {"result": 0, "late": 0, "dropped": 0}
            for _, counts in unpack_local(out.where(only("stats")).toArrow()):
                for name, value in counts.to_pylist()[0].items():
                    totals[name] += int(value)
            self.background.start(operators)  # from the cache, beside the outputs

            outputs = KeyedOutputs(batch, wplan, rows, segment, out, schemas, totals)
            self.write("results", outputs.results, batch_id, result, empty=not totals["result"])
            self.write("late", outputs.late, batch_id, result, empty=not totals["late"])
            empty = not (totals["dropped"] or unplaced)
            self.write("dropped", outputs.dropped, batch_id, result, empty=empty)
            self.background.wait()
            totals["dropped"] += unplaced
        finally:
            self.background.wait(raise_errors=False)  # the snapshots are read from the cache
            out.unpersist()
        return totals


@dataclasses.dataclass
class KeyedOutputs:
    """The keyed path's three outputs of one batch, each built only when asked
    (:meth:`BatchHandler.write` builds none of an empty one it has seen before), from
    ``out`` (the operators' packed output, cached) and ``totals`` (its counts). The
    side outputs join the operators' rows back to the input, narrowed to the rows that
    can be emitted."""

    batch: DataFrame
    wplan: WindowPlan
    rows: DataFrame
    segment: st.Segment
    out: DataFrame
    schemas: dict[str, Any]
    totals: dict[str, int]

    def results(self) -> DataFrame:
        return results_frame(unpacked(self.out, "result", self.schemas["result"]), self.wplan)

    def late(self) -> DataFrame:
        from pyspark.sql import functions as F

        wplan = self.wplan
        candidates = F.coalesce(
            element_late(F.col(TS), wplan.lateness, F.col(_IN_FORCE)), F.lit(True)
        )
        found = matched(
            in_force(self.rows, wplan.wm, self.segment, _IN_FORCE),
            self.stamped(),
            self.emitted("late"),
            LATE_WATERMARK,
            candidates,
            self.totals["late"],
        )
        return side_frame(found, wplan, self.batch, "late")

    def dropped(self) -> DataFrame:
        unplaced = errors_frame(self.batch, self.wplan)
        if not self.totals["dropped"]:
            return unplaced
        found = matched(
            processed(self.rows, self.segment),
            self.stamped(),
            self.emitted("dropped"),
            DROP_REASON,
            dropped_candidates(self.wplan),
            self.totals["dropped"],
        )
        return side_frame(found, self.wplan, self.batch, "dropped").unionByName(unplaced)

    def stamped(self) -> WindowPlan:
        """The plan over the rows as the operators saw them (arrival re-stamped)."""
        return dataclasses.replace(self.wplan, wm=stamped_plan(self.wplan.wm))

    def emitted(self, kind: str) -> DataFrame | pa.Table:
        """The operators' late or dropped rows: collected when few (broadcast from the
        driver without a job), else read from the cache by the join."""
        from pyspark.sql.pandas.types import to_arrow_schema

        count, schema = self.totals[kind], self.schemas[kind]
        if count == 0:  # nothing to read: the output reads nothing either
            return to_arrow_schema(schema).empty_table()
        if count <= BROADCAST_ROWS:
            return collected(self.out, kind, to_arrow_schema(schema))
        return unpacked(self.out, kind, schema)


__all__ = ["DEFAULT_KEY_GROUPS", "StreamingWindows"]
