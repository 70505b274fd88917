"""Flink's per-state tests that the other files do not cover yet, one scenario each.

Each test names the Flink test it follows (docs/flink-conformance.md counts them).
"""

from __future__ import annotations

import pytest

from services.contracts import jobconfig as c
from services.contracts.events import JobEventKind as K
from services.contracts.events import Profile, TaskManagerRegistered
from services.scheduler.core.enums import DecisionKind, JobStatus, Phase, RequestKind, StateName
from tests.unit.scheduler.harness import JOB, SECOND, Scenario, vertex

S = StateName
flink = pytest.mark.flink
QUICK_START = {c.SUBMISSION_STABILIZATION: "0 s"}
RESTARTS = {c.RESTART_STRATEGY: "fixed-delay", c.FIXED_ATTEMPTS: "9", c.FIXED_DELAY: "5 s"}


def running(parallelism: int = 2, slots: int = 2, **config: str) -> Scenario:
    job = Scenario(vertex("source", parallelism), config={**QUICK_START, **config})
    job.at(1 * SECOND).tm("tm-1", slots=slots)
    assert job.state is S.EXECUTING
    return job


def status(job: Scenario) -> JobStatus | None:
    assert job.job is not None
    return job.job.state.job_status


# -- the states that stop a graph ----------------------------------------------------------


@flink(
    "RestartingTest.testSuspendWithJobInCancellingState",
    "RestartingTest.testSuspendWithJobInCancelledState",
    "StateWithExecutionGraphTest.testSuspendCanBeCalledWhenExecutionGraphHasReachedGloballyTerminalState",
)
@pytest.mark.parametrize("cancelled", [False, True])
def test_suspend_while_restarting_finishes_suspended(cancelled: bool) -> None:
    job = running(**{**RESTARTS, c.SIMULATED_CANCEL_TIME: "2 s"}).at(5 * SECOND).fail()
    job.at(8 * SECOND if cancelled else 6 * SECOND).lifecycle(K.SUSPEND)
    assert job.state is S.FINISHED and status(job) is JobStatus.SUSPENDED


@flink(
    "CancelingTest.testTransitionToSuspend",
    "CancelingTest.testCancelIsIgnored",
    "CancelingTest.testGlobalFailuresAreIgnored",
    "CancelingTest.testTaskFailuresAreIgnored",
)
def test_canceling_ignores_cancel_and_failures_and_can_be_suspended() -> None:
    job = running(**{c.SIMULATED_CANCEL_TIME: "5 s"}).at(2 * SECOND).lifecycle(K.CANCEL)
    job.lifecycle(K.CANCEL).fail().lifecycle(K.GLOBAL_FAILURE)
    assert job.state is S.CANCELING
    assert [d.message.split(" in ")[0] for d in job.decisions(DecisionKind.EVENT_IGNORED)] == [
        "cancel ignored",
        "failure ignored",
        "failure ignored",
    ]
    job.lifecycle(K.SUSPEND)
    assert job.state is S.FINISHED and status(job) is JobStatus.SUSPENDED


@flink(
    "FailingTest.testTransitionToFinishedOnSuspend",
    "FailingTest.testIgnoreGlobalFailure",
    "FailingTest.testTaskFailuresAreIgnored",
)
def test_failing_ignores_failures_and_can_be_suspended() -> None:
    job = running(**{c.SIMULATED_CANCEL_TIME: "5 s"}).at(2 * SECOND).fail(recoverable=False)
    job.fail().lifecycle(K.GLOBAL_FAILURE)
    assert job.state is S.FAILING and len(job.decisions(DecisionKind.EVENT_IGNORED)) == 2
    job.lifecycle(K.SUSPEND)
    assert job.state is S.FINISHED and status(job) is JobStatus.SUSPENDED


# -- StopWithSavepoint ---------------------------------------------------------------------


