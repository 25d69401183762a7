"""Where a live query's outputs go: exactly once per batch.

A sink is any callable ``sink(kind, df, batch_id)``: the handlers call it once per
output ``kind`` (``results``, ``late``, ``dropped`` for windows; ``records``,
``timeline`` for watermarks; ``timeline`` for windows and ``emissions`` for both when
asked for) per batch, before floodmark's commit marker. A batch that
failed before its marker runs again with the same ``batch_id`` and the same rows, so a
sink must make a second write of one ``(kind, batch_id)`` replace the first: Delta's
idempotent writes (``txnAppId`` = the query's id, ``txnVersion`` = ``batch_id``), a
JDBC ``MERGE`` or delete-then-insert keyed by ``batch_id``, or :class:`ParquetOutputs`.

:class:`ParquetOutputs` goes further: it stages each batch's files in a hidden folder
and moves them into place only after the marker, so ``spark.read.parquet(path +
"/results")`` shows exactly the committed batches, never a part of one.
"""

from __future__ import annotations

import inspect
import json
import logging
from typing import TYPE_CHECKING, Any, Protocol

from floodmark.exceptions import InvalidParameterError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from floodmark.spark.streaming.state import StateStore

log = logging.getLogger(__name__)


class Sink(Protocol):
    """A callable output: ``sink(kind, df, batch_id)`` (see the module docstring)."""

    def __call__(self, kind: str, df: DataFrame, batch_id: int) -> None: ...


#: The partition column of :class:`ParquetOutputs`' folders.
PARTITION = "batch"
#: The folder (under the output path) of :class:`ParquetOutputs`' empty Parquet files,
#: one per output kind and schema, whose bytes stage a batch that has none of that output.
EMPTY = "_empty"


