"""The ``foreachBatch`` protocol every streaming handler follows (see :mod:`.state`).

Per micro-batch ``b``:

1. Check the columns (the plan, as the batch functions check them: before any job) and
   the state location's identity (this query, this configuration).
2. If floodmark's marker for ``b`` exists, Spark is running a committed batch again
   (it crashed after the marker, before its own commit): publish the staged outputs if
   that was not done, and return. Any other batch than the newest committed one or the
   one after it is refused (:meth:`StateStore.check_continues`: the checkpoint and the
   state have parted).
3. Restore the state of the newest committed batch before ``b``; the input is the
   batch's rows plus the rows held back behind the previous frontier (read from the
   state). Every pass reads the batch, so it is cached for the batch's duration, unless
   it comes from files (Spark's file source), which each pass reads again for less than
   the cache costs to fill (:func:`reads_only_files`); a source such as Kafka is read
   once.
4. The handler's work (:meth:`BatchHandler.run`): the watermark stages up to the new
   frontier, its outputs written through the sink, its new state written to
   ``versions/b``. floodmark's own state writes (the rows held back, the operators'
   snapshots or open windows) run in threads beside the outputs (:class:`Background`):
   nothing reads them before the marker, and every one has finished before it.
5. The marker, last; then the staged outputs are published and old versions pruned.

A crash anywhere before the marker re-runs ``b`` from ``b-1``'s state, computing the
same outputs, which replace the partial ones; after it, the re-run only publishes.
``FLOODMARK_KILL_AT`` (``point:batch``, e.g. ``after_outputs:3``) kills the process at a
named point: the crash-safety tests use it (no effect when unset).
"""

from __future__ import annotations

import itertools
import json
import operator
import os
import signal
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from floodmark._core import MAX_CHANNELS
from floodmark.exceptions import InvalidParameterError
from floodmark.spark.call_sites import without_call_sites
from floodmark.spark.columns import key_column
from floodmark.spark.plan import WatermarkPlan, make_plan, require_periodic
from floodmark.spark.streaming.frontier import (
    ARRIVAL,
    RESTAMPED,
    EngineState,
    Segment,
    processed_by,
)
from floodmark.spark.streaming.outputs import ParquetOutputs, check_sink, check_staged_here
from floodmark.spark.streaming.state import NEW_QUERY, StateError, StateStore
from floodmark.strategy import WatermarkStrategy, check_strategy
from floodmark.time import Duration, to_ticks
from floodmark.vocabulary import column_name, flag

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

#: The points ``FLOODMARK_KILL_AT`` can name, in the order a batch passes them.
KILL_POINTS = (
    "start",
    "after_timeline",
    "after_outputs",
    "after_state",
    "after_marker",
    "before_spark_commit",
)


class Clock:
    """Seconds spent per kind of work in one batch (``state``: floodmark's state read
    and written; ``driver``: the timeline builder and the plan on the driver)."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self._lock = threading.Lock()  # the background writes time themselves too

    @contextmanager
    def __call__(self, kind: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            with self._lock:
                self.spent[kind] = self.spent.get(kind, 0.0) + time.perf_counter() - started

    def ms(self, kind: str) -> int:
        return round(1000 * self.spent.get(kind, 0.0))


class Background:
    """floodmark's own state writes of one batch, each a Spark job started in a thread
    of its own (PySpark's ``InheritableThread``: the batch's job group and properties
    go with it, so stopping the query cancels them too) while the outputs are written:
    their planning and small jobs fill the gaps between the outputs' jobs. Measured on
    the live bench (1M-row batches): see docs/performance.md. :meth:`wait` joins them,
    before what they read is released and before the marker."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    def start(self, write: Callable[[], None]) -> None:
        from pyspark import InheritableThread

        def run() -> None:
            try:
                write()
            except BaseException as err:  # raised by wait(), in the batch's thread
                self.errors.append(err)

        thread = InheritableThread(target=run, daemon=True)
        thread.start()
        self.threads.append(thread)

    def wait(self, raise_errors: bool = True) -> None:
        """Joins every write started; raises the first one's error (``raise_errors``:
        False while another error is already on its way)."""
        for thread in self.threads:
            thread.join()
        self.threads.clear()
        errors, self.errors = self.errors, []
        if errors and raise_errors:
            raise errors[0]


@dataclass
class BatchResult:
    """What one batch's work leaves: its progress summary and the sink kinds it wrote."""

    summary: dict[str, Any]
    kinds: list[str] = field(default_factory=list)


