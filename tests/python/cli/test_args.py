"""Parsing option values: durations, windows, aggregates, fractions, formats."""

from __future__ import annotations

import argparse
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from floodmark.cli.args import (
    infer_format,
    parse_agg,
    parse_duration,
    parse_duration_list,
    parse_fraction,
    parse_window,
    resolve_aggs,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5s", timedelta(seconds=5)),
        ("200ms", timedelta(milliseconds=200)),
        ("1m", timedelta(minutes=1)),
        ("1h", timedelta(hours=1)),
        ("1500us", timedelta(microseconds=1500)),
        ("1.5s", timedelta(milliseconds=1500)),
        ("0s", timedelta(0)),
        (" 2 MIN ", timedelta(minutes=2)),
        ("1.005s", timedelta(microseconds=1_005_000)),  # exact, not 1.00499999... s
        ("0.3ms", timedelta(microseconds=300)),
    ],
)
def test_durations(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("5", "has no unit"),
        ("-5s", "negative"),
        ("5 parsecs", "unknown unit"),
        ("abc", "not a duration"),
        ("1.0005ms", "finer than a microsecond"),
        ("1000000000d", "longer than Python's timedelta allows"),
        ("99999999999d", "longer than Python's timedelta allows"),
    ],
)
def test_bad_durations(text: str, hint: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=hint):
        parse_duration(text)


def test_duration_list_sorted_unique() -> None:
    assert parse_duration_list("5s,0s,1s,5s") == [
        timedelta(0),
        timedelta(seconds=1),
        timedelta(seconds=5),
    ]