class ParquetOutputs:
    """Parquet folders ``path/<kind>``, one ``batch=<id>`` partition per committed batch.

    Each batch's rows are written into ``path/<kind>/_staging-<id>`` (hidden from
    readers: Spark skips names starting with ``_``) and moved to
    ``path/<kind>/batch=<id>`` once floodmark has committed the batch, replacing what an
    earlier run of that batch id left there (the state records that the move began, so
    a move cut short by a crash is finished, not started again).
    ``spark.read.parquet(path + "/results")`` returns the committed batches with a
    ``batch`` column.

    The first batch records the query's id in ``path/_query.json``; another query
    (another checkpoint) writing to the same path is refused. ``path/_empty`` keeps one
    empty Parquet file per output and schema, whose bytes stage a batch that has no
    rows of that output (:meth:`write_empty`, :meth:`stage_empty`: no Spark job for
    it).

    Where the file system renames a folder in one step (HDFS, local, ABFS), a reader
    sees a batch whole or not at all. S3A renames a folder file by file: there a reader
    listing the folder while a batch is published can see part of it (a crash in the
    move loses nothing: the next attempt moves the rest); use a table format's
    idempotent writes (Delta's ``txnAppId``/``txnVersion``) for readers on S3.

    Args:
        path: the output folder (any Hadoop file system path; it may be on another
            file system than the state location).
        options: ``"parquet"`` writer options (e.g. ``compression="zstd"``).
    """

    def __init__(self, path: str, **options: str) -> None:
        if not isinstance(path, str) or not path:
            raise InvalidParameterError("path", f"expected an output folder, got {path!r}")
        self.path = path.rstrip("/")
        self.options = options
        self._store: StateStore | None = None
        self._templates: dict[str, bytes] = {}  # a template's path -> its bytes

    def staging(self, kind: str, batch_id: int) -> str:
        return f"{self.path}/{kind}/_staging-{batch_id}"

    def final(self, kind: str, batch_id: int) -> str:
        return f"{self.path}/{kind}/{PARTITION}={batch_id}"

    def check(self, events: DataFrame) -> None:
        """Refuses an input column named like the partition column in any case (the
        outputs keep the input's columns, and reading them back, in a session that
        may compare names without case, would replace its values with the batch ids),
        before any job."""
        from floodmark.exceptions import SchemaError

        clash = [c for c in events.columns if c.lower() == PARTITION]
        if clash:
            raise SchemaError(
                clash[0],
                f"ParquetOutputs partitions its outputs by {PARTITION!r}, and the outputs "
                f"keep the input's columns: reading them back would replace the values of "
                f"{clash[0]!r} with batch ids; rename the column or use another sink",
            )

    def __call__(self, kind: str, df: DataFrame, batch_id: int) -> None:
        """Writes ``df`` into the staging folder of ``(kind, batch_id)``."""
        writer = df.write.mode("overwrite")
        for key, value in self.options.items():
            writer = writer.option(key, value)
        writer.parquet(self.staging(kind, batch_id))

    def write_empty(self, kind: str, df: DataFrame, batch_id: int) -> None:
        """Stages ``(kind, batch_id)`` as a batch with no rows of ``df``'s schema (the
        caller knows it has none), as :meth:`__call__` of no rows would, but without a
        Spark job after the first (:meth:`stage_empty`); the first writes the batch by
        a job and keeps its file as the template of that schema (and these writer
        options) in ``path/_empty``. Every published batch folder holds a file with the
        output's schema, so ``spark.read.parquet`` reads the output whatever batches it
        holds."""
        from pyspark.sql import functions as F

        spark = df.sparkSession
        if self.stage_empty(spark, kind, df.schema, batch_id):
            return
        self(kind, df.where(F.lit(False)), batch_id)
        files = self._files(spark)
        part = next(
            (n for n in files.names(self.staging(kind, batch_id)) if n.startswith("part-")), None
        )
        if part is not None:  # Spark writes one file of the schema for no rows
            files.copy(f"{self.staging(kind, batch_id)}/{part}", self._template(kind, df.schema))

    def stage_empty(self, spark: Any, kind: str, schema: StructType, batch_id: int) -> bool:
        """Stages ``(kind, batch_id)`` as a batch with no rows of ``schema`` from the
        template :meth:`write_empty` kept, without a job: the template's bytes (read
        once per :class:`ParquetOutputs`) written as the folder's one file, and
        ``_SUCCESS``. False when there is no template of that schema yet (nothing
        written)."""
        files = self._files(spark)
        template = self._template(kind, schema)
        data = self._templates.get(template)
        if data is None:
            if not files.exists(template):
                return False
            data = self._templates[template] = files.read(template)
        staging = self.staging(kind, batch_id)
        files.delete(staging)  # what a failed attempt left
        files.create(f"{staging}/part-00000-empty.parquet", data)
        files.create(f"{staging}/_SUCCESS", b"")
        return True

    def _template(self, kind: str, schema: StructType) -> str:
        """The path of the empty file of output ``kind`` in ``schema`` (and these
        writer options)."""
        import hashlib

        shape = json.dumps([schema.jsonValue(), sorted(self.options.items())])
        return f"{self.path}/{EMPTY}/{kind}-{hashlib.sha256(shape.encode()).hexdigest()[:16]}"

    def _files(self, spark: Any) -> StateStore:
        """The file operations on ``path`` through ``spark``'s JVM (made once per
        SparkContext: making them costs gateway round trips, and each micro-batch
        comes with a session object of its own)."""
        from floodmark.spark.streaming.state import StateStore

        if self._store is None or self._store.spark.sparkContext is not spark.sparkContext:
            self._store = StateStore(spark, self.path)
        return self._store

    def claim(self, spark: Any, query_id: str | None) -> None:
        """Records ``query_id`` as the query writing to ``path`` (``path/_query.json``)
        on first use, and refuses another query's outputs: a batch id of this query
        would replace that query's batch of the same id."""
        from floodmark.spark.streaming.state import StateError

        files = self._files(spark)
        record = files.path("_query.json")
        if not files.exists(record):
            files.write(record, json.dumps({"query_id": query_id}).encode())
            return
        owner = json.loads(files.read(record)).get("query_id")
        if owner != query_id:
            raise StateError(
                f"the outputs in {self.path} belong to streaming query {owner}, and this "
                f"is query {query_id} (another checkpoint): its batches would replace "
                "that query's batches of the same ids; give this query outputs of its "
                "own (another path), or delete those; nothing was written"
            )

    def drop_uncommitted(self, spark: Any, newest: int, kinds: list[str]) -> list[str]:
        """Removes the published batches of ``kinds`` above ``newest``, the newest
        batch the state has committed (whose outputs were ``kinds``), and returns their
        folders. Only a checkpoint and state restored from a copy older than the
        outputs leave such batches (the protocol publishes a batch after its marker):
        the restored query runs those batch ids again, on other offsets, and each
        replaces its own folder when it is published, but until then a reader would see
        batches that are not committed, whose rows the restored query also writes
        again. Other kinds are left alone: another handler of the query may write them
        to the same path, and be a batch ahead."""
        files = self._files(spark)
        stale = [
            f"{self.path}/{kind}/{name}"
            for kind in kinds
            for name in files.names(f"{self.path}/{kind}")
            if name.startswith(f"{PARTITION}=")
            and name[len(PARTITION) + 1 :].isdigit()
            and int(name[len(PARTITION) + 1 :]) > newest
        ]
        for folder in stale:
            files.delete(folder)
        if stale:
            log.warning(
                "removed %d output batch folder(s) above batch %s, the newest that the "
                "state location has committed (the checkpoint and state were restored "
                "from a copy older than the outputs): %s",
                len(stale),
                newest,
                ", ".join(stale),
            )
        return stale

    def staged(self, spark: Any, batch_id: int, kinds: list[str]) -> bool:
        """Whether any of ``kinds`` of batch ``batch_id`` waits in its staging folder
        (written and committed, not yet published)."""
        files = self._files(spark)
        return any(files.exists(self.staging(kind, batch_id)) for kind in kinds)

    def publish(self, store: Any, batch_id: int, kinds: list[str]) -> None:
        """Moves the staged folders of a committed batch into place (idempotent, and
        safe to run again after a crash in it), through the file system of ``path``
        (which may differ from the state location's)."""
        files = self._files(store.spark)
        for kind in kinds:
            staged, final = self.staging(kind, batch_id), self.final(kind, batch_id)
            if not files.exists(staged):  # published
                continue
            begun = store.version(batch_id, f"publishing-{kind}")
            if not store.exists(begun):  # a first move: what is there is another run's
                files.delete(final)  # (outputs not restored with checkpoint and state)
                store.create(begun, b"")  # a flag: it counts by existing
            files.move_into(staged, final)

    def __repr__(self) -> str:
        return f"ParquetOutputs({self.path!r})"


