"""Behaviours matched to Flink's source and tests (issue 12), each naming what it follows.

1. max parallelism -1 is "not set"; other out-of-range values are refused;
2. active checkpoint triggers honour `execution.checkpointing.min-pause`;
3. an execution graph failing by itself while Executing finishes the job FAILED;
4. active checkpoint triggers only when they can still lead to a rescale;
5. rescale records' spans and exceptions as Flink's timeline writes them;
6. the job's final status is typed;
7. slot and TaskManager ids order naturally;
and FLINK-40379 (open upstream) behind its proposed key, off by default.
"""

from __future__ import annotations

import pytest

from services.actuator.cluster import JobRuntime
from services.contracts import Codec
from services.contracts import jobconfig as c
from services.contracts import records as r
from services.contracts.events import JobEventKind as K
from services.contracts.events import JobSubmitted, VertexSpec
from services.scheduler.adapters.processor import decision_record
from services.scheduler.core import handle
from services.scheduler.core.allocator import assign
from services.scheduler.core.config import ConfigError, resolve
from services.scheduler.core.enums import DecisionKind, JobStatus, Phase, RequestKind, StateName
from services.scheduler.core.jobgraph import effective_max_parallelism, job_information
from services.scheduler.core.model import InvalidJobGraphError, Plan, RestartState, Slot
from services.scheduler.core.restart import strategy_string
from services.scheduler.output import effect_json, text
from tests.unit.scheduler.harness import JOB, SECOND, Scenario, outcome, spans, vertex

S = StateName
flink = pytest.mark.flink
QUICK_START = {c.SUBMISSION_STABILIZATION: "0 s"}
INT_MAX = 2**31 - 1


def spec(parallelism: int, maximum: int | None) -> VertexSpec:
    return VertexSpec("v", "V", "g", "g", parallelism, maximum)


# -- 1. max parallelism ---------------------------------------------------------------


@flink(
    "AdaptiveSchedulerComputeReactiveModeVertexParallelismTest.testCreateStoreWithAdjustedParallelism",
    "KeyGroupRangeAssignment.computeDefaultMaxParallelism",
)
@pytest.mark.parametrize(
    ("parallelism", "maximum", "expected"),
    [  # Flink's parameters; -1 is JobVertex.MAX_PARALLELISM_DEFAULT
        (1, -1, 128),
        (171, -1, 256),
        (172, -1, 512),
        (32768, -1, 32768),
        (4, 32768, 32768),
        (4, 7, 7),
    ],
)
def test_reactive_mode_runs_at_the_max_parallelism_flink_computes(
    parallelism: int, maximum: int, expected: int
) -> None:
    info = job_information([spec(parallelism, maximum)], reactive=True)
    assert info.vertices[0].max_parallelism == expected
    assert (info.bounds[0].lower, info.bounds[0].upper) == (1, expected)


@flink(
    "AdaptiveSchedulerTest.testComputeVertexParallelismStoreForExecutionInDefaultMode",
    "AdaptiveSchedulerComputeReactiveModeVertexParallelismTest.testCreateStoreWithoutAdjustedParallelism",
    "SchedulerBase.computeVertexParallelismStore",
)
def test_an_unset_max_parallelism_is_computed_from_the_parallelism() -> None:
    assert effective_max_parallelism(spec(4, None)) == 128
    assert effective_max_parallelism(spec(4, -1)) == 128  # not 32768
    assert effective_max_parallelism(spec(300, -1)) == 512
    assert effective_max_parallelism(spec(-1, -1)) == 128  # parallelism -1 is 1
    assert effective_max_parallelism(spec(4, INT_MAX)) == 32768  # PARALLELISM_AUTO_MAX
    info = job_information([spec(300, -1)], reactive=False)
    assert (info.bounds[0].upper, info.vertices[0].max_parallelism) == (300, 512)


