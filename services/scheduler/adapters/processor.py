"""One input message in, the messages to send and the job's next stored state out.

This is the scheduler service without Faust: decode the raw bytes with the
contracts codec, guard against re-applying a message (a job's stored state
remembers the offset of the last message folded into it), fold, and encode
every effect for its topic. Anything unusable becomes a dead letter with the
reason. The Faust agent only moves bytes and stores what this returns.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from services.contracts import Codec, DecodeError, Topics
from services.contracts import records as r
from services.contracts.deadletters import dead_letter, encode_dead_letter, letter_key, shown
from services.contracts.events import Event, from_record
from services.contracts.kafka import partition_for
from services.contracts.topics import DAY_MS, JOB_EVENTS
from services.scheduler.core import handle
from services.scheduler.core.effects import (
    Decision,
    Effect,
    Rejected,
    RescaleUpdated,
    RuntimeRequest,
)
from services.scheduler.core.fold import Defaults
from services.scheduler.core.model import JobState
from services.scheduler.core.serde import STATE_FORMAT, dumps, loads

_OFFSET = struct.Struct(">q")

MAX_OUTPUT_BYTES = 1_000_000
"""librdkafka's default `message.max.bytes`: an output bigger than this never
reaches the broker, so the input that would cause it is dead-lettered instead."""


@dataclass(frozen=True)
class Incoming:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None  # None: a message without a value (a tombstone)


@dataclass(frozen=True)
class Outgoing:
    topic: str
    key: bytes
    value: bytes


@dataclass(frozen=True)
class Stored:
    """A job's state and the offset of the last message folded into it."""

    offset: int
    job: JobState


def store_bytes(stored: Stored) -> bytes:
    return _OFFSET.pack(stored.offset) + dumps(stored.job)


def stored_from_bytes(data: bytes) -> Stored:
    return Stored(_OFFSET.unpack_from(data)[0], loads(data[_OFFSET.size :]))


@dataclass
class Outcome:
    """What one message produced: messages to send, and the job state to store (if changed)."""

    job_id: str | None
    outgoing: list[Outgoing] = field(default_factory=list)
    stored: Stored | None = None
    released: bool = False
    """The job's state is to be deleted: it finished `jobstore.expiration-time` ago."""
    skipped: bool = False
    dead_letters: int = 0
    rescale_records: int = 0
    decisions: int = 0


NO_VALUE = "no value (a tombstone) where a record was expected"


