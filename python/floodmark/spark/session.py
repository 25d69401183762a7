"""A local Spark session with the Arrow settings floodmark is tuned for.

With ``spark.sql.execution.arrow.maxBytesPerBatch`` at its default, Spark re-measures
each Arrow batch's bytes for every row, a third of the JVM's time; only the exact value
2147483647 skips that. With it and ~100k rows per batch, an identity ``mapInArrow``
pass over 10M rows ran 2-3x faster on the machine where this was first measured
(6.9-7.7 -> 2.5-4.0 s) and ~1.4x faster on this project's bench machine (1.84 ->
1.35 s; docs/performance.md). These are the defaults here; every one can be overridden
with ``conf``. The settings for a small local session (:data:`LOCAL_CONF`) apply only
to ``local`` masters.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Arrow batch settings applied by :func:`local_session` (documented in docs/spark.md).
ARROW_CONF: dict[str, str] = {
    "spark.sql.execution.arrow.maxBytesPerBatch": "2147483647",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}

DEFAULT_CONF: dict[str, str] = {
    **ARROW_CONF,
    # The window aggregation groups millions of (key, window) pairs: the first-level
    # fast hash map (2^16 slots) overflows and costs every row a failed probe.
    "spark.sql.codegen.aggregate.map.twolevel.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
}

#: Added for ``local`` masters only: a cluster keeps its own shuffle width, web UI and
#: driver memory.
LOCAL_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "4",
    "spark.ui.enabled": "false",
    "spark.driver.memory": "4g",
}


def _java17_home() -> str | None:
    for candidate in sorted(Path("/usr/lib/jvm").glob("*17*")):
        if (candidate / "bin" / "java").exists():
            return str(candidate)
    return None


def local_session(
    master: str = "local[*]", app_name: str = "floodmark", conf: Mapping[str, str] | None = None
) -> SparkSession:
    """Get (or create) a Spark session with floodmark's Arrow settings.

    Args:
        master: Spark master URL; ``local[*]`` (all cores) by default, or a cluster URL
            (then :data:`LOCAL_CONF` is left out).
        app_name: the application's name.
        conf: extra or overriding Spark settings.

    Returns:
        The active session. ``spark.driver.memory`` only takes effect if this call
        creates the session.
    """
    import sys

    from pyspark.sql import SparkSession

    if "JAVA_HOME" not in os.environ and (home := _java17_home()):
        os.environ["JAVA_HOME"] = home  # Spark 4 needs Java 17+; pick 17 if several.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    local = master.strip().lower().startswith("local")
    for key, value in {**DEFAULT_CONF, **(LOCAL_CONF if local else {}), **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


__all__ = ["ARROW_CONF", "DEFAULT_CONF", "LOCAL_CONF", "local_session"]
