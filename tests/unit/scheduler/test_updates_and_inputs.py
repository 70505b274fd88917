"""Configuration updates at runtime (scalefold), and inputs the scheduler refuses."""

from __future__ import annotations

import pytest

from services.contracts import Codec
from services.contracts import jobconfig as c
from services.contracts import records as r
from services.contracts.events import JobSubmitted, from_record
from services.scheduler.core import handle
from services.scheduler.core.effects import Rejected
from services.scheduler.core.enums import DecisionKind, RejectionKind, StateName
from tests.unit.scheduler.harness import JOB, SECOND, Scenario, vertex

S = StateName


def test_a_longer_cooldown_applies_from_the_next_executing() -> None:
    job = Scenario(vertex("source", 2), config={c.SUBMISSION_STABILIZATION: "0 s"})
    job.at(1 * SECOND).tm("tm-1").configure(**{c.COOLDOWN: "2 min"})
    assert job.decisions(DecisionKind.CONFIGURATION_UPDATED)
    job.at(5 * SECOND).tm("tm-2").at(31 * SECOND)  # this Executing still has the old 30 s
    assert job.when_entered(S.RESTARTING) == 31 * SECOND
    assert job.record()["schedulerSettings"][c.COOLDOWN] == "120000"
    job.require(source=(1, 1))
    job.at(150 * SECOND)
    assert job.parallelism == {"source": 2}
    job.at(151 * SECOND)  # 31 s + 2 min
    assert job.parallelism == {"source": 1}


def test_invalid_configuration_updates_are_refused() -> None:
    job = Scenario(vertex("source", 2))
    job.configure(**{c.COOLDOWN: "whenever"}).configure(**{c.SCHEDULER_MODE: "REACTIVE"})
    messages = [rejection.message for rejection in job.rejections()]
    assert (
        "configuration rejected" in messages[0]
        and "cannot change while the job runs" in messages[1]
    )
    assert all(rejection.kind is RejectionKind.INVALID_EVENT for rejection in job.rejections())


def test_a_taskmanager_without_slots_is_refused_and_a_repeated_one_ignored() -> None:
    job = Scenario(vertex("source", 2)).tm("tm-0", slots=0)
    assert "offers 0 slots" in job.rejections()[0].message
    job.tm("tm-1").tm("tm-1")
    assert "already registered" in job.decisions(DecisionKind.EVENT_IGNORED)[-1].message
    job.lose("tm-9")
    assert "not registered" in job.decisions(DecisionKind.EVENT_IGNORED)[-1].message
    assert job.job is not None and sum(tm.slots for tm in job.job.task_managers) == 1


def test_a_second_submission_and_a_bad_configuration_are_refused() -> None:
    job = Scenario(vertex("source", 2))
    step = handle(job.job, JobSubmitted(JOB, 5, "again", (vertex("source"),), None, ()))
    assert step.job is job.job
    assert isinstance(step.effects[0], Rejected) and "already submitted" in step.effects[0].message
    bad = JobSubmitted("x", 0, "x", (vertex("source"),), None, ((c.COOLDOWN, "eventually"),))
    refused = handle(None, bad)
    assert refused.job is None and "is not a duration" in refused.effects[0].message  # type: ignore[union-attr]


def test_every_input_record_converts_to_an_event(codec: Codec) -> None:
    import json
    from pathlib import Path

    golden = Path(__file__).resolve().parents[2] / "contract" / "golden"
    for name in sorted(r.INPUT_EVENTS):
        stem = {
            r.TASK_MANAGER_REGISTERED: "task_manager_registered",
            r.TASK_MANAGER_LOST: "task_manager_lost",
            r.JOB_SUBMITTED: "job_submitted",
            r.JOB_LIFECYCLE_EVENT: "job_lifecycle_event",
            r.RESOURCE_REQUIREMENTS_UPDATED: "resource_requirements_updated",
            r.JOB_CONFIGURATION_UPDATED: "job_configuration_updated",
            r.TIMER_FIRED: "timer_fired",
        }[name]
        data = bytes.fromhex(json.loads((golden / f"{stem}.v1.json").read_text())["hex"])
        decoded = codec.decode(data)
        event = from_record(decoded.schema, decoded.record)
        assert event.job_id == decoded.record["jobId"]
        assert event.timestamp == decoded.record["timestamp"]


@pytest.mark.flink(
    "FailingTest.testTransitionToFailedWhenFailingCompletes",
    "CancelingTest.testTransitionToFinishedWhenCancellationCompletes",
)
def test_failing_and_canceling_finish_on_their_own_in_simulated_mode() -> None:
    job = Scenario(vertex("source", 1), config={c.SIMULATED_CANCEL_TIME: "2 s"})
    job.at(1 * SECOND).tm("tm-1").fail(recoverable=False)
    assert job.state is S.FAILING
    job.at(3 * SECOND)
    assert job.state is S.FINISHED
