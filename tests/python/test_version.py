"""One version source: Cargo.toml's ``package.version``.

pyproject.toml declares the version dynamic, so maturin writes Cargo.toml's into the
package metadata, and ``floodmark.__version__`` is the engine's ``CARGO_PKG_VERSION``.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

import floodmark
from floodmark import _core

ROOT = Path(__file__).resolve().parents[2]


def test_one_version() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    cargo = tomllib.loads((ROOT / "Cargo.toml").read_text())["package"]["version"]
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in pyproject, "pyproject.toml must not repeat Cargo.toml's version"
    assert "version" in pyproject["dynamic"]
    assert floodmark.__version__ == _core.__version__ == cargo
    # A plain X.Y.Z; a Cargo pre-release (1.0.0-alpha.1) would be spelled the PEP 440
    # way (1.0.0a1) in the metadata, and this comparison would need to normalize it.
    assert importlib.metadata.version("floodmark") == cargo
