"""Spark's errors made one telling line."""

from __future__ import annotations

from floodmark.cli.commands import spark_message

READ_ERROR = """An error occurred while calling o80.getResult.
: org.apache.spark.SparkException: Exception thrown in awaitResult:
\tat org.apache.spark.util.SparkThreadUtils$.awaitResult(SparkThreadUtils.scala:53)
Caused by: org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error \
while reading file file:///tmp/corrupt.parquet.  SQLSTATE: KD001
\tat org.apache.spark.sql.errors.QueryExecutionErrors$.cannotReadFilesError(Q.scala:920)
Caused by: java.io.IOException: can not read class org.apache.parquet.format.PageHeader: \
Unrecognized type 0
Caused by: shaded.parquet.org.apache.thrift.protocol.TProtocolException: Unrecognized type 0
\t... 45 more
"""

WORKER_ERROR = """An exception was thrown from the Python worker. Please see the stack trace below.
Traceback (most recent call last):
  File "/x/worker.py", line 3, in process
floodmark.exceptions.InvalidParameterError: invalid parameter `key`: too long

JVM stacktrace:
org.apache.spark.api.python.PythonException: ...
"""


def test_spark_messages_are_one_telling_line() -> None:
    assert spark_message(READ_ERROR) == (
        "Encountered error while reading file file:///tmp/corrupt.parquet "
        "(java.io.IOException: can not read class org.apache.parquet.format.PageHeader: "
        "Unrecognized type 0)"
    )
    assert spark_message(WORKER_ERROR) == (
        "floodmark.exceptions.InvalidParameterError: invalid parameter `key`: too long"
    )
    assert spark_message("An error occurred while calling o1.x.\n: java.lang.Oops: no") == (
        "java.lang.Oops: no"
    )
    assert len(spark_message("x" * 1000)) == 400
