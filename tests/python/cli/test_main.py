"""``floodmark`` exit codes and one-line errors (no Spark: errors come first)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import COLS, one_error_line

from floodmark.cli import main


def test_help_fits_80_columns(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--help"], ["run", "--help"], ["demo", "--help"], ["analyze", "--help"]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert out and max(len(line) for line in out.splitlines()) <= 80
    assert main(["--help"]) == 0
    assert "examples:" in capsys.readouterr().out


def test_no_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "required" in one_error_line(capsys)


def test_wrong_path(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["run", str(tmp_path / "missing.parquet"), *COLS]) == 2
    line = one_error_line(capsys)
    assert "does not exist" in line and "missing.parquet" in line


def test_unknown_format(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = tmp_path / "events.txt"
    data.write_text("x")
    assert main(["run", str(data), *COLS]) == 2
    assert "--format" in one_error_line(capsys)
    assert main(["run", str(data), "--format", "avro", *COLS]) == 2
    assert "invalid choice" in one_error_line(capsys)


@pytest.mark.parametrize(
    ("option", "value", "hint"),
    [
        ("--bound", "5", "no unit"),
        ("--idle", "soon", "not a duration"),
        ("--window", "hopping:5s", "not a window"),
        ("--agg", "median:v", "not an aggregate"),
        ("--emit-interval", "0.5us", "finer than a microsecond"),
    ],
)
def test_bad_values(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, option: str, value: str, hint: str
) -> None:
    data = tmp_path / "e.parquet"
    data.write_bytes(b"")
    assert main(["run", str(data), *COLS, option, value]) == 2
    line = one_error_line(capsys)
    assert hint in line and option in line


def test_bare_agg_needs_value(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = tmp_path / "e.parquet"
    data.write_bytes(b"")
    assert main(["run", str(data), *COLS, "--agg", "sum"]) == 2
    assert "--value" in one_error_line(capsys)


def test_missing_column_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "x.parquet", "--channel", "p"]) == 2
    assert "--event-time" in one_error_line(capsys)


def test_floodmark_errors_become_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from floodmark.cli import commands
    from floodmark.exceptions import SchemaError

    def boom(args: object, argv: object) -> int:
        raise SchemaError("invalid input `ts`: the DataFrame has no column 'ts'")

    monkeypatch.setattr(commands, "dispatch", boom)
    assert main(["demo", "--rows", "10"]) == 2
    assert "no column 'ts'" in one_error_line(capsys)


def test_bad_rows_and_max_late(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--rows", "0"]) == 2
    assert "positive" in one_error_line(capsys)
    assert main(["analyze", "x.parquet", *COLS, "--max-late", "3"]) == 2
    assert "between 0 and 1" in one_error_line(capsys)
