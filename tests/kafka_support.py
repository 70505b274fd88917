"""Real-broker helpers for integration tests: unique topics, produce, consume with a deadline."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, Message, Producer

from services.contracts.kafka import ensure_topics, librdkafka_config, producer_config
from services.contracts.settings import Settings
from tests.patience import give_up_at


def unique_settings(base: Settings) -> Settings:
    """Settings whose topic prefix no other test uses, with the topics created."""
    settings = base.with_overrides(topic_prefix=f"t{uuid.uuid4().hex[:10]}.")
    ensure_topics(settings, settings.topics.all())
    return settings


def cli_env(settings: Settings) -> dict[str, str]:
    """The environment of a `scalefold` command (or service) run on `settings`' broker
    and topics, over this process's own."""
    return {
        **os.environ,
        "SCALEFOLD_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
        "SCALEFOLD_TOPIC_PREFIX": settings.topic_prefix,
    }


def produce(
    settings: Settings,
    topic: str,
    messages: Iterable[tuple[bytes | None, bytes | None]],
    headers: Any = None,  # list of (name, value); bytes names too (the stubs say str only)
) -> int:
    producer = Producer(producer_config(settings, **{"linger.ms": 5}))
    count = 0
    for key, value in messages:
        producer.produce(topic, key=key, value=value, headers=headers)
        producer.poll(0)
        count += 1
    remaining = producer.flush(30)
    assert remaining == 0, f"{remaining} messages not delivered"
    return count


def produce_located(
    settings: Settings,
    topic: str,
    messages: Iterable[tuple[bytes | None, bytes | None]],
    headers: Any = None,
) -> list[tuple[int, int]]:
    """Produce `messages` in order; return each one's (partition, offset)."""
    producer = Producer(producer_config(settings, **{"linger.ms": 5}))
    located: dict[int, tuple[int, int]] = {}
    for index, (key, value) in enumerate(messages):

        def record(error: object, message: Message, index: int = index) -> None:
            assert error is None, error
            located[index] = (message.partition() or 0, message.offset() or 0)

        producer.produce(topic, key=key, value=value, headers=headers, on_delivery=record)
        producer.poll(0)
    assert producer.flush(30) == 0
    return [located[i] for i in range(len(located))]


def set_topic_config(settings: Settings, topic: str, **config: str) -> None:
    """Change a topic's configuration on the broker (e.g. `max.message.bytes`)."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
    )

    admin = AdminClient(librdkafka_config(settings))
    entries = [
        ConfigEntry(name.replace("_", "."), value, incremental_operation=AlterConfigOpType.SET)
        for name, value in config.items()
    ]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


@dataclass(frozen=True)
class Received:
    key: bytes | None
    value: bytes
    partition: int
    offset: int


def consume(
    settings: Settings,
    topic: str,
    until: Callable[[list[Received]], bool],
    timeout: float = 60.0,
    group_prefix: str = "test",
) -> list[Received]:
    """Read `topic` from the start with a fresh group until `until(received)` or the deadline."""
    consumer = Consumer(
        librdkafka_config(
            settings,
            **{
                "group.id": f"{group_prefix}-{uuid.uuid4().hex}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 6000,
            },
        )
    )
    consumer.subscribe([topic])
    received: list[Received] = []
    deadline = give_up_at(timeout)
    try:
        while not until(received) and time.monotonic() < deadline:
            message: Message | None = consumer.poll(0.5)
            if message is None or message.error():
                continue
            received.append(
                Received(
                    message.key(),
                    message.value() or b"",
                    message.partition() or 0,
                    message.offset() or 0,
                )
            )
    finally:
        consumer.close()
    return received


def count_at_least(n: int) -> Callable[[list[Received]], bool]:
    return lambda received: len(received) >= n


def delete_records_before(settings: Settings, topic: str, partition: int, offset: int) -> None:
    """What retention does to a partition: every record before `offset` is deleted (Kafka's
    DeleteRecords; the partition's log start moves to `offset`)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(librdkafka_config(settings))
    for future in admin.delete_records([TopicPartition(topic, partition, offset)]).values():
        future.result(30)
