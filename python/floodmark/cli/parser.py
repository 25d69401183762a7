"""The ``floodmark`` argument parser: ``demo``, ``run`` and ``analyze``.

Parsing only: it imports the option-value parsers of :mod:`floodmark.cli.args` and
nothing that starts Spark or draws charts, so ``floodmark --help`` and argument errors
are instant.
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from collections.abc import Sequence
from typing import NoReturn

from floodmark.cli.args import (
    DEFAULT_BOUND,
    DEFAULT_LATENESS,
    FORMATS,
    parse_agg,
    parse_duration,
    parse_duration_list,
    parse_fraction,
    parse_master,
    parse_positive_duration,
    parse_positive_duration_list,
    parse_window,
    positive_int,
)
from floodmark.cli.errors import UsageError
from floodmark.strategy import DEFAULT_EMIT_INTERVAL
from floodmark.time import TICKS_PER_SECOND, format_duration
from floodmark.vocabulary import AGG_FUNCTIONS

_EXAMPLES = """\
examples:
  floodmark demo                          # 1M generated rows, local Spark
  floodmark demo --rows 100000 --output /tmp/demo
  floodmark demo --live                   # a live query, simulated Kafka broker
  floodmark run events.parquet --event-time ts --channel partition \\
      --arrival broker_ts --key user --bound 5s --idle 1m \\
      --window tumbling:10s --agg count --agg sum:amount --output out/
  floodmark analyze events.parquet --event-time ts --channel partition \\
      --arrival broker_ts --key user --bounds 0s,1s,2s,5s,10s,30s \\
      --idle 30s,1m --max-late 0.01 --output analysis/
"""

_OUTPUTS = """\
outputs: written into a hidden staging folder inside --output and moved into
place at the end; --output/_FLOODMARK says which command wrote them and
"complete": true once they are all in place (an interrupted or failed run
leaves the previous outputs as they were). A non-empty folder without
_FLOODMARK is refused unless --overwrite.
"""


def epilog(analyze: bool = False) -> str:
    """The help's footer: examples, how values are written (``analyze`` sweeps
    tumbling and sliding windows and takes no aggregates), the outputs."""
    windows = ["tumbling:10s", "sliding:10s,2s", *([] if analyze else ["session:5s"])]
    forms = f"durations: 1500us, 200ms, 5s, 1.5s, 1m, 1h   windows: {', '.join(windows)}"
    if not analyze:
        forms += "   aggregates: count, FUNCTION:COLUMN with FUNCTION one of " + ", ".join(
            AGG_FUNCTIONS
        )
    return f"{_EXAMPLES}\n{textwrap.fill(forms, width=79)}\n\n{_OUTPUTS}"


#: The footer of ``floodmark``, ``run`` and ``demo``.
EPILOG = epilog()


#: A value that argparse would take for an option (``-1s``, ``-.5s``): a negative
#: duration or fraction, refused by its own parser with the reason.
_NEGATIVE = re.compile(r"^-[\d.]")


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (no usage dump), exit code 2."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        return super().parse_known_args(
            self._attached(sys.argv[1:] if args is None else args), namespace
        )

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        """As argparse's, but an argument left over is refused by the subcommand's
        parser, whose ``--help`` lists what it takes (argparse refuses it from the top
        parser, pointing at ``floodmark --help``)."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self._subcommand(parsed).error("unrecognized arguments: " + " ".join(extras))
        return parsed

    def _subcommand(self, parsed: argparse.Namespace) -> argparse.ArgumentParser:
        """The parser of the subcommand ``parsed`` came through, or this one."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                found = action.choices.get(str(getattr(parsed, action.dest or "", "")))
                if isinstance(found, argparse.ArgumentParser):
                    return found
        return self

    def _attached(self, args: Sequence[str]) -> list[str]:
        """``--bound -1s`` as ``--bound=-1s``, so that argparse hands ``-1s`` to the
        value's parser (which says it is negative) instead of failing with "expected one
        argument". Only after this parser's own options that take one value."""
        out: list[str] = []
        for arg in args:
            action = self._own_option(out[-1]) if out else None
            if action is not None and action.nargs is None and _NEGATIVE.match(arg):
                out[-1] = f"{out[-1]}={arg}"
            else:
                out.append(arg)
        return out

    def _own_option(self, name: str) -> argparse.Action | None:
        """The action of option ``name``, or of the one long option it abbreviates
        (``--bou`` for ``--bound``), as argparse itself would resolve it."""
        if name in self._option_string_actions:
            return self._option_string_actions[name]
        if not (self.allow_abbrev and name.startswith("--")) or "=" in name:
            return None
        found = {a for o, a in self._option_string_actions.items() if o.startswith(name)}
        return found.pop() if len(found) == 1 else None

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
        choices=tuple(TICKS_PER_SECOND),
        help="unit of an integer event-time column (default: ms); on a timestamp column, "
        "ms or s computes in those ticks (watermarks on a millisecond, as Flink shows "
        "them; default: us)",
    )
    g.add_argument(
        "--arrival-unit",
        choices=tuple(TICKS_PER_SECOND),
        help="unit of an integer --arrival column (default: ms); on a timestamp column, "
        "the ticks the emission grid and idle timeouts count in (default: us)",
    )
    g.add_argument(
        "--format", choices=FORMATS, help="input format (default: from the file extension)"
    )


