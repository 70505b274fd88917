"""The history service's imperative shell: the streaming queries and the planner timer.

One Structured Streaming query reads the rescales topic and hands each
micro-batch to `ingest.TablesWriter` (foreachBatch), which decodes it once and
writes every table exactly once (Delta Lake, idempotent writes), upserts
`rescales_latest`, and produces the rejected records to the dead-letter topic
(at-least-once: after a crash a dead letter may appear twice). A second one
does the same for the rescales real Flink clusters recorded, from the
flink-rescales topic (flink_ingest.py).

A query that fails (the broker away longer than the Kafka source's retries,
say) is started again from its checkpoint, with a growing pause: the service
resumes by itself and loses or repeats nothing.

Next to the query, the planner runs every `plan_interval_seconds` on the
committed tables, with the wall clock passed in as data, and the tables' small
files are compacted and old ones vacuumed on a schedule (upsert.Upkeep).
"""

from __future__ import annotations

import fcntl
import logging
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.contracts import Codec, SchemaRegistry, Settings
from services.contracts.access import KafkaConnectionError
from services.contracts.kafka import spark_kafka_options, spark_secrets
from services.history import aggregates, flink_ingest
from services.history.commands import CommandSender, CommandSendError, read_issued
from services.history.decode import RescaleSchemas, decode
from services.history.endpoint import (
    BackgroundJdbc,
    JdbcConfig,
    ViewPublisher,
    publish_url,
    withdraw_url,
)
from services.history.flink_tables import RAW_TABLE as FLINK_RAW_TABLE
from services.history.ingest import CHECKPOINT, TablesWriter, resume_points
from services.history.letters import DeadLetterWriter
from services.history.planner import PlannerConfig, plan
from services.history.sinklog import is_delta, remove_uncommitted
from services.history.tables import LATEST_TABLE, PARTITION_COLUMN, TABLES
from services.history.upsert import (
    Upkeep,
    UpkeepConfig,
    backfill_downtime,
    convert_legacy,
    keep_for,
    merge_latest,
    retention_defaults,
)
from services.history.views import Layout, read_table, table_schemas

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)
Progress = Callable[[str], None]
QUERY_NAME = "history_tables"
"""The one streaming query: its foreachBatch writes every table (ingest.py)."""
STREAMING_POOL = "streaming"
"""With FAIR scheduling (endpoint.py) pools share the executors: the streaming batches
(started from the main thread, whose scheduler pool they inherit) in this pool, the
SQL clients' queries in the default one, so a query does not queue behind a batch."""
RESTART_PAUSES = (1.0, 2.0, 5.0, 10.0, 30.0)
"""Seconds before a failed query is started again: the first, second, ... and every later time."""


@dataclass(frozen=True)
class RunOptions:
    layout: Layout
    trigger_seconds: float = 5.0
    available_now: bool = False
    plan_interval_seconds: int = 5
    plan_lookback_hours: int = 48
    planner: PlannerConfig = field(default_factory=PlannerConfig)
    plan_commands: bool = True
    health_file: Path | None = None
    """Touched every second while the queries run; removed when they stop."""
    upkeep: UpkeepConfig = field(default_factory=UpkeepConfig)
    """How often the tables are compacted, how long replaced files are kept."""
    secrets_dir: Path | None = None
    """Where the Kafka clients' secrets file for Spark goes (`secrets_file`); None: the
    system's temporary directory."""
    sql_url: str | None = None
    """The Spark Connect address the session serves (endpoint.py): the views are kept
    registered for it and the address published in DATA_DIR/sql.url while the job runs."""
    jdbc: JdbcConfig | None = None
    """Spark's Thrift JDBC server on the same views (endpoint.py), its address in
    DATA_DIR/jdbc.url while the job runs; its settings must be in the session's conf."""

    @property
    def serves_sql(self) -> bool:
        return self.sql_url is not None or self.jdbc is not None


class HistoryJobError(RuntimeError):
    """A streaming query stopped; the message names it and Spark's reason."""


def kafka_source(
    spark: SparkSession, settings: Settings, secrets: Path | None = None, topic: str | None = None
) -> DataFrame:
    """The rescales topic (or `topic`) from its beginning; offsets lost to retention are skipped.

    Asking for offsets is retried for about a minute (Spark's default: 3 times a
    second apart), so a broker restart does not fail the query at all.
    """
    options = {
        **spark_kafka_options(settings, secrets),
        "subscribe": topic or settings.topics.rescales,
        "startingOffsets": "earliest",
        "failOnDataLoss": "false",
        "fetchOffset.numRetries": "60",
        "fetchOffset.retryIntervalMs": "1000",
        # Its consumer groups are the history service's own (what its ACLs allow).
        "groupIdPrefix": settings.topics.own("history"),
    }
    return spark.readStream.format("kafka").options(**options).load()


