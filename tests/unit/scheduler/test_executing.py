"""Executing's transition manager: cooldown, stabilization, max trigger delay (FLIP-461,
FLINK-33092), checkpoint triggers, and the parallelism-changed rule."""

from __future__ import annotations

import pytest

from services.contracts import jobconfig as c
from services.scheduler.core.enums import DecisionKind, Phase, RequestKind, StateName
from tests.unit.scheduler.harness import SECOND, Scenario, outcome, post, vertex

S = StateName
QUICK_START = {c.SUBMISSION_STABILIZATION: "0 s"}


def running_on_one_slot(parallelism: int = 4, **config: str) -> Scenario:
    """A job wanting `parallelism` that started at t=1s on a single slot."""
    job = Scenario(vertex("source", parallelism), config={**QUICK_START, **config})
    job.at(1 * SECOND).tm("tm-1")
    assert job.state is S.EXECUTING and job.when_entered(S.EXECUTING) == 1 * SECOND
    return job


@pytest.mark.flink(
    "DefaultStateTransitionManagerTest.testDesiredChangeInCooldownPhase",
    "DefaultStateTransitionManagerTest.testStateTransitionRightAfterCooldown",
)
def test_desired_resources_in_cooldown_rescale_when_it_ends() -> None:
    job = running_on_one_slot(parallelism=2)
    job.at(5 * SECOND).tm("tm-2")
    assert job.phase is Phase.COOLDOWN
    job.at(30_999)
    assert job.state is S.EXECUTING
    job.at(31 * SECOND)
    assert job.when_entered(S.RESTARTING) == 31 * SECOND
    assert job.parallelism == {"source": 2}


@pytest.mark.flink(
    "DefaultStateTransitionManagerTest.testSufficientChangeInCooldownPhase",
    "AdaptiveSchedulerTest.testGoToExecutingConfiguresStateTransitionManagerFactory",
)
def test_sufficient_resources_rescale_after_cooldown_and_stabilization() -> None:
    job = running_on_one_slot()
    job.at(5 * SECOND).tm("tm-2")
    job.at(31 * SECOND)
    assert job.phase is Phase.STABILIZING  # the change from 5 s was kept through the cooldown
    job.at(64_999)
    assert job.state is S.EXECUTING and job.parallelism == {"source": 1}
    job.at(65 * SECOND)  # max(enter + cooldown, first change + stabilization) = 5 + 60
    assert job.when_entered(S.RESTARTING) == 65 * SECOND
    assert job.parallelism == {"source": 2}


@pytest.mark.flink("DefaultStateTransitionManagerTest.testSufficientChangeInIdlingPhase")
def test_after_the_cooldown_a_change_starts_stabilizing_from_idling() -> None:
    job = running_on_one_slot()
    job.at(31 * SECOND)
    assert job.phase is Phase.IDLING
    job.at(40 * SECOND).tm("tm-2")
    assert job.phase is Phase.STABILIZING
    job.at(100 * SECOND)
    assert job.when_entered(S.RESTARTING) == 100 * SECOND


@pytest.mark.flink("DefaultStateTransitionManagerTest.testDesiredChangeInIdlingPhase")
def test_desired_resources_after_the_cooldown_rescale_at_once() -> None:
    job = running_on_one_slot(parallelism=2)
    job.at(40 * SECOND).tm("tm-2")
    assert job.when_entered(S.RESTARTING) == 40 * SECOND


@pytest.mark.flink("DefaultStateTransitionManagerTest.testNoResourcesChangeInCooldownPhase")
def test_a_change_with_insufficient_resources_in_cooldown_is_forgotten() -> None:
    job = running_on_one_slot(parallelism=4)
    job.at(5 * SECOND).require(source=(3, 4))  # lower bound 3 > 1 slot: insufficient
    assert job.decisions(DecisionKind.CHANGE_IGNORED)[-1].message.startswith(
        "in cooldown until 31000"
    )
    job.at(31 * SECOND)
    assert job.phase is Phase.IDLING  # nothing was remembered
    assert job.state is S.EXECUTING and job.parallelism == {"source": 1}


@pytest.mark.flink("DefaultStateTransitionManager.Cooldown")
def test_only_the_first_sufficient_change_in_cooldown_is_recorded() -> None:
    job = running_on_one_slot()
    job.at(5 * SECOND).tm("tm-2").at(20 * SECOND).tm("tm-3")
    assert job.job is not None and job.job.state.stm is not None
    assert job.job.state.stm.first_change == 5 * SECOND
    assert "already recorded" in job.decisions(DecisionKind.CHANGE_IGNORED)[-1].message


