"""Every generator, valve and multiplexer vector (recorded from Flink 2.3.0), run
through floodmark's Python API. Each mismatch is reported by file and step."""

from __future__ import annotations

from typing import Any

import pytest
from conformance import Case, Mismatches, cases_for

from floodmark import Emission, Multiplexer, Valve, WatermarkStrategy
from floodmark.exceptions import (
    ChannelOutOfRangeError,
    FloodmarkError,
    IllegalStateError,
    InvalidParameterError,
)
from floodmark.valve import MultiplexerResult

I64_MAX = 2**63 - 1
NANOS_PER_MS = 1_000_000

ERRORS: dict[str, type[FloodmarkError]] = {
    "IllegalArgumentException": InvalidParameterError,
    "IllegalStateException": IllegalStateError,
    "IndexOutOfBoundsException": ChannelOutOfRangeError,
}


def emitted_json(emissions: list[Emission], status_style: bool = False) -> list[dict[str, Any]]:
    """Our emissions in the vectors' JSON form."""
    out: list[dict[str, Any]] = []
    for e in emissions:
        if e.kind == "watermark":
            out.append({"type": "watermark", "ts": e.watermark})
        elif status_style:
            out.append({"type": "status", "status": e.kind})
        else:
            out.append({"type": e.kind})
    return out


def check_error(m: Mismatches, step: int | str, exc: Exception | None, want: Any) -> None:
    """An expected error must have happened, of the mapped class; none otherwise."""
    if want is None:
        if exc is not None:
            m.check(step, f"raised {exc!r}", "no error")
        return
    cls = ERRORS.get(want["error"], FloodmarkError)
    got = "no error" if exc is None else type(exc).__name__
    m.check(step, got if not isinstance(exc, cls) else cls.__name__, cls.__name__)


def nanos(ms: int) -> int:
    return min(ms * NANOS_PER_MS, I64_MAX)


@pytest.mark.parametrize("case", cases_for("generator"))
def test_generator(case: Case) -> None:
    s, want = case.scenario, case.expected
    m = Mismatches(case)
    exc: Exception | None = None
    gen = None
    try:
        if s["generator"] == "monotonous":
            strategy = WatermarkStrategy.for_monotonous_timestamps()
        else:
            strategy = WatermarkStrategy.for_bounded_out_of_orderness(s["bound_ms"])
        if s.get("idle_timeout_ms") is not None:
            # Bound and events are ms ticks; the idleness clock and timeout are ns ticks.
            strategy = strategy.with_idleness(nanos(s["idle_timeout_ms"]))
        gen = strategy.create_generator("ms")
    except FloodmarkError as e:
        exc = e
    check_error(m, "create", exc, want.get("error"))
    if gen is not None:
        clock = s["clock_start_ms"] * NANOS_PER_MS
        for i, (step, exp) in enumerate(zip(s["steps"], want.get("steps", []), strict=True)):
            if "event" in step:
                got = gen.on_event(step["event"])
            elif "periodic" in step:
                got = gen.on_periodic_emit(clock)
            else:
                clock += step["advance_clock_ms"] * NANOS_PER_MS
                got = []
            m.check(i, emitted_json(got), exp["emitted"])
    m.assert_none()


@pytest.mark.parametrize("case", cases_for("valve"))
def test_valve(case: Case) -> None:
    s, want = case.scenario, case.expected
    m = Mismatches(case)
    valve = Valve(s["num_channels"])
    for i, (step, exp) in enumerate(zip(s["steps"], want["steps"], strict=True)):
        got: list[Emission] = []
        exc: Exception | None = None
        try:
            if "watermark" in step:
                got = valve.input_watermark(step["channel"], step["watermark"])
            else:
                got = valve.input_status(step["channel"], step["status"])
        except FloodmarkError as e:
            exc = e
        m.check(i, emitted_json(got, status_style=True), exp["emitted"])
        check_error(m, i, exc, exp.get("error"))
    m.assert_none()


def mux_step(mux: Multiplexer, step: dict[str, Any]) -> tuple[MultiplexerResult, bool | None]:
    if "register" in step:
        mux.register_output(step["register"])
        return MultiplexerResult([], []), None
    if "unregister" in step:
        return MultiplexerResult([], []), mux.unregister_output(step["unregister"])
    if "periodic" in step:
        return mux.on_periodic_emit(), None
    out, via = step["output"], step["via"]
    if "watermark" in step:
        return mux.emit_watermark(out, step["watermark"], via=via), None
    if step["mark"] == "idle":
        return mux.mark_idle(out, via=via), None
    return mux.mark_active(out, via=via), None


@pytest.mark.parametrize("case", cases_for("multiplexer"))
def test_multiplexer(case: Case) -> None:
    s, want = case.scenario, case.expected
    m = Mismatches(case)
    mux = Multiplexer()
    for i, (step, exp) in enumerate(zip(s["steps"], want["steps"], strict=True)):
        exc: Exception | None = None
        res, result = MultiplexerResult([], []), None
        try:
            res, result = mux_step(mux, step)
        except FloodmarkError as e:
            exc = e
        got: dict[str, Any] = {
            "emitted": emitted_json(res.emitted),
            "listener": [
                {"output": ev.output, "type": "watermark", "ts": ev.watermark}
                if ev.type == "watermark"
                else {"output": ev.output, "type": "idle", "idle": ev.idle}
                for ev in res.listener
            ],
        }
        if result is not None:
            got["result"] = result
        m.check(i, got, {k: v for k, v in exp.items() if k != "error"})
        check_error(m, i, exc, exp.get("error"))
    m.assert_none()
