"""Helpers of the command-line tests."""

from __future__ import annotations

import pytest

#: Column flags naming columns ``ts``, ``p``, ``a`` and ``k``.
COLS = ["--event-time", "ts", "--channel", "p", "--arrival", "a", "--key", "k"]


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The one line on stderr, a ``floodmark: error:`` line (fails otherwise)."""
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("floodmark: error: ")
    return lines[0]
