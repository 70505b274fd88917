"""The bridge's Kafka side: its offsets read back at start, each poll's output written.

Exactly once for the rescale records: each poll's `flink-rescales` records and the
offsets that account for them go out in one Kafka transaction (KIP-98; Kafka Connect's
exactly-once source tasks, KIP-618, do the same), and a restarted bridge reads the
committed offsets back (read_committed) after `init_transactions` has fenced and
aborted whatever its predecessor left open. So a revision is sent once, whenever the
bridge stops.

At least once for the input events: they go onto `job-events` (and unusable answers
onto `dead-letters`) before the transaction, outside it, because the scheduler's
consumer (aiokafka, Faust) reads uncommitted records and counts a transaction's
markers as gaps. A bridge that dies between the two sends a poll's events again on
restart; the scheduler ignores a repeated submission, registration or requirement.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from services.bridge import offsets as off
from services.bridge.offsets import JobOffset
from services.bridge.poll import Letter
from services.bridge.step import Observed
from services.contracts import Codec
from services.contracts import records as r
from services.contracts.codec import DecodeError
from services.contracts.deadletters import dead_letter, encode_dead_letter, letter_key
from services.contracts.events import to_record
from services.contracts.kafka import (
    flush,
    librdkafka_config,
    producer_config,
    retry_transient,
)
from services.contracts.settings import Settings
from services.contracts.topics import flink_job_key

log = logging.getLogger("scalefold.bridge")
SERVICE = "bridge"


class BridgeKafkaError(RuntimeError):
    """Kafka refused the bridge's output for good (fenced, or a fatal error): exit, restart."""


class Sink:
    def __init__(self, settings: Settings, codec: Codec, transactional_id: str) -> None:
        from confluent_kafka import Producer

        self.settings = settings
        self.codec = codec
        self.topics = settings.topics
        self.events = Producer(producer_config(settings, **{"linger.ms": 5}))
        self.transactional = Producer(
            producer_config(settings, **{"transactional.id": transactional_id, "linger.ms": 5})
        )
        retry_transient(lambda: self.transactional.init_transactions(30), "init_transactions")

    def restore(self) -> dict[str, JobOffset]:
        """The last committed offset of every job, by flink_job_key."""
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        topic = self.topics.flink_bridge_offsets
        consumer = Consumer(
            librdkafka_config(
                self.settings,
                **{
                    "group.id": f"{self.topics.own(SERVICE)}-restore",
                    "enable.auto.commit": False,
                    "isolation.level": "read_committed",
                    "enable.partition.eof": True,
                },
            )
        )
        try:
            metadata = retry_transient(lambda: consumer.list_topics(topic, timeout=10), topic)
            partitions = list(metadata.topics[topic].partitions)
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
            return _read_to_end(consumer, self.codec, topic, partitions)
        finally:
            consumer.close()

    def send(
        self,
        observed: Sequence[Observed],
        letters: Sequence[Letter],
        previous: dict[str, JobOffset],
        signals: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        """Events, workload signals and letters (at least once), then records and changed
        offsets (one transaction)."""
        for seen in observed:
            for event in seen.events:
                value = self.codec.encode(*to_record(event))
                self.events.produce(self.topics.job_events, key=event.job_id.encode(), value=value)
        for sample in signals:
            key = flink_job_key(sample["cluster"], sample["jobId"]).encode()
            value = self.codec.encode(r.FLINK_WORKLOAD_SIGNAL, dict(sample))
            self.events.produce(self.topics.flink_signals, key=key, value=value)
        for letter in letters:
            self._letter(letter)
        if flush(self.events, 30) != 0:
            raise BridgeKafkaError("job-events: records not delivered in 30 s")
        self._transaction(observed, previous)

    def _transaction(self, observed: Sequence[Observed], previous: dict[str, JobOffset]) -> None:
        from confluent_kafka import KafkaException

        # an offset is written when it changed, and when its poll sent events: its
        # updated_at is the watermark of the checkpoints sent (step._checkpoints)
        changed = [
            s
            for s in observed
            if s.rescales or s.events or _changed(previous.get(s.offset.key), s.offset)
        ]
        if not changed:
            return
        try:
            self.transactional.begin_transaction()
            for seen in changed:
                key = seen.offset.key.encode()
                for record in seen.rescales:
                    value = self.codec.encode(r.FLINK_RESCALE, record)
                    self.transactional.produce(self.topics.flink_rescales, key=key, value=value)
                value = self.codec.encode(r.FLINK_BRIDGE_OFFSET, off.to_record(seen.offset))
                self.transactional.produce(self.topics.flink_bridge_offsets, key=key, value=value)
            self.transactional.commit_transaction(30)
        except KafkaException as error:
            kafka_error = error.args[0]
            if kafka_error.txn_requires_abort():
                self.transactional.abort_transaction(30)
                raise TransactionAbortedError(str(kafka_error)) from None
            raise BridgeKafkaError(f"the transaction failed: {kafka_error}") from None

    def _letter(self, letter: Letter) -> None:
        record = dead_letter(
            topic=f"flink-rest:{letter.cluster}",
            partition=-1,
            offset=-1,
            key=letter.key.encode(),
            value=letter.body,
            error_class=letter.error_class,
            reason=f"GET {letter.path}: {letter.reason}",
            service=SERVICE,
            at_ms=int(time.time() * 1000),
        )
        self.events.produce(
            self.topics.dead_letters,
            key=letter_key(letter.key.encode()),
            value=encode_dead_letter(self.codec, record),
        )

    def close(self) -> None:
        flush(self.events, 10)
        flush(self.transactional, 10)


class TransactionAbortedError(RuntimeError):
    """A poll's transaction was aborted (a broker hiccup): the poll is redone from its offsets."""


def _changed(before: JobOffset | None, after: JobOffset) -> bool:
    if before is None:
        return True
    return off.to_record(before) | {"updatedAtMillis": 0} != off.to_record(after) | {
        "updatedAtMillis": 0
    }


def _read_to_end(
    consumer: Any, codec: Codec, topic: str, partitions: list[int]
) -> dict[str, JobOffset]:
    """Each key's last offset, read until every partition reports its end (with
    read_committed, its last stable offset: a transaction's marker counts as read)."""
    from confluent_kafka import KafkaError

    found: dict[str, JobOffset] = {}
    at_end: set[int] = set()
    deadline = time.monotonic() + 120
    while len(at_end) < len(partitions):
        if time.monotonic() > deadline:
            raise BridgeKafkaError(f"could not read {topic} to its end in 120 s")
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error():
            if message.error().code() == KafkaError._PARTITION_EOF:
                at_end.add(message.partition())
            continue
        at_end.discard(message.partition())
        _keep(found, message, codec)
    return found


def _keep(found: dict[str, JobOffset], message: Any, codec: Codec) -> None:
    key = (message.key() or b"").decode()
    if message.value() is None:  # a tombstone: the job's offset was dropped
        found.pop(key, None)
        return
    try:
        decoded = codec.decode(message.value(), frozenset({r.FLINK_BRIDGE_OFFSET}))
    except DecodeError as error:
        log.warning("an unreadable offset at offset %d is skipped: %s", message.offset(), error)
        return
    found[key] = off.from_record(decoded.record)
