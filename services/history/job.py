"""The history service's imperative shell: its queries, its planner, its loop.

For every source (sources.py) a latest query and a tables query (writers.py), and the
planner's query over every source's topic (planning.py), all started by one starter
(queries.py). A thread of the planner's decides from its fresh view several times a second
and sends what is new; the loop, every second, starts failed queries again from their
checkpoints, refreshes the served views and touches the health file; a thread of its
own compacts and vacuums the tables that are due (upsert.Upkeep); one judges the Flink
pairs (judge.py); one decides the sampled Flink jobs' parallelism (autoscaler.py).
"""

from __future__ import annotations

import fcntl
import logging
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from services.contracts import Codec, SchemaRegistry, Settings
from services.contracts.access import KafkaConnectionError
from services.contracts.ambiguity import Finder
from services.contracts.commands import ScalingCommand
from services.contracts.foresight import Forecaster
from services.contracts.kafka import connect, retry_transient, spark_secrets
from services.history import checkpoints
from services.history.autoscaler import Autoscaler, AutoscalerOptions, Mode
from services.history.catalog import arrow_schema, table_schemas
from services.history.commands import (
    CommandSender,
    CommandSendError,
    IssuedCommands,
    read_issued,
)
from services.history.decode import RescaleSchemas
from services.history.diagnosis import diagnosis
from services.history.endpoint import (
    BackgroundJdbc,
    JdbcConfig,
    ViewPublisher,
    publish_url,
    withdraw_url,
)
from services.history.jobview import PlannerConfig
from services.history.judge import Judge
from services.history.letters import DeadLetterWriter
from services.history.paths import SQL_URL, Layout
from services.history.planning import Planner, fresh_as_of, fresh_checkpoint
from services.history.queries import (
    BETWEEN_BATCHES_WAIT,
    HistoryJobError,
    Queries,
    QuerySpec,
    starter,
    trigger,
)
from services.history.repair import Mender
from services.history.resume import committed_positions, resume_points, starting_offsets
from services.history.sources import PLANNED, RESCALES, SOURCES
from services.history.upkeep import Upkeep, UpkeepConfig, prepare, table_properties
from services.history.writers import LatestWriter, TablesWriter

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.types import StructType

__all__ = ["HistoryJobError", "RunOptions", "run", "start_queries"]

log = logging.getLogger(__name__)
Progress = Callable[[str], None]
PLANNER_QUERY = "history_planner"
LOOP_SECONDS = 0.25
"""How often the loop asks the planner to decide: a batch's record waits at most this."""


@dataclass(frozen=True)
class RunOptions:
    layout: Layout
    trigger_seconds: float = 1.0
    """The latest queries' trigger: a record is MERGEd at most this long after it arrives,
    plus a batch."""
    tables_trigger_seconds: float = 10.0
    """The tables queries': their four to six commits come this often, with all there is."""
    planner_trigger_seconds: float = 0.5
    available_now: bool = False
    plan_interval_seconds: float = 1.0
    """Time-driven rules are looked at this often when no record arrives."""
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
    finder: Finder | None = None
    """Asks the scheduler's fold which pairs of a real Flink's job the observation cannot
    decide (contracts/ambiguity.py): the judge (judge.py) keeps `flink_verdicts` with it."""
    judge_interval_seconds: float = 5.0
    autoscaler: AutoscalerOptions = field(default_factory=AutoscalerOptions)
    """The parallelism decisions of the sampled Flink jobs (autoscaler.py)."""
    forecaster: Forecaster | None = None
    """Asks the scheduler's fold what the adaptive scheduler does with a decision
    (contracts/foresight.py) before the autoscaler sends or advises it."""
    jdbc: JdbcConfig | None = None
    """Spark's Thrift JDBC server on the same views (endpoint.py), its address in
    DATA_DIR/jdbc.url while the job runs; its settings must be in the session's conf."""

    @property
    def serves_sql(self) -> bool:
        return self.sql_url is not None or self.jdbc is not None