@flink(
    "StopWithSavepointTest.testTransitionToCancellingOnCancel",
    "StopWithSavepointTest.testTransitionToFinishedOnSuspend",
)
def test_stop_with_savepoint_can_be_cancelled_or_suspended() -> None:
    canceled = running().at(2 * SECOND).lifecycle(K.SAVEPOINT_REQUESTED).lifecycle(K.CANCEL)
    assert canceled.states_visited()[-2:] == [S.CANCELING, S.FINISHED]
    suspended = running().at(2 * SECOND).lifecycle(K.SAVEPOINT_REQUESTED).lifecycle(K.SUSPEND)
    assert status(suspended) is JobStatus.SUSPENDED


@flink(
    "StopWithSavepointTest.testFailingOnUpdateTaskExecutionStateWithNoRestart",
    "StopWithSavepointTest.testFailingOnGlobalFailureIfNoRestartConfigured",
)
def test_a_failure_during_stop_with_savepoint_without_restarts_fails_the_job() -> None:
    job = running().at(2 * SECOND).lifecycle(K.SAVEPOINT_REQUESTED).fail()
    assert job.states_visited()[-2:] == [S.FAILING, S.FINISHED]
    assert status(job) is JobStatus.FAILED


@flink(
    "StopWithSavepointTest.testRestartOnTaskFailureAfterSavepointCompletion",
    "StopWithSavepointTest.testConcurrentSavepointFailureAndGloballyTerminalStateCauseRestart",
)
def test_a_failure_after_the_savepoint_completed_restarts() -> None:
    job = Scenario(
        vertex("source", 2),
        config={**QUICK_START, **RESTARTS, c.RUNTIME_MODE: "external"},
        checkpoint_interval=10 * SECOND,
    )
    job.at(1 * SECOND).tm("tm-1", slots=2).lifecycle(K.EXECUTION_GRAPH_CREATED)
    job.at(2 * SECOND).lifecycle(K.SAVEPOINT_REQUESTED)
    job.lifecycle(K.SAVEPOINT_COMPLETED, savepoint_path="/sp").lifecycle(K.EXECUTION_GRAPH_FAILED)
    assert job.state is S.RESTARTING


# -- Executing -----------------------------------------------------------------------------


@flink("ExecutingTest.testOnCompletedCheckpointResetsFailedCheckpointCount")
def test_a_completed_checkpoint_resets_the_failed_checkpoint_count() -> None:
    job = Scenario(
        vertex("source", 4),
        config={**QUICK_START, c.MAX_CHECKPOINT_FAILURES: "3", c.EXECUTING_STABILIZATION: "0 s"},
        checkpoint_interval=100 * SECOND,
    )
    job.at(1 * SECOND).tm("tm-1").at(2 * SECOND).checkpoint_failed()  # before a change: ignored
    job.at(31 * SECOND).tm("tm-2")  # Idling -> Stabilizing -> Stabilized (stabilization 0)
    assert job.phase is Phase.STABILIZED
    job.checkpoint_failed().checkpoint_failed()
    assert job.state is S.EXECUTING  # two of three
    job.checkpoint()  # triggers, and the count starts again with the next change
    assert job.when_entered(S.RESTARTING) == 31 * SECOND
    assert job.job is not None and job.job.state.checkpoint_countdown is None


@flink("ExecutingTest.testRecoverableGlobalFailureTransitionsToRestarting")
def test_a_recoverable_global_failure_restarts() -> None:
    job = running(**RESTARTS).at(2 * SECOND).lifecycle(K.GLOBAL_FAILURE, exception="boom")
    assert job.state is S.RESTARTING
    assert job.record()["triggerCause"] == "RECOVERABLE_FAILOVER"


@flink("ExecutingTest.testExecutingChecksForNewResourcesWhenBeingCreated")
def test_slots_that_arrived_while_creating_are_checked_when_executing_starts() -> None:
    job = Scenario(vertex("source", 4), config={**QUICK_START, c.RUNTIME_MODE: "external"})
    job.at(1 * SECOND).tm("tm-1")
    assert job.state is S.CREATING_EXECUTION_GRAPH
    job.tm("tm-2")  # CreatingExecutionGraph does not react
    job.lifecycle(K.EXECUTION_GRAPH_CREATED)
    first = [d for d in job.decisions() if d.state == S.EXECUTING][:3]
    assert [d.kind for d in first] == [
        DecisionKind.STATE_TRANSITION,
        DecisionKind.CHANGE_RECORDED,  # onChange at entry: the second slot is seen
        DecisionKind.TRIGGER_IGNORED,  # then onTrigger (in cooldown)
    ]
    assert job.record()["triggerCause"] == "NEW_RESOURCE_AVAILABLE"


