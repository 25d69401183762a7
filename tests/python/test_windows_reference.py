"""Property tests: the window operator against a plain reference model.

The model below is written from SEMANTICS.md section 5 with Python integers and
lists, no timers: a window fires on an advance from ``old`` to ``new`` iff
``old < end - 1 <= new``; it is cleaned up once ``end - 1 + L <= wm``; a record joins
each of its windows that is not cleaned up and re-fires it at once if
``end - 1 <= wm``; a record in no live window is late iff ``ts + L <= wm``, else
dropped (``no_window``). Sessions merge with every live window they touch.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.windows import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    WindowOperator,
)

AGGS: list[Any] = [
    "count",
    ("sum", "v"),
    ("min", "v"),
    ("max", "v"),
    ("mean", "v"),
    ("first", "v"),
    ("last", "v"),
]


@dataclass
class Win:
    start: int
    end: int
    rows: list[int] = field(default_factory=list)  # record ids


class Reference:
    def __init__(
        self,
        kind: str,
        size: int,
        slide: int,
        offset: int,
        gap: int,
        lateness: int,
        records: list[dict[str, Any]],
    ) -> None:
        self.kind, self.size, self.slide, self.offset, self.gap = kind, size, slide, offset, gap
        self.L = lateness
        self.records = records
        self.wm = -(2**63)
        self.windows: dict[Any, list[Win]] = {}
        self.key_order: dict[Any, int] = {}
        self.results: list[dict[str, Any]] = []
        self.late: list[tuple[int, int]] = []
        self.dropped: list[tuple[int, str]] = []
        self.contributed: set[int] = set()
        self.n = 0

    def assign(self, ts: int) -> list[tuple[int, int]]:
        if self.kind == "tumbling":
            s = (ts - self.offset) // self.size * self.size + self.offset
            return [(s, s + self.size)]
        if self.kind == "sliding":
            last = (ts - self.offset) // self.slide * self.slide + self.offset
            out = []
            s = last
            while s > ts - self.size:
                out.append((s, s + self.size))
                s -= self.slide
            return out
        return [(ts, ts + self.gap)]

    def fire(self, key: Any, w: Win, timing: str, position: int) -> None:
        self.contributed.update(w.rows)
        vals = [(self.records[r]["ts"], r, self.records[r]["v"]) for r in w.rows]
        nn = [x for x in vals if x[2] is not None]
        self.results.append(
            {
                "k": key,
                "window_start": w.start,
                "window_end": w.end,
                "count": len(w.rows),
                "sum_v": sum(x[2] for x in nn) if nn else None,
                "min_v": min(x[2] for x in nn) if nn else None,
                "max_v": max(x[2] for x in nn) if nn else None,
                "mean_v": sum(x[2] for x in nn) / len(nn) if nn else None,
                "first_v": min(nn)[2] if nn else None,
                "last_v": max(nn)[2] if nn else None,
                "watermark": self.wm,
                "timing": timing,
                "trigger_position": position,
            }
        )

    def record(self, rid: int) -> None:
        rec = self.records[rid]
        key, ts = rec["k"], rec["ts"]
        self.key_order.setdefault(key, len(self.key_order))
        position = self.n
        self.n += 1
        if ts is None:
            self.dropped.append((rid, "null_event_time"))
            return
        wins = self.windows.setdefault(key, [])
        added = False
        for start, end in self.assign(ts):
            if self.kind == "session":
                touching = [w for w in wins if w.start <= end and w.end >= start]
                if touching:
                    start = min([start] + [w.start for w in touching])
                    end = max([end] + [w.end for w in touching])
            if end - 1 + self.L <= self.wm:
                continue
            added = True
            if self.kind == "session":
                rows = sorted(r for w in touching for r in w.rows)
                for w in touching:
                    wins.remove(w)
                win = Win(start, end, rows)
                wins.append(win)
            else:
                found = [w for w in wins if (w.start, w.end) == (start, end)]
                win = found[0] if found else Win(start, end)
                if not found:
                    wins.append(win)
            win.rows.append(rid)
            if end - 1 <= self.wm:
                self.fire(key, win, "late", position)
        if not added:
            if ts + self.L <= self.wm:
                self.late.append((rid, self.wm))
            else:
                self.dropped.append((rid, "no_window"))

    def advance(self, wm: int) -> None:
        if wm <= self.wm:
            return
        old, self.wm = self.wm, wm
        due = [
            (w.end, self.key_order[k], k, w)
            for k, ws in self.windows.items()
            for w in ws
            if old < w.end - 1 <= wm
        ]
        for _, _, k, w in sorted(due, key=lambda x: (x[0], x[1])):
            self.fire(k, w, "on_time", self.n)
        for ws in self.windows.values():
            ws[:] = [w for w in ws if w.end - 1 + self.L > wm]


assigners = st.one_of(
    st.tuples(st.just("tumbling"), st.integers(1, 10)).flatmap(
        lambda t: st.tuples(
            st.just(t[0]), st.just(t[1]), st.just(0), st.integers(-t[1] + 1, t[1] - 1), st.just(0)
        )
    ),
    st.tuples(st.integers(1, 12), st.integers(1, 6)).flatmap(
        lambda t: st.tuples(
            st.just("sliding"),
            st.just(t[0]),
            st.just(t[1]),
            st.integers(-t[1] + 1, t[1] - 1),
            st.just(0),
        )
    ),
    st.tuples(st.just("session"), st.just(0), st.just(0), st.just(0), st.integers(1, 6)),
)
records_st = st.fixed_dictionaries(
    {
        "k": st.sampled_from(["a", "b", None]),
        "ts": st.one_of(st.integers(-5, 30), st.integers(-5, 30), st.just(None)),
        "v": st.one_of(st.integers(-50, 50), st.integers(-50, 50), st.just(None)),
    }
)
items = st.lists(
    st.one_of(
        records_st, records_st, records_st, st.fixed_dictionaries({"wm": st.integers(-5, 40)})
    ),
    min_size=1,
    max_size=80,
)


def make_operator(
    params: tuple[str, int, int, int, int], lateness: int, aggs: list[Any] = AGGS
) -> WindowOperator:
    kind, size, slide, offset, gap = params
    window: Any
    if kind == "tumbling":
        window = TumblingEventTimeWindows.of(size, offset)
    elif kind == "sliding":
        window = SlidingEventTimeWindows.of(size, slide, offset)
    else:
        window = EventTimeSessionWindows.with_gap(gap)
    return WindowOperator(window, key="k", event_time="ts", aggs=aggs, allowed_lateness=lateness)


def run(
    params: Any,
    lateness: int,
    stream: list[dict[str, Any]],
    cuts: list[int],
    snapshot_at: int | None,
    aggs: list[Any] = AGGS,
) -> tuple[list[Any], list[Any], list[Any]]:
    """Feeds `stream` in batches split at `cuts`; snapshot/restore at cut `snapshot_at`."""
    op = make_operator(params, lateness, aggs)
    results: list[Any] = []
    late: list[Any] = []
    dropped: list[Any] = []
    bounds = [0, *sorted(set(cuts)), len(stream)]
    for b, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        if snapshot_at is not None and b == snapshot_at:
            snap = op.snapshot()
            op = make_operator(params, lateness, aggs)
            op.restore(snap)
        chunk = stream[lo:hi]
        recs = [(i, it) for i, it in enumerate(chunk) if "wm" not in it]
        positions, marks = [], []
        n = 0
        for it in chunk:
            if "wm" in it:
                positions.append(n)
                marks.append(it["wm"])
            else:
                n += 1
        batch = pa.RecordBatch.from_pydict(
            {
                "k": pa.array([it["k"] for _, it in recs], pa.string()),
                "ts": pa.array([it["ts"] for _, it in recs], pa.int64()),
                "v": pa.array([it["v"] for _, it in recs], pa.int64()),
                "rid": pa.array([it["rid"] for _, it in recs], pa.int64()),
            }
        )
        out = op.process(batch, {"position": positions, "watermark": marks})
        results += out.results.drop_columns(["trigger_time"]).to_pylist()
        late += [(r["rid"], r["watermark"]) for r in out.late.to_pylist()]
        dropped += [(r["rid"], r["reason"]) for r in out.dropped.to_pylist()]
    results += op.finish().results.drop_columns(["trigger_time"]).to_pylist()
    return results, late, dropped


def stream_cuts(data: st.DataObject, stream: list[dict[str, Any]]) -> list[int]:
    """Up to four places inside ``stream`` where a batch ends (none: one batch)."""
    if len(stream) < 2:
        return []
    return data.draw(st.lists(st.integers(1, len(stream) - 1), max_size=4), label="cuts")


def reference(params: Any, lateness: int, stream: list[dict[str, Any]]) -> Reference:
    """The reference model run over ``stream`` (records get their ``rid``)."""
    records = []
    for it in stream:
        if "wm" not in it:
            it["rid"] = len(records)
            records.append(it)
    ref = Reference(*params, lateness, records)
    for it in stream:
        if "wm" in it:
            ref.advance(it["wm"])
        else:
            ref.record(it["rid"])
    ref.advance(2**63 - 1)
    return ref


@settings(max_examples=400, deadline=None)
@given(
    params=assigners,
    lateness=st.sampled_from([0, 0, 1, 2, 5]),
    stream=items,
    data=st.data(),
)
def test_operator_matches_reference(
    params: Any, lateness: int, stream: list[dict[str, Any]], data: st.DataObject
) -> None:
    ref = reference(params, lateness, stream)
    records = ref.records

    cuts = stream_cuts(data, stream)
    got = run(params, lateness, stream, cuts, None)
    assert got[0] == ref.results
    assert got[1] == ref.late
    assert got[2] == ref.dropped
    # every record accounted for exactly once
    late_ids = {r for r, _ in ref.late}
    dropped_ids = {r for r, _ in ref.dropped}
    assert late_ids.isdisjoint(dropped_ids)
    assert ref.contributed.isdisjoint(late_ids | dropped_ids)
    assert ref.contributed | late_ids | dropped_ids == set(range(len(records)))
    # snapshot/restore before any batch of a stream cut in two or more changes nothing
    # (before the first: an operator that has seen nothing)
    if len(stream) > 1:
        at = cuts or [data.draw(st.integers(1, len(stream) - 1), label="cut")]
        snap = data.draw(st.integers(0, len(set(at))), label="snapshot before batch")
        assert run(params, lateness, stream, at, snap) == got


@settings(max_examples=200, deadline=None)
@given(
    params=assigners,
    lateness=st.sampled_from([0, 2]),
    stream=items.map(lambda s: [it if it.get("v", 0) is not None else {**it, "v": 7} for it in s]),
    data=st.data(),
)
def test_count_then_int_sum_matches_reference(
    params: Any, lateness: int, stream: list[dict[str, Any]], data: st.DataObject
) -> None:
    # Exactly count then a sum of an int64 column without nulls has its own step in the
    # engine (the most common pair); it must agree with the reference like the rest.
    ref = reference(params, lateness, stream)
    cuts = stream_cuts(data, stream)
    got = run(params, lateness, stream, cuts, None, aggs=["count", ("sum", "v")])
    others = {"min_v", "max_v", "mean_v", "first_v", "last_v"}
    assert got[0] == [{k: v for k, v in r.items() if k not in others} for r in ref.results]
    assert got[1] == ref.late
    assert got[2] == ref.dropped


# --- sessions whose windows wrap past Long.MAX_VALUE (issue 18) ------------------

MIN, MAX = -(2**63), 2**63 - 1


def jlong(x: int) -> int:
    """``x`` wrapped to a Java ``long``."""
    return (x + 2**63) % 2**64 - 2**63


class FlinkSessions:
    """Flink 2.3.0's ``WindowOperator`` over session windows, one key, transcribed with
    Java ``long`` arithmetic: ``MergingWindowSet.addWindow`` (``TimeWindow.mergeWindows``
    sorts all live windows and the new one by start and sweeps, a window joining the
    current group while it ``intersects`` the group's cover), the merge function
    (``onMerge`` registers the cover's firing timer, then every merged window's timers
    are deleted), ``EventTimeTrigger`` and the cleanup timer, and timers firing in time
    order. A session window ``[ts, ts + gap)`` wraps when ``ts + gap`` passes MAX.

    One deliberate departure (docs/semantics.md, departure 10), modelled here: when the
    sweep merges windows the new one does not touch (only when windows wrap), Flink
    leaves the cover without a cleanup timer, and without a firing timer if the cover
    is one of the merged windows (its records never come out); floodmark gives it
    both, like any window. And where Flink fails the job because a merge's cover is
    late by its wrapping test ``maxTimestamp + lateness <= watermark`` (lateness near
    MAX), floodmark merges (``flink_fails`` notes it)."""

    def __init__(self, gap: int, lateness: int) -> None:
        self.gap, self.L = gap, lateness
        self.wm = MIN
        self.live: dict[tuple[int, int], list[int]] = {}  # window -> record ids
        self.timers: set[tuple[int, tuple[int, int]]] = set()
        self.results: list[tuple[int, int, int, int]] = []  # start, end, count, watermark
        self.late: list[int] = []
        self.dropped: list[int] = []
        self.flink_fails = False

    @staticmethod
    def max_ts(w: tuple[int, int]) -> int:
        return jlong(w[1] - 1)

    def cleanup(self, w: tuple[int, int]) -> int:
        c = jlong(self.max_ts(w) + self.L)
        return c if c >= self.max_ts(w) else MAX

    @staticmethod
    def merge_windows(ws: list[tuple[int, int]]) -> list[tuple[tuple[int, int], set[Any]]]:
        groups: list[list[Any]] = []
        for w in sorted(ws, key=lambda w: w[0]):
            cur = groups[-1] if groups else None
            if cur is not None and cur[0][0] <= w[1] and cur[0][1] >= w[0]:
                cur[0] = (min(cur[0][0], w[0]), max(cur[0][1], w[1]))
                cur[1].add(w)
            else:
                groups.append([w, {w}])
        return [(into, frm) for into, frm in groups if len(frm) > 1]

    def add_window(self, new: tuple[int, int]) -> tuple[int, int]:
        merges = self.merge_windows([*self.live, new])
        result, merged_new = new, False
        for into, frm in merges:
            with_new = new in frm
            if with_new:
                frm.discard(new)
                merged_new, result = True, into
            rows = [r for w in sorted(frm) for r in self.live.pop(w)]
            self.live[into] = rows
            if not (into in frm and len(frm) == 1):
                if jlong(self.max_ts(into) + self.L) <= self.wm:
                    self.flink_fails = True  # UnsupportedOperationException; floodmark merges
                if self.max_ts(into) > self.wm:
                    self.timers.add((self.max_ts(into), into))
                for w in frm:
                    self.timers.discard((self.max_ts(w), w))
                    self.timers.discard((self.cleanup(w), w))
                if not with_new:  # the departure
                    if self.max_ts(into) > self.wm:
                        self.timers.add((self.max_ts(into), into))
                    if self.cleanup(into) != MAX:
                        self.timers.add((self.cleanup(into), into))
        if not merges or (result == new and not merged_new):
            self.live.setdefault(result, [])
        return result

    def record(self, rid: int, ts: int) -> None:
        window = self.add_window((ts, jlong(ts + self.gap)))
        if self.cleanup(window) <= self.wm:
            self.live.pop(window, None)  # MergingWindowSet.retireWindow
            (self.late if jlong(ts + self.L) <= self.wm else self.dropped).append(rid)
            return
        self.live[window].append(rid)
        if self.max_ts(window) <= self.wm:
            self.results.append((*window, len(self.live[window]), self.wm))
        else:
            self.timers.add((self.max_ts(window), window))
        if self.cleanup(window) != MAX:
            self.timers.add((self.cleanup(window), window))

    def advance(self, wm: int) -> None:
        if wm <= self.wm:
            return
        self.wm = wm
        while due := sorted(t for t in self.timers if t[0] <= wm):
            time, w = due[0]
            self.timers.discard(due[0])
            if w not in self.live:
                continue
            if time == self.max_ts(w) and self.live[w]:
                self.results.append((*w, len(self.live[w]), wm))
            if time == self.cleanup(w):
                self.timers.discard((self.max_ts(w), w))
                del self.live[w]


def run_sessions(gap: int, lateness: int, items: list[Any]) -> tuple[list[Any], ...]:
    """The operator over ``items`` (event times, or ``("wm", w)``), one call per item:
    (results, late record ids, dropped record ids), results as a multiset."""
    op = WindowOperator(
        EventTimeSessionWindows.with_gap(gap),
        key="k",
        event_time="ts",
        aggs=["count"],
        allowed_lateness=lateness,
    )
    results: list[Any] = []
    late: list[int] = []
    dropped: list[int] = []
    rid = 0
    for it in items:
        if isinstance(it, tuple):
            out = op.advance(it[1])
        else:
            out = op.process(pa.record_batch({"k": [0], "ts": [it], "rid": [rid]}))
            rid += 1
        results += [
            (r["window_start"], r["window_end"], r["count"], r["watermark"])
            for r in out.results.to_pylist()
        ]
        late += [r["rid"] for r in out.late.to_pylist()]
        dropped += [r["rid"] for r in out.dropped.to_pylist()]
    results += [
        (r["window_start"], r["window_end"], r["count"], r["watermark"])
        for r in op.finish().results.to_pylist()
    ]
    return sorted(results), late, dropped


def model_sessions(gap: int, lateness: int, items: list[Any]) -> tuple[list[Any], ...]:
    f = FlinkSessions(gap, lateness)
    rid = 0
    for it in items:
        if isinstance(it, tuple):
            f.advance(it[1])
        else:
            f.record(rid, it)
            rid += 1
    f.advance(MAX)
    return sorted(f.results), f.late, f.dropped


def test_wrapping_sessions_the_issue_repro() -> None:
    # gap MAX: every window of a positive event time wraps past MAX
    gap = MAX
    items = [-3, -7239656082934827011, 39, 6742873163029187981, -10, ("wm", -8873275832082119812)]
    want = model_sessions(gap, 0, items)
    # Flink's sweep: [-3, ...) and [-7.2e18, ...) merge, the record at -10 joins them;
    # [39, MIN+38) and [6.7e18, ...) wrap and touch nothing next to them in start order
    assert want == (
        sorted(
            [
                (39, MIN + 38, 1, -8873275832082119812),
                (6742873163029187981, jlong(6742873163029187981 + gap), 1, MAX),
                (-7239656082934827011, MAX - 3, 3, MAX),
            ]
        ),
        [],
        [],
    )
    assert run_sessions(gap, 0, items) == want


def test_wrapping_sessions_merge_as_flinks_sweep() -> None:
    # Once [24, MIN+1) is cleaned up, the wrapped [5.0e18, -4.2e18) is next to the big
    # window in start order and touches it: the sweep of the record at MIN+43 (inside
    # the big window) merges it in, though the new window touches only the big one.
    gap, lateness = 9223372036854775785, 5
    items = [
        7671963880317361936,
        -47,
        -9223372036854775803,
        9223372036854775779,
        9223372036854775768,
        -2432646312752276599,
        24,
        5012243539062842062,
        ("wm", -5861004678800608522),
        -9223372036854775765,
        -2642117660775358517,
    ]
    want = model_sessions(gap, lateness, items)
    assert (-9223372036854775803, 9223372036854775738, 7, MAX) in want[0]
    assert run_sessions(gap, lateness, items) == want


def test_wrapping_sessions_merged_without_the_new_window_still_fire() -> None:
    # The record at MAX-20 wraps; the sweep then merges the big window with two
    # wrapped ones next to it, none of which the new window touches, into the big
    # window itself. Flink deletes its timers there and it never fires (nine records
    # lost); floodmark fires it at the end (departure 10).
    gap = 9223372036854775795
    items = [
        227485158976538094,
        -9223372036854775801,
        -8874874087382994237,
        -9223372036854775804,
        -9223372036854775771,
        15,
        -9223372036854775805,
        -492886327660043331,
        3614616454701143585,
        3548743025914984565,
        ("wm", -9223372036854775799),
        9223372036854775787,
    ]
    want = model_sessions(gap, 0, items)
    assert (-9223372036854775805, 8730485709194732464, 9, MAX) in want[0]
    assert run_sessions(gap, 0, items) == want


extreme = st.one_of(
    st.integers(MIN + 1, MIN + 60),
    st.integers(-60, 60),
    st.integers(MAX - 60, MAX),
    st.integers(MIN, MAX),
)
session_items = st.lists(
    st.one_of(extreme, extreme, extreme, st.tuples(st.just("wm"), extreme)), max_size=25
)


@settings(max_examples=300, deadline=None)
@given(
    gap=st.one_of(st.integers(MAX - 60, MAX), st.integers(1, MAX), st.integers(1, 40)),
    lateness=st.one_of(st.sampled_from([0, 5]), st.integers(0, MAX)),
    items=session_items,
)
def test_sessions_at_the_ends_of_the_range_match_flink(
    gap: int, lateness: int, items: list[Any]
) -> None:
    assert run_sessions(gap, lateness, items) == model_sessions(gap, lateness, items)
