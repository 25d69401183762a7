"""Deterministic, restartable streaming sources for tests, demos and benchmarks.

Two Python streaming data sources (PySpark's ``pyspark.sql.datasource`` API), whose
offsets live in Spark's checkpoint, so a query restarted from its checkpoint continues
where it stopped and a batch Spark re-runs reads exactly the same rows:

* :func:`replay_stream` replays a table (Parquet file or folder, or a ``pyarrow.Table``)
  as a stream: one input partition per channel (Kafka partition), the rows in arrival
  order, a clock in the offset; each micro-batch releases the rows with
  ``previous clock < arrival <= clock``, the clock moving by a fixed ``step``.
* :func:`kafka_stream` (and :func:`kafka_read` for a batch DataFrame) reads Kafka
  topics with ``confluent_kafka`` and gives rows with exactly the schema of Spark's own
  Kafka source, offsets in Spark's JSON form, every partition read to its latest offset
  each batch. :class:`MockKafka` starts librdkafka's mock cluster (bundled in the
  ``confluent-kafka`` wheel): the Kafka protocol on localhost, no broker to install.

The Kafka parts need ``pip install floodmark[kafka]``; the module imports without it.
See ``docs/kafka.md``.
"""

from __future__ import annotations

import atexit
import base64
import ctypes
import ctypes.util
import glob
import json
import os
import re
import shutil
import tempfile
import time
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import date, datetime, timedelta, timezone
from datetime import time as dt_time
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow

from floodmark.arrays import as_table, field_index
from floodmark.column_kinds import key_type, time_kind
from floodmark.exceptions import InvalidInputError, InvalidParameterError, SchemaError
from floodmark.time import as_int, check_unit, to_ticks

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = [
    "KAFKA_FORMAT",
    "KAFKA_SCHEMA",
    "KAFKA_SCHEMA_WITH_HEADERS",
    "REPLAY_FORMAT",
    "KafkaDataSource",
    "MockKafka",
    "ReplayDataSource",
    "kafka_read",
    "kafka_stream",
    "register_sources",
    "replay_stream",
]

REPLAY_FORMAT = "floodmark_replay"
KAFKA_FORMAT = "floodmark_kafka"

#: The schema of Spark's Kafka source (``KafkaRecordToRowConverter``), every field nullable.
KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset bigint, "
    "timestamp timestamp, timestampType int"
)
#: With ``includeHeaders``: Spark's ``headers`` column, ``array<struct<key, value>>``.
KAFKA_SCHEMA_WITH_HEADERS = KAFKA_SCHEMA + ", headers array<struct<key: string, value: binary>>"

_KAFKA_MISSING = (
    "floodmark's Kafka sources need the confluent-kafka package: pip install 'floodmark[kafka]'"
)

_registered: weakref.WeakSet[Any] = weakref.WeakSet()


def register_sources(spark: SparkSession) -> None:
    """Register both data sources (``floodmark_replay``, ``floodmark_kafka``) with
    ``spark``, once per session; :func:`replay_stream` and :func:`kafka_stream` call it."""
    if spark in _registered:
        return
    spark.dataSource.register(ReplayDataSource)
    spark.dataSource.register(KafkaDataSource)
    _registered.add(spark)


# --------------------------------------------------------------------------------------
# Replay: a table as a stream, micro-batch boundaries set by a clock.
# --------------------------------------------------------------------------------------

_MANIFEST = "manifest.json"
_ROWS_PER_GROUP = 65_536
_workdirs: list[str] = []


@atexit.register
def _remove_workdirs() -> None:  # pragma: no cover - runs at interpreter exit
    for d in _workdirs:
        shutil.rmtree(d, ignore_errors=True)


def replay_stream(
    spark: SparkSession,
    data: str | os.PathLike[str] | pa.Table,
    *,
    arrival: str,
    channel: str,
    step: int | timedelta,
    start: int | datetime | None = None,
    until: int | datetime | None = None,
    first_batch_all_channels: bool = False,
    arrival_unit: str = "ms",
    workdir: str | os.PathLike[str] | None = None,
    max_partitions: int | None = None,
) -> DataFrame:
    """Replay a table as a streaming DataFrame, one micro-batch per clock ``step``.

    The rows are sorted by ``arrival`` within each ``channel`` value (ties keep the
    table's order) and split into one input partition per channel. The offset holds a
    clock: micro-batch ``b`` releases the rows with ``clock(b-1) < arrival <= clock(b)``,
    ``clock(b) = clock(b-1) + step``, so the test or benchmark sets the batch boundaries
    exactly; batches without rows still advance the clock (empty micro-batches). Once
    the clock has passed the last arrival (or would pass ``until``) no new batch starts.
    The offsets are in Spark's checkpoint: a query restarted from it continues with the
    next clock, and a batch Spark re-runs releases the same rows.

    Args:
        spark: the session (the data source is registered with it once).
        data: a Parquet file or folder (read with ``pyarrow``), or a ``pyarrow.Table``,
            ``RecordBatch`` or pandas ``DataFrame``.
        arrival: the arrival column: an integer epoch column (``arrival_unit``), a
            ``timestamp`` or a ``timestamp_ntz`` (the clock then counts microseconds).
            No nulls.
        channel: the channel column (integer or string; nulls are a channel of their
            own, after the others): one input partition per value with rows in the batch.
        step: how far the clock moves per micro-batch: a ``timedelta``, or an ``int``
            in clock ticks (the arrival column's unit; microseconds for timestamps).
        start: the clock before the first batch (``int`` ticks or a ``datetime``; a naive
            one is read as UTC). Default: the largest multiple of ``step`` below the
            first arrival, so the batches end on multiples of ``step`` (a 200 ms step
            then matches floodmark's 200 ms emission grid).
        until: stop the clock at the last ``start + k * step`` at or before this value
            (the stream then looks exhausted): a test that stops and restarts a query
            runs the first part with ``until`` and restarts without it.
        first_batch_all_channels: make the first batch end at the first grid clock
            (``start + k * step``) by which every channel has had a row, so that it
            holds every channel; the later batches step as usual.
        arrival_unit: the unit of an integer arrival column (``s``, ``ms``, ``us``,
            ``ns``), used to turn a ``timedelta`` step into ticks.
        workdir: where the per-channel Parquet files are written (default: a temporary
            folder removed when Python exits). Executors read them: on a cluster give a
            path every executor sees. The files are written the same way for the same
            input, so a restarted query may use a new workdir.
        max_partitions: group the channels with rows in a batch into at most this many
            input partitions (consecutive channels, each read in arrival order):
            every input partition is a Spark task with a Python worker's overhead,
            which dominates small batches over many channels. Default: one per channel.

    Returns:
        A streaming DataFrame with the input's schema.
    """
    manifest = _prepare_replay(data, arrival=arrival, channel=channel, workdir=workdir)
    options = _replay_options(manifest, step, start, until, first_batch_all_channels, arrival_unit)
    if max_partitions is not None:
        most = as_int(max_partitions)
        if most is None or most < 1:
            raise InvalidParameterError(
                "max_partitions", f"expected an int of at least 1, got {max_partitions!r}"
            )
        options["max_partitions"] = str(most)
    register_sources(spark)
    return spark.readStream.format(REPLAY_FORMAT).options(**options).load()


