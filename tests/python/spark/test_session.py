"""``local_session`` applies the local-only settings to local masters only."""

from __future__ import annotations

from typing import Any

import pytest

from floodmark.spark import local_session
from floodmark.spark.session import ARROW_CONF, LOCAL_CONF


class FakeBuilder:
    """Records what ``local_session`` asks of ``SparkSession.builder``."""

    def __init__(self) -> None:
        self.conf: dict[str, str] = {}

    def master(self, url: str) -> FakeBuilder:
        self.url = url
        return self

    def appName(self, name: str) -> FakeBuilder:
        return self

    def config(self, key: str, value: str) -> FakeBuilder:
        self.conf[key] = value
        return self

    def getOrCreate(self) -> Any:
        class Context:
            def setLogLevel(self, level: str) -> None:
                pass

        class Session:
            sparkContext = Context()

        return Session()


@pytest.mark.parametrize(
    ("master", "local"),
    [("local[*]", True), ("local[2]", True), ("spark://host:7077", False), ("yarn", False)],
)
def test_local_settings_only_for_local_masters(monkeypatch: Any, master: str, local: bool) -> None:
    from pyspark.sql import SparkSession

    builder = FakeBuilder()
    monkeypatch.setattr(SparkSession, "builder", builder)
    local_session(master=master, conf={"spark.sql.shuffle.partitions": "9"} if local else None)
    assert builder.url == master
    assert ARROW_CONF.items() <= builder.conf.items()
    for key in LOCAL_CONF:
        assert (key in builder.conf) == local
    if local:  # the caller's conf wins
        assert builder.conf["spark.sql.shuffle.partitions"] == "9"
