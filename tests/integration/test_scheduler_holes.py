"""Offsets Faust skipped are read from Kafka directly, in order, before what follows them."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import Producer
from faust.types import TP

from services.contracts import Settings
from services.contracts.kafka import ensure_topics, producer_config
from services.contracts.topics import JOB_EVENTS
from services.scheduler.adapters.app import HoleReader, SchedulerService
from services.scheduler.adapters.metrics import Metrics
from services.scheduler.adapters.processor import Incoming

pytestmark = pytest.mark.integration


def _produce(kafka: Settings, partition: int, count: int) -> None:
    producer = Producer(producer_config(kafka))
    for n in range(count):
        producer.produce(
            kafka.topics.job_events, key=b"k", value=f"m{n}".encode(), partition=partition
        )
    assert producer.flush(30) == 0


class _Folded(dict[str, int]):
    """The folded-offsets table as `_in_order` reads it, with its changelog's name."""

    changelog_topic_name = ""


def _service(kafka: Settings, folded: dict[str, int], committed: Any = None) -> Any:
    """Just the parts `_in_order` uses: the folded-offsets table and its changelog, the
    reader, metrics, and Faust's consumer for the committed offsets it logs."""
    service = SchedulerService.__new__(SchedulerService)
    service.folded = _Folded(folded)  # type: ignore[assignment]
    service.folded.changelog_topic_name = f"{kafka.topic_prefix}folded-changelog"
    service.app = SimpleNamespace(consumer=SimpleNamespace(_committed_offset=committed or {}))
    service.holes = HoleReader(kafka)
    service.metrics = Metrics()
    service.next_offset = {}
    return service


def _delivered(kafka: Settings, partition: int, *offsets: int) -> list[Incoming]:
    topic = kafka.topics.job_events
    return [Incoming(topic, partition, o, b"k", f"m{o}".encode()) for o in offsets]


def test_a_hole_is_read_in_and_what_was_folded_before_is_left_out(
    kafka: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    _produce(kafka, 2, 12)
    committed = {TP(kafka.topics.job_events, 2): 7}  # as if a commit had got ahead
    service = _service(kafka, {"2": 2}, committed)  # offsets 0..2 folded and stored before
    changelog = service.folded.changelog_topic_name
    ensure_topics(kafka, {changelog: JOB_EVENTS})
    producer = Producer(producer_config(kafka))
    for through in (b"1", b"2"):  # what a worker wrote; the table recovered the last
        producer.produce(changelog, key=b"2", value=through, partition=2)
    assert producer.flush(30) == 0

    with caplog.at_level(logging.WARNING, logger="scalefold.scheduler"):
        first = asyncio.run(service._in_order(_delivered(kafka, 2, 1, 2, 7, 8)))
    # 1 and 2 folded and stored before (a released job's events have no state left to
    # say so), 3..6 read in
    assert [m.offset for m in first] == [3, 4, 5, 6, 7, 8]
    assert [m.value for m in first[:4]] == [b"m3", b"m4", b"m5", b"m6"]
    assert service.metrics.holes_filled == 4
    assert service.metrics.events_skipped == 2
    # the log tells which side is stale: here the commit, not the table's replay
    assert (
        f"Faust skipped offsets 3..6 of {kafka.topics.job_events}[2]; reading them from "
        "Kafka (the group's committed offset 7; the folded table says through 2, its "
        "changelog's last record at offset 1: b'2')"
    ) in caplog.text

    later = asyncio.run(service._in_order(_delivered(kafka, 2, 11)))
    assert [m.offset for m in later] == [9, 10, 11]
    assert service.metrics.holes_filled == 6


def test_a_partition_never_folded_starts_at_its_earliest_offset(kafka: Settings) -> None:
    _produce(kafka, 0, 4)
    service = _service(kafka, {})
    delivered = asyncio.run(service._in_order(_delivered(kafka, 0, 2, 3)))
    assert [m.offset for m in delivered] == [0, 1, 2, 3]


def test_successive_reads_return_exactly_their_partitions_ranges(kafka: Settings) -> None:
    """After a takeover a worker reads the holes of several partitions one after the
    other with one reader; what one read fetched ahead must not reach the next."""
    _produce(kafka, 1, 40)
    _produce(kafka, 3, 40)
    reader = HoleReader(kafka)
    topic = kafka.topics.job_events
    reads = [(1, 30, 35), (3, 5, 9), (1, 2, 6), (3, 30, 40)]
    for partition, start, end in reads:
        got = reader.read(topic, partition, start, end)
        assert [(m.partition, m.offset, m.value) for m in got] == [
            (partition, o, f"m{o}".encode()) for o in range(start, end)
        ]


def test_a_changelog_that_cannot_be_read_leaves_the_hole_read_all_the_same(
    kafka: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    _produce(kafka, 1, 6)
    service = _service(kafka, {"1": 0})  # its changelog topic was never created

    with caplog.at_level(logging.WARNING, logger="scalefold.scheduler"):
        delivered = asyncio.run(service._in_order(_delivered(kafka, 1, 4, 5)))
    assert [m.offset for m in delivered] == [1, 2, 3, 4, 5]
    assert "the group's committed offset None" in caplog.text
    assert "its changelog's last record unread: " in caplog.text
