"""The conformance folder itself: found, non-empty, and every file of a known mode."""

from conformance import KNOWN_MODES, all_cases, conformance_dir


def test_folder_has_vectors() -> None:
    assert conformance_dir().is_dir(), f"no conformance folder at {conformance_dir()}"
    assert all_cases(), f"no *.json vectors under {conformance_dir()}"


def test_every_file_has_a_known_mode() -> None:
    unknown = [c.name for c in all_cases() if c.scenario.get("mode") not in KNOWN_MODES]
    assert not unknown, f"files of unknown mode (no test would run them): {unknown}"
