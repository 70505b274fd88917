"""Folding the log into an embedded cluster: the actuator's rebuild and its snapshots.

The cluster's model is a fold of two topics: the scheduler's `decisions` and the
cluster's own past events on `job-events` (cluster.py). A start folds them from the
latest snapshot's positions (snapshots.py) to their ends, and then writes a snapshot
of what it folded, before it answers anything. While it runs, a `Snapshotter` thread
keeps a shadow cluster that trails the log from that snapshot on, folds what the log
gained every `--snapshot-minutes`, and writes the result: the live cluster also holds
effects of commands and answers that are not in the log yet, which a rebuild would not
have.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, Producer, TopicPartition

from services.actuator.cluster import EmbeddedCluster
from services.actuator.snapshots import Position, Snapshot, capture, from_record, restore, to_record
from services.contracts import Codec, DecodeError, Settings
from services.contracts import records as r
from services.contracts.deadletters import shown
from services.contracts.events import Event
from services.contracts.events import from_record as event_from_record
from services.contracts.kafka import (
    librdkafka_config,
    partition_for,
    producer_config,
    retry_transient,
)
from services.contracts.topics import ACTUATOR_SNAPSHOTS, JOB_EVENTS

NO_VALUE = "no value (a tombstone) where a record was expected"
SNAPSHOT_KEY = b"embedded"

log = logging.getLogger("scalefold.actuator")


def where(message: Message) -> tuple[str, int, int]:
    """A consumed message's topic, partition and offset (never None once consumed)."""
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    assert topic is not None and partition is not None and offset is not None
    return topic, partition, offset


def watermarks(consumer: Consumer, topic: str, partition: int) -> tuple[int, int]:
    """The partition's oldest and end offsets, retried while its leader is (re)elected."""
    low, high = retry_transient(
        lambda: consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10),
        f"offsets of {topic}[{partition}]",
    )
    return int(low), int(high)


# -- what the fold takes from a record ----------------------------------------------------


def decisions_record(codec: Codec, message: Message) -> tuple[dict[str, Any] | None, str, str]:
    """A SchedulerDecisions record, or why it cannot be used: (None, error class, reason)."""
    value = message.value()
    if value is None:
        return None, "DecodeError", NO_VALUE
    try:
        record = codec.decode(value, expected=frozenset({r.SCHEDULER_DECISIONS})).record
    except DecodeError as error:
        return None, "DecodeError", str(error)
    if message.key() != record["jobId"].encode():
        reason = f"the key must be the job id {record['jobId']!r}, got {shown(message.key())}"
        return None, "KeyMismatch", reason
    return record, "", ""


def own_event(codec: Codec, message: Message) -> Event | None:
    """A job event the scheduler may have folded, or None: the scheduler dead-letters
    the others, and the cluster only looks here for its own past actions."""
    try:
        decoded = codec.decode(message.value() or b"", expected=r.INPUT_EVENTS)
        event = event_from_record(decoded.schema, decoded.record)
    except Exception:  # not ours to judge
        return None
    key = message.key()
    if key != event.job_id.encode():
        return None
    if message.partition() != partition_for(key, JOB_EVENTS.partitions):
        return None
    return event


def fold(cluster: EmbeddedCluster, codec: Codec, decisions: str, message: Message) -> None:
    """Fold one record of the log as a rebuild does (nothing answered, nothing reported)."""
    topic, _, offset = where(message)
    if topic == decisions:
        record, _, _ = decisions_record(codec, message)
        if record is not None:
            cluster.fold_decisions(record["jobId"], record["sourceOffset"], record["items"])
    elif (event := own_event(codec, message)) is not None:
        cluster.observe_own(event, offset)


# -- reading the log ------------------------------------------------------------------------


def starting_offsets(
    consumer: Consumer, partitions: list[Position], positions: dict[Position, int]
) -> dict[Position, int]:
    """Where a fold that has read up to `positions` (a snapshot's; none: from nothing)
    reads each partition. Where retention deleted records the fold needed, it starts at
    the oldest one left and says so: what the deleted ones held is missing from the model."""
    starts = {}
    for topic, partition in partitions:
        low, _ = watermarks(consumer, topic, partition)
        wanted = positions.get((topic, partition), 0)
        if wanted < low:
            log.warning(
                "%s[%d]: records %d to %d were deleted before a snapshot held them; the "
                "embedded cluster's model misses what they said (restore a snapshot on "
                "%s, or keep the topic longer than --snapshot-minutes)",
                topic,
                partition,
                wanted,
                low - 1,
                ACTUATOR_SNAPSHOTS.suffix,
            )
        starts[(topic, partition)] = max(wanted, low)
    return starts


def read_through(consumer: Consumer, starts: dict[Position, int]) -> Iterator[Message]:
    """Every record from `starts` to the partitions' ends as of now (the consumer stays
    assigned, to go on from there)."""
    consumer.assign(
        [TopicPartition(t, p, o if o > 0 else OFFSET_BEGINNING) for (t, p), o in starts.items()]
    )
    ends = {tp: watermarks(consumer, *tp)[1] for tp in starts}
    positions = dict(starts)
    while any(positions[tp] < end for tp, end in ends.items()):
        message = consumer.poll(0.5)
        if message is None or message.error():
            continue
        topic, partition, offset = where(message)
        positions[(topic, partition)] = offset + 1
        yield message


