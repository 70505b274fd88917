"""The actuator: applies scaling commands to the embedded cluster, and runs the cluster.

One loop, one thread (plus the control server's):

1. On start it reads `job-events` and `decisions` from the beginning to rebuild
   the cluster, and `command-outcomes` to learn which commands are done; then
   it answers the runtime requests left unanswered when it last stopped.
2. It then follows those topics live, answering new runtime requests and
   running checkpoints, and consumes `commands` in its consumer group.
3. Each command is applied once (the cluster recognises its own past actions in
   the log), its outcome published once, and its offset committed only when it
   and every earlier command of its partition are done.
"""

from __future__ import annotations

import heapq
import itertools
import json
import logging
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from services.actuator.cluster import Action, EmbeddedCluster, Emit, Outcome
from services.contracts import Codec, DecodeError, Settings
from services.contracts import records as r
from services.contracts.events import from_record, to_record
from services.contracts.kafka import librdkafka_config, producer_config, retry_transient

log = logging.getLogger("scalefold.actuator")


def now_ms() -> int:
    return int(time.time() * 1000)


class ActuatorError(RuntimeError):
    """The actuator cannot go on safely (Kafka refuses its output): exit, restart, redo."""


def high_watermark(consumer: Consumer, topic: str, partition: int) -> int:
    """The partition's end offset, retried while its leader is (re)elected."""
    return int(
        retry_transient(
            lambda: consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1],
            f"end offset of {topic}[{partition}]",
        )
    )


def where(message: Message) -> tuple[str, int, int]:
    """A consumed message's topic, partition and offset (never None once consumed)."""
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    assert topic is not None and partition is not None and offset is not None
    return topic, partition, offset


@dataclass
class Metrics:
    commands: int = 0
    applied: int = 0
    rejected: int = 0
    requests_answered: int = 0
    events_produced: int = 0
    dead_letters: int = 0


@dataclass
class CommandLedger:
    """In-flight commands per partition; the commit point is the first unfinished one."""

    pending: dict[int, list[list[Any]]] = field(
        default_factory=dict
    )  # partition -> [[offset, done]]

    def add(self, partition: int, offset: int) -> list[Any]:
        entry = [offset, False]
        self.pending.setdefault(partition, []).append(entry)
        return entry

    def committable(self) -> dict[int, int]:
        """Partition -> the offset to commit (one past the last contiguous finished command)."""
        result = {}
        for partition, entries in self.pending.items():
            done = 0
            while done < len(entries) and entries[done][1]:
                done += 1
            if done:
                result[partition] = entries[done - 1][0] + 1
                del entries[:done]
        return result


