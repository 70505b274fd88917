"""The bridge against a real broker and a local HTTP server that answers like Flink 2.3.0
(its captured answers) or badly on purpose (issue 37, item 5)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from services.bridge.poll import ClusterPoller
from services.bridge.service import Bridge
from services.bridge.sink import Sink
from services.contracts import Codec
from services.contracts import records as r
from services.contracts.flinkrest import FlinkRest
from services.contracts.jobconfig import HISTORY_SIZE
from services.contracts.settings import Settings
from services.localstack.ports import free_port
from tests.integration.bridge_support import (
    FIRST,
    JID,
    SECOND,
    captured,
    fake_flink,
    flink_answers,
    read_all,
)

KEY = f"fake.{JID}"


@pytest.fixture
def sinks(kafka: Settings, codec: Codec) -> Iterator[list[Sink]]:
    made: list[Sink] = []
    yield made
    for sink in made:
        sink.close()


def bridge(kafka: Settings, codec: Codec, url: str, sinks: list[Sink]) -> Bridge:
    """A bridge as `scalefold bridge run` makes one, its offsets restored from Kafka."""
    sink = Sink(kafka, codec, f"{kafka.topics.own('bridge')}.fake")
    sinks.append(sink)
    return Bridge([ClusterPoller("fake", FlinkRest(url, 2.0))], sink, 0.1, sink.restore())


def rescales(kafka: Settings, codec: Codec) -> list[tuple[str, int]]:
    found = read_all(kafka, kafka.topics.flink_rescales, codec)
    return [(v["rescaleUuid"], v["revision"]) for _, v in found]


def events(kafka: Settings, codec: Codec) -> list[str]:
    """The inputs the bridge sent, bar the ticks that move the job's clock (`clock`)."""
    named = [type_name(v) for _, v in read_all(kafka, kafka.topics.job_events, codec)]
    return [name for name in named if name != "TimerFired"]


def clock(kafka: Settings, codec: Codec) -> list[int]:
    """The instants the bridge moved the job's clock to (step._advanced), in order."""
    found = read_all(kafka, kafka.topics.job_events, codec)
    return [int(str(v["timestamp"])) for _, v in found if type_name(v) == "TimerFired"]


def type_name(record: dict[str, object]) -> str:
    if "vertices" in record:
        return "JobSubmitted"
    if "slots" in record:
        return f"TaskManagerRegistered {record['taskManagerId']}"
    if "kind" in record:
        return f"JobLifecycle {record['kind']}"
    if set(record) == {"jobId", "timestamp"}:
        return "TimerFired"
    return "other"


def test_each_revision_once_across_a_restart(
    kafka: Settings, codec: Codec, sinks: list[Sink]
) -> None:
    answers = flink_answers()
    details = captured(f"rescales-details-{SECOND}.json")
    running = {**details, "endTimestampInMillis": None, "terminalState": None, "newerFlinkField": 1}
    answers[f"/jobs/{JID}/rescales/details/{SECOND}"] = (200, json.dumps(running).encode())
    with fake_flink(answers) as flink:
        first = bridge(kafka, codec, flink.url, sinks)
        first.step(0.0)
        first.step(1.0)  # nothing changed: nothing sent
        assert rescales(kafka, codec) == [(FIRST, 1), (SECOND, 1)]
        answers[f"/jobs/{JID}/rescales/details/{SECOND}"] = (200, json.dumps(details).encode())
        again = bridge(kafka, codec, flink.url, sinks)  # a restart: offsets from Kafka
        assert again.offsets[KEY].submitted
        again.step(0.0)
        again.step(1.0)
    assert rescales(kafka, codec) == [(FIRST, 1), (SECOND, 1), (SECOND, 2)]
    found = read_all(kafka, kafka.topics.flink_rescales, codec)
    assert found[1][1]["unknownFields"] == {"$.newerFlinkField": "1"}
    assert found[2][1]["terminalState"] == "COMPLETED" and found[2][0] == KEY
    assert events(kafka, codec) == [
        "JobSubmitted",
        "TaskManagerRegistered tm-1",
        "TaskManagerRegistered tm-2",
        "TaskManagerRegistered tm-3",
    ]
    ticks = clock(kafka, codec)
    assert ticks and ticks == sorted(set(ticks))  # it only moves forward, across the restart


