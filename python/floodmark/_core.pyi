"""Type stubs for the native module ``floodmark._core`` (hand-written, checked by stubtest)."""

__version__: str

# --- watermark -------------------------------------------------------------------

# --- windows ---------------------------------------------------------------------

from typing import Any, final

def window_check(kind: str, size: int, slide: int, offset: int, gap: int) -> None: ...
def window_assign(
    kind: str, size: int, slide: int, offset: int, gap: int, timestamp: int
) -> list[tuple[int, int]]: ...
def window_start_with_offset(timestamp: int, offset: int, size: int) -> int: ...
def merge_windows(
    windows: list[tuple[int, int]],
) -> list[tuple[list[tuple[int, int]], tuple[int, int]]]: ...

@final
class WindowOperator:
    def __new__(
        cls,
        kind: str,
        size: int,
        slide: int,
        offset: int,
        gap: int,
        allowed_lateness: int,
        key_names: list[str],
        event_time: str,
        value_names: list[str],
        aggs: list[tuple[str, int | None]],
        agg_names: list[str],
        arrival: str | None = None,
    ) -> WindowOperator: ...
    def process(
        self,
        batch: Any,
        positions: list[int],
        watermarks: list[int],
        times: list[int | None],
    ) -> tuple[Any, Any, Any, Any, Any]: ...
    def advance(
        self, watermark: int, time: int | None = None
    ) -> tuple[Any, Any, Any, Any, Any]: ...
    def finish(self, time: int | None = None) -> tuple[Any, Any, Any, Any, Any]: ...
    def snapshot(self) -> bytes: ...
    def restore(self, data: bytes) -> None: ...
    @property
    def watermark(self) -> int: ...
    @property
    def position(self) -> int: ...
    @property
    def live_windows(self) -> int: ...
