"""Failures: restart strategies, lost TaskManagers, unrecoverable errors, stop-with-savepoint."""

from __future__ import annotations

import pytest

from services.contracts import jobconfig as c
from services.contracts.events import JobEventKind, TaskManagerLost
from services.scheduler.core.allocator import slot_ids
from services.scheduler.core.enums import DecisionKind, JobStatus, RequestKind, StateName
from tests.unit.scheduler.harness import JOB, SECOND, Scenario, vertex

S = StateName


def running(
    parallelism: int = 2, slots: int = 2, checkpoint: int | None = 10 * SECOND, **config: str
) -> Scenario:
    job = Scenario(vertex("source", parallelism), config=config, checkpoint_interval=checkpoint)
    job.at(1 * SECOND).tm("tm-1", slots=slots)
    assert job.state is S.EXECUTING
    return job


@pytest.mark.flink(
    "AdaptiveSchedulerTest.testHowToHandleFailureRejectedByStrategy",
    "ExecutingTest.testFailureReportedViaUpdateTaskExecutionStateCausesFailingOnNoRestart",
)
def test_without_checkpointing_the_default_strategy_does_not_restart() -> None:
    job = running(checkpoint=None).at(5 * SECOND).fail()
    assert job.states_visited()[-2:] == [S.FAILING, S.FINISHED]
    assert job.job is not None and job.job.state.job_status is JobStatus.FAILED
    assert "restart strategy none" in job.decisions(DecisionKind.RESTART_DECIDED)[-1].message


@pytest.mark.flink(
    "AdaptiveSchedulerTest.testHowToHandleFailureAllowedByStrategy",
    "ExecutingTest.testFailureReportedViaUpdateTaskExecutionStateCausesRestart",
)
def test_with_checkpointing_exponential_delay_restarts_after_a_growing_backoff() -> None:
    job = running()
    job.at(5 * SECOND).fail()
    assert job.state is S.RESTARTING
    first = job.job.state.backoff_ms if job.job else 0
    assert 900 <= first <= 1100  # 1 s initial backoff, 10% jitter
    job.at(20 * SECOND)
    assert job.state is S.EXECUTING
    job.fail()
    second = job.job.state.backoff_ms if job.job else 0
    assert 1350 <= second <= 1650  # x 1.5
    job.at(2 * 3600 * SECOND).fail()  # after the 1 h reset threshold: back to the initial backoff
    assert job.job is not None and 900 <= job.job.state.backoff_ms <= 1100


@pytest.mark.flink("RestartingTest.testTransitionToSubsequentStateWhenCancellationComplete")
def test_the_restart_waits_for_the_backoff() -> None:
    job = running(
        **{c.RESTART_STRATEGY: "fixed-delay", c.FIXED_DELAY: "3 s", c.FIXED_ATTEMPTS: "5"}
    )
    job.at(5 * SECOND).fail()
    job.at(7999)
    assert job.state is S.RESTARTING
    job.at(8 * SECOND)
    assert job.state is S.EXECUTING
    assert job.when_entered(S.CREATING_EXECUTION_GRAPH, -1) == 8 * SECOND


@pytest.mark.flink("FixedDelayRestartBackoffTimeStrategy.canRestart")
def test_fixed_delay_gives_up_after_its_attempts() -> None:
    job = running(
        **{c.RESTART_STRATEGY: "fixed-delay", c.FIXED_ATTEMPTS: "2", c.FIXED_DELAY: "0 s"}
    )
    for t in (5, 10):
        job.at(t * SECOND).fail()
        assert job.state is S.EXECUTING
    job.at(15 * SECOND).fail()
    assert job.state is S.FINISHED
    assert "fixed-delay attempt 3 of 2" in job.decisions(DecisionKind.RESTART_DECIDED)[-1].message


@pytest.mark.flink("FailureRateRestartBackoffTimeStrategy.canRestart")
def test_failure_rate_fails_when_too_many_failures_fall_into_the_interval() -> None:
    config = {
        c.RESTART_STRATEGY: "failure-rate",
        c.RATE_MAX_FAILURES: "2",
        c.RATE_INTERVAL: "1 min",
        c.RATE_DELAY: "0 s",
    }
    job = running(**config)
    job.at(5 * SECOND).fail().at(10 * SECOND).fail()
    assert job.state is S.EXECUTING
    job.at(100 * SECOND).fail()  # the first two left the window
    assert job.state is S.EXECUTING
    job.at(101 * SECOND).fail().at(102 * SECOND).fail()
    assert job.state is S.FINISHED


