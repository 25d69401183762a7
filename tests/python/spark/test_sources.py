"""The deterministic replay source (floodmark.spark.sources.replay_stream): real streaming
queries, batches exactly as the clock dictates, restart and re-run from the checkpoint."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable
from stream_helpers import Batches, run_available_now, uncommit

from floodmark.exceptions import InvalidInputError, InvalidParameterError, SchemaError
from floodmark.spark.sources import (
    ReplayDataSource,
    _prepare_replay,
    _replay_options,
    replay_stream,
)

T0 = 1_700_000_000_000  # ms


def _table() -> pa.Table:
    """Three channels, arrival in int64 ms, a gap of several steps, ties in arrival."""
    parts = [0, 1, 2, 0, 1, 0, 2, 2, 1, 0, 0, 1]
    arrival = [5, 3, 150, 100, 100, 230, 240, 700, 710, 710, 990, 1000]
    n = len(parts)
    return pa.table(
        {
            "partition": pa.array(parts, pa.int32()),
            "arrival": pa.array([T0 + a for a in arrival], pa.int64()),
            "event_time": pa.array(
                [datetime.fromtimestamp((T0 + a - 7) / 1000, timezone.utc) for a in arrival],
                pa.timestamp("us", tz="UTC"),
            ),
            "key": pa.array([f"k{i % 3}" for i in range(n)]),
            "row": pa.array(range(n), pa.int64()),
        }
    )


def _run(df: Any, checkpoint: Path) -> Batches:
    return run_available_now(df, checkpoint)[0]


def _expected(table: pa.Table, start: int, step: int, batches: int) -> list[list[int]]:
    """The ``row`` values each batch must release: previous clock < arrival <= clock."""
    arrival, rows = table.column("arrival").to_pylist(), table.column("row").to_pylist()
    out = []
    for b in range(batches):
        lo, hi = start + b * step, start + (b + 1) * step
        out.append(sorted(r for a, r in zip(arrival, rows, strict=True) if lo < a <= hi))
    return out


def _rows(batch: list[tuple[Any, ...]]) -> list[int]:
    return sorted(int(r[4]) for r in batch)


@pytest.fixture
def checkpoint(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "checkpoint"


def _reader(
    table: pa.Table,
    step: int,
    start: int | None = None,
    until: int | None = None,
    first_batch_all_channels: bool = False,
    max_partitions: int | None = None,
) -> Any:
    """The planner's side of the source, without a query: the options replay_stream
    gives the data source."""
    manifest = _prepare_replay(table, arrival="arrival", channel="partition", workdir=None)
    options = _replay_options(manifest, step, start, until, first_batch_all_channels, "ms")
    if max_partitions is not None:
        options["max_partitions"] = str(max_partitions)
    source = ReplayDataSource(options)
    return source.streamReader(source.schema())


def _clocks(reader: Any) -> list[int]:
    """Every clock the reader steps to, from its initial offset until it stops."""
    offset, clocks = reader.initialOffset(), []
    while (nxt := reader.latestOffset(offset, ReadAllAvailable())) != offset:
        clocks.append(nxt["clock"])
        offset = nxt
    return clocks


def test_the_clock_steps_releases_and_stops() -> None:
    """The planner's side, without a query: offsets, partitions and rows per batch."""
    table = _table()
    reader = _reader(table, step=100)
    assert reader.initialOffset() == {"clock": T0}  # largest multiple of 100 below T0 + 3
    assert _clocks(reader) == [T0 + 100 * (b + 1) for b in range(10)]  # last arrival T0+1000
    # One input partition per channel with rows in the batch; read() gives its rows.
    parts = reader.partitions({"clock": T0}, {"clock": T0 + 100})
    assert [[(Path(f).name, lo, hi) for f, lo, hi in p.slices] for p in parts] == [
        [("channel-00000.parquet", 0, 2)],  # partition 0: arrivals 5, 100
        [("channel-00001.parquet", 0, 2)],  # partition 1: arrivals 3, 100
    ]
    rows = [pa.Table.from_batches(list(reader.read(p))) for p in parts]
    assert [t.column("row").to_pylist() for t in rows] == [[0, 3], [1, 4]]
    assert reader.partitions({"clock": T0 + 300}, {"clock": T0 + 600}) == []  # a gap
    # max_partitions groups consecutive channels (here all three into two tasks).
    grouped = _reader(table, step=100, max_partitions=2)
    parts = grouped.partitions({"clock": T0}, {"clock": T0 + 1000})
    assert [[Path(f).name[8:13] for f, _, _ in p.slices] for p in parts] == [
        ["00000", "00001"],
        ["00002"],
    ]
    rows = [pa.Table.from_batches(list(grouped.read(p))) for p in parts]
    assert [t.column("row").to_pylist() for t in rows] == [[0, 3, 5, 9, 10, 1, 4, 8, 11], [2, 6, 7]]
    # until: the clock stops at the last step at or before it.
    assert _clocks(_reader(table, step=100, until=T0 + 450))[-1] == T0 + 400
    # An explicit start; the first batch holding every channel (partition 2 starts at 150).
    assert _clocks(_reader(table, step=500, start=T0 - 100)) == [
        T0 + 400,
        T0 + 900,
        T0 + 1400,
    ]
    assert _clocks(_reader(table, step=100, first_batch_all_channels=True))[:2] == [
        T0 + 200,
        T0 + 300,
    ]


