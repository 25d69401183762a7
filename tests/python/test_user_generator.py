"""A user's Python generator runs through the engine's driver and idleness timer: it
gives the built-in generator's output exactly, its exceptions reach the caller
unchanged, and its snapshot is the engine's, with the pickled object inside."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from user_generators import BoundedPy

from floodmark import Emission, WatermarkStrategy, drive
from floodmark.exceptions import InvalidParameterError, SnapshotError
from floodmark.generator import WatermarkOutput
from floodmark.timeline import TimelineBuilder


@pytest.mark.parametrize("idle", [None, 700])
def test_python_generator_agrees_with_native(idle: int | None) -> None:
    rng = np.random.default_rng(3)
    arrival = np.cumsum(rng.integers(0, 400, 300))
    ts = arrival - rng.integers(0, 150, 300)
    native = WatermarkStrategy.for_bounded_out_of_orderness(50)
    python = WatermarkStrategy.for_generator(lambda: BoundedPy(50))
    if idle is not None:
        native, python = native.with_idleness(idle), python.with_idleness(idle)
    a = drive(native, ts, arrival, emit_interval=100, until=int(arrival[-1]) + 2000)
    b = drive(python, ts, arrival, emit_interval=100, until=int(arrival[-1]) + 2000)
    assert a.record_watermark.equals(b.record_watermark)
    assert a.emissions.to_pylist() == b.emissions.to_pylist()
    if idle is not None:
        assert "idle" in a.emissions.column("kind").to_pylist()


@settings(max_examples=150, deadline=None)
@given(
    bound=st.integers(0, 100),
    idle=st.one_of(st.none(), st.integers(1, 600)),
    interval=st.integers(1, 250),
    start=st.integers(-500, 500),
    records=st.lists(
        st.tuples(st.integers(-300, 3000), st.one_of(st.integers(0, 20), st.integers(0, 1500))),
        max_size=60,
    ),
    tail=st.integers(0, 3000),
)
def test_a_user_generator_mirroring_bounded_gives_the_builtins_output(
    bound: int,
    idle: int | None,
    interval: int,
    start: int,
    records: list[tuple[int, int]],
    tail: int,
) -> None:
    arrival, a = [], start
    for _, d in records:
        a += d
        arrival.append(a)
    ts = [t for t, _ in records]
    native = WatermarkStrategy.for_bounded_out_of_orderness(bound)
    python = WatermarkStrategy.for_generator(lambda: BoundedPy(bound))
    if idle is not None:
        native, python = native.with_idleness(idle), python.with_idleness(idle)
    grid = {"emit_interval": interval, "start": start, "until": a + tail}
    want = drive(native, ts, arrival, **grid)
    got = drive(python, ts, arrival, **grid)
    assert got.record_watermark.to_pylist() == want.record_watermark.to_pylist()
    assert got.emissions.to_pylist() == want.emissions.to_pylist()


class Boom(Exception):
    """The user's own exception."""


class Failing:
    """Raises the given exception on its ``fail_at``-th call of ``method``."""

    def __init__(self, method: str, fail_at: int, error: BaseException) -> None:
        self.method, self.fail_at, self.error, self.calls = method, fail_at, error, 0

    def _call(self, method: str) -> None:
        if method == self.method:
            self.calls += 1
            if self.calls == self.fail_at:
                raise self.error

    def on_event(self, timestamp: int, output: WatermarkOutput) -> None:
        self._call("on_event")

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        self._call("on_periodic_emit")
        output.emit_watermark(0)


@pytest.mark.parametrize("method", ["on_event", "on_periodic_emit"])
@pytest.mark.parametrize("error", [Boom("mine"), KeyError("k"), ZeroDivisionError()])
def test_a_user_generators_exception_reaches_the_caller_unchanged(
    method: str, error: BaseException
) -> None:
    strategy = WatermarkStrategy.for_generator(lambda: Failing(method, 3, error))
    with pytest.raises(type(error)) as info:
        drive(strategy, [1, 2, 3, 4], [0, 100, 200, 300], emit_interval=100)
    assert info.value is error
    gen = strategy.create_generator()
    call = gen.on_event if method == "on_event" else gen.on_periodic_emit
    call(1)
    call(2)
    with pytest.raises(type(error)) as info:
        call(3)
    assert info.value is error


def test_a_factory_that_returns_nothing_is_named() -> None:
    """A factory returning None was reported against a parameter ``user`` the caller
    never sees; it is the factory, named."""
    strategy = WatermarkStrategy.for_generator(lambda: None)
    with pytest.raises(InvalidParameterError, match=r"`factory`: it returned None") as err:
        strategy.create_generator()
    assert err.value.parameter == "factory"
    with pytest.raises(InvalidParameterError, match="`factory`"):
        drive(strategy, [1], [0], emit_interval=100)


def test_a_grid_span_is_checked_as_drive_checks_it() -> None:
    """``check_grid_span`` is drive's bound on a generator called at every grid time,
    for a caller that drives a channel in chunks: 2^28 grid times pass, one more is
    refused; a generator that is not called at every grid time is not bounded."""
    user = WatermarkStrategy.for_generator(lambda: BoundedPy(5)).create_generator()
    user.check_grid_span(5, 5 + 2**28 - 1)
    with pytest.raises(InvalidParameterError, match=r"`emit_interval`.*268435457 grid"):
        user.check_grid_span(5, 5 + 2**28)
    WatermarkStrategy.for_bounded_out_of_orderness(5).create_generator().check_grid_span(0, 2**40)


def test_statuses_from_a_user_generator_pass_the_channel_output() -> None:
    class Flapping:
        def __init__(self) -> None:
            self.n = 0

        def on_event(self, timestamp: int, output: WatermarkOutput) -> None:
            output.mark_idle()
            output.mark_idle()  # a second one is not a transition: dropped

        def on_periodic_emit(self, output: WatermarkOutput) -> None:
            self.n += 1
            output.emit_watermark(self.n // 2)  # every value twice: repeats dropped

    r = drive(
        WatermarkStrategy.for_generator(Flapping), [5], [150], emit_interval=100, start=0, until=300
    )
    assert r.emissions.to_pylist() == [
        {"time": 0, "kind": "watermark", "watermark": 0},
        {"time": 100, "kind": "watermark", "watermark": 1},
        {"time": 150, "kind": "idle", "watermark": None},
        # at 200 the watermark 1 again: not above the maximum, so the channel stays idle
        {"time": 300, "kind": "active", "watermark": None},
        {"time": 300, "kind": "watermark", "watermark": 2},
    ]


def test_python_generator_snapshot() -> None:
    gen = WatermarkStrategy.for_generator(lambda: BoundedPy(0)).create_generator()
    gen.on_event(10)
    snap = gen.snapshot()
    assert snap[:5] == b"FMK2\x16"  # the engine's format, kind: a user generator's channel
    gen.on_event(50)
    gen.restore(snap)
    assert gen.on_periodic_emit() == [Emission("watermark", 9)]
    with pytest.raises(SnapshotError):
        gen.restore(b"junk")
    native = WatermarkStrategy.for_bounded_out_of_orderness(0).create_generator()
    with pytest.raises(SnapshotError):
        gen.restore(native.snapshot())
    with pytest.raises(SnapshotError):
        native.restore(snap)


def test_a_user_generator_is_driven_per_channel_not_by_the_timeline_builder() -> None:
    with pytest.raises(InvalidParameterError) as info:
        TimelineBuilder(WatermarkStrategy.for_generator(lambda: BoundedPy(0)), 2)
    assert info.value.parameter == "strategy"
