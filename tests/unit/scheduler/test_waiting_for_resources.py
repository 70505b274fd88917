"""WaitingForResources: its transition manager (cooldown 0, submission stabilization,
max delay 0), the resource wait timeout, and what it does with cancel and failures."""

from __future__ import annotations

import pytest

from services.contracts import jobconfig as c
from services.contracts.events import JobEventKind
from services.scheduler.core.enums import DecisionKind, JobStatus, Phase, StateName
from tests.unit.scheduler.harness import SECOND, Scenario, outcome, spans, vertex

S = StateName


@pytest.mark.flink(
    "WaitingForResourcesTest.testTransitionToCreatingExecutionGraph",
    "WaitingForResourcesTest.testNotifyNewResourcesAvailable",
    "DefaultStateTransitionManagerTest.testDesiredChangeInIdlingPhase",
    "AdaptiveSchedulerTest.testHasEnoughResourcesReturnsTrueIfSatisfied",
    "AdaptiveSchedulerTest.testResourceAcquisitionTriggersJobExecution",
)
def test_desired_resources_go_at_once() -> None:
    job = Scenario(vertex("source", 2), vertex("sink", 2))
    job.at(1 * SECOND).tm("tm-1", slots=2)
    assert job.state is S.EXECUTING
    assert job.when_entered(S.CREATING_EXECUTION_GRAPH) == 1 * SECOND
    assert job.parallelism == {"source": 2, "sink": 2}


@pytest.mark.flink(
    "WaitingForResourcesTest.testSchedulingWithSufficientResources",
    "DefaultStateTransitionManagerTest.testSufficientChangeInIdlingPhase",
    "AdaptiveSchedulerTest.testHasEnoughResourcesReturnsFalseIfUnsatisfied",
    "AdaptiveSchedulerTest.testExecutionGraphGenerationWithAvailableResources",
    "AdaptiveSchedulerTest.testGoToWaitingForResourcesConfiguresStateTransitionManagerFactory",
)
def test_sufficient_resources_go_after_the_submission_stabilization() -> None:
    job = Scenario(vertex("source", 4), vertex("sink", 4))
    job.at(1 * SECOND).tm("tm-1")
    assert job.phase is Phase.STABILIZING
    job.at(10_999)
    assert job.state is S.WAITING_FOR_RESOURCES
    job.at(11 * SECOND)
    assert job.state is S.EXECUTING
    assert job.when_entered(S.CREATING_EXECUTION_GRAPH) == 11 * SECOND
    assert job.parallelism == {"source": 1, "sink": 1}


@pytest.mark.flink("DefaultStateTransitionManager.Stabilizing")
def test_the_stabilization_window_is_not_extended_by_later_changes() -> None:
    job = Scenario(vertex("source", 4))
    job.at(1 * SECOND).tm("tm-1").at(5 * SECOND).tm("tm-2").at(9 * SECOND).tm("tm-3")
    job.at(11 * SECOND)
    assert job.when_entered(S.CREATING_EXECUTION_GRAPH) == 11 * SECOND
    assert job.parallelism == {"source": 3}


@pytest.mark.flink(
    "DefaultStateTransitionManagerTest.testRevokedChangeInStabilizedPhase",
    "DefaultStateTransitionManagerTest.testRevokedChangeInStabilizingPhaseWithSubsequentSufficientChangeInStabilizedPhase",
)
def test_stabilized_falls_back_to_idling_when_resources_went_away() -> None:
    job = Scenario(vertex("source", 4))
    job.at(1 * SECOND).tm("tm-1").at(5 * SECOND).lose("tm-1")
    job.at(11 * SECOND)
    assert (job.state, job.phase) == (S.WAITING_FOR_RESOURCES, Phase.IDLING)
    job.at(20 * SECOND).tm("tm-2")
    assert job.phase is Phase.STABILIZING
    job.at(30 * SECOND)
    assert job.state is S.EXECUTING


@pytest.mark.flink("AdaptiveScheduler.Settings.of")
def test_reactive_mode_goes_as_soon_as_the_minimum_is_met() -> None:
    job = Scenario(vertex("source", 4), config={c.SCHEDULER_MODE: "REACTIVE"})
    job.at(1 * SECOND).tm("tm-1")
    assert job.state is S.EXECUTING
    assert job.parallelism == {"source": 1}


