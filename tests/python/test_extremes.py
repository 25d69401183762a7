"""Random extreme parameters under a memory cap (issue 18): window sizes, slides,
offsets, gaps and lateness, event times and watermarks near both ends of the int64
range. ``assign_windows`` and the ``WindowOperator`` must not abort, hang or allocate
without bound, and every record must come out exactly once (in a window result, the
late output or the dropped output).

The properties run in a subprocess whose address space is capped (2 GiB) and whose
run time is limited, so that a blow-up fails this test instead of taking the machine
down. Sliding assigners are drawn with at most 1000 windows per record: Flink's own cap
of ten million windows per record costs gigabytes of window state by design."""

from __future__ import annotations

import subprocess
import sys
import textwrap

CAP_BYTES = 2 << 30
TIME_LIMIT_S = 120

SCRIPT = textwrap.dedent(
    """
    import resource
    resource.setrlimit(resource.RLIMIT_AS, ({cap}, {cap}))

    import os

    import pyarrow as pa
    from hypothesis import HealthCheck, given, settings, strategies as st

    # The suite's profiles (tests/python/conftest.py): CI draws the same cases each run.
    settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
    settings.register_profile("explore")
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

    from floodmark.exceptions import InvalidInputError, InvalidParameterError
    from floodmark.windows import (
        EventTimeSessionWindows, SlidingEventTimeWindows, TumblingEventTimeWindows,
        WindowOperator,
    )

    MIN, MAX = -(2**63), 2**63 - 1
    near = lambda v: st.integers(max(MIN, v - 40), min(MAX, v + 40))
    times = st.one_of(near(MIN), near(0), near(MAX), st.integers(MIN, MAX))
    lengths = st.one_of(
        st.integers(1, 40), near(MAX).filter(lambda v: v > 0), st.integers(1, MAX),
        st.sampled_from([2**62, 2**32, 10**6]),
    )
    offsets = st.one_of(st.integers(-40, 40), st.integers(MIN, MAX), near(MIN), near(MAX))

    @st.composite
    def assigners(draw):
        kind = draw(st.sampled_from(["tumbling", "sliding", "session"]))
        if kind == "session":
            return EventTimeSessionWindows.with_gap(draw(lengths)), 1
        size = draw(lengths)
        if kind == "tumbling":
            offset = draw(offsets)
            if abs(offset) >= size:
                offset = offset % size
            return TumblingEventTimeWindows.of(size, offset), 1
        ratio = draw(st.sampled_from([0, 1, 2, 7, 1000]))
        slide = draw(lengths) if ratio == 0 else max(1, size // ratio)
        slide = max(slide, size // 1000)  # at most about 1000 windows per record
        offset = draw(offsets)
        if abs(offset) >= slide:
            offset = offset % slide
        return SlidingEventTimeWindows.of(size, slide, offset), size // slide + 1

    def unwrap(start, ts):
        return start - 2**64 if start > ts else start

    @settings(max_examples=300, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(assigners(), st.lists(times, min_size=1, max_size=20))
    def assign(made, stamps):
        window, most = made
        for ts in stamps:
            try:
                got = window.assign_windows(ts)
            except InvalidInputError:
                assert ts == MIN and window.kind != "session"
                continue
            assert len(got) <= most, (window, ts, len(got))
            _, size, _, _, gap = window.params()
            for start, end in got:
                length = gap if window.kind == "session" else size
                assert end == (start + length + 2**63) % 2**64 - 2**63
                if window.kind != "session":
                    s = unwrap(start, ts)
                    assert s <= ts < s + length, (window, ts, start)
            if window.kind == "tumbling":
                assert len(got) == 1

    items = st.lists(
        st.one_of(times, times, times, st.tuples(st.just("wm"), times)), max_size=40
    )

    @settings(max_examples=150, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(assigners(), st.one_of(st.just(0), lengths), items, st.booleans())
    def operator(made, lateness, stream, one_key):
        window, _ = made
        op = WindowOperator(window, key="k", event_time="ts", aggs=["count"],
                            allowed_lateness=lateness)
        records = [it for it in stream if not isinstance(it, tuple)]
        if not records:
            return
        positions, marks, n = [], [], 0
        for it in stream:
            if isinstance(it, tuple):
                positions.append(n)
                marks.append(it[1])
            else:
                n += 1
        # one key: sessions merge and windows are shared; else a key per record, so
        # that each result row names the record in it
        keys = [0] * n if one_key else list(range(n))
        batch = pa.record_batch({{"k": keys, "ts": pa.array(records, pa.int64()),
                                  "rid": list(range(n))}})
        out = op.process(batch, {{"position": positions, "watermark": marks}})
        fin = op.finish()
        late = out.late.column("rid").to_pylist()
        dropped = out.dropped.column("rid").to_pylist()
        assert len(set(late)) == len(late) and len(set(dropped)) == len(dropped)
        assert not set(late) & set(dropped)
        placed = set(range(n)) - set(late) - set(dropped)
        rows = out.results.to_pylist() + fin.results.to_pylist()
        if one_key:
            assert bool(rows) == bool(placed)
            most = {{}}
            for r in rows:
                w = (r["window_start"], r["window_end"])
                most[w] = max(most.get(w, 0), r["count"])
            # every placed record is in the last firing of its windows
            assert sum(most.values()) >= len(placed)
        else:
            assert {{r["k"] for r in rows}} == placed

    assign()
    operator()
    print("ok")
    """
).format(cap=CAP_BYTES)


def test_extreme_parameters_under_a_memory_cap() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=TIME_LIMIT_S,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), (
        f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    )