def test_stream_batches_restart_and_re_run(spark: Any, checkpoint: Path) -> None:
    """A real query: batches exactly as the clock dictates (empty ones included); stopped
    and restarted from its checkpoint it continues with no row lost or repeated; a batch
    Spark re-runs (logged, not committed: a crash between the two) releases the same rows."""
    table = _table()
    kw: dict[str, Any] = {"arrival": "arrival", "channel": "partition", "step": 200}
    df = replay_stream(spark, table, until=T0 + 450, **kw)
    assert df.isStreaming
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("partition", "int"),
        ("arrival", "bigint"),
        ("event_time", "timestamp"),
        ("key", "string"),
        ("row", "bigint"),
    ]
    first = _run(df, checkpoint)  # the clock stops at T0 + 400: two batches
    assert sorted(first.batches) == [0, 1]
    # Restart from the same checkpoint without the stop: the next batches continue.
    second = _run(replay_stream(spark, table, **kw), checkpoint)
    assert sorted(second.batches) == [2, 3, 4]
    batches = {**first.batches, **second.batches}
    expected = _expected(table, T0, 200, 5)
    assert [_rows(batches[b]) for b in range(5)] == expected
    assert expected[2] == []  # no arrival in (400, 600]: an empty micro-batch
    seen = sorted(r for rows in batches.values() for r in _rows(rows))
    assert seen == list(range(table.num_rows))  # every row once
    # The rows come back with the input's values and types.
    row = dict(zip(table.column_names, batches[0][0], strict=True))
    assert row["partition"] == 0 and row["arrival"] == T0 + 5 and row["key"] == "k0"
    assert row["event_time"] == datetime.fromtimestamp((T0 - 2) / 1000)  # local, naive
    # Spark re-runs the last batch when its commit is missing.
    uncommit(checkpoint, 4)
    again = _run(replay_stream(spark, table, **kw), checkpoint)
    assert again.calls == [4]
    assert again.batches[4] == second.batches[4] != []


def test_a_step_without_records_reads_nothing_with_max_partitions(
    spark: Any, checkpoint: Path
) -> None:
    """Channels grouped into one partition (``max_partitions``): a clock step in which
    no channel has a record is an empty micro-batch (it failed the query: a partition
    size of zero)."""
    table = _table()
    df = replay_stream(
        spark, table, arrival="arrival", channel="partition", step=200, max_partitions=1
    )
    got = _run(df, checkpoint)
    assert [_rows(got.batches[b]) for b in sorted(got.batches)] == _expected(table, T0, 200, 5)
    assert _rows(got.batches[2]) == []


def test_timestamp_arrival_string_channel_first_batch_all_channels(
    spark: Any, checkpoint: Path, tmp_path: Path
) -> None:
    """Timestamp arrival and a timedelta step; a Parquet file as input; the first batch
    holds every channel, the later ones step by 200 ms."""
    base = datetime(2024, 5, 1, tzinfo=timezone.utc)
    arrivals_ms = {"a": [10, 250, 610], "b": [30, 390], "c": [450, 460, 900]}
    rows = [
        (ch, base + timedelta(milliseconds=ms), i)
        for ch, ms_list in arrivals_ms.items()
        for i, ms in enumerate(ms_list)
    ]
    table = pa.table(
        {
            "topic_partition": [r[0] for r in rows],
            "ts": pa.array([r[1] for r in rows], pa.timestamp("ms", tz="UTC")),
            "n": pa.array([r[2] for r in rows], pa.int16()),
        }
    )
    path = tmp_path / "events.parquet"
    pq.write_table(table, path)
    df = replay_stream(
        spark,
        path,
        arrival="ts",
        channel="topic_partition",
        step=timedelta(milliseconds=200),
        first_batch_all_channels=True,
    )
    assert [f.dataType.simpleString() for f in df.schema.fields] == [
        "string",
        "timestamp",
        "smallint",
    ]
    got = _run(df, checkpoint)

    # Default start = base (largest multiple of 200 ms below base + 10 ms). Channel c's
    # first row arrives at 450 ms: the first batch ends at 600 ms, then 800, 1000.
    def ms(row: tuple[Any, ...]) -> int:  # collect() gives naive local datetimes
        return round((row[1].timestamp() - base.timestamp()) * 1000)

    assert {b: sorted(ms(r) for r in rows) for b, rows in got.batches.items()} == {
        0: [10, 30, 250, 390, 450, 460],
        1: [610],
        2: [900],
    }
    assert {r[0] for r in got.batches[0]} == {"a", "b", "c"}