@pytest.mark.flink(
    "WaitingForResourcesTest.testStateTransitionOnResourceTimeout",
    "AdaptiveSchedulerTest.testResourceTimeout",
    "CreatingExecutionGraphTest.testFailedExecutionGraphCreationTransitionsToFinished",
    "RescaleTimelineITCase.testRescaleTerminatedByResourcesNotEnoughException",
)
def test_the_wait_timeout_goes_on_without_resources_and_fails_the_job() -> None:
    job = Scenario(vertex("source", 4), config={c.WAIT_TIMEOUT: "5 s"})
    job.at(5 * SECOND)
    assert job.state is S.FINISHED
    assert job.job is not None and job.job.state.job_status is JobStatus.FAILED
    record = job.record()
    assert outcome(record) == ("INITIAL_SCHEDULE", "FAILED", "EXCEPTION_OCCURRED")
    assert spans(record) == ["Created", "WaitingForResources"]  # no span after terminating
    finished = job.decisions(DecisionKind.STATE_TRANSITION)[-1]
    assert finished.job_status is JobStatus.FAILED
    assert "NoResourceAvailableException: Not enough resources" in finished.message


@pytest.mark.flink("WaitingForResourcesTest.testStateTransitionOnResourceTimeout")
def test_the_wait_timeout_ignores_the_stabilization_with_sufficient_resources() -> None:
    job = Scenario(vertex("source", 4), config={c.WAIT_TIMEOUT: "3 s"})
    job.at(1 * SECOND).tm("tm-1").at(3 * SECOND)
    assert job.state is S.EXECUTING
    assert job.when_entered(S.EXECUTING) == 3 * SECOND


@pytest.mark.flink(
    "WaitingForResourcesTest.testNotEnoughResources",
    "WaitingForResourcesTest.testNoStateTransitionOnNoResourceTimeout",
)
def test_a_negative_wait_timeout_waits_forever() -> None:
    job = Scenario(vertex("source", 4), config={c.SCHEDULER_MODE: "REACTIVE"})
    job.at(24 * 3600 * SECOND)
    assert job.state is S.WAITING_FOR_RESOURCES
    assert job.job is not None and not job.job.timers


@pytest.mark.flink("StateWithoutExecutionGraphTest.testCancelTransitionsToFinished")
def test_cancel_finishes_at_once_and_the_rescale_ends_job_finished() -> None:
    job = Scenario(vertex("source", 4))
    job.at(2 * SECOND).lifecycle(JobEventKind.CANCEL)
    assert job.state is S.FINISHED
    assert job.job is not None and job.job.state.job_status is JobStatus.CANCELED
    assert outcome(job.record()) == ("INITIAL_SCHEDULE", "IGNORED", "JOB_FINISHED")


@pytest.mark.flink(
    "StateWithoutExecutionGraphTest.testSuspendTransitionsToFinished",
    "StateWithoutExecutionGraphTest.testTransitionToFinishedOnGlobalFailure",
)
def test_suspend_and_global_failure_finish_the_job() -> None:
    suspended = Scenario(vertex("source")).lifecycle(JobEventKind.SUSPEND)
    assert suspended.job is not None and suspended.job.state.job_status is JobStatus.SUSPENDED
    failed = Scenario(vertex("source")).lifecycle(JobEventKind.GLOBAL_FAILURE, exception="oom")
    assert failed.job is not None and failed.job.state.job_status is JobStatus.FAILED
    assert failed.job.state.cause == "oom"


def test_a_task_failure_has_nothing_to_fail_yet() -> None:
    job = Scenario(vertex("source")).fail()
    assert job.state is S.WAITING_FOR_RESOURCES
    assert job.decisions(DecisionKind.EVENT_IGNORED)


def test_every_change_says_why_it_did_not_go() -> None:
    job = Scenario(vertex("source", 4))
    job.at(1 * SECOND).tm("tm-1")
    messages = [d.message for d in job.decisions(DecisionKind.TRIGGER_IGNORED)]
    assert any("desired resources not met" in m and "1 of 4" in m for m in messages)
    ignored = [d.message for d in job.decisions(DecisionKind.CHANGE_IGNORED)]
    assert any("insufficient resources: 1 slots needed, 0 available" in m for m in ignored)