@flink(
    "DefaultStateTransitionManagerTest.testDesiredResourcesInStabilizingPhaseAfterMaxTriggerDelay"
)
def test_desired_resources_in_stabilizing_go_at_the_max_trigger_delay() -> None:
    job = Scenario(
        vertex("source", 3),
        config={**QUICK_START, c.ACTIVE_CHECKPOINT: "false"},
        checkpoint_interval=10 * SECOND,  # max trigger delay 30 s
    )
    job.at(1 * SECOND).tm("tm-1").at(40 * SECOND).tm("tm-2")  # sufficient: Stabilizing
    job.at(50 * SECOND).tm("tm-3")  # desired, but no trigger yet
    job.at(69_999)
    assert job.state is S.EXECUTING and job.phase is Phase.STABILIZING
    job.at(70 * SECOND)  # the evaluation pending since 40 s, at 40 s + 30 s
    assert job.when_entered(S.RESTARTING) == 70 * SECOND


@flink(
    "DefaultStateTransitionManagerTest.testSufficientResourcesInStabilizingPhaseAfterMaxTriggerDelay"
)
def test_sufficient_resources_in_stabilizing_wait_for_stabilized() -> None:
    job = Scenario(
        vertex("source", 3),
        config={**QUICK_START, c.ACTIVE_CHECKPOINT: "false"},
        checkpoint_interval=10 * SECOND,
    )
    job.at(1 * SECOND).tm("tm-1").at(40 * SECOND).tm("tm-2")
    job.at(70 * SECOND)  # the evaluation ran: only sufficient
    assert job.state is S.EXECUTING and job.phase is Phase.STABILIZING
    assert "desired resources not met" in job.decisions(DecisionKind.TRIGGER_IGNORED)[-1].message


@flink("DefaultStateTransitionManagerTest.testDesiredChangeInStabilizedPhase")
def test_a_desired_change_in_stabilized_waits_for_the_trigger() -> None:
    job = Scenario(
        vertex("source", 3),
        config={**QUICK_START, c.ACTIVE_CHECKPOINT: "false"},
        checkpoint_interval=100 * SECOND,  # max trigger delay 300 s
    )
    job.at(1 * SECOND).tm("tm-1").at(40 * SECOND).tm("tm-2").at(100 * SECOND)
    assert job.phase is Phase.STABILIZED
    job.tm("tm-3")
    assert (
        job.state is S.EXECUTING
        and "change ignored in Stabilized" in job.decisions(DecisionKind.CHANGE_IGNORED)[-1].message
    )
    job.at(101 * SECOND).checkpoint()
    assert job.when_entered(S.RESTARTING) == 101 * SECOND and job.parallelism == {"source": 3}


# -- the scheduler ---------------------------------------------------------------------------


@flink(
    "AdaptiveSchedulerTest.testInitialState",
    "AdaptiveSchedulerTest.testStartSchedulingTransitionsToWaitingForResources",
    "AdaptiveSchedulerTest.testStartSchedulingSetsResourceRequirementsForDefaultMode",
    "CreatedTest.testStartScheduling",
)
def test_submission_creates_the_job_and_starts_scheduling() -> None:
    job = Scenario(vertex("source", 3), vertex("sink", 2, ssg="sinks"))
    assert [d.message.split(" (")[0] for d in job.decisions(DecisionKind.STATE_TRANSITION)] == [
        "job submitted",
        "Created -> WaitingForResources: scheduling started",
    ]
    (declared,) = job.requests(RequestKind.DECLARE_RESOURCES)
    assert dict(declared.details)["desired_slots"] == "5"  # 3 + 2, one per group


