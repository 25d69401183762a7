"""User watermark generators (Flink's ``WatermarkGenerator`` protocol) for the tests."""

from __future__ import annotations

from floodmark.generator import WatermarkOutput

MIN = -(2**63)


class BoundedPy:
    """Flink's BoundedOutOfOrdernessWatermarks, written as a user generator."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.max_ts = MIN + bound + 1

    def on_event(self, timestamp: int, output: WatermarkOutput) -> None:
        self.max_ts = max(self.max_ts, timestamp)

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        output.emit_watermark(self.max_ts - self.bound - 1)
