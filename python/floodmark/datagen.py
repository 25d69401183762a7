"""Realistic Kafka-like event streams for demos, tests and benchmarks.

A stream has ``partitions`` channels. Each record has an event time, the time it reached
the broker (``arrival``, the processing-time clock), its partition, a key and a value.
Records arrive with random delay within ``disorder`` of their event time; on top of
that one partition can lag (its records arrive ``lag`` later), one can go quiet for a
while and resume (the records of the quiet spell arrive after it, as a backlog; very
late ones can still come during the spell unless ``quiet_is_silent``), a small
fraction of records arrive very late, and event times can be coarse (so duplicates
occur). All times are integer milliseconds since the epoch.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from floodmark.exceptions import InvalidParameterError
from floodmark.time import I64_MAX, as_int
from floodmark.vocabulary import flag

EPOCH_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


@dataclass(frozen=True)
class StreamSpec:
    """Shape of a generated stream (times in milliseconds)."""

    rows: int = 100_000
    partitions: int = 16
    keys: int = 1_000
    duration_ms: int = 600_000
    disorder_ms: int = 2_000
    lagging_partition: int | None = 3
    lag_ms: int = 30_000
    quiet_partition: int | None = 7
    quiet_from_ms: int = 200_000
    quiet_for_ms: int = 120_000
    quiet_is_silent: bool = False  # True: no record at all arrives while quiet
    very_late_fraction: float = 0.002
    very_late_ms: int = 60_000
    skew: float = 1.0  # > 1: partition sizes decay geometrically by this factor
    timestamp_granularity_ms: int = 1
    null_event_times: int = 0
    seed: int = 7

    def __post_init__(self) -> None:
        least = {
            "rows": 0,
            "partitions": 1,
            "keys": 1,
            "duration_ms": 1,
            "disorder_ms": 0,
            "lag_ms": 0,
            "quiet_from_ms": 0,
            "quiet_for_ms": 0,
            "very_late_ms": 0,
            "timestamp_granularity_ms": 1,
            "null_event_times": 0,
            "seed": 0,
        }
        for name, low in least.items():
            value = as_int(getattr(self, name))
            if value is None or value < low or (value > I64_MAX and name != "seed"):
                raise InvalidParameterError(
                    name,
                    f"expected an int from {low} to {I64_MAX:,}, got {getattr(self, name)!r}",
                )
            object.__setattr__(self, name, value)  # numpy ints as ints
        for name in ("lagging_partition", "quiet_partition"):
            given = getattr(self, name)
            value = None if given is None else as_int(given)
            if given is not None and (value is None or not 0 <= value < self.partitions):
                raise InvalidParameterError(
                    name,
                    f"{given!r} is not one of the {self.partitions} partitions (0 to "
                    f"{self.partitions - 1}); give None for none",
                )
            object.__setattr__(self, name, value)
        flag(self.quiet_is_silent, "quiet_is_silent")
        for name, bottom, top, expected in (
            ("very_late_fraction", 0.0, 1.0, "0 to 1"),
            ("skew", 0.0, float("inf"), "a finite number more than 0"),
        ):
            value = getattr(self, name)
            real = isinstance(value, numbers.Real) and not isinstance(value, bool)
            number = float(value) if real else float("nan")
            closed = name == "very_late_fraction"
            inside = bottom <= number <= top if closed else bottom < number < top
            if not inside:  # (NaN is inside nothing)
                raise InvalidParameterError(name, f"expected {expected}, got {value!r}")
            object.__setattr__(self, name, number)
        spans = ("duration_ms", "disorder_ms", "lag_ms", "quiet_from_ms", "quiet_for_ms")
        reach = EPOCH_MS + sum(getattr(self, n) for n in (*spans, "very_late_ms"))
        if reach > I64_MAX:
            widest = max((*spans, "very_late_ms"), key=lambda n: getattr(self, n))
            raise InvalidParameterError(
                widest,
                f"the stream's times would reach {reach:,} ms from the epoch, past the "
                f"int64 range ({I64_MAX:,})",
            )


def _partition_weights(skew: float, partitions: int) -> np.ndarray:
    """Each partition's share of the records: decaying by ``skew`` from partition 0
    (growing for ``skew < 1``), computed so that no power overflows."""
    k = np.arange(partitions, dtype=np.float64)
    weights = np.power(skew, -k) if skew >= 1.0 else np.power(1.0 / skew, k - (partitions - 1))
    return np.asarray(weights / weights.sum(), np.float64)


def generate(spec: StreamSpec) -> pa.Table:
    """A table with columns ``id``, ``partition``, ``event_time``, ``arrival``, ``key``,
    ``value`` (int64 ms for times), ordered by arrival."""
    rng = np.random.default_rng(spec.seed)
    n = spec.rows
    weights = _partition_weights(spec.skew, spec.partitions)
    part = rng.choice(spec.partitions, size=n, p=weights).astype(np.int64)
    event = rng.integers(0, spec.duration_ms, size=n, dtype=np.int64)
    if spec.timestamp_granularity_ms > 1:
        event -= event % spec.timestamp_granularity_ms
    delay = rng.integers(0, spec.disorder_ms + 1, size=n, dtype=np.int64)
    arrival = event + delay
    if spec.lagging_partition is not None:
        arrival[part == spec.lagging_partition] += spec.lag_ms
    late = rng.random(n) < spec.very_late_fraction
    if spec.quiet_is_silent:
        arrival[late] += spec.very_late_ms
    if spec.quiet_partition is not None:
        q = part == spec.quiet_partition
        gap = (
            q & (arrival >= spec.quiet_from_ms) & (arrival < spec.quiet_from_ms + spec.quiet_for_ms)
        )
        arrival[gap] = (
            spec.quiet_from_ms + spec.quiet_for_ms + (arrival[gap] - spec.quiet_from_ms) // 8
        )
    if not spec.quiet_is_silent:
        arrival[late] += spec.very_late_ms
    key = rng.integers(0, spec.keys, size=n, dtype=np.int64)
    value = rng.integers(1, 100, size=n, dtype=np.int64)
    order = np.argsort(arrival, kind="stable")
    ev_col = pa.array(event[order] + EPOCH_MS)
    if spec.null_event_times:
        mask = np.zeros(n, dtype=bool)
        mask[rng.choice(n, size=min(n, spec.null_event_times), replace=False)] = True
        ev_col = pa.array(event[order] + EPOCH_MS, mask=mask)
    return pa.table(
        {
            "id": pa.array(np.arange(n, dtype=np.int64)),
            "partition": pa.array(part[order]),
            "event_time": ev_col,
            "arrival": pa.array(arrival[order] + EPOCH_MS),
            "key": pa.array(key[order]),
            "value": pa.array(value[order]),
        }
    )


__all__ = ["EPOCH_MS", "StreamSpec", "generate"]
