"""The Flink job's topology: several Kafka partitions per source subtask
(``source_parallelism``, ``topic``) and inputs that end per partition
(``end_of_input="per_channel"``), against Flink's multiplexer and valve composed by
hand."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark import TumblingEventTimeWindows, WatermarkStrategy, _core
from floodmark.exceptions import InvalidInputError, InvalidParameterError, SchemaError
from floodmark.generator import Emission
from floodmark.replay import replay
from floodmark.timeline import subtasks_of
from floodmark.valve import Multiplexer, Valve

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
INTERVAL = 100


def java_hash(s: str) -> int:
    """Java's String.hashCode by its formula, wrapped to a signed 32-bit int."""
    h = 0
    for unit in s.encode("utf-16-be").hex(" ", 2).split():
        h = (h * 31 + int(unit, 16)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def test_java_hash_codes_and_the_kafka_owner_formula() -> None:
    assert _core.java_string_hash("") == 0
    assert _core.java_string_hash("a") == 97
    assert _core.java_string_hash("ab") == 3105
    for topic in ("events", "orders-v2", "ünïcödé", "\U0001f600x", "a" * 40):
        assert _core.java_string_hash(topic) == java_hash(topic)
    assert java_hash("events") == _core.java_string_hash("events")
    for readers in (1, 3, 4, 7):
        start = ((java_hash("events") * 31) & 0x7FFFFFFF) % readers
        want = [(start + p) % readers for p in range(16)]
        assert _core.kafka_split_owners("events", list(range(16)), readers) == want
        assert _core.kafka_split_owners(None, list(range(16)), readers) == [
            p % readers for p in range(16)
        ]
    assert subtasks_of(pa.array([3, 0, 5]), None, None, "p") is None
    with pytest.raises(InvalidInputError) as err:
        subtasks_of(pa.array(["a"]), 2, None, "part")
    assert err.value.column == "part"
    with pytest.raises(InvalidParameterError) as perr:
        _core.kafka_split_owners(None, [0], 0)
    assert perr.value.parameter == "source_parallelism"


def test_more_subtasks_than_channels_are_refused_before_allocating() -> None:
    """A subtask per source reader is allocated: 2^40 of them aborted the process (a
    44 TB allocation) before the refusal of readers without partitions."""
    from floodmark.timeline import TimelineBuilder

    strategy = WatermarkStrategy.for_monotonous_timestamps()
    for readers in (2, 2**40, 2**62):
        with pytest.raises(InvalidParameterError, match="would read none") as err:
            TimelineBuilder(strategy, 1, subtasks=[0], source_parallelism=readers)
        assert err.value.parameter == "source_parallelism"


class DataOutput:
    """Flink's WatermarkToDataOutput: larger watermarks only, active before one when
    idle, idle on the transition."""

    def __init__(self) -> None:
        self.wm, self.idle = I64_MIN, False

    def push(self, e: Emission) -> list[Emission]:
        if e.kind == "watermark":
            assert e.watermark is not None
            if e.watermark <= self.wm:
                return []
            out = [Emission("active")] if self.idle else []
            self.wm, self.idle = e.watermark, False
            return [*out, e]
        if e.kind == "idle" and not self.idle:
            self.idle = True
            return [e]
        return []


def by_hand(  # noqa: C901 (a model: Flink's classes composed step by step)
    records: list[tuple[int, int, int]],
    strategy: WatermarkStrategy,
    owner: dict[int, int],
    per_channel_end: bool,
) -> list[tuple[int, int, str]]:
    """The combined timeline ``(time, watermark, status)`` of ``records``
    (``(partition, arrival, ts)``) as Flink computes it: every split's generator is
    called at every grid time, writing to its deferred multiplexer output; then each
    subtask's multiplexer emits through its data output to the valve. A split that ends
    is unregistered; a subtask whose splits all ended emits MAX and finishes."""
    records = sorted(records, key=lambda r: (r[1], r[0], r[2]))
    parts = sorted(owner)
    subtasks = sorted(set(owner.values()))
    gens = {p: strategy.create_generator("ms") for p in parts}
    muxes = {s: Multiplexer() for s in subtasks}
    for p in parts:
        muxes[owner[p]].register_output(str(p))
    outputs = {s: DataOutput() for s in subtasks}
    valve = Valve(len(subtasks))
    last = {p: max(-(-a // INTERVAL) for q, a, _ in records if q == p) for p in parts}
    k0 = -(-records[0][1] // INTERVAL)
    kn = -(-records[-1][1] // INTERVAL)
    ended: set[int] = set()
    timeline, state, i = [], (I64_MIN, False), 0
    for k in range(k0, kn + 1):
        t = k * INTERVAL
        while i < len(records) and records[i][1] <= t:
            gens[records[i][0]].on_event(records[i][2])
            i += 1
        for s in subtasks:
            mux = muxes[s]
            if per_channel_end and not mux.output_ids:
                continue  # the subtask finished: no more emissions
            for p in (p for p in parts if owner[p] == s and p not in ended):
                for e in gens[p].on_periodic_emit(t):
                    if e.kind == "watermark":
                        assert e.watermark is not None
                        mux.emit_watermark(str(p), e.watermark, via="deferred")
                    elif e.kind == "idle":
                        mux.mark_idle(str(p), via="deferred")
                    else:
                        mux.mark_active(str(p), via="deferred")
                if per_channel_end and last[p] == k:
                    mux.unregister_output(str(p))
                    ended.add(p)
            emitted = list(mux.on_periodic_emit().emitted)
            if per_channel_end and not mux.output_ids:
                emitted.append(Emission("watermark", I64_MAX))
            for e in emitted:
                for x in outputs[s].push(e):
                    if x.kind == "watermark":
                        assert x.watermark is not None
                        valve.input_watermark(subtasks.index(s), x.watermark)
                    else:
                        valve.input_status(subtasks.index(s), x.kind)  # type: ignore[arg-type]
        now = (valve.watermark, valve.is_idle)
        if now != state:
            timeline.append((t, now[0], "idle" if now[1] else "active"))
            state = now
    return timeline


def table_of(records: list[tuple[int, int, int]]) -> pa.Table:
    return pa.table(
        {
            "part": [r[0] for r in records],
            "arr": [r[1] for r in records],
            "ts": [r[2] for r in records],
            "k": [0] * len(records),
        }
    )


def replayed(records: list[tuple[int, int, int]], strategy: Any, **kw: Any) -> Any:
    return replay(
        table_of(records),
        strategy,
        channel="part",
        arrival="arr",
        event_time="ts",
        emit_interval=INTERVAL,
        **kw,
    )


def timeline_rows(out: Any) -> list[tuple[int, int, str]]:
    t = out.timeline
    return list(
        zip(t["time"].to_pylist(), t["watermark"].to_pylist(), t["status"].to_pylist(), strict=True)
    )


@st.composite
def streams(draw: Any) -> list[tuple[int, int, int]]:
    """Records of up to 5 partitions, and a quiet partition 0 that stops, stays quiet
    past the idle timeout, and returns with event times behind the others."""
    n = draw(st.integers(2, 5))
    records, arrival = [], 0
    for _ in range(draw(st.integers(1, 30))):
        arrival += draw(st.integers(0, 250))
        p = draw(st.integers(1, n - 1))
        records.append((p, arrival, arrival + draw(st.integers(-300, 100))))
    early = draw(st.integers(1, 3))
    records += [(0, draw(st.integers(0, 200)), draw(st.integers(0, 100))) for _ in range(early)]
    back = arrival + draw(st.integers(0, 1500))
    records += [
        (0, back + j * 50, draw(st.integers(0, 300))) for j in range(draw(st.integers(0, 3)))
    ]
    return records


STRATEGIES = [
    WatermarkStrategy.for_bounded_out_of_orderness(20),
    WatermarkStrategy.for_bounded_out_of_orderness(0).with_idleness(300),
    WatermarkStrategy.for_monotonous_timestamps().with_idleness(150),
]


@settings(max_examples=150, deadline=None)
@given(
    records=streams(),
    which=st.integers(0, len(STRATEGIES) - 1),
    parallelism=st.sampled_from([None, 1, 2, 3]),
    topic=st.sampled_from([None, "events"]),
    per_channel=st.booleans(),
)
def test_replay_equals_multiplexer_and_valve_by_hand(
    records: list[tuple[int, int, int]],
    which: int,
    parallelism: int | None,
    topic: str | None,
    per_channel: bool,
) -> None:
    strategy = STRATEGIES[which]
    parts = sorted({r[0] for r in records})
    if parallelism is None:
        owner = {p: i for i, p in enumerate(parts)}
        topic = None
    else:
        owned = _core.kafka_split_owners(topic, parts, parallelism)
        if len(set(owned)) < parallelism:  # an empty subtask is refused
            with pytest.raises(InvalidParameterError) as err:
                replayed(records, strategy, source_parallelism=parallelism, topic=topic)
            assert err.value.parameter == "source_parallelism"
            return
        owner = dict(zip(parts, owned, strict=True))
    out = replayed(
        records,
        strategy,
        source_parallelism=parallelism,
        topic=topic,
        end_of_input="per_channel" if per_channel else "together",
    )
    want = by_hand(records, strategy, owner, per_channel)
    assert timeline_rows(out) == want
    # The combined watermark in force per record: the last change before its arrival.
    recs = out.records
    for arr, wm in zip(recs["arr"].to_pylist(), recs["watermark"].to_pylist(), strict=True):
        before = [w for t, w, _ in want if t < arr]
        assert wm == (before[-1] if before else I64_MIN)


def quiet_partition_returns_behind() -> list[tuple[int, int, int]]:
    """Partition 1 goes quiet (idle after 300 ms), partition 0 goes on; partition 1
    returns at 2000 ms with event time 100, far behind, and stays behind."""
    records = [(0, a, a) for a in range(0, 4001, 100)]
    back = [(1, a, 100 + (a - 2000) // 10) for a in range(2000, 4001, 100)]
    return [*records, (1, 0, 0), *back]


def test_a_quiet_partition_returning_behind_holds_its_subtask_back() -> None:
    """One subtask reading both partitions (the multiplexer has no rule that an idle
    split rejoins only once caught up) stalls at the returning partition's watermark;
    two subtasks (the valve keeps the late channel out until it catches up) go on."""
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_idleness(300)
    records = quiet_partition_returns_behind()
    default = replayed(records, strategy)
    one = replayed(records, strategy, source_parallelism=1)
    two = replayed(records, strategy, source_parallelism=2)
    assert timeline_rows(two) == timeline_rows(default)  # one partition per subtask
    assert timeline_rows(one) != timeline_rows(default)
    late_wm = dict(
        zip(one.records["arr"].to_pylist(), one.records["watermark"].to_pylist(), strict=True)
    )
    default_wm = dict(
        zip(
            default.records["arr"].to_pylist(),
            default.records["watermark"].to_pylist(),
            strict=True,
        )
    )
    # After partition 1 returned: the valve went on with partition 0, the multiplexer
    # waits for partition 1, far behind.
    assert default_wm[3000] == 2899
    assert late_wm[3000] == 1899  # before it returned: 1899, then it holds there
    assert max(one.timeline["watermark"].to_pylist()) == 1899


def test_options_are_checked_and_record_driven_strategies_refused() -> None:
    records = quiet_partition_returns_behind()
    strategy = WatermarkStrategy.for_monotonous_timestamps()
    for kw, name in (
        ({"source_parallelism": 0}, "source_parallelism"),
        ({"source_parallelism": True}, "source_parallelism"),
        ({"topic": "events"}, "topic"),
        ({"source_parallelism": 2, "topic": 5}, "topic"),
        ({"end_of_input": "each"}, "end_of_input"),
        ({"source_parallelism": 3}, "source_parallelism"),  # subtask 2 reads nothing
    ):
        with pytest.raises(InvalidParameterError) as err:
            replayed(records, strategy, **kw)
        assert err.value.parameter == name, kw
    punctuated = WatermarkStrategy.for_punctuated("ts")
    # Refused from the strategy, before any data: an empty table too, and string
    # channels (which source_parallelism refuses next), as the Spark functions do.
    as_strings = table_of(records).set_column(0, "part", pa.array(["a"] * len(records)))
    for kw, name in (
        ({"source_parallelism": 1}, "source_parallelism"),
        ({"end_of_input": "per_channel"}, "end_of_input"),
    ):
        for table in (table_of(records), table_of(records).slice(0, 0), as_strings):
            with pytest.raises(InvalidParameterError) as err:
                replay(table, punctuated, channel="part", arrival="arr", event_time="ts", **kw)
            assert err.value.parameter == name
    with pytest.raises(SchemaError, match=r"`part`: source_parallelism .* got string"):
        replay(
            as_strings,
            strategy,
            channel="part",
            arrival="arr",
            event_time="ts",
            source_parallelism=1,
        )


def windows(out: Any) -> list[tuple[int, int, int]]:
    return sorted((r["window_start"], r["count"], r["watermark"]) for r in out.results.to_pylist())


def test_per_channel_end_fires_windows_at_an_intermediate_minimum() -> None:
    """Partition 0 ends at 250 ms (ts 50), partition 1 goes on to 1000 ms at ts 100 then
    2000. Together, the watermark is held at partition 0's 49 until the end; per
    channel, partition 0's MAX at grid time 300 lets partition 1's 99 through, and the
    window [0, 100) fires then, before the end."""
    records = [(0, 100, 10), (0, 250, 50), (1, 200, 20), (1, 1000, 100), (1, 1500, 2000)]
    strategy = WatermarkStrategy.for_monotonous_timestamps()
    kw = {"window": TumblingEventTimeWindows.of(100), "key": "k"}
    together = replayed(records, strategy, **kw)
    apart = replayed(records, strategy, end_of_input="per_channel", **kw)
    assert timeline_rows(together) == [
        (200, 9, "active"),
        (300, 19, "active"),
        (1000, 49, "active"),
    ]
    assert timeline_rows(apart) == [
        (200, 9, "active"),
        (300, 19, "active"),  # partition 0 ended: MAX, the minimum is partition 1's
        (1000, 99, "active"),
        (1500, I64_MAX, "active"),  # partition 1 ended too
    ]
    assert windows(together) == [(0, 3, I64_MAX), (100, 1, I64_MAX), (2000, 1, I64_MAX)]
    assert windows(apart) == [(0, 3, 99), (100, 1, I64_MAX), (2000, 1, I64_MAX)]


def test_a_split_ending_while_idle_is_marked_active_in_either_topology() -> None:
    """One split per subtask is the same Flink job as the default topology: a split
    that ends while idle reports ``active`` before its ``MAX`` in both (the subtasks'
    path left the ``active`` out, so the report drew it idle to the end)."""
    from floodmark.timeline import TimelineBuilder

    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_idleness(100)
    streams = []
    for kw in ({}, {"subtasks": [0, 1]}):
        b = TimelineBuilder(
            strategy, 2, emit_interval=100, keep_emissions=True, end_buckets=[3, 5], **kw
        )
        b.push([0, 1, 1], [0, 0, 500], [5, 5, 7])
        b.finish()
        em = pa.Table.from_batches([b.take_emissions()])
        streams.append([r for r in em.to_pylist() if r["channel"] == 0])
    assert [(r["time"], r["kind"]) for r in streams[0]] == [
        (0, "watermark"),
        (300, "idle"),
        (300, "active"),
        (300, "watermark"),
    ]
    assert streams[1] == streams[0]


def watermark_at(timeline: list[tuple[int, int, str]], t: int) -> int:
    before = [w for time, w, _ in timeline if time <= t]
    return before[-1] if before else I64_MIN


@settings(max_examples=100, deadline=None)
@given(records=streams(), which=st.integers(0, len(STRATEGIES) - 1))
def test_per_channel_never_fires_later_and_accounts_for_every_record(
    records: list[tuple[int, int, int]], which: int
) -> None:
    strategy = STRATEGIES[which]
    kw = {"window": TumblingEventTimeWindows.of(200), "key": "k"}
    together = replayed(records, strategy, **kw)
    apart = replayed(records, strategy, end_of_input="per_channel", **kw)
    wm_t = together.records["watermark"].to_pylist()
    wm_a = apart.records["watermark"].to_pylist()
    assert all(a >= t for a, t in zip(wm_a, wm_t, strict=True))
    # Every record once: in a fired window, the late output or dropped.
    for out in (together, apart):
        counted = sum(r["count"] for r in out.results.to_pylist() if r["timing"] != "late")
        late = out.late.num_rows
        dropped = out.dropped.num_rows
        assert counted + late + dropped == len(records)
    # At every time the combined watermark is at least as high: no window fires later.
    tl_t, tl_a = timeline_rows(together), timeline_rows(apart)
    for t in {time for time, _, _ in tl_t + tl_a}:
        assert watermark_at(tl_a, t) >= watermark_at(tl_t, t)


def test_builder_snapshot_keeps_the_topology_and_refuses_another() -> None:
    from floodmark.exceptions import SnapshotError
    from floodmark.timeline import TimelineBuilder

    s = WatermarkStrategy.for_bounded_out_of_orderness(0).with_idleness(250)

    def make(**kw: Any) -> TimelineBuilder:
        return TimelineBuilder(s, 3, emit_interval=100, **kw)

    topo = {"subtasks": [0, 1, 0], "end_buckets": [5, 5, 3]}
    a = make(**topo)
    a.push([0, 1, 2], [50, 60, 70], [10, 20, 30])
    first = a.take_timeline()
    snap = a.snapshot()
    b = make(**topo)
    b.restore(snap)
    assert b.snapshot() == snap
    for other in (make(), make(subtasks=[0, 1, 1]), make(subtasks=[0, 1, 0])):
        with pytest.raises(SnapshotError):
            other.restore(snap)
    for x in (a, b):
        x.push([0, 1], [450, 460], [100, 200])
        x.finish()
    tail = a.take_timeline()
    assert tail.to_pylist() == b.take_timeline().to_pylist()
    assert (first.num_rows + tail.num_rows) > 0
    assert a.watermark == I64_MAX  # every channel ended
    # min_channel names a channel (partition index), not a subtask.
    assert a.channel_status(2) == (I64_MAX, False)
    with pytest.raises(InvalidInputError) as err:  # a row after its channel's end
        c = make(**topo)
        c.push([2], [350], [1])
    assert err.value.column == "arrival"
