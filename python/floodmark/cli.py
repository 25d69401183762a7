"""The ``floodmark`` command: ``demo``, ``run`` and ``analyze``.

Argument handling only; the work is in :mod:`floodmark.cli_commands` (which starts
Spark). Every user error ends with exit code 2 and one line
``floodmark: error: <what is wrong and how to fix it>``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import timedelta
from typing import NoReturn

from floodmark.cli_args import (
    FORMATS,
    parse_agg,
    parse_duration,
    parse_duration_list,
    parse_fraction,
    parse_window,
    positive_int,
)

EPILOG = """\
examples:
  floodmark demo                          # 1M generated rows, local Spark
  floodmark demo --rows 100000 --output /tmp/demo
  floodmark run events.parquet --event-time ts --channel partition \\
      --arrival broker_ts --key user --bound 5s --idle 1m \\
      --window tumbling:10s --agg count --agg sum:amount --output out/
  floodmark analyze events.parquet --event-time ts --channel partition \\
      --arrival broker_ts --key user --bounds 0s,1s,2s,5s,10s,30s \\
      --idle 30s,1m --max-late 0.01 --output analysis/

durations: 1500us, 200ms, 5s, 1.5s, 1m, 1h   windows: tumbling:10s,
sliding:10s,2s, session:5s   aggregates: count, FUNCTION:COLUMN with FUNCTION
one of sum, min, max, mean, first, last
"""


class UsageError(Exception):
    """A user error: printed as one ``floodmark: error:`` line, exit code 2."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (no usage dump), exit code 2."""

    def error(self, message: str) -> NoReturn:
        hint = f" (see {self.prog} --help)"
        raise UsageError(message + hint)


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, width=80, max_help_position=30)


def _columns(p: argparse.ArgumentParser, *, window: bool) -> None:
    g = p.add_argument_group("columns")
    g.add_argument("--event-time", required=True, metavar="COL", help="event-time column")
    g.add_argument(
        "--channel",
        required=True,
        metavar="COL",
        help="input channel column, e.g. the Kafka partition",
    )
    g.add_argument(
        "--arrival",
        metavar="COL",
        help="arrival (processing) time column, e.g. the broker timestamp "
        "(default: row order within each channel, one row = 1 ms)",
    )
    g.add_argument(
        "--key",
        action="append",
        metavar="COL",
        required=window,
        help="window key column (repeat for several)",
    )
    g.add_argument(
        "--event-time-unit",
        choices=("s", "ms", "us", "ns"),
        default="ms",
        help="unit of an integer event-time column (default: ms)",
    )
    g.add_argument(
        "--arrival-unit",
        choices=("s", "ms", "us", "ns"),
        default="ms",
        help="unit of an integer arrival column (default: ms)",
    )
    g.add_argument(
        "--format", choices=FORMATS, help="input format (default: from the file extension)"
    )