class BatchHandler(ABC):
    """The common part of the streaming handlers: the commit protocol, the state, the
    progress. Subclasses implement :meth:`run` and :meth:`settings`."""

    def __init__(
        self,
        strategy: WatermarkStrategy,
        *,
        channel: str,
        arrival: str,
        event_time: str | None,
        state_location: str,
        outputs: Any,
        emit_interval: Duration,
        event_time_unit: str | None,
        arrival_unit: str | None,
        allowance: Duration,
        on_progress: Callable[[dict[str, Any]], None] | None,
        emissions: bool = False,
        channels: Iterable[Any] | None = None,
        cache_batch: bool | None = None,
    ) -> None:
        check_strategy(strategy)
        for parameter, value, what in (
            ("channel", channel, "a channel column: the Kafka partition"),
            ("arrival", arrival, "an arrival column: the Kafka record timestamp"),
        ):
            column_name(value, parameter, needs=f" (a live query needs {what})")
        if not isinstance(state_location, str) or not state_location:
            raise InvalidParameterError(
                "state_location",
                f"expected a folder path (next to the query's checkpoint), got {state_location!r}",
            )
        if on_progress is not None and not callable(on_progress):
            raise InvalidParameterError("on_progress", f"expected a callable, got {on_progress!r}")
        self.strategy = strategy
        self.channel, self.arrival, self.event_time = channel, arrival, event_time
        self.state_location = state_location
        self.outputs = check_sink(outputs)
        self.emit_interval = emit_interval
        self.event_time_unit, self.arrival_unit = event_time_unit, arrival_unit
        self.allowance = allowance
        self.on_progress = on_progress
        self.emissions = flag(emissions, "emissions")
        self.channels = known_channels(channels)
        self.cache_batch = None if cache_batch is None else flag(cache_batch, "cache_batch")
        self.progress: list[dict[str, Any]] = []
        self._claimed: str | None = None  # the query whose ParquetOutputs were checked
        self.clock = Clock()
        self.background = Background()
        self._kill_at = os.environ.get("FLOODMARK_KILL_AT", "")
        # The schema of each output kind, by the input's schema and the configuration
        # (JSON): the outputs' schemas follow from those two.
        self._output_schemas: dict[tuple[str, str], StructType] = {}
        self._spark: SparkSession | None = None
        self._shape = ""

    # --- what subclasses provide -----------------------------------------------------

    @abstractmethod
    def settings(self, plan: WatermarkPlan) -> dict[str, Any]:
        """The configuration that the state depends on (compared between restarts)."""

    @abstractmethod
    def check(self, events: DataFrame) -> WatermarkPlan:
        """Checks ``events`` (the streaming DataFrame, or one batch) against the
        handler's columns and parameters, before any job; returns the plan."""

    @abstractmethod
    def run(
        self,
        batch: DataFrame,
        batch_id: int,
        plan: WatermarkPlan,
        state: EngineState,
        store: StateStore,
    ) -> BatchResult:
        """The batch's work (see the module docstring, step 4)."""

    def resume(self, store: StateStore) -> None:
        """Adopts what a choice left to floodmark resolved to in the committed state
        (before the fingerprint is compared); nothing by default."""
        return None

    # --- the protocol ----------------------------------------------------------------

    def watermark_plan(self, events: DataFrame) -> WatermarkPlan:
        """The watermark stages' plan over ``events``' columns (no job)."""
        require_periodic(self.strategy, "a live query")
        _, plan = make_plan(
            events,
            self.strategy,
            event_time=self.event_time,
            channel=self.channel,
            arrival=self.arrival,
            emit_interval=self.emit_interval,
            event_time_unit=self.event_time_unit,
            arrival_unit=self.arrival_unit,
            live=True,
        )
        self.allowance_ticks(plan)  # refused here, before the query starts
        check_channel_type(self.channels, events, plan.channel)
        if isinstance(self.outputs, ParquetOutputs):
            self.outputs.check(events)
        return plan

    def fingerprint(self, plan: WatermarkPlan) -> dict[str, Any]:
        return {
            "handler": type(self).__name__,
            "strategy": repr(plan.strategy),
            "event_time": [plan.event_time.name, plan.event_time.kind, plan.event_time.unit],
            "arrival": [plan.arrival.name, plan.arrival.kind, plan.arrival.unit],
            "channel": plan.channel,
            "emit_interval": plan.interval,
            "allowance": self.allowance_ticks(plan),
            "emissions": self.emissions,
            **self.settings(plan),
        }

    def allowance_ticks(self, plan: WatermarkPlan) -> int:
        ticks = to_ticks(self.allowance, plan.arrival.unit, "allowance")
        if ticks < 0:
            raise InvalidParameterError("allowance", f"must be >= 0, got {self.allowance!r}")
        return ticks

    @without_call_sites
    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        """The ``foreachBatch`` function: processes micro-batch ``batch_id``."""
        started = time.perf_counter()
        self.clock = Clock()
        plan = self.check(batch)
        spark = batch.sparkSession
        store = StateStore(spark, self.state_location)
        query_id = spark.sparkContext.getLocalProperty("sql.streaming.queryId")
        self.resume(store)
        fingerprint = self.fingerprint(plan)
        identity = store.check_identity(query_id, fingerprint)
        store.check_continues(batch_id)
        if identity is not None:  # kept once the batch is known to continue the state
            store.record_identity(identity)
        if isinstance(self.outputs, ParquetOutputs) and self._claimed != query_id:
            self.outputs.claim(spark, query_id)
            done = store.committed()
            if done:  # (before the first commit, nothing says which kinds are its own)
                kinds = store.summary(done[-1]).get("kinds", [])
                self.outputs.drop_uncommitted(spark, done[-1], kinds)
            self._claimed = query_id
        if store.is_committed(batch_id):  # a committed batch run again by Spark
            committed = store.summary(batch_id)
            check_staged_here(spark, self.outputs, batch_id, committed)
            self.publish(store, batch_id, committed.get("kinds", []))
            self.kill("before_spark_commit", batch_id)
            return
        self.kill("start", batch_id)
        with self.clock("state"):
            previous = store.last_before(batch_id)
            state = load_engine(store, previous)
            check_channel_type(state.channels, batch, plan.channel, store.location)
            check_column_types(state.columns, batch, store.location)
            store.delete(store.version(batch_id))  # what a failed attempt left
        # what write() needs to stage an empty output without building it
        self._spark = spark
        self._shape = json.dumps([batch.schema.jsonValue(), fingerprint], sort_keys=True)
        cache = self.cache_batch if self.cache_batch is not None else not reads_only_files(batch)
        if cache:
            batch.persist()
        try:
            result = self.run(batch, batch_id, plan, state, store)
            self.background.wait()
        finally:
            self.background.wait(raise_errors=False)  # they read the batch
            if cache:
                batch.unpersist()
        summary = {
            "batch_id": batch_id,
            "query_id": query_id,
            "seconds": round(time.perf_counter() - started, 3),
            "state_ms": self.clock.ms("state"),
            "driver_ms": self.clock.ms("driver"),
            "state_bytes": store.size(store.version(batch_id)),
            "batch_cached": cache,
            "kinds": result.kinds,
            "outputs_path": self.outputs.path if isinstance(self.outputs, ParquetOutputs) else None,
            **result.summary,
        }
        self.kill("after_state", batch_id)
        store.commit(batch_id, summary)
        self.kill("after_marker", batch_id)
        self.publish(store, batch_id, result.kinds)
        self.progress.append(summary)
        del self.progress[:-KEEP_PROGRESS]  # as Spark keeps its recent progress
        if self.on_progress is not None:
            self.on_progress(summary)
        self.kill("before_spark_commit", batch_id)

    def write(
        self,
        kind: str,
        frame: DataFrame | Callable[[], DataFrame],
        batch_id: int,
        result: BatchResult,
        *,
        empty: bool = False,
    ) -> None:
        """One output of the batch, through the sink: ``frame``, or what it builds
        (a function: built only when needed). ``empty``: the batch is known to have no
        rows of it; the sink gets them without reading the batch, and
        :class:`ParquetOutputs` stages them without a Spark job and, once it has seen
        that output's schema for this input schema, without building the frame at
        all (:meth:`ParquetOutputs.stage_empty`): most batches of a live query have no
        late or dropped rows, and building the keyed path's late rows plans a join."""
        from pyspark.sql import functions as F

        def built() -> DataFrame:
            return frame() if callable(frame) else frame

        if not empty:
            self.outputs(kind, built(), batch_id)
        elif isinstance(self.outputs, ParquetOutputs):
            shape = (kind, self._shape)
            schema = self._output_schemas.get(shape)
            if schema is None or not self.outputs.stage_empty(self._spark, kind, schema, batch_id):
                df = built()
                self._output_schemas[shape] = df.schema
                self.outputs.write_empty(kind, df, batch_id)
        else:
            self.outputs(kind, built().where(F.lit(False)), batch_id)
        result.kinds.append(kind)

    def publish(self, store: StateStore, batch_id: int, kinds: list[str]) -> None:
        if isinstance(self.outputs, ParquetOutputs):
            self.outputs.publish(store, batch_id, kinds)

    def kill(self, point: str, batch_id: int) -> None:
        """The crash-safety tests' hook: SIGKILL at ``point`` of batch ``batch_id``."""
        if self._kill_at and self._kill_at == f"{point}:{batch_id}":
            os.kill(os.getpid(), signal.SIGKILL)

    def summary_for(self, batch_id: int) -> dict[str, Any] | None:
        """The progress summary of batch ``batch_id`` this handler committed (None if it
        did not: e.g. a batch before a restart)."""
        return next((p for p in reversed(self.progress) if p["batch_id"] == batch_id), None)

    @property
    def last_progress(self) -> dict[str, Any] | None:
        """The newest batch's progress summary (None before the first)."""
        return self.progress[-1] if self.progress else None


