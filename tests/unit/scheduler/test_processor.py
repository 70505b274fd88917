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
        "payloadNull": False,
        "payloadTruncated": False,
        "payloadSize": 8,
        "keyTruncated": False,
    }


@pytest.mark.parametrize(
    ("key", "value", "error_class"),
    [
        (JOB.encode(), None, "DecodeError"),  # a tombstone
        (None, None, "DecodeError"),
        (JOB.encode(), b"", "DecodeError"),
        (b"\xff\xfe not utf-8", b"\xc3\x01" + bytes(30), "DecodeError"),
        (b"k" * 2_000_000, b"\x00" * 1_000_000, "DecodeError"),  # as big as Kafka allows
    ],
    ids=["tombstone", "no-key-no-value", "empty", "binary-key", "huge"],
)
def test_no_message_is_an_exception_every_one_is_an_outcome(
    codec: Codec, processor: Processor, key: bytes | None, value: bytes | None, error_class: str
) -> None:
    outcome = processor.process(Incoming("p.job-events", 1, 4, key, value), None)
    (out,) = outcome.outgoing
    assert out.topic == TOPICS.dead_letters and outcome.stored is None
    letter = codec.decode(out.value).record
    assert letter["errorClass"] == error_class and letter["payloadNull"] is (value is None)
    assert letter["payloadSize"] == len(value or b"")
    assert len(out.value) + len(out.key) < 1_000_000


def test_a_valid_event_without_a_key_is_refused(codec: Codec, processor: Processor) -> None:
    outcome = processor.process(
        message(codec, TaskManagerRegistered(JOB, 1, "t", 1, None), 3, key=None), None
    )
    letter = codec.decode(outcome.outgoing[0].value).record
    assert letter["errorClass"] == "KeyMismatch" and "no key" in letter["errorMessage"]


def test_an_event_whose_output_kafka_would_refuse_is_dead_lettered_not_stored(
    codec: Codec, processor: Processor
) -> None:
    """22,000 vertices, each in its own slot-sharing group: the submission fits in a Kafka
    message, its rescale record (vertices and slots) does not."""
    vertices = tuple(vertex(f"v{i}", 1, ssg=f"g{i}") for i in range(22_000))
    big = message(codec, JobSubmitted(JOB, 0, "j", vertices, None, ()), 1)
    assert len(big.value or b"") < 1_000_000  # the input itself fits
    outcome = processor.process(big, None)
    (out,) = outcome.outgoing
    letter = codec.decode(out.value).record
    assert letter["errorClass"] == "OutputTooLarge" and outcome.stored is None


def test_an_unforeseen_failure_anywhere_is_a_dead_letter(
    codec: Codec, processor: Processor, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> None:
        raise KeyError("a field no check foresaw")

    monkeypatch.setattr("services.scheduler.adapters.processor.from_record", broken)
    outcome = processor.process(submitted(codec), None)
    letter = codec.decode(outcome.outgoing[0].value).record
    assert letter["errorClass"] == "SchedulerError" and "no check foresaw" in letter["errorMessage"]


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


def test_the_tables_codec_encodes_a_state_once_and_answers_only_for_that_state(
    codec: Codec, processor: Processor
) -> None:
    """A table write encodes its value for the changelog and again for the store."""
    from faust.serializers import codecs

    from services.scheduler.adapters.app import STORED_CODEC

    first = processor.process(submitted(codec, offset=1), None).stored
    later = processor.process(submitted(codec, offset=2), None).stored
    assert first is not None and later is not None
    written = codecs.dumps(STORED_CODEC, first)
    assert written == store_bytes(first)
    assert codecs.dumps(STORED_CODEC, first) is written  # the second time, not encoded again
    assert codecs.dumps(STORED_CODEC, later) == store_bytes(later) != written
    assert codecs.dumps(STORED_CODEC, Stored(1, first.job)) == written  # equal, another object


def test_timer_ticks_are_input_events(codec: Codec) -> None:
    assert r.TIMER_FIRED in r.INPUT_EVENTS
