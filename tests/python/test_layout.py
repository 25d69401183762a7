"""The repository's top level holds the project's files and nothing else (a scratch
script committed by mistake fails here, naming it)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: What the project keeps at its top level: the fixed shape (Cargo.toml,
#: pyproject.toml, rust/, python/, tests/, benches/) and its docs, CI and tooling.
TOP_LEVEL = {
    ".ci",
    ".gitignore",
    "CHANGELOG.md",
    "Cargo.lock",
    "Cargo.toml",
    "Makefile",
    "README.md",
    "benches",
    "docs",
    "pyproject.toml",
    "python",
    "rust",
    "stubtest-allowlist.txt",
    "tests",
}


def test_the_top_level_holds_only_the_projects_files() -> None:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    top = {path.split("/")[0] for path in tracked}
    assert top - TOP_LEVEL == set(), "unexpected files at the top level"
    assert TOP_LEVEL - top == set(), "project files missing at the top level"
