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
    """Start (or join) a Spark session; with a local master it listens on 127.0.0.1 only.

    On a cluster (`spark://...`) the executors connect back to the driver, so it
    keeps Spark's own choice of address (SPARK_LOCAL_IP, else this machine's).
    Spark's web UI binds every interface, so it stays off unless `conf` turns it
    on; Python workers run this interpreter, not whatever `python3` is on PATH
    (on a cluster: the same path on the workers, as in scalefold's image).
    """
    from pyspark.sql import SparkSession

    local = master.startswith("local")
    # Read by Spark's launcher scripts before the JVM starts; no other way to set them.
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.jars", ",".join(str(jar) for jar in jars))
        .config("spark.ui.enabled", "false")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
    )
    if local:
        builder = builder.config("spark.driver.host", LOOPBACK).config(
            "spark.driver.bindAddress", LOOPBACK
        )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


HISTORY_CONF = {
    # Parquet's standard timestamp type; Spark's default (INT96) is deprecated in Parquet.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    # The CLI prints its own progress; Spark's bar garbles logs of a long-running job.
    "spark.ui.showConsoleProgress": "false",
}
QUIET_LOGGERS = (
    # Warns on every task that re-encodes a record to detect trailing bytes (decode.py):
    # the decoded struct is nullable in Catalyst, the Avro fields are not.
    "org.apache.spark.sql.avro.AvroSerializer",
    # Warns at every query start that adaptive execution is off for streaming (as intended).
    "org.apache.spark.sql.execution.streaming.ResolveWriteToStream",
    # Warns that the plan of the Avro-decoding query is too long to print.
    "org.apache.spark.sql.catalyst.util.SparkStringUtils",
    # Warns on every micro-batch that takes longer than the trigger interval: with six
    # queries on two cores most do while records arrive; the queries simply catch up.
    "org.apache.spark.sql.execution.streaming.ProcessingTimeExecutor",
)


def history_session(
    jars: list[Path], master: str = "local[*]", conf: Mapping[str, str] | None = None
) -> SparkSession:
    """The session of the history service: `build_session` plus its Parquet and log settings."""
    session = build_session(
        jars, master, app_name="scalefold-history", conf={**HISTORY_CONF, **(conf or {})}
    )
    jvm = session.sparkContext._jvm
    assert jvm is not None
    for logger in QUIET_LOGGERS:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
            logger, jvm.org.apache.logging.log4j.Level.ERROR
        )
    return session
