"""The ``floodmark`` command: ``demo``, ``run`` and ``analyze``.

Modules: :mod:`~floodmark.cli.parser` (the argument parser),
:mod:`~floodmark.cli.args` (option values: durations, windows, aggregates),
:mod:`~floodmark.cli.errors` (the one-line user errors),
:mod:`~floodmark.cli.inputs` (checking and reading the input),
:mod:`~floodmark.cli.outputs` (the output folder: staging, marker, refusals),
:mod:`~floodmark.cli.console` (the JVM's console lines, Spark's progress) and
:mod:`~floodmark.cli.commands` (the work; it starts Spark). Only the parser and the
errors are imported to parse the arguments: ``floodmark --help`` and argument errors
never load Spark or the report.

Every user error ends with exit code 2 and one line
``floodmark: error: <what is wrong and how to fix it>``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from floodmark.cli.errors import (
    FLAG_OF,
    INTERRUPTED_EXIT,
    SparkFailure,
    UsageError,
    as_flags,
    fail,
)
from floodmark.cli.parser import build_parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``floodmark`` command.

    Args:
        argv: the arguments (default: ``sys.argv[1:]``).

    Returns:
        The exit code: 0 on success, 2 on a user error (one line on stderr), 1 when
        Spark fails for another reason (one line too), 130 after Ctrl-C.
    """
    from floodmark.exceptions import FloodmarkError, InvalidParameterError

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as err:
        return fail(str(err))
    except SystemExit as err:  # --help
        return int(err.code or 0)
    # commands never imports live (live builds on commands): ``demo --live`` goes there
    # from here.
    if args.command == "demo" and args.live:
        from floodmark.cli.live import demo_live as handler
    else:
        from floodmark.cli.commands import dispatch as handler

    try:
        return handler(args, argv)
    except UsageError as err:
        return fail(str(err))
    except FloodmarkError as err:
        if isinstance(err, InvalidParameterError) and err.parameter in FLAG_OF:
            err = err.renamed(FLAG_OF[err.parameter])  # the flag that set it
        return fail(as_flags(str(err)))
    except SparkFailure as err:
        return fail(str(err), code=1)
    except KeyboardInterrupt:
        sys.stderr.write("floodmark: interrupted\n")
        return INTERRUPTED_EXIT


__all__ = ["main"]
