"""Writing the history's dead letters: each micro-batch's rejected records, from the driver.

Spark's own Kafka sink would fail the query on a dead letter the broker refuses
for good (a topic that takes smaller messages, an ACL), and a restarted job
would fail on the same batch again. So the dead-letter query hands each batch
to `DeadLetterWriter` (`foreachBatch`), which produces with librdkafka: a
refused dead letter is logged, counted, and dropped, and the batch completes.
A batch that is not committed (the job stopped or crashed in it) is written
again after a restart: dead letters are at-least-once, their source
partition and offset tell repeats apart.

The counts are written, in Prometheus' text format, to `metrics.prom` in the
data directory (paths.Layout.metrics) (the node exporter's textfile-collector convention), since the
history service has no web endpoint.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.contracts import Settings
from services.contracts.kafka import producer_config

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)


class DeadLetterWriter:
    """`foreachBatch` function of the dead-letter query."""

    def __init__(self, settings: Settings, metrics_path: Path) -> None:
        self.settings = settings
        self.metrics_path = metrics_path
        self.written = 0
        self.failed = 0
        self._producer: Any = None
        self.write_metrics()

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        producer = self._client()
        topic = self.settings.topics.dead_letters
        sent = 0
        for row in batch.select("key", "value").toLocalIterator():
            key = None if row["key"] is None else bytes(row["key"])
            try:
                self._produce(producer, topic, key, bytes(row["value"]))
            except Exception as error:  # refused at once (say, too large): on with the rest
                self._delivered(error, None)
            sent += 1
        if not sent:
            return
        waited = 0
        while remaining := producer.flush(10):  # as long as the broker is away
            waited += 10
            log.warning("%d dead letters still wait for the broker after %d s", remaining, waited)
        log.info("batch %d: %d dead letters", batch_id, sent)
        self.write_metrics()

    def _produce(self, producer: Any, topic: str, key: bytes | None, value: bytes) -> None:
        while True:
            try:
                producer.produce(topic, key=key, value=value, on_delivery=self._delivered)
                return
            except BufferError:  # the local queue is full: let librdkafka send some
                producer.poll(0.1)

    def _delivered(self, error: Any, message: Any) -> None:
        if error is None:
            self.written += 1
            return
        self.failed += 1
        log.error("a dead letter could not be written, dropped (%d so far): %s", self.failed, error)

    def _client(self) -> Any:
        if self._producer is None:
            from confluent_kafka import Producer

            self._producer = Producer(
                producer_config(self.settings, **{"linger.ms": 5, "message.timeout.ms": 0})
            )
        return self._producer

    def write_metrics(self) -> None:
        """The counters as a Prometheus text file, replaced atomically."""
        text = (
            "# HELP scalefold_history_dead_letters_total dead letters written\n"
            "# TYPE scalefold_history_dead_letters_total counter\n"
            f"scalefold_history_dead_letters_total {self.written}\n"
            "# HELP scalefold_history_dead_letters_failed_total dead letters the broker "
            "refused (logged and dropped)\n"
            "# TYPE scalefold_history_dead_letters_failed_total counter\n"
            f"scalefold_history_dead_letters_failed_total {self.failed}\n"
        )
        self.metrics_path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.metrics_path.with_suffix(".tmp")
        partial.write_text(text)
        os.replace(partial, self.metrics_path)


def read_metrics(metrics_path: Path) -> dict[str, float]:
    """The counters a running (or stopped) history job last wrote (paths.Layout.metrics)."""
    try:
        text = metrics_path.read_text()
    except OSError:
        return {}
    return {
        line.split()[0]: float(line.split()[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }
