"""The output folder: written whole or not at all, and never taken from the user.

A command writes everything into a staging folder inside ``--output``
(``DIR/.floodmark-staging-<id>/``, on the same file system, so moving is a rename) and
moves it into place only when all of it is written. ``DIR/_FLOODMARK`` (JSON: the
command, floodmark's version, the times, the outputs, ``"complete"``) says the folder
is floodmark's; it reads ``"complete": false`` only during the few renames that move
a finished run into place, so a folder a user finds holds either one whole run or a
marker saying it is incomplete. An interrupted or failed run removes its staging
folder and leaves the previous outputs as they were.

A non-empty folder without ``_FLOODMARK`` is refused unless ``--overwrite``; even then
only the entries the command writes (``results/``, ``report/``, ...) are replaced, the
user's other files are kept.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from types import FrameType
from typing import Any

from floodmark.cli.errors import UsageError

#: The marker file that makes a folder floodmark's.
MARKER = "_FLOODMARK"
#: Prefix of the staging folders (hidden; one per run).
STAGING_PREFIX = ".floodmark-staging-"
#: How long a failed run waits before it looks for its staging folder a second time.
SETTLE_S = 0.5


def active_spark_context() -> Any:
    """The running SparkContext if this process started one (None otherwise, and
    without importing Spark)."""
    pyspark = sys.modules.get("pyspark")
    return getattr(getattr(pyspark, "SparkContext", None), "_active_spark_context", None)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def read_marker(folder: Path) -> dict[str, Any] | None:
    """The marker of ``folder`` if floodmark wrote one (None otherwise)."""
    try:
        data = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("tool") == "floodmark" else None


def _own_entries(marker: dict[str, Any] | None) -> list[str]:
    """The entry names a marker lists as floodmark's outputs (plain names only)."""
    names = (marker or {}).get("outputs", [])
    if not isinstance(names, list):
        return []
    return [
        n
        for n in names
        if isinstance(n, str)
        and n
        and n not in (".", "..", MARKER)
        and "/" not in n
        and os.sep not in n
    ]


def _within(inner: Path, outer: Path) -> bool:
    return inner == outer or outer in inner.parents


def check_separate(output: Path, inputs: Sequence[str]) -> None:
    """Refuse an output folder that is an input, lies inside one or holds one.

    Raises:
        UsageError: naming ``--output`` and the input.
    """
    out = output.resolve()
    for name in inputs:
        if "://" in name:
            continue
        source = Path(name).resolve()
        if out == source:
            raise UsageError(f"--output {output} is the input; name another folder")
        if _within(out, source):
            raise UsageError(
                f"--output {output} is inside the input {name}; name a folder outside it"
            )
        if _within(source, out):
            raise UsageError(
                f"--output {output} holds the input {name}; name another folder, one "
                "that does not contain the input"
            )


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


@contextmanager
def _interrupts_deferred() -> Iterator[None]:
    """Hold Ctrl-C until the block ends (the renames that move a run into place), then
    raise it; outside the main thread the block just runs."""
    caught: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        caught.append(signum)

    try:
        previous = signal.signal(signal.SIGINT, hold)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


@dataclass
class OutputFolder:
    """One command's output folder and its staging folder (see the module)."""

    target: Path
    command: list[str]
    staging: Path = field(init=False)
    #: The outermost folder this run created (``--output`` itself or a parent of it),
    #: removed again if the run fails and leaves it empty.
    created: Path | None = None
    started: str = field(default_factory=_now)

    def __post_init__(self) -> None:
        self.staging = self.target / f"{STAGING_PREFIX}{uuid.uuid4().hex[:12]}"

    @classmethod
    def prepare(
        cls, output: str, *, overwrite: bool, inputs: Sequence[str], command: Sequence[str]
    ) -> OutputFolder:
        """Check ``--output`` and create the staging folder, before any job runs.

        Args:
            output: the ``--output`` folder.
            overwrite: ``--overwrite``: a non-empty folder floodmark did not write is
                accepted (its entries named like floodmark's outputs are replaced).
            inputs: the input paths (the output must be apart from them).
            command: the command line, for the marker.

        Raises:
            UsageError: a URL, a file, a folder holding or inside the input, a
                non-empty folder not written by floodmark (without ``overwrite``), or a
                folder that cannot be written.
        """
        if "://" in output:
            raise UsageError(f"--output {output}: give a local folder (not a URL)")
        target = Path(output)
        if target.exists() and not target.is_dir():
            raise UsageError(f"--output {output} is a file; name a folder")
        check_separate(target, inputs)
        if target.is_dir() and not overwrite and read_marker(target) is None:
            found = [p.name for p in target.iterdir() if not p.name.startswith(STAGING_PREFIX)]
            if found:
                raise UsageError(
                    f"--output {output} is not empty and floodmark did not write it (it "
                    f"has no {MARKER} file); name a new or empty folder, or pass "
                    "--overwrite to replace floodmark's outputs in it"
                )
        missing = [p for p in (target, *target.parents) if not p.exists()]
        folder = cls(target, ["floodmark", *command], created=missing[-1] if missing else None)
        try:
            target.mkdir(parents=True, exist_ok=True)
            folder.staging.mkdir()
        except OSError as err:
            raise UsageError(
                f"--output {output}: cannot write there ({err.strerror or err}); name a "
                "folder you can write to"
            ) from None
        return folder

    def _write_marker(self, *, complete: bool, outputs: list[str]) -> None:
        from floodmark import __version__

        data = {
            "tool": "floodmark",
            "version": __version__,
            "command": self.command,
            "started": self.started,
            "finished": _now() if complete else None,
            "complete": complete,
            "outputs": outputs,
        }
        temp = self.target / f"{MARKER}.{self.staging.name}"
        temp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        os.replace(temp, self.target / MARKER)

    def commit(self) -> None:
        """Move the staged outputs into place (replacing the previous run's) and mark
        the folder complete; Ctrl-C waits until this is done."""
        with _interrupts_deferred():
            names = sorted(p.name for p in self.staging.iterdir())
            previous = _own_entries(read_marker(self.target))
            self._write_marker(complete=False, outputs=names)
            for name in dict.fromkeys([*previous, *names]):
                _remove(self.target / name)
            for name in names:
                os.replace(self.staging / name, self.target / name)
            self.staging.rmdir()
            self._write_marker(complete=True, outputs=names)

    def abort(self) -> None:
        """Remove the staging folder (and the folders this run made, if empty); the
        previous outputs stay as they were."""
        shutil.rmtree(self.staging, ignore_errors=True)
        if active_spark_context() is not None:
            # A Spark write whose Py4J call Ctrl-C interrupted may still be starting in
            # the JVM and create its folder a moment later: look once more.
            time.sleep(SETTLE_S)
            shutil.rmtree(self.staging, ignore_errors=True)
        if self.created is None:
            return
        for path in (self.target, *self.target.parents):
            try:
                path.rmdir()
            except OSError:  # not empty (or gone): what holds it is not ours to remove
                return
            if path == self.created:
                return

    @contextmanager
    def staged(self) -> Iterator[Path]:
        """The staging folder to write into: committed if the block succeeds, removed
        if it fails or is interrupted."""
        try:
            yield self.staging
        except BaseException:
            self.abort()
            raise
        self.commit()


__all__ = [
    "MARKER",
    "STAGING_PREFIX",
    "OutputFolder",
    "active_spark_context",
    "check_separate",
    "read_marker",
]