def query_specs(
    settings: Settings,
    registry: SchemaRegistry,
    options: RunOptions,
    found: Mapping[str, StructType],
    *,
    keeper: Upkeep | None,
    planner: Planner | None,
) -> list[QuerySpec]:
    """Every query of the service: each source's latest and tables queries, the planner's.
    `found`: every table's schema (catalog.table_schemas)."""
    layout, topics, codec = options.layout, settings.topics, Codec(registry)
    properties = table_properties(options.upkeep.retention_hours)
    letters = DeadLetterWriter(settings, layout.metrics)  # one: one metrics file
    partitions = _partitions(settings, [s.topic(topics) for s in SOURCES])
    specs = []
    for source in SOURCES:
        schemas, topic = source.schemas(registry), source.topic(topics)
        tables = layout.checkpoint(source.tables_checkpoint)
        resume = resume_points(layout) if source is RESCALES else None
        specs += [
            QuerySpec(
                f"history_{source.latest_checkpoint}",
                (topic,),
                layout.checkpoint(source.latest_checkpoint),
                LatestWriter(
                    source,
                    codec,
                    layout,
                    schema=arrow_schema(found[source.raw_table]),
                    upkeep=keeper,
                    properties=properties,
                ),
                trigger(options.trigger_seconds, options.available_now),
                "latest",
                # Where an earlier scalefold's one query (which MERGEd too) left off.
                starting_offsets({topic: partitions[topic]}, committed_positions(tables)),
            ),
            QuerySpec(
                f"history_{source.tables_checkpoint}",
                (topic,),
                tables,
                TablesWriter(source, schemas, layout, letters, resume),
                trigger(options.tables_trigger_seconds, options.available_now),
                "tables",
            ),
        ]
    if planner is not None:
        latest = [committed_positions(layout.checkpoint(s.latest_checkpoint)) for s in PLANNED]
        planned = {s.topic(topics): partitions[s.topic(topics)] for s in PLANNED}
        specs.append(
            QuerySpec(
                PLANNER_QUERY,
                tuple(s.topic(topics) for s in PLANNED),
                Path(fresh_checkpoint(layout)),
                planner.feed(codec, lambda s: s.topic(topics)),
                trigger(options.planner_trigger_seconds, options.available_now),
                "planner",
                starting_offsets(planned, *latest),
            )
        )
    return specs


def start_queries(
    spark: SparkSession,
    settings: Settings,
    registry: SchemaRegistry,
    options: RunOptions,
    secrets: Path | None = None,
) -> list[StreamingQuery]:
    """Start the writers' queries (no planner), e.g. to drain the topics once with
    `available_now` (the tests, the bench); return them."""
    found = table_schemas(spark, RescaleSchemas.of(registry))
    specs = query_specs(settings, registry, options, found, keeper=None, planner=None)
    return [starter(spark, settings, spec, secrets)() for spec in specs]


def _partitions(settings: Settings, topics: list[str]) -> dict[str, list[int]]:
    """Each topic's partitions, as the broker has them now (waited for while it starts); a
    topic not there yet has none: its query reads it from the start once it is."""
    admin = connect(settings)

    def listed() -> dict[str, list[int]]:
        metadata = admin.list_topics(timeout=10).topics
        return {t: sorted(metadata[t].partitions) if t in metadata else [] for t in topics}

    return retry_transient(listed, f"partitions of {', '.join(topics)}")


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
def exclusive(layout: Layout) -> Iterator[None]:
    """Hold DATA_DIR's lock: two jobs on one checkpoint would corrupt each other's batches.

    An OS lock (flock) rather than a marker file: the kernel drops it when the
    process dies, even by SIGKILL, so a crash never leaves a stale lock behind.
    """
    layout.data_dir.mkdir(parents=True, exist_ok=True)
    with layout.lock.open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise HistoryJobError(f"another `history run` is using {layout.data_dir}") from None
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
    """Run until `stop` is set (or, with `available_now`, until the topics are drained once).

    On `stop` the queries are stopped between batches' commits, as Spark does:
    a batch in flight is redone on the next start, from its checkpoint.
    """
    with exclusive(options.layout), secrets_file(settings, options.secrets_dir) as secrets:
        return _run(
            spark,
            settings,
            registry,
            options,
            progress=progress,
            stop=stop or threading.Event(),
            secrets=secrets,
        )