def _replay_options(
    manifest: Mapping[str, Any],
    step: int | timedelta,
    start: int | datetime | None,
    until: int | datetime | None,
    first_batch_all_channels: bool,
    arrival_unit: str,
) -> dict[str, str]:
    """The ``floodmark_replay`` options for prepared files: the clock in ticks."""
    kind = manifest["kind"]
    unit = "us" if kind != "integer" else check_unit(arrival_unit, "arrival_unit")
    step_ticks = to_ticks(step, unit, "step")
    if step_ticks < 1:
        raise InvalidParameterError(
            "step",
            f"{step!r} is less than one tick of the arrival column ({unit}); give a longer step",
        )
    first = manifest["first_arrival"]
    if start is None:
        start_ticks = 0 if first is None else ((first - 1) // step_ticks) * step_ticks
    else:
        start_ticks = _clock_ticks(start, kind, "start")
    options = {
        "manifest": str(Path(manifest["workdir"]) / _MANIFEST),
        "step": str(step_ticks),
        "start": str(start_ticks),
        "first_batch_all_channels": str(bool(first_batch_all_channels)).lower(),
    }
    if until is not None:
        options["until"] = str(_clock_ticks(until, kind, "until"))
    return options


def _holds_timestamp(arrow_type: pa.DataType) -> bool:
    """Whether a type is, or nests (in a struct, list or map), a timestamp: its
    nanoseconds are truncated to Spark's microseconds at any depth."""
    if pa.types.is_timestamp(arrow_type):
        return True
    return any(_holds_timestamp(arrow_type.field(i).type) for i in range(arrow_type.num_fields))


def _clock_ticks(value: int | datetime, kind: str, parameter: str) -> int:
    ticks = as_int(value)  # a Python or numpy integer (not a bool)
    if ticks is not None:
        return ticks
    if isinstance(value, datetime):
        if kind == "integer":
            raise InvalidParameterError(
                parameter,
                "the arrival column holds integers; give the clock as an int in its unit",
            )
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        delta = value - datetime(1970, 1, 1, tzinfo=timezone.utc)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    raise InvalidParameterError(parameter, f"expected int or datetime, got {type(value).__name__}")


def _spark_schema(schema: pa.Schema) -> StructType:
    """The Spark schema a stream of ``schema``'s rows has; a column Spark cannot hold
    (unsigned integers, ``float16``, ``date64``, ``time32``) is named."""
    from pyspark.errors import PySparkTypeError
    from pyspark.sql.pandas.types import from_arrow_schema

    try:
        return from_arrow_schema(schema, prefer_timestamp_ntz=True)
    except PySparkTypeError:
        for field in schema:
            try:
                from_arrow_schema(pa.schema([field]))
            except PySparkTypeError:
                raise SchemaError(
                    field.name,
                    f"column {field.name!r} has type {field.type}, which Spark cannot "
                    "hold; cast it to a supported type first (e.g. uint32 to int64)",
                ) from None
        raise


def _prepare_replay(
    data: str | os.PathLike[str] | pa.Table,
    *,
    arrival: str,
    channel: str,
    workdir: str | os.PathLike[str] | None,
) -> dict[str, Any]:
    """Write one Parquet file per channel, sorted by arrival, and a manifest."""
    from pyspark.sql.pandas.types import to_arrow_schema

    if isinstance(data, (str, os.PathLike)):
        table = pq.read_table(os.fspath(data))
    else:
        table = as_table(data, "data")
    for name, parameter in ((arrival, "arrival"), (channel, "channel")):
        if name not in table.column_names:
            raise SchemaError(
                name,
                f"the table has no column {name!r} (given as "
                f"{parameter}=); its columns are {sorted(table.column_names)}",
            )
        field_index(table.schema, name)  # named once
    # The Spark schema the stream has, and the Arrow schema Spark's Python data source
    # expects the batches in (timestamps as UTC microseconds, ...).
    spark_schema = _spark_schema(table.schema)
    # Nanosecond timestamps (pandas') to Spark's microseconds, truncated as Spark's own
    # Arrow conversion does (spark.sql.execution.pandas.convertToArrowArraySafely);
    # every other column cast safely.
    target = to_arrow_schema(spark_schema, timezone="UTC")
    table = pa.Table.from_arrays(
        [
            table.column(i).cast(f.type, safe=not _holds_timestamp(f.type))
            for i, f in enumerate(target)
        ],
        schema=target,
    )
    kind = time_kind(table.schema.field(arrival).type, arrival, "arrival")
    key_type(table.schema.field(channel).type, channel, "channel")
    nulls = table.column(arrival).null_count
    if nulls:
        bad = InvalidInputError(
            arrival,
            f"{nulls} rows have a null arrival; a replay "
            "releases each row at its arrival, so every row needs one",
        )
        bad.column = arrival
        raise bad

    ticks = pc.cast(table.column(arrival), pa.int64())
    order = pc.sort_indices(
        pa.table({"c": table.column(channel), "a": ticks, "i": pa.array(np.arange(len(table)))}),
        sort_keys=[("c", "ascending"), ("a", "ascending"), ("i", "ascending")],
    )
    table = table.take(order)
    ticks = ticks.take(order)

    folder = Path(workdir) if workdir is not None else Path(_new_workdir())
    folder.mkdir(parents=True, exist_ok=True)
    channels: list[dict[str, Any]] = []
    if len(table):
        runs = pc.run_end_encode(table.column(channel).combine_chunks())
        ends = runs.run_ends.to_pylist()
        values = runs.values.to_pylist()
        lo = 0
        arr = ticks.to_numpy()
        for i, (end, value) in enumerate(zip(ends, values, strict=True)):
            name = f"channel-{i:05d}.parquet"
            pq.write_table(table.slice(lo, end - lo), folder / name, row_group_size=_ROWS_PER_GROUP)
            channels.append(
                {
                    "value": value,
                    "file": name,
                    "rows": end - lo,
                    "first": int(arr[lo]),
                    "last": int(arr[end - 1]),
                }
            )
            lo = end
    manifest = {
        "version": 1,
        "arrival": arrival,
        "channel": channel,
        "kind": kind,
        "schema": spark_schema.json(),
        "channels": channels,
        "rows": len(table),
        "first_arrival": min((c["first"] for c in channels), default=None),
        "last_arrival": max((c["last"] for c in channels), default=None),
        "workdir": str(folder.resolve()),
    }
    (folder / _MANIFEST).write_text(json.dumps(manifest, indent=1))
    return manifest


def _new_workdir() -> str:
    d = tempfile.mkdtemp(prefix="floodmark-replay-")
    _workdirs.append(d)
    return d


class ReplayPartition(InputPartition):
    """Rows ``[lo, hi)`` of one or more channels' files ``(path, lo, hi)``, in order."""

    def __init__(self, slices: Sequence[tuple[str, int, int]]) -> None:
        super().__init__(tuple(slices))
        self.slices = tuple(slices)


class ReplayDataSource(DataSource):
    """The ``floodmark_replay`` data source behind :func:`replay_stream` (options:
    ``manifest``, ``step``, ``start``, ``until``, ``first_batch_all_channels``)."""

    @classmethod
    def name(cls) -> str:
        return REPLAY_FORMAT

    def schema(self) -> StructType:
        from pyspark.sql.types import StructType

        manifest = json.loads(Path(self.options["manifest"]).read_text())
        return StructType.fromJson(json.loads(manifest["schema"]))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return ReplayStreamReader(dict(self.options), schema)


class ReplayStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The clock: offsets ``{"clock": ticks}``. The per-channel arrival arrays are loaded
    on first use in the planner process and never pickled to the executors."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        options = _lower(options)
        self.manifest_path = options["manifest"]
        self.step = int(options["step"])
        self.start = int(options["start"])
        self.until = int(options["until"]) if options.get("until") else None
        self.first_all = options.get("first_batch_all_channels", "false") == "true"
        self.max_partitions = (
            int(options["max_partitions"]) if options.get("max_partitions") else None
        )
        self.schema = schema
        self._arrivals: list[np.ndarray[Any, Any]] | None = None
        self._manifest: dict[str, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_arrivals"] = None
        state["_manifest"] = None
        return state

    def _load(self) -> tuple[dict[str, Any], list[np.ndarray[Any, Any]]]:
        if self._manifest is None or self._arrivals is None:
            manifest = json.loads(Path(self.manifest_path).read_text())
            folder = Path(manifest["workdir"])
            self._arrivals = [
                pc.cast(
                    pq.read_table(folder / c["file"], columns=[manifest["arrival"]]).column(0),
                    pa.int64(),
                ).to_numpy()
                for c in manifest["channels"]
            ]
            self._manifest = manifest
        return self._manifest, self._arrivals

    def initialOffset(self) -> dict[str, int]:
        return {"clock": self.start}

    def _end(self) -> int | None:
        """The clock after which nothing more is released (None: no rows)."""
        manifest, _ = self._load()
        last: int | None = manifest["last_arrival"]
        if last is None:
            return None
        return last if self.until is None else min(last, self.until)

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        # The step is the source's definition of a micro-batch, not a read limit: it
        # applies whatever ``limit`` Spark passes (a trigger reading "all available"
        # would otherwise merge the batches the clock defines).
        clock = int(start["clock"])
        end = self._end()
        if end is None or clock >= end:
            return start
        nxt = clock + self.step
        if self.first_all and clock == self.start:
            manifest, _ = self._load()
            need = max(c["first"] for c in manifest["channels"])
            if need > nxt:
                nxt = clock + -(-(need - clock) // self.step) * self.step
        if self.until is not None and nxt > self.until:
            return start
        return {"clock": nxt}

    def prepareForTriggerAvailableNow(self) -> None:
        """The data is fixed: ``Trigger.AvailableNow`` runs the clock to the end."""

    def reportLatestOffset(self) -> dict[str, int] | None:
        end = self._end()
        return None if end is None else {"clock": end}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        lo_clock, hi_clock = int(start["clock"]), int(end["clock"])
        if hi_clock <= lo_clock:
            return []
        manifest, arrivals = self._load()
        folder = Path(manifest["workdir"])
        slices = []
        for c, arr in zip(manifest["channels"], arrivals, strict=True):
            lo = int(np.searchsorted(arr, lo_clock, side="right"))
            hi = int(np.searchsorted(arr, hi_clock, side="right"))
            if hi > lo:
                slices.append((str(folder / c["file"]), lo, hi))
        # One partition per channel, or (max_partitions) consecutive channels grouped.
        # (A clock step in which no channel has a record reads nothing.)
        per = 1 if self.max_partitions is None else max(1, -(-len(slices) // self.max_partitions))
        return [ReplayPartition(slices[i : i + per]) for i in range(0, len(slices), per)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, ReplayPartition)
        from pyspark.sql.pandas.types import to_arrow_schema

        target = to_arrow_schema(self.schema, timezone="UTC")
        for path, lo, hi in partition.slices:
            f = pq.ParquetFile(path)
            groups: list[int] = []
            first_row = row = 0
            for g in range(f.metadata.num_row_groups):
                n = f.metadata.row_group(g).num_rows
                if row + n > lo and row < hi:
                    if not groups:
                        first_row = row
                    groups.append(g)
                row += n
            table = f.read_row_groups(groups).slice(lo - first_row, hi - lo)
            yield from table.cast(target).to_batches(max_chunksize=_ROWS_PER_GROUP)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to release: the files stay until the workdir is removed."""


# --------------------------------------------------------------------------------------
# Kafka: the protocol, read with confluent_kafka, Spark's Kafka source schema.
# --------------------------------------------------------------------------------------


def _confluent() -> Any:
    try:
        import confluent_kafka
        import confluent_kafka.admin
    except ImportError as err:  # pragma: no cover - exercised without the wheel
        raise ImportError(_KAFKA_MISSING) from err
    return confluent_kafka


def kafka_stream(
    spark: SparkSession,
    bootstrap_servers: str,
    topics: str | Sequence[str] | None = None,
    *,
    pattern: str | None = None,
    starting_offsets: str | Mapping[str, Mapping[str, int]] = "earliest",
    include_headers: bool = False,
    fail_on_data_loss: bool = True,
    consumer_config: Mapping[str, Any] | None = None,
) -> DataFrame:
    """A streaming DataFrame over Kafka topics, with Spark's Kafka source schema.

    Each micro-batch reads every partition from the previous batch's end to the latest
    offset at planning time ("read to the latest offset each batch"). The offsets, in
    Spark's JSON form (``{"topic": {"0": 12, "1": 7}}``, the next offset to read), live
    in the checkpoint: a restarted query continues exactly and a re-run batch reads the
    same records. Partitions that appear later (a new topic matching ``pattern``) are
    read from their earliest offset in the batch that first sees them.

    Args:
        spark: the session.
        bootstrap_servers: ``host:port,...`` (``MockKafka.bootstrap_servers``).
        topics: a topic name or names (Spark's ``subscribe``); or give ``pattern``.
        pattern: a regular expression matching whole topic names (``subscribePattern``).
        starting_offsets: ``"earliest"``, ``"latest"``, or per-partition offsets in
            Spark's form, ``-2`` for earliest and ``-1`` for latest; a partition not
            listed starts at its earliest offset. Used only when the query first starts.
        include_headers: add Spark's ``headers`` column.
        fail_on_data_loss: raise when records between the offsets are gone (deleted by
            retention); else skip them, as Spark's ``failOnDataLoss=false``.
        consumer_config: extra ``confluent_kafka`` consumer settings (SASL, ...).

    Returns:
        A streaming DataFrame: ``key``, ``value`` (binary), ``topic``, ``partition``,
        ``offset``, ``timestamp``, ``timestampType`` (0 CreateTime, 1 LogAppendTime)
        [, ``headers``].
    """
    _confluent()
    options = _kafka_options(
        bootstrap_servers,
        topics,
        pattern,
        starting_offsets,
        include_headers,
        fail_on_data_loss,
        consumer_config,
    )
    register_sources(spark)
    return spark.readStream.format(KAFKA_FORMAT).options(**options).load()


def kafka_read(
    spark: SparkSession,
    bootstrap_servers: str,
    topics: str | Sequence[str] | None = None,
    *,
    pattern: str | None = None,
    starting_offsets: str | Mapping[str, Mapping[str, int]] = "earliest",
    ending_offsets: str | Mapping[str, Mapping[str, int]] = "latest",
    include_headers: bool = False,
    fail_on_data_loss: bool = True,
    consumer_config: Mapping[str, Any] | None = None,
) -> DataFrame:
    """The same records as a batch DataFrame (Spark's ``spark.read.format("kafka")``):
    from ``starting_offsets`` to ``ending_offsets`` (``"latest"``, or Spark's JSON,
    ``-1`` for latest), both resolved when the DataFrame is created. Arguments as
    :func:`kafka_stream`."""
    _confluent()
    options = _kafka_options(
        bootstrap_servers,
        topics,
        pattern,
        starting_offsets,
        include_headers,
        fail_on_data_loss,
        consumer_config,
    )
    options["endingOffsets"] = _offsets_option(ending_offsets, "ending_offsets", starting=False)
    register_sources(spark)
    # Resolve the offsets now, so that every job over this DataFrame reads the same rows.
    start, end = _read_range(options, ("starting_offsets", "ending_offsets"))
    options["startingOffsets"] = json.dumps(start)
    options["endingOffsets"] = json.dumps(end)
    return spark.read.format(KAFKA_FORMAT).options(**options).load()


def _read_range(options: Mapping[str, str], names: tuple[str, str]) -> tuple[Offsets, Offsets]:
    """A batch read's start and end offsets (options ``startingOffsets``, default
    earliest, and ``endingOffsets``, default latest), resolved to offsets now; errors
    name ``names`` (the starting and the ending offsets' parameter).

    Raises:
        InvalidParameterError: an offset past a partition's latest, or a partition that
            ends before it starts.
    """
    lowered = _lower(options)
    client = _KafkaClient(options)
    try:
        tps = client.discover()
        start = client.resolve(lowered.get("startingoffsets", "earliest"), tps, names[0])
        end = client.resolve(
            lowered.get("endingoffsets", "latest"), tps, names[1], unlisted=_LATEST
        )
    finally:
        client.close()
    for t, p in tps:
        first, last = start[t][str(p)], end[t][str(p)]
        if first > last:
            raise InvalidParameterError(
                names[1], f"{t}[{p}]: ends at {last}, before its start, {first}"
            )
    return start, end


def _kafka_options(
    bootstrap_servers: str,
    topics: str | Sequence[str] | None,
    pattern: str | None,
    starting_offsets: str | Mapping[str, Mapping[str, int]],
    include_headers: bool,
    fail_on_data_loss: bool,
    consumer_config: Mapping[str, Any] | None,
) -> dict[str, str]:
    _servers(bootstrap_servers, "bootstrap_servers")
    if (topics is None) == (pattern is None):
        raise InvalidParameterError(
            "topics", "give exactly one of `topics` and `pattern` (a regular expression)"
        )
    options = {"kafka.bootstrap.servers": bootstrap_servers}
    if topics is not None:
        names = [topics] if isinstance(topics, str) else list(topics)
        if not names or not all(isinstance(t, str) and t and "," not in t for t in names):
            raise InvalidParameterError("topics", f"expected topic names, got {topics!r}")
        options["subscribe"] = ",".join(names)
    else:
        options["subscribePattern"] = _pattern(pattern, "pattern")
    options["startingOffsets"] = _offsets_option(
        starting_offsets, "starting_offsets", starting=True
    )
    options["includeHeaders"] = str(bool(include_headers)).lower()
    options["failOnDataLoss"] = str(bool(fail_on_data_loss)).lower()
    for k, v in (consumer_config or {}).items():
        options[f"kafka.{k}"] = str(v)
    return options


def _servers(servers: object, parameter: str) -> str:
    """Kafka's bootstrap servers, checked: a non-empty ``host:port,...``."""
    if not isinstance(servers, str) or not servers.strip():
        raise InvalidParameterError(parameter, f"expected 'host:port,...', got {servers!r}")
    return servers


def _pattern(pattern: object, parameter: str) -> str:
    """A topic pattern, checked: a non-empty regular expression."""
    try:
        if not isinstance(pattern, str) or not pattern:
            raise TypeError
        re.compile(pattern)
    except (re.error, TypeError) as err:
        why = f": {err}" if isinstance(err, re.error) else ""
        raise InvalidParameterError(
            parameter, f"expected a regular expression, got {pattern!r}{why}"
        ) from None
    return pattern


def _format_options(options: Mapping[str, str], *, batch: bool) -> dict[str, str]:
    """The ``floodmark_kafka`` format's options (read case-insensitively, as Spark
    passes them) checked before any planning, as :func:`kafka_stream` and
    :func:`kafka_read` check their arguments; errors name the option."""
    lowered = _lower(options)
    _servers(lowered.get("kafka.bootstrap.servers", ""), "kafka.bootstrap.servers")
    if ("subscribe" in lowered) == ("subscribepattern" in lowered):
        raise InvalidParameterError(
            "subscribe", "give exactly one of the options subscribe and subscribePattern"
        )
    if "subscribe" in lowered and not all(lowered["subscribe"].split(",")):
        raise InvalidParameterError(
            "subscribe", f"expected comma-separated topic names, got {lowered['subscribe']!r}"
        )
    if "subscribepattern" in lowered:
        _pattern(lowered["subscribepattern"], "subscribePattern")
    for name, starting in (("startingOffsets", True), ("endingOffsets", False)):
        if name.lower() in lowered:
            if not (batch or starting):
                raise InvalidParameterError(
                    name, "a streaming read has no end: it reads to the latest offset"
                )
            _offsets_option(lowered[name.lower()], name, starting=starting)
    return lowered


Offsets = dict[str, dict[str, int]]
#: Spark's per-partition offset words: -2 the earliest offset, -1 the latest.
_EARLIEST, _LATEST = -2, -1


def _offsets_option(value: object, parameter: str, *, starting: bool) -> str:
    """Starting or ending offsets (named ``parameter``) as the option's text:
    ``"earliest"`` (starting only), ``"latest"``, or per-partition offsets (a mapping
    or its JSON), checked: ``{"topic": {"0": 12}}`` with offsets of at least -2 (-1 when
    ending: a read cannot end at the earliest offset, as in Spark)."""
    words = ("earliest", "latest") if starting else ("latest",)
    lowest = _EARLIEST if starting else _LATEST
    form = f"{' or '.join(map(repr, words))}, or per-partition offsets such as " + (
        '{"topic": {"0": 12, "1": -1}}'
    )
    given: object = value
    if isinstance(value, str):
        if value in words:
            return value
        try:
            given = json.loads(value)
        except json.JSONDecodeError:
            raise InvalidParameterError(parameter, f"expected {form}, got {value!r}") from None
    out: Offsets = {}
    if isinstance(given, Mapping):
        for topic, parts in given.items():
            if not isinstance(topic, str) or not isinstance(parts, Mapping):
                break
            for p, offset in parts.items():
                partition = as_int(int(p) if isinstance(p, str) and p.isdigit() else p)
                off = as_int(offset)
                if partition is None or partition < 0 or off is None or off < lowest:
                    raise InvalidParameterError(
                        parameter,
                        f"topic {topic!r}: partition {p!r} at offset {offset!r}: partitions "
                        f"are ints from 0, offsets ints from {lowest} ({form})",
                    )
                out.setdefault(topic, {})[str(partition)] = off
        else:
            return json.dumps(_sorted_offsets(out))
    raise InvalidParameterError(parameter, f"expected {form}, got {value!r}")


#: The topics a Kafka broker keeps for itself, which a pattern never subscribes.
_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


class _KafkaClient:
    """Metadata and offsets (the planner's side): which partitions exist, where they
    start and end. Opened lazily; nothing here is pickled."""

    def __init__(self, options: Mapping[str, str]) -> None:
        ck = _confluent()
        self.config = _consumer_config(options)
        options = _lower(options)
        self.topics = options["subscribe"].split(",") if options.get("subscribe") else None
        self.pattern = re.compile(options["subscribepattern"]) if self.topics is None else None
        admin_config = {
            k: v
            for k, v in self.config.items()
            if k not in ("group.id", "enable.auto.commit", "enable.partition.eof")
            and not k.startswith("auto.offset")
        }
        self.admin = ck.admin.AdminClient(admin_config)

    def close(self) -> None:
        self.admin = None

    def wanted(self, topic: str) -> bool:
        """Subscribed: one of the topics, or a whole match of the pattern (Kafka's
        internal topics excluded, as its pattern subscription does; a user topic named
        ``__x`` is not one)."""
        if self.topics is not None:
            return topic in self.topics
        assert self.pattern is not None
        return topic not in _INTERNAL_TOPICS and self.pattern.fullmatch(topic) is not None

    def discover(self) -> list[tuple[str, int]]:
        """Every (topic, partition) subscribed, sorted."""
        md = self.admin.list_topics(timeout=30)
        return sorted(
            (name, p)
            for name, topic in md.topics.items()
            if topic.error is None and self.wanted(name)
            for p in topic.partitions
        )

    def offsets(self, tps: Iterable[tuple[str, int]], which: str) -> Offsets:
        """The earliest or latest offset of each partition."""
        ck = _confluent()
        tps = list(tps)
        if not tps:
            return {}
        spec = (
            ck.admin.OffsetSpec.earliest() if which == "earliest" else ck.admin.OffsetSpec.latest()
        )
        committed = self.config.get("isolation.level") == "read_committed"
        futures = self.admin.list_offsets(
            {ck.TopicPartition(t, p): spec for t, p in tps},
            isolation_level=(
                ck.IsolationLevel.READ_COMMITTED
                if committed
                else ck.IsolationLevel.READ_UNCOMMITTED
            ),
            request_timeout=30,
        )
        out: Offsets = {}
        for tp, fut in futures.items():
            out.setdefault(tp.topic, {})[str(tp.partition)] = int(fut.result().offset)
        return _sorted_offsets(out)

    def resolve(
        self, spec: str, tps: list[tuple[str, int]], parameter: str, *, unlisted: int = _EARLIEST
    ) -> Offsets:
        """Starting or ending offsets (named ``parameter``): ``earliest``, ``latest`` or
        Spark's JSON, where a partition the JSON does not list is at ``unlisted`` (-2
        earliest, -1 latest).

        Raises:
            InvalidParameterError: the JSON names a partition that is not subscribed (a
                topic not subscribed or not there, a partition the topic does not have),
                or an offset past its partition's latest; Spark's Kafka source refuses
                both too.
        """
        if spec in ("earliest", "latest"):
            return self.offsets(tps, spec)
        given = json.loads(spec)
        there = {(t, str(p)) for t, p in tps}
        unknown = sorted(f"{t}[{p}]" for t, ps in given.items() for p in ps if (t, p) not in there)
        if unknown:
            found = ", ".join(f"{t}[{p}]" for t, p in tps[:20]) or "none"
            raise InvalidParameterError(
                parameter,
                f"{', '.join(unknown[:10])}: not a partition of the subscribed topics "
                f"(found: {found}{', ...' if len(tps) > 20 else ''})",
            )
        earliest = self.offsets(tps, "earliest")
        latest = self.offsets(tps, "latest")
        out: Offsets = {}
        for t, p in tps:
            value = given.get(t, {}).get(str(p), unlisted)
            top = latest[t][str(p)]
            if value == _EARLIEST:
                value = earliest[t][str(p)]
            elif value == _LATEST:
                value = top
            elif value > top:
                raise InvalidParameterError(
                    parameter, f"{t}[{p}]: {value} is past the latest offset, {top}"
                )
            out.setdefault(t, {})[str(p)] = int(value)
        return _sorted_offsets(out)


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    """Spark passes option names case-insensitively (lowercased): read them so."""
    return {k.lower(): v for k, v in options.items()}


def _sorted_offsets(offsets: Offsets) -> Offsets:
    return {
        t: dict(sorted(ps.items(), key=lambda kv: int(kv[0]))) for t, ps in sorted(offsets.items())
    }


def _consumer_config(options: Mapping[str, str]) -> dict[str, Any]:
    config: dict[str, Any] = {
        "group.id": "floodmark-kafka-source",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
        # As Spark's Kafka consumer (the Java client's default): the offsets listed as
        # the latest are then offsets this consumer reaches.
        "isolation.level": "read_uncommitted",
        "log_level": 3,
    }
    for k, v in options.items():
        if k.startswith("kafka."):
            config[k[len("kafka.") :]] = v
    return config


class KafkaPartition(InputPartition):
    """Offsets ``[start, end)`` of one topic partition."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic, self.partition, self.start, self.end = topic, partition, start, end


class KafkaDataSource(DataSource):
    """The ``floodmark_kafka`` data source: Spark's Kafka source options
    (``kafka.bootstrap.servers``, ``subscribe`` or ``subscribePattern``,
    ``startingOffsets``, ``endingOffsets`` for batch reads, ``includeHeaders``,
    ``failOnDataLoss``, ``kafka.*`` consumer settings), read with ``confluent_kafka``."""

    @classmethod
    def name(cls) -> str:
        return KAFKA_FORMAT

    def schema(self) -> str:
        headers = _lower(self.options).get("includeheaders", "false") == "true"
        return KAFKA_SCHEMA_WITH_HEADERS if headers else KAFKA_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(_format_options(self.options, batch=False), schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(_format_options(self.options, batch=True), schema)


def _plan(start: Offsets, end: Offsets, earliest: Offsets) -> list[InputPartition]:
    parts: list[InputPartition] = []
    for topic, ends in sorted(end.items()):
        for p, e in sorted(ends.items(), key=lambda kv: int(kv[0])):
            s = start.get(topic, {}).get(p)
            if s is None:
                s = earliest.get(topic, {}).get(p, 0)
            if e > s:
                parts.append(KafkaPartition(topic, int(p), int(s), int(e)))
    return parts


class _KafkaReading:
    """``read()``: one consumer per input partition, assigned and positioned explicitly,
    records turned into Arrow batches of Spark's Kafka schema."""

    options: dict[str, str]
    schema: StructType

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, KafkaPartition):
            return  # PySpark's stand-in when no partition has records: nothing to read
        from pyspark.sql.pandas.types import to_arrow_schema

        target = to_arrow_schema(self.schema, timezone="UTC")
        headers = "headers" in self.schema.fieldNames()
        for rows in _consume(self.options, partition):
            yield _to_batch(rows, partition, target, headers)


_BATCH_ROWS = 50_000
_IDLE_TIMEOUT_S = 30.0


def _consume(options: Mapping[str, str], part: KafkaPartition) -> Iterator[list[Any]]:
    ck = _confluent()
    fail_on_loss = _lower(options).get("failondataloss", "true") == "true"
    config = _consumer_config(options)
    if not fail_on_loss:
        config["auto.offset.reset"] = "earliest"
    consumer = ck.Consumer(config)
    where = f"{part.topic}[{part.partition}]"
    try:
        consumer.assign([ck.TopicPartition(part.topic, part.partition, part.start)])
        expected, rows = part.start, []
        last_progress = time.monotonic()
        while expected < part.end:
            # Ask for no more than the range holds: consume() returns once it has them.
            want = min(_BATCH_ROWS, part.end - expected)
            msgs = consumer.consume(num_messages=want, timeout=1.0)
            if msgs:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > _IDLE_TIMEOUT_S:
                raise RuntimeError(
                    f"floodmark_kafka: no record of {where} at offsets {expected}.."
                    f"{part.end - 1} within {_IDLE_TIMEOUT_S:.0f} s; is the broker up?"
                )
            for m in msgs:
                err = m.error()
                if err is not None:
                    expected = _after_eof(ck, err, m.offset(), where, expected, part.end)
                    continue
                off = m.offset()
                if off >= part.end:
                    expected = part.end
                    break
                if fail_on_loss and expected == part.start and off > expected:
                    # A gap is a loss only if retention moved the partition's start past
                    # it; compaction and transaction markers leave gaps too (as Spark).
                    low, _ = consumer.get_watermark_offsets(
                        ck.TopicPartition(part.topic, part.partition), timeout=30, cached=False
                    )
                    if low > expected:
                        raise RuntimeError(
                            f"floodmark_kafka: {where}: records {expected}..{low - 1} are "
                            "gone (deleted by retention); failOnDataLoss=false skips them"
                        )
                expected = off + 1
                rows.append(m)
                if len(rows) >= _BATCH_ROWS:
                    yield rows
                    rows = []
        if rows:
            yield rows
    finally:
        consumer.close()


def _after_eof(ck: Any, err: Any, offset: int, where: str, expected: int, end: int) -> int:
    """The offset expected next after a message carrying ``err`` at ``offset``: a
    partition EOF at or past ``end`` means the rest was compacted or deleted; any other
    error is raised."""
    if err.code() == ck.KafkaError._PARTITION_EOF:
        return end if offset >= end else expected
    deleted = err.code() in (ck.KafkaError.OFFSET_OUT_OF_RANGE, ck.KafkaError._AUTO_OFFSET_RESET)
    raise RuntimeError(
        f"floodmark_kafka: reading {where} from offset {expected}: {err.str()}"
        + (" (records deleted by retention? failOnDataLoss=false skips them)" if deleted else "")
    )


_KAFKA_TS_TYPE = {0: -1, 1: 0, 2: 1}  # confluent_kafka's TIMESTAMP_* -> Kafka's ids


def _to_batch(
    msgs: list[Any], part: KafkaPartition, target: pa.Schema, headers: bool
) -> pa.RecordBatch:
    n = len(msgs)
    keys = [m.key() for m in msgs]
    values = [m.value() for m in msgs]
    offsets = [m.offset() for m in msgs]
    stamps = [m.timestamp() for m in msgs]
    ts_type = [_KAFKA_TS_TYPE.get(t, -1) for t, _ in stamps]
    # No timestamp: Kafka's -1 ms, as Spark shows it.
    micros = [(ms if t else -1) * 1000 for t, ms in stamps]
    columns = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.array([part.topic] * n, pa.string()),
        pa.array([part.partition] * n, pa.int32()),
        pa.array(offsets, pa.int64()),
        pa.array(micros, pa.int64()).cast(target.field("timestamp").type),
        pa.array(ts_type, pa.int32()),
    ]
    if headers:
        hs = [
            None if not m.headers() else [{"key": k, "value": v} for k, v in m.headers()]
            for m in msgs
        ]
        columns.append(pa.array(hs, target.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=target)


class KafkaStreamReader(_KafkaReading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets in Spark's JSON: per topic, per partition, the next offset to read."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = _lower(options)
        self.schema = schema
        self._client: _KafkaClient | None = None
        self._target: Offsets | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None
        return state

    @property
    def client(self) -> _KafkaClient:
        if self._client is None:
            self._client = _KafkaClient(self.options)
        return self._client

    def initialOffset(self) -> Offsets:
        spec = self.options.get("startingoffsets", "latest")
        return self.client.resolve(spec, self.client.discover(), "startingOffsets")

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        latest = self.client.offsets(self.client.discover(), "latest")
        out: Offsets = {t: dict(ps) for t, ps in start.items()}
        for t, ps in latest.items():
            for p, off in ps.items():
                if self._target is not None:
                    cap = self._target.get(t, {}).get(p)
                    if cap is None:
                        continue  # appeared after Trigger.AvailableNow's target
                    off = min(off, cap)
                prev = out.get(t, {}).get(p)
                if prev is not None and off < prev and self.fail_on_loss:
                    raise RuntimeError(
                        f"floodmark_kafka: {t}[{p}]'s latest offset went back from {prev} to "
                        f"{off} (the topic deleted and made again?): records may have been "
                        "missed; failOnDataLoss=false reads on from the new offsets"
                    )
                out.setdefault(t, {})[p] = off
        return _sorted_offsets(out)

    @property
    def fail_on_loss(self) -> bool:
        return self.options.get("failondataloss", "true") == "true"

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.client.offsets(self.client.discover(), "latest")

    def reportLatestOffset(self) -> Offsets | None:
        return None

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[InputPartition]:
        new = [(t, int(p)) for t, ps in end.items() for p in ps if p not in start.get(t, {})]
        earliest = self.client.offsets(new, "earliest") if new else {}
        return _plan(start, end, earliest)

    def commit(self, end: Offsets) -> None:
        """Offsets live in Spark's checkpoint; nothing is committed to Kafka."""

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


class KafkaBatchReader(_KafkaReading, DataSourceReader):
    """A batch read between ``startingOffsets`` (default earliest) and ``endingOffsets``
    (default latest), resolved when the read is planned (:func:`kafka_read` resolves
    them when it is called, so that every job reads the same records)."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = _lower(options)
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        start, end = _read_range(self.options, ("startingOffsets", "endingOffsets"))
        return _plan(start, end, {})


# --------------------------------------------------------------------------------------
# MockKafka: librdkafka's mock cluster through its C API (the Python client has none).
# --------------------------------------------------------------------------------------

# The mock cluster keeps the last 5 MB of record batches per partition (as produced,
# compressed), and at most 100,000 batches (librdkafka's ``rdkafka_mock.c``).


def _librdkafka() -> ctypes.CDLL:
    """The librdkafka the confluent_kafka wheel bundles (the one its module loaded)."""
    ck = _confluent()
    pkg = Path(ck.__file__).resolve().parent
    candidates = (
        glob.glob(str(pkg.parent / "confluent_kafka.libs" / "librdkafka*"))
        + glob.glob(str(pkg / ".dylibs" / "librdkafka*"))
        + glob.glob(str(pkg / "librdkafka*"))
    )
    if not candidates:
        found = ctypes.util.find_library("rdkafka")
        if found is None:
            raise RuntimeError(
                "MockKafka needs librdkafka's mock cluster API and found no librdkafka "
                f"next to confluent_kafka ({pkg}) nor on the library path"
            )
        candidates = [found]
    lib = ctypes.CDLL(candidates[0])
    vp, cp = ctypes.c_void_p, ctypes.c_char_p
    lib.rd_kafka_conf_new.restype = vp
    lib.rd_kafka_conf_set.argtypes = [vp, cp, cp, cp, ctypes.c_size_t]
    lib.rd_kafka_conf_set.restype = ctypes.c_int
    lib.rd_kafka_new.argtypes = [ctypes.c_int, vp, cp, ctypes.c_size_t]
    lib.rd_kafka_new.restype = vp
    lib.rd_kafka_destroy.argtypes = [vp]
    lib.rd_kafka_mock_cluster_new.argtypes = [vp, ctypes.c_int]
    lib.rd_kafka_mock_cluster_new.restype = vp
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [vp]
    lib.rd_kafka_mock_cluster_bootstraps.restype = cp
    lib.rd_kafka_mock_topic_create.argtypes = [vp, cp, ctypes.c_int, ctypes.c_int]
    lib.rd_kafka_mock_topic_create.restype = ctypes.c_int
    lib.rd_kafka_mock_cluster_destroy.argtypes = [vp]
    lib.rd_kafka_err2str.argtypes = [ctypes.c_int]
    lib.rd_kafka_err2str.restype = cp
    return lib


#: A topic name Kafka accepts.
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


class MockKafka:
    """librdkafka's mock Kafka cluster, serving the Kafka protocol on localhost.

    ``with MockKafka() as kafka:`` starts it; :attr:`bootstrap_servers` is its address.
    Create topics with :meth:`create_topic`, produce with :meth:`produce` or
    :meth:`produce_table`, then :meth:`flush`. Leaving the block (or :meth:`stop`)
    stops it; its data is gone.

    What the mock supports (librdkafka 2.x, checked with the bundled 2.16): Produce,
    Fetch, ListOffsets, Metadata, consumer groups. Timestamps are what the producer
    sends (``CreateTime``): the mock stores record batches as they come and does not
    rewrite them to ``LogAppendTime``. Topics are created through the mock's C API with
    a fixed partition count: the mock has no CreateTopics nor CreatePartitions handler
    (the admin calls time out), so a topic's partition count cannot grow; a new topic
    matching a subscription pattern is the way to add partitions while a query runs.
    Each partition keeps only its last 5 MB of record batches as produced (lz4
    compressed here: some 10^5 to 10^6 small JSON records) or 100,000 batches, a fixed
    retention of the mock: :meth:`flush` raises if any record was dropped that way.

    Args:
        brokers: the number of mock brokers.
    """

    def __init__(self, brokers: int = 1) -> None:
        count = as_int(brokers)
        if count is None or count < 1:
            raise InvalidParameterError(
                "brokers", f"expected a number of brokers >= 1, got {brokers!r}"
            )
        self.brokers = count
        self._lib: ctypes.CDLL | None = None
        self._rk: int | None = None
        self._cluster: int | None = None
        self._producer: Any = None
        self._topics: dict[str, int] = {}
        self.bootstrap_servers = ""

    def __enter__(self) -> MockKafka:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start the cluster (and a producer for :meth:`produce`)."""
        if self._cluster is not None:
            return
        ck = _confluent()
        lib = _librdkafka()
        conf = lib.rd_kafka_conf_new()
        errstr = ctypes.create_string_buffer(512)
        # Quiet: only errors (the handle has no bootstrap servers of its own).
        lib.rd_kafka_conf_set(conf, b"log_level", b"3", errstr, len(errstr))
        rk = lib.rd_kafka_new(1, conf, errstr, len(errstr))  # RD_KAFKA_CONSUMER: no sends
        if not rk:
            raise RuntimeError(f"MockKafka: rd_kafka_new failed: {errstr.value.decode()}")
        cluster = lib.rd_kafka_mock_cluster_new(rk, self.brokers)
        if not cluster:
            lib.rd_kafka_destroy(rk)
            raise RuntimeError("MockKafka: rd_kafka_mock_cluster_new failed")
        self._lib, self._rk, self._cluster = lib, rk, cluster
        self.bootstrap_servers = lib.rd_kafka_mock_cluster_bootstraps(cluster).decode()
        try:
            self._producer = ck.Producer(
                {
                    "bootstrap.servers": self.bootstrap_servers,
                    "linger.ms": 20,
                    "batch.num.messages": 100_000,
                    "queue.buffering.max.messages": 1_000_000,
                    "compression.type": "lz4",
                    "log_level": 3,
                }
            )
        except BaseException:  # no cluster left behind: __exit__ does not run
            self.stop()
            raise

    def stop(self) -> None:
        """Flush the producer and stop the cluster."""
        if self._cluster is None:
            return
        assert self._lib is not None
        if self._producer is not None:
            self._producer.flush(10)
            self._producer = None
        self._lib.rd_kafka_mock_cluster_destroy(self._cluster)
        self._lib.rd_kafka_destroy(self._rk)
        self._cluster = self._rk = None
        self._topics.clear()

    @property
    def topics(self) -> dict[str, int]:
        """The topics created, with their partition counts."""
        return dict(self._topics)

    def create_topic(self, name: str, partitions: int = 1) -> None:
        """Create a topic with ``partitions`` partitions (a name used before is refused:
        the mock can neither recreate a topic nor add partitions)."""
        lib, cluster = self._running()
        if not isinstance(name, str) or not _TOPIC_NAME.fullmatch(name) or name in (".", ".."):
            raise InvalidParameterError(
                "name",
                "expected a Kafka topic name (1-249 of a-z, A-Z, 0-9, '.', '_', '-'), "
                f"got {name!r}",
            )
        if name in self._topics:
            raise InvalidParameterError(
                "name",
                f"topic {name!r} exists; the mock cluster cannot "
                "add partitions to it (create a new topic matching your pattern instead)",
            )
        count = as_int(partitions)
        if count is None or count < 1:
            raise InvalidParameterError(
                "partitions", f"expected an int of at least 1, got {partitions!r}"
            )
        err = lib.rd_kafka_mock_topic_create(cluster, name.encode(), count, 1)
        if err:
            raise RuntimeError(
                f"MockKafka: creating topic {name!r}: {lib.rd_kafka_err2str(err).decode()}"
            )
        self._topics[name] = count

    def produce(
        self,
        topic: str,
        value: Any,
        *,
        key: bytes | str | None = None,
        partition: int = 0,
        timestamp: int | datetime | None = None,
        headers: Sequence[tuple[str, bytes | str]] | None = None,
    ) -> None:
        """Produce one record (asynchronously: :meth:`flush` waits for all of them).

        Args:
            topic: a topic made by :meth:`create_topic`.
            value: ``bytes`` or ``str`` as they are, ``None`` for a null value, anything
                else as JSON (dates and times as ISO-8601 text, decimals as text,
                bytes as base64, as Spark's ``to_json`` writes them).
            key: the record key.
            partition: the partition (explicit: no partitioner).
            timestamp: the record's CreateTime, epoch ms from 1 (or a ``datetime``);
                default the current time. 0 is refused: librdkafka sends it as "now".
            headers: ``(key, value)`` pairs.
        """
        self._send(topic, self._record(topic, value, key, partition, timestamp, headers))

    def _record(
        self,
        topic: str,
        value: Any,
        key: bytes | str | None,
        partition: int,
        timestamp: int | datetime | None,
        headers: Sequence[tuple[str, bytes | str]] | None = None,
    ) -> dict[str, Any]:
        """The producer's arguments for one record, checked (nothing sent)."""
        self._running()
        n = self._topics.get(topic)
        if n is None:
            raise InvalidParameterError(
                "topic",
                f"{topic!r} was not created (create_topic first; topics: {sorted(self._topics)})",
            )
        index = as_int(partition)
        if index is None or not 0 <= index < n:
            raise InvalidParameterError(
                "partition", f"{partition!r} is not a partition of {topic!r} (0..{n - 1})"
            )
        kwargs: dict[str, Any] = {"partition": index, "value": _encode_value(value)}
        if key is not None:
            kwargs["key"] = key.encode() if isinstance(key, str) else key
        if timestamp is not None:
            kwargs["timestamp"] = _epoch_ms(timestamp)
        if headers:
            kwargs["headers"] = list(headers)
        return kwargs

    def _send(self, topic: str, kwargs: dict[str, Any]) -> None:
        while True:
            try:
                self._producer.produce(topic, **kwargs)
                return
            except BufferError:
                self._producer.poll(0.05)

    def produce_table(
        self,
        topic: str,
        table: pa.Table,
        *,
        partition: str,
        timestamp: str,
        key: str | None = None,
        value_columns: Sequence[str] | None = None,
    ) -> int:
        """Produce one record per row: the ``partition`` column's partition, the
        ``timestamp`` column's CreateTime (integer epoch ms or a timestamp), the ``key``
        column as the key, and the ``value_columns`` (default: all) as a JSON object
        (as :meth:`produce` writes values). The partition and timestamp columns hold no
        nulls. Returns the number of records."""
        cols = list(value_columns) if value_columns is not None else table.column_names
        named = [(partition, "partition"), (timestamp, "timestamp"), (key, "key")]
        for name, parameter in [*named, *((c, "value_columns") for c in cols)]:
            if name is not None and name not in table.column_names:
                raise SchemaError(
                    name,
                    f"the table has no column {name!r} (given as {parameter}=); its "
                    f"columns are {table.column_names}",
                )
        for name in (partition, timestamp):
            if table.column(name).null_count:
                raise InvalidInputError(
                    name, f"{table.column(name).null_count} rows are null; every record needs one"
                )
        parts = table.column(partition).to_pylist()
        stamps = table.column(timestamp).to_pylist()
        keys = table.column(key).to_pylist() if key is not None else [None] * len(table)
        values = table.select(cols).to_pylist()
        columns = {"partition": partition, "timestamp": timestamp}
        records = []  # every row checked before any is sent: no topic half written
        for i, (p, ts, k, v) in enumerate(zip(parts, stamps, keys, values, strict=True)):
            try:
                key_bytes = k if k is None or isinstance(k, bytes) else str(k)
                records.append(self._record(topic, v, key_bytes, p, ts))
            except InvalidParameterError as err:  # a row's value: name its column
                if err.parameter not in columns:
                    raise
                raise InvalidInputError(columns[err.parameter], f"row {i}: {err}") from None
        for record in records:
            self._send(topic, record)
        return len(table)

    def flush(self, timeout: float = 60.0) -> None:
        """Wait until every record produced is stored; raise if any was lost (not
        delivered, or dropped by the mock's per-partition retention)."""
        self._running()
        left = self._producer.flush(timeout)
        if left:
            raise RuntimeError(f"MockKafka: {left} records not delivered within {timeout} s")
        ck = _confluent()
        admin = ck.admin.AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 3})
        tps = [ck.TopicPartition(t, p) for t, n in sorted(self._topics.items()) for p in range(n)]
        if not tps:
            return
        futures = admin.list_offsets(
            {tp: ck.admin.OffsetSpec.earliest() for tp in tps}, request_timeout=30
        )
        lost = {
            f"{tp.topic}[{tp.partition}]": fut.result().offset
            for tp, fut in futures.items()
            if fut.result().offset > 0
        }
        if lost:
            raise RuntimeError(
                f"MockKafka: the mock cluster dropped the oldest records of {lost} (first "
                "offset kept); it keeps the last 5 MB of record batches per partition: "
                "use more partitions or fewer records"
            )

    def _running(self) -> tuple[ctypes.CDLL, int]:
        if self._cluster is None or self._lib is None:
            raise RuntimeError("MockKafka is not running: use `with MockKafka() as kafka:`")
        return self._lib, self._cluster


def _encode_value(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    try:
        return json.dumps(value, separators=(",", ":"), default=_json_default).encode()
    except (TypeError, ValueError) as err:
        raise InvalidParameterError("value", f"cannot be written as JSON: {err}") from None


def _json_default(value: Any) -> Any:
    """What ``json`` cannot write, as Spark's ``to_json`` writes it."""
    if isinstance(value, (datetime, date, dt_time)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    raise TypeError(f"a {type(value).__name__} ({value!r})")


def _epoch_ms(value: int | datetime) -> int:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        delta = value - datetime(1970, 1, 1, tzinfo=timezone.utc)
        ms = (delta.days * 86_400 + delta.seconds) * 1_000 + delta.microseconds // 1_000
    else:
        ms = as_int(value)  # type: ignore[assignment]
    if ms is None or ms < 1:
        raise InvalidParameterError(
            "timestamp",
            f"expected epoch ms from 1 or a datetime after the epoch, got {value!r} "
            "(librdkafka sends 0 as the current time; Kafka has no earlier timestamps)",
        )
    return ms
