"""Parsers for the command line's option values: durations, window specs, aggregates.

Each parser raises :class:`argparse.ArgumentTypeError` with a message that says what
is wrong and how to write it instead, so ``argparse`` turns it into one error line.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from datetime import timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any

from floodmark.time import MICROS_PER_SUFFIX, format_duration
from floodmark.vocabulary import AGG_FUNCTIONS

#: The command line's out-of-orderness bound and allowed lateness when none is given
#: (``floodmark run`` and the demo's pipeline).
DEFAULT_BOUND = timedelta(seconds=5)
DEFAULT_LATENESS = timedelta(0)

#: Duration suffixes the command line reads, and their length in microseconds: those
#: floodmark writes, and ``min`` for minutes.
DURATION_UNITS: dict[str, int] = {**MICROS_PER_SUFFIX, "min": MICROS_PER_SUFFIX["m"]}
FORMATS = ("parquet", "csv", "json")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]+)\s*$")
_EXAMPLES = "e.g. 1500us, 200ms, 5s, 1.5s, 1m, 1h"


def parse_duration(text: str) -> timedelta:
    """Parse ``"5s"``, ``"200ms"``, ``"1m"``, ``"1h"``, ``"1500us"``, ``"1.5s"``.

    Args:
        text: a non-negative number followed by a unit (us, ms, s, m/min, h, d).

    Returns:
        The duration, to the microsecond.

    Raises:
        argparse.ArgumentTypeError: the text is not such a duration.
    """
    match = _DURATION.match(text.lower())
    if not match:
        if re.match(r"^\s*-", text):
            raise argparse.ArgumentTypeError(f"duration {text!r} is negative; use 0s or more")
        if re.match(r"^\s*\d+(\.\d*)?\s*$", text):
            raise argparse.ArgumentTypeError(
                f"duration {text!r} has no unit; write e.g. {text.strip()}s or {text.strip()}ms"
            )
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration; write {_EXAMPLES}")
    number, unit = match.groups()
    if unit not in DURATION_UNITS:
        raise argparse.ArgumentTypeError(
            f"duration {text!r} has an unknown unit {unit!r}; use one of "
            f"{', '.join(sorted(DURATION_UNITS, key=DURATION_UNITS.__getitem__))} ({_EXAMPLES})"
        )
    micros = Fraction(number) * DURATION_UNITS[unit]  # exact: 1.005s is 1,005,000 us
    if micros.denominator != 1:
        raise argparse.ArgumentTypeError(
            f"duration {text!r} is finer than a microsecond; round it to whole microseconds"
        )
    try:
        return timedelta(microseconds=int(micros))
    except OverflowError:
        raise argparse.ArgumentTypeError(
            f"duration {text!r} is longer than Python's timedelta allows (999,999,999 days)"
        ) from None


def parse_positive_duration(text: str) -> timedelta:
    """Parse a duration that must be longer than zero (an idle timeout, an emission
    interval): as :func:`parse_duration`, and ``0s`` is refused."""
    value = parse_duration(text)
    if value <= timedelta(0):
        raise argparse.ArgumentTypeError(f"duration {text!r} must be positive, e.g. 200ms or 1m")
    return value


def parse_duration_list(text: str) -> list[timedelta]:
    """Parse a comma-separated list of durations, e.g. ``"0s,1s,5s"`` (sorted, unique)."""
    parts = [p for p in text.split(",") if p.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f"{text!r} is empty; give durations like 0s,1s,5s")
    return sorted({parse_duration(p) for p in parts})


def parse_positive_duration_list(text: str) -> list[timedelta]:
    """As :func:`parse_duration_list`, each duration longer than zero (``30s,1m``)."""
    values = parse_duration_list(text)
    if values[0] <= timedelta(0):
        raise argparse.ArgumentTypeError(f"{text!r}: every duration must be positive, e.g. 30s,1m")
    return values


@dataclass(frozen=True)
class WindowSpec:
    """A window given on the command line: ``tumbling:10s``, ``sliding:10s,2s``,
    ``session:5s``."""

    kind: str
    size: timedelta
    slide: timedelta | None = None

    def describe(self) -> str:
        """The spec as the user wrote it (normalised)."""
        if self.kind == "sliding" and self.slide is not None:
            return f"sliding:{format_duration(self.size)},{format_duration(self.slide)}"
        return f"{self.kind}:{format_duration(self.size)}"

    def build(self) -> Any:
        """The floodmark window assigner (imports the native engine)."""
        from floodmark import (  # type: ignore[attr-defined,unused-ignore]
            EventTimeSessionWindows,
            SlidingEventTimeWindows,
            TumblingEventTimeWindows,
        )

        if self.kind == "tumbling":
            return TumblingEventTimeWindows.of(self.size)
        if self.kind == "sliding":
            assert self.slide is not None, "a sliding window spec always has a slide"
            return SlidingEventTimeWindows.of(self.size, self.slide)
        return EventTimeSessionWindows.with_gap(self.size)


def parse_window(text: str) -> WindowSpec:
    """Parse ``tumbling:SIZE``, ``sliding:SIZE,SLIDE`` or ``session:GAP``."""
    kind, _, rest = text.partition(":")
    kind = kind.strip().lower()
    forms = "tumbling:10s, sliding:10s,2s or session:5s"
    if kind not in ("tumbling", "sliding", "session") or not rest:
        raise argparse.ArgumentTypeError(f"{text!r} is not a window; write {forms}")
    parts = rest.split(",")
    if kind == "sliding":
        if len(parts) != 2:
            raise argparse.ArgumentTypeError(
                f"{text!r}: a sliding window needs a size and a slide, e.g. sliding:10s,2s"
            )
        size, slide = parse_duration(parts[0]), parse_duration(parts[1])
        if slide <= timedelta(0) or size <= timedelta(0):
            raise argparse.ArgumentTypeError(f"{text!r}: size and slide must be positive")
        return WindowSpec(kind, size, slide)
    if len(parts) != 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a {kind} window takes one duration")
    size = parse_duration(parts[0])
    if size <= timedelta(0):
        what = "gap" if kind == "session" else "size"
        raise argparse.ArgumentTypeError(f"{text!r}: the window {what} must be positive")
    return WindowSpec(kind, size)


Agg = str | tuple[str, str]


def parse_agg(text: str) -> Agg:
    """Parse ``count`` or ``FUNCTION:COLUMN`` (``sum:value``); a bare ``FUNCTION``
    means "over the ``--value`` column" and is returned as ``(FUNCTION, "")``."""
    fn, sep, column = text.partition(":")
    fn = fn.strip().lower()
    if fn == "count" and not column:
        return "count"
    if fn not in AGG_FUNCTIONS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an aggregate; use count or FUNCTION:COLUMN with FUNCTION one "
            f"of {', '.join(AGG_FUNCTIONS)} (e.g. sum:value)"
        )
    if sep and not column.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: name the column after the colon")
    return (fn, column.strip())


def resolve_aggs(aggs: list[Agg] | None, value: str | None) -> list[Agg]:
    """Fill in ``--value`` for aggregates given without a column (default: count).

    Raises:
        ValueError: a bare function but no ``--value`` column.
    """
    out: list[Agg] = []
    for agg in aggs or ["count"]:
        if isinstance(agg, tuple) and not agg[1]:
            if not value:
                raise ValueError(
                    f"--agg {agg[0]} has no column; write --agg {agg[0]}:COLUMN or add "
                    "--value COLUMN"
                )
            agg = (agg[0], value)
        if agg not in out:
            out.append(agg)
    return out


def parse_fraction(text: str) -> float:
    """Parse a fraction in ``[0, 1]``, also written as a percentage (``1%``)."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a fraction; write e.g. 0.01 or 1%"
        ) from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not between 0 and 1 (0% and 100%)")
    return value