def check_staged_here(spark: Any, outputs: object, batch_id: int, summary: dict[str, Any]) -> None:
    """Refuses to go on from a batch committed with its outputs staged in another
    :class:`ParquetOutputs` folder (``summary["outputs_path"]``) and not yet published
    there (the query stopped between floodmark's marker and the move): publishing here
    would find nothing to move, and that batch would be missing from every output.

    Raises:
        StateError: naming the folder to restart with.
    """
    from floodmark.spark.streaming.state import StateError

    staged_at = summary.get("outputs_path")
    here = outputs.path if isinstance(outputs, ParquetOutputs) else None
    if staged_at is None or staged_at == here:
        return
    if ParquetOutputs(staged_at).staged(spark, batch_id, summary.get("kinds", [])):
        raise StateError(
            f"batch {batch_id} was committed with its outputs staged in "
            f"ParquetOutputs({staged_at!r}), and the query stopped before they were "
            f"published there; restart it once with outputs=ParquetOutputs({staged_at!r}) "
            "to publish them, then change the outputs; nothing was written"
        )


def check_sink(outputs: object) -> Sink:
    """A callable ``(kind, df, batch_id)``; a clear error for anything else, a callable
    that cannot take those three arguments included (checked from its signature, when
    Python can read one)."""
    expected = "expected ParquetOutputs(path) or a callable (kind, df, batch_id)"
    if not callable(outputs):
        raise InvalidParameterError("outputs", f"{expected}, got {type(outputs).__name__}")
    try:
        signature = inspect.signature(outputs)
    except (TypeError, ValueError):  # a builtin or extension callable: taken on trust
        return outputs
    try:
        signature.bind("results", None, 0)
    except TypeError as err:
        raise InvalidParameterError(
            "outputs", f"{expected}; {getattr(outputs, '__name__', outputs)!r} {err}"
        ) from None
    return outputs


__all__ = ["ParquetOutputs", "Sink", "check_sink"]
