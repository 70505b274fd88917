"""Timers are guarded effects: an outdated one is dropped; transitions go through one door."""

from __future__ import annotations

import pytest

from services.contracts import jobconfig as c
from services.contracts.events import JobEventKind, TaskManagerRegistered
from services.scheduler.core import handle
from services.scheduler.core.behaviour import Behaviour, register
from services.scheduler.core.enums import DecisionKind, Phase, StateName
from services.scheduler.core.fold import Fold
from services.scheduler.core.model import InvariantError
from services.scheduler.core.transitions import transition_to
from tests.unit.scheduler.harness import JOB, SECOND, Scenario, vertex

S = StateName


@pytest.mark.flink("AdaptiveSchedulerTest.testRunIfStateWithStateMismatch")
def test_the_resource_timeout_of_a_left_waiting_state_is_dropped() -> None:
    job = Scenario(vertex("source", 2), config={c.WAIT_TIMEOUT: "60 s"})
    job.at(1 * SECOND).tm("tm-1", slots=2)
    assert job.job is not None
    assert job.state is S.EXECUTING  # WaitingForResources left: its timeout is not kept
    assert not any(t.action == "waiting.resource-timeout" for t in job.job.timers)
    job.at(61 * SECOND)
    assert job.state is S.EXECUTING
    assert job.transitions()[-1][0] == 1 * SECOND  # the timeout changed nothing


@pytest.mark.flink(
    "DefaultStateTransitionManagerTest.testScheduledTaskBeingIgnoredAfterStateChanged"
)
def test_a_phase_timer_is_dropped_once_the_phase_changed() -> None:
    # Stabilizing schedules its evaluation at first change + max delay (120 s);
    # by then the manager has moved on to Stabilized and the evaluation must not run.
    job = Scenario(
        vertex("source", 4),
        config={c.SUBMISSION_STABILIZATION: "0 s"},
        checkpoint_interval=40 * SECOND,
    )
    job.at(1 * SECOND).tm("tm-1").at(5 * SECOND).tm("tm-2").at(65 * SECOND)
    assert job.phase is Phase.STABILIZED
    evaluations = [d for d in job.decisions() if "max-trigger-delay evaluation" in d.message]
    job.at(124_000)
    assert [
        d for d in job.decisions() if "max-trigger-delay evaluation" in d.message
    ] == evaluations


@pytest.mark.flink("AdaptiveSchedulerTest.testRunIfStateWithStateMismatch")
def test_a_state_timer_does_not_survive_a_round_trip_through_another_state() -> None:
    config = {c.RESTART_STRATEGY: "fixed-delay", c.FIXED_DELAY: "10 s", c.FIXED_ATTEMPTS: "9"}
    job = Scenario(vertex("source", 1), config=config, checkpoint_interval=SECOND)
    job.at(1 * SECOND).tm("tm-1").at(2 * SECOND).fail()
    job.lifecycle(JobEventKind.CANCEL)
    job.at(60 * SECOND)
    assert job.states_visited()[-2:] == [S.CANCELING, S.FINISHED]


def test_a_timer_tick_for_the_past_changes_nothing() -> None:
    job = Scenario(vertex("source", 4))
    job.at(1 * SECOND).tm("tm-1").at(11 * SECOND)
    before = job.job
    job.tick(3 * SECOND)
    assert job.job is not None and before is not None
    assert job.job.state == before.state and job.job.timers == before.timers


def test_an_event_from_the_past_is_applied_at_the_jobs_clock() -> None:
    job = Scenario(vertex("source", 2)).at(10 * SECOND)
    step = handle(job.job, TaskManagerRegistered(JOB, 4 * SECOND, "tm-1", 2, None))
    clamped = [e for e in step.effects if getattr(e, "kind", None) is DecisionKind.CLOCK_CLAMPED]
    assert clamped and step.job is not None and step.job.now == 10 * SECOND


@pytest.mark.flink("AdaptiveSchedulerTest.testRunIfState")
def test_timers_due_at_an_events_time_run_before_it() -> None:
    job = Scenario(vertex("source", 4))
    job.at(1 * SECOND).tm("tm-1")
    job.now = 11 * SECOND  # jump the clock without running timers: the event must run them first
    job.tm("tm-2")
    assert job.when_entered(S.CREATING_EXECUTION_GRAPH) == 11 * SECOND
    assert job.state is S.EXECUTING and job.parallelism == {"source": 1}


class _Rogue(Behaviour):
    name = S.CREATED  # a state that tries to transition from its constructor

    def on_enter(self, fold: Fold) -> None:
        transition_to(fold, S.WAITING_FOR_RESOURCES, "from a constructor")


@pytest.mark.flink("AdaptiveSchedulerTest.testRepeatedTransitionIntoCurrentStateFails")
def test_no_transition_from_a_constructor_and_no_self_transition() -> None:
    job = Scenario(vertex("source", 1))
    assert job.job is not None
    fold = Fold(job.job, ())
    with pytest.raises(InvariantError, match="self-transition"):
        transition_to(fold, S.WAITING_FOR_RESOURCES, "again")
    from services.scheduler.core.states import REGISTRY

    original = REGISTRY[S.CREATED]
    try:
        register(_Rogue)
        with pytest.raises(InvariantError, match="from a constructor"):
            transition_to(Fold(job.job, ()), S.CREATED, "rogue")
    finally:
        REGISTRY[S.CREATED] = original


def test_an_unknown_timer_action_is_a_bug() -> None:
    from services.scheduler.core.states import behaviour

    job = Scenario(vertex("source", 1))
    assert job.job is not None
    with pytest.raises(InvariantError, match="no timer action"):
        behaviour(S.CREATED).on_timer(Fold(job.job, ()), "nonsense")


def test_an_observed_jobs_timers_are_not_fired_by_the_wall_clock() -> None:
    """A job the bridge observes on a real Flink: the bridge's TimerFired moves its clock
    as far as its polls have seen, so the service's wall-clock tick leaves it alone."""
    config = {c.SUBMISSION_STABILIZATION: "10 s"}
    own = Scenario(vertex("source", 4), config=config)
    observed = Scenario(vertex("source", 4), config={**config, c.OBSERVED_CLUSTER: "prod"})
    for job in (own, observed):
        job.at(1 * SECOND).tm("tm-1")  # sufficient, not desired: the stabilization waits
        assert job.job is not None and job.job.next_due() == 11 * SECOND
    assert own.job is not None and own.job.wall_clock_due() == 11 * SECOND
    assert observed.job is not None and observed.job.wall_clock_due() is None
