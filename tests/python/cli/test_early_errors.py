"""Input and output errors found before Spark starts: one ``floodmark: error:`` line,
exit code 2, the flag named; and argument parsing stays light (no Spark, no report)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_helpers import COLS, one_error_line

from floodmark.cli import main


@pytest.fixture
def events(tmp_path: Path) -> Path:
    path = tmp_path / "events.parquet"
    pq.write_table(pa.table({"ts": [1, 2], "p": [0, 1], "a": [1, 2], "k": [1, 1]}), path)
    return path


@pytest.fixture(autouse=True)
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every error here is found before Spark starts: starting it fails the test."""
    import floodmark.spark
    import floodmark.spark.session

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("Spark was started")

    monkeypatch.setattr(floodmark.spark, "local_session", refuse)
    monkeypatch.setattr(floodmark.spark.session, "local_session", refuse)


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--idle", "0s"], "--idle"),
        (["--emit-interval", "0s"], "--emit-interval"),
    ],
)
def test_zero_durations_refused_at_parsing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], flag: str
) -> None:
    # The input does not exist: the duration is refused first, while parsing.
    assert main(["run", str(tmp_path / "missing.parquet"), *COLS, *argv]) == 2
    line = one_error_line(capsys)
    assert flag in line and "positive" in line
    assert main(["analyze", str(tmp_path / "missing.parquet"), *COLS, *argv]) == 2
    line = one_error_line(capsys)
    assert flag in line and "positive" in line


def test_zero_idle_in_a_list(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["analyze", str(tmp_path / "m.parquet"), *COLS, "--idle", "30s,0s"]) == 2
    assert "--idle" in one_error_line(capsys)


@pytest.mark.parametrize("content", [b"", b"PAR1\x00\x00garbage"], ids=["empty", "garbage"])
def test_unreadable_parquet(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes
) -> None:
    data = tmp_path / "e.parquet"
    data.write_bytes(content)
    assert main(["run", str(data), *COLS, "--output", str(tmp_path / "out")]) == 2
    line = one_error_line(capsys)
    assert "e.parquet" in line and "Parquet" in line


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_a_parquet_file_read_as_text_is_named_before_spark(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fmt: str
) -> None:
    """``--format csv`` on a Parquet file listed its bytes as the column names."""
    data = tmp_path / "events.parquet"
    pq.write_table(pa.table({"ts": [1]}), data)
    argv = ["run", str(data), *COLS, "--format", fmt, "--output", str(tmp_path / "out")]
    assert main(argv) == 2
    line = one_error_line(capsys)
    assert f"is a Parquet file, not {fmt}" in line and "--format parquet" in line
    assert not (tmp_path / "out").exists()