def reads_only_files(batch: DataFrame) -> bool:
    """Whether every row of micro-batch ``batch`` comes from files: the leaves of the
    RDD Spark runs for it are all ``FileScanRDD`` (the file source; a Kafka or Python
    data source, or the memory source, has other leaves). Such a batch's files are
    fixed in its plan, so each pass can read them again. Measured on the live bench
    (Parquet files, 1M-row batches): a keyed batch 2.0 -> 1.8 s without the cache.
    False when the lineage cannot be read."""
    try:
        stack = [batch._jdf.queryExecution().toRdd()]
        leaves = 0
        while stack:
            rdd = stack.pop()
            deps = rdd.dependencies()
            if deps.isEmpty():
                if rdd.getClass().getSimpleName() != "FileScanRDD":
                    return False
                leaves += 1
            found = deps.iterator()
            while found.hasNext():
                stack.append(found.next().rdd())
        return leaves > 0
    except Exception:  # another Spark's internals: cache, as for any source
        return False


def load_engine(store: StateStore, batch_id: int | None) -> EngineState:
    """The watermark stages' state after committed batch ``batch_id`` (fresh for None)."""
    if batch_id is None:
        return EngineState()
    engine, builder = (store.committed_file(batch_id, n) for n in ("engine.json", "builder.bin"))
    return EngineState.from_json(store.read(engine), store.read(builder))


