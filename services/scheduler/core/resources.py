"""Sufficient and desired resources, as WaitingForResources and Executing judge them.

- WaitingForResources: sufficient = every slot-sharing group can get its
  minimum from all slots; desired = slots >= the sum of the groups' max upper
  bounds.
- Executing: both are ANDed with "the parallelism changes": the parallelism
  computed from all slots of the pool (used and free), after the scaling
  policy, differs from the running one.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from services.scheduler.core.allocator import desired_slots, determine_parallelism, minimal_slots
from services.scheduler.core.fold import Fold
from services.scheduler.core.model import JobInformation
from services.scheduler.core.policy import adjust
from services.scheduler.core.stm import Assessment


def candidate(fold: Fold, current: Sequence[int] | None) -> tuple[int, ...] | None:
    """The parallelism all slots allow, after the scaling policy; None if insufficient."""
    plan = determine_parallelism(fold.job.info, fold.slot_count)
    if plan is None:
        return None
    config = fold.config
    return adjust(
        config.policy, fold.job.info, current, plan.parallelism, config.min_parallelism_increase
    )


@lru_cache(maxsize=4096)
def describe(info: JobInformation, parallelism: tuple[int, ...]) -> str:
    """`source=4, sink=2`; cached, as a rescale describes the same few parallelisms in its
    assessments, requests and transitions (hashing the job information costs less)."""
    return ", ".join([f"{v.id}={p}" for v, p in zip(info.vertices, parallelism, strict=True)])


def insufficient(fold: Fold) -> str:
    needed = minimal_slots(fold.job.info)
    return f"insufficient resources: {needed} slots needed, {fold.slot_count} available"


def waiting_assessment(fold: Fold) -> Assessment:
    info, slots = fold.job.info, fold.slot_count
    wanted = desired_slots(info)
    if determine_parallelism(info, slots) is None:
        return Assessment(False, False, insufficient(fold))
    if slots >= wanted:
        return Assessment(True, True, f"desired resources available ({slots} of {wanted} slots)")
    return Assessment(True, False, f"sufficient resources ({slots} of {wanted} desired slots)")


def executing_assessment(fold: Fold, current: tuple[int, ...]) -> Assessment:
    info, slots = fold.job.info, fold.slot_count
    target = candidate(fold, current)
    if target is None:
        return Assessment(False, False, insufficient(fold))
    if target == current:
        return Assessment(
            False, False, f"parallelism unchanged at {describe(info, current)} with {slots} slots"
        )
    wanted = desired_slots(info)
    desired = slots >= wanted
    grade = "desired" if desired else "sufficient"
    change = f"{describe(info, current)} -> {describe(info, target)}"
    return Assessment(
        True, desired, f"{grade} resources for {change} ({slots} slots, {wanted} desired)"
    )


def awaiting_assessment(fold: Fold, awaited: tuple[int, ...]) -> Assessment:
    """FLINK-40379 (proposed): after a rescale's restart, only the parallelism the rescale
    was for (or the desired resources) will do, until the rescale timeout passes."""
    info, slots = fold.job.info, fold.slot_count
    previous = fold.state.previous_graph
    target = candidate(fold, previous.parallelism if previous is not None else None)
    wanted = describe(info, awaited)
    if target == awaited or slots >= desired_slots(info):
        return Assessment(True, True, f"the pre-restart parallelism {wanted} is available again")
    available = insufficient(fold) if target is None else describe(info, target)
    return Assessment(
        False, False, f"waiting for the pre-restart parallelism {wanted} (now: {available})"
    )
