"""The errors format themselves: built from ``(name, message)`` in Python or raised by
the engine, the text is the same and names the parameter or column."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest

from floodmark import WatermarkStrategy, _core, drive
from floodmark.exceptions import (
    FloodmarkError,
    InternalError,
    InvalidInputError,
    InvalidParameterError,
    SchemaError,
)

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "floodmark"


def test_python_errors_read_as_the_engines() -> None:
    with pytest.raises(InvalidParameterError) as engine:
        _core._Generator("bounded_out_of_orderness", -1)
    built = InvalidParameterError("bound", "must be >= 0, got -1")
    assert str(engine.value) == str(built) == "invalid parameter `bound`: must be >= 0, got -1"
    assert engine.value.parameter == built.parameter == "bound"

    s = WatermarkStrategy.for_monotonous_timestamps()
    with pytest.raises(InvalidInputError) as engine_input:
        drive(s, [1, 2, 3], [2, 1, 5])
    message = "must be non-decreasing, but arrival[1] = 1 < arrival[0] = 2"
    assert str(engine_input.value) == str(InvalidInputError("arrival", message))
    assert engine_input.value.column == "arrival"


@pytest.mark.parametrize(
    ("error", "name"),
    [
        (InvalidParameterError("emit_interval", "must be > 0"), "emit_interval"),
        (InvalidInputError("arrival", "holds 1 null value(s)"), "arrival"),
        (SchemaError("ts", "missing column"), "ts"),
        # one finished text, as older call sites give it: the name is read back
        (InvalidParameterError("invalid parameter `path`: expected a folder"), "path"),
        (InvalidInputError("invalid input `ts`: out of range"), "ts"),
        (InvalidInputError("a batch spans too many windows"), ""),
    ],
)
def test_every_error_names_what_is_wrong(error: FloodmarkError, name: str) -> None:
    attribute = "parameter" if isinstance(error, InvalidParameterError) else "column"
    assert getattr(error, attribute) == name
    assert isinstance(error, ValueError)
    again = pickle.loads(pickle.dumps(error))  # e.g. from a Spark executor
    assert type(again) is type(error)
    assert str(again) == str(error)
    assert getattr(again, attribute) == name


def test_internal_errors_are_not_the_callers() -> None:
    assert issubclass(InternalError, FloodmarkError)
    assert issubclass(InternalError, RuntimeError)
    assert not issubclass(InternalError, ValueError)


def test_no_raise_site_writes_the_prefix_by_hand() -> None:
    """``invalid parameter `x`: ...`` is written once, by the exception classes."""
    prefix = re.compile(r"invalid (parameter|input) `")
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative == "exceptions.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if prefix.search(line):
                offenders.append(f"{relative}:{number}: {line.strip()}")
    assert offenders == []
