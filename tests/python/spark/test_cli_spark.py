"""The `floodmark` command end to end on local Spark: demo, run and analyze write their
outputs and reports, and user errors are one line with exit code 2."""

from __future__ import annotations

import csv
import html
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from floodmark import TumblingEventTimeWindows
from floodmark.cli import main
from floodmark.datagen import StreamSpec, generate

COLS = ["--event-time", "event_time", "--channel", "partition", "--arrival", "arrival"]


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "events.parquet"
    spec = StreamSpec(
        rows=20_000,
        partitions=6,
        keys=30,
        duration_ms=120_000,
        lag_ms=15_000,
        quiet_partition=5,
        quiet_from_ms=40_000,
        quiet_for_ms=20_000,
    )
    pq.write_table(generate(spec), path)
    return path


def test_run(spark: Any, events: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "run",
            str(events),
            *COLS,
            "--key",
            "key",
            "--bound",
            "2s",
            "--idle",
            "5s",
            "--window",
            "sliding:10s,5s",
            "--agg",
            "count",
            "--agg",
            "sum:value",
            "--allowed-lateness",
            "2s",
            "--output",
            str(tmp_path),
            "--quiet",
        ]
    )
    assert code == 0
    results = pq.read_table(tmp_path / "results")
    late = pq.read_table(tmp_path / "late")
    assert {"key", "window_start", "window_end", "count", "sum_value", "timing"} <= set(
        results.column_names
    )
    assert late.num_rows > 0
    assert "report:" in capsys.readouterr().out


def test_column_flags_are_compared_ignoring_case_as_the_library_does(
    spark: Any, events: Path, tmp_path: Path
) -> None:
    """``--event-time EVENT_TIME`` finds ``event_time`` (Spark and the library compare
    names ignoring case; the CLI refused it), and the outputs are those of the input's
    own spelling, column names included."""
    argv = ["--window", "tumbling:10s", "--agg", "count", "--quiet"]
    exact = [*COLS, "--key", "key", "--agg", "sum:value"]
    upper = [c.upper() if c[0] != "-" else c for c in exact]
    assert main(["run", str(events), *exact, *argv, "--output", str(tmp_path / "a")]) == 0
    assert main(["run", str(events), *upper, *argv, "--output", str(tmp_path / "b")]) == 0
    for out in ("results", "late", "dropped"):
        want, got = pq.read_table(tmp_path / "a" / out), pq.read_table(tmp_path / "b" / out)
        assert got.column_names == want.column_names
        assert got.sort_by([(c, "ascending") for c in got.column_names]) == want.sort_by(
            [(c, "ascending") for c in want.column_names]
        )


