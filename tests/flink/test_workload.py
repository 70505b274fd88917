"""The workload job (deploy/flink/workload) on Flink 2.3.0 with Flink's Kafka connector
5.0.0-2.2 (issue 50, item 1): it reads what `scalefold load` produces from the local
broker; its backlog (what the topic holds beyond what the keyed stage took) grows while
the load exceeds what the subtasks' CPU cost lets them take and drains after; every
record reaches the keyed stage; the source reports the connector's `pendingRecords`.

Measured here: the source read a 20,000-record burst of 1 KB records within its 10 s
while `Work` had taken 5,555: the backlog sat in Flink (its source and network
buffers), not in Kafka, and `pendingRecords` (Kafka's records-lag of the source's
consumer) stayed 0 throughout. A backlog signal from `pendingRecords` alone, as the
Kubernetes operator's autoscaler reads it, misses such a backlog."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaException

from services.bridge.poll import ClusterPoller
from services.bridge.sink import Sink
from services.contracts import Codec
from services.contracts.flinkrest import FlinkRest, FlinkRestError
from services.contracts.kafka import ensure_topics
from services.contracts.settings import Settings
from services.contracts.topics import WORKLOAD
from services.localstack.flinkdist import flink_home, workload_job
from services.localstack.layout import cache_dir
from services.tools.load import Trace, run
from tests.flink.flink_support import FlinkTestCluster, wait_for
from tests.integration.bridge_support import read_all
from tests.integration.conftest import kafka  # noqa: F401  (a fixture)

COST_US = 2_000
"""500 records a second per subtask at most: two subtasks take 1,000."""
LOAD = Trace(((0.0, 2_000.0), (10.0, 2_000.0)))
"""Twice what the job takes, for 10 s: 20,000 records of 1 KB, a backlog of thousands."""


def topic_end(settings: Settings, topic: str) -> int:
    """How many records the topic holds (the sum of its partitions' end offsets)."""
    from confluent_kafka import Consumer, TopicPartition

    from services.contracts.kafka import librdkafka_config

    consumer = Consumer(librdkafka_config(settings, **{"group.id": "workload-test-ends"}))
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(WORKLOAD.partitions)
        )
    finally:
        consumer.close()


def vertex_metric(flink: FlinkTestCluster, jid: str, vertex: str, suffix: str) -> float | None:
    """The largest subtask value of `vertex`'s metric ending in `suffix` (None: not there)."""
    rest = flink.rest
    found = [v for v in rest.job(jid)["vertices"] if v["name"].startswith(vertex)]
    if not found:
        return None
    path = f"/jobs/{jid}/vertices/{found[0]['id']}/subtasks/metrics"
    names = [m["id"] for m in rest.get_json(path) if m["id"].endswith(suffix)]
    if not names:
        return None
    values = rest.get_json(f"{path}?get={names[0]}&agg=max,sum")
    return float(values[0]["sum" if suffix == "numRecordsIn" else "max"])


@pytest.fixture
def workload(
    flink: FlinkTestCluster,
    kafka: Settings,  # noqa: F811
) -> Iterator[tuple[str, Any]]:
    """The workload job running at parallelism 2 on two TaskManagers, its topic empty."""
    topic = kafka.topics.workload
    ensure_topics(kafka, {topic: WORKLOAD})
    cache = cache_dir(os.environ)
    jar = workload_job(cache, flink_home(cache))
    flink.add_taskmanagers(2)
    jar_id = flink.rest.upload_jar(jar.name, jar.read_bytes())
    arguments = [
        *("--max-parallelism", "2", "--checkpoint-interval", "1000"),
        *("--bootstrap-servers", kafka.bootstrap_servers, "--topic", topic),
        *("--group", kafka.topics.own("workload"), "--cost-us", str(COST_US)),
    ]
    jid = flink.rest.run_jar(jar_id, arguments)
    job = flink.wait_running(jid, {})
    assert {v["parallelism"] for v in job["vertices"]} == {2}, job["vertices"]
    yield jid, topic


def test_the_workload_reads_the_load_and_its_backlog_shows_and_drains(
    flink: FlinkTestCluster,
    kafka: Settings,  # noqa: F811
    codec: Codec,
    workload: tuple[str, Any],
) -> None:
    jid, topic = workload
    backlog: list[float] = []
    reported: list[float] = []
    done = threading.Event()

    def behind() -> float | None:
        """The topic's end less what Work took (None: a metric or the broker not answering
        this time, e.g. a partition's leader still being elected)."""
        try:
            taken = vertex_metric(flink, jid, "Work", "numRecordsIn")
            return None if taken is None else topic_end(kafka, topic) - taken
        except (FlinkRestError, KafkaException):
            return None

    def watch() -> None:
        while not done.is_set():
            if (gap := behind()) is not None:
                backlog.append(gap)
            try:
                pending = vertex_metric(flink, jid, "Source: Kafka", "pendingRecords")
            except FlinkRestError:
                pending = None
            if pending is not None:
                reported.append(pending)
            done.wait(1.0)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        sent = run(kafka, LOAD, topic, 16, lambda _: None, size=1024)
        assert sent == 20_000
        wait_for(
            "every record through the keyed stage",
            lambda: (vertex_metric(flink, jid, "Work", "numRecordsIn") or 0) >= sent or None,
            120.0,
        )
        wait_for("the backlog drained", lambda: behind() == 0 or None, 60.0)
    finally:
        done.set()
        watcher.join(5)
    assert max(backlog) >= 2_000, backlog  # the load outran the job
    assert reported  # the connector's metric is there (what it said: the module doc)

    # The bridge's workload sample of the drained job, through its sink onto flink-signals
    # (issue 50, item 2): the counters say every record went through, the source's
    # pendingRecords is found under its operator's name.
    poller = ClusterPoller("w", FlinkRest(flink.url, 10.0))
    sink = Sink(kafka, codec, f"{kafka.topics.own('bridge')}.w")
    try:
        polled = poller.poll({}, 0)
        sink.send([], [], {}, [s for s in polled.signals if s["jobId"] == jid])
    finally:
        sink.close()
    ((key, sample),) = read_all(kafka, kafka.topics.flink_signals, codec)
    assert key == f"w.{jid}" and sample["jobState"] == "RUNNING"
    vertices = {v["jobVertexName"].split(" ")[0]: v for v in sample["vertices"]}
    source, work = vertices["Source:"], vertices["Work"]
    assert source["pendingRecords"] is not None and source["writeRecords"] >= sent
    assert work["readRecords"] >= sent and work["parallelism"] == 2
    assert work["accumulatedBusyTimeMs"] > 0 and work["busyTimeMsPerSecondAvg"] is not None
