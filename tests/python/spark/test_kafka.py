"""Kafka without a broker: librdkafka's mock cluster (MockKafka), the floodmark_kafka
source (Spark's Kafka schema, offsets, restart, several topics, new topics), the
docs/kafka.md example run as written, and millisecond watermarks for timestamp input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from doc_blocks import python_blocks
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)
from stream_helpers import Batches, run_available_now, uncommit

from floodmark import (
    EventTimeSessionWindows,
    TumblingEventTimeWindows,
    WatermarkStrategy,
)
from floodmark.datagen import StreamSpec, generate
from floodmark.exceptions import InvalidParameterError
from floodmark.spark import assign_watermarks, window_aggregate
from floodmark.spark.columns import time_column
from floodmark.spark.sources import MockKafka, kafka_read, kafka_stream

DOC = Path(__file__).parents[3] / "docs" / "kafka.md"
T = 1_700_000_000_000  # ms: 2023-11-14 22:13:20 UTC

# Spark's own Kafka source schema, as KafkaRecordToRowConverter declares it (every field
# nullable), and with includeHeaders.
SPARK_KAFKA_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
)
SPARK_KAFKA_SCHEMA_WITH_HEADERS = StructType(
    [
        *SPARK_KAFKA_SCHEMA.fields,
        StructField(
            "headers",
            ArrayType(
                StructType([StructField("key", StringType()), StructField("value", BinaryType())])
            ),
        ),
    ]
)


@pytest.fixture
def kafka() -> Iterator[MockKafka]:
    pytest.importorskip("confluent_kafka")
    with MockKafka() as k:
        yield k


def _kafka_rows(df: Any) -> Any:
    return df.select(
        "topic",
        "partition",
        "offset",
        F.unix_millis("timestamp"),
        "timestampType",
        F.col("key").cast("string"),
        F.col("value").cast("string"),
    )


def _run(df: Any, checkpoint: Path) -> tuple[Batches, Any]:
    return run_available_now(df, checkpoint, _kafka_rows)


def _produce(kafka: MockKafka, topic: str, partition: int, first: int, n: int) -> list[tuple]:
    """``n`` records with known keys, values and CreateTime timestamps; the rows the
    source must give for them (offsets ``first..first+n-1``)."""
    rows = []
    for i in range(n):
        off = first + i
        ts = T + 1000 * partition + 10 * off
        value = {"topic": topic, "p": partition, "n": off}
        kafka.produce(topic, value, key=f"k{off}", partition=partition, timestamp=ts)
        rows.append(
            (topic, partition, off, ts, 0, f"k{off}", json.dumps(value, separators=(",", ":")))
        )
    return rows


def test_schema_is_sparks_kafka_source_schema(spark: Any, kafka: MockKafka) -> None:
    kafka.create_topic("t", 1)
    stream = kafka_stream(spark, kafka.bootstrap_servers, "t")
    assert stream.isStreaming
    assert stream.schema == SPARK_KAFKA_SCHEMA
    assert [(f.name, f.dataType, f.nullable) for f in stream.schema.fields] == [
        (f.name, f.dataType, True) for f in SPARK_KAFKA_SCHEMA.fields
    ]
    headers = kafka_stream(spark, kafka.bootstrap_servers, "t", include_headers=True)
    assert headers.schema == SPARK_KAFKA_SCHEMA_WITH_HEADERS
    assert kafka_read(spark, kafka.bootstrap_servers, "t").schema == SPARK_KAFKA_SCHEMA


def test_stream_offsets_timestamps_restart_and_new_topics(
    spark: Any, kafka: MockKafka, tmp_path: Path
) -> None:
    """Several topics by pattern; every partition read to its latest offset; offsets in
    Spark's JSON; a restart continues exactly; a topic created later (the mock cannot add
    partitions to a topic) shows up in the next batch from offset 0; a batch Spark
    re-runs reads the same records."""
    checkpoint = tmp_path / "checkpoint"
    kafka.create_topic("events.clicks", 3)
    kafka.create_topic("events.views", 1)
    kafka.create_topic("other", 1)  # does not match the pattern
    first = []
    for p, n in ((0, 4), (1, 2), (2, 3)):
        first += _produce(kafka, "events.clicks", p, 0, n)
    first += _produce(kafka, "events.views", 0, 0, 5)
    _produce(kafka, "other", 0, 0, 2)
    kafka.flush()

    def stream() -> Any:
        return kafka_stream(spark, kafka.bootstrap_servers, pattern=r"events\..*")

    got, progress = _run(stream(), checkpoint)
    assert got.batches == {0: sorted(first)}
    end = json.loads(progress["sources"][0]["endOffset"])
    assert end == {"events.clicks": {"0": 4, "1": 2, "2": 3}, "events.views": {"0": 5}}

    # More records, and a new topic with two partitions; then restart.
    second = _produce(kafka, "events.clicks", 1, 2, 3) + _produce(kafka, "events.views", 0, 5, 1)
    kafka.create_topic("events.orders", 2)
    second += _produce(kafka, "events.orders", 1, 0, 2)
    kafka.flush()
    again, progress = _run(stream(), checkpoint)
    assert again.batches == {1: sorted(second)}
    assert json.loads(progress["sources"][0]["startOffset"]) == end
    assert json.loads(progress["sources"][0]["endOffset"]) == {
        "events.clicks": {"0": 4, "1": 5, "2": 3},
        "events.orders": {"0": 0, "1": 2},
        "events.views": {"0": 6},
    }

    # Spark re-runs batch 1 when its commit is missing: the same records.
    uncommit(checkpoint, 1)
    rerun, _ = _run(stream(), checkpoint)
    assert rerun.calls == [1]
    assert rerun.batches[1] == again.batches[1]


def test_batch_read_headers_and_starting_offsets(spark: Any, kafka: MockKafka) -> None:
    kafka.create_topic("a", 2)
    kafka.produce("a", b"raw", partition=0, timestamp=T, headers=[("h", b"v"), ("g", "w")])
    kafka.produce("a", None, key="only-key", partition=0, timestamp=datetime(2024, 1, 1))
    _produce(kafka, "a", 1, 0, 3)
    kafka.flush()
    df = kafka_read(
        spark,
        kafka.bootstrap_servers,
        ["a"],
        starting_offsets={"a": {"0": -2, "1": 1}},
        include_headers=True,
    )
    rows = df.orderBy("partition", "offset").collect()
    assert [(r.partition, r.offset) for r in rows] == [(0, 0), (0, 1), (1, 1), (1, 2)]
    assert rows[0].value == b"raw" and rows[0].key is None
    assert [(h.key, h.value) for h in rows[0].headers] == [("h", b"v"), ("g", b"w")]
    assert rows[1].value is None and rows[1].key == b"only-key" and rows[1].headers is None
    ms = df.orderBy("partition", "offset").select(F.unix_millis("timestamp")).collect()
    assert [r[0] for r in ms] == [T, 1_704_067_200_000, T + 1010, T + 1020]
    assert {r.timestampType for r in rows} == {0}  # CreateTime: all the mock gives
    # The offsets were resolved when the DataFrame was made: later records are not read.
    _produce(kafka, "a", 1, 3, 1)
    kafka.flush()
    assert df.count() == 4


def test_mock_kafka_refuses_what_it_cannot_do(kafka: MockKafka) -> None:
    kafka.create_topic("t", 1)
    with pytest.raises(InvalidParameterError, match="cannot add partitions"):
        kafka.create_topic("t", 2)
    with pytest.raises(InvalidParameterError, match="was not created"):
        kafka.produce("nope", {"x": 1})
    with pytest.raises(InvalidParameterError, match=r"not a partition of 't' \(0\.\.0\)"):
        kafka.produce("t", {"x": 1}, partition=1)
    # The mock keeps the last 5 MB of record batches per partition: flush says so.
    for i in range(6_000):
        kafka.produce("t", os.urandom(1_000), partition=0, timestamp=T + i)
    with pytest.raises(RuntimeError, match="dropped the oldest records"):
        kafka.flush()


def test_mock_kafka_names_what_is_wrong_and_writes_values_as_spark_does(
    kafka: MockKafka,
) -> None:
    """Bad arguments are refused naming the parameter or column, before anything is
    sent: a timestamp of 0 (librdkafka sent it as the current time), an empty topic
    name (every later flush failed), a partition given as text or a null partition
    (raw TypeErrors). Dates, decimals and bytes are written as Spark's ``to_json``
    writes them (a TypeError)."""
    import pyarrow as pa

    from floodmark.exceptions import InvalidInputError, SchemaError
    from floodmark.spark.sources import _encode_value

    for name, partitions, parameter in (
        ("", 1, "name"),
        ("a b", 1, "name"),
        ("u", "2", "partitions"),
    ):
        with pytest.raises(InvalidParameterError) as err:
            kafka.create_topic(name, partitions)  # type: ignore[arg-type]
        assert err.value.parameter == parameter
    kafka.create_topic("t", 2)
    for kwargs in ({"timestamp": 0}, {"timestamp": datetime(1970, 1, 1)}, {"partition": "0"}):
        with pytest.raises(InvalidParameterError) as err:
            kafka.produce("t", {"x": 1}, **kwargs)  # type: ignore[arg-type]
        assert err.value.parameter == next(iter(kwargs))
    rows = pa.table({"p": [0, None], "ts": [T, T], "v": [1, 2]})
    with pytest.raises(InvalidInputError) as bad:
        kafka.produce_table("t", rows, partition="p", timestamp="ts")
    assert bad.value.column == "p"
    with pytest.raises(SchemaError) as missing:
        kafka.produce_table("t", rows, partition="p", timestamp="nope")
    assert missing.value.column == "nope"
    with pytest.raises(InvalidInputError, match="row 1") as zero:
        kafka.produce_table(
            "t", pa.table({"p": [0, 1], "ts": [T, 0]}), partition="p", timestamp="ts"
        )
    assert zero.value.column == "ts"
    kafka.flush()
    # Every row is checked before any is sent: row 0 of the refused tables was not.
    import confluent_kafka as ck

    admin = ck.admin.AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    tps = {ck.TopicPartition("t", p): ck.admin.OffsetSpec.latest() for p in (0, 1)}
    ends = admin.list_offsets(tps, request_timeout=30)
    assert [f.result().offset for f in ends.values()] == [0, 0]
    from datetime import date
    from decimal import Decimal

    value = {"d": date(2024, 1, 2), "m": Decimal("1.10"), "b": b"\x00\xff"}
    assert _encode_value(value) == b'{"d":"2024-01-02","m":"1.10","b":"AP8="}'
    with pytest.raises(InvalidParameterError, match="cannot be written as JSON") as js:
        _encode_value({"s": {1, 2}})
    assert js.value.parameter == "value"


@pytest.mark.parametrize(
    ("kwargs", "parameter"),
    [
        ({"topics": "t", "pattern": "t"}, "topics"),
        ({"pattern": "(["}, "pattern"),
        ({"topics": "t", "starting_offsets": "ealiest"}, "starting_offsets"),
        ({"topics": "t", "starting_offsets": "[1]"}, "starting_offsets"),
        ({"topics": "t", "starting_offsets": {"t": {"0": "x"}}}, "starting_offsets"),
        ({"topics": "t", "starting_offsets": {"t": {"0": -3}}}, "starting_offsets"),
        ({"topics": "t", "ending_offsets": "earliest"}, "ending_offsets"),
        ({"topics": "t", "ending_offsets": {"t": {"0": -2}}}, "ending_offsets"),
    ],
)
def test_kafka_source_arguments_are_refused_naming_the_parameter(
    kwargs: dict[str, Any], parameter: str
) -> None:
    """Each was a raw ``re.error``, ``JSONDecodeError``, an ``AttributeError`` when the
    query started, or an error naming no parameter. Checked before Spark is used."""
    pytest.importorskip("confluent_kafka")
    read = "ending_offsets" in kwargs
    call = kafka_read if read else kafka_stream
    with pytest.raises(InvalidParameterError) as err:
        call(None, "localhost:1", **kwargs)  # type: ignore[arg-type]
    assert err.value.parameter == parameter


def test_a_batch_read_ends_an_unlisted_partition_at_its_latest_offset(
    spark: Any, kafka: MockKafka
) -> None:
    """``ending_offsets`` listing some partitions reads the others to their latest
    offset (they were read to their earliest: nothing)."""
    kafka.create_topic("t", 2)
    _produce(kafka, "t", 0, 0, 3)
    _produce(kafka, "t", 1, 0, 3)
    kafka.flush()
    df = kafka_read(spark, kafka.bootstrap_servers, "t", ending_offsets={"t": {"0": 2}})
    got = sorted((r.partition, r.offset) for r in df.collect())
    assert got == [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)]


def test_a_batch_read_of_nothing_is_empty_and_offsets_out_of_range_are_named(
    spark: Any, kafka: MockKafka
) -> None:
    """A range without records (an empty topic, ``starting_offsets="latest"``) failed
    with a bare ``AssertionError``; it is an empty DataFrame. An end past the latest
    offset waited 30 s and asked whether the broker was up, an end before the start
    read nothing silently: both are refused, naming ``ending_offsets``."""
    kafka.create_topic("empty", 1)
    kafka.create_topic("t", 2)
    _produce(kafka, "t", 0, 0, 3)
    kafka.flush()
    servers = kafka.bootstrap_servers
    assert kafka_read(spark, servers, "empty").count() == 0
    assert kafka_read(spark, servers, "t", starting_offsets="latest").count() == 0
    with pytest.raises(InvalidParameterError, match=r"t\[0\]: 5 is past the latest offset, 3"):
        kafka_read(spark, servers, "t", ending_offsets={"t": {"0": 5}})
    with pytest.raises(InvalidParameterError, match=r"t\[0\]: ends at 1, before its start, 2"):
        kafka_read(
            spark,
            servers,
            "t",
            starting_offsets={"t": {"0": 2}},
            ending_offsets={"t": {"0": 1}},
        )


def test_binary_keys_and_user_topics_named_like_internal_ones_round_trip(
    spark: Any, kafka: MockKafka
) -> None:
    """``produce_table`` stored a binary key as the text of its repr (``b'...'``); a
    pattern left out every topic whose name starts with ``__``, where Kafka leaves out
    only its internal topics."""
    import pyarrow as pa

    kafka.create_topic("__events", 1)
    table = pa.table({"p": [0, 0], "ts": [T, T + 1], "k": [b"\x00\xffab", b"abc"], "v": [1, 2]})
    kafka.produce_table("__events", table, partition="p", timestamp="ts", key="k")
    kafka.flush()
    rows = kafka_read(spark, kafka.bootstrap_servers, pattern="__ev.*").orderBy("offset").collect()
    assert [r.key for r in rows] == [b"\x00\xffab", b"abc"]
    assert {r.topic for r in rows} == {"__events"}


def test_mock_kafka_refuses_a_count_of_brokers_it_cannot_start() -> None:
    pytest.importorskip("confluent_kafka")
    for brokers in (0, -1, "2", 1.5):
        with pytest.raises(InvalidParameterError, match="`brokers`"):
            MockKafka(brokers=brokers)  # type: ignore[arg-type]


def test_a_transaction_marker_at_the_start_of_a_range_is_no_data_loss(
    spark: Any, kafka: MockKafka
) -> None:
    """A transactional producer's commit marker takes an offset that no consumer ever
    receives: a range starting there read the next record first and was taken for
    records deleted by retention. Only a partition start past the range is a loss."""
    import confluent_kafka as ck

    kafka.create_topic("t", 1)
    producer = ck.Producer(
        {"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": "x", "log_level": 3}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(2):
        producer.produce("t", b"in", partition=0, timestamp=T + i)
    producer.commit_transaction(30)  # offsets 0, 1; the marker at 2
    for i in range(2):
        kafka.produce("t", b"after", partition=0, timestamp=T + 10 + i)
    kafka.flush()
    whole = kafka_read(spark, kafka.bootstrap_servers, "t")
    assert sorted(r.offset for r in whole.collect()) == [0, 1, 3, 4]
    later = kafka_read(spark, kafka.bootstrap_servers, "t", starting_offsets={"t": {"0": 2}})
    assert sorted(r.offset for r in later.collect()) == [3, 4]


def test_offsets_going_back_are_data_loss(spark: Any, tmp_path: Path) -> None:
    """A topic made again (a new cluster, a restart from the old checkpoint) whose
    offsets are below the checkpoint's: with ``fail_on_data_loss`` (the default) the
    query fails saying so, as Spark's Kafka source does (it read nothing until the new
    offsets passed the old ones, and then skipped the records below them); without it,
    it reads on from the new offsets."""
    pytest.importorskip("confluent_kafka")
    checkpoint = tmp_path / "checkpoint"
    with MockKafka() as first:
        first.create_topic("t", 1)
        _produce(first, "t", 0, 0, 3)
        first.flush()
        got, _ = _run(kafka_stream(spark, first.bootstrap_servers, "t"), checkpoint)
        assert [r[2] for r in got.batches[0]] == [0, 1, 2]
    with MockKafka() as second:
        second.create_topic("t", 1)
        _produce(second, "t", 0, 0, 2)
        second.flush()
        from pyspark.errors import StreamingQueryException

        with pytest.raises(StreamingQueryException, match="went back from 3 to 2"):
            _run(kafka_stream(spark, second.bootstrap_servers, "t"), checkpoint)
        lenient = kafka_stream(spark, second.bootstrap_servers, "t", fail_on_data_loss=False)
        _run(lenient, checkpoint)
        more = _produce(second, "t", 0, 2, 2)
        second.flush()
        got, _ = _run(lenient, checkpoint)
        assert sorted(r for rows in got.batches.values() for r in rows) == sorted(more)


def test_without_the_wheel_the_module_imports_and_says_what_to_install() -> None:
    """In a fresh interpreter where ``confluent_kafka`` cannot be imported."""
    code = (
        "import sys; sys.modules['confluent_kafka'] = None\n"
        "from floodmark.spark import sources\n"
        "for call in (lambda: sources.kafka_stream(None, 'h:1', 't'),\n"
        "             lambda: sources.MockKafka().start()):\n"
        "    try:\n"
        "        call()\n"
        "    except ImportError as err:\n"
        "        print(err)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert len(out) == 2
    assert all("pip install 'floodmark[kafka]'" in line for line in out), out


def _doc_code() -> str:
    return "\n".join(python_blocks("docs/kafka.md"))


def test_the_kafka_schema_example_in_the_docs_runs(spark: Any) -> None:
    """Issue 22: the Kafka-schema example (docs/kafka.md) runs as a test, as written."""
    pytest.importorskip("confluent_kafka")
    namespace: dict[str, Any] = {}
    exec(compile(_doc_code(), str(DOC), "exec"), namespace)
    events, out, marked = namespace["events"], namespace["out"], namespace["marked"]
    assert events.count() == 3 * 60 + 1
    assert sorted(r.channel for r in events.select("channel").distinct().collect()) == [
        "clicks:0",
        "clicks:1",
        "views:0",
    ]
    late = out.late.collect()
    assert [(r.channel, r.amount) for r in late] == [("views:0", 100)]
    assert out.dropped.count() == 0
    assert out.results.agg(F.sum("count")).first()[0] == 3 * 60
    # Millisecond watermarks, as Flink shows them.
    micros = marked.where("watermark is not null").select(F.unix_micros("watermark") % 1000)
    assert {r[0] for r in micros.collect()} == {0}


# --------------------------------------------------------------------------------------
# event_time_unit="ms" for timestamp columns: same decisions, watermarks on ms.
# --------------------------------------------------------------------------------------

STRATEGY = WatermarkStrategy.for_bounded_out_of_orderness(
    timedelta(milliseconds=300)
).with_idleness(timedelta(seconds=2))


def _ms_events(spark: Any) -> Any:
    """Kafka-like ms data (a lagging, an idle partition, late events) as timestamps."""
    spec = StreamSpec(
        rows=1_000,
        partitions=3,
        keys=3,
        duration_ms=20_000,
        disorder_ms=500,
        lagging_partition=1,
        lag_ms=3_000,
        quiet_partition=2,
        quiet_from_ms=8_000,
        quiet_for_ms=4_000,
        very_late_fraction=0.01,
        very_late_ms=5_000,
    )
    df = spark.createDataFrame(generate(spec))
    return df.select(
        F.concat(F.lit("topic:"), F.col("partition").cast("string")).alias("channel"),
        F.timestamp_millis(F.col("event_time") + T).alias("event_time"),
        F.timestamp_millis(F.col("arrival") + T).alias("arrival"),
        "key",
        "value",
    )


def _micros(df: Any, col: str) -> list[int | None]:
    return [r[0] for r in df.select(F.unix_micros(col)).collect()]


def test_event_time_unit_ms_gives_the_same_decisions_and_ms_watermarks(spark: Any) -> None:
    df = _ms_events(spark)
    kw: dict[str, Any] = {"event_time": "event_time", "channel": "channel", "arrival": "arrival"}
    ms = {"event_time_unit": "ms", "arrival_unit": "ms"}
    order = ["channel", "arrival", "event_time", "key", "value"]
    us_rows = assign_watermarks(df, STRATEGY, **kw).orderBy(*order).cache()
    ms_rows = assign_watermarks(df, STRATEGY, **kw, **ms).orderBy(*order).cache()
    assert us_rows.count() == ms_rows.count() == 1_000
    late = [r[0] for r in us_rows.select("is_late").collect()]
    assert late == [r[0] for r in ms_rows.select("is_late").collect()]
    assert any(late)
    for col in ("watermark", "channel_watermark"):
        us, m = _micros(us_rows, col), _micros(ms_rows, col)
        assert [a is None for a in us] == [b is None for b in m]
        pairs = [(a, b) for a, b in zip(us, m, strict=True) if a is not None]
        assert pairs
        assert all(b % 1000 == 0 for _, b in pairs)  # ...:05.021000, as Flink shows it
        assert all(a - b == 999 for a, b in pairs)  # max - bound - 1 us vs - 1 ms

    # Windows, native (tumbling) and keyed (session): the same results, firings, late and
    # dropped records; only the watermark printed differs (by 999 us).
    late_windows = 0
    for window in (
        TumblingEventTimeWindows.of(timedelta(seconds=1)),
        EventTimeSessionWindows.with_gap(timedelta(milliseconds=500)),
    ):
        a, b = (
            window_aggregate(
                df,
                STRATEGY,
                window,
                key="key",
                aggs=["count", ("sum", "value")],
                allowed_lateness=timedelta(milliseconds=500),
                **kw,
                **units,
            )
            for units in ({}, ms)
        )
        cols = ["key", "window_start", "window_end", "count", "sum_value", "timing", "fired_at"]
        ra = a.results.select(*cols, F.unix_micros("watermark").alias("w")).collect()
        rb = b.results.select(*cols, F.unix_micros("watermark").alias("w")).collect()
        key = lambda r: tuple(r[:-1])  # noqa: E731
        ra, rb = sorted(ra, key=key), sorted(rb, key=key)
        assert [key(r) for r in ra] == [key(r) for r in rb] and ra
        # (null: fired at the end of input, watermark MAX, in both)
        assert all(
            (x.w is None and y.w is None) or (x.w - y.w == 999 and y.w % 1000 == 0)
            for x, y in zip(ra, rb, strict=True)
        )
        for side in ("late", "dropped"):
            sa = sorted(tuple(r) for r in getattr(a, side).drop("watermark").collect())
            sb = sorted(tuple(r) for r in getattr(b, side).drop("watermark").collect())
            assert sa == sb
        late_windows += a.late.count()
        a.unpersist()
        b.unpersist()
    assert late_windows > 0
    us_rows.unpersist()
    ms_rows.unpersist()


def test_timestamps_in_ms_ticks_truncate_toward_negative_infinity(spark: Any) -> None:
    df = spark.createDataFrame([(-500,), (-1000,), (5_021_900,), (0,)], "us long").select(
        F.timestamp_micros("us").alias("ts"),
        F.timestamp_micros("us").cast("timestamp_ntz").alias("ntz"),
    )
    for name in ("ts", "ntz"):
        col = time_column(df, name, "ms", "event_time")
        assert (col.kind, col.unit) == (("timestamp" if name == "ts" else "timestamp_ntz"), "ms")
        ticks = [r[0] for r in df.select(col.ticks()).collect()]
        assert ticks == [-1, -1, 5_021, 0]
        back = df.select(col.from_ticks(col.ticks()).cast("timestamp").alias("b"))
        assert _micros(back, "b") == [-1_000, -1_000, 5_021_000, 0]
        seconds = time_column(df, name, "s", "event_time")
        assert [r[0] for r in df.select(seconds.ticks()).collect()] == [-1, -1, 5, 0]
        assert time_column(df, name, None, "event_time").unit == "us"  # default: unchanged
    with pytest.raises(InvalidParameterError, match=r"event_time_unit.*finer than"):
        time_column(df, "ts", "ns", "event_time")


def test_the_format_read_directly_resolves_sparks_offset_words(
    spark: Any, kafka: MockKafka
) -> None:
    """``spark.read.format("floodmark_kafka")`` with Spark's offset words read 0 rows
    (``-2``/``-1`` were taken as offsets), stopped a partition ending at ``-1``, failed
    on ``earliest``/``latest`` (JSONDecodeError) and without ``startingOffsets``
    (KeyError): they resolve as in Spark's Kafka source, earliest to latest by default."""
    from floodmark.spark.sources import KAFKA_FORMAT, register_sources

    kafka.create_topic("a", 2)
    _produce(kafka, "a", 0, 0, 3)
    _produce(kafka, "a", 1, 0, 3)
    kafka.flush()
    register_sources(spark)

    def read(**options: str) -> list[tuple[int, int]]:
        reader = spark.read.format(KAFKA_FORMAT).option(
            "kafka.bootstrap.servers", kafka.bootstrap_servers
        )
        df = reader.option("subscribe", "a").options(**options).load()
        return sorted((r.partition, r.offset) for r in df.collect())

    every = [(p, o) for p in (0, 1) for o in range(3)]
    assert read() == every
    assert read(startingOffsets="earliest", endingOffsets="latest") == every
    both = {"startingOffsets": '{"a":{"0":-2,"1":-2}}', "endingOffsets": '{"a":{"0":-1,"1":-1}}'}
    assert read(**both) == every
    assert read(startingOffsets='{"a":{"0":1}}', endingOffsets='{"a":{"0":-1,"1":2}}') == [
        (0, 1),
        (0, 2),
        (1, 0),
        (1, 1),
    ]
    for options, named in [
        ({"startingOffsets": "bogus"}, "startingOffsets"),
        ({"endingOffsets": "earliest"}, "endingOffsets"),
        ({"endingOffsets": '{"a":{"0":9}}'}, "endingOffsets"),
        ({"startingOffsets": '{"b":{"0":0}}'}, "startingOffsets"),
    ]:
        with pytest.raises(Exception, match=f"invalid parameter `{named}`"):
            read(**options)
    for options, named in [
        ({}, "subscribe"),
        ({"subscribe": "a", "subscribePattern": "a"}, "subscribe"),
        ({"subscribePattern": "(["}, "subscribePattern"),
    ]:
        bare = spark.read.format(KAFKA_FORMAT).option(
            "kafka.bootstrap.servers", kafka.bootstrap_servers
        )
        with pytest.raises(Exception, match=f"invalid parameter `{named}`"):
            bare.options(**options).load().collect()
    with pytest.raises(Exception, match=r"invalid parameter `kafka\.bootstrap\.servers`"):
        spark.read.format(KAFKA_FORMAT).option("subscribe", "a").load().collect()