@flink(
    "AdaptiveSchedulerTest.testNumRescalesAndStartsMetricForRescale",
    "AdaptiveSchedulerTest.testNumRescalesAndStartsMetricForFailureRecovery",
)
def test_restarts_count_every_restart_and_rescales_only_rescales() -> None:
    job = running(parallelism=2, slots=1, **RESTARTS).at(5 * SECOND).tm("tm-2").at(31 * SECOND)
    assert job.job is not None and (job.job.num_restarts, job.job.num_rescales) == (1, 1)
    job.at(40 * SECOND).fail().at(50 * SECOND)
    assert job.job is not None and (job.job.num_restarts, job.job.num_rescales) == (2, 1)


@flink("AdaptiveSchedulerTest.testConsistentMaxParallelism")
def test_max_parallelism_stays_what_submission_computed() -> None:
    job = running(parallelism=240, slots=1)
    assert job.job is not None and job.job.info.vertices[0].max_parallelism == 512
    job.tm("tm-2", slots=239).at(100 * SECOND)
    assert job.parallelism == {"source": 240}
    assert job.job is not None and job.job.info.vertices[0].max_parallelism == 512


@flink("AdaptiveSchedulerTest.testRequirementIncreaseTriggersScaleUp")
def test_a_higher_upper_bound_with_new_slots_scales_up() -> None:
    job = running(parallelism=2, slots=2).at(40 * SECOND).require(source=(1, 4))
    job.tm("tm-2", slots=2)
    assert job.when_entered(S.RESTARTING) == 40 * SECOND and job.parallelism == {"source": 4}


@flink(
    "AdaptiveSchedulerTest.testRequirementLowerBoundDecreaseAfterResourceScarcityBelowAvailableSlots"
)
def test_a_lower_bound_lowered_to_the_slots_lets_a_waiting_job_run() -> None:
    job = Scenario(vertex("source", 4), config={c.WAIT_TIMEOUT: "-1 ms"})
    job.require(source=(4, 4)).at(1 * SECOND).tm("tm-1")
    job.at(100 * SECOND)
    assert job.state is S.WAITING_FOR_RESOURCES  # 1 slot, 4 needed
    job.require(source=(1, 4)).at(110 * SECOND)
    assert job.state is S.EXECUTING and job.parallelism == {"source": 1}


@flink(
    "AdaptiveSchedulerTest.testInitialRequirementLowerBoundBeyondAvailableSlotsCausesImmediateFailure"
)
def test_a_lower_bound_beyond_the_slots_fails_the_job_at_the_wait_timeout() -> None:
    job = Scenario(vertex("source", 4), config={c.WAIT_TIMEOUT: "1 ms"})
    job.require(source=(4, 4)).tm("tm-1").at(1)
    assert job.state is S.FINISHED and status(job) is JobStatus.FAILED


@flink("AdaptiveSchedulerTest.testHasEnoughResourcesUsesUnmatchedSlotsAsUnknown")
def test_slots_with_a_profile_count_towards_the_desired_resources() -> None:
    job = Scenario(vertex("source", 2))
    profile = Profile(1.0, 512, 0, 256, 64)
    job.fold(TaskManagerRegistered(JOB, 1 * SECOND, "tm-1", 2, profile))
    assert job.when_entered(S.EXECUTING) == 1 * SECOND  # desired at once, no stabilization
    assert job.record()["slots"][0]["acquiredResourceProfile"]["cpuCores"] == 1.0


@flink(
    "AdaptiveSchedulerTest.testTriggerSavepointFailsInIllegalState",
    "AdaptiveSchedulerTest.testStopWithSavepointFailsInIllegalState",
)
def test_a_savepoint_request_outside_executing_is_ignored() -> None:
    job = Scenario(vertex("source", 2)).lifecycle(K.SAVEPOINT_REQUESTED)
    assert job.state is S.WAITING_FOR_RESOURCES
    assert "SAVEPOINT_REQUESTED ignored" in job.decisions(DecisionKind.EVENT_IGNORED)[-1].message
