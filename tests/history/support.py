"""Helpers of the history tests: encode, run the job (in-process or as `scalefold`), read topics."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.contracts import Codec, Settings
from services.contracts import records as r
from services.contracts.kafka import librdkafka_config, retry_transient
from services.history.catalog import build_views
from services.history.decode import RescaleSchemas
from services.history.job import RunOptions, start_queries
from services.history.paths import Layout
from tests.kafka_support import Received
from tests.patience import give_up_at, patient

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ROOT = Path(__file__).resolve().parents[2]


def encoded(codec: Codec, records: Iterable[dict[str, Any]]) -> list[tuple[bytes, bytes]]:
    """(key, value) messages of rescale records, keyed by job id like the scheduler does."""
    return [(rec["jobId"].encode(), codec.encode(r.RESCALE, rec)) for rec in records]


def drain(spark: SparkSession, settings: Settings, schemas: RescaleSchemas, layout: Layout) -> None:
    """Run every query of the history job in-process until the topic is drained once."""
    assert schemas.registry is not None
    queries = start_queries(
        spark, settings, schemas.registry, RunOptions(layout, available_now=True)
    )
    deadline = give_up_at(180)  # the rescales' and the Flink rescales' queries side by side
    try:
        for query in queries:
            query.awaitTermination(max(1, round(deadline - time.monotonic())))
        for query in queries:
            assert query.exception() is None, f"{query.name}: {query.exception()}"
            assert not query.isActive, f"{query.name} did not finish within {patient(180)} s"
    finally:
        for query in queries:
            query.stop()


def views(spark: SparkSession, layout: Layout, schemas: RescaleSchemas) -> dict[str, DataFrame]:
    return build_views(spark, layout, schemas)


def read_topic(settings: Settings, topic: str, timeout: float = 30.0) -> list[Received]:
    """Everything `topic` holds right now, read from the beginning to its end offsets."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        librdkafka_config(
            settings, **{"group.id": f"test-{uuid.uuid4().hex}", "enable.auto.commit": False}
        )
    )
    received: list[Received] = []
    try:
        partitions = consumer.list_topics(topic, timeout=timeout).topics[topic].partitions

        def watermarks() -> dict[int, tuple[int, int]]:
            return {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
                for p in partitions
            }

        # as the services do: a broker just restarted is electing its partitions' leaders
        marks = retry_transient(watermarks, f"offsets of {topic}", timeout)
        ends = {p: end for p, (_, end) in marks.items()}
        # a partition whose records retention has all deleted holds nothing to read
        pending = {p for p, (start, end) in marks.items() if end > start}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in pending])
        deadline = give_up_at(timeout)
        while pending and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            offset, partition = message.offset() or 0, message.partition() or 0
            # a tombstone's value is None: kept as it came, for the tests that send them
            received.append(Received(message.key(), message.value(), partition, offset))  # type: ignore[arg-type]
            if offset + 1 >= ends[partition]:
                pending.discard(partition)
        assert not pending, f"could not read {topic} to its end {ends} within {timeout} s"
    finally:
        consumer.close()
    return received


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `condition` until it holds; fail with `what` at the deadline."""
    deadline = give_up_at(timeout)
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.2)


class HistoryProcess:
    """`scalefold history run` as a user starts it, in its own process group."""

    def __init__(self, settings: Settings, data_dir: Path, log: Path, *extra: str) -> None:
        command = [
            sys.executable,
            "-m",
            "services.cli",
            "--bootstrap-servers",
            settings.bootstrap_servers,
            "--topic-prefix",
            settings.topic_prefix,
            "history",
            "run",
            "--data-dir",
            str(data_dir),
            "--master",
            "local[2]",
            *extra,
        ]
        self.log = log
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                command,
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=os.environ.copy(),
                start_new_session=True,  # the JVM child shares the group: one kill ends both
            )

    def running(self) -> bool:
        """True while the process runs; an AssertionError with its log once it has exited."""
        code = self.process.poll()
        if code is not None:
            raise AssertionError(f"history run exited with {code}:\n{self.tail()}")
        return True

    def terminate(self) -> None:
        """SIGTERM to the CLI alone, as `docker stop` and `make down` send it."""
        self.process.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL the CLI and its JVM at once, like a machine that loses power."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)

    def wait(self, timeout: float) -> int:
        timeout = patient(timeout)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            message = f"history run did not finish in {timeout} s:\n{self.tail()}"
            raise AssertionError(message) from None

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