def _emission_and_window(
    p: argparse.ArgumentParser | argparse._ArgumentGroup, *, session: bool = True
) -> None:
    p.add_argument(
        "--emit-interval",
        type=parse_positive_duration,
        default=DEFAULT_EMIT_INTERVAL,
        help=f"watermark emission interval (default: {format_duration(DEFAULT_EMIT_INTERVAL)})",
    )
    forms = "tumbling:SIZE, sliding:SIZE,SLIDE" + (" or session:GAP" if session else "")
    p.add_argument(
        "--window",
        type=parse_window,
        default=parse_window("tumbling:10s"),
        help=f"{forms} (default: tumbling:10s)",
    )


def _output(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument(
        "--output",
        default=default,
        metavar="DIR",
        help=f"output folder (default: ./{default}); written whole or not at all",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="write into --output even if it holds files floodmark did not write "
        "(floodmark's own outputs in it are replaced, other files are kept)",
    )


def _spark(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--master",
        type=parse_master,
        default="local[*]",
        help="Spark master (default: local[*]); with a cluster, --output must be a folder "
        "the driver and every executor see (one machine, or a shared mount)",
    )
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
        "--rows",
        type=positive_int,
        default=None,
        help="rows to generate (default: 1,000,000; with --live 100,000)",
    )
    demo.add_argument(
        "--live",
        action="store_true",
        help="run a live Structured Streaming query over a simulated Kafka broker "
        "(8 partitions), one line per micro-batch next to Spark's own watermark, "
        "then the report (needs pip install 'floodmark[kafka]')",
    )
    _output(demo, "floodmark-demo")
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
        default=DEFAULT_BOUND,
        help=f"out-of-orderness bound (default: {format_duration(DEFAULT_BOUND)})",
    )
    w.add_argument(
        "--idle",
        type=parse_positive_duration,
        default=None,
        help="idle timeout of a channel (default: none)",
    )
    _emission_and_window(w)
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
        default=DEFAULT_LATENESS,
        help="keep fired windows this long for late re-fires "
        f"(default: {format_duration(DEFAULT_LATENESS)})",
    )
    _output(run, "floodmark-output")
    _spark(run)

    an = sub.add_parser(
        "analyze",
        help="choose a bound: late records vs firing delay",
        formatter_class=_formatter,
        epilog=epilog(analyze=True),
        description="Replay INPUT with each candidate bound (and idle "
        "timeout); print the late\nfraction and firing delay of each, "
        "recommend the smallest bound meeting\n--max-late, and write a "
        "chart and an HTML page. Late here: behind the watermark\nwhen it "
        "arrived (at least run's late/, the records too late for every "
        "window).",
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
        type=parse_positive_duration_list,
        default=None,
        help="idle timeouts to try, e.g. 30s,1m (default: none)",
    )
    an.add_argument(
        "--max-late",
        type=parse_fraction,
        default=0.01,
        help="acceptable late fraction, e.g. 0.01 or 1%% (default: 0.01)",
    )
    _emission_and_window(an, session=False)
    _output(an, "floodmark-analysis")
    _spark(an)
    return parser


__all__ = ["EPILOG", "Parser", "build_parser"]
