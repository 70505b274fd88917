"""Avro events through the real broker, with librdkafka and with Faust's client (aiokafka)."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from services.contracts import Codec, Settings
from services.contracts import records as r
from services.contracts.eventlog import read_log
from services.contracts.events import to_record
from services.contracts.kafka import ensure_topics, librdkafka_config
from tests.kafka_support import (
    cli_env,
    consume,
    count_at_least,
    produce,
    set_topic_config,
    unique_settings,
)

pytestmark = pytest.mark.integration


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "requirements-update.jsonl"


def _records(codec: Codec) -> list[tuple[str, dict[str, object]]]:
    return [to_record(event) for event in read_log(EXAMPLE, codec)]


def _encoded(codec: Codec) -> list[tuple[bytes, bytes]]:
    return [
        (str(record["jobId"]).encode(), codec.encode(name, record))
        for name, record in _records(codec)
    ]


def test_confluent_kafka_produce_consume_avro(kafka: Settings, codec: Codec) -> None:
    messages = _encoded(codec)
    produce(kafka, kafka.topics.job_events, messages)
    received = consume(kafka, kafka.topics.job_events, count_at_least(len(messages)))
    assert [m.value for m in received] == [value for _, value in messages]  # one key: one order
    decoded = [codec.decode(m.value, expected=r.INPUT_EVENTS) for m in received]
    assert [d.schema for d in decoded] == [name for name, _ in _records(codec)]
    assert decoded[0].record["vertices"][0]["id"] == "source"


def test_faust_client_produce_consume_avro(kafka: Settings, codec: Codec) -> None:
    """aiokafka, the client Faust's agents run on, reads and writes the same bytes."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    messages = _encoded(codec)
    topic = kafka.topics.job_events

    async def round_trip() -> list[bytes]:
        producer = AIOKafkaProducer(
            bootstrap_servers=kafka.bootstrap_servers, enable_idempotence=True
        )
        await producer.start()
        try:
            for key, value in messages:
                await producer.send_and_wait(topic, value=value, key=key)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=kafka.bootstrap_servers,
            group_id=f"faust-client-{uuid.uuid4().hex}",
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=1000,
        )
        await consumer.start()
        values: list[bytes] = []
        try:
            async with asyncio.timeout(60):
                async for message in consumer:
                    values.append(message.value)
                    if len(values) == len(messages):
                        break
        finally:
            await consumer.stop()
        return values

    values = asyncio.run(round_trip())
    assert values == [value for _, value in messages]
    assert codec.decode(values[1]).record["taskManagerId"] == "tm-1"


def test_librdkafka_reads_what_aiokafka_wrote(kafka: Settings, codec: Codec) -> None:
    from aiokafka import AIOKafkaProducer

    value = codec.encode(r.TIMER_FIRED, {"jobId": "j-1", "timestamp": 42})

    async def send() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap_servers)
        await producer.start()
        try:
            await producer.send_and_wait(kafka.topics.job_events, value=value, key=b"j-1")
        finally:
            await producer.stop()

    asyncio.run(send())
    (received,) = consume(kafka, kafka.topics.job_events, count_at_least(1))
    assert codec.decode(received.value).record == {"jobId": "j-1", "timestamp": 42}
    assert librdkafka_config(kafka)["bootstrap.servers"] == kafka.bootstrap_servers


def test_ensure_topics_returns_once_every_partition_has_a_leader(
    broker_settings: Settings,
) -> None:
    """Right after `ensure_topics` every client call works: no NOT_LEADER_FOR_PARTITION.

    Before, the actuator asked for end offsets of just-created topics and died with
    it on about one fresh start in three.
    """
    from confluent_kafka import Consumer, TopicPartition

    settings = broker_settings.with_overrides(topic_prefix=f"t{uuid.uuid4().hex[:10]}.")
    created = ensure_topics(settings, settings.topics.all())
    assert len(created) == len(settings.topics.all())
    consumer = Consumer(librdkafka_config(settings, **{"group.id": f"t-{uuid.uuid4().hex}"}))
    try:
        metadata = consumer.list_topics(timeout=10).topics
        for name in created:
            for number, partition in metadata[name].partitions.items():
                assert partition.leader >= 0, f"{name}[{number}] has no leader"
                low, high = consumer.get_watermark_offsets(TopicPartition(name, number), 10)
                assert (low, high) == (0, 0)
    finally:
        consumer.close()


def test_a_topic_an_older_release_made_is_named_at_start_and_set_by_apply(
    broker_settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    """Kafka never changes an existing topic's settings: an install from before `decisions`
    had a retention keeps it for ever. A start says so; `topics --apply` sets it."""
    from services.contracts.kafka import apply_topic_configs, connect, topic_drifts

    settings = unique_settings(broker_settings)
    specs = settings.topics.all()
    admin = connect(settings)
    assert topic_drifts(admin, specs) == []
    decisions = settings.topics.decisions
    set_topic_config(settings, decisions, retention_ms="-1")

    with caplog.at_level(logging.INFO, logger="scalefold.kafka"):
        assert ensure_topics(settings, specs) == []
    (warning,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert warning.getMessage() == (
        f"topic {decisions}: retention.ms is for ever (-1) on the broker, scalefold declares "
        "7 days (604800000); `scalefold topics --apply` sets what is declared"
    )
    applied = subprocess.run(
        [sys.executable, "-m", "services.cli", "topics", "--apply"],
        check=False,
        env=cli_env(settings),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert applied.returncode == 0, applied.stderr
    assert applied.stderr.splitlines() == [
        f"{warning.getMessage().split(';')[0]}: set to the declared value",
        "changed 1 settings",
    ]
    assert topic_drifts(admin, specs) == []
    assert apply_topic_configs(settings, specs) == []