@flink("DefaultVertexParallelismInfo.checkBounds")
@pytest.mark.parametrize(
    ("parallelism", "maximum", "reason"),
    [
        (4, 0, "max parallelism 0 is not within 1..32768"),
        (4, -2, "max parallelism -2 is not within 1..32768"),
        (4, 32769, "max parallelism 32769 is not within 1..32768"),
        (0, None, "parallelism 0 is not within 1..32768"),
        (8, 4, "parallelism 8 exceeds max parallelism 4"),
    ],
)
def test_other_out_of_range_values_are_refused_with_the_reason(
    parallelism: int, maximum: int | None, reason: str
) -> None:
    with pytest.raises(InvalidJobGraphError, match=reason):
        job_information([spec(parallelism, maximum)], reactive=False)
    submitted = JobSubmitted(JOB, 0, "bad", (spec(parallelism, maximum),), None, ())
    refused = handle(None, submitted)
    assert refused.job is None and reason in refused.effects[0].message  # type: ignore[union-attr]


@flink("AdaptiveSchedulerTest.testStartSchedulingSetsResourceRequirementsForReactiveMode")
def test_reactive_mode_declares_the_computed_default_as_desired() -> None:
    job = Scenario(vertex("source", 171, max_parallelism=-1), config={c.SCHEDULER_MODE: "REACTIVE"})
    (declared,) = job.requests(RequestKind.DECLARE_RESOURCES)
    assert dict(declared.details)["desired_slots"] == "256"


# -- 2. and 4. active checkpoint triggers ------------------------------------------------


def stabilizing_after_a_checkpoint(**config: str) -> Scenario:
    """Running on 1 of 4 slots, a checkpoint completed at 30 s, a second slot recorded in
    the cooldown: Stabilizing from 31 s, with a 20 s min pause."""
    job = Scenario(
        vertex("source", 4),
        config={**QUICK_START, c.MIN_PAUSE: "20 s", **config},
        checkpoint_interval=60 * SECOND,
    )
    job.at(1 * SECOND).tm("tm-1").at(5 * SECOND).tm("tm-2").at(30 * SECOND).checkpoint()
    job.at(31 * SECOND)
    assert job.phase is Phase.STABILIZING
    return job


def active(job: Scenario) -> list[str]:
    return [d.message for d in job.decisions(DecisionKind.ACTIVE_CHECKPOINT)]


@flink(
    "ExecutingTest.testActiveCheckpointTriggerRespectsMinPauseBetweenCheckpoints",
    "DefaultStateTransitionManagerTest.testActiveCheckpointTriggerCalledOnEnteringStabilizing",
    "CheckpointCoordinator.getActiveCheckpointTriggerDelay",
)
def test_the_trigger_waits_for_what_is_left_of_the_min_pause() -> None:
    job = stabilizing_after_a_checkpoint()
    assert active(job) == [
        "deferred until 50000: execution.checkpointing.min-pause of 20000 ms "
        "since the checkpoint completed at 30000"
    ]
    job.at(49_999)
    assert not job.requests(RequestKind.TRIGGER_CHECKPOINT)
    job.at(50 * SECOND)
    (trigger,) = job.requests(RequestKind.TRIGGER_CHECKPOINT)
    assert trigger.at == 50 * SECOND


@flink(
    "ExecutingTest.testActiveCheckpointTriggerDeduplicatesScheduledRetries",
    "DefaultStateTransitionManagerTest.testActiveCheckpointTriggerCalledOnChangeInStabilizing",
)
def test_requests_while_one_trigger_is_scheduled_are_deduplicated() -> None:
    job = stabilizing_after_a_checkpoint()
    job.at(40 * SECOND).tm("tm-3").at(45 * SECOND).tm("tm-4")
    assert active(job)[1:] == ["already scheduled: not requested again"] * 2
    job.at(50 * SECOND)
    assert len(job.requests(RequestKind.TRIGGER_CHECKPOINT)) == 1


