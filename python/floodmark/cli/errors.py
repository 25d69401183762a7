"""The command line's user errors: one line ``floodmark: error: ...``, exit code 2.

Every module of :mod:`floodmark.cli` raises :class:`UsageError` for what the user can
fix (a flag, a path, a file); :func:`floodmark.cli.main` prints it with :func:`fail`.
This module imports nothing else of floodmark, so each of the others can use it.
"""

from __future__ import annotations

import re
import sys

#: The exit code of a user error (as argparse's own).
USAGE_EXIT = 2
#: The exit code after Ctrl-C (128 + SIGINT).
INTERRUPTED_EXIT = 130


class UsageError(Exception):
    """A user error: printed as one ``floodmark: error:`` line, exit code 2."""


class SparkFailure(Exception):
    """Spark failed for a reason other than the user's input: one line, exit code 1."""


#: The library's parameters that the command line's flags set, as the library's
#: messages name them (``event_time= column 'key' has type string``).
FLAG_OF = {
    "event_time": "--event-time",
    "channel": "--channel",
    "arrival": "--arrival",
    "key": "--key",
    "aggs": "--agg",
    "window": "--window",
    "allowed_lateness": "--allowed-lateness",
    "emit_interval": "--emit-interval",
    "event_time_unit": "--event-time-unit",
    "arrival_unit": "--arrival-unit",
    "bounds": "--bounds",
    "idle_timeout": "--idle",
    "idle_timeouts": "--idle",
}
_PARAMETER = re.compile(r"(?<![\w-])(" + "|".join(FLAG_OF) + r")=")


def as_flags(message: str) -> str:
    """A library error's message with the parameters it names (``event_time=``)
    spelled as the flags that set them (``--event-time``); the parameter an
    ``InvalidParameterError`` is about is renamed where it is caught
    (:func:`floodmark.cli.main`)."""
    return _PARAMETER.sub(lambda m: FLAG_OF[m.group(1)], message)


def one_line(message: str) -> str:
    """``message`` on one line: its lines joined, runs of blanks squeezed."""
    return " ".join(message.split())


def fail(message: str, code: int = USAGE_EXIT) -> int:
    """Print the one error line and return ``code`` (2: a user error)."""
    sys.stderr.write(f"floodmark: error: {one_line(message)}\n")
    sys.stderr.flush()
    return code


__all__ = [
    "FLAG_OF",
    "INTERRUPTED_EXIT",
    "USAGE_EXIT",
    "SparkFailure",
    "UsageError",
    "as_flags",
    "fail",
    "one_line",
]
