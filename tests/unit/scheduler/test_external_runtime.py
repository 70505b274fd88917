"""With `scalefold.runtime.mode: external`, a runtime reports on the graphs it was asked for."""

from __future__ import annotations

import pytest

from services.contracts import jobconfig as c
from services.contracts.events import JobEventKind as K
from services.scheduler.core.enums import DecisionKind, JobStatus, RequestKind, StateName
from tests.unit.scheduler.harness import SECOND, Scenario, outcome, spans, vertex

S = StateName
EXTERNAL = {c.RUNTIME_MODE: "external"}


def created() -> Scenario:
    job = Scenario(vertex("source", 2), config=EXTERNAL)
    job.at(1 * SECOND).tm("tm-1", slots=2)
    assert job.state is S.CREATING_EXECUTION_GRAPH
    (request,) = job.requests(RequestKind.CREATE_EXECUTION_GRAPH)
    assert request.execution_graph_id == "eg-1"
    assert dict(request.details)["slots"] == "tm-1#0 tm-1#1"
    return job


@pytest.mark.flink(
    "CreatingExecutionGraphTest.testSuccessfulSlotAssignmentTransitionsToExecuting",
    "ExecutingTest.testExecutionGraphDeploymentOnEnter",
)
def test_creating_waits_for_the_runtime_to_report_the_graph() -> None:
    job = created().at(2 * SECOND).lifecycle(K.EXECUTION_GRAPH_CREATED, execution_graph_id="eg-1")
    assert job.state is S.EXECUTING
    assert job.requests(RequestKind.DEPLOY)[-1].execution_graph_id == "eg-1"


def test_a_report_about_another_graph_is_ignored() -> None:
    job = created().lifecycle(K.EXECUTION_GRAPH_CREATED, execution_graph_id="eg-0")
    assert job.state is S.CREATING_EXECUTION_GRAPH
    assert (
        "is about eg-0, the current graph is eg-1"
        in job.decisions(DecisionKind.EVENT_IGNORED)[-1].message
    )


@pytest.mark.flink(
    "CreatingExecutionGraphTest.testNotPossibleSlotAssignmentTransitionsToWaitingForResources",
    "AdaptiveSchedulerTest.testTryToAssignSlotsReturnsNotPossibleIfExpectedResourcesAreNotAvailable",
    "SlotSharingSlotAllocatorTest.testReserveUnavailableResources",
)
def test_slots_lost_while_creating_send_the_job_back_to_waiting() -> None:
    job = created().lose("tm-1").lifecycle(K.EXECUTION_GRAPH_CREATED)
    assert job.state is S.WAITING_FOR_RESOURCES


@pytest.mark.flink(
    "CreatingExecutionGraphTest.testFailedExecutionGraphCreationTransitionsToFinished",
    "CreatingExecutionGraph.recordRescaleForException",
)
def test_a_failed_creation_fails_the_job_with_the_exception() -> None:
    job = created().lifecycle(K.EXECUTION_GRAPH_FAILED, exception="ClassNotFoundException: Foo")
    assert job.job is not None and job.job.state.job_status is JobStatus.FAILED
    record = job.record()
    assert outcome(record) == ("INITIAL_SCHEDULE", "FAILED", "EXCEPTION_OCCURRED")
    # CreatingExecutionGraph.recordRescaleForException terminates before it adds the span.
    assert spans(record) == ["Created", "WaitingForResources"]
    finished = job.decisions(DecisionKind.STATE_TRANSITION)[-1]
    assert finished.job_status is JobStatus.FAILED
    assert finished.message.endswith("ClassNotFoundException: Foo")


@pytest.mark.flink(
    "RestartingTest.testExecutionGraphCancellationOnEnter",
    "CancelingTest.testExecutionGraphCancelationOnEnter",
    "CancelingTest.testTransitionToFinishedWhenCancellationCompletes",
)
def test_restarting_waits_for_the_graph_to_be_cancelled() -> None:
    job = created().lifecycle(K.EXECUTION_GRAPH_CREATED)
    job.at(2 * SECOND).lifecycle(K.CANCEL)
    assert job.state is S.CANCELING
    job.lifecycle(K.EXECUTION_GRAPH_CANCELLED, execution_graph_id="eg-1")
    assert job.job is not None and job.job.state.job_status is JobStatus.CANCELED


@pytest.mark.flink("RestartingTest.testTransitionToSubsequentStateWhenCancellationComplete")
def test_a_rescale_needs_cancel_then_create_reports() -> None:
    job = Scenario(vertex("source", 2), config={**EXTERNAL, c.SUBMISSION_STABILIZATION: "0 s"})
    job.at(1 * SECOND).tm("tm-1").lifecycle(K.EXECUTION_GRAPH_CREATED)
    job.at(5 * SECOND).tm("tm-2").at(31 * SECOND)
    assert job.state is S.RESTARTING
    job.at(33 * SECOND).lifecycle(K.EXECUTION_GRAPH_CANCELLED)
    assert job.state is S.CREATING_EXECUTION_GRAPH
    job.at(34 * SECOND).lifecycle(K.EXECUTION_GRAPH_CREATED, execution_graph_id="eg-2")
    assert job.state is S.EXECUTING and job.parallelism == {"source": 2}
    durations = {s["state"]: s["durationInMillis"] for s in job.record()["schedulerStates"]}
    assert (
        durations["Restarting"] == 2 * SECOND and durations["CreatingExecutionGraph"] == 1 * SECOND
    )