def save_engine(store: StateStore, batch_id: int, state: EngineState, batch: DataFrame) -> None:
    """Writes ``state`` as batch ``batch_id``'s, with the column types of ``batch``."""
    state = replace(state, columns=column_types(batch))
    if state.builder is not None:  # no rename: nothing reads a version before its marker
        store.create(store.version(batch_id, "builder.bin"), state.builder)
    store.create(store.version(batch_id, "engine.json"), state.to_json())


def column_types(batch: DataFrame) -> dict[str, str]:
    """The types of ``batch``'s top-level columns, as Spark spells them."""
    return {f.name: f.dataType.simpleString() for f in batch.schema.fields}


def check_column_types(recorded: dict[str, str] | None, batch: DataFrame, state: str) -> None:
    """Raises a :class:`StateError` naming the first column of ``batch`` whose type
    differs from the one ``recorded`` with the state in location ``state`` (its rows held
    back and its operators' snapshots are in those types). A column added or removed
    since is not refused (held-back rows read it as null, or leave it out), nor a
    struct, array or map column that stays one (the Parquet reader evolves nested
    fields; a struct that became a string, say, it cannot read), nor a state that
    recorded no types (None: written before floodmark recorded them)."""
    if recorded is None:
        return
    for name, now in column_types(batch).items():
        then = recorded.get(name)
        if then is None or then == now or nested_kind(then) == nested_kind(now) is not None:
            continue
        raise StateError(
            f"the column {name!r} is {now}, but it was {then} when the state in {state} "
            "was written: the rows held back and the windows kept are in the old type; "
            f"restore the column's type, or {NEW_QUERY}. Nothing was written"
        )


def nested_kind(spark_type: str) -> str | None:
    """``struct``, ``array`` or ``map`` for a nested type (its simple string), else None."""
    kind = spark_type.split("<", 1)[0]
    return kind if kind != spark_type and kind in ("struct", "array", "map") else None


