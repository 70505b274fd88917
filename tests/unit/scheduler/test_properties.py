"""Properties of the fold over arbitrary event sequences (hypothesis).

- parallelism within the bounds and never above the slots;
- at most one rescale in progress; every rescale ends in exactly one terminal
  state, and nothing is written about it afterwards;
- revisions count 1, 2, 3, ... per rescale; the history stays bounded;
- the fold is deterministic, also when the state is stored and reloaded
  between events (as the service does);
- a state keeps no timer that can never run (of a state or phase it left).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.contracts import jobconfig as c
from services.contracts.events import (
    ConfigurationUpdated,
    Event,
    JobEventKind,
    JobLifecycle,
    JobSubmitted,
    Requirement,
    RequirementsUpdated,
    TaskManagerLost,
    TaskManagerRegistered,
    TimerFired,
    VertexSpec,
)
from services.scheduler.core import advance, handle
from services.scheduler.core.effects import Effect, RescaleUpdated
from services.scheduler.core.enums import DecisionKind, StateName
from services.scheduler.core.guards import runs
from services.scheduler.core.model import JobState
from services.scheduler.core.serde import dumps, loads
from services.scheduler.core.timeline import recent_ids
from services.scheduler.output import dumps as effect_json

JOB = "p"
LIFECYCLE = [
    JobEventKind.CHECKPOINT_COMPLETED,
    JobEventKind.CHECKPOINT_FAILED,
    JobEventKind.TASK_FAILURE,
    JobEventKind.GLOBAL_FAILURE,
    JobEventKind.SAVEPOINT_REQUESTED,
    JobEventKind.SAVEPOINT_FAILED,
    JobEventKind.SAVEPOINT_COMPLETED,
    JobEventKind.EXECUTION_GRAPH_CREATED,
    JobEventKind.CANCEL,
]


@st.composite
def jobs(draw: st.DrawFn) -> JobSubmitted:
    groups = draw(st.integers(1, 2))
    vertices = tuple(
        VertexSpec(
            f"v{i}",
            f"V{i}",
            f"g{draw(st.integers(0, groups - 1))}",
            "g",
            draw(st.integers(1, 6)),
            draw(st.sampled_from([None, 8])),
        )
        for i in range(draw(st.integers(1, 4)))
    )
    config = {
        c.COOLDOWN: draw(st.sampled_from(["0 s", "5 s", "30 s"])),
        c.EXECUTING_STABILIZATION: draw(st.sampled_from(["0 s", "10 s", "60 s"])),
        c.SUBMISSION_STABILIZATION: draw(st.sampled_from(["0 s", "10 s"])),
        c.HISTORY_SIZE: draw(st.sampled_from(["0", "3", "64"])),
        c.SCALING_POLICY: draw(
            st.sampled_from(["flink", "min-increase", "proportional", "double-halve"])
        ),
        c.RESTART_STRATEGY: "fixed-delay",
        c.FIXED_ATTEMPTS: "50",
        c.FIXED_DELAY: draw(st.sampled_from(["0 s", "2 s"])),
        c.SIMULATED_CANCEL_TIME: draw(st.sampled_from(["0 s", "1 s"])),
    }
    if draw(st.booleans()):
        config[c.SCHEDULER_MODE] = "REACTIVE"
    interval = draw(st.sampled_from([None, 10_000]))
    return JobSubmitted(JOB, 0, "prop", vertices, interval, tuple(sorted(config.items())))


@st.composite
def histories(draw: st.DrawFn) -> tuple[JobSubmitted, list[Event]]:
    submitted = draw(jobs())
    events: list[Event] = []
    now = 0
    for _ in range(draw(st.integers(1, 40))):
        now += draw(st.sampled_from([0, 500, 5_000, 20_000, 70_000]))
        events.append(draw(_event(now, submitted)))
    return submitted, events


def _event(now: int, submitted: JobSubmitted) -> st.SearchStrategy[Event]:
    tm = st.sampled_from(["tm-1", "tm-2", "tm-3", "tm-4", "tm-5"])
    bounds = st.tuples(st.integers(-1, 4), st.integers(-1, 9))
    return st.one_of(
        st.builds(
            TaskManagerRegistered, st.just(JOB), st.just(now), tm, st.integers(1, 4), st.none()
        ),
        st.builds(TaskManagerLost, st.just(JOB), st.just(now), tm, st.just("lost")),
        st.builds(
            lambda kind, ok: JobLifecycle(JOB, now, kind, recoverable=ok),
            st.sampled_from(LIFECYCLE),
            st.booleans(),
        ),
        st.builds(
            lambda bs: RequirementsUpdated(
                JOB,
                now,
                tuple(
                    Requirement(v.id, lo, hi)
                    for v, (lo, hi) in zip(submitted.vertices, bs, strict=False)
                ),
            ),
            st.lists(bounds, min_size=len(submitted.vertices), max_size=len(submitted.vertices)),
        ),
        st.builds(lambda: ConfigurationUpdated(JOB, now, ((c.COOLDOWN, "1 s"),))),
        st.builds(lambda: TimerFired(JOB, now)),
    )


@dataclass
class Run:
    job: JobState | None
    effects: list[Effect]


def fold(submitted: JobSubmitted, events: list[Event], roundtrip: bool = False) -> Run:
    step = handle(None, submitted)
    job, effects = step.job, list(step.effects)
    for event in [*events, None]:
        assert job is not None
        step = handle(job, event) if event is not None else advance(job, job.now + 3_600_000)
        effects.extend(step.effects)
        if step.job is None:  # only a finished job's release lets it go
            assert job.state.name is StateName.FINISHED and event is None
            assert any(getattr(e, "kind", None) is DecisionKind.JOB_RELEASED for e in step.effects)
            break
        job = loads(dumps(step.job)) if roundtrip else step.job
        _check_state(job)
    return Run(job, effects)


def _check_state(job: JobState | None) -> None:
    assert job is not None
    assert len(recent_ids(job.timeline, job.job_id)) <= job.timeline.size
    stale = [timer for timer in job.timers if not runs(job.state, timer)]
    assert not stale, f"timers of a state or phase already left are kept: {stale}"


def _records(effects: list[Effect]) -> list[dict[str, Any]]:
    return [e.record for e in effects if isinstance(e, RescaleUpdated)]


PROFILE = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROFILE
@given(histories())
def test_parallelism_stays_within_bounds_and_slots(
    history: tuple[JobSubmitted, list[Event]],
) -> None:
    run = fold(*history)
    for record in _records(run.effects):
        if record["terminalState"] != "COMPLETED":
            continue
        for vertex in record["vertices"]:
            assert (
                vertex["sufficientParallelism"]
                <= vertex["postRescaleParallelism"]
                <= vertex["desiredParallelism"]
            )
        used = sum(group["postRescaleSlots"] for group in record["slots"])
        assert used <= record["availableSlots"]


@pytest.mark.flink(
    "DefaultRescaleTimelineTest.testUpdateRescale",
    "DefaultRescaleTimelineTest.testIsIdling",
    "RescaleTest.testAddSchedulerState",
)
@PROFILE
@given(histories())
def test_one_rescale_at_a_time_each_ending_once(history: tuple[JobSubmitted, list[Event]]) -> None:
    run = fold(*history)
    open_: set[str] = set()
    ended: set[str] = set()
    revision: dict[str, int] = {}
    for record in _records(run.effects):
        uuid = record["rescaleUuid"]
        assert uuid not in ended, "a record after the terminal one"
        assert record["revision"] == revision.get(uuid, 0) + 1
        revision[uuid] = record["revision"]
        assert record["terminatedReason"] != "JOB_FAILOVER_RESTARTING"
        if record["terminalState"] is None:
            open_.add(uuid)
        else:
            open_.discard(uuid)
            ended.add(uuid)
            assert record["endTimestampInMillis"] is not None
        assert len(open_) <= 1


@PROFILE
@given(histories())
def test_the_fold_is_deterministic_and_survives_storing_the_state(
    history: tuple[JobSubmitted, list[Event]],
) -> None:
    first = [effect_json(e) for e in fold(*history).effects]
    again = [effect_json(e) for e in fold(*history).effects]
    stored = [effect_json(e) for e in fold(*history, roundtrip=True).effects]
    assert first == again == stored