class Actuator:
    def __init__(
        self,
        settings: Settings,
        codec: Codec,
        cluster: EmbeddedCluster,
        apply_delay_ms: int = 0,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.settings, self.codec, self.cluster, self.clock = settings, codec, cluster, clock
        self.apply_delay_ms = apply_delay_ms
        self.metrics = Metrics()
        self.producer = Producer(producer_config(settings, **{"linger.ms": 5}))
        self.outcomes: set[str] = set()
        self.schedule: list[tuple[int, int, Any]] = []
        self.sequence = itertools.count()
        self.ledger = CommandLedger()
        self.control: queue.Queue[Callable[[int], list[Action]]] = queue.Queue()
        self.seen_decisions: set[tuple[str, int]] = set()
        self.ready = False
        topics = settings.topics
        unique = f"{topics.prefix}actuator-observer-{int(time.time() * 1000)}"
        self.observer = Consumer(
            librdkafka_config(
                settings,
                **{"group.id": unique, "enable.auto.commit": False, "fetch.wait.max.ms": 50},
            )
        )
        self.commands = Consumer(
            librdkafka_config(
                settings,
                **{
                    "group.id": f"{topics.prefix}actuator",
                    "enable.auto.commit": False,
                    "auto.offset.reset": "earliest",
                    "session.timeout.ms": 6000,
                    "fetch.wait.max.ms": 50,
                },
            )
        )

    # -- start-up --------------------------------------------------------------

    def recover(self) -> None:
        """Rebuild the cluster and the set of finished commands from the log."""
        topics = self.settings.topics
        for record in self._read_all(topics.command_outcomes):
            self.outcomes.add(record["commandId"])
        partitions = self._all_partitions([topics.job_events, topics.decisions])
        self.observer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in partitions])
        ends = {(t, p): high_watermark(self.observer, t, p) for t, p in partitions}
        positions = dict.fromkeys(ends, 0)
        while any(positions[tp] < end for tp, end in ends.items()):
            message = self.observer.poll(0.5)
            if message is None or message.error():
                continue
            topic, partition, offset = where(message)
            positions[(topic, partition)] = offset + 1
            self._observe(message, live=False)
        self._reconcile()
        self.commands.subscribe([topics.commands])
        self.ready = True
        log.info(
            "actuator ready: %d jobs on the embedded cluster, %d commands already done",
            len(self.cluster.jobs),
            len(self.outcomes),
        )

    def _reconcile(self) -> None:
        """Answer what the scheduler asked before the last stop and never got an answer to."""
        now = self.clock()
        for job in self.cluster.jobs.values():
            if not job.external or job.finished:
                continue
            if job.status == "creating" and job.answered != f"{job.graph}/CREATE_EXECUTION_GRAPH":
                self._plan(
                    self.cluster.answer(job.job_id, "CREATE_EXECUTION_GRAPH", job.graph, now)
                )
            elif (
                job.status == "cancelling" and job.answered != f"{job.graph}/CANCEL_EXECUTION_GRAPH"
            ):
                self._plan(
                    self.cluster.answer(job.job_id, "CANCEL_EXECUTION_GRAPH", job.graph, now)
                )
            elif job.status == "running" and job.checkpoint_interval:
                job.next_checkpoint = now + job.checkpoint_interval

    def _read_all(self, topic: str) -> list[dict[str, Any]]:
        consumer = Consumer(
            librdkafka_config(
                self.settings,
                **{
                    "group.id": f"{self.settings.topics.prefix}actuator-reader-{time.time_ns()}",
                    "enable.auto.commit": False,
                },
            )
        )
        partitions = self._all_partitions([topic], consumer)
        consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in partitions])
        ends = {p: high_watermark(consumer, topic, p) for _, p in partitions}
        positions = dict.fromkeys(ends, 0)
        records = []
        while any(positions[p] < end for p, end in ends.items()):
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            positions[where(message)[1]] = where(message)[2] + 1
            try:
                records.append(self.codec.decode(message.value() or b"").record)
            except DecodeError:
                continue
        consumer.close()
        return records

    def _all_partitions(
        self, topics: list[str], consumer: Consumer | None = None
    ) -> list[tuple[str, int]]:
        client = consumer or self.observer

        def partitions() -> list[tuple[str, int]]:
            metadata = client.list_topics(timeout=10).topics
            missing = [t for t in topics if t not in metadata or not metadata[t].partitions]
            if missing:
                raise KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART, str(missing)))
            return [(t, p) for t in topics for p in metadata[t].partitions]

        return retry_transient(partitions, f"partitions of {topics}")

    # -- the loop --------------------------------------------------------------

    def run(self, stop: Callable[[], bool]) -> None:
        self.recover()
        while not stop():
            self.step()
        self.close()

    def step(self) -> None:
        now = self.clock()
        self._run_due(now)
        self._plan(self.cluster.checkpoints(now))
        while not self.control.empty():
            self._plan(self.control.get_nowait()(now))
        for message in self.observer.consume(200, timeout=0.05):
            if not message.error():
                self._observe(message, live=True)
        command = self.commands.poll(0.01)
        error = command.error() if command is not None else None
        if command is not None and error is None:
            self._command(command)
        elif error is not None and error.code() != KafkaError._PARTITION_EOF:
            log.warning("commands consumer: %s", error)
        self._commit()

    def _observe(self, message: Message, live: bool) -> None:
        try:
            decoded = self.codec.decode(message.value() or b"")
        except DecodeError:
            return  # not ours to judge: the scheduler dead-letters bad input
        if decoded.schema in r.INPUT_EVENTS:
            self.cluster.observe(from_record(decoded.schema, decoded.record))
        elif decoded.schema == r.SCHEDULER_DECISIONS:
            self._decisions(decoded.record, live)

    def _decisions(self, record: dict[str, Any], live: bool) -> None:
        identity = (record["jobId"], record["sourceOffset"])
        if identity in self.seen_decisions:
            return  # re-sent by a restarted scheduler
        self.seen_decisions.add(identity)
        for item in record["items"]:
            if item["category"] != "RUNTIME_REQUEST":
                continue
            self.cluster.observe_request(
                record["jobId"], item["kind"], item["executionGraphId"], item["details"]
            )
            if live:
                actions = self.cluster.answer(
                    record["jobId"], item["kind"], item["executionGraphId"], self.clock()
                )
                self.metrics.requests_answered += bool(actions)
                self._plan(actions)

    def _command(self, message: Message) -> None:
        _, partition, offset = where(message)
        entry = self.ledger.add(partition, offset)
        try:
            command = self.codec.decode(
                message.value() or b"", expected=frozenset({r.SCALING_COMMAND})
            ).record
        except DecodeError as error:
            self._dead_letter(message, str(error))
            entry[1] = True
            return
        self.metrics.commands += 1
        if command["commandId"] in self.outcomes:
            entry[1] = True  # applied and answered before a restart
            return
        due = self.clock() + self.apply_delay_ms
        self._at(due, ("apply", command, entry))

    def _dead_letter(self, message: Message, reason: str) -> None:
        """An undecodable command, kept with the reason; acknowledged before it is committed."""
        topic, partition, offset = where(message)
        record = {
            "sourceTopic": topic,
            "sourcePartition": partition,
            "sourceOffset": offset,
            "key": message.key(),
            "payload": message.value(),
            "errorClass": "DecodeError",
            "errorMessage": reason,
            "service": "actuator",
            "timestampMillis": self.clock(),
        }
        self.producer.produce(
            self.settings.topics.dead_letters,
            key=message.key() or b"",
            value=self.codec.encode(r.DEAD_LETTER, record),
        )
        if self.producer.flush(30):
            raise ActuatorError("the dead-letter topic did not acknowledge a dead letter")
        self.metrics.dead_letters += 1
        log.warning(
            "command at %s[%d]@%d is not a ScalingCommand; dead-lettered: %s",
            topic,
            partition,
            offset,
            reason,
        )

    def _run_due(self, now: int) -> None:
        produced = False
        while self.schedule and self.schedule[0][0] <= now:
            _, _, task = heapq.heappop(self.schedule)
            if task[0] == "apply":
                self._plan(self.cluster.apply(task[1], self.clock()), entry=task[2])
            elif task[0] == "call":
                self._plan(task[1](self.clock()))
            elif task[0] == "emit":
                event = task[1].event
                self.producer.produce(
                    self.settings.topics.job_events,
                    key=event.job_id.encode(),
                    value=self.codec.encode(*to_record(event)),
                )
                self.metrics.events_produced += 1
                produced = True
            else:
                self._publish(task[1], task[2])
                produced = False
        if produced:
            self.producer.flush(30)

    def _plan(self, actions: list[Action], entry: list[Any] | None = None) -> None:
        for action in actions:
            if isinstance(action, Emit):
                self._at(action.due, ("emit", action))
            else:
                self._at(action.due, ("outcome", action, entry))

    def _publish(self, outcome: Outcome, entry: list[Any] | None) -> None:
        self.producer.flush(30)  # the events an outcome reports on are out first
        if outcome.command_id not in self.outcomes:
            record = {
                "commandId": outcome.command_id,
                "jobId": outcome.job_id,
                "action": outcome.action,
                "status": outcome.status,
                "message": outcome.message,
                "backend": "embedded",
                "completedAtMillis": self.clock(),
                "details": dict(outcome.details),
            }
            self.producer.produce(
                self.settings.topics.command_outcomes,
                key=outcome.command_id.encode(),
                value=self.codec.encode(r.COMMAND_OUTCOME, record),
            )
            self.producer.flush(30)
            self.outcomes.add(outcome.command_id)
            self.metrics.applied += outcome.status == "APPLIED"
            self.metrics.rejected += outcome.status != "APPLIED"
            log.info(
                "command %s (%s, %s): %s %s",
                outcome.command_id,
                outcome.action,
                outcome.job_id,
                outcome.status,
                outcome.message,
            )
        if entry is not None:
            entry[1] = True

    def later(self, due: int, operation: Callable[[int], list[Action]]) -> None:
        """Run a cluster operation (a scheduled fault, say) at `due`."""
        self._at(due, ("call", operation))

    def _at(self, due: int, task: Any) -> None:
        heapq.heappush(self.schedule, (due, next(self.sequence), task))

    def _commit(self) -> None:
        offsets = self.ledger.committable()
        if offsets:
            topic = self.settings.topics.commands
            self.commands.commit(
                offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()],
                asynchronous=False,
            )

    def close(self) -> None:
        self.producer.flush(30)
        self.observer.close()
        self.commands.close()

    def status(self) -> dict[str, Any]:
        return {
            "status": "ready" if self.ready else "starting",
            "jobs": len(self.cluster.jobs),
            "metrics": vars(self.metrics),
        }


def state_json(actuator: Actuator) -> str:
    return json.dumps(actuator.cluster.snapshot(), indent=2)