def pending_rows(
    store: StateStore, batch_id: int | None, state: EngineState, rows: DataFrame
) -> DataFrame | None:
    """The rows committed batch ``batch_id`` held back (its ``state`` counts them), or
    None; read in the schema of ``rows`` (the batch's, with the hidden columns), which
    they were written in: no job to infer it. A version that counts rows held back but
    lacks them is refused as damaged."""
    if batch_id is None or state.held_back == 0:
        return None
    counted = state.held_back is not None  # None: written before floodmark counted them
    if not counted and not store.exists(store.version(batch_id, "pending")):
        return None
    path = store.committed_file(batch_id, "pending")
    return rows.sparkSession.read.schema(rows.schema).parquet(path)


def save_pending(store: StateStore, batch_id: int, rows: DataFrame, segment: Segment) -> None:
    """Writes the rows past the new frontier (``segment.pending`` of them: none, nothing
    written), no longer flagged as re-stamped: the batch that re-stamped a row counted
    it, once."""
    from pyspark.sql import functions as F

    if segment.pending:
        frontier = segment.state.frontier
        later = (
            rows if frontier is None else rows.where(~processed_by(F.col(ARRIVAL), F.lit(frontier)))
        )
        later = later.withColumn(RESTAMPED, F.lit(False))
        later.write.mode("overwrite").parquet(store.version(batch_id, "pending"))


DEFAULT_ALLOWANCE = timedelta(seconds=1)

#: How many batches' summaries a handler keeps in :attr:`BatchHandler.progress` (as
#: Spark's ``spark.sql.streaming.numRecentProgressUpdates``); every one is in its marker.
KEEP_PROGRESS = 100


def known_channels(channels: Iterable[Any] | None) -> list[Any]:
    """The ``channels`` parameter: the channel values that join the valve at the first
    batch (a topic's partitions), sorted, without repeats; integers (numpy's too) or
    strings."""
    if channels is None:
        return []
    if isinstance(channels, str | bytes) or not isinstance(channels, Iterable):
        raise InvalidParameterError(
            "channels",
            f"expected the channel values (a topic's partitions, e.g. range(16)), got {channels!r}",
        )
    values = [
        str(v)
        if isinstance(v, str)
        else operator.index(v)
        if hasattr(v, "__index__") and not isinstance(v, bool)
        else v
        for v in itertools.islice(channels, MAX_CHANNELS + 1)
    ]
    if len(values) > MAX_CHANNELS:  # the valve's limit, before anything is allocated
        raise InvalidParameterError("channels", f"must name at most {MAX_CHANNELS:,} channels")
    kinds = {type(v) for v in values}
    if not kinds <= {int} and not kinds <= {str}:
        found = ", ".join(sorted(k.__name__ for k in kinds))
        raise InvalidParameterError(
            "channels", f"expected integers or strings, all of one kind, got {found}"
        )
    return sorted(set(values))


def check_channel_type(
    channels: list[Any], events: DataFrame, column: str, state: str | None = None
) -> None:
    """Raises if ``channels`` (the ``channels`` parameter's, or with ``state``, those of
    the state in that location) cannot be values of the channel ``column`` of
    ``events`` (an integer or string column: :func:`~floodmark.spark.columns.key_column`)."""
    from pyspark.sql.types import ByteType, IntegerType, ShortType, StringType

    if not channels:
        return
    dtype = key_column(events, column, "channel")
    kind = str if isinstance(dtype, StringType) else int
    if state is not None:
        if not isinstance(channels[0], kind):
            raise StateError(
                f"the channel column {column!r} is {dtype.simpleString()}, but the state in "
                f"{state} holds channels like {channels[0]!r}: the column's type changed "
                f"since the state was written; restore it, or {NEW_QUERY}. Nothing was "
                "written"
            )
        return
    if not isinstance(channels[0], kind):
        raise InvalidParameterError(
            "channels",
            f"the channel column {column!r} is {dtype.simpleString()}: "
            f"its values cannot be {type(channels[0]).__name__}s like {channels[0]!r}",
        )
    widths: dict[type, int] = {ByteType: 8, ShortType: 16, IntegerType: 32}
    half = 2 ** (widths.get(type(dtype), 64) - 1)
    outside = [v for v in (channels[0], channels[-1]) if kind is int and not -half <= v < half]
    if outside:
        raise InvalidParameterError(
            "channels",
            f"the channel column {column!r} is {dtype.simpleString()}: "
            f"{outside[0]} is out of its range",
        )


__all__ = [
    "DEFAULT_ALLOWANCE",
    "KEEP_PROGRESS",
    "KILL_POINTS",
    "BatchHandler",
    "BatchResult",
    "check_column_types",
    "column_types",
    "load_engine",
    "pending_rows",
    "reads_only_files",
    "save_engine",
    "save_pending",
]
