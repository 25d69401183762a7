"""Guards for rules no other test pinned down: each test names the Flink rule it holds
the code to; a plausible slip there would otherwise pass the suite."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np
import pyarrow as pa

from floodmark import TumblingEventTimeWindows, WatermarkStrategy, drive
from floodmark.replay import replay
from floodmark.report.partition_views import combined_at
from floodmark.time import I64_MAX, I64_MIN, to_ticks, whole_ticks
from floodmark.timeline import EMISSION_KINDS, channel_index, in_emission_order


def replay_bounded(table: pa.Table, **units: str) -> Any:
    """``replay`` of ``table`` (columns ``ts``, ``at``, ``ch``) with a bound of 10
    ticks, or of 10 ms when given units."""
    bound: Any = timedelta(milliseconds=10) if units else 10
    return replay(
        table,
        WatermarkStrategy.for_bounded_out_of_orderness(bound),
        channel="ch",
        arrival="at",
        event_time="ts",
        **units,
    )


def test_to_ticks_truncates_toward_zero() -> None:
    """Flink converts a ``Duration`` with ``toMillis()``, which truncates toward zero:
    -1.5 ms is -1 ms, not -2 (a floor). The window offset shows it: one-second tumbling
    windows shifted by -1.5 ms start at ...999."""
    assert to_ticks(timedelta(microseconds=-1500), "ms", "offset") == -1
    assert to_ticks(timedelta(microseconds=1500), "ms", "offset") == 1
    windows = TumblingEventTimeWindows.of(
        timedelta(seconds=1), offset=timedelta(microseconds=-1500)
    )
    assert windows.assign_windows(7350, "ms") == [(6999, 7999)]


def test_a_pandas_timedelta_keeps_its_nanoseconds() -> None:
    """``pandas.Timedelta`` is a ``timedelta`` whose nanoseconds (0-999) sit in a
    component of their own: counted in ``ns`` ticks (they were dropped: a 1500 ns window
    was 1000 ns), truncated toward zero in coarser units, as a ``timedelta`` is."""
    import pandas as pd

    for text in ("1500ns", "-1500ns", "-1ns", "2s", "3d 7ns"):
        value = pd.Timedelta(text)
        want = {u: int(value.value / 10**e) for u, e in (("ns", 0), ("us", 3), ("ms", 6), ("s", 9))}
        assert {u: to_ticks(value, u, "size") for u in want} == want, text
        assert whole_ticks(value, "ns") and whole_ticks(value, "us") == (value.value % 1000 == 0)
    windows = TumblingEventTimeWindows.of(pd.Timedelta("1500ns"))
    assert windows.assign_windows(1200, "ns") == [(0, 1500)]
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(pd.Timedelta("900ns"))
    assert drive(strategy, [10_000], [0], unit="ns").emissions["watermark"].to_pylist() == [9099]


def test_to_ticks_saturates_to_the_long_range() -> None:
    """``to_ticks`` saturates a duration to the ``i64`` range (its documented rule)
    rather than overflowing: a 200000-day bound in ns is ``Long.MAX_VALUE``, and the
    bounded generator's ``maxTimestamp - outOfOrderness - 1`` is then plain ``long``
    arithmetic, as in Flink."""
    assert to_ticks(timedelta(days=200_000), "ns", "bound") == I64_MAX
    assert to_ticks(timedelta(days=-200_000), "ns", "bound") == I64_MIN
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(days=200_000))
    out = drive(strategy, [10**18], [0], unit="ns", until=0)
    assert out.emissions.to_pylist() == [
        {"time": 0, "kind": "watermark", "watermark": 10**18 - I64_MAX - 1}
    ]


def test_a_bound_counts_in_event_time_ticks() -> None:
    """The out-of-orderness bound is subtracted from event timestamps (Flink's
    ``BoundedOutOfOrdernessWatermarks``: ``maxTimestamp - outOfOrderness - 1``), so it
    is converted in the event-time unit, whatever the arrival unit: 10 ms off event
    times in ms, arrivals in us."""
    table = pa.table({"ts": [100, 200], "at": [0, 300_000], "ch": [0, 0]})
    out = replay_bounded(table, event_time_unit="ms", arrival_unit="us")
    # At the emit time 200 ms (200_000 us) the largest timestamp seen is 100 ms.
    assert out.records["channel_watermark"].to_pylist() == [I64_MIN, 89]
    assert out.records["watermark"].to_pylist() == [I64_MIN, 89]


def test_a_record_at_the_watermark_in_force_is_late() -> None:
    """A watermark ``w`` declares that no more records with timestamp ``<= w`` come,
    so Flink counts a record at exactly ``w`` as late (with no allowed lateness); one
    a tick above is not."""
    table = pa.table({"ts": [100, 89, 90], "at": [0, 300, 300], "ch": [0, 0, 0]})
    out = replay_bounded(table)
    assert out.records["watermark"].to_pylist() == [I64_MIN, 89, 89]
    assert out.records["is_late"].to_pylist() == [False, True, False]


def test_channels_at_one_time_reach_the_valve_in_sorted_order() -> None:
    """The documented tie rule: the valve's channels are the distinct channel values
    sorted, so between channels at the same watermark the lowest value holds the
    minimum (the valve's ``min_channel`` picks the lowest index on ties), whatever the
    order the values first appear in."""
    channels, index = channel_index(pa.array(["b", "a", "b", "c"]))
    assert channels.to_pylist() == ["a", "b", "c"]
    assert index.tolist() == [1, 0, 1, 2]
    table = pa.table({"ts": [100, 100], "at": [0, 10], "ch": ["b", "a"]})
    out = replay_bounded(table)
    assert out.timeline.to_pylist() == [
        {"time": 200, "watermark": 89, "status": "active", "min_channel": "a"}
    ]


def test_a_punctuated_watermark_is_in_force_only_after_its_arrival() -> None:
    """A record reads the combined watermark in force strictly before it arrives: a
    punctuated watermark emitted by a record (Flink's ``onEvent``, after the record is
    emitted) is not yet in force for that record, nor for another one arriving at the
    same time; it is for a later arrival."""
    table = pa.table(
        {"ts": [10, 20, 30], "at": [100, 100, 300], "ch": [0, 0, 0], "m": [50, None, None]}
    )
    out = replay(
        table, WatermarkStrategy.for_punctuated("m"), channel="ch", arrival="at", event_time="ts"
    )
    assert out.records["watermark"].to_pylist() == [I64_MIN, I64_MIN, 50]
    assert out.records["channel_watermark"].to_pylist() == [I64_MIN, I64_MIN, 50]


def test_combined_at_reads_a_timeline_row_at_a_bin_end() -> None:
    """The combined watermark at a bin end is the timeline's last row at or before it:
    a watermark emitted exactly at the end is in force there (bins are ``(a, b]``)."""
    timeline = pa.table({"time": [10, 100], "watermark": [20, 50]})
    got = combined_at(timeline, np.array([9, 10, 99, 100, 101]))
    assert got.tolist() == [I64_MIN, 20, 20, 50, 50]


def test_in_emission_order_puts_active_before_the_watermark_it_comes_with() -> None:
    """Flink marks an idle output active before it forwards the watermark that wakes it
    (``WatermarkToDataOutput.emitWatermark`` emits ``ACTIVE`` first), so rows at the
    same time and channel sort active, then watermark, then idle; read back in any
    order, the emissions come back in the order they were made."""
    assert EMISSION_KINDS == ("active", "watermark", "idle")
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_idleness(200)
    res = drive(strategy, [10, 500], [0, 900], emit_interval=100, until=1000)
    made = pa.Table.from_batches([res.emissions])
    made = made.add_column(0, "channel", pa.array([0] * made.num_rows))
    rows = [(r["time"], r["kind"], r["watermark"]) for r in made.to_pylist()]
    assert rows == [
        (0, "watermark", 9),
        (400, "idle", None),
        (900, "active", None),
        (900, "watermark", 499),
    ]
    shuffled = made.take(pa.array(list(range(made.num_rows))[::-1]))
    assert in_emission_order(shuffled).to_pylist() == made.to_pylist()
