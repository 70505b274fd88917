"""The history's streaming queries: one starter for all, and what restarts a failed one.

Every query reads Kafka topics from a checkpoint and hands each micro-batch to a
foreachBatch callback: per source (sources.py) a **latest** query (writers.LatestWriter,
on `--trigger-seconds`) and a **tables** query (writers.TablesWriter, on the slower
`--tables-trigger-seconds`), and the **planner**'s over every source's topic
(planning.PlannerFeed, on `--planner-trigger-seconds`). A `QuerySpec` says which; `start`
starts any of them, in a FAIR scheduler pool of its own (spark.py), so a batch of the
latest or the planner query never queues behind a tables batch's tasks.

A query that fails (the broker away longer than the Kafka source's retries, say) is
started again from its checkpoint, with a growing pause (`Queries.revive`): the service
resumes by itself and loses or repeats nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.contracts import Settings
from services.contracts.kafka import spark_kafka_options

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)

RESTART_PAUSES = (1.0, 2.0, 5.0, 10.0, 30.0)
"""Seconds before a failed query is started again: the first, second, ... and every later time."""
BETWEEN_BATCHES_WAIT = 60.0
"""How long a stop waits, at most, for the running batches to end before stopping them."""


@dataclass(frozen=True)
class QuerySpec:
    """One streaming query: what it reads, where it checkpoints, what it does with a batch."""

    name: str
    topics: tuple[str, ...]
    checkpoint: Path
    sink: Callable[[DataFrame, int], None]
    trigger: Mapping[str, Any]
    pool: str
    """The FAIR scheduler pool of its batches (spark.POOLS)."""
    starting: str = "earliest"
    """Spark's `startingOffsets`, used only when the checkpoint is new (resume.py)."""


def kafka_source(
    spark: SparkSession,
    settings: Settings,
    topics: tuple[str, ...],
    starting: str = "earliest",
    secrets: Path | None = None,
) -> DataFrame:
    """`topics` from `starting` (used without a checkpoint), as `kafka_options` reads them."""
    options = {**kafka_options(settings, topics, secrets), "startingOffsets": starting}
    return spark.readStream.format("kafka").options(**options).load()


def kafka_options(
    settings: Settings, topics: tuple[str, ...], secrets: Path | None = None
) -> dict[str, str]:
    """How the history reads `topics` with Spark's Kafka source, streaming or not: offsets
    lost to retention are skipped, and asking for offsets is retried for about a minute,
    so a broker restart does not fail the read at all."""
    return {
        **spark_kafka_options(settings, secrets),
        "subscribe": ",".join(topics),
        "failOnDataLoss": "false",
        "fetchOffset.numRetries": "60",
        "fetchOffset.retryIntervalMs": "1000",
        # Its consumer groups are the history service's own (what its ACLs allow).
        "groupIdPrefix": settings.topics.own("history"),
    }


def trigger(seconds: float, available_now: bool) -> dict[str, Any]:
    if available_now:
        return {"availableNow": True}
    return {"processingTime": f"{seconds} seconds"}


def starter(
    spark: SparkSession, settings: Settings, spec: QuerySpec, secrets: Path | None = None
) -> Callable[[], StreamingQuery]:
    """What starts the query of `spec` (again, from its checkpoint)."""

    def start() -> StreamingQuery:
        source = kafka_source(spark, settings, spec.topics, spec.starting, secrets)
        context = spark.sparkContext
        # The query's thread takes the pool from the thread that starts it.
        context.setLocalProperty("spark.scheduler.pool", spec.pool)
        try:
            return (
                source.writeStream.foreachBatch(spec.sink)
                .option("checkpointLocation", str(spec.checkpoint))
                .queryName(spec.name)
                .trigger(**spec.trigger)
                .start()
            )
        finally:
            context.setLocalProperty("spark.scheduler.pool", None)  # type: ignore[arg-type]

    return start


def between_batches(query: StreamingQuery | None, timeout: float = BETWEEN_BATCHES_WAIT) -> None:
    """Wait (a bounded time) until a foreachBatch query is between batches, so that stop()
    does not interrupt its callback (one interrupted leaves Spark's stream thread with a
    StackOverflowError and a traceback); a batch it does interrupt is run again on the
    next start, writing nothing twice."""
    deadline = time.monotonic() + timeout
    while query is not None and query.isActive and time.monotonic() < deadline:
        if not query.status.get("isTriggerActive", False):
            return
        time.sleep(0.1)


class HistoryJobError(RuntimeError):
    """A streaming query stopped; the message names it and Spark's reason."""


@dataclass
class Queries:
    """The running queries, and how to start each again when it fails."""

    starters: dict[str, Callable[[], StreamingQuery]]
    running: dict[str, StreamingQuery] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    due: dict[str, float] = field(default_factory=dict)  # name -> monotonic restart time
    explain: Callable[[object], str | None] = lambda _: None
    """What a failure means, where it is known (diagnosis.py): logged instead of Spark's text."""

    def start_all(self) -> None:
        self.running = {name: start() for name, start in self.starters.items()}

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
            known = self.explain(error)
            if known is None:
                log.warning(
                    "streaming query %s failed; restarting in %.0f s: %s", name, pause, error
                )
            else:
                log.error("streaming query %s failed; restarting in %.0f s: %s", name, pause, known)
                log.debug("streaming query %s failed: %s", name, error)
        for name in [n for n, at in self.due.items() if at <= now]:
            del self.due[name]
            self.running[name] = self.starters[name]()
            log.info("streaming query %s restarted from its checkpoint", name)

    def stop(self) -> None:
        """Stop every query between its batches (one deadline for all of them)."""
        deadline = time.monotonic() + BETWEEN_BATCHES_WAIT
        for query in self.running.values():
            between_batches(query, deadline - time.monotonic())
        for query in self.running.values():
            query.stop()

    def check(self) -> None:
        for query in self.running.values():
            error = query.exception()
            if error is not None:
                raise HistoryJobError(f"streaming query {query.name} failed: {error}")
