"""The history service's imperative shell: streaming queries and the planner timer.

One Structured Streaming query per table (exactly-once Parquet file sink, its
own checkpoint), plus one query that writes rejected records to the
dead-letter topic (Spark's Kafka sink is at-least-once: after a crash a dead
letter may appear twice). Every query reads the rescales topic itself: that is
the price of one checkpoint per table, and it keeps the tables independent.

Next to the queries, the planner runs every `plan_interval_seconds` on the
committed tables, with the wall clock passed in as data.
"""

from __future__ import annotations

import fcntl
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.contracts import Codec, SchemaRegistry, Settings
from services.contracts.kafka import spark_kafka_options
from services.history import aggregates
from services.history.commands import CommandSender, CommandSendError, read_issued
from services.history.decode import RescaleSchemas, dead_letters, decode, valid
from services.history.planner import PlannerConfig, plan
from services.history.sinklog import remove_uncommitted
from services.history.tables import PARTITION_COLUMN, TABLES
from services.history.views import Layout, latest_revisions, read_table, table_schemas

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)
Progress = Callable[[str], None]
DEAD_LETTER_QUERY = "dead_letters"


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


class HistoryJobError(RuntimeError):
    """A streaming query stopped; the message names it and Spark's reason."""


def kafka_source(spark: SparkSession, settings: Settings) -> DataFrame:
    """The rescales topic from its beginning; offsets lost to retention are skipped."""
    options = {
        **spark_kafka_options(settings),
        "subscribe": settings.topics.rescales,
        "startingOffsets": "earliest",
        "failOnDataLoss": "false",
    }
    return spark.readStream.format("kafka").options(**options).load()


def _trigger(options: RunOptions) -> dict[str, Any]:
    if options.available_now:
        return {"availableNow": True}
    return {"processingTime": f"{options.trigger_seconds} seconds"}


def start_queries(
    spark: SparkSession, settings: Settings, schemas: RescaleSchemas, options: RunOptions
) -> list[StreamingQuery]:
    """Start the table queries and the dead-letter query; return them all."""
    layout, trigger = options.layout, _trigger(options)
    # One decoded frame for every query: Spark analyses the large Avro expressions once;
    # each started query still gets its own Kafka source and checkpointed offsets.
    decoded = decode(kafka_source(spark, settings), schemas)
    queries = []
    for table, transform in TABLES.items():
        removed = remove_uncommitted(layout.table(table))
        if removed:
            log.warning("removed %d uncommitted files of %s (a crashed batch)", len(removed), table)
        frame = transform(valid(decoded))
        writer = (
            frame.writeStream.format("parquet")
            .option("path", str(layout.table(table)))
            .option("checkpointLocation", str(layout.checkpoint(table)))
            .partitionBy(PARTITION_COLUMN)
            .queryName(f"history_{table}")
            .trigger(**trigger)
        )
        queries.append(writer.start())
    letters = dead_letters(decoded, schemas)
    queries.append(
        letters.writeStream.format("kafka")
        .options(**spark_kafka_options(settings))
        .option("topic", settings.topics.dead_letters)
        .option("checkpointLocation", str(layout.checkpoint(DEAD_LETTER_QUERY)))
        .queryName(f"history_{DEAD_LETTER_QUERY}")
        .trigger(**trigger)
        .start()
    )
    return queries


class PlannerLoop:
    """Reads the committed `rescales` table, plans, sends what is new."""

    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        registry: SchemaRegistry,
        options: RunOptions,
    ) -> None:
        codec = Codec(registry)
        self._spark = spark
        self._path = options.layout.table("rescales")
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
        raw = read_table(self._spark, self._path, self._schema)
        latest = latest_revisions(raw.where(F.col(PARTITION_COLUMN) >= F.lit(since)))
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
    with exclusive(options.layout.data_dir):
        return _run(
            spark, settings, registry, options, progress=progress, stop=stop or threading.Event()
        )


def _run(
    spark: SparkSession,
    settings: Settings,
    registry: SchemaRegistry,
    options: RunOptions,
    *,
    progress: Progress,
    stop: threading.Event,
) -> int:
    planner = PlannerLoop(spark, settings, registry, options) if options.plan_commands else None
    if planner is not None:
        progress(f"{len(planner.sender.issued)} commands already issued")
    beat = _heartbeat(options.health_file)
    queries = start_queries(spark, settings, RescaleSchemas.of(registry), options)
    progress(f"{len(queries)} streaming queries started, writing to {options.layout.data_dir}")
    beat()
    try:
        if options.available_now:
            for query in queries:
                query.awaitTermination()
            _check(queries)
            if planner is not None:
                planner.tick(_now_ms())
            progress("drained the rescales topic; stopping")
            return 0
        _loop(spark, queries, planner, options.plan_interval_seconds, stop, beat=beat)
        progress("stopping the streaming queries")
        return 0
    finally:
        if options.health_file is not None:
            options.health_file.unlink(missing_ok=True)
        for query in queries:
            query.stop()


def _heartbeat(health_file: Path | None) -> Callable[[], None]:
    """What marks the job alive for a health check: a file touched while the queries run.
    A file left by a killed run is removed first, so it never vouches for a new start."""
    if health_file is None:
        return lambda: None
    health_file.unlink(missing_ok=True)
    return health_file.touch


def _loop(
    spark: SparkSession,
    queries: list[StreamingQuery],
    planner: PlannerLoop | None,
    interval: int,
    stop: threading.Event,
    *,
    beat: Callable[[], None] = lambda: None,
) -> None:
    """Watch the queries every second and run the planner every `interval` s, until `stop`."""
    next_tick = time.monotonic() + interval
    while not stop.is_set():
        if spark.streams.awaitAnyTermination(1):
            _check(queries)
            raise HistoryJobError("a streaming query stopped unexpectedly")
        beat()
        if planner is None or time.monotonic() < next_tick:
            continue
        next_tick = time.monotonic() + interval
        try:
            planner.tick(_now_ms())
        except CommandSendError as error:
            log.warning("planner: %s; retrying on the next tick", error)
        except Exception:  # the planner must not stop the ingest; the next tick retries
            log.exception("planner tick failed; retrying on the next tick")


def _check(queries: list[StreamingQuery]) -> None:
    for query in queries:
        error = query.exception()
        if error is not None:
            raise HistoryJobError(f"streaming query {query.name} failed: {error}")
