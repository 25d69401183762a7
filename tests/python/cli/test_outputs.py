"""The output folder: staged, moved into place whole, marked, never taken from the user."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from floodmark.cli.errors import UsageError
from floodmark.cli.outputs import MARKER, STAGING_PREFIX, OutputFolder, read_marker


def write_run(target: Path, names: dict[str, str], *, overwrite: bool = False) -> OutputFolder:
    folder = OutputFolder.prepare(str(target), overwrite=overwrite, inputs=[], command=["run"])
    with folder.staged() as staging:
        for name, text in names.items():
            (staging / name).mkdir()
            (staging / name / "part-0").write_text(text)
    return folder


def test_a_run_is_moved_into_place_and_marked(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_run(out, {"results": "1", "report": "1"})
    marker = json.loads((out / MARKER).read_text())
    assert marker["complete"] is True and marker["command"] == ["floodmark", "run"]
    assert marker["outputs"] == ["report", "results"] and marker["finished"]
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "report", "results"]


def test_a_rerun_replaces_the_previous_outputs_whole(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_run(out, {"results": "1", "late": "1"})
    (out / "results" / "part-1").write_text("left over from run 1")
    write_run(out, {"results": "2"})
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "results"]
    assert [p.read_text() for p in (out / "results").iterdir()] == ["2"]


def test_a_failed_run_leaves_the_previous_one(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_run(out, {"results": "1"})
    before = (out / MARKER).read_text()
    for error in (RuntimeError, KeyboardInterrupt):
        folder = OutputFolder.prepare(str(out), overwrite=False, inputs=[], command=["run"])
        with pytest.raises(error), folder.staged() as staging:
            (staging / "results").mkdir()
            raise error
        assert (out / MARKER).read_text() == before
        assert sorted(p.name for p in out.iterdir()) == [MARKER, "results"]
        assert (out / "results" / "part-0").read_text() == "1"


def test_a_failed_first_run_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "new" / "out"
    folder = OutputFolder.prepare(str(out), overwrite=False, inputs=[], command=["run"])
    assert folder.staging.is_dir() and folder.staging.name.startswith(STAGING_PREFIX)
    with pytest.raises(RuntimeError), folder.staged():
        raise RuntimeError
    assert not out.exists()
    # the parents it made for --output new/a/b go too; a folder that was there stays
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "file").write_text("x")
    folder = OutputFolder.prepare(
        str(tmp_path / "kept" / "a" / "b"), overwrite=False, inputs=[], command=["run"]
    )
    with pytest.raises(RuntimeError), folder.staged():
        raise RuntimeError
    assert sorted(p.name for p in (tmp_path / "kept").iterdir()) == ["file"]


def test_ctrl_c_waits_for_the_move(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    folder = OutputFolder.prepare(str(out), overwrite=False, inputs=[], command=["run"])
    (folder.staging / "results").mkdir()
    real_replace = os.replace

    def replace_then_interrupt(src: str | Path, dst: str | Path) -> None:
        real_replace(src, dst)
        os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(os, "replace", replace_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        folder.commit()
    marker = read_marker(out)
    assert marker is not None and marker["complete"] is True
    assert (out / "results").is_dir() and not folder.staging.exists()


def test_foreign_folders_are_refused_or_shared(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="--overwrite"):
        OutputFolder.prepare(str(out), overwrite=False, inputs=[], command=["run"])
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    write_run(out, {"results": "1"}, overwrite=True)
    write_run(out, {"report": "2"})  # floodmark's now: no --overwrite needed
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "notes.txt", "report"]
    # An empty folder is anyone's.
    empty = tmp_path / "empty"
    empty.mkdir()
    write_run(empty, {"results": "1"})


def test_a_marker_names_only_entries_of_its_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_run(out, {"results": "1"})
    (tmp_path / "keep").mkdir()
    marker = json.loads((out / MARKER).read_text())
    marker["outputs"] += ["../keep", "..", "/etc"]
    (out / MARKER).write_text(json.dumps(marker))
    write_run(out, {"results": "2"})
    assert (tmp_path / "keep").is_dir()


@pytest.mark.parametrize(
    ("output", "hint"),
    [("s3://bucket/out", "local folder"), ("file.txt", "is a file")],
)
def test_bad_targets(tmp_path: Path, output: str, hint: str) -> None:
    (tmp_path / "file.txt").write_text("x")
    target = output if "://" in output else str(tmp_path / output)
    with pytest.raises(UsageError, match=hint):
        OutputFolder.prepare(target, overwrite=True, inputs=[], command=["run"])