def test_unreachable_at_start_then_mid_run_one_line_each_and_it_resumes(
    kafka: Settings, codec: Codec, sinks: list[Sink], caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    running = bridge(kafka, codec, f"http://127.0.0.1:{port}", sinks)
    caplog.set_level(logging.INFO, "scalefold.bridge")
    for attempt in range(3):
        running.step(1000.0 * attempt)
    away = [m for m in caplog.messages if "does not answer" in m]
    assert len(away) == 1 and f"127.0.0.1:{port}" in away[0]
    assert running.schedules["fake"].due > 2000.0  # backing off
    with fake_flink(flink_answers(), port):
        running.step(running.schedules["fake"].due)
    assert rescales(kafka, codec) == [(FIRST, 1), (SECOND, 1)]
    assert any("answers again" in m for m in caplog.messages)
    caplog.clear()
    for _ in range(2):  # gone again, mid-run
        running.step(running.schedules["fake"].due)
    assert len([m for m in caplog.messages if "does not answer" in m]) == 1


def test_history_off_is_one_warning_naming_the_key(
    kafka: Settings, codec: Codec, sinks: list[Sink], caplog: pytest.LogCaptureFixture
) -> None:
    answers = {p: a for p, a in flink_answers().items() if "/rescales/" not in p}
    caplog.set_level(logging.INFO, "scalefold.bridge")
    with fake_flink(answers) as flink:
        running = bridge(kafka, codec, flink.url, sinks)
        running.step(0.0)
        running.step(1.0)
    warned = [m for m in caplog.messages if HISTORY_SIZE in m]
    assert len(warned) == 1
    assert rescales(kafka, codec) == []
    submitted = read_all(kafka, kafka.topics.job_events, codec)[0][1]
    # no history, no group names: the groups go by their ids
    assert {v["slotSharingGroupName"] for v in submitted["vertices"]} == {
        v["slotSharingGroupId"] for v in submitted["vertices"]
    }


def test_a_job_that_vanishes_between_polls(
    kafka: Settings, codec: Codec, sinks: list[Sink], caplog: pytest.LogCaptureFixture
) -> None:
    answers = flink_answers()
    caplog.set_level(logging.INFO, "scalefold.bridge")
    with fake_flink(answers) as flink:
        running = bridge(kafka, codec, flink.url, sinks)
        running.step(0.0)
        for path in [p for p in answers if p.startswith(f"/jobs/{JID}")]:
            del answers[path]
        running.step(1.0)
        running.step(2.0)
        answers["/jobs/overview"] = (200, b'{"jobs": []}')  # the JobManager forgot it
        running.step(3.0)
        running.step(4.0)
    assert len([m for m in caplog.messages if "no longer there" in m]) == 1
    assert len([m for m in caplog.messages if "no longer listed" in m]) == 1
    assert rescales(kafka, codec) == [(FIRST, 1), (SECOND, 1)]
    assert read_all(kafka, kafka.topics.dead_letters, codec) == []
    assert events(kafka, codec)[-1] == "JobLifecycle SUSPEND"
    assert events(kafka, codec).count("JobLifecycle SUSPEND") == 1


def test_malformed_answers_and_5xx_are_dead_lettered_once_and_the_rest_flows(
    kafka: Settings, codec: Codec, sinks: list[Sink]
) -> None:
    answers = flink_answers()
    answers["/taskmanagers"] = (200, b'{"taskmanagers": [{"id": "tm-1", "slotsNu')
    answers[f"/jobs/{JID}/rescales/details/{SECOND}"] = (503, b"<html>overloaded</html>")
    bad_first = {**captured(f"rescales-details-{FIRST}.json"), "vertices": ["not", "a map"]}
    answers[f"/jobs/{JID}/rescales/details/{FIRST}"] = (200, json.dumps(bad_first).encode())
    with fake_flink(answers) as flink:
        running = bridge(kafka, codec, flink.url, sinks)
        running.step(0.0)
        running.step(1.0)  # the same bad answers: not lettered again
        answers[f"/jobs/{JID}/rescales/details/{SECOND}"] = flink_answers()[
            f"/jobs/{JID}/rescales/details/{SECOND}"
        ]
        running.step(2.0)
    letters = [v for _, v in read_all(kafka, kafka.topics.dead_letters, codec)]
    assert {v["service"] for v in letters} == {"bridge"}
    reasons = sorted(v["errorMessage"] for v in letters)
    assert len(reasons) == 3, reasons
    assert any("/taskmanagers" in m and "not JSON" in m for m in reasons)
    assert any(f"details/{SECOND}" in m and "HTTP 503" in m for m in reasons)
    assert any(f"details/{FIRST}" in m and "vertices" in m for m in reasons)
    assert rescales(kafka, codec) == [(SECOND, 1)]


def test_the_records_are_the_registered_schemas(
    kafka: Settings, codec: Codec, sinks: list[Sink]
) -> None:
    with fake_flink(flink_answers()) as flink:
        bridge(kafka, codec, flink.url, sinks).step(0.0)
    offsets = read_all(kafka, kafka.topics.flink_bridge_offsets, codec)
    assert [k for k, _ in offsets] == [KEY]
    assert codec.decode(codec.encode(r.FLINK_BRIDGE_OFFSET, offsets[0][1])).record == offsets[0][1]


def test_a_job_still_initializing_is_read_once_it_is_scheduled(
    kafka: Settings, codec: Codec, sinks: list[Sink], caplog: pytest.LogCaptureFixture
) -> None:
    """As a real Flink 2.3.0 answers before the job's scheduler exists: 404 on the history,
    500 on the requirements. Neither is a warning nor a dead letter."""
    answers = flink_answers()
    ready = dict(answers)
    job = {**captured("job.json"), "state": "INITIALIZING"}
    answers[f"/jobs/{JID}"] = (200, json.dumps(job).encode())
    del answers[f"/jobs/{JID}/rescales/history"]
    answers[f"/jobs/{JID}/resource-requirements"] = (500, b'{"errors": ["Internal server error."]}')
    caplog.set_level(logging.INFO, "scalefold.bridge")
    with fake_flink(answers) as flink:
        running = bridge(kafka, codec, flink.url, sinks)
        running.step(0.0)
        answers.update(ready)
        running.step(1.0)
    assert not [m for m in caplog.messages if HISTORY_SIZE in m]
    assert read_all(kafka, kafka.topics.dead_letters, codec) == []
    assert rescales(kafka, codec) == [(FIRST, 1), (SECOND, 1)]
    assert events(kafka, codec)[0] == "JobSubmitted"


def test_a_sources_end_offsets_are_the_brokers_and_an_unknown_topic_raises(
    kafka: Settings,
) -> None:
    """brokers.BrokerOffsets against the real broker: a partition's first and end offsets
    as the broker holds them, without reading a record; a topic it does not know raises
    (the poll then samples without the backlog)."""
    from confluent_kafka import Producer

    from services.bridge.brokers import BrokerOffsets
    from services.contracts.kafka import ensure_topics, librdkafka_config
    from services.contracts.topics import WORKLOAD

    topic = f"{kafka.topic_prefix}workload-in"
    ends = BrokerOffsets(kafka, kafka.bootstrap_servers, timeout_s=10.0)
    with pytest.raises(Exception):  # noqa: B017 (not made yet)
        ends([(topic, 0)])
    ensure_topics(kafka, {topic: WORKLOAD})  # made after the bridge started: a new job's
    producer = Producer(librdkafka_config(kafka))
    for n in range(7):
        producer.produce(topic, value=b"x", partition=n % 2)
    assert producer.flush(30) == 0
    as_flink = topic.replace(".", "_")  # its metric names' spelling (the prefix has a dot)
    assert "." in topic
    try:
        assert ends([(topic, 0), (as_flink, 1), (topic, 2)]) == {
            (topic, 0): (0, 4),
            (as_flink, 1): (0, 3),
            (topic, 2): (0, 0),
        }
        with pytest.raises(Exception):  # noqa: B017 (librdkafka's KafkaException)
            ends([(f"{kafka.topic_prefix}no-such-topic", 0)])
    finally:
        ends.close()