def _trigger(options: RunOptions) -> dict[str, Any]:
    if options.available_now:
        return {"availableNow": True}
    return {"processingTime": f"{options.trigger_seconds} seconds"}


def start_queries(
    spark: SparkSession,
    settings: Settings,
    schemas: RescaleSchemas,
    options: RunOptions,
    secrets: Path | None = None,
) -> list[StreamingQuery]:
    """Start the history's streaming query; return it, in a list.

    `secrets`: the Kafka secrets file (`secrets_file`), needed with SASL."""
    starters = query_starters(spark, settings, schemas, options, secrets)
    return [start() for start in starters.values()]


def query_starters(
    spark: SparkSession,
    settings: Settings,
    schemas: RescaleSchemas,
    options: RunOptions,
    secrets: Path | None = None,
    *,
    upkeep: Upkeep | None = None,
) -> dict[str, Callable[[], StreamingQuery]]:
    """Per query name, what starts it (again, from its checkpoint). `upkeep`: what
    compacts `rescales_latest` (and `flink_rescales_latest`) between batches."""
    layout = options.layout
    for path in [*(layout.table(t) for t in [*TABLES, LATEST_TABLE]), *flink_ingest.tables(layout)]:
        removed = remove_uncommitted(path)
        if removed:
            log.warning("removed %d uncommitted files of %s (a crashed batch)", len(removed), path)
    letters = DeadLetterWriter(settings, layout.data_dir)  # one: one metrics file
    writer = TablesWriter(layout, schemas, letters, upkeep, resume_points(layout))
    query = (
        decode(kafka_source(spark, settings, secrets), schemas)
        .writeStream.foreachBatch(writer)
        .option("checkpointLocation", str(layout.checkpoint(CHECKPOINT)))
        .queryName(QUERY_NAME)
        .trigger(**_trigger(options))
    )
    starters: dict[str, Callable[[], StreamingQuery]] = {QUERY_NAME: query.start}
    if schemas.flink is not None:
        source = kafka_source(spark, settings, secrets, settings.topics.flink_rescales)
        starters[flink_ingest.QUERY_NAME] = flink_ingest.flink_query(
            source, layout, schemas.flink, letters, upkeep=upkeep, trigger=_trigger(options)
        )
    return starters


class PlannerLoop:
    """Reads the committed `rescales_latest` table, plans, sends what is new."""

    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        registry: SchemaRegistry,
        options: RunOptions,
    ) -> None:
        codec = Codec(registry)
        self._spark = spark
        self._path = options.layout.table(LATEST_TABLE)
        self._schema: StructType = table_schemas(spark, RescaleSchemas.of(registry))["rescales"]
        self._config = options.planner
        self._lookback_ms = options.plan_lookback_hours * 3_600_000
        self.sender = CommandSender(settings, codec, read_issued(settings, codec))

    def tick(self, now_ms: int) -> list[dict[str, Any]]:
        """One planning round at wall-clock time `now_ms`; returns the commands sent."""
        from pyspark.sql import functions as F

        # Only recent partitions: a tick must stay cheap however long the history grows.
        # A rescale's revisions share its start date, so pruning never splits them.
        since = datetime.fromtimestamp((now_ms - self._lookback_ms) / 1000, tz=UTC).date()
        latest = read_table(self._spark, self._path, self._schema)
        latest = latest.where(F.col(PARTITION_COLUMN) >= F.lit(since))
        rows = aggregates.planner_input(latest, self._config.flap_window_ms).collect()
        commands = plan((row.asDict() for row in rows), now_ms, self._config)
        sent = self.sender.send(commands)
        for command in sent:
            log.info(
                "sent %s %s amount=%d to job %s: %s",
                command["action"],
                command["commandId"],
                command["amount"],
                command["jobId"],
                command["reason"],
            )
        return sent


def _now_ms() -> int:
    return int(time.time() * 1000)


@contextmanager
def secrets_file(settings: Settings, under: Path | None = None) -> Iterator[Path | None]:
    """The Kafka clients' secrets for Spark (`spark_secrets`) in a file only this user
    can read, in a private directory under `under` (default: the system's temporary
    directory), removed when the job ends; None without SASL.

    Each JVM that runs Kafka clients reads the file by path: in local mode that
    is this one; on a cluster the executors too, so `under` must then be a
    directory every worker sees at the same path (docker-compose's secured
    stack mounts one volume on the history service and the workers)."""
    if not settings.security.uses_sasl:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="scalefold-spark-", dir=under) as directory:
        path = Path(directory) / "kafka-client.properties"
        path.touch(mode=0o600)
        path.write_text(spark_secrets(settings))
        yield path


