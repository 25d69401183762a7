"""Every `assign` and `windows` conformance vector, run through the Python API.

Windows mode feeds the items either in ONE `process()` call (records as rows, markers
as positioned advances) or one call per item; each emitted result is attributed to
its step by `trigger_time` (the step index, given as arrival time / advance time),
and `trigger_position` is checked too. Runs of window entries with equal `end` are
compared as multisets (SEMANTICS.md, "How to compare").

Error mapping: `IllegalArgumentException` -> InvalidParameterError; the
`RuntimeException` for a `Long.MIN_VALUE` timestamp -> InvalidInputError.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from conformance import Case, Mismatches, cases_for, conformance_dir

from floodmark.exceptions import FloodmarkError, InvalidInputError, InvalidParameterError
from floodmark.windows import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    WindowOperator,
    merge_windows,
    window_start_with_offset,
)

MAX = 2**63 - 1
ERRORS: dict[str, type[Exception]] = {
    "IllegalArgumentException": InvalidParameterError,
    "RuntimeException": InvalidInputError,
}


def make_assigner(s: dict[str, Any]) -> Any:
    kind = s["assigner"]
    if kind == "tumbling":
        return TumblingEventTimeWindows.of(s["size_ms"], s.get("offset_ms") or 0)
    if kind == "sliding":
        return SlidingEventTimeWindows.of(s["size_ms"], s["slide_ms"], s.get("offset_ms") or 0)
    return EventTimeSessionWindows.with_gap(s["gap_ms"])


def error_class(error: dict[str, Any]) -> type[Exception]:
    return ERRORS.get(error["error"], FloodmarkError)


UNAVAILABLE = "unavailable"


def assign_step(step: dict[str, Any], assigner: Any) -> Any:
    """What floodmark gives for one step of an assign vector: the result, an error
    instance, or ``UNAVAILABLE`` for an ``assign`` step without an assigner (only
    ``assign`` steps need one)."""
    try:
        if "assign" in step:
            if assigner is None:
                return UNAVAILABLE
            return {"windows": [list(w) for w in assigner.assign_windows(step["assign"])]}
        if "window_start" in step:
            return {
                "start": window_start_with_offset(
                    step["window_start"], step["offset_ms"], step["size_ms"]
                )
            }
        return {
            "merges": [
                {"from": [list(w) for w in frm], "into": list(into)}
                for frm, into in merge_windows([tuple(w) for w in step["merge"]])
            ]
        }
    except FloodmarkError as e:
        return e


def assign_mismatches(case: Case) -> Mismatches:
    """Every mismatch of one assign vector. When the assigner cannot be built (a
    top-level ``error``), only the steps that need it did not run
    (``AssignerUnavailable``): ``window_start`` and ``merge`` steps are still checked
    (SEMANTICS.md, "How to compare")."""
    m = Mismatches(case)
    s, exp = case.scenario, case.expected
    assigner = None
    try:
        assigner = make_assigner(s)
    except FloodmarkError as e:
        if "error" not in exp:
            m.check("assigner", repr(e), "built")
        else:
            m.check("assigner", isinstance(e, error_class(exp["error"])), True)
    else:
        if "error" in exp:
            m.check("assigner", "built", exp["error"])
    for i, step in enumerate(s["steps"]):
        want = exp["steps"][i]
        got = assign_step(step, assigner)
        kind = want.get("error", {}).get("error")
        if kind == "AssignerUnavailable":
            m.check(i, got, UNAVAILABLE)
        elif kind is not None:
            m.check(i, isinstance(got, error_class(want["error"])), True)
        else:
            m.check(i, repr(got) if isinstance(got, Exception) else got, want)
    return m


@pytest.mark.parametrize("case", cases_for("assign"))
def test_assign_vector(case: Case) -> None:
    assign_mismatches(case).assert_none()


def test_assign_runner_checks_the_steps_that_need_no_assigner() -> None:
    # A vector whose assigner cannot be built (size 0): its assign step did not run,
    # its window_start and merge steps did, and must be checked.
    def case(start: int, merges: list[Any], first: dict[str, Any] | None = None) -> Case:
        unavailable = {"error": {"type": "error", "error": "AssignerUnavailable"}}
        scenario = {
            "mode": "assign",
            "assigner": "tumbling",
            "size_ms": 0,
            "offset_ms": 0,
            "steps": [
                {"assign": 1},
                {"window_start": -7, "offset_ms": 0, "size_ms": 5},
                {"merge": [[0, 5], [5, 10]]},
            ],
        }
        expected = {
            "error": {"type": "error", "error": "IllegalArgumentException"},
            "steps": [first or unavailable, {"start": start}, {"merges": merges}],
        }
        return Case(conformance_dir() / "synthetic.json", scenario, expected)

    right = [{"from": [[0, 5], [5, 10]], "into": [0, 10]}]
    assert assign_mismatches(case(-10, right)).lines == []
    assert len(assign_mismatches(case(-9, right)).lines) == 1
    assert len(assign_mismatches(case(-10, [])).lines) == 1
    assert len(assign_mismatches(case(-10, right, {"windows": []})).lines) == 1
    built = case(-10, right)
    built.scenario["size_ms"] = 10
    assert len(assign_mismatches(built).lines) == 2  # the assigner, its assign step


def runs(entries: list[dict[str, Any]]) -> list[Any]:
    """Each maximal run of window entries with equal end, sorted (a multiset)."""
    out: list[Any] = []
    i = 0
    while i < len(entries):
        e = entries[i]
        if e["type"] == "window":
            j = i
            while (
                j < len(entries)
                and entries[j]["type"] == "window"
                and entries[j]["end"] == e["end"]
            ):
                j += 1
            out.append(sorted(repr(sorted(x.items())) for x in entries[i:j]))
            i = j
        else:
            out.append(e)
            i += 1
    return out


class Recorder:
    """Turns WindowOutputs into per-step emitted lists."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items
        self.steps: dict[int, list[dict[str, Any]]] = {i: [] for i in range(len(items))}
        self.steps[-1] = []  # end of input
        # global record index of each record step; records before each marker step
        self.position: dict[int, int] = {}
        n = 0
        for i, it in enumerate(items):
            self.position[i] = n
            if "wm" not in it:
                n += 1
        self.total = n
        self.bad_positions: list[str] = []

    def add(self, out: Any) -> None:
        for row in out.results.to_pylist():
            step = row["trigger_time"]
            want_pos = self.total if step == -1 else self.position[step]
            if row["trigger_position"] != want_pos:
                self.bad_positions.append(
                    f"step {step}: trigger_position {row['trigger_position']}"
                )
            timing = "late" if step != -1 and "wm" not in self.items[step] else "on_time"
            if row["timing"] != timing:
                self.bad_positions.append(f"step {step}: timing {row['timing']}")
            self.steps[step].append(
                {
                    "type": "window",
                    "key": row["key"],
                    "start": row["window_start"],
                    "end": row["window_end"],
                    "count": row["count"],
                    "sum": row["sum_value"],
                    "watermark": row["watermark"],
                }
            )
        for row in out.late.to_pylist():
            self.steps[row["step"]].append(
                {"type": "late", "key": row["key"], "ts": row["ts"], "value": row["value"]}
            )
        assert out.dropped.num_rows == 0 or set(out.dropped.column("reason").to_pylist()) == {
            "no_window"
        }

    def watermarks(self) -> None:
        last = -(2**63)
        for i, it in enumerate(self.items):
            if "wm" in it and it["wm"] > last:
                last = it["wm"]
                self.steps[i].append({"type": "watermark", "ts": last})
        if last < MAX:
            self.steps[-1].append({"type": "watermark", "ts": MAX})


