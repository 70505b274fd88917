"""Slot allocation (reference §4, checked against Flink's SlotSharingSlotAllocatorTest cases)
and the scaling policies of seed 004."""

from __future__ import annotations

import pytest

from services.contracts.jobconfig import ScalingPolicy
from services.scheduler.core.allocator import (
    assign,
    desired_slots,
    determine_parallelism,
    slot_ids,
)
from services.scheduler.core.model import Bounds, JobInformation, Slot, Vertex
from services.scheduler.core.policy import adjust


def job(*vertices: tuple[str, str, int, int]) -> JobInformation:
    """(vertex id, slot-sharing group, lower, upper) per vertex."""
    return JobInformation(
        tuple(Vertex(v, v, g, g, 128) for v, g, _, _ in vertices),
        tuple(Bounds(lo, hi) for _, _, lo, hi in vertices),
    )


TWO_GROUPS = job(("v1", "ssg1", 1, 4), ("v2", "ssg1", 1, 2), ("v3", "ssg2", 1, 3))


@pytest.mark.flink(
    "SlotSharingSlotAllocatorTest.testDetermineParallelismWithMinimumSlots",
    "SlotSharingSlotAllocatorTest.testDetermineParallelismWithManySlots",
    "SlotSharingSlotAllocatorTest.testDetermineParallelismWithVariedParallelism",
    "SlotSharingSlotAllocatorTest.testDetermineParallelismUnsuccessfulWithLessSlotsThanSlotSharingGroups",
    "SlotSharingSlotAllocatorTest.testDetermineParallelismWithPartiallyEqualLowerUpperBound",
    "SlotSharingSlotAllocatorTest.testDetermineParallelismWithLowerBoundsInsufficientSlots",
    "SlotSharingSlotAllocatorTest.testDetermineParallelismWithLowerBoundsInsufficientSlotsForPartialVertices",
    "SlotSharingSlotAllocatorTest.testDetermineParallelismWithAllEqualLowerUpperBoundFreSlots",
    "SlotSharingSlotAllocatorTest.testDetermineParallelismWithAllEqualLowerUpperBoundManySlots",
)
@pytest.mark.parametrize(
    ("info", "slots", "expected"),
    [
        (TWO_GROUPS, 2, (1, 1, 1)),
        (TWO_GROUPS, 50, (4, 2, 3)),
        (TWO_GROUPS, 1, None),
        (job(("v1", "a", 1, 8), ("v2", "b", 10, 10)), 13, (3, 10)),
        (job(("v1", "a", 4, 4), ("v2", "b", 10, 10)), 3, None),
        (job(("v1", "a", 2, 2), ("v2", "a", 8, 8)), 5, None),
        (job(("v1", "a", 4, 10), ("v2", "a", 4, 10)), 8, (8, 8)),
        (
            job(("v1", "a", 4, 10), ("v2", "b", 4, 10)),
            8,
            (4, 4),
        ),  # ...AllEqualLowerUpperBoundFreSlots
        (
            job(("v11", "g1", 1, 4), ("v12", "g1", 1, 1), ("v2", "g2", 1, 2)),
            6,
            (4, 1, 2),
        ),  # ...Varied
        (job(("v1", "a", 4, 4), ("v2", "b", 10, 10)), 26, (4, 10)),
        # equal ranges: Flink's order is HashMap order; scalefold's is by group id
        (job(("v1", "a", 1, 10), ("v2", "b", 1, 10)), 5, (2, 3)),
        (job(("v1", "b", 1, 10), ("v2", "a", 1, 10)), 5, (3, 2)),
    ],
)
def test_determine_parallelism(
    info: JobInformation, slots: int, expected: tuple[int, ...] | None
) -> None:
    plan = determine_parallelism(info, slots)
    assert (plan.parallelism if plan else None) == expected


@pytest.mark.flink("SlotSharingGroupMetaInfo.from")
def test_v1_and_v2_in_one_group_share_slots() -> None:
    plan = determine_parallelism(job(("v1", "a", 4, 10), ("v2", "a", 4, 10)), 8)
    assert plan is not None and plan.group_slots == (("a", 8),)


@pytest.mark.flink("SlotSharingSlotAllocatorTest.testCalculateRequiredSlots")
def test_desired_slots_sum_the_groups_max_upper_bound() -> None:
    assert desired_slots(TWO_GROUPS) == 4 + 3


def slots_of(*taskmanagers: tuple[str, int]) -> list[Slot]:
    return [Slot(f"{tm}#{i}", tm, i, None) for tm, n in taskmanagers for i in range(n)]


@pytest.mark.flink("DefaultSlotAssigner.assignSlots")
def test_prefer_minimal_taskmanagers_fills_the_fullest_taskmanagers_first() -> None:
    plan = determine_parallelism(job(("v", "a", 1, 3)), 3)
    assert plan is not None
    pool = slots_of(("tm-a", 1), ("tm-b", 4), ("tm-c", 2))
    minimal = assign(plan, pool, prefer_minimal_taskmanagers=True)
    assert minimal is not None and slot_ids(minimal) == {"tm-b#0", "tm-b#1", "tm-b#2"}
    spread = assign(plan, pool, prefer_minimal_taskmanagers=False)
    assert spread is not None and slot_ids(spread) == {"tm-a#0", "tm-b#0", "tm-b#1"}