@pytest.mark.flink(
    "AdaptiveSchedulerTest.testHowToHandleFailureUnrecoverableFailure",
    "ExecutingTest.testUnrecoverableGlobalFailureTransitionsToFailingState",
)
def test_an_unrecoverable_failure_never_restarts() -> None:
    job = running().at(5 * SECOND).fail(recoverable=False, exception="SuppressRestartsException")
    assert job.states_visited()[-2:] == [S.FAILING, S.FINISHED]
    assert job.job is not None and job.job.state.cause == "SuppressRestartsException"


def test_losing_slots_in_use_is_a_task_failure() -> None:
    job = Scenario(vertex("source", 2), checkpoint_interval=10 * SECOND)
    job.at(1 * SECOND).tms("tm-1", "tm-2")  # desired with the second: running on both
    assert job.parallelism == {"source": 2}
    job.at(50 * SECOND).lose("tm-2", reason="heartbeat timeout")
    assert job.state is S.RESTARTING
    assert (
        "TaskManager tm-2 lost: heartbeat timeout"
        in job.decisions(DecisionKind.RESTART_DECIDED)[-1].details[0][1]
    )
    job.at(62 * SECOND)  # ~1 s backoff, then WaitingForResources stabilizes 10 s on one slot
    assert job.states_visited()[-4:] == [
        S.RESTARTING,
        S.WAITING_FOR_RESOURCES,
        S.CREATING_EXECUTION_GRAPH,
        S.EXECUTING,
    ]
    assert job.parallelism == {"source": 1}


def test_losing_idle_slots_only_shrinks_the_pool() -> None:
    job = running(parallelism=2, slots=2).at(2 * SECOND).tm("tm-2", slots=2)
    job.at(3 * SECOND).lose("tm-2")
    assert job.state is S.EXECUTING and not job.decisions(DecisionKind.RESTART_DECIDED)
    assert job.job is not None and sum(tm.slots for tm in job.job.task_managers) == 2


def lose_observed(job: Scenario, tm: str, hosted: bool) -> Scenario:
    """A loss as the Flink bridge sends it: whether the TaskManager held tasks, observed."""
    return job.fold(TaskManagerLost(JOB, job.now, tm, "stopped", None, hosted))


def test_a_loss_observed_idle_moves_the_assigned_tasks_to_the_free_slots_the_cluster_used() -> None:
    # the fold ran the job on tm-1's two slots; Flink's ResourceManager gave it tm-2's
    job = running(parallelism=2, slots=2).at(2 * SECOND).tm("tm-2", slots=2)
    lose_observed(job.at(3 * SECOND), "tm-1", hosted=False)
    assert job.state is S.EXECUTING and not job.decisions(DecisionKind.RESTART_DECIDED)
    assert job.job is not None and job.job.state.graph is not None
    assert slot_ids(job.job.state.graph.assignment) == {"tm-2#0", "tm-2#1"}
    lose_observed(job.at(4 * SECOND), "tm-2", hosted=True)  # now the tasks' own
    assert job.decisions(DecisionKind.RESTART_DECIDED)


def test_a_loss_observed_to_hold_tasks_fails_over_though_the_fold_left_it_idle() -> None:
    job = running(parallelism=2, slots=2).at(2 * SECOND).tm("tm-2", slots=2)
    lose_observed(job.at(3 * SECOND), "tm-2", hosted=True)
    assert job.decisions(DecisionKind.RESTART_DECIDED)


@pytest.mark.flink("RestartingTest.testTransitionToSubsequentStateWhenResourceChanged")
def test_restarting_without_the_needed_slots_waits_for_resources() -> None:
    job = running(parallelism=4, slots=4, **{c.WAIT_TIMEOUT: "-1 ms"})
    job.at(5 * SECOND).lose("tm-1")
    job.at(10 * SECOND)
    assert job.state is S.WAITING_FOR_RESOURCES
    job.at(20 * SECOND).tm("tm-2", slots=4)
    assert job.state is S.EXECUTING


