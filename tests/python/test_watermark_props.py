"""Hypothesis properties of the watermark API: driver output never decreases, the
valve's invariants hold, and the combined timeline never decreases."""

from __future__ import annotations

from itertools import pairwise

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark import Valve, WatermarkStrategy, combine, drive

strategies = st.sampled_from(
    [
        WatermarkStrategy.for_bounded_out_of_orderness(30),
        WatermarkStrategy.for_monotonous_timestamps().with_idleness(250),
        WatermarkStrategy.for_processing_time_lag(40).with_idleness(500),
        WatermarkStrategy.for_bounded_out_of_orderness(0).with_idleness(1),
    ]
)
records = st.lists(st.tuples(st.integers(-500, 5000), st.integers(0, 300)), max_size=80)


def run(strategy: WatermarkStrategy, recs: list[tuple[int, int]], interval: int) -> pa.RecordBatch:
    arrival, a = [], 0
    for _, d in recs:
        a += d
        arrival.append(a)
    ts = [t for t, _ in recs]
    r = drive(strategy, ts, arrival, emit_interval=interval, start=0, until=a + 1000)
    wms = r.record_watermark.to_pylist()
    assert wms == sorted(wms), "record watermarks decreased"
    return r.emissions


@settings(max_examples=150, deadline=None)
@given(strategies, records, st.integers(1, 200))
def test_driver_output_never_decreases(
    strategy: WatermarkStrategy, recs: list[tuple[int, int]], interval: int
) -> None:
    em = run(strategy, recs, interval)
    wms = [w for w in em.column("watermark").to_pylist() if w is not None]
    assert all(a < b for a, b in pairwise(wms))
    times = em.column("time").to_pylist()
    assert times == sorted(times)
    kinds = em.column("kind").to_pylist()
    assert all(not (a == b == "idle") for a, b in pairwise(kinds))


valve_steps = st.lists(
    st.one_of(
        st.tuples(st.integers(0, 3), st.integers(-10, 100)),
        st.tuples(st.integers(0, 3), st.sampled_from(["idle", "active"])),
    ),
    max_size=80,
)


@settings(max_examples=200, deadline=None)
@given(valve_steps)
def test_valve_invariants(steps: list[tuple[int, int | str]]) -> None:
    v = Valve(4)
    last = -(2**63)
    status = "active"
    for ch, x in steps:
        out = v.input_status(ch, x) if isinstance(x, str) else v.input_watermark(ch, x)
        for e in out:
            if e.kind == "watermark":
                assert e.watermark is not None and e.watermark > last
                last = e.watermark
            else:
                assert e.kind != status, "status emitted without a change"
                status = e.kind
        assert v.watermark == last
        assert v.is_idle == (status == "idle")


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(strategies, records), min_size=1, max_size=4), st.integers(1, 200))
def test_combine_timeline_never_decreases(
    channels: list[tuple[WatermarkStrategy, list[tuple[int, int]]]], interval: int
) -> None:
    parts = []
    for c, (strategy, recs) in enumerate(channels):
        em = run(strategy, recs, interval)
        parts.append(
            pa.RecordBatch.from_arrays(
                [pa.array([c] * em.num_rows, pa.int64()), *em.columns],
                names=["channel", *em.schema.names],
            )
        )
    batch = pa.Table.from_batches(parts).combine_chunks().to_batches()
    merged = batch[0] if batch else parts[0]
    t = combine(merged, num_channels=len(channels))
    wms = t.column("watermark").to_pylist()
    assert wms == sorted(wms)
    times = t.column("time").to_pylist()
    assert times == sorted(times)
