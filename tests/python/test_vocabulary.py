"""One vocabulary: the aggregate names and drop reasons come from the engine, the
processing order is written once, and no other module writes them again."""

from __future__ import annotations

import ast
from pathlib import Path

import pyarrow as pa
import pytest

from floodmark import _core, vocabulary
from floodmark.exceptions import InvalidParameterError
from floodmark.replay import null_reasons
from floodmark.windows import SlidingEventTimeWindows, TumblingEventTimeWindows, WindowOperator

PACKAGE = Path(vocabulary.__file__).parent


def test_the_python_names_are_the_engines() -> None:
    assert vocabulary.AGGREGATES == _core.AGGREGATES
    assert vocabulary.AGGREGATES == ("count", "sum", "min", "max", "mean", "first", "last")
    assert vocabulary.AGGREGATES[1:] == vocabulary.AGG_FUNCTIONS
    assert set(vocabulary.PICKS) <= set(vocabulary.AGG_FUNCTIONS)
    assert vocabulary.DROP_REASONS == _core.DROP_REASONS
    assert vocabulary.DROP_REASONS == (
        "null_event_time",
        "null_arrival",
        "null_channel",
        "min_event_time",
        "no_window",
    )
    assert vocabulary.DROP_REASONS[:3] == vocabulary.NULL_REASONS


def test_the_engine_takes_every_aggregate_and_no_other() -> None:
    aggs = ["count", *((fn, "v") for fn in vocabulary.AGG_FUNCTIONS)]
    op = WindowOperator(TumblingEventTimeWindows.of(10), key="k", event_time="ts", aggs=aggs)
    batch = pa.record_batch({"k": [1], "ts": [1], "v": [2]})
    op.process(batch)
    names = op.finish().results.schema.names
    assert [n for n in names if n == "count" or "_v" in n] == [
        "count",
        *(f"{fn}_v" for fn in vocabulary.AGG_FUNCTIONS),
    ]
    with pytest.raises(InvalidParameterError):
        WindowOperator(
            TumblingEventTimeWindows.of(10), key="k", event_time="ts", aggs=[("median", "v")]
        )


def test_every_reason_given_is_in_the_vocabulary() -> None:
    op = WindowOperator(SlidingEventTimeWindows.of(5, 10), key="k", event_time="ts", aggs=["count"])
    batch = pa.record_batch({"k": [1, 1], "ts": pa.array([None, 7], pa.int64())})
    dropped = op.process(batch).dropped.column("reason").to_pylist()
    assert dropped == [vocabulary.NULL_EVENT_TIME, vocabulary.NO_WINDOW]
    table = pa.table(
        {
            "ev": pa.array([None, 1, 2], pa.int64()),
            "arr": pa.array([1, None, 2], pa.int64()),
            "ch": pa.array([0, 0, None], pa.int64()),
        }
    )
    reasons = null_reasons(table, "ev", "arr", "ch").column("reason").to_pylist()
    assert reasons == list(vocabulary.NULL_REASONS)


def test_processing_order() -> None:
    order = vocabulary.processing_order
    assert order("a", "c", "t", ["k"], ["v", "k"]) == ["a", "c", "t", "k", "v"]
    assert order("a", "c", "t", ["k", "c"], []) == ["a", "t", "k", "c"]
    ties = vocabulary.tie_values(
        ["count", ("sum", "x"), ("last", "y"), ("mean", "x"), ("first", "z")]
    )
    assert ties == ["y", "z", "x"]  # first/last's columns first, then every other value


def strings(path: Path) -> list[str]:
    """The string constants of a module, docstrings left out."""
    tree = ast.parse(path.read_text())
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
    ]


def test_no_module_writes_the_vocabulary_again() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "vocabulary.py":
            continue
        words = strings(path)
        found += [(path.name, w) for w in words if w in vocabulary.DROP_REASONS]
        aggs = [w for w in words if w in vocabulary.AGG_FUNCTIONS and w not in ("min", "max")]
        if {"sum", "mean", "first", "last"} <= set(aggs):
            found.append((path.name, "the aggregate list"))
    assert found == []


def test_one_reading_of_the_aggregate_list() -> None:
    """Every layer reads ``aggs`` with ``parse_aggs``: the in-process operator and the
    Spark functions accept and refuse the same lists, with the same words."""
    assert vocabulary.parse_aggs("count") == ["count"]
    assert vocabulary.parse_aggs(iter(["count", ["sum", "v"]])) == ["count", ("sum", "v")]
    assert [vocabulary.agg_name(a) for a in vocabulary.parse_aggs([("mean", "v")])] == ["mean_v"]
    refused = {
        ("sum", "v"): r"give a list of aggregates: \[\('sum', 'v'\)\] for the one pair",
        None: r"expected a list of aggregates",
        (): r"give at least one aggregate",
        ("avg", "v"): r"'avg' is not an aggregate; use 'count' or a \(function, column\)",
        (("sum", 1),): r"\('sum', 1\) is not an aggregate",
    }
    for aggs, message in [*refused.items(), (["sum", "v"], next(iter(refused.values())))]:
        for parse in (
            vocabulary.parse_aggs,
            lambda a: WindowOperator(
                TumblingEventTimeWindows.of(10), key="k", event_time="ts", aggs=a
            ),
        ):
            with pytest.raises(InvalidParameterError, match=message) as err:
                parse(aggs)
            assert err.value.parameter == "aggs"
