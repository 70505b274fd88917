"""A Spark session bound to loopback, with the Kafka and Avro connectors on its classpath."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING

from services.localstack.jvm import extra_jvm_options

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOOPBACK = "127.0.0.1"
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
POOLS = Path(__file__).with_name("fairscheduler.xml")
"""The FAIR scheduler's pools of the history's queries (queries.py): latest, planner,
default (SQL clients, upkeep), tables."""
"""Spark's and the JVM's logging: warnings and errors to the JVM's stderr (see the file)."""

JvmOutput = IO[bytes] | int | None
"""Where the driver JVM's stdout and stderr go: a file, subprocess.DEVNULL, or None
(this process's own, e.g. the service's log, or the terminal with -v)."""


def build_session(
    jars: list[Path],
    master: str = "local[*]",
    app_name: str = "scalefold",
    conf: Mapping[str, str] | None = None,
    jvm_output: JvmOutput = None,
) -> SparkSession:
    """Start (or join) a Spark session; with a local master it listens on 127.0.0.1 only.

    The driver JVM logs through scalefold's own log4j2 configuration, its output
    going to `jvm_output` (only when this call starts the JVM: a joined session
    keeps its JVM's).

    On a cluster (`spark://...`) the executors connect back to the driver, so it
    keeps Spark's own choice of address (SPARK_LOCAL_IP, else this machine's).
    Spark's web UI binds every interface, so it stays off unless `conf` turns it
    on; Python workers run this interpreter, not whatever `python3` is on PATH
    (on a cluster: the same path on the workers, as in scalefold's image).
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    local = master.startswith("local")
    # Read by Spark's launcher scripts before the JVM starts; no other way to set them.
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    options = {
        "spark.master": master,
        "spark.app.name": app_name,
        "spark.jars": ",".join(str(jar) for jar in jars),
        "spark.ui.enabled": "false",
        "spark.pyspark.python": sys.executable,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    }
    if local:
        options |= {"spark.driver.host": LOOPBACK, "spark.driver.bindAddress": LOOPBACK}
        # Also on the driver's own class path: `spark.jars` reach only the threads whose
        # context class loader Spark set, and the JDBC server's sessions (endpoint.py)
        # load the Delta catalog on threads of their own.
        options["spark.driver.extraClassPath"] = os.pathsep.join(str(jar) for jar in jars)
    options |= conf or {}
    java_options = shlex.join(
        [f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}", *extra_jvm_options(os.environ)]
    )
    extra = options.get("spark.driver.extraJavaOptions")
    options["spark.driver.extraJavaOptions"] = f"{java_options} {extra}" if extra else java_options
    if jvm_output is not None and SparkContext._gateway is None:
        # pyspark starts the driver JVM with this process's stdout and stderr, where
        # the JVM also writes past log4j (module warnings, a crash). Started here by
        # pyspark's own launcher instead, and the session below joins its context.
        spark_conf = SparkConf(loadDefaults=False).setAll(list(options.items()))
        gateway = launch_gateway(  # type: ignore[no-untyped-call]
            spark_conf, popen_kwargs={"stdout": jvm_output, "stderr": jvm_output}
        )
        SparkContext(conf=spark_conf, gateway=gateway)
    builder = SparkSession.builder
    for key, value in options.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


STATS_COLUMNS = 1
"""Delta collects per-file statistics (min, max, null count) of a table's first this many
columns as it writes (Delta's default: 32). The history's tables all begin with `job_id`:
its bounds and the row counts are kept, what a query for some jobs can skip files by; the
dates prune by partition. Collecting all 32 cost about a tenth of an ingest's CPU
(docs/benchmarks.md) for bounds of uuids, offsets and texts that no query skips by."""

HISTORY_CONF = {
    # The history's tables are Delta Lake tables (docs/history.md): its SQL (MERGE,
    # OPTIMIZE, VACUUM, delta.`path`) in every session, Connect clients' included.
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # VACUUM keeps what `history run --retention-hours` says; Delta's check refuses any
    # retention below its 7-day default, for writers the service does not know of.
    "spark.databricks.delta.retentionDurationCheck.enabled": "false",
    # A newer record schema adds columns: the appends (mergeSchema, upsert.py) and the
    # MERGE into rescales_latest take them into the table's schema rather than fail.
    "spark.databricks.delta.schema.autoMerge.enabled": "true",
    # The optimizer's constraint propagation multiplies the decoded record's not-null
    # constraints through the tables' many aliases: a window over the `rescales`
    # transform (the latest revision, upsert.py) ran a 1 GB driver out of heap in
    # `getAllValidConstraints` with a dozen rows. It only infers extra null filters.
    "spark.sql.constraintPropagation.enabled": "false",
    # Delta's defaults are sized for clusters: every snapshot of a table's state is
    # rebuilt in 50 tasks, and VACUUM lists the table's files in up to 10,000. On two
    # cores each such job took seconds to a minute of tiny tasks, and a VACUUM in the
    # upkeep held a stream's MERGE for minutes (measured: a 20-commit table, VACUUM
    # 56-80 s -> 3.5-4.9 s, OPTIMIZE 12-25 s -> 4.4 s). A cluster may raise both.
    "spark.databricks.delta.snapshotPartitions": "4",
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "8",
    # Tables created from here on; `upsert.keep_for` gives older ones the same at start.
    "spark.databricks.delta.properties.defaults.dataSkippingNumIndexedCols": str(STATS_COLUMNS),
    # Parquet's standard timestamp type; Spark's default (INT96) is deprecated in Parquet.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    # The CLI prints its own progress; Spark's bar garbles logs of a long-running job.
    "spark.ui.showConsoleProgress": "false",
    # Each query's batches in a pool of their own (queries.py): the latest and the
    # planner queries' tasks are not queued behind a tables batch's, nor a SQL client's
    # behind any of them.
    "spark.scheduler.mode": "FAIR",
    "spark.scheduler.allocation.file": POOLS.as_uri(),
    # An idle query reports its progress every second (Spark: every 10 s): the planner
    # reads from it how fresh its view is while no record arrives (planning.py).
    "spark.sql.streaming.noDataProgressEventInterval": "1000ms",
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
    jars: list[Path],
    master: str = "local[*]",
    conf: Mapping[str, str] | None = None,
    jvm_output: JvmOutput = None,
) -> SparkSession:
    """The session of the history service: `build_session` plus its Delta, Parquet and log
    settings."""
    session = build_session(
        jars,
        master,
        app_name="scalefold-history",
        conf={**HISTORY_CONF, **(conf or {})},
        jvm_output=jvm_output,
    )
    jvm = session.sparkContext._jvm
    assert jvm is not None
    for logger in QUIET_LOGGERS:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
            logger, jvm.org.apache.logging.log4j.Level.ERROR
        )
    return session


def one_shot_output(verbose: bool) -> JvmOutput:
    """Where a one-shot command's JVM writes: nowhere, or with -v the terminal."""
    return None if verbose else subprocess.DEVNULL
