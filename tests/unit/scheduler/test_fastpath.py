"""The scheduler's Faust consumer fetches promptly (fastpath.PromptFetchThread), and a
recovery that reads nothing is noticed (fastpath.RecoveryWatch)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from services.contracts import Settings
from services.scheduler.adapters.app import ServiceSettings, create_app
from services.scheduler.adapters.fastpath import FETCH_MAX_WAIT_MS, RecoveryWatch


def test_the_workers_kafka_consumer_waits_at_most_100_ms_for_a_fetch(tmp_path: Path) -> None:
    """Faust's driver fixes the wait at 1,500 ms; aiokafka builds its fetcher from the
    consumer's setting when it starts, which this reads without connecting."""
    app = create_app(ServiceSettings(Settings(), data_dir=tmp_path))
    faust_consumer: Any = app.consumer  # its thread is the aiokafka driver's, not typed

    async def built() -> int:  # aiokafka makes its consumer inside the running loop
        consumer = faust_consumer._thread._create_worker_consumer(app.transport)
        return int(consumer._fetch_max_wait_ms)

    assert asyncio.run(built()) == FETCH_MAX_WAIT_MS == 100


def test_a_recovery_that_reads_nothing_for_the_timeout_is_stalled() -> None:
    watch = RecoveryWatch(timeout_s=120)
    assert watch.stalled_for(1000.0, started_at=990.0, remaining=42) is None
    assert watch.stalled_for(1119.0, started_at=990.0, remaining=42) is None
    assert watch.stalled_for(1120.0, started_at=990.0, remaining=42) == 120.0
    assert watch.stalled_for(1200.0, started_at=990.0, remaining=42) == 200.0


def test_fewer_records_left_or_a_new_recovery_is_progress() -> None:
    watch = RecoveryWatch(timeout_s=120)
    watch.stalled_for(0.0, started_at=0.0, remaining=42)
    assert watch.stalled_for(100.0, started_at=0.0, remaining=41) is None  # read one
    assert watch.stalled_for(219.0, started_at=0.0, remaining=41) is None
    assert watch.stalled_for(230.0, started_at=225.0, remaining=41) is None  # rebalanced
    assert watch.stalled_for(349.0, started_at=225.0, remaining=41) is None
    assert watch.stalled_for(350.0, started_at=225.0, remaining=41) == 120.0


def test_no_recovery_under_way_or_nothing_left_to_read_is_never_stalled() -> None:
    watch = RecoveryWatch(timeout_s=120)
    for now in (0.0, 500.0, 1000.0):
        assert watch.stalled_for(now, started_at=None, remaining=0) is None
        assert watch.stalled_for(now, started_at=0.0, remaining=0) is None
    # and the clock starts again at the next recovery
    assert watch.stalled_for(1000.0, started_at=990.0, remaining=5) is None
    assert watch.stalled_for(1119.0, started_at=990.0, remaining=5) is None


def test_a_restarted_watch_counts_from_its_next_observation() -> None:
    watch = RecoveryWatch(timeout_s=120)
    watch.stalled_for(0.0, started_at=0.0, remaining=7)
    assert watch.stalled_for(120.0, started_at=0.0, remaining=7) == 120.0
    watch.restart()  # the broker did not answer: waited for, counted again
    assert watch.stalled_for(125.0, started_at=0.0, remaining=7) is None
    assert watch.stalled_for(244.0, started_at=0.0, remaining=7) is None
    assert watch.stalled_for(245.0, started_at=0.0, remaining=7) == 120.0


class _Metadata:
    """The group leader's cluster metadata right after a broker restart: some topics
    not listed yet (aiokafka's `ClusterMetadata.partitions_for_topic` gives None)."""

    def __init__(self, partitions: dict[str, int]) -> None:
        self.partitions = partitions

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        count = self.partitions.get(topic)
        return None if count is None else set(range(count))


def _assigned(app: Any, metadata: _Metadata, topics: list[str]) -> dict[str, list[int]]:
    member = app.assignor.metadata(set(topics))
    assignment = app.assignor.assign(metadata, {"worker-1": member})["worker-1"]
    return {topic: sorted(partitions) for topic, partitions in assignment.assignment}


def test_a_topic_missing_from_the_leaders_metadata_is_assigned_by_its_declared_count(
    tmp_path: Path,
) -> None:
    """Faust's assignor leaves a topic its metadata lacks out of the assignment: a static
    member that rejoins then keeps that empty assignment for ever (assignor.py). The
    scheduler's assigns the partitions the worker declared the topic with."""
    settings = ServiceSettings(Settings(), data_dir=tmp_path)
    topics = ["job-events", "scalefold-scheduler-jobs-changelog", "leader"]
    counts = {"job-events": 6, "scalefold-scheduler-jobs-changelog": 6, "leader": 1}
    just_restarted = _Metadata({"leader": 1})
    for make in (create_app, lambda s: create_app(s, stock=True)):
        app = make(settings)
        for topic in topics:
            app.topics.add(app.topic(topic, partitions=counts[topic]))
        assigned = _assigned(app, just_restarted, topics)
        if make is create_app:
            assert assigned == {t: list(range(counts[t])) for t in topics}
        else:  # the stock assignor: the bug this mends
            assert assigned == {"leader": [0]}
    # a topic the metadata lists is sized by it, as Faust does
    app = create_app(settings)
    app.topics.add(app.topic("job-events", partitions=6))
    assert _assigned(app, _Metadata({"job-events": 3}), ["job-events"]) == {"job-events": [0, 1, 2]}
