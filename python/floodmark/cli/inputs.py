"""Checking and reading the input of ``floodmark run`` and ``analyze``.

What can be checked without Spark is checked before it starts: the path, the format,
and for Parquet every file's footer (an empty, truncated or foreign file is an error
naming it; the footers also give the number of rows). Once Spark has read the input,
the named columns are checked before any job. An input without rows is not an error:
it gives empty outputs. A CSV file with only a header row has its columns but no
types (Spark reads them as strings); when such an input is empty, its time and value
columns are read as integers, so that it gives empty outputs too. An input whose
columns cannot be found (an empty CSV or JSON file) is an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from floodmark.cli.args import data_files, infer_format
from floodmark.cli.errors import UsageError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class InputFile:
    """The checked input: its path, format and, where the files say it, its rows."""

    path: str
    format: str
    rows: int | None = None

    def describe(self) -> str:
        """``events.parquet (1,000,000 rows)`` for progress lines."""
        name = Path(self.path).name or self.path
        return f"{name} ({self.rows:,} rows)" if self.rows is not None else name


#: The first bytes of a Parquet file.
PARQUET_MAGIC = b"PAR1"


def parquet_rows(path: Path) -> int:
    """The rows of a Parquet file or folder, from the footers (no data is read).

    Raises:
        UsageError: a file that is not a readable Parquet file (empty, truncated,
            another format), or a folder without data files.
    """
    import pyarrow.parquet as pq

    files = data_files(path) if path.is_dir() else [path]
    if not files:
        raise UsageError(f"input {path} holds no data files; check the path")
    rows = 0
    for file in files:
        try:
            rows += pq.read_metadata(file).num_rows
        except (OSError, ValueError) as err:
            what = "is empty" if file.stat().st_size == 0 else f"cannot be read ({err})"
            raise UsageError(
                f"input {file} is not a readable Parquet file: it {what}; replace or "
                "remove it, or pass --format if it is not Parquet"
            ) from None
    return rows


def check_input(path: str, fmt: str | None) -> InputFile:
    """The input's format (and rows, for Parquet), checked without Spark.

    Raises:
        UsageError: a missing path, an unknown extension, an unreadable Parquet file.
    """
    if "://" in path:
        try:
            return InputFile(path, fmt or infer_format(path))
        except ValueError as err:
            raise UsageError(str(err)) from None
    local = Path(path)
    if not local.exists():
        raise UsageError(f"input {path} does not exist; check the path")
    try:
        fmt = fmt or infer_format(path)
    except ValueError as err:
        raise UsageError(str(err)) from None
    if fmt == "parquet":
        return InputFile(path, fmt, parquet_rows(local))
    if local.is_file() and local.open("rb").read(4) == PARQUET_MAGIC:
        raise UsageError(
            f"input {path} is a Parquet file, not {fmt}; give --format parquet (or leave "
            "--format out)"
        )
    if local.is_dir() and not data_files(local):
        raise UsageError(f"input {path} holds no data files; check the path")
    return InputFile(path, fmt)


def read_input(spark: SparkSession, source: InputFile) -> DataFrame:
    """The input as a DataFrame (CSV with a header row and inferred types).

    Raises:
        UsageError: Spark finds no columns (an empty CSV or JSON file).
    """
    from pyspark.errors import AnalysisException

    reader = spark.read.format(source.format)
    if source.format == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true")
    try:
        df = reader.load(source.path)
    except AnalysisException as err:
        raise UsageError(
            f"cannot read the input {source.path} as {source.format}: {str(err).splitlines()[0]}"
        ) from None
    if not df.columns:
        raise UsageError(
            f"input {source.path} has no columns (is it empty?); give a file with a "
            "header row or records"
        )
    return df


def check_columns(df: DataFrame, named: list[tuple[str, str | None]]) -> dict[str, str]:
    """Every column named by a flag exists (before any job runs), compared the way the
    session compares names (:func:`floodmark.spark.columns.name_key`: ignoring case by
    default, as the library does).

    Args:
        df: the input.
        named: ``(flag, column)`` pairs; a None column is skipped.

    Returns:
        Each named column's name as the input spells it (``--event-time TS`` finds
        ``ts``; an exact match comes first).

    Raises:
        UsageError: naming the flag, the column and the input's columns.
    """
    from floodmark.spark.columns import name_key

    if df.columns == ["_corrupt_record"]:  # Spark's JSON reader found no record
        raise UsageError(
            "the input is not JSON Lines (one JSON object per line; Spark read no record "
            "from it, e.g. a pretty-printed array): write one object per line"
        )
    key = name_key(df)
    spelled = {key(c): c for c in reversed(df.columns)}  # the first of clashing names
    found: dict[str, str] = {}
    for flag, col in named:
        if col is None:
            continue
        if col not in df.columns and key(col) not in spelled:
            raise UsageError(
                f"{flag} {col}: the input has no such column; its columns "
                f"are {', '.join(df.columns)}"
            )
        found[col] = col if col in df.columns else spelled[key(col)]
    return found


def typed_if_empty(df: DataFrame, source: InputFile, columns: list[str]) -> DataFrame:
    """A header-only CSV input with its ``columns`` (time and value columns) read as
    integers; any other input as it is.

    Spark reads the columns of a CSV file without rows as strings, which no time or
    value column may be: an input without rows gives empty outputs instead.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    from floodmark.spark.columns import quote

    if source.format != "csv":
        return df
    types = {f.name: f.dataType for f in df.schema.fields}
    untyped = [c for c in dict.fromkeys(columns) if isinstance(types.get(c), StringType)]
    if not untyped or not df.isEmpty():
        return df
    return df.select(
        *[
            F.col(quote(c)).cast("bigint").alias(c) if c in untyped else F.col(quote(c))
            for c in df.columns
        ]
    )


__all__ = [
    "InputFile",
    "check_columns",
    "check_input",
    "data_files",
    "parquet_rows",
    "read_input",
    "typed_if_empty",
]
