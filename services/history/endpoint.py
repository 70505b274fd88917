"""The live SQL endpoints: the history service's Spark session served over Spark Connect
and over Spark's Thrift JDBC/ODBC server (HiveServer2's protocol).

`history run` starts Spark's Connect server inside its own session (Spark's
`SparkConnectPlugin`, on 127.0.0.1 unless told otherwise) and keeps every view
of `catalog.build_views` registered as a global temporary view: a Connect client
gets a session of its own on the service's SparkContext, and global temporary
views (`global_temp.<view>`) are what every session of one context sees.

A view built from a Delta table's DataFrame is not pinned to the version it was
built on: each query of it reads the table's newest committed version (Delta's
file index updates its snapshot when a query runs, whoever committed: Spark's
appends or delta-rs's upserts). So the views are registered once per set of
tables: again only when a table that was not there yet (an empty placeholder in
its schema, catalog.read_table) commits its first version (`ViewPublisher.refresh`).
Registering them at every commit, as an earlier version did, cost 7-17 s of the
driver per registration at load 14 and, with the latest tables committing every
second, kept the driver busy with nothing else.

The address is written to `DATA_DIR/sql.url` while the service runs, which is
how `history sql` (and `local status`) find it; a file left by a killed service
names a port nobody listens on, and `history sql` then falls back to a local
session of its own.

The JDBC server (`JdbcServer`) is Spark's own `HiveThriftServer2`, started on
the same SparkContext by `startWithContext`: each JDBC connection gets a new
session of that context, so it sees the same `global_temp.<view>` views as a
Connect client. It works with Spark's in-memory catalog (no Hive metastore of
ours); Hive's session machinery only keeps an in-memory Derby database and a
few scratch directories, put under `DATA_DIR/jdbc`. Its address is written to
`DATA_DIR/jdbc.url`.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from services.history.catalog import DERIVED, build_views, table_schemas, view_names
from services.history.paths import JDBC_URL, SQL_URL, Layout
from services.history.sinklog import is_delta
from services.history.sources import SOURCES

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

    from services.history.decode import RescaleSchemas

log = logging.getLogger(__name__)

CONNECT_PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
THRIFT_SERVER = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
URL_FILE = SQL_URL
JDBC_URL_FILE = JDBC_URL
JDBC_ENV_OVERRIDES = ("HIVE_SERVER2_THRIFT_BIND_HOST", "HIVE_SERVER2_THRIFT_PORT")
"""HiveServer2 prefers these environment variables to its configuration (ThriftBinaryCLIService):
the service's JVM must not inherit them, or a stray one would move the JDBC server."""
GLOBAL_TEMP = "global_temp"


@dataclass(frozen=True)
class EndpointConfig:
    """Where the Connect server listens; port 0 picks a free one."""

    host: str = "127.0.0.1"
    port: int = 0

    def resolved(self) -> EndpointConfig:
        """The same address with a concrete port (a free one for port 0)."""
        if self.port:
            return self
        with socket.socket() as sock:
            sock.bind((self.host, 0))
            return EndpointConfig(self.host, int(sock.getsockname()[1]))

    @property
    def url(self) -> str:
        return f"sc://{self.host}:{self.port}"

    def spark_conf(self) -> dict[str, str]:
        """The session settings that start the Connect server with the SparkContext."""
        return {
            "spark.plugins": CONNECT_PLUGIN,
            "spark.connect.grpc.binding.address": self.host,
            "spark.connect.grpc.binding.port": str(self.port),
            # Fail rather than silently listen on another port than the one published.
            "spark.connect.grpc.port.maxRetries": "0",
            # Queries' tasks share the executors with the streaming batches' rather than
            # waiting behind them (Spark's default is first in, first out).
            "spark.scheduler.mode": "FAIR",
        }


@dataclass(frozen=True)
class JdbcConfig:
    """Where Spark's Thrift JDBC/ODBC server listens (binary transport, no authentication:
    like the Connect endpoint it is meant for loopback); port 0: the server binds a free
    one itself and reports it, so no other process can take it in between."""

    host: str = "127.0.0.1"
    port: int = 0

    def spark_conf(self, data_dir: Path) -> dict[str, str]:
        """The settings the server reads (as Hadoop settings of the context) when started."""
        scratch = Layout(data_dir).jdbc_scratch
        hive = {
            "hive.server2.transport.mode": "binary",
            "hive.server2.thrift.bind.host": self.host,
            "hive.server2.thrift.port": str(self.port),
            # Hive's per-session directories default to /tmp/hive, /tmp/<user>, ...; no query logs
            "hive.exec.scratchdir": str(scratch / "scratch"),
            "hive.exec.local.scratchdir": str(scratch / "local"),
            "hive.downloaded.resources.dir": str(scratch / "resources"),
            "hive.server2.logging.operation.enabled": "false",
            "hive.server2.logging.operation.log.location": str(scratch / "operation_logs"),
        }
        return {
            **{f"spark.hadoop.{key}": value for key, value in hive.items()},
            # JDBC statements run in the default pool even though the server's threads
            # are started from the thread that runs the streaming batches (job.py).
            "spark.sql.thriftserver.scheduler.pool": "default",
            "spark.scheduler.mode": "FAIR",
        }