@flink("ExecutingTest.testActiveCheckpointTriggerFiresWhenAllGuardsPass")
def test_without_a_completed_checkpoint_there_is_no_pause_to_wait_for() -> None:
    job = Scenario(
        vertex("source", 4),
        config={**QUICK_START, c.MIN_PAUSE: "20 s"},
        checkpoint_interval=60 * SECOND,
    )
    job.at(1 * SECOND).tm("tm-1").at(5 * SECOND).tm("tm-2").at(31 * SECOND)
    (trigger,) = job.requests(RequestKind.TRIGGER_CHECKPOINT)
    assert trigger.at == 31 * SECOND and not active(job)


@flink("Executing.tryFireActiveCheckpointAfterRetry")
def test_a_checkpoint_completed_while_waiting_drops_the_trigger() -> None:
    job = stabilizing_after_a_checkpoint()
    job.at(45 * SECOND).checkpoint()  # a periodic one; it is the rescale's trigger itself
    job.at(50 * SECOND)
    assert not job.requests(RequestKind.TRIGGER_CHECKPOINT)
    assert active(job)[-1] == "dropped: a checkpoint completed at 45000 while it waited"


@flink("ExecutingTest.testActiveCheckpointTriggerSkipsWhenParallelismUnchanged")
def test_a_trigger_that_can_no_longer_rescale_is_dropped_when_it_would_fire() -> None:
    job = stabilizing_after_a_checkpoint()
    job.at(35 * SECOND).require(source=(1, 1))  # the running parallelism again
    job.at(50 * SECOND)
    assert not job.requests(RequestKind.TRIGGER_CHECKPOINT)
    assert active(job)[-1] == "dropped: the parallelism no longer changes from source=1"


@flink("ExecutingTest.testActiveCheckpointTriggerSkipsWhenCheckpointInProgress")
def test_no_request_while_the_triggered_checkpoint_is_pending() -> None:
    job = Scenario(vertex("source", 4), config=QUICK_START, checkpoint_interval=60 * SECOND)
    job.at(1 * SECOND).tm("tm-1").at(5 * SECOND).tm("tm-2").at(31 * SECOND)
    assert len(job.requests(RequestKind.TRIGGER_CHECKPOINT)) == 1  # pending from now on
    job.at(40 * SECOND).tm("tm-3")
    assert active(job) == ["not requested: a triggered checkpoint is pending"]
    job.at(41 * SECOND).checkpoint_failed()  # it ended: the next change may ask again
    job.at(42 * SECOND).tm("tm-4")
    assert len(job.requests(RequestKind.TRIGGER_CHECKPOINT)) == 2


@flink("DefaultStateTransitionManagerTest.testActiveCheckpointTriggerCalledOnEnteringStabilized")
def test_entering_stabilized_asks_again() -> None:
    job = Scenario(
        vertex("source", 4),
        config={**QUICK_START, c.EXECUTING_STABILIZATION: "40 s"},
        checkpoint_interval=60 * SECOND,
    )
    job.at(1 * SECOND).tm("tm-1").at(5 * SECOND).tm("tm-2").at(31 * SECOND)
    job.at(32 * SECOND).checkpoint_failed()
    job.at(45 * SECOND)  # Stabilized at first change + 40 s
    assert job.phase is Phase.STABILIZED
    assert [t.at for t in job.requests(RequestKind.TRIGGER_CHECKPOINT)] == [31_000, 45_000]


@flink("ExecutingTest.testActiveCheckpointTriggerRetryIsNoopAfterStopWithSavepoint")
def test_a_scheduled_trigger_dies_with_its_executing_state() -> None:
    job = stabilizing_after_a_checkpoint()
    job.at(40 * SECOND).lifecycle(K.SAVEPOINT_REQUESTED)
    job.at(41 * SECOND).lifecycle(K.SAVEPOINT_FAILED, exception="expired")
    job.at(50 * SECOND)
    assert job.state is S.EXECUTING and not job.requests(RequestKind.TRIGGER_CHECKPOINT)


