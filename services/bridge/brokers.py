"""The end offsets of the Kafka partitions a Flink job's sources read, asked of their broker
(`scalefold bridge run --source-bootstrap-servers`): the shell's half of a source's
backlog (signals.py's `source_backlog`).

One consumer, in no group and subscribed to nothing, asks the broker each partition's
watermarks (its first and end offsets) when a sample is taken; it never reads a record.
The broker's answer is fresh; the reader's offsets are as fresh as Flink's metric
fetcher. Each ask lists the broker's topics first: the client learns of a topic made
after it started only so, and Flink's metric names write a topic's dots as underscores
(`t1.workload` is `t1_workload` there), which the listing resolves. A topic or
partition the broker does not know (or two topics that read alike), or a
broker that does not answer within `timeout_s`, raises: the poll says so once and the
sample goes without the backlog.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from services.bridge.signals import Partition
from services.contracts.access import on_client_error
from services.contracts.kafka import librdkafka_config
from services.contracts.settings import Settings

OWN_BROKERS = "own"
"""`--source-bootstrap-servers`' word for scalefold's own brokers (the local stack's
Flink jobs read its broker)."""


class BrokerOffsets:
    """`poll.EndOffsets` of one Kafka cluster: `settings`' security, `bootstrap_servers`'
    brokers."""

    def __init__(self, settings: Settings, bootstrap_servers: str, timeout_s: float = 2.0) -> None:
        from confluent_kafka import Consumer

        config = librdkafka_config(
            settings,
            **{
                "bootstrap.servers": bootstrap_servers,
                "group.id": "scalefold-bridge-end-offsets",  # required; never joined
                "enable.auto.commit": False,
                # the poll says a failure once; a refusal still raises (served below)
                "error_cb": on_client_error(settings, quiet=True),
            },
        )
        self._consumer: Any = Consumer(config)
        self._timeout_s = timeout_s

    def __call__(self, partitions: Sequence[Partition]) -> Mapping[Partition, tuple[int, int]]:
        from confluent_kafka import TopicPartition

        self._consumer.poll(0)  # serves the client's queued errors: none pile up unread
        # Flink's metric names carry a topic with its dots as underscores; the broker's
        # listing (asked each time: the client learns of a topic made after it started
        # only so) gives the real name
        listed = self._consumer.list_topics(timeout=self._timeout_s).topics
        named: dict[str, list[str]] = {}
        for name in listed:
            named.setdefault(name.replace(".", "_"), []).append(name)
        marks: dict[Partition, tuple[int, int]] = {}
        for topic, number in partitions:
            names = [topic] if topic in listed else named.get(topic, [])
            if len(names) != 1:
                raise LookupError(f"the broker has {len(names)} topics named like {topic!r}")
            first, end = self._consumer.get_watermark_offsets(
                TopicPartition(names[0], number), timeout=self._timeout_s, cached=False
            )
            marks[(topic, number)] = (int(first), int(end))
        return marks

    def close(self) -> None:
        self._consumer.close()
