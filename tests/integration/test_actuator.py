"""The actuator against the real broker: each command applied exactly once, also across kill -9."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from services.contracts import Codec, Settings
from services.contracts import records as r
from services.contracts.events import JobSubmitted, VertexSpec, to_record
from tests.integration.scheduler_support import ActuatorProcess
from tests.kafka_support import consume, produce

pytestmark = pytest.mark.integration


def command(
    command_id: str, job: str, action: str = "PROVISION_TASK_MANAGERS", amount: int = 2
) -> dict[str, object]:
    return {
        "commandId": command_id,
        "jobId": job,
        "action": action,
        "amount": amount,
        "reason": "test",
        "evidence": [],
        "issuedAtMillis": 1,
    }


def _submit(kafka: Settings, codec: Codec, job: str, *, parallelism: int) -> JobSubmitted:
    submitted = JobSubmitted(
        job,
        int(time.time() * 1000),
        "a",
        (VertexSpec("v", "V", "g", "g", parallelism, None),),
        None,
        (),
    )
    produce(kafka, kafka.topics.job_events, [(job.encode(), codec.encode(*to_record(submitted)))])
    return submitted


def test_kill_minus_nine_between_consuming_and_applying_applies_each_command_once(
    kafka: Settings, codec: Codec, tmp_path: Path
) -> None:
    job = "act-1"
    _submit(kafka, codec, job, parallelism=8)
    ids = [f"prov-{i}" for i in range(3)]
    produce(
        kafka,
        kafka.topics.commands,
        [(job.encode(), codec.encode(r.SCALING_COMMAND, command(i, job))) for i in ids],
    )

    first = ActuatorProcess(
        kafka, tmp_path / "a", "--apply-delay", "30", "--provisioning-delay", "0.2"
    ).start()
    first.wait_ready()
    deadline = time.monotonic() + 30
    while (
        first.metrics().get("scalefold_actuator_commands_total", 0) < 1
        and time.monotonic() < deadline
    ):
        time.sleep(0.1)
    assert first.metrics()["scalefold_actuator_commands_total"] >= 1  # consumed, waiting to apply
    first.kill()

    second = ActuatorProcess(kafka, tmp_path / "b", "--provisioning-delay", "0.2").start()
    try:
        second.wait_ready()
        outcomes = consume(
            kafka, kafka.topics.command_outcomes, lambda got: len(got) >= 3, timeout=60
        )
        decoded = [codec.decode(m.value).record for m in outcomes]
        assert Counter(o["commandId"] for o in decoded) == Counter(ids)  # exactly one outcome each
        assert {o["status"] for o in decoded} == {"APPLIED"}
        # Everything on job-events, read after the outcomes (which follow the registrations):
        # each provisioned TaskManager must be registered exactly once.
        everything = consume(kafka, kafka.topics.job_events, lambda got: False, timeout=5)
        registered = Counter(
            record["taskManagerId"]
            for record in (codec.decode(m.value).record for m in everything)
            if "taskManagerId" in record and "slots" in record
        )
        assert sorted(registered) == sorted(f"{job}-cmd-{i}-{n}" for i in ids for n in range(2))
        assert set(registered.values()) == {1}
    finally:
        second.stop()


def test_undecodable_commands_are_dead_lettered_and_valid_ones_still_applied(
    kafka: Settings, codec: Codec, tmp_path: Path
) -> None:
    job = "act-dlq"
    submitted = _submit(kafka, codec, job, parallelism=2)
    not_avro = b"provision 2 please"
    not_a_command = codec.encode(*to_record(submitted))  # valid Avro, wrong record
    valid = codec.encode(r.SCALING_COMMAND, command("prov-ok", job))
    produce(
        kafka,
        kafka.topics.commands,
        [(job.encode(), not_avro), (job.encode(), not_a_command), (job.encode(), valid)],
    )
    actuator = ActuatorProcess(kafka, tmp_path / "a", "--provisioning-delay", "0.2").start()
    try:
        actuator.wait_ready()
        outcomes = consume(kafka, kafka.topics.command_outcomes, lambda got: len(got) >= 1, 60)
        dead = consume(kafka, kafka.topics.dead_letters, lambda got: len(got) >= 2, timeout=30)
    finally:
        actuator.stop()
    assert [codec.decode(m.value).record["status"] for m in outcomes] == ["APPLIED"]
    mine = [codec.decode(m.value).record for m in dead]
    assert {d["service"] for d in mine} == {"actuator"}
    assert [d["payload"] for d in mine] == [not_avro, not_a_command]
    assert {d["errorClass"] for d in mine} == {"DecodeError"}
    assert all(d["sourceTopic"] == kafka.topics.commands for d in mine)
    assert all(d["key"] == job.encode() and d["errorMessage"] for d in mine)