@flink("CheckpointCoordinator.getActiveCheckpointTriggerDelay")
def test_the_graph_learns_of_its_checkpoints_also_while_stopping_with_a_savepoint() -> None:
    job = Scenario(vertex("source", 4), config=QUICK_START, checkpoint_interval=60 * SECOND)
    job.at(1 * SECOND).tm("tm-1").at(5 * SECOND).tm("tm-2").at(31 * SECOND)  # triggered: pending
    job.at(32 * SECOND).lifecycle(K.SAVEPOINT_REQUESTED).checkpoint()  # it completes meanwhile
    job.at(33 * SECOND).lifecycle(K.SAVEPOINT_FAILED, exception="expired")
    job.at(63 * SECOND)  # the new Executing's cooldown (33 s + 30 s) ends: Stabilizing asks
    assert [t.at for t in job.requests(RequestKind.TRIGGER_CHECKPOINT)] == [31_000, 63_000]


# -- 3. the execution graph failing by itself --------------------------------------------


def running_externally() -> Scenario:
    job = Scenario(vertex("source", 4), config={**QUICK_START, c.RUNTIME_MODE: "external"})
    job.at(1 * SECOND).tm("tm-1").lifecycle(K.EXECUTION_GRAPH_CREATED)
    assert job.state is S.EXECUTING
    return job


@flink(
    "ExecutingTest.testTransitionToFinishedOnFailedExecutionGraph",
    "StateWithExecutionGraphTest.testOnGloballyTerminalStateCalled",
)
def test_a_graph_failed_by_itself_finishes_the_job_failed_without_a_restart() -> None:
    job = running_externally().at(5 * SECOND).tm("tm-2")  # a rescale in progress
    job.at(6 * SECOND).lifecycle(K.EXECUTION_GRAPH_FAILED, exception="java.lang.Error: gone")
    assert job.states_visited()[-2:] == [S.EXECUTING, S.FINISHED]
    assert not job.decisions(DecisionKind.RESTART_DECIDED)
    assert job.job is not None and job.job.state.job_status is JobStatus.FAILED
    # goToFinished: the rescale in progress ends JOB_FINISHED, its span without exception.
    record = job.record()
    assert outcome(record) == ("NEW_RESOURCE_AVAILABLE", "IGNORED", "JOB_FINISHED")
    assert record["schedulerStates"][-1]["stringifiedException"] is None


@flink("StopWithSavepoint.onGloballyTerminalState")
def test_a_graph_failed_during_stop_with_savepoint_is_a_global_failure() -> None:
    job = running_externally().at(5 * SECOND).lifecycle(K.SAVEPOINT_REQUESTED)
    job.lifecycle(K.EXECUTION_GRAPH_FAILED, exception="x")
    assert job.state is S.FAILING  # no checkpointing: restart strategy none
    decided = job.decisions(DecisionKind.RESTART_DECIDED)[-1]
    assert "Job did not reach the FINISHED state" in dict(decided.details)["cause"]


# -- 5. spans and exceptions ---------------------------------------------------------------


@flink(
    "RescaleTimelineITCase.testRescaleTerminatedByNoResourcesOrNoParallelismsChange",
    "RescaleTest.testAddSchedulerState",
)
def test_idling_ends_the_rescale_without_an_executing_span() -> None:
    job = Scenario(vertex("source", 4), config=QUICK_START)
    job.at(1 * SECOND).tm("tm-1").at(5 * SECOND).tm("tm-2").at(10 * SECOND).lose("tm-2")
    job.at(65 * SECOND)
    record = job.record()
    assert outcome(record) == (
        "NEW_RESOURCE_AVAILABLE",
        "IGNORED",
        "NO_RESOURCES_OR_PARALLELISMS_CHANGE",
    )
    assert spans(record) == []  # Idling terminates first; the span is then ignored


