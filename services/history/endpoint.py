"""The live SQL endpoint: the history service's Spark session served over Spark Connect.

`history run` starts Spark's Connect server inside its own session (Spark's
`SparkConnectPlugin`, on 127.0.0.1 unless told otherwise) and keeps every view
of `views.build_views` registered as a global temporary view: a Connect client
gets a session of its own on the service's SparkContext, and global temporary
views (`global_temp.<view>`) are what every session of one context sees.

A view built from a DataFrame keeps the Delta snapshot (the file list) its
table had when it was built, so the service registers the views again whenever
a table commits a version (`ViewPublisher.refresh`).

The address is written to `DATA_DIR/sql.url` while the service runs, which is
how `history sql` (and `local status`) find it; a file left by a killed service
names a port nobody listens on, and `history sql` then falls back to a local
session of its own.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from services.history.sinklog import latest_version
from services.history.tables import LATEST_TABLE, TABLES
from services.history.views import Layout, build_views, table_schemas, view_names

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

    from services.history.decode import RescaleSchemas

log = logging.getLogger(__name__)

CONNECT_PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
URL_FILE = "sql.url"
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


def url_file(data_dir: Path) -> Path:
    return data_dir / URL_FILE


def publish_url(data_dir: Path, url: str) -> None:
    """Write the address atomically, so a reader never sees half of it."""
    data_dir.mkdir(parents=True, exist_ok=True)
    partial = data_dir / f".{URL_FILE}.{os.getpid()}"
    partial.write_text(url + "\n")
    partial.replace(url_file(data_dir))


def withdraw_url(data_dir: Path) -> None:
    url_file(data_dir).unlink(missing_ok=True)


def read_url(data_dir: Path) -> str | None:
    """The address a running service published in `data_dir`, if any."""
    try:
        return url_file(data_dir).read_text().strip() or None
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


def commit_marks(
    layout: Layout, known: tuple[tuple[str, int], ...] = ()
) -> tuple[tuple[str, int], ...]:
    """Per table, the newest version its Delta log committed (-1 before any): what the
    published views must be rebuilt after. `known`: the marks of the last look."""
    last = dict(known)
    return tuple(
        (table, latest_version(layout.table(table), last.get(table, -1)))
        for table in (*TABLES, LATEST_TABLE)
    )


class ViewPublisher:
    """Keeps the history's views registered as global temporary views, fresh."""

    def __init__(self, spark: SparkSession, layout: Layout, schemas: RescaleSchemas) -> None:
        self._spark = spark
        self._layout = layout
        self._schemas = schemas
        self._found: dict[str, StructType] = table_schemas(spark, schemas)
        self._marks: tuple[tuple[str, int], ...] | None = None

    def refresh(self) -> bool:
        """Register the views again if a table committed a batch since; True if it did."""
        marks = commit_marks(self._layout, self._marks or ())
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
