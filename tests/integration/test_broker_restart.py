"""The broker goes away for 30 s in the middle of the stream and comes back: the scheduler,
the actuator and the history service resume by themselves, and nothing is lost or
duplicated (the history holds exactly the rescales a replay of the log gives; every
command has one outcome and each provisioned TaskManager registered once)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from services.contracts import Codec
from services.contracts import jobconfig as c
from services.contracts import records as r
from services.contracts.events import (
    JobSubmitted,
    TaskManagerRegistered,
    VertexSpec,
    to_record,
)
from services.contracts.kafka import producer_config
from tests.history.support import read_topic
from tests.integration.robustness_support import (
    Stack,
    command_ledger,
    fresh_settings,
    latest_rescales,
    own_broker,
    provisioned,
    quiescent_snapshot,
    registrations,
    replay_log,
    wait_history_holds,
)
from tests.kafka_support import consume
from tests.patience import give_up_at

pytestmark = [pytest.mark.integration, pytest.mark.spark]

OUTAGE_SECONDS = 30
JOBS = 4
DEFAULTS = (
    (c.RUNTIME_MODE, "external"),
    (c.SUBMISSION_STABILIZATION, "0 s"),
    (c.COOLDOWN, "1 s"),
    (c.EXECUTING_STABILIZATION, "1 s"),
)


def _command(command_id: str, job: str) -> dict[str, Any]:
    return {
        "commandId": command_id,
        "jobId": job,
        "action": "PROVISION_TASK_MANAGERS",
        "amount": 1,
        "reason": "test",
        "evidence": [],
        "issuedAtMillis": 1,
    }


@pytest.mark.exclusive
def test_the_broker_goes_away_for_30_s_and_everything_resumes(tmp_path: Path, codec: Codec) -> None:
    with own_broker(tmp_path / "broker") as broker:
        settings = fresh_settings(broker)
        topics = settings.topics
        stack = Stack(
            settings,
            tmp_path,
            scheduler=tuple(f"-D{k}={v}" for k, v in DEFAULTS),
            actuator=("--provisioning-delay", "2", "--creation-delay", "0.2"),
            history=("--plan-interval", "2"),
        )
        # No local timeout: what the test produces while the broker is away waits for it.
        producer = Producer(producer_config(settings, **{"message.timeout.ms": 0}))

        def send(topic: str, key: str, value: bytes) -> None:
            producer.produce(topic, key=key.encode(), value=value)
            producer.poll(0)

        def event(e: Any) -> None:
            send(topics.job_events, e.job_id, codec.encode(*to_record(e)))

        def command(command_id: str, job: str) -> None:
            send(topics.commands, job, codec.encode(r.SCALING_COMMAND, _command(command_id, job)))

        def alive() -> None:
            assert all(stack.alive().values()), f"a service stopped:\n{stack.tails()}"

        stack.start_all()
        try:
            jobs = [f"job-{j}" for j in range(JOBS)]
            now = int(time.time() * 1000)
            vertices = (VertexSpec("v", "V", "g", "g", 4, None),)
            for job in jobs:
                event(JobSubmitted(job, now, job, vertices, None, ()))
                event(TaskManagerRegistered(job, now, "tm-0", 1, None))
                command(f"before-{job}", job)
            assert producer.flush(60) == 0
            # Mid-stream: the first rescales are out, provisioning is under way.
            consume(settings, topics.rescales, lambda got: len(got) >= JOBS, timeout=120)
            broker.stop(progress=lambda _: None)
            outage_end = time.monotonic() + OUTAGE_SECONDS
            second = 0
            while time.monotonic() < outage_end:  # inputs keep coming while it is away
                second += 1
                job = jobs[second % JOBS]
                event(TaskManagerRegistered(job, int(time.time() * 1000), f"tm-{second}", 1, None))
                if second % 10 == 0:
                    command(f"during-{second}", job)
                time.sleep(1)
            alive()
            broker.start(progress=lambda _: None)
            assert producer.flush(120) == 0
            for job in jobs:
                command(f"after-{job}", job)
            assert producer.flush(60) == 0

            snapshot = quiescent_snapshot(settings, timeout=240, alive=alive)
            expected = replay_log(codec, topics.job_events, snapshot.log, DEFAULTS).rescales
            assert latest_rescales(codec, snapshot.rescales) == expected  # none lost, none made up
            found, wanted = wait_history_holds(
                settings, codec, stack.history_dir, timeout=180, alive=alive
            )
            assert found == wanted  # history rows == distinct rescales, each at its latest
            assert all(
                wanted[rescale] >= record["revision"] for rescale, record in expected.items()
            )

            commands, outcomes = command_ledger(codec, settings)
            assert {f"before-{j}" for j in jobs} | {f"after-{j}" for j in jobs} <= set(commands)
            deadline = give_up_at(120)
            while set(outcomes) != set(commands) and time.monotonic() < deadline:
                alive()
                time.sleep(1)
                commands, outcomes = command_ledger(codec, settings)
            assert set(outcomes) == set(commands)
            assert all(len(o) == 1 for o in outcomes.values()), "one outcome per command"
            # The outcomes follow the registrations they report on: read the log after them.
            registered = registrations(codec, read_topic(settings, topics.job_events))
            started = provisioned(outcomes)
            assert started, "commands were applied"
            assert {tm: registered.get(tm, 0) for tm in started} == dict.fromkeys(started, 1)
            assert stack.starts == {"scheduler": 1, "actuator": 1, "history": 1}
            alive()
        finally:
            stack.stop()