@flink("RescaleTimelineITCase.testRescaleTerminatedByJobFailed", "AdaptiveScheduler.goToFailing")
def test_a_failed_job_writes_the_job_exception_on_the_span_it_failed_from() -> None:
    job = Scenario(
        vertex("source", 4),
        config={
            **QUICK_START,
            c.RESTART_STRATEGY: "fixed-delay",
            c.FIXED_ATTEMPTS: "1",
            c.FIXED_DELAY: "0 s",
        },
    )
    job.at(1 * SECOND).tm("tm-1").at(2 * SECOND).fail(exception="java.io.IOException: a")
    job.at(3 * SECOND).tm("tm-2").at(4 * SECOND).fail(exception="java.io.IOException: b")
    record = job.record()
    assert outcome(record) == ("NEW_RESOURCE_AVAILABLE", "IGNORED", "JOB_FAILED")
    exceptions = [s["stringifiedException"] for s in record["schedulerStates"]]
    assert exceptions == [
        "org.apache.flink.runtime.JobException: Recovery is suppressed by "
        "FixedDelayRestartBackoffTimeStrategy(maxNumberRestartAttempts=1, backoffTimeMS=0)"
        "\nCaused by: java.io.IOException: b"
    ]
    failover = job.record(-2)
    assert outcome(failover) == ("RECOVERABLE_FAILOVER", "COMPLETED", "SUCCEEDED")
    assert all(s["stringifiedException"] is None for s in failover["schedulerStates"])


@flink(
    "StateWithoutExecutionGraphTest.testTransitionToFinishedOnGlobalFailure",
    "AdaptiveScheduler.goToFinished",
)
def test_a_global_failure_before_running_ends_job_finished_without_an_exception() -> None:
    job = Scenario(vertex("source", 4)).at(1 * SECOND)
    job.lifecycle(K.GLOBAL_FAILURE, exception="java.lang.RuntimeException: no")
    record = job.record()
    assert outcome(record) == ("INITIAL_SCHEDULE", "IGNORED", "JOB_FINISHED")
    assert [s["stringifiedException"] for s in record["schedulerStates"]] == [None, None]


# -- 6. the final status, typed -----------------------------------------------------------


@flink(
    "AdaptiveSchedulerTest.testJobStatusListenerNotifiedOfJobStatusChanges",
    "FinishedTest.testGetJobStatus",
)
def test_every_transition_carries_the_job_status_and_the_last_one_how_it_ended() -> None:
    job = Scenario(vertex("source", 2), config=QUICK_START, checkpoint_interval=10 * SECOND)
    job.at(1 * SECOND).tm("tm-1", slots=2).at(2 * SECOND).fail().at(10 * SECOND)
    job.lifecycle(K.CANCEL)
    statuses = [d.job_status for d in job.decisions(DecisionKind.STATE_TRANSITION)]
    assert statuses == [
        JobStatus.INITIALIZING,  # Created
        JobStatus.CREATED,  # WaitingForResources
        JobStatus.CREATED,  # CreatingExecutionGraph
        JobStatus.RUNNING,  # Executing
        JobStatus.RESTARTING,
        JobStatus.CREATED,
        JobStatus.RUNNING,
        JobStatus.CANCELLING,
        JobStatus.CANCELED,  # Finished
    ]
    assert all(
        d.job_status is None for d in job.decisions() if d.kind is not DecisionKind.STATE_TRANSITION
    )


@flink(
    "StateWithoutExecutionGraphTest.testSuspendTransitionsToFinished",
    "FinishedTest.testOnFinishedCallOnEnter",
)
@pytest.mark.parametrize(
    ("kind", "status"),
    [
        (K.CANCEL, JobStatus.CANCELED),
        (K.SUSPEND, JobStatus.SUSPENDED),
        (K.GLOBAL_FAILURE, JobStatus.FAILED),
    ],
)
def test_the_end_is_typed_in_replay_output_and_on_the_decisions_topic(
    codec: Codec, kind: K, status: JobStatus
) -> None:
    job = Scenario(vertex("source", 2)).lifecycle(kind)
    finished = job.decisions(DecisionKind.STATE_TRANSITION)[-1]
    assert finished.state == S.FINISHED and finished.job_status is status
    assert effect_json(finished)["jobStatus"] == str(status)
    assert f"Finished [{status}]" in text(finished)
    record = {"jobId": JOB, "timestamp": 0, "sourceOffset": 7, "items": [decision_record(finished)]}
    decoded = codec.decode(codec.encode(r.SCHEDULER_DECISIONS, record))
    assert decoded.writer_version == 2 and decoded.record["items"][0]["jobStatus"] == str(status)


