"""The rescale records (FLIP-495): every trigger cause and terminated reason at Flink's
call sites, id epochs, spans, pre/post values, revisions, and the bounded history."""

from __future__ import annotations

import uuid

import pytest

from services.contracts import jobconfig as c
from services.contracts.events import JobEventKind
from services.scheduler.core.enums import StateName
from services.scheduler.core.timeline import NAMESPACE, derive_uuid, recent_ids
from tests.unit.scheduler.harness import SECOND, Scenario, outcome, outcomes, post, spans, vertex

S = StateName
QUICK = {c.SUBMISSION_STABILIZATION: "0 s"}


@pytest.mark.flink(
    "RescaleTimelineITCase.testRecordRescaleForInitialScheduling",
    "RescaleTimelineITCase.testRecordRescaleWithoutPreRescaleInfo",
    "RescaleTest.testSetDesiredSlots",
    "RescaleTest.testSetDesiredVertexParallelism",
    "RescaleTest.testSetMinimalRequiredSlots",
    "RescaleTest.testSetPostRescaleVertexParallelism",
    "RescaleTest.testSetPostRescaleSlots",
    "AdaptiveSchedulerTest.testRequestDefaultResourceRequirements",
    "CreatedTest.testStartScheduling",
)
def test_the_initial_schedule_is_a_completed_rescale_from_submission_to_running() -> None:
    job = Scenario(vertex("source", 2), vertex("sink", 2, ssg="sinks"))
    job.at(3 * SECOND).tm("tm-1", slots=4)
    record = job.record()
    assert outcome(record) == ("INITIAL_SCHEDULE", "COMPLETED", "SUCCEEDED")
    assert record["rescaleAttemptId"] == 1
    assert (record["startTimestampInMillis"], record["endTimestampInMillis"]) == (0, 3 * SECOND)
    assert spans(record) == [
        "Created",
        "WaitingForResources",
        "CreatingExecutionGraph",
        "Executing",
    ]
    assert [s["durationInMillis"] for s in record["schedulerStates"]] == [0, 3 * SECOND, 0, 0]
    assert post(record) == {"sink": 2, "source": 2}  # sorted by vertex id
    slots = {s["slotSharingGroupId"]: s for s in record["slots"]}
    assert (slots["default"]["desiredSlots"], slots["default"]["minimalRequiredSlots"]) == (2, 1)
    assert slots["sinks"]["postRescaleSlots"] == 2
    assert all(v["preRescaleParallelism"] is None for v in record["vertices"])


def test_a_rescale_in_progress_shows_its_current_state_as_an_open_span() -> None:
    job = Scenario(vertex("source", 2))
    record = job.record()
    assert record["terminalState"] is None and record["endTimestampInMillis"] is None
    assert record["schedulerStates"][-1] == {
        "state": "WaitingForResources",
        "enterTimestampInMillis": 0,
        "leaveTimestampInMillis": None,
        "durationInMillis": None,
        "stringifiedException": None,
    }
    assert record["statusMessage"]


def test_revisions_count_the_updates_of_one_rescale() -> None:
    job = Scenario(vertex("source", 2))
    job.at(1 * SECOND).tm("tm-1").at(2 * SECOND).tm("tm-2")
    revisions = [
        r["revision"] for r in job.revisions() if r["rescaleUuid"] == job.record(0)["rescaleUuid"]
    ]
    assert revisions == list(range(1, len(revisions) + 1))
    assert job.record(0)["updatedAtMillis"] == 2 * SECOND


