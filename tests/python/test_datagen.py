"""floodmark.datagen: the stream it generates has the shape its spec names (a lagging
partition, a quiet one), the same for the same seed, and a spec it cannot honour is
refused naming the parameter instead of giving another stream."""

from __future__ import annotations

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
