"""The scheduler service's message processing, without Kafka: guard, routing, dead letters."""

from __future__ import annotations

import pytest

from services.contracts import Codec, Topics
from services.contracts import records as r
from services.contracts.events import JobSubmitted, TaskManagerRegistered, to_record
from services.contracts.kafka import partition_for
from services.scheduler.adapters.processor import (
    Incoming,
    Processor,
    Stored,
    store_bytes,
    stored_from_bytes,
)
from tests.unit.scheduler.harness import vertex

TOPICS = Topics("p.")
JOB = "job-7"


def message(
    codec: Codec,
    event: object,
    offset: int,
    key: bytes | None = JOB.encode(),
    partition: int | None = None,
) -> Incoming:
    name, record = to_record(event)  # type: ignore[arg-type]
    value = codec.encode(name, record)
    part = partition_for(key, 6) if partition is None and key is not None else (partition or 0)
    return Incoming("p.job-events", part, offset, key, value)


@pytest.fixture
def processor(codec: Codec) -> Processor:
    return Processor(codec, TOPICS, clock=lambda: 1_700_000_000.0)


def submitted(codec: Codec, offset: int = 1) -> Incoming:
    return message(codec, JobSubmitted(JOB, 0, "j", (vertex("source", 2),), None, ()), offset)


def test_a_submission_is_folded_and_its_outputs_routed(codec: Codec, processor: Processor) -> None:
    outcome = processor.process(submitted(codec), None)
    assert outcome.stored is not None and outcome.stored.offset == 1
    topics = [out.topic for out in outcome.outgoing]
    assert set(topics) == {TOPICS.rescales, TOPICS.decisions}
    assert all(out.key == JOB.encode() for out in outcome.outgoing)
    rescale = next(out for out in outcome.outgoing if out.topic == TOPICS.rescales)
    assert codec.decode(rescale.value).record["triggerCause"] == "INITIAL_SCHEDULE"


def test_a_message_folded_before_a_restart_is_skipped(codec: Codec, processor: Processor) -> None:
    stored = processor.process(submitted(codec, offset=5), None).stored
    again = processor.process(submitted(codec, offset=5), stored)
    assert again.skipped and not again.outgoing and again.stored is None


def test_bytes_that_are_not_a_record_become_a_dead_letter(
    codec: Codec, processor: Processor
) -> None:
    bad = Incoming("p.job-events", 2, 9, b"k", b"\x00garbage")
    outcome = processor.process(bad, None)
    (out,) = outcome.outgoing
    assert out.topic == TOPICS.dead_letters and outcome.dead_letters == 1
    letter = codec.decode(out.value).record
    assert letter == {
        "sourceTopic": "p.job-events",
        "sourcePartition": 2,
        "sourceOffset": 9,
        "key": b"k",
        "payload": b"\x00garbage",
        "errorClass": "DecodeError",
        "errorMessage": "8 bytes is shorter than the 10-byte header",
        "service": "scheduler",
        "timestampMillis": 1_700_000_000_000,
    }


def test_a_key_that_is_not_the_job_id_is_refused(codec: Codec, processor: Processor) -> None:
    outcome = processor.process(
        message(codec, TaskManagerRegistered(JOB, 1, "tm", 1, None), 3, key=b"other"), None
    )
    assert codec.decode(outcome.outgoing[0].value).record["errorClass"] == "KeyMismatch"


def test_an_event_on_the_wrong_partition_is_refused(codec: Codec, processor: Processor) -> None:
    wrong = (partition_for(JOB.encode(), 6) + 1) % 6
    outcome = processor.process(
        message(codec, TaskManagerRegistered(JOB, 1, "tm", 1, None), 3, partition=wrong), None
    )
    letter = codec.decode(outcome.outgoing[0].value).record
    assert letter["errorClass"] == "PartitionMismatch" and "murmur2" in letter["errorMessage"]


def test_an_event_for_an_unknown_job_is_dead_lettered(codec: Codec, processor: Processor) -> None:
    outcome = processor.process(
        message(codec, TaskManagerRegistered(JOB, 1, "tm", 1, None), 3), None
    )
    assert codec.decode(outcome.outgoing[0].value).record["errorClass"] == "UnknownJob"
    assert outcome.stored is None


def test_a_failure_of_the_scheduler_keeps_the_event_and_the_service_going(
    codec: Codec, processor: Processor, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise AssertionError("an invariant broke")

    monkeypatch.setattr("services.scheduler.adapters.processor.handle", broken)
    outcome = processor.process(submitted(codec), None)
    letter = codec.decode(outcome.outgoing[0].value).record
    assert (
        letter["errorClass"] == "SchedulerError" and "an invariant broke" in letter["errorMessage"]
    )


def test_stored_state_round_trips_with_its_offset(codec: Codec, processor: Processor) -> None:
    stored = processor.process(submitted(codec, offset=42), None).stored
    assert stored is not None
    assert stored_from_bytes(store_bytes(stored)) == Stored(42, stored.job)


def test_timer_ticks_are_input_events(codec: Codec) -> None:
    assert r.TIMER_FIRED in r.INPUT_EVENTS
