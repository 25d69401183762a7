"""What `floodmark run` and `analyze` write, on local Spark: row-order mode, totals that
match the outputs (null channels included), and output folders that are either
complete or clearly marked incomplete, never silently taken from the user."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from floodmark.cli import main

KEYED = ["--event-time", "ts", "--channel", "p", "--key", "k"]


def rows_of(folder: Path) -> int:
    return pq.read_table(folder).num_rows


@pytest.fixture(scope="module")
def messy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Channels 0 and 1 with late records, plus rows with a null channel, a null event
    time or a null arrival (each of which lands in `dropped`)."""
    n = 300
    p: list[int | None] = [i % 2 for i in range(n)]
    ts: list[int | None] = [i * 100 - (30_000 if i % 25 == 24 else 0) for i in range(n)]
    a: list[int | None] = [i * 100 for i in range(n)]
    for i in (5, 50, 51, 200):
        p[i] = None
    for i in (7, 120):
        ts[i] = None
    for i in (9, 130, 131):
        a[i] = None
    table = pa.table(
        {
            "p": pa.array(p, pa.int32()),
            "ts": pa.array(ts, pa.int64()),
            "a": pa.array(a, pa.int64()),
            "k": [i % 3 for i in range(n)],
            "v": list(range(n)),
        }
    )
    path = tmp_path_factory.mktemp("messy") / "events.parquet"
    pq.write_table(table, path)
    return path


