"""Reactive mode (FLIP-159) and resource-requirement updates with Flink's validation (FLIP-291)."""

from __future__ import annotations

import pytest

from services.contracts import jobconfig as c
from services.contracts.events import VertexSpec
from services.scheduler.core.enums import DecisionKind, RejectionKind, StateName
from services.scheduler.core.jobgraph import default_max_parallelism
from tests.unit.scheduler.harness import SECOND, Scenario, vertex

S = StateName
REACTIVE = {c.SCHEDULER_MODE: "REACTIVE"}


@pytest.mark.flink("KeyGroupRangeAssignment.computeDefaultMaxParallelism")
@pytest.mark.parametrize(
    ("parallelism", "expected"),
    [(1, 128), (85, 128), (86, 256), (240, 512), (20_000, 32768), (30_000, 32768)],
)
def test_default_max_parallelism_is_flinks(parallelism: int, expected: int) -> None:
    assert default_max_parallelism(parallelism) == expected


@pytest.mark.flink(
    "AdaptiveSchedulerTest.testComputeVertexParallelismStoreForExecutionInReactiveMode",
    "AdaptiveSchedulerTest.testRequestDefaultResourceRequirementsInReactiveMode",
)
def test_reactive_mode_uses_every_slot_up_to_max_parallelism() -> None:
    job = Scenario(vertex("source", 2), vertex("sink", 2, max_parallelism=3), config=REACTIVE)
    job.at(1 * SECOND).tm("tm-1", slots=200)
    assert job.parallelism == {"source": 128, "sink": 3}
    assert job.job is not None
    assert [b.upper for b in job.job.info.bounds] == [128, 3]
    assert [b.lower for b in job.job.info.bounds] == [1, 1]


def test_reactive_scale_up_takes_the_sufficient_path() -> None:
    # desired = the sum of max parallelisms (128), practically never met:
    # cooldown, then stabilization
    job = Scenario(vertex("source", 2), config=REACTIVE)
    job.at(1 * SECOND).tm("tm-1").at(5 * SECOND).tm("tm-2")
    job.at(65 * SECOND)
    assert job.when_entered(S.RESTARTING) == 65 * SECOND
    assert job.parallelism == {"source": 2}


def test_reactive_scale_down_after_losing_a_taskmanager() -> None:
    job = Scenario(vertex("source", 2), config=REACTIVE, checkpoint_interval=10 * SECOND)
    job.at(1 * SECOND).tm("tm-1", slots=2).at(2 * SECOND).tm("tm-2", slots=2)
    job.at(62 * SECOND).checkpoint()  # stabilized since 2 s + 60 s: the checkpoint triggers
    assert job.parallelism == {"source": 4}
    job.at(100 * SECOND).lose("tm-2")
    job.at(102 * SECOND)
    assert job.state is S.EXECUTING and job.parallelism == {"source": 2}
    assert job.record()["triggerCause"] == "RECOVERABLE_FAILOVER"


@pytest.mark.flink(
    "AdaptiveSchedulerTest.testUpdateResourceRequirementsInReactiveModeIsNotSupported"
)
def test_requirement_updates_are_rejected_in_reactive_mode() -> None:
    job = Scenario(vertex("source", 2), config=REACTIVE)
    job.require(source=(1, 2))
    (rejection,) = job.rejections()
    assert rejection.kind is RejectionKind.INVALID_EVENT
    assert "reactive mode" in rejection.message


@pytest.mark.flink("JobResourceRequirements.validate")
@pytest.mark.parametrize(
    ("bounds", "message"),
    [
        ({"source": (0, 2), "sink": (1, 2)}, "bounds must be at least 1"),
        ({"source": (3, 2), "sink": (1, 2)}, "lower bound 3 is greater than upper bound 2"),
        ({"source": (1, 200), "sink": (1, 2)}, "upper bound 200 exceeds max parallelism 128"),
        (
            {"source": (1, 2), "sink": (1, 2), "ghost": (1, 1)},
            "vertex ghost is not part of the job",
        ),
        ({"source": (1, 2)}, "missing sink"),
        ({}, "lists no vertex"),
    ],
)
def test_invalid_requirements_are_rejected_with_a_reason(
    bounds: dict[str, tuple[int, int]], message: str
) -> None:
    job = Scenario(vertex("source", 2), vertex("sink", 2))
    job.require(**bounds)
    (rejection,) = job.rejections()
    assert message in rejection.message
    assert job.job is not None and [b.upper for b in job.job.info.bounds] == [2, 2]


@pytest.mark.flink("JobResourceRequirements.validate")
def test_minus_one_means_one_and_max_parallelism() -> None:
    job = Scenario(vertex("source", 2), vertex("sink", 2, max_parallelism=16))
    job.require(source=(-1, 4), sink=(2, -1))
    assert job.job is not None
    assert [(b.lower, b.upper) for b in job.job.info.bounds] == [(1, 4), (2, 16)]


@pytest.mark.flink("AdaptiveScheduler.updateJobResourceRequirements")
def test_an_update_that_changes_no_bound_is_a_no_op() -> None:
    job = Scenario(vertex("source", 2), vertex("sink", 2))
    before = len(job.records())
    job.require(source=(1, 2), sink=(1, 2))
    assert job.decisions(DecisionKind.REQUIREMENTS_UNCHANGED)
    assert len(job.records()) == before and not job.rejections()


@pytest.mark.flink(
    "AdaptiveSchedulerTest.testRequirementLowerBoundIncreaseBelowCurrentParallelismDoesNotTriggerRescale",
    "AdaptiveSchedulerTest.testRequestUpdatedResourceRequirements",
)
def test_raising_only_a_lower_bound_counts_as_a_change() -> None:
    job = Scenario(vertex("source", 4), config={c.SUBMISSION_STABILIZATION: "0 s"})
    job.at(1 * SECOND).tm("tm-1", slots=4).at(40 * SECOND).require(source=(2, 4))
    assert job.record()["triggerCause"] == "UPDATE_REQUIREMENT"
    assert job.state is S.EXECUTING and job.parallelism == {"source": 4}


@pytest.mark.flink("AdaptiveScheduler.updateJobResourceRequirements")
def test_a_requirement_update_in_waiting_for_resources_is_checked_at_once() -> None:
    job = Scenario(vertex("source", 4))
    job.at(1 * SECOND).tm("tm-1", slots=2).require(source=(1, 2))
    assert job.state is S.EXECUTING and job.parallelism == {"source": 2}


def test_requirement_and_graph_errors_at_submission_are_rejected() -> None:
    from services.contracts.events import JobSubmitted
    from services.scheduler.core import handle

    duplicate = (VertexSpec("a", "A", "g", "g", 1, None), VertexSpec("a", "A", "g", "g", 1, None))
    step = handle(None, JobSubmitted("j", 0, "x", duplicate, None, ()))
    assert step.job is None and "not unique" in step.effects[0].message  # type: ignore[union-attr]
    too_wide = (VertexSpec("a", "A", "g", "g", 300, 256),)
    step = handle(None, JobSubmitted("j", 0, "x", too_wide, None, ()))
    assert step.job is None and "exceeds max parallelism 256" in step.effects[0].message  # type: ignore[union-attr]
    step = handle(None, JobSubmitted("j", 0, "x", (), None, ()))
    assert step.job is None and "no vertices" in step.effects[0].message  # type: ignore[union-attr]
