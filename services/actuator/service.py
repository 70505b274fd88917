"""The actuator: applies scaling commands to the embedded cluster, and runs the cluster.

One loop, one thread (plus the control server's):

1. On start it restores the cluster from its latest snapshot and reads
   `job-events` and `decisions` from the snapshot's positions on (from their
   beginning without one) to rebuild the rest, writes a snapshot of the result
   (replay.py), and reads `command-outcomes` to learn which commands are done;
   then it answers the runtime requests left unanswered when it last stopped.
2. It then follows those topics live, answering new runtime requests and
   running checkpoints, and consumes `commands` in its consumer group.
3. Each command is applied once (the cluster recognises its own past actions in
   the log), its outcome published once, and its offset committed only when it
   and every earlier command of its partition are done.

No input stops it: a command or a decisions record it cannot use (no value,
not the record it expects, keyed by another job) goes to the dead-letter topic
with the reason; a dead letter the broker refuses is logged and counted. A
broker that goes away only makes it wait: outputs have no local timeout,
commits that fail are retried, and the consumers reconnect by themselves.
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

import msgspec
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from services.actuator import replay
from services.actuator.cluster import REQUEST_HEADER, Action, EmbeddedCluster, Emit, Outcome
from services.actuator.replay import NO_VALUE, where
from services.actuator.snapshots import capture
from services.contracts import Codec, DecodeError, Settings
from services.contracts import records as r
from services.contracts.commands import CommandOutcome, OutcomeStatus, ScalingCommand
from services.contracts.deadletters import dead_letter, encode_dead_letter, letter_key, shown
from services.contracts.events import to_record
from services.contracts.kafka import (
    librdkafka_config,
    producer_config,
    retry_transient,
)

WATERMARK_COMMIT_MS = 5_000

log = logging.getLogger("scalefold.actuator")


def now_ms() -> int:
    return int(time.time() * 1000)


class ActuatorError(RuntimeError):
    """The actuator cannot go on safely (Kafka refuses its output): exit, restart, redo."""


@dataclass
class Metrics:
    commands: int = 0
    applied: int = 0
    rejected: int = 0  # REJECTED or FAILED
    superseded: int = 0  # not applied: the command's basis no longer held (evidence.py)
    requests_answered: int = 0
    events_produced: int = 0
    dead_letters: int = 0
    dead_letters_failed: int = 0
    snapshots: int = 0  # of the embedded cluster written (replay.py)
    snapshots_failed: int = 0

    def snapshot_written(self, ok: bool) -> None:
        if ok:
            self.snapshots += 1
        else:
            self.snapshots_failed += 1


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
        return result

    def committed(self, offsets: dict[int, int]) -> None:
        """Forget the finished commands below the committed `offsets`."""
        for partition, offset in offsets.items():
            entries = self.pending.get(partition, [])
            while entries and entries[0][1] and entries[0][0] < offset:
                entries.pop(0)

    def forget(self, partitions: list[int]) -> None:
        """Partitions this worker no longer owns: their commands come again from the commit."""
        for partition in partitions:
            self.pending.pop(partition, None)


class Actuator:
    def __init__(
        self,
        settings: Settings,
        codec: Codec,
        cluster: EmbeddedCluster,
        *,
        apply_delay_ms: int = 0,
        clock: Callable[[], int] = now_ms,
        snapshot_interval_s: float = 3600.0,
    ) -> None:
        self.settings, self.codec, self.cluster, self.clock = settings, codec, cluster, clock
        self.apply_delay_ms = apply_delay_ms
        self.snapshot_interval_s = snapshot_interval_s
        self.snapshotter: replay.Snapshotter | None = None
        self.metrics = Metrics()
        # No local timeout: while the broker is away, outputs wait for it (see _flush).
        self.producer = Producer(
            producer_config(settings, **{"linger.ms": 5, "message.timeout.ms": 0})
        )
        self.refused: list[str] = []  # outputs other than dead letters the broker refused
        self.outcomes: dict[str, int] = {}  # finished command -> its completion (sweep_outcomes)
        self.outcomes_swept = 0
        self.in_flight: dict[str, list[list[Any]]] = {}  # command id -> its ledger entries
        self.schedule: list[tuple[int, int, Any]] = []
        self.sequence = itertools.count()
        self.ledger = CommandLedger()
        self.control: queue.Queue[Callable[[int], list[Action]]] = queue.Queue()
        # Per decisions partition: offsets below it were checked (bad ones dead-lettered)
        # by an earlier run, committed in the observer's group.
        self.checked: dict[int, int] = {}
        self.observed: dict[int, int] = {}  # decisions partition -> next offset to observe
        self.checked_at = 0
        self.commit_warned_at = 0
        self.ready = False
        # Commands of jobs on a real Flink go there (flinkworker.FlinkRouter.submit).
        self.offload: Callable[[ScalingCommand], bool] = lambda command: False
        topics = settings.topics
        self.observer = Consumer(
            librdkafka_config(
                settings,
                **{
                    "group.id": f"{topics.prefix}actuator-observer",  # assigned, never joined
                    "enable.auto.commit": False,
                    "fetch.wait.max.ms": 50,
                },
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
            if "commandId" in record:
                self.outcomes[record["commandId"]] = record["completedAtMillis"]
        partitions = self._all_partitions([topics.job_events, topics.decisions])
        self.checked = self._checked_offsets([p for t, p in partitions if t == topics.decisions])
        snapshot = replay.restored(replay.latest_snapshot(self.settings, self.codec), self.cluster)
        starts = replay.starting_offsets(
            self.observer, partitions, snapshot.positions if snapshot else {}
        )
        positions, folded = dict(starts), 0
        for message in replay.read_through(self.observer, starts):
            topic, partition, offset = where(message)
            positions[(topic, partition)] = offset + 1
            self._observe(message, live=False)
            folded += 1
        self._flush()
        self.snapshotter = replay.Snapshotter(
            self.settings,
            self.codec,
            self.cluster.empty,
            interval_s=self.snapshot_interval_s,
            clock=self.clock,
            written=self.metrics.snapshot_written,
        )
        # What was folded is what a rebuild computes: the next start reads on from here.
        self.snapshotter.offer(capture(self.cluster, positions, self.clock()))
        self._reconcile()
        self.commands.subscribe([topics.commands], on_revoke=self._revoked, on_lost=self._revoked)
        self.ready = True
        self.snapshotter.start()
        log.info(
            "actuator ready: %d jobs on the embedded cluster (%s, then %d records of the "
            "log), %d commands already done",
            len(self.cluster.jobs),
            f"a snapshot of {snapshot.jobs} jobs" if snapshot else "no snapshot",
            folded,
            len(self.outcomes),
        )

    def _checked_offsets(self, partitions: list[int]) -> dict[int, int]:
        topic = self.settings.topics.decisions
        committed = retry_transient(
            lambda: self.observer.committed(
                [TopicPartition(topic, p) for p in partitions], timeout=10
            ),
            f"committed offsets of {topic}",
        )
        return {tp.partition: max(tp.offset, 0) for tp in committed}

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
            elif job.status == "running" and (interval := self.cluster.interval_of(job)):
                job.next_checkpoint = now + interval

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
        records = []
        for message in replay.read_through(consumer, dict.fromkeys(partitions, 0)):
            try:
                records.append(self.codec.decode(message.value() or b"").record)
            except DecodeError:
                continue  # our own topic: nothing to repair, nobody to tell
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
        self._commit_checked(now)
        self._sweep_outcomes(now)

    def _sweep_outcomes(self, now: int) -> None:
        """Forget the finished commands `command-outcomes` no longer keeps (the cluster's
        memory: 15 days by default): a restart would not know them either, and none of
        them can be delivered again (`commands` keeps 7 days)."""
        if now - self.outcomes_swept < self.cluster.sweep_ms():
            return
        self.outcomes_swept = now
        horizon = now - self.cluster.memory_ms
        self.outcomes = {done: at for done, at in self.outcomes.items() if at > horizon}

    # -- what the cluster observes ---------------------------------------------------

    def _observe(self, message: Message, live: bool) -> None:
        topic, partition, offset = where(message)
        if topic == self.settings.topics.decisions:
            self.observed[partition] = offset + 1
            self._observe_decisions(message, fresh=offset >= self.checked.get(partition, 0))
            return
        event = replay.own_event(self.codec, message)
        if event is not None:
            self.cluster.observe_own(event, offset)

    def _observe_decisions(self, message: Message, fresh: bool) -> None:
        """One record of the scheduler's decisions; an unusable one is dead-lettered once
        per run that sees it first (`fresh`: not checked by an earlier run)."""
        record, error_class, reason = replay.decisions_record(self.codec, message)
        if record is None:
            if fresh:
                self._dead_letter(message, error_class, reason)
            return
        self._decisions(record, live=self.ready)

    def _decisions(self, record: dict[str, Any], live: bool) -> None:
        job_id = record["jobId"]
        requests = self.cluster.fold_decisions(job_id, record["sourceOffset"], record["items"])
        for item in requests if live else ():
            actions = self.cluster.answer(
                job_id, item["kind"], item["executionGraphId"], self.clock()
            )
            self.metrics.requests_answered += bool(actions)
            self._plan(actions)

    # -- commands -----------------------------------------------------------------------

    def _command(self, message: Message) -> None:
        _, partition, offset = where(message)
        entry = self.ledger.add(partition, offset)
        command, error_class, reason = self._usable_command(message)
        if command is None:
            self._dead_letter(message, error_class, reason)
            entry[1] = True
            return
        self.metrics.commands += 1
        command_id = command.command_id
        if command_id in self.outcomes:
            entry[1] = True  # applied and answered before a restart
            return
        if command_id in self.in_flight:
            self.in_flight[command_id].append(entry)  # delivered again: done with the first
            return
        self.in_flight[command_id] = [entry]
        self._at(self.clock() + self.apply_delay_ms, ("apply", command))

    def _usable_command(self, message: Message) -> tuple[ScalingCommand | None, str, str]:
        """The command, or why it cannot be used: (None, error class, reason)."""
        value = message.value()
        if value is None:
            return None, "DecodeError", NO_VALUE
        try:
            record = self.codec.decode(value, expected=frozenset({r.SCALING_COMMAND})).record
        except DecodeError as error:
            return None, "DecodeError", str(error)
        try:
            command = ScalingCommand.from_record(record)
        except msgspec.ValidationError as error:
            return None, "InvalidCommand", f"not a ScalingCommand: {error}"
        if message.key() != command.job_id.encode():
            reason = f"the key must be the job id {command.job_id!r}, got {shown(message.key())}"
            return None, "KeyMismatch", reason
        return command, "", ""

    def _revoked(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        self.ledger.forget([tp.partition for tp in partitions])

    # -- dead letters ---------------------------------------------------------------------

    def _dead_letter(self, message: Message, error_class: str, reason: str) -> None:
        """An input the actuator cannot use, kept with the reason; written (or given up
        on, logged and counted) before its offset can be committed."""
        topic, partition, offset = where(message)
        record = dead_letter(
            topic=topic,
            partition=partition,
            offset=offset,
            key=message.key(),
            value=message.value(),
            error_class=error_class,
            reason=reason,
            service="actuator",
            at_ms=self.clock(),
        )
        self._produce(
            self.settings.topics.dead_letters,
            letter_key(message.key()),
            encode_dead_letter(self.codec, record),
        )
        self._flush()
        self.metrics.dead_letters += 1
        log.warning(
            "%s[%d]@%d dead-lettered (%s): %s", topic, partition, offset, error_class, reason
        )

    def _produce(
        self,
        topic: str,
        key: bytes,
        value: bytes,
        headers: list[tuple[str, str | bytes | None]] | None = None,
    ) -> None:
        while True:
            try:
                self.producer.produce(
                    topic, key=key, value=value, headers=headers, on_delivery=self._delivered
                )
                return
            except BufferError:  # the local queue is full: let librdkafka send some
                self.producer.poll(0.1)

    def _delivered(self, error: Any, message: Any) -> None:
        if error is None:
            return
        if message.topic() == self.settings.topics.dead_letters:
            self.metrics.dead_letters_failed += 1
            log.error("a dead letter could not be written, dropped: %s", error)
        else:
            self.refused.append(f"{message.topic()}: {error}")

    def _flush(self) -> None:
        """Wait until the broker has every output; as long as it takes it to come back."""
        waited = 0
        while remaining := self.producer.flush(10):
            waited += 10
            log.warning("%d outputs still wait for the broker after %d s", remaining, waited)
        if self.refused:
            raise ActuatorError(f"the broker refused outputs: {self.refused[:3]}")

    # -- doing things at their time ---------------------------------------------------------

    def _run_due(self, now: int) -> None:
        produced = False
        while self.schedule and self.schedule[0][0] <= now:
            _, _, task = heapq.heappop(self.schedule)
            if task[0] == "apply":
                if not self.offload(task[1]):
                    self._plan(self.cluster.apply(task[1], self.clock()))
            elif task[0] == "call":
                self._plan(task[1](self.clock()))
            elif task[0] == "emit":
                self._emit(task[1])
                produced = True
            else:
                self._publish(task[1])
                produced = False
        if produced:
            self._flush()

    def _emit(self, action: Emit) -> None:
        event = action.event
        self._produce(
            self.settings.topics.job_events,
            event.job_id.encode(),
            self.codec.encode(*to_record(event)),
            [(REQUEST_HEADER, action.request.encode())] if action.request else None,
        )
        self.metrics.events_produced += 1

    def _plan(self, actions: list[Action]) -> None:
        for action in self.cluster.pace(actions, self.clock()):
            if isinstance(action, Emit):
                self._at(action.due, ("emit", action))
            else:
                self._at(action.due, ("outcome", action))

    def _publish(self, outcome: Outcome) -> None:
        self._flush()  # the events an outcome reports on are out first
        if outcome.command_id not in self.outcomes:
            record = CommandOutcome(
                command_id=outcome.command_id,
                job_id=outcome.job_id,
                action=str(outcome.action),
                status=outcome.status,
                message=outcome.message,
                backend=outcome.backend,
                completed_at_millis=self.clock(),
                details=dict(outcome.details),
            )
            self._produce(
                self.settings.topics.command_outcomes,
                outcome.command_id.encode(),
                self.codec.encode(r.COMMAND_OUTCOME, record.to_record()),
            )
            self._flush()
            self.outcomes[outcome.command_id] = record.completed_at_millis
            self._count(outcome.status)
            log.info(
                "command %s (%s, %s): %s %s",
                outcome.command_id,
                outcome.action,
                outcome.job_id,
                outcome.status,
                outcome.message,
            )
        for entry in self.in_flight.pop(outcome.command_id, []):
            entry[1] = True

    def _count(self, status: OutcomeStatus) -> None:
        if status is OutcomeStatus.APPLIED:
            self.metrics.applied += 1
        elif status is OutcomeStatus.SUPERSEDED:
            self.metrics.superseded += 1
        else:
            self.metrics.rejected += 1

    def later(self, due: int, operation: Callable[[int], list[Action]]) -> None:
        """Run a cluster operation (a scheduled fault, say) at `due`."""
        self._at(due, ("call", operation))

    def _at(self, due: int, task: Any) -> None:
        heapq.heappush(self.schedule, (due, next(self.sequence), task))

    # -- commits ---------------------------------------------------------------------------

    def _commit(self) -> None:
        offsets = self.ledger.committable()
        if not offsets:
            return
        topic = self.settings.topics.commands
        try:
            self.commands.commit(
                offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()],
                asynchronous=False,
            )
        except KafkaException as error:  # the broker away, a rebalance: retried next step
            if self.clock() - self.commit_warned_at > 10_000:
                self.commit_warned_at = self.clock()
                log.warning("committing commands failed, retrying: %s", error)
            return
        self.ledger.committed(offsets)

    def _commit_checked(self, now: int, force: bool = False) -> None:
        """Remember how far the decisions were checked, so a restart does not dead-letter
        the same bad records again (at-least-once: a crash may still repeat a few)."""
        if not self.observed or (not force and now - self.checked_at < WATERMARK_COMMIT_MS):
            return
        self.checked_at = now
        topic = self.settings.topics.decisions
        offsets = [TopicPartition(topic, p, o) for p, o in self.observed.items()]
        try:
            self.observer.commit(offsets=offsets, asynchronous=True)
        except KafkaException as error:
            log.debug("committing the checked decisions failed, retrying: %s", error)

    def close(self) -> None:
        """Stop: the events due now are produced first, as the next step would have (a
        checkpoint the cluster counted in the last step is on the log before the stop, not
        only in `/state`: seen in CI), then every output is flushed and the offsets
        committed. Commands and calls due are left to the next start, which plans them
        again from the log."""
        if self.snapshotter is not None:
            self.snapshotter.stop()
        now = self.clock()
        for due, _, task in sorted(self.schedule):
            if due <= now and task[0] == "emit":
                self._emit(task[1])
        self._flush()
        self._commit_checked(self.clock(), force=True)
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
