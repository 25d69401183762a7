"""The keyed window operator's default number of partitions, with and without a
``SparkContext`` (Spark Connect sessions have none)."""

from __future__ import annotations

from typing import Any

from floodmark.spark.windows.keyed import default_partitions


class ConnectLike:
    """What a Spark Connect session shows here: ``sparkContext`` raises an
    ``AttributeError`` subclass, the SQL conf answers."""

    def __init__(self, shuffle_partitions: str | None) -> None:
        self.conf = {"spark.sql.shuffle.partitions": shuffle_partitions}

    def __getattr__(self, name: str) -> Any:
        from pyspark.errors import PySparkAttributeError

        raise PySparkAttributeError(
            errorClass="JVM_ATTRIBUTE_NOT_SUPPORTED", messageParameters={"attr_name": name}
        )


def test_a_classic_session_uses_the_default_parallelism(spark: Any) -> None:
    assert default_partitions(spark) == spark.sparkContext.defaultParallelism == 2  # local[2]


def test_without_a_spark_context_the_shuffle_partitions() -> None:
    assert default_partitions(ConnectLike("7")) == 7  # type: ignore[arg-type]
    assert default_partitions(ConnectLike(None)) == 200  # type: ignore[arg-type]