def _spark(p: argparse.ArgumentParser) -> None:
    p.add_argument("--master", default="local[*]", help="Spark master (default: local[*])")
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def build_parser() -> Parser:
    """The ``floodmark`` argument parser."""
    parser = Parser(
        prog="floodmark",
        description="Apache Flink's event-time semantics (per-partition watermarks, "
        "idleness,\nwindows, late records) on Spark, with a report.",
        epilog=EPILOG,
        formatter_class=_formatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = sub.add_parser(
        "demo",
        help="run on a generated stream and write a report",
        formatter_class=_formatter,
        description=(
            "Generate a Kafka-like stream (16 partitions, one lagging, "
            "one quiet,\na trickle of very late records), run the "
            "pipeline, print a summary and\ncompare with what Spark's "
            "own watermark would have dropped."
        ),
    )
    demo.add_argument(
        "--rows", type=positive_int, default=1_000_000, help="rows to generate (default: 1,000,000)"
    )
    demo.add_argument(
        "--output",
        default="floodmark-demo",
        metavar="DIR",
        help="output folder (default: ./floodmark-demo)",
    )
    _spark(demo)

    run = sub.add_parser(
        "run",
        help="watermarks and windows over a file",
        formatter_class=_formatter,
        epilog=EPILOG,
        description="Run the pipeline over INPUT; write results/, late/, "
        "dropped/ (Parquet)\nand report/ into --output.",
    )
    run.add_argument("input", metavar="INPUT", help="Parquet/CSV/JSON file or folder")
    _columns(run, window=True)
    w = run.add_argument_group("watermarks and windows")
    w.add_argument("--value", metavar="COL", help="value column for --agg FUNCTION")
    w.add_argument(
        "--bound",
        type=parse_duration,
        default=timedelta(seconds=5),
        help="out-of-orderness bound (default: 5s)",
    )
    w.add_argument(
        "--idle",
        type=parse_duration,
        default=None,
        help="idle timeout of a channel (default: none)",
    )
    w.add_argument(
        "--emit-interval",
        type=parse_duration,
        default=timedelta(milliseconds=200),
        help="watermark emission interval (default: 200ms)",
    )
    w.add_argument(
        "--window",
        type=parse_window,
        default=parse_window("tumbling:10s"),
        help="tumbling:SIZE, sliding:SIZE,SLIDE or session:GAP (default: tumbling:10s)",
    )
    w.add_argument(
        "--agg",
        type=parse_agg,
        action="append",
        metavar="AGG",
        help="count or FUNCTION:COLUMN, repeatable (default: count)",
    )
    w.add_argument(
        "--allowed-lateness",
        type=parse_duration,
        default=timedelta(0),
        help="keep fired windows this long for late re-fires (default: 0s)",
    )
    run.add_argument(
        "--output",
        default="floodmark-output",
        metavar="DIR",
        help="output folder (default: ./floodmark-output)",
    )
    _spark(run)

    an = sub.add_parser(
        "analyze",
        help="choose a bound: late records vs firing delay",
        formatter_class=_formatter,
        epilog=EPILOG,
        description="Replay INPUT with each candidate bound (and idle "
        "timeout); print the late\nfraction and firing delay of each, "
        "recommend the smallest bound meeting\n--max-late, and write a "
        "chart and an HTML page.",
    )
    an.add_argument("input", metavar="INPUT", help="Parquet/CSV/JSON file or folder")
    _columns(an, window=True)
    an.add_argument(
        "--bounds",
        type=parse_duration_list,
        default=parse_duration_list("0s,1s,2s,5s,10s,30s"),
        help="candidate bounds (default: 0s,1s,2s,5s,10s,30s)",
    )
    an.add_argument(
        "--idle",
        type=parse_duration_list,
        default=None,
        help="idle timeouts to try, e.g. 30s,1m (default: none)",
    )
    an.add_argument(
        "--emit-interval",
        type=parse_duration,
        default=timedelta(milliseconds=200),
        help="watermark emission interval (default: 200ms)",
    )
    an.add_argument(
        "--max-late",
        type=parse_fraction,
        default=0.01,
        help="acceptable late fraction, e.g. 0.01 or 1%% (default: 0.01)",
    )
    an.add_argument(
        "--window",
        type=parse_window,
        default=parse_window("tumbling:10s"),
        help="window (default: tumbling:10s)",
    )
    an.add_argument(
        "--output",
        default="floodmark-analysis",
        metavar="DIR",
        help="output folder (default: ./floodmark-analysis)",
    )
    _spark(an)
    return parser


def fail(message: str) -> int:
    """Print the one error line and return exit code 2."""
    sys.stderr.write(f"floodmark: error: {message}\n")
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``floodmark`` command.

    Args:
        argv: the arguments (default: ``sys.argv[1:]``).

    Returns:
        The exit code: 0 on success, 2 on a user error (one line on stderr).
    """
    from floodmark.exceptions import FloodmarkError

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as err:
        return fail(str(err))
    except SystemExit as err:  # --help
        return int(err.code or 0)
    from floodmark import cli_commands

    try:
        return cli_commands.dispatch(args)
    except (UsageError, FloodmarkError) as err:
        return fail(str(err))
    except KeyboardInterrupt:
        sys.stderr.write("floodmark: interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