@pytest.mark.flink(
    "RescaleTimelineITCase.testRecordRescaleForNewAvailableResource",
    "DefaultRescaleTimelineTest.testNewRescaleWithIdInfoGenerationLogic",
)
def test_new_resources_open_a_new_attempt_of_the_same_requirements() -> None:
    job = Scenario(vertex("source", 2), config=QUICK)
    job.at(1 * SECOND).tm("tm-1").at(5 * SECOND).tm("tm-2").at(31 * SECOND)
    first, second = job.records()
    assert outcome(second) == ("NEW_RESOURCE_AVAILABLE", "COMPLETED", "SUCCEEDED")
    assert second["resourceRequirementsUuid"] == first["resourceRequirementsUuid"]
    assert (first["rescaleAttemptId"], second["rescaleAttemptId"]) == (1, 2)
    assert second["rescaleUuid"] != first["rescaleUuid"]
    assert second["startTimestampInMillis"] == 5 * SECOND  # the change, not the restart
    assert [
        (v["preRescaleParallelism"], v["postRescaleParallelism"]) for v in second["vertices"]
    ] == [(1, 2)]
    assert spans(second) == ["Executing", "Restarting", "CreatingExecutionGraph", "Executing"]


def test_the_phases_before_the_restart_are_in_the_record() -> None:
    job = Scenario(vertex("source", 4), config=QUICK)
    job.at(1 * SECOND).tm("tm-1").at(5 * SECOND).tm("tm-2").at(65 * SECOND)
    phases = [
        (p["phase"], p["enterTimestampInMillis"], p["leaveTimestampInMillis"])
        for p in job.record()["transitionPhases"]
    ]
    assert phases == [
        ("Cooldown", 5 * SECOND, 31 * SECOND),
        ("Stabilizing", 31 * SECOND, 65 * SECOND),
        ("Stabilized", 65 * SECOND, 65 * SECOND),
        ("Transitioning", 65 * SECOND, 65 * SECOND),
    ]


@pytest.mark.flink(
    "RescaleTimelineITCase.testRecordRescaleForNewResourcesRequirements",
    "RescaleTimelineITCase.testRescaleTerminatedByResourceRequirementsUpdated",
    "DefaultRescaleTimelineTest.testNewRescaleWithIdInfoGenerationLogic",
)
def test_a_requirement_update_ends_the_rescale_in_progress_and_opens_a_new_epoch() -> None:
    job = Scenario(vertex("source", 4), config=QUICK)
    job.at(1 * SECOND).tm("tm-1").at(5 * SECOND).tm("tm-2")  # NEW_RESOURCE_AVAILABLE in cooldown
    job.at(10 * SECOND).require(source=(1, 2))
    initial, interrupted, update = job.records()
    assert outcome(interrupted) == (
        "NEW_RESOURCE_AVAILABLE",
        "IGNORED",
        "RESOURCE_REQUIREMENTS_UPDATED",
    )
    assert interrupted["endTimestampInMillis"] == 10 * SECOND
    assert spans(interrupted)[-1] == "Executing"
    assert outcome(update) == ("UPDATE_REQUIREMENT", None, None)
    assert update["resourceRequirementsUuid"] != initial["resourceRequirementsUuid"]
    assert update["rescaleAttemptId"] == 1
    job.at(31 * SECOND)
    assert outcome(job.record()) == ("UPDATE_REQUIREMENT", "COMPLETED", "SUCCEEDED")


@pytest.mark.flink(
    "RescaleTimelineITCase.testRescaleTerminatedByNoResourcesOrNoParallelismsChange",
    "DefaultStateTransitionManagerTest.testRevokedChangeInStabilizedPhase",
)
def test_idling_in_executing_ends_what_did_not_rescale() -> None:
    job = Scenario(vertex("source", 4), config=QUICK)
    job.at(1 * SECOND).tm("tm-1").at(5 * SECOND).tm("tm-2").at(10 * SECOND).lose("tm-2")
    job.at(65 * SECOND)  # Stabilized: the parallelism no longer changes -> Idling
    assert outcome(job.record()) == (
        "NEW_RESOURCE_AVAILABLE",
        "IGNORED",
        "NO_RESOURCES_OR_PARALLELISMS_CHANGE",
    )
    assert job.record()["endTimestampInMillis"] == 65 * SECOND
    assert job.state is S.EXECUTING