class Processor:
    """Folds raw job-events messages for the jobs of one worker."""

    def __init__(
        self,
        codec: Codec,
        topics: Topics,
        defaults: Defaults = (),
        *,
        clock: Callable[[], float] = time.time,
        partitions: int = JOB_EVENTS.partitions,
        snapshot_interval_ms: int = DAY_MS,
    ) -> None:
        self.codec = codec
        self.snapshot_interval_ms = snapshot_interval_ms
        self.topics = topics
        self.defaults = defaults
        self.partitions = partitions
        self.clock = clock  # only for the dead letters' timestamps

    def job_of(self, message: Incoming) -> str | None:
        """The job a message is keyed to (None without a key)."""
        return message.key.decode("utf-8", "replace") if message.key is not None else None

    def process(self, message: Incoming, stored: Stored | None) -> Outcome:
        """Fold one message; whatever it holds, the answer is an outcome, never an exception."""
        try:
            return self._process(message, stored)
        except Exception as error:  # a bug, or an input no check foresaw: keep it, go on
            reason = f"the scheduler failed on this message: {type(error).__name__}: {error}"
            return self._dead(message, "SchedulerError", reason)

    def _process(self, message: Incoming, stored: Stored | None) -> Outcome:
        event = self._event_of(message)
        if isinstance(event, Outcome):
            return event  # refused: a dead letter
        if stored is not None and message.offset <= stored.offset:
            return Outcome(event.job_id, skipped=True)  # folded before a restart: outputs were sent
        try:
            step = handle(stored.job if stored else None, event, self.defaults)
        except Exception as error:  # a bug in the scheduler: keep the event, keep going
            reason = f"{type(error).__name__}: {error}"
            return self._dead(
                message, "SchedulerError", f"the scheduler failed on this event: {reason}"
            )
        outcome = Outcome(event.job_id)
        for effect in step.effects:
            self._emit(effect, message, outcome)
        at = step.job.now if step.job is not None else event.timestamp
        self._emit_decisions(step.effects, event.job_id, at, message, outcome)
        too_big = max((len(out.value) for out in outcome.outgoing), default=0)
        if too_big > MAX_OUTPUT_BYTES:
            reason = (
                f"folding this event gives a {too_big}-byte output, more than Kafka takes "
                f"({MAX_OUTPUT_BYTES}); the job's state is left as it was"
            )
            return self._dead(message, "OutputTooLarge", reason)
        if step.job is not None:
            outcome.stored = Stored(message.offset, step.job)
            if stored is not None and snapshot_due(
                stored.job.now, step.job.now, self.snapshot_interval_ms
            ):
                self._emit_snapshot(outcome.stored, message, outcome)
        elif stored is not None:  # only a finished job's release takes a state away
            outcome.released = True
        return outcome

    def _event_of(self, message: Incoming) -> Event | Outcome:
        """The message's event, or the dead letter saying why it has none."""
        if message.value is None:
            return self._dead(message, "DecodeError", NO_VALUE)
        try:
            decoded = self.codec.decode(message.value, expected=r.INPUT_EVENTS)
        except DecodeError as error:
            return self._dead(message, "DecodeError", str(error))
        event = from_record(decoded.schema, decoded.record)
        if message.key != event.job_id.encode():
            reason = f"the key must be the job id {event.job_id!r}, got {shown(message.key)}"
            return self._dead(message, "KeyMismatch", reason)
        expected = partition_for(message.key, self.partitions)
        if message.partition != expected:
            # A job's events must share one partition or their order is lost.
            reason = (
                f"job {event.job_id!r} belongs on partition {expected} (Kafka's murmur2 "
                f"partitioner), this message is on {message.partition}; fix the producer"
            )
            return self._dead(message, "PartitionMismatch", reason)
        return event

    def _emit(self, effect: Effect, message: Incoming, outcome: Outcome) -> None:
        key = effect.job_id.encode()
        if isinstance(effect, RescaleUpdated):
            value = self.codec.encode(r.RESCALE, effect.record)
            outcome.outgoing.append(Outgoing(self.topics.rescales, key, value))
            outcome.rescale_records += 1
        elif isinstance(effect, Decision | RuntimeRequest):
            pass  # sent together, one record per folded input
        else:
            assert isinstance(effect, Rejected)
            dead = self._dead(message, str(effect.kind), effect.message)
            outcome.outgoing.extend(dead.outgoing)
            outcome.dead_letters += 1

    def _emit_decisions(
        self, effects: tuple[Effect, ...], job_id: str, at: int, message: Incoming, outcome: Outcome
    ) -> None:
        record = decisions_record(effects, job_id, at, message.offset)
        if record is None:
            return
        value = self.codec.encode(r.SCHEDULER_DECISIONS, record)
        outcome.outgoing.append(Outgoing(self.topics.decisions, job_id.encode(), value))
        outcome.decisions += len(record["items"])

    def _emit_snapshot(self, stored: Stored, message: Incoming, outcome: Outcome) -> None:
        job = stored.job
        record = {
            "jobId": job.job_id,
            "partition": message.partition,
            "offset": stored.offset,
            "stateTimestampMillis": job.now,
            "stateFormat": STATE_FORMAT,
            "state": dumps(job),
        }
        value = self.codec.encode(r.JOB_SNAPSHOT, record)
        if len(value) > MAX_OUTPUT_BYTES:
            return  # a state Kafka would refuse: the next interval's snapshot stands in
        outcome.outgoing.append(Outgoing(self.topics.job_snapshots, job.job_id.encode(), value))

    def _dead(self, message: Incoming, error_class: str, reason: str) -> Outcome:
        record = dead_letter(
            topic=message.topic,
            partition=message.partition,
            offset=message.offset,
            key=message.key,
            value=message.value,
            error_class=error_class,
            reason=reason,
            service="scheduler",
            at_ms=int(self.clock() * 1000),
        )
        value = encode_dead_letter(self.codec, record)
        out = Outgoing(self.topics.dead_letters, letter_key(message.key), value)
        return Outcome(self.job_of(message), outgoing=[out], dead_letters=1)


def snapshot_due(before_ms: int, after_ms: int, interval_ms: int) -> bool:
    """Whether a fold that moved a job's clock from `before_ms` to `after_ms` is its first
    of an interval (days from the epoch, by default): a function of the log alone, so a
    replay or a restarted worker writes the same snapshots."""
    return interval_ms > 0 and after_ms // interval_ms > before_ms // interval_ms


def decisions_record(
    effects: tuple[Effect, ...], job_id: str, at: int, source_offset: int
) -> dict[str, Any] | None:
    """The Avro SchedulerDecisions record of one folded input (None if it decided nothing)."""
    items = [decision_record(e) for e in effects if isinstance(e, Decision | RuntimeRequest)]
    if not items:
        return None
    return {"jobId": job_id, "timestamp": at, "sourceOffset": source_offset, "items": items}


def decision_record(effect: Decision | RuntimeRequest) -> dict[str, Any]:
    """A decision or runtime request as an item of the Avro SchedulerDecisions record."""
    if isinstance(effect, Decision):
        return {
            "timestamp": effect.at,
            "sequence": effect.sequence,
            "category": "DECISION",
            "kind": str(effect.kind),
            "state": effect.state,
            "phase": effect.phase,
            "executionGraphId": None,
            "message": effect.message,
            "details": dict(effect.details),
            "jobStatus": None if effect.job_status is None else str(effect.job_status),
        }
    return {
        "timestamp": effect.at,
        "sequence": effect.sequence,
        "category": "RUNTIME_REQUEST",
        "kind": str(effect.kind),
        "state": effect.state,
        "phase": None,
        "executionGraphId": effect.execution_graph_id,
        "message": "",
        "details": dict(effect.details),
        "jobStatus": None,
    }
