"""floodmark.replay on streams whose combined timeline is empty."""

from __future__ import annotations

import pyarrow as pa

from floodmark import TumblingEventTimeWindows, WatermarkStrategy
from floodmark.replay import replay

I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def test_a_strategy_that_never_emits_leaves_every_record_before_any_watermark() -> None:
    table = pa.table({"chan": [0, 0, 1], "ev": [1, 2, 15], "arr": [1, 2, 3], "k": [0, 0, 0]})
    out = replay(
        table,
        WatermarkStrategy.no_watermarks(),
        channel="chan",
        arrival="arr",
        event_time="ev",
        window=TumblingEventTimeWindows.of(10),
        key="k",
    )
    assert out.timeline.num_rows == 0
    assert out.records["watermark"].to_pylist() == [I64_MIN] * 3
    assert out.records["is_late"].to_pylist() == [False] * 3
    assert out.late.num_rows == 0
    fired = [(r["window_start"], r["count"], r["watermark"]) for r in out.results.to_pylist()]
    assert fired == [(0, 2, I64_MAX), (10, 1, I64_MAX)]  # at the end of input