@pytest.mark.flink(
    "FailingTest.testFailingStateOnEnter", "FailingTest.testTransitionToCancelingOnCancel"
)
def test_failing_waits_for_the_graph_then_finishes() -> None:
    job = created().lifecycle(K.EXECUTION_GRAPH_CREATED).fail(recoverable=False)
    assert job.state is S.FAILING
    job.lifecycle(K.CANCEL)
    assert job.state is S.CANCELING
    job.lifecycle(K.EXECUTION_GRAPH_FAILED)
    assert job.state is S.FINISHED


@pytest.mark.flink("StopWithSavepointTest.testFinishedOnSuccessfulStopWithSavepoint")
def test_stop_with_savepoint_waits_for_the_graph_to_finish() -> None:
    job = created().lifecycle(K.EXECUTION_GRAPH_CREATED).lifecycle(K.SAVEPOINT_REQUESTED)
    job.lifecycle(K.SAVEPOINT_COMPLETED, savepoint_path="/sp")
    assert job.state is S.STOP_WITH_SAVEPOINT
    job.lifecycle(K.FINISHED)
    assert job.job is not None and job.job.state.job_status is JobStatus.FINISHED


@pytest.mark.flink("ExecutingTest.testTransitionToFinishedOnFailedExecutionGraph")
def test_a_graph_failure_while_running_finishes_the_job_failed() -> None:
    job = (
        created()
        .lifecycle(K.EXECUTION_GRAPH_CREATED)
        .lifecycle(K.EXECUTION_GRAPH_FAILED, exception="x")
    )
    assert job.states_visited()[-2:] == [S.EXECUTING, S.FINISHED]
    assert job.job is not None and job.job.state.job_status is JobStatus.FAILED


def test_in_simulated_mode_runtime_reports_are_ignored() -> None:
    job = Scenario(vertex("source", 2))
    job.at(1 * SECOND).tm("tm-1", slots=2).lifecycle(K.EXECUTION_GRAPH_CANCELLED)
    assert job.state is S.EXECUTING
    assert "the runtime is simulated" in job.decisions(DecisionKind.EVENT_IGNORED)[-1].message


def test_simulated_times_make_restarts_take_time() -> None:
    config = {
        c.SIMULATED_CANCEL_TIME: "2 s",
        c.SIMULATED_CREATE_TIME: "1 s",
        c.SUBMISSION_STABILIZATION: "0 s",
    }
    job = Scenario(vertex("source", 2), config=config)
    job.at(1 * SECOND).tm("tm-1").at(5 * SECOND).tm("tm-2").at(40 * SECOND)
    durations = {s["state"]: s["durationInMillis"] for s in job.record()["schedulerStates"]}
    assert (durations["Restarting"], durations["CreatingExecutionGraph"]) == (
        2 * SECOND,
        1 * SECOND,
    )


def test_decisions_name_the_facts_a_runtime_follows() -> None:
    """The embedded cluster follows only accepted facts, read from these details: the
    submission with its checkpoint interval, each TaskManager registered or lost."""
    job = Scenario(vertex("source", 2), config=EXTERNAL, checkpoint_interval=5_000)
    job.at(1 * SECOND).tm("tm-1", slots=2).at(2 * SECOND).lose("tm-1")
    submitted = dict(job.decisions(DecisionKind.STATE_TRANSITION)[0].details)
    assert (submitted["target"], submitted["checkpointIntervalMs"]) == ("Created", "5000")
    registered, lost = (dict(d.details) for d in job.decisions(DecisionKind.RESOURCES_CHANGED))
    assert registered == {
        "slots": "2",
        "change": "registered",
        "taskManager": "tm-1",
        "taskManagerSlots": "2",
    }
    assert lost == {"slots": "0", "change": "lost", "taskManager": "tm-1", "taskManagerSlots": "2"}


def test_in_simulated_mode_the_first_graph_may_take_longer_than_the_later_ones() -> None:
    # a real cluster first offers the job its slots: Flink 2.3 took 0.6-0.9 s to its first
    # Executing, tens of ms to a later one (services/scheduler/observation.py)
    times = {c.SIMULATED_FIRST_CREATE_TIME: "800 ms", c.SIMULATED_CREATE_TIME: "50 ms"}
    job = Scenario(vertex("source", 1, max_parallelism=2), config=times)
    job.at(1 * SECOND).tm("tm-1")
    job.after(799)
    assert job.state is S.CREATING_EXECUTION_GRAPH
    job.after(1)
    assert job.state is S.EXECUTING
    job.require(source=(1, 2)).tm("tm-2")
    job.at(60 * SECOND)
    assert job.state is S.EXECUTING and job.parallelism == {"source": 2}
    creating = job.when_entered(S.CREATING_EXECUTION_GRAPH)
    assert job.when_entered(S.EXECUTING) - creating == 50, job.transitions()