class JdbcServer:
    """Spark's `HiveThriftServer2` on the service's session, started and stopped."""

    def __init__(self, spark: SparkSession, config: JdbcConfig, data_dir: Path) -> None:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        # Hive logs an ERROR at every session's close if its local scratch directory
        # (spark_conf) is missing.
        for directory in ("local", "scratch"):
            (Layout(data_dir).jdbc_scratch / directory).mkdir(parents=True, exist_ok=True)
        # Derby (the in-memory database of Hive's session state) writes derby.log into
        # the working directory unless told otherwise.
        jvm.java.lang.System.setProperty(
            "derby.stream.error.file", str(Layout(data_dir).jdbc_scratch / "derby.log")
        )
        thrift = jvm.org.apache.spark.sql.hive.thriftserver.HiveThriftServer2  # THRIFT_SERVER
        server = thrift.startWithContext(spark._jsparkSession.sqlContext())
        self._server = server
        ports = [
            service.getPortNumber()
            for service in server.getServices()
            if service.getClass().getSimpleName() == "ThriftBinaryCLIService"
        ]
        if not ports:
            server.stop()
            raise RuntimeError("Spark's Thrift server started without its binary transport")
        self.url = f"jdbc:hive2://{config.host}:{ports[0]}"

    def stop(self) -> None:
        self._server.stop()


class BackgroundJdbc:
    """The JDBC server started in a thread of its own, its address published once it
    listens: Hive's classes take seconds to load, which neither the ingest nor the
    Connect endpoint has to wait for. A server that fails to start is logged, and the
    service goes on without it."""

    def __init__(
        self,
        spark: SparkSession,
        config: JdbcConfig,
        data_dir: Path,
        progress: Callable[[str], None],
    ) -> None:
        self._args = (spark, config, data_dir)
        self._progress = progress
        self._lock = threading.Lock()
        self._server: JdbcServer | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._start, name="jdbc-server", daemon=True)
        self._thread.start()

    def _start(self) -> None:
        spark, config, data_dir = self._args
        started = time.monotonic()
        try:
            server = JdbcServer(spark, config, data_dir)
        except Exception as error:  # the ingest goes on without JDBC
            log.error(
                "could not start the JDBC server on %s:%d: %s", config.host, config.port, error
            )
            return
        with self._lock:
            if self._closed:
                server.stop()
                return
            self._server = server
            publish_url(data_dir, server.url, JDBC_URL_FILE)
        self._progress(
            f"Spark SQL (JDBC) at {server.url}, started in {time.monotonic() - started:.1f} s"
        )

    def close(self, timeout: float = 60.0) -> None:
        """Withdraw the address and stop the server (waiting for a start in progress)."""
        self._thread.join(timeout)
        with self._lock:
            self._closed = True
            server, self._server = self._server, None
        withdraw_url(self._args[2], JDBC_URL_FILE)
        if server is not None:
            server.stop()


def url_file(data_dir: Path, name: str = URL_FILE) -> Path:
    return Layout(data_dir).url_file(name)


def publish_url(data_dir: Path, url: str, name: str = URL_FILE) -> None:
    """Write the address atomically, so a reader never sees half of it."""
    data_dir.mkdir(parents=True, exist_ok=True)
    partial = data_dir / f".{name}.{os.getpid()}"
    partial.write_text(url + "\n")
    partial.replace(url_file(data_dir, name))


def withdraw_url(data_dir: Path, name: str = URL_FILE) -> None:
    url_file(data_dir, name).unlink(missing_ok=True)


def read_url(data_dir: Path, name: str = URL_FILE) -> str | None:
    """The address a running service published in `data_dir`, if any."""
    try:
        return url_file(data_dir, name).read_text().strip() or None
    except OSError:
        return None


def reachable(url: str, timeout: float = 0.5) -> bool:
    """Whether something accepts connections at the `sc://host:port` address."""
    host, _, port = url.removeprefix("sc://").partition("/")[0].rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def present_tables(layout: Layout, known: Iterable[str] = ()) -> tuple[str, ...]:
    """The tables that are Delta tables already (committed a first version): what the
    published views must be registered again after, when it changes. `known`: tables
    present at an earlier look (a table is never removed while the service runs, so
    only the others' logs are looked at)."""
    before = set(known)
    every = (*DERIVED, *(table for source in SOURCES for table in source.all_tables))
    return tuple(table for table in every if table in before or is_delta(layout.table(table)))


class ViewPublisher:
    """Keeps the history's views registered as global temporary views, fresh."""

    def __init__(
        self,
        spark: SparkSession,
        layout: Layout,
        schemas: RescaleSchemas,
        found: Mapping[str, StructType] | None = None,
    ) -> None:
        self._spark = spark
        self._layout = layout
        self._schemas = schemas
        self._found = dict(found) if found is not None else table_schemas(spark, schemas)
        self._marks: tuple[str, ...] | None = None

    def refresh(self) -> bool:
        """Register the views (again, if a table committed its first version since the
        last registration); True if it did."""
        marks = present_tables(self._layout, self._marks or ())
        if marks == self._marks:
            return False
        views = build_views(self._spark, self._layout, self._schemas, found=self._found)
        for name, frame in views.items():
            frame.createOrReplaceGlobalTempView(name)
        self._marks = marks
        return True


def referenced(query: str) -> list[str]:
    """The views a query names (as words; a view named only inside a string literal
    costs an alias it does not need, nothing more)."""
    return [n for n in view_names() if re.search(rf"\b{n}\b", query, re.IGNORECASE)]


def remote_session(url: str, aliases: Iterable[str] = ()) -> SparkSession:
    """A Spark Connect session on the service; each view of `aliases` also under its
    plain name (the service's views are `global_temp.<view>`).

    An alias is a temporary view defined by SQL text, which Spark resolves on every
    query, so it always reads the service's latest registration. One round trip
    each, hence only the views a query names (`referenced`).
    """
    from pyspark.sql import SparkSession

    session = SparkSession.builder.remote(url).getOrCreate()
    for name in aliases:
        session.sql(f"CREATE OR REPLACE TEMP VIEW `{name}` AS SELECT * FROM {GLOBAL_TEMP}.`{name}`")
    return session