def test_run_unknown_column_is_one_line(
    spark: Any, events: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "run",
            str(events),
            "--event-time",
            "nope",
            "--channel",
            "partition",
            "--arrival",
            "arrival",
            "--key",
            "key",
            "--window",
            "tumbling:10s",
            "--output",
            str(tmp_path),
            "--quiet",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("floodmark: error:") and "nope" in err[0]


def test_a_column_of_the_wrong_type_is_named_by_its_flag(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The library names the parameter (``event_time=``, ``aggs=``); the command line
    names the flag that set it."""
    import pyarrow as pa

    path = tmp_path / "typed.parquet"
    pq.write_table(
        pa.table({"ts": [1, 2], "partition": [0, 0], "arrival": [1, 2], "name": ["a", "b"]}),
        path,
    )
    base = ["run", str(path), "--channel", "partition", "--arrival", "arrival", "--quiet"]
    base += ["--key", "partition", "--window", "tumbling:10s"]
    for extra, flag in (
        (["--event-time", "name"], "--event-time"),
        (["--event-time", "ts", "--agg", "sum:name"], "--agg"),
    ):
        out = tmp_path / flag.strip("-")
        assert main([*base, *extra, "--output", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{flag} column 'name' has type string" in err[0], err


def test_analyze(
    spark: Any, events: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "analyze",
            str(events),
            *COLS,
            "--key",
            "key",
            "--bounds",
            "0s,1s,3s,10s",
            "--idle",
            "5s",
            "--window",
            "tumbling:10s",
            "--max-late",
            "0.2",
            "--output",
            str(tmp_path),
            "--quiet",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    # The library's analysis of the same input recommends a bound (late fractions 70%,
    # 32%, 19% and 17% at 0, 1, 3 and 10 s: 3 s), and the command prints it.
    from floodmark.report.recommend import recommend_bound
    from floodmark.spark.analyze import analyze_bounds

    table = analyze_bounds(
        spark.read.parquet(str(events)),
        bounds=[timedelta(seconds=s) for s in (0, 1, 3, 10)],
        idle_timeouts=[timedelta(seconds=5)],
        window=TumblingEventTimeWindows.of(timedelta(seconds=10)),
        key="key",
        event_time="event_time",
        channel="partition",
        arrival="arrival",
    )
    rec = recommend_bound(table, 0.2)
    assert rec is not None and rec.bound == timedelta(seconds=3)
    assert rec.sentence(0.2) in out, out
    assert (tmp_path / "index.html").exists()
    # Within 5% late no candidate does (17% at 10 s): the command says so.
    assert recommend_bound(table, 0.05) is None
    again = ["analyze", str(events), *COLS, "--key", "key", "--bounds", "0s,1s,3s,10s"]
    again += ["--idle", "5s", "--max-late", "0.05", "--output", str(tmp_path / "strict")]
    assert main([*again, "--quiet"]) == 0
    assert "no bound meets --max-late 0.05; try larger --bounds" in capsys.readouterr().out


NOISE = (
    "Using incubator modules",
    "Setting default log level",
    "To adjust logging level",
    "NativeCodeLoader",
    "log4j",
)


@pytest.mark.usefixtures("spark_subprocesses")
def test_demo_as_a_user_runs_it(tmp_path: Path) -> None:
    """``floodmark demo`` in a fresh process (a JVM of its own): none of the JVM's or
    Spark's start-up lines reach the terminal, the progress lines do, and the summary,
    the report and the outputs are written."""
    import subprocess
    import sys

    command = [sys.executable, "-m", "floodmark.cli", "demo", "--rows", "30000"]
    done = subprocess.run(
        [*command, "--output", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    both = done.stdout + done.stderr
    assert not [n for n in NOISE if n in both], both
    assert "[1/" in done.stderr and "generating 30,000 rows" in done.stderr
    assert "starting Spark" in done.stderr
    out = done.stdout
    assert "report:" in out
    assert "records" in out and "30,000" in out
    assert "dropped by Spark's watermark" in out
    assert max(len(line) for line in out.splitlines() if str(tmp_path) not in line) <= 80
    assert (tmp_path / "report" / "index.html").exists()
    # The report's per-partition views, from the channels' emissions the CLI asks for.
    with (tmp_path / "report" / "lag.csv").open() as lag:
        states = Counter(row["state"] for row in csv.DictReader(lag))
    assert states["active"] > 0 and states["idle"] > 0, states
    # The note on Spark's drops gives the lagging partition's own numbers.
    with (tmp_path / "report" / "partitions.csv").open() as parts:
        lagging = next(r for r in csv.DictReader(parts) if r["partition"] == "3")
    page = html.unescape((tmp_path / "report" / "index.html").read_text(encoding="utf-8"))
    assert (
        f"Of the {int(lagging['records']):,} records of partition 3, which lags 30 s, Spark "
        f"would drop {int(lagging['spark_dropped']):,}; floodmark's per-partition "
        f"watermarks find {int(lagging['late']):,} late."
    ) in page
    results = pq.read_table(tmp_path / "results")
    assert results.num_rows > 0


@pytest.mark.usefixtures("spark_subprocesses")
@pytest.mark.parametrize("stage", ["[2/", "[3/"])
def test_ctrl_c_while_spark_runs_is_one_line_and_leaves_nothing(tmp_path: Path, stage: str) -> None:
    """Ctrl-C in the watermark or the writing stage: exit 130, ``floodmark:
    interrupted`` and nothing else (PySpark's handler cancelled the jobs inside the
    signal handler: pages of Py4J tracebacks, and in stage 2 "Spark failed", exit 1),
    and no folder left behind (a cancelled write recreated the staging folder)."""
    import signal
    import subprocess
    import sys
    import time

    pq.write_table(generate(StreamSpec(rows=200_000, partitions=8)), tmp_path / "in.parquet")
    out = tmp_path / "new" / "out"
    command = [sys.executable, "-m", "floodmark.cli", "run", str(tmp_path / "in.parquet")]
    command += ["--event-time", "event_time", "--channel", "partition", "--arrival", "arrival"]
    command += ["--key", "key", "--output", str(out)]
    errors = tmp_path / "stderr.txt"
    with errors.open("w") as err:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True)
        deadline = time.monotonic() + 300
        while stage not in errors.read_text() and proc.poll() is None:
            assert time.monotonic() < deadline, errors.read_text()
            time.sleep(0.05)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=300)
    text = errors.read_text()
    assert proc.returncode == 130, text
    assert text.rstrip().endswith("floodmark: interrupted"), text
    assert "Traceback" not in text and "ERROR" not in text, text
    assert not (tmp_path / "new").exists()