# -- 7. natural order of ids ---------------------------------------------------------------


@flink("SlotSharingSlotAllocatorTest.testReserveAvailableResources")
def test_taskmanagers_and_slots_order_naturally() -> None:
    job = Scenario(vertex("source", 3), config={c.PREFER_MINIMAL_TASKMANAGERS: "false"})
    job.tms("tm-10", "tm-2", "tm-1")
    assert job.job is not None
    assert [tm.id for tm in job.job.task_managers] == ["tm-1", "tm-2", "tm-10"]
    (create,) = job.requests(RequestKind.CREATE_EXECUTION_GRAPH)
    assert dict(create.details)["slots"] == "tm-1#0 tm-2#0 tm-10#0"
    free = [Slot(f"{tm}#0", tm, 0, None) for tm in ("tm-10", "tm-9", "tm-2")]
    for minimal in (False, True):  # two of three single-slot TaskManagers: tm-2 and tm-9
        chosen = assign(Plan((2,), (("g", 2),)), free, minimal)
        assert chosen is not None and chosen.groups == (("g", ("tm-2#0", "tm-9#0")),)


def test_the_embedded_cluster_lists_taskmanagers_naturally() -> None:
    runtime = JobRuntime("j", task_managers={"tm-10": 1, "tm-2": 1, "tm-1": 1})
    runtime.graph_slots = frozenset({"tm-10#0"})
    assert runtime.idle_task_managers() == ["tm-1", "tm-2"]
    runtime.graph_slots = frozenset({"tm-10#0", "tm-2#0"})
    assert runtime.busy_task_managers() == ["tm-2", "tm-10"]


# -- FLINK-40379, open upstream: behind its proposed key, off by default --------------------


def rescale_losing_a_slot_while_restarting(**config: str) -> Scenario:
    """1 -> 2 slots; the new TaskManager is lost while the old graph is being cancelled."""
    job = Scenario(
        vertex("source", 2),
        config={**QUICK_START, c.SIMULATED_CANCEL_TIME: "2 s", c.WAIT_TIMEOUT: "-1 ms", **config},
    )
    job.at(1 * SECOND).tm("tm-1").at(5 * SECOND).tm("tm-2").at(31 * SECOND)
    assert job.state is S.RESTARTING
    job.at(32 * SECOND).lose("tm-2")
    job.at(33 * SECOND)  # cancelled: Restarting -> WaitingForResources
    return job


@flink("RestartingTest.testTransitionToSubsequentStateWhenResourceChanged")
def test_without_the_flag_the_job_runs_on_what_is_left_and_rescales_again() -> None:
    job = rescale_losing_a_slot_while_restarting()
    assert job.states_visited()[-4:] == [
        S.RESTARTING,
        S.WAITING_FOR_RESOURCES,
        S.CREATING_EXECUTION_GRAPH,
        S.EXECUTING,
    ]
    assert job.parallelism == {"source": 1}  # sufficient at once (stabilization 0)
    job.at(34 * SECOND).tm("tm-3")  # the slot is back a second later: another rescale follows
    job.at(65 * SECOND)  # after the new Executing's cooldown (33 s + 30 s) and the cancellation
    assert (
        job.parallelism == {"source": 2}
        and len(job.requests(RequestKind.CANCEL_EXECUTION_GRAPH)) == 2
    )


