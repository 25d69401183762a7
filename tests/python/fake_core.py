"""A stand-in for ``floodmark._core`` so report and CLI tests run without the native
engine. Installed only when no built ``_core`` extension is present."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path


def native_core_present() -> bool:
    """Whether a compiled ``floodmark._core`` sits next to the floodmark package."""
    spec = importlib.util.find_spec("floodmark")
    if spec is None or not spec.submodule_search_locations:
        return False
    return any(
        any(Path(loc).glob(pattern))
        for loc in spec.submodule_search_locations
        for pattern in ("_core.*.so", "_core.*.pyd", "_core.so", "_core.pyd")
    )


def install() -> None:
    """Put a tiny fake ``floodmark._core`` in ``sys.modules`` if the real one is missing."""
    if "floodmark._core" in sys.modules or native_core_present():
        return
    fake = types.ModuleType("floodmark._core")
    fake.__version__ = "0.0.0+fake"  # type: ignore[attr-defined]
    sys.modules["floodmark._core"] = fake
