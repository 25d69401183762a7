"""Where a live query's floodmark state lives, and the commit protocol.

Layout under ``state_location`` (any Hadoop file system path: local, HDFS, S3A, ABFS...):

* ``_identity.json``: the query id (from the query's checkpoint) and a fingerprint of
  the handler's configuration, written by the first batch; a state location of another
  query, or of a changed configuration, is refused before anything is written.
* ``versions/<b>/``: the state after batch ``b`` (the engine's snapshots and numbers,
  the rows held back behind the frontier, the window operators' snapshots); written in
  full before the marker, so a version without a marker is ignored and rewritten.
* ``commits/<b>``: floodmark's marker for batch ``b``, written last (atomically: a
  temporary file renamed into place), holding the batch's progress summary.

Spark writes ``offsets/b`` before it runs batch ``b`` and ``commits/b`` after the
handler returns, and runs an uncommitted batch again after a restart, on the same
offsets. So: a batch whose marker exists returns at once (its outputs and state are
committed); one without restarts from the last committed version and recomputes the
same outputs (deterministic sources and engine), overwriting any partial ones. The two
newest committed versions are kept; older ones are pruned after each commit.

All file operations go through the JVM's Hadoop ``FileSystem`` (a classic session;
Spark Connect has no JVM gateway: the streaming handlers refuse it clearly).
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

from floodmark.exceptions import FloodmarkError, InvalidParameterError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: How many committed versions are kept.
KEEP_VERSIONS = 2

#: What every refusal of a state that cannot go on offers instead.
NEW_QUERY = "start a new query (new checkpoint, state location and outputs)"


class StateError(FloodmarkError, ValueError):
    """The state location belongs to another query or configuration, or is damaged."""


class StateStore:
    """File operations on a state location, through the JVM's Hadoop ``FileSystem``."""

    def __init__(self, spark: SparkSession, location: str) -> None:
        jvm = getattr(spark, "_jvm", None)
        if jvm is None:
            raise InvalidParameterError(
                "state_location",
                "floodmark's streaming handlers keep "
                "their state through the JVM's Hadoop FileSystem, which a Spark Connect "
                "session does not expose; use a classic session",
            )
        if not isinstance(location, str) or not location:
            raise InvalidParameterError("state_location", f"expected a path, got {location!r}")
        self.spark = spark
        self.location = location.rstrip("/")
        self._committed: list[int] | None = None  # listed once, until a commit
        self._jvm = jvm
        # The class found once: each lookup through the gateway is a round trip per
        # name of its package, and a batch makes ~60 paths.
        self._path = jvm.org.apache.hadoop.fs.Path
        self._fs = self._p(self.location).getFileSystem(spark._jsc.hadoopConfiguration())

    # --- paths -----------------------------------------------------------------------

    def path(self, *parts: str) -> str:
        """``state_location/part/...``."""
        return "/".join([self.location, *parts])

    def version(self, batch_id: int, *parts: str) -> str:
        """The folder (or a file in it) of the state after ``batch_id``."""
        return self.path("versions", str(batch_id), *parts)

    def _p(self, path: str) -> Any:
        return self._path(path)

    # --- files -----------------------------------------------------------------------

    def exists(self, path: str) -> bool:
        return bool(self._fs.exists(self._p(path)))

    def delete(self, path: str) -> None:
        if self.exists(path):
            self._fs.delete(self._p(path), True)

    def read(self, path: str) -> bytes:
        stream = self._fs.open(self._p(path))
        try:
            data = self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
        finally:
            stream.close()
        return bytes(data)

    def write(self, path: str, data: bytes) -> None:
        """Writes ``data`` to ``path`` atomically: a temporary file renamed into place."""
        temporary = f"{path}.tmp-{uuid.uuid4().hex}"
        self.create(temporary, data)
        self.delete(path)
        if not self._fs.rename(self._p(temporary), self._p(path)):
            raise StateError(f"cannot move {temporary} to {path}")

    def create(self, path: str, data: bytes) -> None:
        """Writes ``data`` to ``path`` (replacing it; its folders made), not atomically:
        for files nothing reads before a later step says they are whole (a version's
        files before its marker, a staged output before it is published, a flag that
        counts by existing): five gateway round trips fewer than :meth:`write`
        (the temporary file's removal check and rename)."""
        stream = self._fs.create(self._p(path), True)
        try:
            if data:
                stream.write(bytearray(data))
        finally:
            stream.close()

    def copy(self, source: str, target: str) -> None:
        """Copies file ``source`` to ``target`` atomically (a temporary file renamed into
        place), within this file system."""
        temporary = f"{target}.tmp-{uuid.uuid4().hex}"
        util = self._jvm.org.apache.hadoop.fs.FileUtil
        conf = self.spark._jsc.hadoopConfiguration()
        if not util.copy(self._fs, self._p(source), self._fs, self._p(temporary), False, conf):
            raise StateError(f"cannot copy {source} to {temporary}")
        self.rename(temporary, target)

    def rename(self, source: str, target: str) -> None:
        """Moves ``source`` to ``target`` (replacing it)."""
        self.delete(target)
        self._fs.mkdirs(self._p(target).getParent())
        if not self._fs.rename(self._p(source), self._p(target)):
            raise StateError(f"cannot move {source} to {target}")

    def move_into(self, source: str, target: str) -> None:
        """Moves folder ``source`` to ``target``, safe to run again after a crash in
        it: in one rename while ``target`` does not exist (atomic where the file
        system renames folders atomically: HDFS, local, ABFS), else entry by entry,
        each replacing its namesake (what an interrupted move left: a file system that
        renames a folder by copying its files, as S3A does, can stop half way), then
        ``source`` removed. Nothing already moved is deleted."""
        if not self.exists(target):
            self._fs.mkdirs(self._p(target).getParent())
            if self._fs.rename(self._p(source), self._p(target)):
                return
        self._fs.mkdirs(self._p(target))
        for name in self.names(source):
            self.rename(f"{source}/{name}", f"{target}/{name}")
        self.delete(source)

    def committed_file(self, batch_id: int, name: str) -> str:
        """The path of ``name`` in committed batch ``batch_id``'s version; a
        :class:`StateError` if it is missing (a committed version has all its files)."""
        path = self.version(batch_id, name)
        if not self.exists(path):
            raise StateError(
                f"the committed state of batch {batch_id} is damaged: {path} is missing; "
                "restore the state location from a copy taken with the query's checkpoint"
            )
        return path

    def size(self, path: str) -> int:
        """Bytes under ``path`` (0 if it does not exist)."""
        if not self.exists(path):
            return 0
        return int(self._fs.getContentSummary(self._p(path)).getLength())

    def names(self, path: str) -> list[str]:
        """The names in folder ``path`` (empty if it does not exist)."""
        if not self.exists(path):
            return []
        return [str(s.getPath().getName()) for s in self._fs.listStatus(self._p(path))]

    # --- identity --------------------------------------------------------------------

    def committed_setting(self, name: str) -> Any:
        """The configuration value ``name`` recorded with committed batches (None when
        nothing is committed or it was not recorded)."""
        path = self.path("_identity.json")
        if not self.exists(path) or not self.committed():
            return None
        return json.loads(self.read(path)).get("config", {}).get(name)

    def check_identity(self, query_id: str | None, fingerprint: dict[str, Any]) -> bytes | None:
        """Refuses a state location of another query, or of another configuration once
        a batch is committed. Returns the record to keep (:meth:`record_identity`, once
        the batch is known to continue the state) on first use, or None. Before the
        first commit the configuration may change (a first batch that failed, e.g. on
        the native path's range, can be run again with ``path="keyed"``): nothing of the
        old one is kept."""
        path = self.path("_identity.json")
        mine = {"query_id": query_id, "config": fingerprint}
        record = json.dumps(mine, sort_keys=True, indent=1).encode()
        if not self.exists(path):
            if self.exists(self.path("offsets")) or self.exists(self.path("metadata")):
                raise InvalidParameterError(
                    "state_location",
                    f"{self.location} is a streaming query's checkpoint (it holds "
                    "offsets/ and metadata), whose commits/ folder floodmark's markers "
                    "would share: give floodmark's state a folder of its own, e.g. "
                    f"{self.location}/floodmark; nothing was written",
                )
            if self.committed():
                raise StateError(
                    f"the state location {self.location} holds committed batches but no "
                    "_identity.json: it was not written by this version of floodmark"
                )
            return record
        stored = json.loads(self.read(path))
        if stored.get("query_id") == query_id and not self.committed():
            return record if stored.get("config") != fingerprint else None
        if stored.get("query_id") != query_id:
            raise StateError(
                f"the state location {self.location} belongs to streaming query "
                f"{stored.get('query_id')}, and this is query {query_id} (another "
                "checkpoint): give this query a state location of its own, or restart the "
                "original query from its own checkpoint; nothing was written"
            )
        old = stored.get("config", {})
        changed = sorted(k for k in set(old) | set(fingerprint) if old.get(k) != fingerprint.get(k))
        if changed:
            details = "; ".join(f"{k}: {old.get(k)!r} -> {fingerprint.get(k)!r}" for k in changed)
            if "path" in changed:
                details += f" (pass path={old.get('path')!r} or 'auto' to continue this state)"
            raise StateError(
                f"the streaming handler's configuration changed since the state in "
                f"{self.location} was written ({details}); the state of one "
                f"configuration cannot continue another: {NEW_QUERY}, or restore the "
                "previous configuration. Nothing was written"
            )
        return None

    def record_identity(self, record: bytes) -> None:
        """Keeps what :meth:`check_identity` returned."""
        self.write(self.path("_identity.json"), record)

    # --- commits ---------------------------------------------------------------------

    def committed(self) -> list[int]:
        """The batch ids with a marker, ascending (listed once per store, until
        :meth:`commit`: one store serves one batch)."""
        if self._committed is None:
            names = self.names(self.path("commits"))
            self._committed = sorted(int(n) for n in names if n.isdigit())
        return list(self._committed)

    def check_continues(self, batch_id: int) -> None:
        """Refuses batch ``batch_id`` unless the newest committed batch is the one
        before it, or is it (run again: Spark crashed between floodmark's marker and its
        own commit), or none is and this is batch 0. Spark numbers its batches one after
        another from 0, runs the handler for each and runs again only its newest, so
        anything else means the checkpoint and the state have parted (one of them
        restored from an older copy, or a handler whose errors were swallowed): running
        on would drop the rows of the batches in between, or skip or replace committed
        batches whose offsets may now differ. Nothing is written."""
        done = self.committed()
        if not done and batch_id > 0:
            what = (
                f"Spark runs batch {batch_id}, but {self.location} holds no committed "
                "batch: the state was lost, or the query's earlier batches kept it "
                "elsewhere (a new checkpoint starts at batch 0)"
            )
        elif not done or done[-1] in (batch_id - 1, batch_id):
            return
        elif done[-1] > batch_id:
            what = (
                f"Spark runs batch {batch_id}, but batch {done[-1]} is committed in "
                f"{self.location}: the checkpoint is behind the state"
            )
        else:
            what = (
                f"Spark runs batch {batch_id}, but the newest batch committed in "
                f"{self.location} is {done[-1]}: the state is behind the checkpoint (batches "
                f"{done[-1] + 1}-{batch_id - 1} are not in it)"
            )
        raise StateError(
            f"{what}. A query's checkpoint and floodmark state must be kept (and restored) "
            f"together: restore the matching pair, or {NEW_QUERY}. A foreachBatch function "
            "must call the handler for every batch, empty ones too (an empty batch costs "
            "it little). Nothing was written"
        )

    def is_committed(self, batch_id: int) -> bool:
        return self.exists(self.path("commits", str(batch_id)))

    def last_before(self, batch_id: int) -> int | None:
        """The newest committed batch before ``batch_id``."""
        earlier = [b for b in self.committed() if b < batch_id]
        return earlier[-1] if earlier else None

    def commit(self, batch_id: int, summary: dict[str, Any]) -> None:
        """Writes the marker of ``batch_id`` (last), then prunes old versions."""
        self.write(self.path("commits", str(batch_id)), json.dumps(summary).encode())
        self._committed = None
        keep = self.committed()[-KEEP_VERSIONS:]
        for name in self.names(self.path("versions")):
            if name.isdigit() and int(name) < keep[0]:
                self.delete(self.path("versions", name))
        for old in self.committed()[:-KEEP_VERSIONS]:
            self.delete(self.path("commits", str(old)))
        self._committed = None

    def summary(self, batch_id: int) -> dict[str, Any]:
        """The progress summary a committed batch's marker holds."""
        data: dict[str, Any] = json.loads(self.read(self.path("commits", str(batch_id))))
        return data


__all__ = ["KEEP_VERSIONS", "NEW_QUERY", "StateError", "StateStore"]