@contextmanager
def exclusive(data_dir: Path) -> Iterator[None]:
    """Hold DATA_DIR's lock: two jobs on one checkpoint would corrupt each other's batches.

    An OS lock (flock) rather than a marker file: the kernel drops it when the
    process dies, even by SIGKILL, so a crash never leaves a stale lock behind.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    with (data_dir / "run.lock").open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise HistoryJobError(f"another `history run` is using {data_dir}") from None
        yield


def run(
    spark: SparkSession,
    settings: Settings,
    registry: SchemaRegistry,
    options: RunOptions,
    progress: Progress,
    *,
    stop: threading.Event | None = None,
) -> int:
    """Run until `stop` is set (or, with `available_now`, until the topic is drained once).

    On `stop` the queries are stopped between batches' commits, as Spark does:
    a batch in flight is redone on the next start, from its checkpoint.
    """
    with exclusive(options.layout.data_dir), secrets_file(settings, options.secrets_dir) as secrets:
        return _run(
            spark,
            settings,
            registry,
            options,
            progress=progress,
            stop=stop or threading.Event(),
            secrets=secrets,
        )


def _run(
    spark: SparkSession,
    settings: Settings,
    registry: SchemaRegistry,
    options: RunOptions,
    *,
    progress: Progress,
    stop: threading.Event,
    secrets: Path | None,
) -> int:
    planner = PlannerLoop(spark, settings, registry, options) if options.plan_commands else None
    if planner is not None:
        progress(f"{len(planner.sender.issued)} commands already issued")
    beat = _heartbeat(options.health_file)
    if options.serves_sql:  # the batches, started next, inherit it (endpoint.py)
        spark.sparkContext.setLocalProperty("spark.scheduler.pool", STREAMING_POOL)
    retention_defaults(spark, options.upkeep.retention_hours)
    _prepare_tables(spark, registry, options, progress)
    upkeep = Upkeep(spark, options.upkeep)
    starters = query_starters(
        spark, settings, RescaleSchemas.of(registry), options, secrets, upkeep=upkeep
    )
    queries = {name: start() for name, start in starters.items()}
    jdbc: BackgroundJdbc | None = None
    try:
        # After the queries: the ingest does not wait for the views' analysis.
        refresh = _serve_views(spark, registry, options, progress)
        if options.jdbc is not None:
            jdbc = BackgroundJdbc(spark, options.jdbc, options.layout.data_dir, progress)
        progress(f"streaming query started, writing to {options.layout.data_dir}")
        beat()
        if options.available_now:
            for query in queries.values():
                query.awaitTermination()
            _check(list(queries.values()))
            if planner is not None:
                planner.tick(_now_ms())
            progress("drained the rescales topics; stopping")
            return 0
        _loop(
            spark,
            Queries(starters, queries),
            planner,
            options.plan_interval_seconds,
            stop,
            beat=beat,
            refresh=refresh,
            upkeep=lambda: upkeep.run_due(_appended_tables(options.layout)),
        )
        progress("stopping the streaming queries")
        return 0
    finally:
        if options.health_file is not None:
            options.health_file.unlink(missing_ok=True)
        if options.sql_url is not None:
            withdraw_url(options.layout.data_dir)
        if jdbc is not None:
            jdbc.close()
        # One deadline for all the queries (two since flink-rescales): Ctrl-C stops as soon
        # as it did with one.
        deadline = time.monotonic() + BETWEEN_BATCHES_WAIT
        for query in queries.values():
            _between_batches(query, deadline - time.monotonic())
        for query in queries.values():
            query.stop()


def _prepare_tables(
    spark: SparkSession, registry: SchemaRegistry, options: RunOptions, progress: Progress
) -> None:
    """Before the query writes: bring tables of an earlier scalefold up to date, and give
    every table the configured retention (a metadata commit each, where it differs)."""
    layout = options.layout
    _convert_legacy(spark, registry, layout, progress)
    if backfill_downtime(spark, layout.table(LATEST_TABLE), layout.table("rescale_states")):
        progress("added each rescale's downtime to rescales_latest (once, after an upgrade)")
    for path in [*(layout.table(t) for t in [*TABLES, LATEST_TABLE]), *flink_ingest.tables(layout)]:
        if is_delta(path):
            keep_for(spark, path, options.upkeep.retention_hours)


def _appended_tables(layout: Layout) -> list[Path]:
    """The tables only appended to, compacted from the main loop (upsert.Upkeep)."""
    return [*(layout.table(t) for t in TABLES), layout.table(FLINK_RAW_TABLE)]


def _convert_legacy(
    spark: SparkSession, registry: SchemaRegistry, layout: Layout, progress: Progress
) -> None:
    """Tables of an earlier scalefold (plain Parquet) become Delta tables, and
    `rescales_latest` is built once from the raw `rescales` they hold."""
    converted = [t for t in TABLES if convert_legacy(spark, layout.table(t))]
    if not converted:
        return
    progress(f"converted {len(converted)} Parquet tables to Delta: {', '.join(converted)}")
    schema = table_schemas(spark, RescaleSchemas.of(registry))["rescales"]
    if "rescales" in converted:
        raw = read_table(spark, layout.table("rescales"), schema)
        merge_latest(spark, raw, layout.table(LATEST_TABLE))


def _serve_views(
    spark: SparkSession, registry: SchemaRegistry, options: RunOptions, progress: Progress
) -> Callable[[], None]:
    """With an endpoint: register the views, publish its address, and return what keeps
    the views fresh (called every second); without one, nothing to do."""
    if not options.serves_sql:
        return lambda: None
    publisher = ViewPublisher(spark, options.layout, RescaleSchemas.of(registry))
    publisher.refresh()
    if options.sql_url is not None:
        publish_url(options.layout.data_dir, options.sql_url)
        progress(f"Spark SQL (Spark Connect) at {options.sql_url}")

    def refresh() -> None:
        try:
            publisher.refresh()
        except Exception:  # a failed refresh must not stop the ingest; the next one retries
            log.warning("could not refresh the SQL endpoint's views", exc_info=True)

    return refresh


def _heartbeat(health_file: Path | None) -> Callable[[], None]:
    """What marks the job alive for a health check: a file touched while the queries run.
    A file left by a killed run is removed first, so it never vouches for a new start."""
    if health_file is None:
        return lambda: None
    health_file.unlink(missing_ok=True)
    return health_file.touch


BETWEEN_BATCHES_WAIT = 60.0
"""How long a stop waits, at most, for the running batches to end before stopping them."""


def _between_batches(query: StreamingQuery | None, timeout: float = BETWEEN_BATCHES_WAIT) -> None:
    """Wait (a bounded time) until a foreachBatch query is between batches, so that stop()
    does not interrupt its callback (one interrupted leaves Spark's stream thread with a
    StackOverflowError and a traceback); a batch it does interrupt is run again on the
    next start, writing nothing twice."""
    deadline = time.monotonic() + timeout
    while query is not None and query.isActive and time.monotonic() < deadline:
        if not query.status.get("isTriggerActive", False):
            return
        time.sleep(0.1)


@dataclass
class Queries:
    """The running queries, and how to start each again when it fails."""

    starters: dict[str, Callable[[], StreamingQuery]]
    running: dict[str, StreamingQuery]
    failures: dict[str, int] = field(default_factory=dict)
    due: dict[str, float] = field(default_factory=dict)  # name -> monotonic restart time

    def revive(self, now: float) -> None:
        """Schedule every failed query for a restart, and restart those that are due."""
        for name, query in self.running.items():
            if query.isActive or name in self.due:
                continue
            error = query.exception()
            if error is None:
                raise HistoryJobError(f"streaming query {name} stopped unexpectedly")
            count = self.failures.get(name, 0)
            pause = RESTART_PAUSES[min(count, len(RESTART_PAUSES) - 1)]
            self.failures[name] = count + 1
            self.due[name] = now + pause
            log.warning("streaming query %s failed; restarting in %.0f s: %s", name, pause, error)
        for name in [n for n, at in self.due.items() if at <= now]:
            del self.due[name]
            self.running[name] = self.starters[name]()
            log.info("streaming query %s restarted from its checkpoint", name)


def _loop(
    spark: SparkSession,
    queries: Queries,
    planner: PlannerLoop | None,
    interval: int,
    stop: threading.Event,
    *,
    beat: Callable[[], None] = lambda: None,
    refresh: Callable[[], None] = lambda: None,
    upkeep: Callable[[], None] = lambda: None,
) -> None:
    """Watch the queries every second (restarting failed ones), refresh the served views,
    compact the tables that are due, and run the planner every `interval` s, until `stop`."""
    next_tick = time.monotonic() + interval
    while not stop.is_set():
        try:
            terminated = spark.streams.awaitAnyTermination(1)
        except Exception:  # it raises the exception a query failed with
            terminated = True
        if terminated or queries.due:
            spark.streams.resetTerminated()
            queries.revive(time.monotonic())
        beat()
        refresh()
        upkeep()
        if planner is None or time.monotonic() < next_tick:
            continue
        next_tick = time.monotonic() + interval
        try:
            planner.tick(_now_ms())
        except CommandSendError as error:
            log.warning("planner: %s; retrying on the next tick", error)
        except KafkaConnectionError:  # refused by the broker: no tick can fix that
            raise
        except Exception:  # the planner must not stop the ingest; the next tick retries
            log.exception("planner tick failed; retrying on the next tick")


def _check(queries: list[StreamingQuery]) -> None:
    for query in queries:
        error = query.exception()
        if error is not None:
            raise HistoryJobError(f"streaming query {query.name} failed: {error}")