@flink("Restarting.goToSubsequentState")  # apache/flink#28999, not merged
def test_with_the_flag_the_job_waits_for_the_parallelism_it_restarted_for() -> None:
    job = rescale_losing_a_slot_while_restarting(**{c.RESCALE_STABILIZATION: "30 s"})
    assert job.state is S.WAITING_FOR_RESOURCES
    assert (
        "waiting for the pre-restart parallelism source=2"
        in job.decisions(DecisionKind.CHANGE_IGNORED)[-1].message
    )
    job.at(40 * SECOND).tm("tm-3")
    assert job.state is S.EXECUTING and job.parallelism == {"source": 2}
    assert job.when_entered(S.EXECUTING) == 40 * SECOND
    assert len(job.requests(RequestKind.CANCEL_EXECUTION_GRAPH)) == 1  # one restart, not two


@flink("Restarting.goToSubsequentState")  # apache/flink#28999, not merged
def test_with_the_flag_the_wait_ends_after_its_timeout() -> None:
    job = rescale_losing_a_slot_while_restarting(**{c.RESCALE_STABILIZATION: "30 s"})
    job.at(62_999)
    assert job.state is S.WAITING_FOR_RESOURCES
    job.at(63 * SECOND)  # entered at 33 s + 30 s: what suffices runs (stabilization 0)
    assert job.decisions(DecisionKind.TIMEOUT)[-1].message.startswith(
        "jobmanager.adaptive-scheduler.rescale.resource-stabilization-timeout passed without source=2"
    )
    assert job.state is S.EXECUTING and job.parallelism == {"source": 1}


def test_the_flag_is_off_unless_set_and_never_negative() -> None:
    assert resolve({}).rescale_stabilization_ms is None
    assert resolve({c.RESCALE_STABILIZATION: "1 min"}).rescale_stabilization_ms == 60_000
    assert resolve({c.MIN_PAUSE: "5 s"}).min_pause_ms == 5_000
    for key in (c.RESCALE_STABILIZATION, c.MIN_PAUSE):
        with pytest.raises(ConfigError, match=key):
            resolve({key: "-1 s"})


@flink(
    "StateWithExecutionGraphTest.testOnGloballyTerminalStateCalled",
    "Executing.onGloballyTerminalState",
)
def test_a_graph_cancelled_by_itself_finishes_the_job_canceled() -> None:
    job = running_externally().lifecycle(K.EXECUTION_GRAPH_CREATED)  # about this graph: ignored
    assert job.state is S.EXECUTING
    assert (
        "EXECUTION_GRAPH_CREATED ignored" in job.decisions(DecisionKind.EVENT_IGNORED)[-1].message
    )
    job.lifecycle(K.EXECUTION_GRAPH_CANCELLED)
    assert job.state is S.FINISHED and job.job is not None
    assert job.job.state.job_status is JobStatus.CANCELED


@flink(
    "NoRestartBackoffTimeStrategy.toString",
    "FixedDelayRestartBackoffTimeStrategy.toString",
    "FailureRateRestartBackoffTimeStrategy.toString",
    "ExponentialDelayRestartBackoffTimeStrategy.toString",
)
def test_recovery_is_suppressed_by_the_strategy_as_flink_describes_it() -> None:
    def described(**settings: str) -> str:
        return strategy_string(resolve(settings).restart, RestartState(attempts=3))

    assert described() == "NoRestartBackoffTimeStrategy"
    assert described(**{c.RESTART_STRATEGY: "fixed-delay"}) == (
        "FixedDelayRestartBackoffTimeStrategy(maxNumberRestartAttempts=1, backoffTimeMS=1000)"
    )
    assert described(**{c.RESTART_STRATEGY: "failure-rate"}) == (
        "FailureRateRestartBackoffTimeStrategy(FailureRateRestartBackoffTimeStrategy("
        "failuresIntervalMS=60000,backoffTimeMS=1000,maxFailuresPerInterval=1)"
    )
    assert described(**{c.RESTART_STRATEGY: "exponential-delay"}) == (
        "ExponentialDelayRestartBackoffTimeStrategy(initialBackoffMS=1000, maxBackoffMS=60000, "
        "backoffMultiplier=1.5, resetBackoffThresholdMS=3600000, jitterFactor=0.1, "
        "attemptsBeforeResetBackoff=2147483647, currentRestartAttempt=3)"
    )