@pytest.mark.flink(
    "ExecutingTest.testInternalParallelismChangeBehavior",
    "DefaultStateTransitionManagerTest.testNoResourcesChangeInIdlingPhase",
)
def test_an_unchanged_parallelism_is_no_reason_to_rescale() -> None:
    job = Scenario(vertex("source", 2), config=QUICK_START)
    job.at(1 * SECOND).tm("tm-1", slots=2).at(5 * SECOND).tm("tm-2", slots=2)
    assert (
        "parallelism unchanged at source=2 with 4 slots"
        in job.decisions(DecisionKind.CHANGE_IGNORED)[-1].message
    )
    job.at(600 * SECOND)
    assert job.state is S.EXECUTING and job.transitions()[-1][2] == S.EXECUTING
    assert len(job.records()) == 1


@pytest.mark.flink(
    "DefaultStateTransitionManagerTest.testTriggerWithoutChangeEventNoopInCooldownPhase",
    "DefaultStateTransitionManagerTest.testTriggerWithoutChangeEventNoopInIdlingPhase",
)
def test_triggers_are_ignored_in_cooldown_and_idling() -> None:
    job = running_on_one_slot(checkpoint_interval=None)
    job.at(2 * SECOND).checkpoint()
    assert job.decisions(DecisionKind.TRIGGER_IGNORED)[-1].message == "in cooldown until 31000"
    job.at(40 * SECOND).checkpoint()
    assert job.decisions(DecisionKind.TRIGGER_IGNORED)[-1].message == "trigger ignored in Idling"


@pytest.mark.flink(
    "ExecutingTest.testTriggerRescaleOnCompletedCheckpoint",
    "DefaultStateTransitionManagerTest.testSufficientChangeInStabilizedPhase",
)
def test_a_completed_checkpoint_triggers_the_rescale_in_stabilized() -> None:
    # interval 40 s -> max trigger delay 3 x 40 = 120 s, longer than the stabilization.
    job = Scenario(vertex("source", 4), config=QUICK_START, checkpoint_interval=40 * SECOND)
    job.at(1 * SECOND).tm("tm-1").at(5 * SECOND).tm("tm-2")
    job.at(65 * SECOND)
    assert job.phase is Phase.STABILIZED
    job.at(80 * SECOND).checkpoint()
    assert job.when_entered(S.RESTARTING) == 80 * SECOND


@pytest.mark.flink(
    "DefaultStateTransitionManagerTest.testSufficientResourcesInStabilizedPhaseAfterMaxTriggerDelay"
)
def test_without_a_checkpoint_stabilized_waits_for_the_max_trigger_delay() -> None:
    job = Scenario(vertex("source", 4), config=QUICK_START, checkpoint_interval=40 * SECOND)
    job.at(1 * SECOND).tm("tm-1").at(5 * SECOND).tm("tm-2")
    job.at(124_999)
    assert job.phase is Phase.STABILIZED
    job.at(125 * SECOND)  # first change + 120 s
    assert job.when_entered(S.RESTARTING) == 125 * SECOND


@pytest.mark.flink("ExecutingTest.testTriggerRescaleOnFailedCheckpoint")
def test_failed_checkpoints_after_a_change_trigger_after_the_configured_count() -> None:
    job = Scenario(vertex("source", 4), config=QUICK_START, checkpoint_interval=40 * SECOND)
    job.at(1 * SECOND).tm("tm-1").at(5 * SECOND).tm("tm-2")
    job.at(70 * SECOND).checkpoint_failed()
    assert job.state is S.EXECUTING
    job.at(75 * SECOND).checkpoint_failed()  # the second of max-checkpoint-failures = 2
    assert job.when_entered(S.RESTARTING) == 75 * SECOND


@pytest.mark.flink("ExecutingTest.testTriggerRescaleOnFailedCheckpoint")
def test_failed_checkpoints_before_any_change_are_ignored() -> None:
    job = Scenario(vertex("source", 4), config=QUICK_START, checkpoint_interval=40 * SECOND)
    job.at(1 * SECOND).tm("tm-1").at(2 * SECOND).checkpoint_failed().checkpoint_failed()
    assert "before any change" in job.decisions(DecisionKind.TRIGGER_IGNORED)[-1].message


