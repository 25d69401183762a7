"""``TimelineBuilder.start_at``: a builder over some of an input's channels, started at
the input's first bucket, gives them the channel watermarks of the whole input's
builder (what ``assign_watermarks``' per-channel pass relies on); misuse is refused.
The Python name of the generators called at every grid time agrees with the core."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from floodmark import WatermarkStrategy
from floodmark.exceptions import IllegalStateError, InvalidInputError, InvalidParameterError
from floodmark.timeline import EVERY_GRID_KINDS, PERIODIC_KINDS, TimelineBuilder

LAG = WatermarkStrategy.for_processing_time_lag(timedelta(milliseconds=50))


def test_a_channel_alone_started_at_the_first_bucket_has_its_watermarks_in_the_whole() -> None:
    # Channel 0 from 100 ms, channel 1 from 1,000 ms: a processing-time lag is
    # emitted at every grid time, records or not, so channel 1's first record finds
    # the emission of the grid time before it, in the whole input's builder.
    channel, arrival, ts = [0, 0, 1, 0, 1], [100, 700, 1_000, 1_300, 1_500], [1, 2, 3, 4, 5]
    whole = TimelineBuilder(LAG, 2, emit_interval=200)
    want = whole.push(channel, arrival, ts).channel_watermark.to_pylist()
    assert want[2] == 800 - 50

    alone = TimelineBuilder(LAG, 2, emit_interval=200)
    alone.start_at(alone.bucket_of(100))
    got = alone.push([1, 1], [1_000, 1_500], [3, 5]).channel_watermark.to_pylist()
    assert got == [want[2], want[4]]
    # Started at its own first record instead, the channel has no watermark there.
    late = TimelineBuilder(LAG, 2, emit_interval=200)
    assert late.push([1], [1_000], [3]).channel_watermark.to_pylist() == [-(2**63)]


def test_start_at_is_refused_once_started_or_without_a_grid() -> None:
    b = TimelineBuilder(LAG, 1, emit_interval=200)
    b.push([0], [100], [1])
    with pytest.raises(IllegalStateError, match="already started"):
        b.start_at(0)
    with pytest.raises(IllegalStateError, match="no grid"):
        TimelineBuilder.for_emissions(1).start_at(0)
    with pytest.raises(InvalidParameterError) as err:
        TimelineBuilder(LAG, 1, emit_interval=200).start_at(2**62)
    assert err.value.parameter == "bucket"  # what the caller gave (not an arrival column)


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, "7", 1.5, True, None])
@pytest.mark.parametrize(
    ("method", "name"), [("start_at", "bucket"), ("advance_to", "bucket"), ("bucket_of", "arrival")]
)
def test_grid_arguments_that_are_not_int64s_are_refused_naming_them(
    method: str, name: str, value: object
) -> None:
    b = TimelineBuilder(LAG, 1, emit_interval=200)
    with pytest.raises(InvalidParameterError) as err:
        getattr(b, method)(value)
    assert err.value.parameter == name
    assert b.ran_through is None  # nothing changed


@pytest.mark.parametrize(
    ("method", "bucket"),
    [("start_at", 2**63 - 1), ("start_at", -(2**63)), ("advance_to", 2**63 - 1)],
)
def test_a_bucket_whose_grid_time_leaves_the_range_is_named(method: str, bucket: int) -> None:
    """Named as the parameter given, not as an ``arrival`` column the caller never
    passed; nothing changes. (An ``advance_to`` behind the grid does nothing.)"""
    b = TimelineBuilder(LAG, 1, emit_interval=200)
    if method == "advance_to":
        b.push([0], [5], [5])
    before = b.ran_through
    with pytest.raises(InvalidParameterError) as err:
        getattr(b, method)(bucket)
    assert err.value.parameter == "bucket"
    assert b.ran_through == before


@pytest.mark.parametrize(
    ("method", "name", "value"),
    [
        (method, name, value)
        for method, name, highest in (("insert_channel", "at", 3), ("channel_status", "channel", 2))
        for value in (-1, highest + 1, 2**63 - 1, 2**63, -(2**63) - 1, "1", 1.0, True, None)
    ],
)
def test_channel_indexes_out_of_range_or_not_ints_are_refused_naming_them(
    method: str, name: str, value: object
) -> None:
    """``insert_channel(at)`` takes ``0..=num_channels``, ``channel_status(channel)``
    ``0..num_channels``: anything else is an ``InvalidParameterError`` naming the
    argument (a negative index or a str was a bare ``OverflowError``/``TypeError``), and
    the valve keeps its channels."""
    b = TimelineBuilder(LAG, 3, emit_interval=200)
    with pytest.raises(InvalidParameterError) as err:
        getattr(b, method)(value)
    assert err.value.parameter == name
    assert b.num_channels == 3
    b.insert_channel(3)
    assert b.channel_status(3) == (-(2**63), False)


@pytest.mark.parametrize(
    "at", [[1, 1], [2, 1], [0, 5], [-1], [0, "1"], [0, 1.0], [True], [None], [2**63], 3, "01"]
)
def test_channels_inserted_together_need_ascending_indexes_within_the_valve(at: Any) -> None:
    """``insert_channels(at)`` takes indexes among the channels after the insertion,
    strictly ascending: anything else names ``at``, and no channel is added."""
    b = TimelineBuilder(LAG, 3, emit_interval=200)
    with pytest.raises(InvalidParameterError) as err:
        b.insert_channels(at)
    assert err.value.parameter == "at"
    assert b.num_channels == 3


def test_channels_inserted_together_equal_channels_inserted_one_by_one() -> None:
    """A live batch adds the partitions it finds all at once (one pass over the valve,
    however many join): the same builder as adding them one at a time."""
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(5).with_idleness(40)
    one = TimelineBuilder(strategy, 2, emit_interval=10, keep_emissions=True)
    one.push([0, 1, 0], [5, 15, 35], [100, 120, 130])
    one.advance_to(3)
    one.take_timeline()  # a snapshot holds no outputs not yet taken
    one.take_emissions()
    many = TimelineBuilder(strategy, 2, emit_interval=10, keep_emissions=True)
    many.restore(one.snapshot())
    for at in (0, 2, 3):
        one.insert_channel(at)
    many.insert_channels([0, 2, 3])
    assert many.snapshot() == one.snapshot()
    later = ([2, 0, 3, 4, 1], [45, 55, 60, 85, 115], [140, 90, 150, 160, 170])
    got, want = many.push(*later), one.push(*later)
    assert got.watermark.to_pylist() == want.watermark.to_pylist()
    assert got.channel_watermark.to_pylist() == want.channel_watermark.to_pylist()
    many.finish()
    one.finish()
    assert many.take_timeline().to_pylist() == one.take_timeline().to_pylist()
    assert many.take_emissions().to_pylist() == one.take_emissions().to_pylist()
    assert many.snapshot() == one.snapshot()


@pytest.mark.parametrize("kind", PERIODIC_KINDS)
def test_every_grid_kinds_are_the_generators_the_core_calls_at_every_grid_time(
    kind: str,
) -> None:
    """``EVERY_GRID_KINDS`` (Python) names exactly the generators whose grid calls the
    core bounds (channels x grid points): 2,000 channels over 2^18 grid times are
    refused for those only."""
    strategy = {
        "bounded_out_of_orderness": WatermarkStrategy.for_bounded_out_of_orderness(5),
        "processing_time_lag": LAG,
        "no_watermarks": WatermarkStrategy.no_watermarks(),
    }[kind]
    b = TimelineBuilder(strategy, 2_000, emit_interval=1)
    b.push([0], [1], [1])
    if kind in EVERY_GRID_KINDS:
        with pytest.raises(InvalidParameterError) as err:
            b.push([1], [2**18], [2])
        assert err.value.parameter == "emit_interval"
    else:
        b.push([1], [2**18], [2])


@pytest.mark.parametrize(
    ("arguments", "parameter"),
    [
        ({"subtasks": [0, -1]}, "subtasks"),
        ({"subtasks": [0, 1.7]}, "subtasks"),
        ({"subtasks": [0, 1], "source_parallelism": -1}, "source_parallelism"),
        ({"subtasks": [0, 1], "source_parallelism": 0}, "source_parallelism"),
        ({"subtasks": [0, 1], "source_parallelism": 3}, "source_parallelism"),
        ({"end_buckets": [2**64, 1]}, "end_buckets"),
        ({"end_buckets": [1.5, 2.9]}, "end_buckets"),
    ],
)
def test_topology_arguments_are_checked_naming_them(
    arguments: dict[str, Any], parameter: str
) -> None:
    """Negative or too large indexes were a bare OverflowError, floats were truncated
    and ``source_parallelism=0`` read as not given."""
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(timedelta(seconds=1))
    with pytest.raises(InvalidParameterError) as err:
        TimelineBuilder(strategy, 2, **arguments)
    assert err.value.parameter == parameter
    assert "  " not in str(err.value)  # one line, no runs of blanks


def test_emissions_pushed_are_checked_as_combine_checks_them() -> None:
    """A missing column was a raw KeyError, a DataFrame an AttributeError."""
    import pandas as pd
    import pyarrow as pa

    builder = TimelineBuilder.for_emissions(1)
    no_kind = pa.table({"channel": [0], "time": [1], "watermark": [5]})
    with pytest.raises(InvalidInputError) as err:
        builder.push_emissions(no_kind)
    assert err.value.column == "kind"
    frame = pd.DataFrame({"channel": [0], "time": [1], "kind": ["watermark"], "watermark": [5]})
    with pytest.raises(InvalidParameterError) as bad:
        builder.push_emissions(frame)  # type: ignore[arg-type]
    assert bad.value.parameter == "emissions"
    builder.push_emissions(pa.Table.from_pandas(frame, preserve_index=False))
