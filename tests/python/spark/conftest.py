"""One local Spark session for the whole test run (Spark tests are marked `spark`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from floodmark.spark import local_session

    session = local_session(
        master="local[2]",
        conf={"spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "2"},
    )
    yield session
    session.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/python/spark" in str(item.fspath):
            item.add_marker(pytest.mark.spark)