@pytest.mark.flink(
    "DefaultStateTransitionManagerTest.testActiveCheckpointTriggerCalledOnEnteringStabilizing",
    "DefaultStateTransitionManagerTest.testSufficientChangeWithSubsequentDesiredChangeInStabilizingPhase",
    "ExecutingTest.testActiveCheckpointTriggerFiresWhenAllGuardsPass",
    "ExecutingTest.testActiveCheckpointTriggerHandlesFailureGracefully",
)
def test_stabilizing_asks_for_one_active_checkpoint() -> None:
    job = Scenario(vertex("source", 4), config=QUICK_START, checkpoint_interval=40 * SECOND)
    job.at(1 * SECOND).tm("tm-1").at(5 * SECOND).tm("tm-2").at(31 * SECOND)
    job.at(40 * SECOND).tm("tm-3")
    assert len(job.requests(RequestKind.TRIGGER_CHECKPOINT)) == 1
    job.at(50 * SECOND).checkpoint_failed().at(55 * SECOND).tm("tm-4")
    # The failed checkpoint settled the request; the next change asks again.
    assert len(job.requests(RequestKind.TRIGGER_CHECKPOINT)) == 2
    assert job.state is S.EXECUTING  # desired now, but Stabilizing waits for a trigger
    job.at(56 * SECOND).checkpoint()
    assert job.when_entered(S.RESTARTING) == 56 * SECOND


@pytest.mark.flink(
    "ExecutingTest.testActiveCheckpointTriggerSkipsWhenDisabled",
    "ExecutingTest.testActiveCheckpointTriggerSkipsWhenNoCoordinator",
    "ExecutingTest.testActiveCheckpointTriggerSkipsWhenPeriodicCheckpointingNotConfigured",
)
def test_no_active_checkpoint_when_disabled_or_without_checkpointing() -> None:
    disabled = Scenario(
        vertex("source", 4),
        config={**QUICK_START, c.ACTIVE_CHECKPOINT: "false"},
        checkpoint_interval=40 * SECOND,
    )
    disabled.at(1 * SECOND).tm("tm-1").at(5 * SECOND).tm("tm-2").at(31 * SECOND)
    assert not disabled.requests(RequestKind.TRIGGER_CHECKPOINT)
    without = running_on_one_slot()
    without.at(5 * SECOND).tm("tm-2").at(31 * SECOND)
    assert not without.requests(RequestKind.TRIGGER_CHECKPOINT)


@pytest.mark.flink("AdaptiveSchedulerTest.testRequirementDecreaseTriggersScaleDown")
def test_a_scale_down_by_requirements_is_desired_and_waits_for_the_cooldown() -> None:
    job = Scenario(vertex("source", 4), config=QUICK_START)
    job.at(1 * SECOND).tm("tm-1", slots=4)
    job.at(10 * SECOND).require(source=(1, 2))
    job.at(31 * SECOND)
    assert job.when_entered(S.RESTARTING) == 31 * SECOND
    assert job.parallelism == {"source": 2}
    record = job.record()
    assert outcome(record) == ("UPDATE_REQUIREMENT", "COMPLETED", "SUCCEEDED")
    assert record["vertices"][0]["preRescaleParallelism"] == 4 and post(record) == {"source": 2}


@pytest.mark.flink(
    "AdaptiveSchedulerTest.testRequirementLowerBoundIncreaseBeyondCurrentParallelismKeepsJobRunning"
)
def test_a_lower_bound_above_the_slots_keeps_the_job_running_until_slots_arrive() -> None:
    job = Scenario(vertex("source", 4), config=QUICK_START)
    job.at(1 * SECOND).tm("tm-1", slots=2).at(40 * SECOND).require(source=(3, 4))
    job.at(400 * SECOND)
    assert job.state is S.EXECUTING and job.parallelism == {"source": 2}
    job.tm("tm-2", slots=2)
    assert job.state is S.EXECUTING and job.parallelism == {"source": 4}
    assert job.when_entered(S.RESTARTING) == 400 * SECOND


@pytest.mark.flink("AdaptiveSchedulerTest.testGoToExecutingConfiguresStateTransitionManagerFactory")
def test_a_new_executing_restarts_the_cooldown() -> None:
    job = running_on_one_slot(parallelism=2)
    job.at(5 * SECOND).tm("tm-2").at(31 * SECOND)  # rescaled at 31 s
    job.at(40 * SECOND).require(source=(1, 1))
    job.at(60 * SECOND)
    assert job.state is S.EXECUTING and job.parallelism == {"source": 2}
    job.at(61 * SECOND)  # 31 s + 30 s
    assert job.parallelism == {"source": 1}


@pytest.mark.flink(
    "ExecutingTest.testOmitsWaitingForResourcesStateWhenRestarting",
    "RestartingTest.testTransitionToSubsequentStateWhenCancellationComplete",
)
def test_the_restart_goes_straight_to_creating_with_the_planned_resources() -> None:
    job = running_on_one_slot(parallelism=2)
    job.at(5 * SECOND).tm("tm-2").at(31 * SECOND)
    assert job.states_visited()[-3:] == [S.RESTARTING, S.CREATING_EXECUTION_GRAPH, S.EXECUTING]