def record_batch(items: list[tuple[int, dict[str, Any]]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "key": pa.array([it["key"] for _, it in items], pa.string()),
            "ts": pa.array([it["ts"] for _, it in items], pa.int64()),
            "value": pa.array([it["value"] for _, it in items], pa.int64()),
            "step": pa.array([i for i, _ in items], pa.int64()),
        }
    )


@pytest.mark.parametrize("mode", ["one_call", "per_item"])
@pytest.mark.parametrize("case", cases_for("windows"))
def test_windows_vector(case: Case, mode: str) -> None:
    s, exp = case.scenario, case.expected
    items: list[dict[str, Any]] = s["items"]
    op = WindowOperator(
        make_assigner(s),
        key="key",
        event_time="ts",
        aggs=["count", ("sum", "value")],
        allowed_lateness=s["allowed_lateness_ms"],
        arrival="step",
    )
    rec = Recorder(items)
    if mode == "one_call":
        records = [(i, it) for i, it in enumerate(items) if "wm" not in it]
        marks = [(i, it) for i, it in enumerate(items) if "wm" in it]
        rec.add(
            op.process(
                record_batch(records),
                {
                    "position": [rec.position[i] for i, _ in marks],
                    "watermark": [it["wm"] for _, it in marks],
                    "time": [i for i, _ in marks],
                },
            )
        )
    else:
        for i, it in enumerate(items):
            if "wm" in it:
                rec.add(op.advance(it["wm"], time=i))
            else:
                rec.add(op.process(record_batch([(i, it)])))
    rec.add(op.finish(time=-1))
    rec.watermarks()
    m = Mismatches(case)
    for i, want in enumerate(exp["steps"]):
        m.check(i, runs(rec.steps[i]), runs(want["emitted"]))
    m.check("end_of_input", runs(rec.steps[-1]), runs(exp["end_of_input"]["emitted"]))
    m.check("trigger", rec.bad_positions, [])
    m.assert_none()