def test_offsets_of_partitions_not_subscribed_or_past_the_end_are_refused(
    spark: Any, kafka: MockKafka, tmp_path: Path
) -> None:
    """An offset for a topic not subscribed (a typo) or a partition the topic lacks was
    ignored: the query read everything from the earliest offset. A starting offset past
    the latest failed later as 'the latest offset went back' (or, without
    ``fail_on_data_loss``, read on). Each is refused naming the offsets, as Spark's
    Kafka source refuses them; an empty ``bootstrap_servers`` is refused up front (it
    failed after librdkafka's 30 s transport timeout)."""
    from pyspark.errors import StreamingQueryException

    kafka.create_topic("a", 2)
    _produce(kafka, "a", 0, 0, 3)
    kafka.flush()
    servers = kafka.bootstrap_servers
    for offsets in ({"zzz": {"0": 1}}, {"a": {"5": 0}}):
        with pytest.raises(InvalidParameterError, match="not a partition of the subscribed"):
            kafka_read(spark, servers, "a", starting_offsets=offsets)
        with pytest.raises(StreamingQueryException, match="not a partition of the subscribed"):
            _run(kafka_stream(spark, servers, "a", starting_offsets=offsets), tmp_path / "c1")
    with pytest.raises(InvalidParameterError, match=r"a\[0\]: 500 is past the latest offset, 3"):
        kafka_read(spark, servers, "a", starting_offsets={"a": {"0": 500}})
    for lenient in (True, False):
        stream = kafka_stream(
            spark, servers, "a", starting_offsets={"a": {"0": 500}}, fail_on_data_loss=lenient
        )
        with pytest.raises(StreamingQueryException, match=r"`startingOffsets`.*500 is past"):
            _run(stream, tmp_path / f"c-{lenient}")
    for servers_given in ("", "  ", None):
        with pytest.raises(InvalidParameterError) as err:
            kafka_stream(spark, servers_given, "a")  # type: ignore[arg-type]
        assert err.value.parameter == "bootstrap_servers"