def _planner(settings: Settings, registry: SchemaRegistry, options: RunOptions) -> Planner:
    codec = Codec(registry)
    sender = CommandSender(settings, codec, read_issued(settings, codec))
    lookback = options.plan_lookback_hours * 3_600_000
    return Planner(options.planner, sender, lookback, options.plan_interval_seconds)


def _autoscaler_threads(
    settings: Settings, registry: SchemaRegistry, options: RunOptions, stop: threading.Event
) -> list[threading.Thread]:
    """The autoscaler's thread (autoscaler.py), unless it is off."""
    if options.autoscaler.mode is Mode.OFF:
        return []
    autoscaler = _autoscaler(settings, registry, options)
    interval = options.autoscaler.interval_seconds
    return [_repeating("history-autoscaler", interval, lambda: autoscaler.tick(_now_ms()), stop)]


def _autoscaler(settings: Settings, registry: SchemaRegistry, options: RunOptions) -> Autoscaler:
    """The autoscaler, with a sender of its own in `scale` mode (its commands' ids are
    its own: no ledger to read)."""
    send = None
    if options.autoscaler.mode is Mode.SCALE:
        sender = CommandSender(settings, Codec(registry), IssuedCommands())

        def send(command: ScalingCommand) -> None:
            sender.send([command])

    return Autoscaler(
        options.layout.data_dir, settings, options.autoscaler, options.forecaster, send
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
    planner = _planner(settings, registry, options) if options.plan_commands else None
    beat = _heartbeat(options.health_file)
    found = _prepared(spark, settings, registry, options, progress=progress, secrets=secrets)
    if planner is not None:
        folded = planner.bootstrap(options.layout, _now_ms())
        issued = len(planner.sender.issued)
        progress(f"planner: {folded} rescales from the latest tables, {issued} commands issued")
    keeper = Upkeep(spark, options.upkeep)
    specs = query_specs(settings, registry, options, found, keeper=keeper, planner=planner)
    starters = {spec.name: starter(spark, settings, spec, secrets) for spec in specs}
    queries = Queries(starters, explain=lambda error: diagnosis(error, options.layout.data_dir))
    queries.start_all()
    jdbc: BackgroundJdbc | None = None
    try:
        # After the queries: the ingest does not wait for the views' analysis.
        refresh = _serve_views(spark, registry, options, found, progress)
        if options.jdbc is not None:
            jdbc = BackgroundJdbc(spark, options.jdbc, options.layout.data_dir, progress)
        progress(f"streaming query started, writing to {options.layout.data_dir}")
        beat()
        if options.available_now:
            for query in queries.running.values():
                query.awaitTermination()
            queries.check()
            if planner is not None:
                now = _now_ms()
                planner.tick(now, now)
            progress("drained the rescales topics; stopping")
            return 0
        appended = [options.layout.table(t) for s in SOURCES for t in s.appended]
        threads = [_upkeep_thread(spark, keeper, appended, stop)]
        judge = Judge(options.layout.data_dir, settings, options.finder)
        threads += [
            _judge_thread(judge, options.judge_interval_seconds, stop),
            *_autoscaler_threads(settings, registry, options, stop),
        ]
        failed: list[BaseException] = []
        if planner is not None:
            threads.append(_planner_thread(planner, queries, stop, failed))

        def every_second() -> None:
            beat()
            refresh()

        _loop(spark, queries, stop, every_second)
        for thread in threads:
            thread.join(BETWEEN_BATCHES_WAIT)
        if failed:
            raise failed[0]
        progress("stopping the streaming queries")
        return 0
    finally:
        if options.health_file is not None:
            options.health_file.unlink(missing_ok=True)
        if options.sql_url is not None:
            withdraw_url(options.layout.data_dir)
        if jdbc is not None:
            jdbc.close()
        queries.stop()


def _prepared(
    spark: SparkSession,
    settings: Settings,
    registry: SchemaRegistry,
    options: RunOptions,
    *,
    progress: Progress,
    secrets: Path | None,
) -> dict[str, StructType]:
    """The tables made ready for the queries (upkeep.prepare), unreadable checkpoint files
    mended (checkpoints.py), tables with deleted files mended from Kafka (repair.py);
    every table's schema."""
    found = table_schemas(spark, RescaleSchemas.of(registry))
    hours = options.upkeep.retention_hours
    prepare(spark, options.layout, found, hours, progress)
    for line in checkpoints.mend(options.layout):
        progress(line)
    Mender(spark, settings, registry, options.layout, found, secrets).mend(progress)
    return found


def _serve_views(
    spark: SparkSession,
    registry: SchemaRegistry,
    options: RunOptions,
    found: Mapping[str, StructType],
    progress: Progress,
) -> Callable[[], None]:
    """With an endpoint: register the views, publish its address, and return what keeps
    the views fresh (called every second); without one, nothing to do."""
    if not options.serves_sql:
        return lambda: None
    publisher = ViewPublisher(spark, options.layout, RescaleSchemas.of(registry), found)
    publisher.refresh()
    if options.sql_url is not None:
        publish_url(options.layout.data_dir, options.sql_url, SQL_URL)
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


def _upkeep_thread(
    spark: SparkSession, keeper: Upkeep, tables: list[Path], stop: threading.Event
) -> threading.Thread:
    """The appended tables' compaction, in a thread of its own: an OPTIMIZE and a VACUUM
    take seconds to minutes, which the planner's loop must not wait for. Its jobs run in
    the tables queries' pool (queries.py); an appended table's compaction never conflicts
    with its appends (upsert.py)."""

    def work() -> None:
        spark.sparkContext.setLocalProperty("spark.scheduler.pool", "tables")
        keeper.run_due(tables)  # logs a table's failure and retries it later

    return _repeating("history-upkeep", 1.0, work, stop)


def _judge_thread(judge: Judge, interval: float, stop: threading.Event) -> threading.Thread:
    """The Flink pairs' verdicts (judge.py), in a thread of their own: asking the
    scheduler's fold reads the job's inputs from the broker, seconds at load."""
    return _repeating("history-judge", interval, lambda: judge.tick(_now_ms()), stop)


def _repeating(
    name: str, interval: float, work: Callable[[], object], stop: threading.Event
) -> threading.Thread:
    """A daemon thread that runs `work` every `interval` seconds until `stop`; a failure
    is logged and the next round tries again (neither may stop the ingest)."""

    def loop() -> None:
        while not stop.wait(interval):
            try:
                work()
            except Exception:
                log.warning("%s failed; trying again in %.0f s", name, interval, exc_info=True)

    thread = threading.Thread(target=loop, name=name, daemon=True)
    thread.start()
    return thread


def _now_ms() -> int:
    return int(time.time() * 1000)


def _loop(
    spark: SparkSession, queries: Queries, stop: threading.Event, every: Callable[[], None]
) -> None:
    """Until `stop`, every second: failed queries are restarted and `every` runs (the
    served views, the health file)."""
    while not stop.is_set():
        try:
            terminated = spark.streams.awaitAnyTermination(1)
        except Exception:  # it raises the exception a query failed with
            terminated = True
        if terminated or queries.due:
            spark.streams.resetTerminated()
            queries.revive(time.monotonic())
        every()


def _planner_thread(
    planner: Planner, queries: Queries, stop: threading.Event, failed: list[BaseException]
) -> threading.Thread:
    """The planner decides in a thread of its own, every LOOP_SECONDS: the main loop's
    work (registering the served views when a table appears, seconds of the driver at
    load) is none a decision should wait for. A refusal by the broker (an ACL) stops the
    service, `failed` says why: no tick mends it."""

    def work() -> None:
        while not stop.wait(LOOP_SECONDS):
            try:
                planner.tick(_now_ms(), fresh_as_of(queries.running.get(PLANNER_QUERY)))
            except CommandSendError as error:
                log.warning("planner: %s; retrying on the next tick", error)
            except KafkaConnectionError as error:
                failed.append(error)
                stop.set()
            except Exception:  # the planner must not stop the ingest; the next tick retries
                log.exception("planner tick failed; retrying on the next tick")

    thread = threading.Thread(target=work, name="history-planner", daemon=True)
    thread.start()
    return thread