@pytest.mark.flink("RestartingTest.testGlobalFailuresAreIgnored", "RestartingTest.testCancel")
def test_failures_while_restarting_or_canceling_are_ignored() -> None:
    job = running(
        **{c.RESTART_STRATEGY: "fixed-delay", c.FIXED_DELAY: "5 s", c.FIXED_ATTEMPTS: "9"}
    )
    job.at(5 * SECOND).fail().at(6 * SECOND).fail()
    assert job.state is S.RESTARTING
    assert job.decisions(DecisionKind.EVENT_IGNORED)[-1].message.startswith(
        "failure ignored in Restarting"
    )
    job.lifecycle(JobEventKind.CANCEL)
    assert job.state is S.FINISHED  # the graph was already stopped: Canceling ends at once
    assert job.job is not None and job.job.state.job_status is JobStatus.CANCELED


@pytest.mark.flink(
    "StopWithSavepointTest.testFinishedOnSuccessfulStopWithSavepoint",
    "ExecutingTest.testTransitionToStopWithSavepointState",
)
def test_stop_with_savepoint_finishes_the_job() -> None:
    job = running().at(5 * SECOND).lifecycle(JobEventKind.SAVEPOINT_REQUESTED)
    assert job.state is S.STOP_WITH_SAVEPOINT
    assert job.requests(RequestKind.STOP_WITH_SAVEPOINT)
    job.lifecycle(JobEventKind.SAVEPOINT_COMPLETED, savepoint_path="s3://sp/1")
    assert job.state is S.FINISHED
    assert job.job is not None and job.job.state.job_status is JobStatus.FINISHED


@pytest.mark.flink(
    "StopWithSavepointTest.testErrorCreatingSavepointLeadsToTransitionToExecutingState"
)
def test_a_failed_savepoint_resumes_executing_without_a_rescale_and_restarts_the_cooldown() -> None:
    job = running(parallelism=4, slots=1, checkpoint=None, **{c.SUBMISSION_STABILIZATION: "0 s"})
    records = len(job.records())
    job.at(20 * SECOND).lifecycle(JobEventKind.SAVEPOINT_REQUESTED)
    job.at(21 * SECOND).lifecycle(JobEventKind.SAVEPOINT_FAILED, exception="timeout")
    assert job.state is S.EXECUTING and job.when_entered(S.EXECUTING) == 21 * SECOND
    assert len(job.records()) == records
    job.at(22 * SECOND).tm("tm-2", slots=3)  # desired: must wait for the new cooldown (21 + 30 s)
    job.at(50_999)
    assert job.parallelism == {"source": 1}
    job.at(51 * SECOND)
    assert job.parallelism == {"source": 4}


@pytest.mark.flink(
    "StopWithSavepointTest.testRestartOnGlobalFailureIfRestartConfigured",
    "StopWithSavepointTest.testRestartingOnUpdateTaskExecutionStateWithRestart",
)
def test_a_failure_during_stop_with_savepoint_restarts() -> None:
    job = running().at(5 * SECOND).lifecycle(JobEventKind.SAVEPOINT_REQUESTED).fail()
    assert job.state is S.RESTARTING


@pytest.mark.flink(
    "ExecutingTest.testCancelTransitionsToCancellingState",
    "ExecutingTest.testTransitionToFinishedOnSuspend",
    "CancelingTest.testTransitionToFinishedWhenCancellationCompletes",
    "StateWithExecutionGraphTest.testSuspendToFinished",
    "AdaptiveSchedulerTest.testGoToFinished",
)
def test_cancel_and_suspend_a_running_job() -> None:
    canceled = running().at(5 * SECOND).lifecycle(JobEventKind.CANCEL)
    assert canceled.states_visited()[-2:] == [S.CANCELING, S.FINISHED]
    suspended = running().at(5 * SECOND).lifecycle(JobEventKind.SUSPEND)
    assert suspended.job is not None and suspended.job.state.job_status is JobStatus.SUSPENDED
    finished = running().at(5 * SECOND).lifecycle(JobEventKind.FINISHED)
    assert finished.job is not None and finished.job.state.job_status is JobStatus.FINISHED


@pytest.mark.flink(
    "FinishedTest.testCancelIgnored",
    "FinishedTest.testSuspendIgnored",
    "FinishedTest.testGlobalFailureIgnored",
)
def test_a_finished_job_ignores_everything() -> None:
    job = running().at(5 * SECOND).lifecycle(JobEventKind.CANCEL)
    before = len(job.effects)
    job.tm("tm-9").fail().require(source=(1, 1)).lifecycle(JobEventKind.CANCEL)
    assert all(d.kind is DecisionKind.EVENT_IGNORED for d in job.decisions()[-4:])
    assert len(job.effects) == before + 4