def test_truncated_parquet(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, events: Path
) -> None:
    whole = events.read_bytes()
    folder = tmp_path / "folder"
    folder.mkdir()
    pq.write_table(pq.read_table(events), folder / "part-0.parquet")
    (folder / "part-1.parquet").write_bytes(whole[: len(whole) // 2])
    assert main(["analyze", str(folder), *COLS, "--output", str(tmp_path / "out")]) == 2
    line = one_error_line(capsys)
    assert "part-1.parquet" in line and "Parquet" in line


def test_output_is_the_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, events: Path
) -> None:
    before = events.read_bytes()
    assert main(["run", str(events), *COLS, "--output", str(events)]) == 2
    assert "--output" in one_error_line(capsys)
    assert events.read_bytes() == before


def test_output_inside_or_around_the_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, events: Path
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    pq.write_table(pq.read_table(events), folder / "part-0.parquet")
    assert main(["run", str(folder), *COLS, "--output", str(folder / "out")]) == 2
    assert "--output" in one_error_line(capsys)
    assert main(["run", str(folder), *COLS, "--output", str(tmp_path)]) == 2
    assert "--output" in one_error_line(capsys)
    assert not (folder / "out").exists()


def test_unwritable_output(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, events: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    assert main(["run", str(events), *COLS, "--output", str(blocker / "out")]) == 2
    line = one_error_line(capsys)
    assert "--output" in line and "a-file" in line


def test_read_only_output(capsys: pytest.CaptureFixture[str], tmp_path: Path, events: Path) -> None:
    """A folder the user may not write in: a locked one, or for root (who may write
    anywhere else, as CI runs) sysfs, which refuses new folders to everyone."""
    locked = Path("/sys") if os.geteuid() == 0 else tmp_path / "locked"
    if locked != Path("/sys"):
        locked.mkdir(mode=0o500)
    try:
        out = locked / "floodmark-test" / "out"
        assert main(["run", str(events), *COLS, "--output", str(out)]) == 2
        line = one_error_line(capsys)
        assert "--output" in line and "cannot write there" in line
        assert not out.parent.exists()
    finally:
        if locked != Path("/sys"):
            locked.chmod(0o700)


def test_foreign_folder_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, events: Path
) -> None:
    out = tmp_path / "out"
    (out / "results").mkdir(parents=True)
    mine = out / "results" / "mine.txt"
    mine.write_text("my own notes")
    assert main(["run", str(events), *COLS, "--output", str(out)]) == 2
    line = one_error_line(capsys)
    assert "--overwrite" in line and str(out) in line
    assert mine.read_text() == "my own notes"
    assert sorted(p.name for p in out.iterdir()) == ["results"]


def test_arrival_unit_needs_arrival(capsys: pytest.CaptureFixture[str], events: Path) -> None:
    cols = ["--event-time", "ts", "--channel", "p", "--key", "k"]
    assert main(["run", str(events), *cols, "--arrival-unit", "s"]) == 2
    line = one_error_line(capsys)
    assert "--arrival-unit" in line and "--arrival" in line


def test_parsing_loads_neither_spark_nor_the_report(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from floodmark.cli import main\n"
        f"assert main(['run', {str(tmp_path / 'missing.parquet')!r}, '--event-time', 't',"
        " '--channel', 'c', '--key', 'k']) == 2\n"
        "assert main(['run', '--help']) == 0\n"
        "loaded = [m for m in ('pyspark', 'floodmark.report', 'matplotlib') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_python_m_floodmark_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "floodmark.cli", "run", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "--overwrite" in done.stdout


def test_a_key_named_twice_and_analyze_with_sessions_are_refused_at_parsing(
    capsys: pytest.CaptureFixture[str], events: Path
) -> None:
    assert main(["run", str(events), *COLS, "--key", "k"]) == 2
    assert "--key k is given more than once" in one_error_line(capsys)
    assert main(["analyze", str(events), *COLS, "--window", "session:5s"]) == 2
    assert "--window session:5s: analyze needs a tumbling or sliding" in one_error_line(capsys)


@pytest.mark.parametrize(
    ("command", "argv", "flag"),
    [
        ("run", ["--bound", "-1s"], "--bound"),
        ("run", ["--bou", "-1s"], "--bound"),
        ("run", ["--allowed-lateness", "-.5s"], "--allowed-lateness"),
        ("analyze", ["--bounds", "-1s,2s"], "--bounds"),
    ],
)
def test_a_negative_duration_is_named_negative_not_a_missing_value(
    capsys: pytest.CaptureFixture[str], events: Path, command: str, argv: list[str], flag: str
) -> None:
    """``--bound -1s`` reaches the duration parser (argparse took ``-1s`` for an option
    and said "expected one argument"); a flag after an option that takes no value is
    still an unknown argument, and an option left without its value still says so."""
    assert main([command, str(events), *COLS, *argv]) == 2
    line = one_error_line(capsys)
    assert flag in line and "negative" in line
    assert main(["run", str(events), *COLS, "--quiet", "-1s"]) == 2
    assert "unrecognized arguments: -1s" in one_error_line(capsys)
    assert main(["run", str(events), *COLS, "--bound", "--quiet"]) == 2
    assert "--bound: expected one argument" in one_error_line(capsys)


def test_live_demo_rows_beyond_what_the_simulated_broker_keeps_are_refused_first(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The mock broker keeps the last 5 MB of each partition: ``--rows 3,000,000`` failed
    in its flush after rounds of Spark work; it is refused before Spark starts."""
    pytest.importorskip("confluent_kafka")
    assert main(["demo", "--live", "--rows", "3000000", "--output", str(tmp_path / "o")]) == 2
    line = one_error_line(capsys)
    assert "--rows 3,000,000 with --live" in line and "1,500,000 or fewer" in line


@pytest.mark.parametrize(
    ("command", "extra"), [("run", "--bounds"), ("analyze", "--allowed-lateness")]
)
def test_an_unknown_argument_points_at_the_subcommands_help(
    capsys: pytest.CaptureFixture[str], events: Path, command: str, extra: str
) -> None:
    """``run ... --bounds 1s`` (``analyze``'s flag) said ``see floodmark --help``, whose
    page lists the subcommands, not the flags: the hint names the subcommand's page."""
    assert main([command, str(events), *COLS, extra, "1s"]) == 2
    line = one_error_line(capsys)
    assert f"unrecognized arguments: {extra} 1s" in line
    assert line.endswith(f"(see floodmark {command} --help)")