@pytest.mark.flink("SlotSharingSlotAllocator.determineParallelismAndCalculateAssignment")
def test_assignment_fails_without_enough_free_slots() -> None:
    plan = determine_parallelism(job(("v", "a", 1, 3)), 3)
    assert plan is not None and assign(plan, slots_of(("tm", 2)), True) is None


INFO = job(("v1", "a", 1, 8), ("v2", "b", 1, 4))


@pytest.mark.parametrize(
    ("policy", "current", "candidate", "expected"),
    [
        (ScalingPolicy.FLINK, (2, 2), (3, 2), (3, 2)),
        (ScalingPolicy.MIN_INCREASE, (2, 2), (3, 2), (2, 2)),  # +1 < min increase 2
        (ScalingPolicy.MIN_INCREASE, (2, 2), (4, 2), (4, 2)),
        (ScalingPolicy.MIN_INCREASE, (4, 2), (3, 2), (3, 2)),  # scale-downs always pass
        (ScalingPolicy.DOUBLE_HALVE, (2, 2), (7, 3), (4, 2)),
        (ScalingPolicy.DOUBLE_HALVE, (4, 4), (3, 1), (2, 1)),
        (ScalingPolicy.PROPORTIONAL, (2, 2), (8, 2), (4, 2)),  # v2 at 2/4 caps everyone at half
        (ScalingPolicy.PROPORTIONAL, None, (8, 4), (8, 4)),
        (ScalingPolicy.DOUBLE_HALVE, None, (7, 3), (7, 3)),
    ],
)
def test_policies(
    policy: ScalingPolicy,
    current: tuple[int, ...] | None,
    candidate: tuple[int, ...],
    expected: tuple[int, ...],
) -> None:
    assert adjust(policy, INFO, current, candidate, min_increase=2) == expected


def test_a_policy_that_declines_keeps_the_job_running_as_it_is() -> None:
    from services.contracts import jobconfig as c
    from services.scheduler.core.model import StateName
    from tests.unit.scheduler.harness import SECOND, Scenario, vertex

    config = {
        c.SCALING_POLICY: "min-increase",
        c.MIN_PARALLELISM_INCREASE: "2",
        c.SUBMISSION_STABILIZATION: "0 s",
    }
    job = Scenario(vertex("source", 8), config=config)
    job.at(1 * SECOND).tm("tm-1", slots=2).at(40 * SECOND).tm("tm-2")
    job.at(200 * SECOND)
    assert job.state is StateName.EXECUTING and job.parallelism == {"source": 2}
    job.tm("tm-3")
    job.at(300 * SECOND)
    assert job.parallelism == {"source": 4}


# Flink's own group ids, as a real Flink 2.3.0 JobManager logged them for the sample job
# (Source and Bucket in `default`, Sum in `sums`, each 1..2), with the group that Flink's
# rescale record gave the third of 3 slots: /tmp JobManager logs of 2026-11-29, see
# docs/flink-conformance.md "Against a real Flink 2.3.0".
SEEN_SPARE = [
    ("376f1d697f3990a23642bc5ad598c26a", "fbb29c1f502f6627ef5699872cb0cfe0", "default"),
    ("9bc65f894fd1d3048583328d4b50ac20", "5a977a7001f117ac9bbd675c77aff042", "default"),
    ("78b57a26ae77145924dec2a0c0bdc7d2", "4c8bf95090495caff05de901e6da2516", "default"),
]


def sample_job(default: str, sums: str) -> JobInformation:
    return JobInformation(
        (
            Vertex("source", "Source: Numbers", default, "default", 128),
            Vertex("bucket", "Bucket", default, "default", 2),
            Vertex("sum", "Sum -> Discard: Writer", sums, "sums", 2),
        ),
        (Bounds(1, 1), Bounds(1, 2), Bounds(1, 2)),
    )


@pytest.mark.flink("SlotSharingSlotAllocator.determineSlotsPerSharingGroup")
@pytest.mark.parametrize(("default", "sums", "spare"), SEEN_SPARE)
def test_a_spare_slot_goes_where_flinks_hashmap_order_puts_it(
    default: str, sums: str, spare: str
) -> None:
    plan = determine_parallelism(sample_job(default, sums), 3)
    assert plan is not None
    assert {dict(plan.group_slots)[default]: "default", dict(plan.group_slots)[sums]: "sums"}[
        2
    ] == spare
    assert plan.parallelism == ((1, 2, 1) if spare == "default" else (1, 1, 2))


@pytest.mark.flink("SlotSharingSlotAllocator.determineSlotsPerSharingGroup")
def test_the_later_bucket_gets_the_spare_whatever_the_ids_order() -> None:
    # The first case's ids swapped between the groups: now `sums` sits in the later
    # bucket (6, against 5), so it gets the spare, although its id sorts first.
    plan = determine_parallelism(
        sample_job("fbb29c1f502f6627ef5699872cb0cfe0", "376f1d697f3990a23642bc5ad598c26a"), 3
    )
    assert plan is not None and plan.parallelism == (1, 1, 2)