def test_run_and_analyze_without_arrival(
    spark: Any, messy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    argv = ["run", str(messy), *KEYED, "--bound", "0s", "--window", "tumbling:1s"]
    code = main([*argv, "--output", str(out), "--quiet"])
    assert code == 0, capsys.readouterr().err
    assert rows_of(out / "results") > 0
    # Row order (no arrival column): the null channels (4) and event times (2) are
    # dropped; a null in `a` is just a value.
    dropped = pq.read_table(out / "dropped")
    assert dropped.num_rows == 6
    assert sorted(dropped["reason"].to_pylist()) == ["null_channel"] * 4 + ["null_event_time"] * 2
    assert (out / "report" / "index.html").exists()
    code = main(
        [
            "analyze",
            str(messy),
            *KEYED,
            "--bounds",
            "0s,1s",
            "--output",
            str(tmp_path / "an"),
            "--quiet",
        ]
    )
    assert code == 0, capsys.readouterr().err
    assert (tmp_path / "an" / "index.html").exists()


def summary_total(out: str, name: str) -> int:
    match = re.search(rf"^\s+{name}\s+([\d,]+)", out, re.MULTILINE)
    assert match, out
    return int(match.group(1).replace(",", ""))


def test_totals_equal_the_outputs(
    spark: Any, messy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = ["run", str(messy), *KEYED, "--arrival", "a", "--bound", "0s"]
    code = main([*argv, "--window", "tumbling:1s", "--output", str(out), "--quiet"])
    text = capsys.readouterr().out
    assert code == 0
    inputs, late, dropped = rows_of(messy), rows_of(out / "late"), rows_of(out / "dropped")
    assert late > 0 and dropped == 4 + 2 + 3
    assert summary_total(text, "records") == inputs
    assert summary_total(text, "late") == late
    assert summary_total(text, "dropped") == dropped
    with (out / "report" / "partitions.csv").open() as f:
        table = list(csv.DictReader(f))
    partitions = [r["partition"] for r in table]
    assert sorted(partitions) == ["(null)", "0", "1"], partitions
    assert sum(int(r["records"]) for r in table) == inputs
    assert sum(int(r["late"]) for r in table) == late
    assert sum(int(r["dropped"]) for r in table) == dropped
    null_row = next(r for r in table if r["partition"] == "(null)")
    assert (null_row["records"], null_row["dropped"]) == ("4", "4")
    assert re.search(r"^\(null\)\s+4\s", text, re.MULTILINE), text
    page = (out / "report" / "index.html").read_text()
    assert f"<td>dropped</td><td>{dropped} " in page


def run_into(messy: Path, out: Path) -> list[str]:
    """``floodmark run`` of the messy input into ``out``, quietly (a window to add)."""
    return ["run", str(messy), *KEYED, "--arrival", "a", "--output", str(out), "--quiet"]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_interrupted_rerun_leaves_the_last_complete_run(
    spark: Any,
    messy: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = tmp_path / "out"
    argv = run_into(messy, out)
    assert main([*argv, "--window", "tumbling:1s"]) == 0
    before = snapshot(out)
    import floodmark.report.html

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(floodmark.report.html, "write_report", interrupted)
    assert main([*argv, "--window", "tumbling:5s"]) == 130
    assert "interrupted" in capsys.readouterr().err
    assert snapshot(out) == before
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["_FLOODMARK", "results", "late", "dropped", "report"]
    )
    marker = json.loads((out / "_FLOODMARK").read_text())
    assert marker["complete"] is True and marker["command"][:2] == ["floodmark", "run"]
    assert "tumbling:1s" in marker["command"]


def test_a_report_that_cannot_be_drawn_keeps_the_outputs(
    spark: Any,
    messy: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A failure of the drawing is floodmark's bug: the run's outputs are kept (they
    were deleted with it), the failure is one line, the exit code 1."""
    out = tmp_path / "out"
    argv = run_into(messy, out)
    import floodmark.report.html

    def broken(*args: object, **kwargs: object) -> None:
        Path(str(args[0])).mkdir(parents=True)
        (Path(str(args[0])) / "index.html").write_text("half")
        raise ValueError("a chart failed")

    monkeypatch.setattr(floodmark.report.html, "write_report", broken)
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert "records" in captured.out  # the summary still printed
    err = captured.err.strip()
    assert err.startswith("floodmark: error: the report could not be drawn (ValueError: a chart")
    assert len(err.splitlines()) == 1 and str(out) in err
    assert sorted(p.name for p in out.iterdir()) == ["_FLOODMARK", "dropped", "late", "results"]
    assert rows_of(out / "results") > 0 and rows_of(out / "dropped") == 9
    assert json.loads((out / "_FLOODMARK").read_text())["complete"] is True


def test_a_sentinel_time_far_in_the_future_is_charted(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One record at event and arrival time 2^62 ms (a sentinel): the partition's lag
    beyond 2^53 ticks failed the float cast, the idle strip ran past year 9999."""
    n = 200
    table = pa.table(
        {
            "p": [i % 2 for i in range(n)] + [0],
            "ts": [i * 100 for i in range(n)] + [2**62],
            "a": [i * 100 for i in range(n)] + [2**62],
            "k": [0] * (n + 1),
        }
    )
    pq.write_table(table, tmp_path / "in.parquet")
    out = tmp_path / "out"
    argv = ["run", str(tmp_path / "in.parquet"), *KEYED, "--arrival", "a", "--idle", "1s"]
    assert main([*argv, "--output", str(out), "--quiet"]) == 0, capsys.readouterr().err
    assert (out / "report" / "index.html").exists()


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--window", "tumbling:1500us"], "--window 1500us is not a whole number of ms"),
        (["--bound", "1500us"], "--bound 1500us is not a whole number of ms"),
        (["--idle", "500us"], "--idle 500us is not a whole number of ms, the ticks of the"),
        (["--emit-interval", "1500us"], "--emit-interval 1500us is not a whole number of ms"),
        (["--event-time-unit", "s", "--window", "tumbling:1500ms"], "1500ms is not a whole"),
    ],
)
def test_a_duration_finer_than_its_column_is_refused_naming_the_flag(
    spark: Any,
    messy: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    said: str,
) -> None:
    """The library truncates a duration to its column's ticks (as Flink's
    ``Duration.toMillis()``): the command line ran 1 ms windows for ``tumbling:1500us``
    over a column of ms and reported ``1500us``."""
    out = tmp_path / "out"
    argv = ["run", str(messy), *KEYED, "--arrival", "a", *flags, "--output", str(out)]
    assert main([*argv, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()
    swept = ["analyze", str(messy), *KEYED, "--bounds", "1ms,1500us", "--output", str(out)]
    assert main([*swept, "--quiet"]) == 2
    assert "--bounds 1500us is not a whole number of ms" in capsys.readouterr().err


def test_overwrite_replaces_a_foreign_folder(
    spark: Any, messy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    (out / "results").mkdir(parents=True)
    (out / "results" / "mine.txt").write_text("mine")
    (out / "notes.txt").write_text("kept")
    argv = run_into(messy, out)
    assert main(argv) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main([*argv, "--overwrite"]) == 0
    assert not (out / "results" / "mine.txt").exists()
    assert (out / "notes.txt").read_text() == "kept"
    assert json.loads((out / "_FLOODMARK").read_text())["complete"] is True
    # Now it is floodmark's: a second run needs no --overwrite.
    assert main(argv) == 0


def test_header_only_csv_gives_empty_outputs(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "events.csv"
    data.write_text("ts,p,a,k\n")
    out = tmp_path / "out"
    code = main(["run", str(data), *KEYED, "--arrival", "a", "--output", str(out), "--quiet"])
    assert code == 0, capsys.readouterr().err
    assert rows_of(out / "results") == rows_of(out / "late") == rows_of(out / "dropped") == 0
    assert summary_total(capsys.readouterr().out, "records") == 0


def test_csv_without_the_named_column_is_one_line(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "events.csv"
    data.write_text("ts,p,k\n")
    code = main(
        ["run", str(data), *KEYED, "--arrival", "a", "--output", str(tmp_path / "o"), "--quiet"]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("floodmark: error: --arrival a")


def test_empty_csv_is_one_line(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "events.csv"
    data.write_text("")
    code = main(["run", str(data), *KEYED, "--output", str(tmp_path / "o"), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("floodmark: error: ") and "events.csv" in err[0]


def test_unreadable_data_pages_are_one_line(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Parquet file whose footer reads but whose pages do not fails in the job:
    still one line naming the file, exit code 2, and no output folder left."""
    data = tmp_path / "corrupt.parquet"
    n = 20_000
    table = pa.table({"ts": range(n), "p": [i % 4 for i in range(n)], "a": range(n), "k": [1] * n})
    pq.write_table(table, data, compression="snappy")
    raw = bytearray(data.read_bytes())
    for i in range(200, len(raw) // 2, 7):
        raw[i] ^= 0xFF
    data.write_bytes(bytes(raw))
    assert pq.read_metadata(data).num_rows == n
    out = tmp_path / "out"
    code = main(["run", str(data), *KEYED, "--arrival", "a", "--output", str(out), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("floodmark: error: cannot read the input")
    assert "corrupt.parquet" in err[0]
    assert not out.exists()
