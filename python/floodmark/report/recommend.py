"""Choosing an out-of-orderness bound from a bound sweep (``floodmark analyze``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from floodmark.report.figures import label


@dataclass(frozen=True)
class Recommendation:
    """The chosen row of the sweep."""

    bound: Any
    idle_timeout: Any
    late_fraction: float
    delay_median_s: float
    delay_p99_s: float
    #: Windows that fired before the end of the input (None: not known).
    windows: int | None = None

    def sentence(self, max_late: float) -> str:
        """One line for the terminal and the report."""
        idle = "" if self.idle_timeout is None else f" --idle {label(self.idle_timeout)}"
        if self.windows == 0:
            delay = "; no window fired before the end of the input at this bound"
        elif math.isnan(self.delay_median_s):
            delay = "; no firing delay without --arrival"
        else:
            delay = (
                f", firing delay median {self.delay_median_s:.2f} s, p99 {self.delay_p99_s:.2f} s"
            )
        return (
            f"recommended: --bound {label(self.bound)}{idle} "
            f"(late {100 * self.late_fraction:.3g} % <= {100 * max_late:.3g} %{delay})"
        )


def _key(value: Any) -> float:
    """Sort key of a bound or timeout: durations and numbers of seconds."""
    if value is None:
        return math.inf
    if hasattr(value, "total_seconds"):
        return float(value.total_seconds())
    return float(value)


def recommend_bound(analysis: pa.Table, max_late: float) -> Recommendation | None:
    """The smallest bound whose late fraction is at most ``max_late``.

    Among rows with that bound (one per idle timeout), the lowest late fraction wins,
    then the lowest p99 firing delay, then the shortest idle timeout. Rows with a
    missing (NaN) late fraction never qualify.

    Returns:
        The recommendation, or None when no bound meets ``max_late``.
    """
    rows = analysis.to_pylist()
    ok = [
        r
        for r in rows
        if r["late_fraction"] is not None
        and not math.isnan(r["late_fraction"])
        and r["late_fraction"] <= max_late
    ]
    if not ok:
        return None

    def p99(r: dict[str, Any]) -> float:
        v = r["delay_p99_s"]
        return math.inf if v is None or math.isnan(v) else float(v)

    best = min(
        ok,
        key=lambda r: (_key(r["bound"]), r["late_fraction"], p99(r), _key(r["idle_timeout"])),
    )
    return Recommendation(
        best["bound"],
        best["idle_timeout"],
        float(best["late_fraction"]),
        float(best["delay_median_s"] if best["delay_median_s"] is not None else math.nan),
        float(best["delay_p99_s"] if best["delay_p99_s"] is not None else math.nan),
        best.get("windows"),
    )


__all__ = ["Recommendation", "recommend_bound"]