@pytest.mark.flink("DefaultStateTransitionManager.Idling")
def test_an_update_in_idling_that_changes_nothing_stays_in_progress() -> None:
    job = Scenario(vertex("source", 8), config=QUICK)
    job.at(1 * SECOND).tm("tm-1", slots=2).at(40 * SECOND).require(source=(1, 6))
    assert outcome(job.record()) == (
        "UPDATE_REQUIREMENT",
        None,
        None,
    )  # nothing closes it (reference §7)
    job.at(1000 * SECOND)
    assert job.record()["terminalState"] is None


@pytest.mark.flink(
    "RescaleTimelineITCase.testRecordNonTerminatedRescaleMergingWithNewRecoverableFailureTriggerCause"
)
def test_a_failover_merges_into_the_rescale_in_progress() -> None:
    job = Scenario(vertex("source", 4), config=QUICK, checkpoint_interval=10 * SECOND)
    job.at(1 * SECOND).tm("tm-1").at(5 * SECOND).tm("tm-2")
    opened = job.record()
    job.at(8 * SECOND).fail(exception="java.io.IOException: disk")
    merged = job.record()
    assert merged["rescaleUuid"] == opened["rescaleUuid"]
    assert merged["triggerCause"] == "RECOVERABLE_FAILOVER"
    assert merged["startTimestampInMillis"] == 8 * SECOND
    assert merged["schedulerStates"][0]["state"] == "Executing"
    # recordRescaleForJobRestarting writes no exception for a failover.
    assert merged["schedulerStates"][0]["stringifiedException"] is None


@pytest.mark.flink("RescaleTimelineITCase.testRecordRescaleForRecoverableFailover")
def test_a_failover_without_a_rescale_in_progress_opens_the_next_attempt() -> None:
    job = Scenario(vertex("source", 1), checkpoint_interval=10 * SECOND)
    job.at(1 * SECOND).tm("tm-1").at(5 * SECOND).fail()
    job.at(10 * SECOND)
    first, failover = job.records()
    assert outcome(failover) == ("RECOVERABLE_FAILOVER", "COMPLETED", "SUCCEEDED")
    assert failover["rescaleAttemptId"] == first["rescaleAttemptId"] + 1
    assert failover["resourceRequirementsUuid"] == first["resourceRequirementsUuid"]


@pytest.mark.flink(
    "RescaleTimelineITCase.testRescaleTerminatedByJobCancelled",
    "RescaleTimelineITCase.testRescaleTerminatedByJobFailed",
    "RescaleTimelineITCase.testRescaleTerminatedByJobFinished",
)
def test_job_canceled_failed_and_finished_end_the_rescale_in_progress() -> None:
    def with_open_rescale() -> Scenario:
        job = Scenario(vertex("source", 4), config=QUICK)
        return job.at(1 * SECOND).tm("tm-1").at(5 * SECOND).tm("tm-2")

    canceled = with_open_rescale().lifecycle(JobEventKind.CANCEL)
    assert outcome(canceled.record()) == ("NEW_RESOURCE_AVAILABLE", "IGNORED", "JOB_CANCELED")
    assert canceled.states_visited()[-2:] == [S.CANCELING, S.FINISHED]
    failed = with_open_rescale().fail(recoverable=False, exception="fatal")
    assert outcome(failed.record()) == ("NEW_RESOURCE_AVAILABLE", "IGNORED", "JOB_FAILED")
    assert failed.record()["schedulerStates"][-1]["stringifiedException"] == (
        "org.apache.flink.runtime.JobException: The failure is not recoverable\nCaused by: fatal"
    )
    finished = with_open_rescale().lifecycle(JobEventKind.FINISHED)
    assert outcome(finished.record()) == ("NEW_RESOURCE_AVAILABLE", "IGNORED", "JOB_FINISHED")


@pytest.mark.flink("AdaptiveScheduler.recordRescaleForJobRestarting")
def test_job_failover_restarting_is_never_set() -> None:
    job = Scenario(vertex("source", 4), checkpoint_interval=10 * SECOND)
    job.at(1 * SECOND).tm("tm-1").at(5 * SECOND).fail().at(20 * SECOND).fail().at(60 * SECOND)
    assert all(r["terminatedReason"] != "JOB_FAILOVER_RESTARTING" for r in job.revisions())


