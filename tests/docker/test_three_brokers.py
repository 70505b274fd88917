"""The three-broker profile (deploy/docker/three-brokers.env): topics at replication factor 3
with min ISR 2, and a broker SIGKILLed mid-stream loses and duplicates nothing."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.docker.conftest import project_name, stack_env, started
from tests.docker.stack import THREE_BROKERS, Stack, poll, replayed, revisions, split, workload
from tests.docker.test_compose import wait_for_rescales


def identity(event: dict[str, Any]) -> tuple[Any, ...]:
    """What tells a job's input events apart (the log's and the topic's JSON alike)."""
    return (event["jobId"], event["timestamp"], event.get("taskManagerId"), event.get("kind"))


@pytest.fixture(scope="module")
def brokers() -> Iterator[Stack]:
    """Three brokers, the topics and the scheduler (what folds; no Spark needed here)."""
    stack = Stack(project_name("-3b"), stack_env(), env_file=THREE_BROKERS)
    with started(stack, "scheduler") as running:
        yield running


def test_topics_are_replicated_three_times_with_min_isr_two(brokers: Stack) -> None:
    import confluent_kafka.admin as kafka_admin

    admin = kafka_admin.AdminClient({"bootstrap.servers": brokers.bootstrap})
    metadata = admin.list_topics(timeout=30)
    assert len(metadata.brokers) == 3
    names = [name for name in metadata.topics if name.startswith("scalefold.")]
    assert len(names) >= 6
    for name in names:
        for partition in metadata.topics[name].partitions.values():
            assert len(partition.replicas) == 3, f"{name}: {partition.replicas}"
    resource = kafka_admin.ConfigResource  # type: ignore[attr-defined]
    resources = [resource(resource.Type.TOPIC, name) for name in names]
    for topic, future in admin.describe_configs(resources).items():
        assert future.result(timeout=30)["min.insync.replicas"].value == "2", topic


def test_a_broker_sigkilled_mid_stream_loses_and_duplicates_nothing(
    brokers: Stack, tmp_path: Path
) -> None:
    log = workload(tmp_path / "brokers.jsonl", "broker-kill-", 40)
    expected = replayed(log)
    first, second = split(log, 2)
    brokers.scalefold("produce", "--from", str(first))
    assert poll(lambda: bool(brokers.records("rescales", "broker-kill-")), bool, timeout=300)
    brokers.run("kill", "kafka-2")
    brokers.scalefold("produce", "--from", str(second))  # acks=all: two replicas left
    received = wait_for_rescales(brokers, "broker-kill-", expected)
    assert set(revisions(received)) == set(revisions(expected))
    # Every input is on the job-events topic exactly once (idempotent producer); the
    # scheduler's own TimerFired records there are not inputs of ours.
    inputs = brokers.records("job-events", "broker-kill-", but=["TimerFired"])
    produced = [json.loads(line)["event"] for line in log.read_text().splitlines()]
    assert Counter(map(identity, inputs)) == Counter(map(identity, produced)), (
        "an input is missing or duplicated"
    )
    brokers.run("up", "-d", "--wait", "scheduler")  # the broker comes back and rejoins