def test_windows() -> None:
    assert parse_window("tumbling:10s").describe() == "tumbling:10s"
    w = parse_window("sliding:10s,2s")
    assert (w.kind, w.size, w.slide) == ("sliding", timedelta(seconds=10), timedelta(seconds=2))
    assert parse_window("session:5s").describe() == "session:5s"
    for bad in ("hopping:10s", "tumbling", "sliding:10s", "session:0s", "tumbling:1s,2s"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_window(bad)


def test_aggs() -> None:
    assert parse_agg("count") == "count"
    assert parse_agg("sum:value") == ("sum", "value")
    assert parse_agg("MEAN") == ("mean", "")
    with pytest.raises(argparse.ArgumentTypeError, match="not an aggregate"):
        parse_agg("median:value")
    assert resolve_aggs(None, None) == ["count"]
    assert resolve_aggs([("sum", ""), "count"], "v") == [("sum", "v"), "count"]
    with pytest.raises(ValueError, match="--value"):
        resolve_aggs([("sum", "")], None)


def test_fraction() -> None:
    assert parse_fraction("0.01") == 0.01 and parse_fraction("5%") == 0.05
    for bad in ("2", "x", "-1%"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_fraction(bad)


def test_infer_format(tmp_path: Path) -> None:
    assert infer_format("a.parquet") == "parquet"
    assert infer_format("a.jsonl") == "json"
    folder = tmp_path / "events"
    folder.mkdir()
    (folder / "part-0.csv").write_text("a\n")
    assert infer_format(str(folder)) == "csv"
    with pytest.raises(ValueError, match="--format"):
        infer_format("data.txt")


def test_a_recommendation_without_an_idle_timeout_names_no_idle_flag() -> None:
    from floodmark.report.recommend import Recommendation

    line = Recommendation(timedelta(seconds=5), None, 0.01, 1.0, 2.0).sentence(0.05)
    assert line.startswith("recommended: --bound 5s (late")
    with_idle = Recommendation(timedelta(seconds=5), timedelta(seconds=30), 0.01, 1.0, 2.0)
    assert "--bound 5s --idle 30s (late" in with_idle.sentence(0.05)


def test_infer_format_skips_what_spark_skips(tmp_path: Path) -> None:
    """A Delta table's folder: Parquet files beside ``_delta_log/*.json`` (and hidden
    files), which Spark does not read as data."""
    folder = tmp_path / "table"
    (folder / "_delta_log").mkdir(parents=True)
    (folder / "_delta_log" / "00000000000000000000.json").write_text("{}\n")
    (folder / ".hidden.csv").write_text("a\n")
    (folder / "part-0.parquet").write_bytes(b"")
    assert infer_format(str(folder)) == "parquet"


def test_infer_format_reads_extensions_in_any_case(tmp_path: Path) -> None:
    assert infer_format("EV.PARQUET") == "parquet"
    folder = tmp_path / "upper"
    folder.mkdir()
    (folder / "PART-0.CSV").write_text("a\n")
    assert infer_format(str(folder)) == "csv"


def test_a_json_file_spark_read_no_record_from_is_named_not_json_lines() -> None:
    """Spark reads a pretty-printed JSON array as one ``_corrupt_record`` column: the
    error says the input is not JSON Lines, not that ``ts`` is missing."""
    from types import SimpleNamespace

    from floodmark.cli.errors import UsageError
    from floodmark.cli.inputs import check_columns

    corrupt = SimpleNamespace(columns=["_corrupt_record"])
    with pytest.raises(UsageError, match="not JSON Lines"):
        check_columns(corrupt, [("--event-time", "ts")])  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="--event-time ts: the input has no such column"):
        check_columns(frame(["a"]), [("--event-time", "ts")])


def frame(columns: list[str], case_sensitive: str = "false") -> Any:
    """What :func:`check_columns` reads of a DataFrame: its columns and its session's
    ``spark.sql.caseSensitive``."""
    from types import SimpleNamespace

    conf = {"spark.sql.caseSensitive": case_sensitive}
    session = SimpleNamespace(conf=SimpleNamespace(get=lambda k, default=None: conf[k]))
    return SimpleNamespace(columns=columns, sparkSession=session)


def test_columns_are_found_as_the_session_compares_names() -> None:
    """``--event-time TS`` finds ``ts`` (the library compares names ignoring case, as
    Spark does by default); an exact spelling wins over another case; under
    ``spark.sql.caseSensitive=true`` only the exact name is found."""
    from floodmark.cli.errors import UsageError
    from floodmark.cli.inputs import check_columns

    named = [("--event-time", "TS"), ("--channel", "p"), ("--arrival", None)]
    assert check_columns(frame(["ts", "P", "p"]), named) == {"TS": "ts", "p": "p"}
    with pytest.raises(UsageError, match="--event-time TS: the input has no such column"):
        check_columns(frame(["ts", "p"], case_sensitive="true"), named)


def test_a_spec_takes_the_inputs_spelling_and_two_keys_naming_one_column_are_refused() -> None:
    from floodmark.cli.args import parse_window
    from floodmark.cli.commands import PipelineSpec
    from floodmark.cli.errors import UsageError

    spec = PipelineSpec("TS", "P", ("User",), parse_window("tumbling:1s"), ("count", ("sum", "V")))
    names = {"TS": "ts", "P": "p", "User": "user", "V": "v"}
    got = spec.spelled(names)
    assert (got.event_time, got.channel, got.arrival, got.keys) == ("ts", "p", None, ("user",))
    assert got.aggs == ("count", ("sum", "v"))
    twice = PipelineSpec("ts", "p", ("User", "user"), parse_window("tumbling:1s"))
    with pytest.raises(UsageError, match="--key User and --key user name one column, user"):
        twice.spelled({"ts": "ts", "p": "p", "User": "user", "user": "user"})


def test_every_flag_a_library_error_is_spelled_as_is_a_flag_of_run() -> None:
    """``FLAG_OF`` (library parameter -> flag, for the library's messages) names only
    flags the parser has, each setting the parameter of that name (``--agg`` sets
    ``aggs``): it cannot drift from the parser silently."""
    from floodmark.cli.errors import FLAG_OF, as_flags
    from floodmark.cli.parser import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    run, analyze = commands.choices["run"], commands.choices["analyze"]
    for parameter, flag in FLAG_OF.items():
        action = (run._option_string_actions | analyze._option_string_actions)[flag]
        assert action.dest in (parameter, parameter.removesuffix("s"), parameter.split("_")[0])
    assert as_flags("event_time= column 'k'; --key=k, monkey=2") == (
        "--event-time column 'k'; --key=k, monkey=2"
    )
    # a column named like a parameter is the user's column, not a flag
    assert as_flags("invalid input `key`: `channel` ...") == "invalid input `key`: `channel` ..."


def test_a_master_spark_cannot_take_is_one_line_before_spark_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A wrong ``--master`` made the JVM print its stack trace and the command say only
    that Spark's gateway exited; it is refused by the parser, naming the forms."""
    from floodmark.cli import main
    from floodmark.cli.args import parse_master

    for good in ("local", "local[2]", "local[*]", "local[4, 2]", "local-cluster[2,1,1024]"):
        assert parse_master(good) == good
    for good in ("spark://127.0.0.1:7077", "k8s://https://host:443", "yarn"):
        assert parse_master(good) == good
    for bad in ("bogus://x", "local[0]", "local[x]", "spark", "Local", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="is not a Spark master"):
            parse_master(bad)
    assert main(["demo", "--rows", "10", "--master", "bogus://x"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "floodmark: error: argument --master: 'bogus://x' is not a Spark master; give local, "
        "local[N], local[*], spark://HOST:PORT, k8s://HOST:PORT or yarn (see floodmark demo --help)"
    ]


def test_analyze_help_offers_what_analyze_takes(capsys: pytest.CaptureFixture[str]) -> None:
    """``analyze --help``'s footer offered session windows and aggregates, which it
    refuses (it sweeps tumbling and sliding windows and takes no --agg)."""
    from floodmark.cli import main

    for command, offers in (("analyze", False), ("run", True)):
        assert main([command, "--help"]) == 0
        out = capsys.readouterr().out
        assert ("session:5s" in out) is offers and ("aggregates:" in out) is offers, command
        assert "sliding:10s,2s" in out


def test_a_library_parameter_is_named_by_its_flag(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An ``InvalidParameterError`` about a parameter a flag sets names the flag (it
    said `idle_timeouts`); one about another parameter, and a column quoted like a
    parameter, stay as they are."""
    from floodmark.cli import commands, main
    from floodmark.exceptions import InvalidInputError, InvalidParameterError

    raised: list[Exception] = [
        InvalidParameterError("idle_timeouts", "a value too large"),
        InvalidParameterError("strategy", "cannot be sent"),
        InvalidInputError("key", "channel= column 'key' has type double"),
    ]

    def failing(args: Any, argv: Any) -> int:
        raise raised.pop(0)

    monkeypatch.setattr(commands, "dispatch", failing)
    data = tmp_path / "in.parquet"
    data.write_bytes(b"")
    argv = ["analyze", str(data), "--event-time", "ts", "--channel", "p", "--key", "k"]
    lines = []
    for _ in range(3):
        assert main(argv) == 2
        lines += capsys.readouterr().err.splitlines()
    assert lines == [
        "floodmark: error: invalid parameter `--idle`: a value too large",
        "floodmark: error: invalid parameter `strategy`: cannot be sent",
        "floodmark: error: invalid input `key`: --channel column 'key' has type double",
    ]
