"""A Spark session bound to loopback, with the Kafka and Avro connectors on its classpath."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOOPBACK = "127.0.0.1"


def build_session(
    jars: list[Path],
    master: str = "local[*]",
    app_name: str = "scalefold",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Start (or join) a Spark session that listens on 127.0.0.1 only.

    Spark's web UI binds every interface, so it stays off unless `conf` turns it
    on; Python workers run this interpreter, not whatever `python3` is on PATH.
    """
    from pyspark.sql import SparkSession

    # Read by Spark's launcher scripts before the JVM starts; no other way to set them.
    os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.jars", ",".join(str(jar) for jar in jars))
        .config("spark.driver.host", LOOPBACK)
        .config("spark.driver.bindAddress", LOOPBACK)
        .config("spark.ui.enabled", "false")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