def latest_snapshot(settings: Settings, codec: Codec) -> Snapshot | None:
    """The newest snapshot on the topic that decodes (a compacted topic: a few records)."""
    topic = settings.topics.actuator_snapshots
    consumer = Consumer(
        librdkafka_config(
            settings,
            **{
                "group.id": f"{settings.topics.prefix}actuator-reader-{time.time_ns()}",
                "enable.auto.commit": False,
            },
        )
    )
    latest = None
    try:
        for message in read_through(consumer, {(topic, 0): 0}):
            if message.key() != SNAPSHOT_KEY:
                continue
            try:
                latest = from_record(
                    codec.decode(
                        message.value() or b"", expected=frozenset({r.ACTUATOR_SNAPSHOT})
                    ).record
                )
            except DecodeError as error:
                log.warning("%s@%d is not a snapshot, skipped: %s", topic, message.offset(), error)
    finally:
        consumer.close()
    return latest


def restored(snapshot: Snapshot | None, cluster: EmbeddedCluster) -> Snapshot | None:
    """`snapshot` restored into `cluster`, or None where it cannot be read."""
    if snapshot is None:
        return None
    try:
        restore(snapshot, cluster)
    except ValueError as error:
        log.warning("the actuator's snapshot cannot be read (%s): rebuilding from the log", error)
        return None
    return snapshot


class Publisher:
    """Writes snapshots: large records, compressed, each waited for."""

    def __init__(self, settings: Settings, codec: Codec) -> None:
        self.topic, self.codec = settings.topics.actuator_snapshots, codec
        self.producer = Producer(
            producer_config(
                settings,
                **{
                    "compression.type": "zstd",
                    "message.max.bytes": ACTUATOR_SNAPSHOTS.max_message_bytes,
                },
            )
        )

    def publish(self, snapshot: Snapshot) -> bool:
        value = self.codec.encode(r.ACTUATOR_SNAPSHOT, to_record(snapshot))
        failed: list[Any] = []
        self.producer.produce(
            self.topic,
            key=SNAPSHOT_KEY,
            value=value,
            on_delivery=lambda error, _: failed.append(error) if error else None,
        )
        if self.producer.flush(60) or failed:
            log.warning(
                "a snapshot (%d bytes) was not written: %s", len(value), failed or "timed out"
            )
            return False
        log.info("snapshot of %d jobs written (%d bytes)", snapshot.jobs, len(value))
        log.debug(
            "the snapshot reads on at %s",
            ", ".join(f"{t}[{p}]@{o}" for (t, p), o in sorted(snapshot.positions.items())),
        )
        return True


class Snapshotter:
    """A shadow of the cluster's model that trails the log: every `interval_s` it folds
    what the log gained since the last snapshot and writes the result. The shadow (a
    cluster `empty` makes, as the actuator's was configured) and one consumer live
    between rounds, so a round costs what the log gained, not a model's decoding."""

    def __init__(
        self,
        settings: Settings,
        codec: Codec,
        empty: Callable[[], EmbeddedCluster],
        *,
        interval_s: float,
        clock: Callable[[], int],
        written: Callable[[bool], None] = lambda ok: None,
    ) -> None:
        self.settings, self.codec, self.empty = settings, codec, empty
        self.interval_s, self.clock, self.written = interval_s, clock, written
        self.base: Snapshot | None = None  # the start's, restored into the shadow at first
        self.shadow: EmbeddedCluster | None = None
        self.positions: dict[Position, int] = {}  # of the shadow: the next offsets to fold
        self.consumer: Consumer | None = None
        self.publisher = Publisher(settings, codec)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="snapshots", daemon=True)

    def offer(self, snapshot: Snapshot) -> None:
        """Write the start's snapshot, the base of the next (written or not: it is what a
        rebuild computes, and the next round writes what follows from it)."""
        self.written(self.publisher.publish(snapshot))
        self.base = snapshot

    def start(self) -> None:
        if self.interval_s > 0:
            self.thread.start()

    def stop(self) -> None:
        self.stopped.set()

    def _run(self) -> None:
        try:
            while not self.stopped.wait(self.interval_s):
                try:
                    self.take()
                except Exception:  # the next round goes on; the live actuator is unaffected
                    log.exception("taking a snapshot failed")
        finally:
            if self.consumer is not None:
                self.consumer.close()

    def take(self) -> Snapshot | None:
        if self.shadow is None:
            if self.base is None:
                return None
            self.shadow = self.empty()
            restore(self.base, self.shadow)
            self.positions, self.base = dict(self.base.positions), None
        if self.consumer is None:
            self.consumer = Consumer(
                librdkafka_config(
                    self.settings,
                    **{
                        "group.id": f"{self.settings.topics.prefix}actuator-snapshots",
                        "enable.auto.commit": False,
                    },
                )
            )
        decisions = self.settings.topics.decisions
        starts = starting_offsets(self.consumer, list(self.positions), self.positions)
        self.positions.update(starts)
        try:
            for message in read_through(self.consumer, starts):
                topic, partition, offset = where(message)
                fold(self.shadow, self.codec, decisions, message)
                self.positions[(topic, partition)] = offset + 1
        finally:
            self.consumer.unassign()
        snapshot = capture(self.shadow, self.positions, self.clock())
        self.written(self.publisher.publish(snapshot))
        return snapshot
