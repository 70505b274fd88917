"""What the adaptive scheduler does with a parallelism decision, foreseen by the core's
fold of the job's inputs (services/scheduler/foresight.py)."""

from __future__ import annotations

import pytest

from services.contracts.events import (
    Event,
    JobSubmitted,
    Requirement,
    RequirementsUpdated,
    TaskManagerRegistered,
    VertexSpec,
)
from services.contracts.foresight import ForecastUnknownError
from services.contracts.jobconfig import SUBMISSION_STABILIZATION
from services.scheduler.foresight import foresee, requirements

JOB = "local.0123"
SUM = VertexSpec("sum", "Sum", "g", "g", 2, 8)
NOW = 120_000


def running(taskmanagers: int) -> list[Event]:
    """The job (Sum at 2 of at most 8) on `taskmanagers` TaskManagers of one slot each."""
    submitted = JobSubmitted(JOB, 0, "job", (SUM,), None, ((SUBMISSION_STABILIZATION, "1s"),))
    return [
        submitted,
        *(TaskManagerRegistered(JOB, 100 + n, f"tm-{n}", 1, None) for n in range(taskmanagers)),
    ]


def test_a_raise_within_the_slots_there_are_is_an_update_requirement_rescale_to_it() -> None:
    forecast = foresee(JOB, running(4), {"sum": 4}, NOW)
    assert forecast.rescales and forecast.trigger_cause == "UPDATE_REQUIREMENT"
    assert forecast.terminal_state == "COMPLETED"
    assert forecast.reached == {"sum": 4}
    assert "UPDATE_REQUIREMENT rescale" in forecast.described
    assert forecast.requirements == {"sum": (1, 2)}  # what the change rests on


def test_a_raise_beyond_the_slots_reaches_what_they_allow_and_says_so() -> None:
    forecast = foresee(JOB, running(3), {"sum": 6}, NOW)
    assert forecast.reached == {"sum": 3}
    assert "the slots there are reach only sum 3 of 6" in forecast.described


def test_a_target_the_job_already_runs_at_starts_no_rescale() -> None:
    forecast = foresee(JOB, running(4), {"sum": 2}, NOW)
    assert not forecast.rescales and forecast.reached == {}
    assert forecast.described.startswith("no rescale starts within")


def test_a_lower_target_rescales_down() -> None:
    forecast = foresee(JOB, running(4), {"sum": 1}, NOW)
    assert forecast.reached == {"sum": 1}


def test_the_change_keeps_each_vertex_s_other_bound_as_the_actuator_does() -> None:
    raised = [*running(2), RequirementsUpdated(JOB, 50_000, (Requirement("sum", 2, 3),))]
    assert requirements(raised, {"sum": 5}) == (Requirement("sum", 2, 5),)
    assert requirements(raised, {"sum": 1}) == (Requirement("sum", 1, 1),)
    assert requirements(running(1), {}) == (Requirement("sum", 1, 2),)


def test_an_unknown_vertex_or_a_job_without_inputs_is_unknown_not_guessed() -> None:
    with pytest.raises(ForecastUnknownError, match="no vertex nope"):
        foresee(JOB, running(2), {"nope": 2}, NOW)
    with pytest.raises(ForecastUnknownError, match="no input"):
        foresee(JOB, [], {"sum": 2}, NOW)
