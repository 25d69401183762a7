"""The keyed operator's late and dropped rows are joined back to the input after the
input is narrowed to rows that can be emitted (floodmark.spark.windows.side_outputs). The
narrowing must never lose a row: on streams built to hit its edges (session windows,
sliding windows with gaps, lateness that wraps past Long.MAX_VALUE, event times at the
ends of the long range), the outputs equal those of the join over the whole input."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from spark_helpers import outputs

from floodmark import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    WatermarkStrategy,
)
from floodmark.spark import window_aggregate, windows
from floodmark.time import I64_MAX, I64_MIN

MS = timedelta(milliseconds=1)
BOUNDED = WatermarkStrategy.for_bounded_out_of_orderness(5 * MS)
SESSIONS = EventTimeSessionWindows.with_gap(20 * MS)
GAPS = SlidingEventTimeWindows.of(10 * MS, 25 * MS)  # 15 ms of every 25 in no window


def stream(seed: int, extra: list[int] | None = None) -> pa.Table:
    """Two channels, one lagging, with late records; ``extra`` event times appended."""
    rng = random.Random(seed)
    rows = []
    for i in range(400):
        channel = i % 2
        ts = i * 2 - (60 if channel else 0) + rng.randint(-8, 8)
        if rng.random() < 0.05:
            ts -= rng.randint(30, 200)  # late
        rows.append((channel, ts, i * 2, rng.randint(0, 3), i))
    for j, ts in enumerate(extra or []):
        rows.append((j % 2, ts, 800 + j, 0, j))
    cols = list(zip(*rows, strict=True))
    names = ["partition", "event_time", "arrival", "key", "value"]
    return pa.table({n: pa.array(c, pa.int64()) for n, c in zip(names, cols, strict=True)})


def spied(fn: Callable[..., Any], seen: dict[str, bool], kind: str) -> Callable[..., Any]:
    """``fn``, noting in ``seen[kind]`` whether it narrowed the input (gave a filter)."""

    def call(*args: Any) -> Any:
        column = fn(*args)
        seen[kind] = column is not None
        return column

    return call


CASES = {
    "sessions": {"window": SESSIONS},
    "sessions-lateness": {"window": SESSIONS, "allowed_lateness": 15 * MS},
    "sliding-gaps": {"window": GAPS},
    "sliding-gaps-lateness": {"window": GAPS, "allowed_lateness": 40 * MS},
    # ts + L wraps past MAX for every ts > 10: Flink's isElementLate says late
    "sliding-gaps-wrapping-lateness": {"window": GAPS, "allowed_lateness": I64_MAX - 10},
    "tumbling-mean": {"window": TumblingEventTimeWindows.of(10 * MS), "mean": True},
}
EXTREMES = [I64_MIN, I64_MIN + 1, I64_MIN + 7, -(1 << 62) - 1, (1 << 62) + 1, I64_MAX - 3, I64_MAX]


@pytest.mark.parametrize("extremes", [False, True], ids=["plain", "extremes"])
@pytest.mark.parametrize("case", list(CASES))
def test_narrowed_join_equals_the_whole_input_join(
    spark: Any, monkeypatch: pytest.MonkeyPatch, case: str, extremes: bool, tmp_path: Path
) -> None:
    kw = dict(CASES[case])
    window = kw.pop("window")
    aggs: list[Any] = ["count", ("sum", "value")] + (
        [("mean", "value")] if kw.pop("mean", 0) else []
    )
    table = stream(len(case), EXTREMES if extremes else None)
    df = spark.createDataFrame(table)
    if extremes:  # a file: Spark's optimizer rewrites its plans as a local relation's not
        pq.write_table(table, tmp_path / "stream.parquet")
        df = spark.read.parquet(str(tmp_path / "stream.parquet"))

    def run() -> dict[str, Counter[tuple[Any, ...]]]:
        out = window_aggregate(
            df,
            BOUNDED,
            window,
            key="key",
            event_time="event_time",
            channel="partition",
            arrival="arrival",
            aggs=aggs,
            emit_interval=10 * MS,
            **kw,
        )
        assert out.cached is not None, "expected the keyed operator"
        return outputs(out)

    narrowed: dict[str, bool] = {}
    with monkeypatch.context() as m:
        for kind in ("late", "dropped"):
            name = f"{kind}_candidates"
            m.setattr(windows, name, spied(getattr(windows, name), narrowed, kind))
        got = run()
    assert narrowed == {"late": True, "dropped": True}, "expected both inputs narrowed"
    with monkeypatch.context() as m:
        m.setattr(windows, "late_candidates", lambda *args: None)
        m.setattr(windows, "dropped_candidates", lambda *args: None)
        assert run() == got
    assert sum(got["late"].values()) > 0
    if case.startswith("sliding-gaps"):
        reasons = Counter(r[-1] for r in got["dropped"].elements())
        assert reasons["no_window"] > 0 or "wrapping" in case, reasons
    if case == "sliding-gaps-wrapping-lateness":
        late_ts = {r[1] for r in got["late"].elements()}
        assert any(ts > 10 for ts in late_ts), "the wrapped lateness made none late"
    if extremes and not case.startswith("sessions"):
        reasons = Counter(r[-1] for r in got["dropped"].elements())
        assert reasons["min_event_time"] == 1, reasons