def test_bad_arguments_are_refused(spark: Any, tmp_path: Path) -> None:
    table = _table()
    with pytest.raises(SchemaError, match="no column 'arr'"):
        replay_stream(spark, table, arrival="arr", channel="partition", step=1)
    with pytest.raises(SchemaError, match="arrival= column 'key'"):
        replay_stream(spark, table, arrival="key", channel="partition", step=1)
    twice = table.append_column("arrival", table["arrival"])
    with pytest.raises(SchemaError, match="2 columns named 'arrival'"):
        replay_stream(spark, twice, arrival="arrival", channel="partition", step=1)
    with pytest.raises(InvalidParameterError, match="`data`"):
        replay_stream(spark, [1, 2], arrival="arrival", channel="partition", step=1)  # type: ignore[arg-type]
    from_pandas = replay_stream(
        spark, table.to_pandas(), arrival="arrival", channel="partition", step=1
    )
    assert from_pandas.isStreaming
    unsigned = table.append_column("count", pa.array(range(12), pa.uint32()))
    with pytest.raises(SchemaError, match="column 'count' has type uint32, which Spark"):
        replay_stream(spark, unsigned, arrival="arrival", channel="partition", step=1)
    nulls = table.set_column(1, "arrival", pa.array([None] + [1] * 11, pa.int64()))
    with pytest.raises(InvalidInputError, match="1 rows have a null arrival"):
        replay_stream(spark, nulls, arrival="arrival", channel="partition", step=1)
    with pytest.raises(InvalidParameterError, match="step"):
        replay_stream(
            spark, table, arrival="arrival", channel="partition", step=timedelta(microseconds=5)
        )
    with pytest.raises(InvalidParameterError, match="start"):
        replay_stream(
            spark, table, arrival="arrival", channel="partition", step=1, start=datetime.now()
        )
    # A workdir you choose holds the per-channel files and the manifest.
    workdir = tmp_path / "replay"
    replay_stream(spark, table, arrival="arrival", channel="partition", step=1, workdir=workdir)
    assert sorted(os.listdir(workdir)) == [
        "channel-00000.parquet",
        "channel-00001.parquet",
        "channel-00002.parquet",
        "manifest.json",
    ]


def test_max_partitions_must_be_an_int_and_nanosecond_arrivals_are_truncated(
    spark: Any, checkpoint: Path
) -> None:
    """``max_partitions`` of 1.5, ``"2"`` or ``True`` is refused at the call (1.5 failed
    when the query started; ``"2"`` with a raw TypeError). A ``timestamp[ns]`` arrival
    (pandas' type) is truncated to Spark's microseconds, as Spark's own conversion does
    (a raw ArrowInvalid)."""
    table = _table()
    for bad in (1.5, "2", True, 0):
        with pytest.raises(InvalidParameterError) as err:
            replay_stream(
                spark, table, arrival="arrival", channel="partition", step=1, max_partitions=bad
            )
        assert err.value.parameter == "max_partitions"
    ns_type = pa.timestamp("ns", tz="UTC")
    ns = pa.table(
        {
            "partition": [0, 0, 1],
            "arrival": pa.array([1_000_000_001, 1_000_001_999, 2_000_000_500], pa.timestamp("ns")),
            # nested nanoseconds too (a raw ArrowInvalid): a struct's, a list's
            "inner": pa.array([{"t": 1_001}] * 3, pa.struct([("t", ns_type)])),
            "times": pa.array([[2_999]] * 3, pa.list_(ns_type)),
        }
    )
    df = replay_stream(spark, ns, arrival="arrival", channel="partition", step=timedelta(seconds=1))
    got = _run(df, checkpoint)
    rows = [r for batch in got.batches.values() for r in batch]
    micros = sorted(round(r[1].replace(tzinfo=timezone.utc).timestamp() * 1e6) for r in rows)
    assert micros == [1_000_000, 1_000_001, 2_000_000]
    epoch = datetime(1970, 1, 1)
    assert {(r[2]["t"] - epoch, r[3][0] - epoch) for r in rows} == {
        (timedelta(microseconds=1), timedelta(microseconds=2))
    }
    # A numpy integer clock (a pandas column's min) was refused as no int.
    import numpy as np

    ints = _table()
    replay_stream(
        spark,
        ints,
        arrival="arrival",
        channel="partition",
        step=np.int64(100),
        start=np.int64(0),
        until=np.int64(10**6),
    )
