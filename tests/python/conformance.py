"""Loads conformance vectors (recorded from Flink 2.3.0) for the conformance tests.

The folder comes from the environment variable ``FLOODMARK_CONFORMANCE_DIR`` (default:
the vendored copy in ``tests/conformance``). Every ``*.json`` file found anywhere under
it is a case; its ``scenario.mode`` says which test runs it, so any folder of vectors in
the same format can be checked.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

DEFAULT_DIR = Path(__file__).resolve().parent.parent / "conformance"
KNOWN_MODES = {"generator", "valve", "multiplexer", "assign", "windows"}


def conformance_dir() -> Path:
    return Path(os.environ.get("FLOODMARK_CONFORMANCE_DIR", str(DEFAULT_DIR)))


@dataclass(frozen=True)
class Case:
    path: Path
    scenario: dict[str, Any]
    expected: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.path.relative_to(conformance_dir()))


def all_cases() -> list[Case]:
    root = conformance_dir()
    cases = []
    for path in sorted(root.rglob("*.json")):
        doc = json.loads(path.read_text())
        cases.append(Case(path, doc["scenario"], doc["expected"]))
    return cases


def cases_for(*modes: str) -> list[Any]:
    """pytest params (one per file) for the cases of the given modes."""
    return [pytest.param(c, id=c.name) for c in all_cases() if c.scenario.get("mode") in modes]


class Mismatches:
    """Collects every mismatch of one case, by step, and fails once with all of them."""

    def __init__(self, case: Case) -> None:
        self.case = case
        self.lines: list[str] = []

    def check(self, step: int | str, got: Any, want: Any) -> None:
        if got != want:
            self.lines.append(f"{self.case.name} step {step}: got {got!r}, want {want!r}")

    def assert_none(self) -> None:
        if self.lines:
            pytest.fail("\n".join(self.lines), pytrace=False)