@pytest.mark.flink("RescaleTimeline.NoOpRescaleTimeline", "DefaultRescaleTimelineTest.testIsIdling")
def test_history_size_zero_records_nothing() -> None:
    job = Scenario(vertex("source", 2), config={c.HISTORY_SIZE: "0", **QUICK})
    job.at(1 * SECOND).tm("tm-1").at(5 * SECOND).tm("tm-2").at(31 * SECOND)
    assert job.state is S.EXECUTING and job.parallelism == {"source": 2}
    assert job.revisions() == []
    assert job.job is not None and recent_ids(job.job.timeline, job.job.job_id) == ()


@pytest.mark.flink("DefaultRescaleTimeline.newRescale")
def test_the_history_keeps_only_the_configured_number_of_rescales() -> None:
    job = Scenario(vertex("source", 2), config={c.HISTORY_SIZE: "2", c.COOLDOWN: "0 s", **QUICK})
    job.at(1 * SECOND).tm("tm-1", slots=2)
    for step in range(4):
        job.at((10 + 10 * step) * SECOND).require(source=(1, 1 + step % 2))
    assert job.job is not None
    recent = recent_ids(job.job.timeline, job.job.job_id)
    assert len(recent) == 2
    assert recent[-1] == job.record()["rescaleUuid"]
    assert recent[0] == derive_uuid(job.job.job_id, "rescale", job.job.timeline.created - 1)


def test_ids_are_derived_from_the_log_not_drawn() -> None:
    def run(job_id_suffix: str = "") -> list[str]:
        job = Scenario(vertex("source", 2), config=QUICK)
        job.at(1 * SECOND).tm("tm-1").at(5 * SECOND).tm("tm-2").at(31 * SECOND)
        return [r["rescaleUuid"] for r in job.records()]

    assert run() == run()
    assert len(set(run())) == 2


@pytest.mark.parametrize("job_id", ["job-1", "p", "zürich-7", ""])
@pytest.mark.parametrize("kind", ["rescale", "requirements"])
@pytest.mark.parametrize("number", [0, 1, 64, 2**40])
def test_derived_ids_are_uuid5_of_the_job_kind_and_number(
    job_id: str, kind: str, number: int
) -> None:
    expected = uuid.uuid5(NAMESPACE, f"{job_id}/{kind}/{number}")
    assert derive_uuid(job_id, kind, number) == str(expected)
    assert uuid.UUID(derive_uuid(job_id, kind, number)).version == 5


@pytest.mark.flink(
    "RescaleTimelineITCase.testRecordRescaleWithPreRescaleInfo",
    "RescaleTest.testSetPreRescaleSlotsAndParallelisms",
    "DefaultRescaleTimelineTest.testGetLatestRescale",
)
def test_pre_rescale_values_come_from_the_latest_completed_rescale() -> None:
    job = Scenario(vertex("source", 4), config={c.COOLDOWN: "0 s", **QUICK})
    job.at(1 * SECOND).tm("tm-1", slots=2)
    job.at(5 * SECOND).require(source=(1, 1)).at(6 * SECOND).require(source=(1, 2))
    pre_post = [
        (r["vertices"][0]["preRescaleParallelism"], r["vertices"][0]["postRescaleParallelism"])
        for r in job.records()
    ]
    assert pre_post == [(None, 2), (2, 1), (1, 2)]
    slot_pre = [r["slots"][0]["preRescaleSlots"] for r in job.records()]
    assert slot_pre == [None, 2, 1]


def test_settings_and_pool_size_travel_with_the_record() -> None:
    job = Scenario(vertex("source", 2), config={c.COOLDOWN: "45 s"})
    job.at(1 * SECOND).tm("tm-1", slots=3)
    record = job.record()
    assert record["availableSlots"] == 3
    assert record["schedulerSettings"][c.COOLDOWN] == "45000"
    assert record["reactiveMode"] is False
    assert outcomes(job.records()) == [("INITIAL_SCHEDULE", "COMPLETED", "SUCCEEDED")]