#: The Spark master URLs ``spark-submit`` takes (a wrong one made the JVM print a stack
#: trace and PySpark say only that its gateway exited).
_MASTER = re.compile(
    r"local(\[(\*|[1-9]\d*)(\s*,\s*\d+)?\])?|local-cluster\[\s*\d+\s*,\s*\d+\s*,\s*\d+\s*\]"
    r"|(spark|k8s)://.+|yarn"
)


def parse_master(text: str) -> str:
    """Check a Spark master URL before Spark starts."""
    if not _MASTER.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a Spark master; give local, local[N], local[*], "
            "spark://HOST:PORT, k8s://HOST:PORT or yarn"
        )
    return text


def positive_int(text: str) -> int:
    """Parse a positive integer; ``1_000_000`` and ``1,000,000`` are accepted."""
    try:
        value = int(text.replace(",", "").replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return value


def data_files(folder: Path) -> list[Path]:
    """The files Spark reads from ``folder``: every file below it whose name, and the
    names of the folders between, start with neither ``_`` nor ``.``."""
    found = []
    for path in sorted(folder.rglob("*")):
        parts = path.relative_to(folder).parts
        if path.is_file() and not any(p.startswith(("_", ".")) for p in parts):
            found.append(path)
    return found


def infer_format(path: str) -> str:
    """The input format from a file's (or a folder's files') extension.

    Raises:
        ValueError: the format cannot be told; the message says to pass ``--format``.
    """
    suffixes = {
        ".parquet": "parquet",
        ".pq": "parquet",
        ".csv": "csv",
        ".json": "json",
        ".jsonl": "json",
        ".ndjson": "json",
    }
    p = Path(path)
    found = {suffixes[s.lower()] for s in p.suffixes[-1:] if s.lower() in suffixes}
    if not found and p.is_dir():
        # Spark skips names starting with "_" or "." (_delta_log/, _spark_metadata/,
        # .crc files) when it reads a folder: so does the format's guess.
        found = {suffixes[f.suffix.lower()] for f in data_files(p) if f.suffix.lower() in suffixes}
    if len(found) != 1:
        what = "mixed formats" if found else "no .parquet, .csv or .json extension"
        raise ValueError(
            f"cannot tell the format of {path} ({what}); pass --format parquet, csv or json"
        )
    return found.pop()


__all__ = [
    "FORMATS",
    "Agg",
    "WindowSpec",
    "infer_format",
    "parse_agg",
    "parse_duration",
    "parse_duration_list",
    "parse_fraction",
    "parse_master",
    "parse_positive_duration",
    "parse_positive_duration_list",
    "parse_window",
    "positive_int",
    "resolve_aggs",
]
