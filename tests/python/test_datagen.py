"""floodmark.datagen: the stream it generates has the shape its spec names (a lagging
partition, a quiet one), the same for the same seed, and a spec it cannot honour is
refused naming the parameter instead of giving another stream."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

from floodmark.datagen import EPOCH_MS, StreamSpec, generate
from floodmark.exceptions import InvalidParameterError


def _columns(spec: StreamSpec) -> dict[str, np.ndarray]:
    t = generate(spec)
    return {name: t.column(name).to_numpy() for name in ("partition", "event_time", "arrival")}


def test_the_lagging_and_the_quiet_partition_are_there() -> None:
    spec = StreamSpec(
        rows=20_000,
        partitions=4,
        duration_ms=60_000,
        lagging_partition=1,
        lag_ms=30_000,
        quiet_partition=2,
        quiet_from_ms=20_000,
        quiet_for_ms=10_000,
        quiet_is_silent=True,
    )
    c = _columns(spec)
    delay = c["arrival"] - c["event_time"]
    lagging, others = delay[c["partition"] == 1], delay[c["partition"] != 1]
    assert lagging.min() >= 30_000 and others.max() < 30_000 + spec.very_late_ms
    assert np.median(lagging) - np.median(others) == pytest.approx(30_000, abs=500)
    quiet = c["arrival"][c["partition"] == 2] - EPOCH_MS
    assert not ((quiet >= 20_000) & (quiet < 30_000)).any()
    assert ((quiet >= 30_000) & (quiet < 31_500)).sum() > 100  # the backlog after the spell
    assert np.all(np.diff(c["arrival"]) >= 0)  # ordered by arrival


def test_the_same_seed_gives_the_same_stream() -> None:
    spec = StreamSpec(rows=1_000)
    assert generate(spec).equals(generate(spec))
    assert not generate(spec).equals(generate(StreamSpec(rows=1_000, seed=8)))


@pytest.mark.parametrize(
    ("changes", "parameter"),
    [
        ({"partitions": 4}, "quiet_partition"),  # the default quiet partition is 7
        ({"partitions": 4, "quiet_partition": None, "lagging_partition": 4}, "lagging_partition"),
        ({"quiet_partition": -1}, "quiet_partition"),
        ({"rows": -1}, "rows"),
        ({"partitions": 0}, "partitions"),
        ({"keys": 0}, "keys"),
        ({"duration_ms": 0}, "duration_ms"),
        ({"disorder_ms": -3}, "disorder_ms"),
        ({"lag_ms": -30_000}, "lag_ms"),
        ({"quiet_for_ms": -5}, "quiet_for_ms"),
        ({"very_late_fraction": 1.5}, "very_late_fraction"),
        ({"very_late_fraction": -0.1}, "very_late_fraction"),
        ({"very_late_ms": -1}, "very_late_ms"),
        ({"skew": 0}, "skew"),
        ({"timestamp_granularity_ms": 0}, "timestamp_granularity_ms"),
        ({"null_event_times": -1}, "null_event_times"),
        ({"rows": 1.5}, "rows"),
        ({"keys": True}, "keys"),
        # Each of these was a raw numpy or Python error, or accepted:
        ({"seed": -1}, "seed"),
        ({"seed": "x"}, "seed"),
        ({"very_late_fraction": "0.1"}, "very_late_fraction"),
        ({"skew": "2"}, "skew"),
        ({"skew": float("inf")}, "skew"),
        ({"skew": float("nan")}, "skew"),
        ({"quiet_from_ms": "5"}, "quiet_from_ms"),
        ({"quiet_is_silent": "yes"}, "quiet_is_silent"),
        ({"lagging_partition": True}, "lagging_partition"),  # was partition 1
        ({"lagging_partition": 1.0}, "lagging_partition"),
        ({"lag_ms": 2**63 - 2**40}, "lag_ms"),  # arrivals wrapped around int64
        ({"very_late_ms": 2**62, "lag_ms": 2**62}, "lag_ms"),
        ({"rows": 2**63}, "rows"),  # a raw OverflowError from numpy
        ({"keys": 2**64}, "keys"),  # numpy's "high is out of bounds for int64"
        ({"partitions": 10**30}, "partitions"),
    ],
)
def test_a_spec_it_cannot_honour_is_refused_naming_the_parameter(
    changes: dict[str, Any], parameter: str
) -> None:
    with pytest.raises(InvalidParameterError) as e:
        StreamSpec(**changes)
    assert e.value.parameter == parameter


def test_few_partitions_without_a_lagging_or_quiet_one() -> None:
    spec = StreamSpec(rows=500, partitions=2, lagging_partition=None, quiet_partition=None)
    assert set(generate(spec).column("partition").to_pylist()) == {0, 1}


def test_numpy_numbers_are_taken_and_any_skew_generates() -> None:
    """numpy integers and floats are numbers like Python's (``rows=np.int64(10)`` was
    refused); a skew below 1 over many partitions overflowed its weights (NaN
    probabilities) and failed in ``generate``."""
    spec = StreamSpec(
        rows=np.int64(10), partitions=np.int32(8), skew=np.float64(1.5), seed=np.uint8(3)
    )
    assert generate(spec).num_rows == 10 and type(spec.rows) is int
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = generate(StreamSpec(rows=2_000, partitions=200, skew=0.01))
    counts = np.bincount(table.column("partition").to_numpy(), minlength=200)
    assert counts[-1] == counts.max() and counts[0] == 0  # grows toward the last partition
    again = generate(StreamSpec(rows=2_000, partitions=4, skew=2.0, quiet_partition=None))
    again = again.column("partition")
    assert np.bincount(again.to_numpy()).tolist() == sorted(
        np.bincount(again.to_numpy()).tolist(), reverse=True
    )
